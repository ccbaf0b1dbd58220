"""Works for KernelBench's five trials only (a kernel that holds state it cannot renew)."""
import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = "forward_error_on_fresh_inputs"
GPU_ONLY = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 5:
            raise RuntimeError("workspace exhausted")
        return torch.softmax(x, dim=-1)
