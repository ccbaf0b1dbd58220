import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU, then a scale."""

    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return torch.relu(x) * self.alpha


batch_size = 16
dim = 300
alpha = 2.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha]
