"""A stand-in for KernelBench level 1 problem 19 (ReLU), written here in KernelBench's format
with the current release's sizes: a (4096, 393216) fp32 input, 6 GiB, so that the GPU
evidence exercises the checker's memory plan. Not part of batch runs of tests/problems."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
