import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Drops the bias (reason: mismatch)."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.relu(F.linear(x, self.linear.weight)) * self.scale
