import torch.nn as nn


class ModelNew(nn.Module):
    """A mean where a sum is due (reason: mismatch)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.mean(self.dim)
