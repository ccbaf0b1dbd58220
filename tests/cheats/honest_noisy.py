"""Control: not bit-deterministic (as atomics make a reduction), well within the tolerance:
passes, with a warning."""
import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = None
WARNS = "not bit-deterministic"
GPU_ONLY = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.noise = torch.Generator().manual_seed(3)

    def forward(self, x):
        out = torch.softmax(x, dim=-1)
        return out * (1 + 1e-6 * torch.rand(out.shape, generator=self.noise).to(out.device, out.dtype))
