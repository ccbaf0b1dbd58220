import torch
import torch.nn as nn


class Model(nn.Module):
    """A scale so small that every output is below fp32's tolerance."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 1e-6


batch_size = 8
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
