"""Control: the reference's own call."""
import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = None
GPU_ONLY = False


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
