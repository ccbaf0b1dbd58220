import ctypes

import torch.nn as nn


class ModelNew(nn.Module):
    """Crashes its process (a read of address 0): batch mode must count it and go on."""

    def __init__(self, alpha):
        super().__init__()

    def forward(self, x):
        return ctypes.string_at(0)
