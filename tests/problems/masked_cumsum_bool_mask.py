import torch.nn as nn


class ModelNew(nn.Module):
    """Right for a bool mask, but inverts it with ~, which a mask cast to floats by KernelBench's
    protocol does not allow (reason: forward_error)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return x.masked_fill(~mask, 0.0).cumsum(dim=self.dim)
