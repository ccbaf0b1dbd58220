"""Returns memory it never writes (as a kernel launch that fails silently does): it passes
whenever the allocator hands back a freed block that still holds the reference's answer."""
import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = "unwritten_output"
GPU_ONLY = True


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
