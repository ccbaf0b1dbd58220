import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, kernel_size, stride, mode, scale):
        super().__init__()
        if mode != "max":
            raise ValueError(f"only max pooling, got {mode!r}")
        self.pool = nn.MaxPool2d(kernel_size, stride)
        self.scale = scale

    def forward(self, x):
        return self.pool(x) * self.scale
