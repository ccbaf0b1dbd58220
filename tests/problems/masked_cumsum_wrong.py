import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Sums the elements the mask drops (reason: mismatch)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.where(mask != 0, torch.zeros_like(x), x).cumsum(dim=self.dim)
