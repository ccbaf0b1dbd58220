import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b, c):
        return torch.addcmul(c, a, b)
