import torch.nn as nn


class ModelNew(nn.Module):
    """Forgets the ReLU: negative inputs come out negative (reason: mismatch)."""

    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return x * self.alpha
