"""Returns the same workspace tensor (a plain attribute, not a buffer) from every call."""
import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = "output_aliasing"
GPU_ONLY = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.workspace = None

    def forward(self, x):
        out = torch.softmax(x, dim=-1)
        if self.workspace is None or self.workspace.shape != out.shape or self.workspace.device != out.device:
            self.workspace = torch.empty_like(out)
        return self.workspace.copy_(out)
