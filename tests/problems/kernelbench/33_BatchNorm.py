"""A stand-in for KernelBench level 1 problem 33 (BatchNorm2d), written here in KernelBench's
format with the current release's sizes: (64, 64, 512, 512) fp32, 4 GiB. The model stays in
training mode, as KernelBench leaves it: batch statistics, running buffers updated each call."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


batch_size = 64
features = 64
dim1 = 512
dim2 = 512


def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
