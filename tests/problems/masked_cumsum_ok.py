import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The kept elements selected with where, for a bool mask or its 1.0 / 0.0 cast alike."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.where(mask != 0, x, torch.zeros_like(x)).cumsum(dim=self.dim)
