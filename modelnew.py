"""ModelNew: a drop-in replacement for reference.Model (KernelBench level 2, problem 14).

The GEMM stays `torch.matmul(x, self.weight.T)`, exactly as in the reference; the
divide, the row sum and the scale run as one fused kernel, `kernels.div_sum_scale`,
which reproduces PyTorch's summation order and so returns the reference's bits.
"""

import torch
import torch.nn as nn

import kernels

DIVISOR = 2


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        # Same RNG call, same order, same name as the reference: a seed gives the same weight.
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.weight.shape[1]:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"ModelNew: x must be a 2-D tensor (batch, {self.weight.shape[1]}), got {shape}"
            )
        if x.device != self.weight.device or x.dtype != self.weight.dtype:
            raise ValueError(
                f"ModelNew: x is {x.dtype} on {x.device} but the weight is "
                f"{self.weight.dtype} on {self.weight.device}; move one of them (model.to(...))"
            )
        y = torch.matmul(x, self.weight.T)
        return kernels.div_sum_scale(y, DIVISOR, self.scaling_factor)
