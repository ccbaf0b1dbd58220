"""Returns a subclass that would compute its values only when they are read (here the values
are right, but a timed call did no work): any subclass is refused."""
import torch
import torch.nn as nn

PROBLEM = "gemm_epilogue"
CAUGHT_AS = "tensor_subclass"
GPU_ONLY = False


class Deferred(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.Tensor._make_subclass(Deferred, torch.relu(self.linear(x)) * self.scale)
