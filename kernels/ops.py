"""The torch op `kb14::div_sum_scale`: its Python entry point and fake kernel.

The kernels themselves (CPU and CUDA) and the op's autograd are registered from C++
by the sources in this folder; this module adds the fake kernel `torch.compile`
needs, and the plain reference the kernels must match bit for bit.
"""

from __future__ import annotations

import numbers

import torch

OP = torch.ops.kb14.div_sum_scale.default
OP_NAME = "kb14::div_sum_scale"
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def div_sum_scale_reference(y: torch.Tensor, divisor: float, scale: float) -> torch.Tensor:
    """The tail of KernelBench L2/14, written as the reference writes it."""
    return torch.sum(y / divisor, dim=1, keepdim=True) * scale


def as_number(value, what: str) -> float:
    """A Python int or float argument as float; `what` names it ("op: argument")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{what} must be a Python int or float, got {type(value).__name__}"
            " (a tensor scalar would change the reference's arithmetic on CUDA)"
        )
    return float(value)


def div_sum_scale(y: torch.Tensor, divisor: float = 2.0, scale: float = 1.0) -> torch.Tensor:
    """`torch.sum(y / divisor, dim=1, keepdim=True) * scale`, fused into one pass.

    Returns the same shape, dtype, device and bits as that expression for a 2-D
    floating-point `y` (float32, float64, float16, bfloat16), on CPU and CUDA. A
    wrong rank raises ValueError, a wrong dtype TypeError (from the op itself).
    """
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"div_sum_scale: y must be a torch.Tensor, got {type(y).__name__}")
    if type(divisor) is not float:
        divisor = as_number(divisor, "div_sum_scale: divisor")
    if type(scale) is not float:
        scale = as_number(scale, "div_sum_scale: scale")
    return OP(y, divisor, scale)


@torch.library.register_fake(OP_NAME)
def _fake(y, divisor, scale):
    torch._check(y.dim() == 2, lambda: f"div_sum_scale: y must be 2-D, got {y.dim()}-D")
    torch._check(
        y.dtype in FLOAT_DTYPES,
        lambda: f"div_sum_scale: y must be a floating dtype, got {y.dtype}",
    )
    return y.new_empty((y.shape[0], 1))


# The autograd formula is registered from C++ (fused_reduce_cpu.cpp): a Python autograd
# kernel would cost every call a few microseconds of Python.
