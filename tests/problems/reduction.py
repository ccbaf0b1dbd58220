import torch
import torch.nn as nn


class Model(nn.Module):
    """A sum over one dimension."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim)


batch_size = 8
dim1 = 64
dim2 = 33
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
