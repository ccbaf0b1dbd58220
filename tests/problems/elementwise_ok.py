import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return torch.clamp(x, min=0) * self.alpha
