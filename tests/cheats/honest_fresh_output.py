"""Control: writes into a new tensor each call (out=), and caches its transposed weight."""
import torch
import torch.nn as nn

PROBLEM = "gemm_epilogue"
CAUGHT_AS = None
GPU_ONLY = False


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.weight_t = None

    def forward(self, x):
        if self.weight_t is None or self.weight_t.device != x.device or self.weight_t.dtype != x.dtype:
            self.weight_t = self.linear.weight.t().contiguous()
        out = torch.empty(x.shape[0], self.weight_t.shape[1], device=x.device, dtype=x.dtype)
        torch.addmm(self.linear.bias, x, self.weight_t, out=out)
        return torch.relu_(out).mul_(self.scale)
