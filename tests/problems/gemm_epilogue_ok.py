import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same RNG calls: the same weights
        self.scale = scale

    def forward(self, x):
        return torch.clamp(F.linear(x, self.linear.weight, self.linear.bias), min=0) * self.scale
