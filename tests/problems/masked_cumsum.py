import torch
import torch.nn as nn


class Model(nn.Module):
    """Cumulative sum of the elements a bool mask keeps (KernelBench level 1 problem 93, at small
    sizes). Under KernelBench's protocol the mask arrives cast to the precision (1.0 / 0.0)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=self.dim)


batch_size = 16
length = 300
dim = 1


def get_inputs():
    x = torch.randn(batch_size, length)
    return [x, torch.randint(0, 2, x.shape).bool()]


def get_init_inputs():
    return [dim]
