"""The torch op `kb14::div_sum_scale`: its Python entry point, fake kernel, CPU kernel, autograd.

The schema is defined in kernels/schema.py. CUDA tensors: the kernel comes from the
`tail_cuda` module, built on the first CUDA call, and the op's C++ autograd from
`tail_cuda_autograd`, loaded after it. CPU tensors: the kernel of kernels/tail_cpu.py
and the autograd formula below. This module also holds the plain reference the
kernels must match bit for bit.
"""

from __future__ import annotations

import numbers

import torch

from kernels import jit, schema, tail_cpu

OP = torch.ops.kb14.div_sum_scale.default
OP_NAME = "kb14::div_sum_scale"
FLOAT_DTYPES = tail_cpu.FLOAT_DTYPES


def div_sum_scale_reference(y: torch.Tensor, divisor: float, scale: float) -> torch.Tensor:
    """The tail of KernelBench L2/14, written as the reference writes it."""
    return torch.sum(y / divisor, dim=1, keepdim=True) * scale


def as_number(value, what: str) -> float:
    """A Python int or float argument as float; `what` names it ("op: argument")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        why = " (a tensor scalar would change the reference's arithmetic on CUDA)" if isinstance(value, torch.Tensor) else ""
        raise TypeError(f"{what} must be a Python int or float, got {type(value).__name__}{why}")
    return float(value)


def div_sum_scale(y: torch.Tensor, divisor: float = 2.0, scale: float = 1.0, pdl: bool = True) -> torch.Tensor:
    """`torch.sum(y / divisor, dim=1, keepdim=True) * scale`, fused into one pass.

    Returns the same shape, dtype, device and bits as that expression for a 2-D
    floating-point `y` (float32, float64, float16, bfloat16), on CPU and CUDA. A
    wrong rank raises ValueError, a wrong dtype TypeError (from the op itself).

    `pdl`: on sm_90 and newer, launch as a programmatic dependent of the stream's previous
    kernel (the caller's choice: it gains 0.4-0.7 us tail after tail and costs 0.3-0.4 us
    behind a GEMM that writes y; results/kernel_notes.md, "The programmatic launch").
    The bits are the same either way.
    """
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"div_sum_scale: y must be a torch.Tensor, got {type(y).__name__}")
    if type(divisor) is not float:
        divisor = as_number(divisor, "div_sum_scale: divisor")
    if type(scale) is not float:
        scale = as_number(scale, "div_sum_scale: scale")
    if type(pdl) is not bool:
        raise TypeError(f"div_sum_scale: pdl must be a bool, got {type(pdl).__name__}")
    # The C++ autograd, built after the first CUDA call, is loaded by the next eager call
    # once built; torch.compile traces past it (polling a child process cannot be traced).
    if jit.background_builds and not torch.compiler.is_compiling():
        jit.load_finished_builds()
    return OP(y, divisor, scale, pdl)


@torch.library.register_fake(OP_NAME)
def _fake(y, divisor, scale, pdl=True):
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
# DivBackward), so the gradient has the reference's bits.
#
# CUDA tensors: the tail_cuda_autograd module registers it in C++ at AutogradCUDA, so
# that a CUDA call goes from the Python entry point to the kernel without any further
# Python. On a first use that module builds in the background (kernels/jit.py); until
# it is loaded, CUDA calls take the Autograd-key formula below (same ops, same bits).
# CPU tensors: `_autograd_cpu` below, at AutogradCPU. Without a graph to record, plain
# CPU tensors go straight to the CPU kernel (no second trip through the dispatcher);
# anything else (fake tensors, modes, subclasses) is redispatched below autograd.
# The Autograd key (every other backend, and CUDA calls until the C++ autograd is
# loaded): torch.library.register_autograd with the same formula.


def _setup_context(ctx, inputs, output):
    y, divisor, scale = inputs[:3]
    ctx.sizes, ctx.divisor, ctx.scale = y.shape, divisor, scale


def _backward(ctx, grad):
    return torch.div(torch.mul(grad, ctx.scale).expand(ctx.sizes), ctx.divisor), None, None, None


torch.library.register_autograd(OP_NAME, _backward, setup_context=_setup_context, lib=schema.IMPL)


class _DivSumScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, divisor, scale, pdl):
        _setup_context(ctx, (y, divisor, scale, pdl), None)
        with torch._C._AutoDispatchBelowAutograd():
            return OP(y, divisor, scale, pdl)

    @staticmethod
    def backward(ctx, grad):
        return _backward(ctx, grad)


_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_CPU_KEY = torch._C.DispatchKey.CPU
_grad_enabled = torch.is_grad_enabled


def _autograd_cpu(keyset, y, divisor, scale, pdl=True):
    if y.requires_grad and _grad_enabled():
        return _DivSumScale.apply(y, divisor, scale, pdl)
    below = keyset & _AFTER_AUTOGRAD
    if below.highestPriorityTypeId() == _CPU_KEY:
        return tail_cpu.div_sum_scale_cpu(y, divisor, scale)
    return OP.redispatch(below, y, divisor, scale, pdl)


schema.IMPL.impl(OP_NAME.split("::")[1], _autograd_cpu, "AutogradCPU", with_keyset=True)
