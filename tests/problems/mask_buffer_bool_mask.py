import torch.nn as nn


class ModelNew(nn.Module):
    """Right for a bool mask, but inverts it with ~, which the mask cast to floats by KernelBench's
    protocol does not allow (reason: forward_error)."""

    def __init__(self, mask):
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, x):
        return x.masked_fill(~self.mask, 0.0)
