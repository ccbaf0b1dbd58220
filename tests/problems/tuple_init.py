import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Pooling with tuple-valued and string-valued constructor arguments."""

    def __init__(self, kernel_size, stride, mode, scale):
        super().__init__()
        self.kernel_size, self.stride, self.mode, self.scale = kernel_size, stride, mode, scale

    def forward(self, x):
        pool = F.max_pool2d if self.mode == "max" else F.avg_pool2d
        return pool(x, self.kernel_size, self.stride) * self.scale


batch_size = 2
channels = 3
height, width = 17, 20
kernel_size = (2, 3)
stride = (1, 2)
mode = "max"
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, mode, scale]
