import torch
import torch.nn as nn


class Model(nn.Module):
    """Three inputs: a * b + c."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b, c):
        return a * b + c


shape = (64, 50)


def get_inputs():
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
