"""The torch op `kb14::div_sum_scale`: its Python entry point, fake kernel, CPU kernel, autograd.

The schema is defined in kernels/schema.py. CUDA tensors: the kernel and the op's
C++ autograd come from the `tail_cuda` module, built on the first CUDA call. CPU
tensors: the kernel of kernels/tail_cpu.py and the autograd formula below. This
module also holds the plain reference the kernels must match bit for bit.
"""

from __future__ import annotations

import numbers

import torch

from kernels import schema, tail_cpu

OP = torch.ops.kb14.div_sum_scale.default
OP_NAME = "kb14::div_sum_scale"
FLOAT_DTYPES = tail_cpu.FLOAT_DTYPES


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


schema.IMPL.impl("div_sum_scale", tail_cpu.div_sum_scale_cpu, "CPU")
schema._first_use_kernel("div_sum_scale", tail_cpu.check_inputs)


# ---- autograd ------------------------------------------------------------------------
# The backward is the reference's chain rule, op for op (MulBackward, SumBackward,
# DivBackward), so the gradient has the reference's bits. Registered at the Autograd
# key: it serves CPU tensors, and a CUDA call made before the CUDA module is loaded.
# The CUDA module then registers the same formula in C++ at AutogradCUDA, which takes
# precedence, so that a CUDA call goes from the Python entry point to the kernel
# without any further Python (as before this split: the same C++ path).


def _setup_context(ctx, inputs, output):
    y, divisor, scale = inputs
    ctx.sizes, ctx.divisor, ctx.scale = y.shape, divisor, scale


def _backward(ctx, grad):
    return torch.div(torch.mul(grad, ctx.scale).expand(ctx.sizes), ctx.divisor), None, None


torch.library.register_autograd(OP_NAME, _backward, setup_context=_setup_context, lib=schema.IMPL)
