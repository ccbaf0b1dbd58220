import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The kept elements selected with where, for a bool mask or its 1.0 / 0.0 cast alike."""

    def __init__(self, mask):
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, x):
        return torch.where(self.mask != 0, x, torch.zeros_like(x))
