import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """No padding: the output loses a border (reason: wrong_shape)."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x):
        return torch.tanh(self.conv(x) + self.bias)
