"""Right for its first ten calls (KernelBench's five trials and --strict's five fresh calls),
then off by more than the tolerance, differently each call (a race that shows late)."""
import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = "nondeterministic"
GPU_ONLY = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.noise = torch.Generator().manual_seed(1)

    def forward(self, x):
        self.calls += 1
        out = torch.softmax(x, dim=-1)
        if self.calls > 10:
            out = out + 1e-2 * torch.rand(out.shape, generator=self.noise).to(out.device, out.dtype)
        return out
