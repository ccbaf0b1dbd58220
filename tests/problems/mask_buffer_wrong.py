import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Keeps the elements the mask drops (reason: mismatch)."""

    def __init__(self, mask):
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, x):
        return torch.where(self.mask != 0, torch.zeros_like(x), x)
