"""Ten times too small, for a problem whose outputs are all below the tolerance: it passes,
and --strict warns that the check cannot tell (an all-zeros output would pass too)."""
import torch.nn as nn

PROBLEM = "tiny_outputs"
CAUGHT_AS = None
WARNS = "an all-zeros output"
GPU_ONLY = False


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 1e-7
