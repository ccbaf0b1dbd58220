"""Writes every answer into one registered buffer and returns that buffer: the caller's
earlier outputs change under it."""
import torch
import torch.nn as nn

PROBLEM = "gemm_epilogue"
CAUGHT_AS = "output_aliasing"
GPU_ONLY = False


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.register_buffer("result", torch.empty(0))

    def forward(self, x):
        out = torch.relu(self.linear(x)) * self.scale
        if self.result.shape != out.shape:
            self.result = torch.empty_like(out)
        return self.result.copy_(out)
