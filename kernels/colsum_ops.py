"""The torch ops `kb14::colsum` and `kb14::colsum_matvec`: entry points, fake kernels, autograd.

Together they compute KernelBench L2/14 by its algebraic rewrite

    sum_j (x @ W.T)[:, j] / divisor * scale  ==  (scale / divisor) * (x @ W.sum(0))

* `colsum(W)` sums W over its rows (dim 0) in fp64 and returns the sums in fp64, for
  any floating W. They stay in fp64: rounding them to W's dtype (fp32) would add an
  error of about 1e-4 rms to each output at KernelBench sizes, twice the error of
  rounding the exact answer to fp32, for a 32 KiB saving on a 32 MiB read.
* `colsum_matvec(x, c, scale)` returns `scale * (x @ c)` as a (batch, 1) tensor of x's
  dtype: fp64 products (fused multiply-add) and fp64 sums, rounded once at the end.

The result is not the reference's bits (the reference sums fp32 GEMM outputs), but
it is far closer to the exact answer. The schemas are defined in kernels/schema.py;
the kernels and their C++ autograd come from the `colsum_cpu` and `colsum_cuda`
modules (colsum.cpp, colsum_autograd_cpu.cpp; colsum.cu, colsum_cuda.cpp), built on the first call on each
device. This module adds the Python checks, fake kernels and the autograd formula
that torch.compile and a first call need.
"""

from __future__ import annotations

import torch

from kernels import schema
from kernels.ops import FLOAT_DTYPES, as_number
from kernels.error_messages import dtype_name, layout_name, shape_text

COLSUM = torch.ops.kb14.colsum.default
MATVEC = torch.ops.kb14.colsum_matvec.default


def colsum(weight: torch.Tensor) -> torch.Tensor:
    """`weight.sum(0)` accumulated and returned in fp64 (shape `(weight.shape[1],)`).
    A wrong rank raises ValueError, a wrong dtype TypeError (from the op itself)."""
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"colsum: weight must be a torch.Tensor, got {type(weight).__name__}")
    return COLSUM(weight)


def colsum_matvec(x: torch.Tensor, colsum: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """`scale * (x @ colsum)` as shape `(batch, 1)` and x's dtype, accumulated in fp64.

    `colsum` must be a float64 vector (what `colsum()` returns) on x's device. Wrong
    ranks or lengths raise ValueError, wrong dtypes TypeError (from the op itself).
    """
    if not isinstance(x, torch.Tensor) or not isinstance(colsum, torch.Tensor):
        raise TypeError("colsum_matvec: x and colsum must be torch.Tensors")
    if type(scale) is not float:
        scale = as_number(scale, "colsum_matvec: scale")
    return MATVEC(x, colsum, scale)


def colsum_matvec_reference(x: torch.Tensor, weight: torch.Tensor, scale: float) -> torch.Tensor:
    """The fp64 oracle: `scale * (x @ W.sum(0))`, all in fp64, shape (batch, 1)."""
    return (x.double() @ weight.double().sum(0) * scale).unsqueeze(1)


# ---- fake kernels (torch.compile, meta tensors) -------------------------------------


@torch.library.register_fake("kb14::colsum")
def _colsum_fake(weight):
    torch._check(weight.dim() == 2, lambda: f"colsum: weight must be 2-D, got {weight.dim()}-D")
    torch._check(weight.dtype in FLOAT_DTYPES, lambda: f"colsum: weight must be a floating dtype, got {weight.dtype}")
    return weight.new_empty((weight.shape[1],), dtype=torch.float64)


@torch.library.register_fake("kb14::colsum_matvec")
def _matvec_fake(x, colsum, scale):
    torch._check(x.dim() == 2, lambda: f"colsum_matvec: x must be 2-D, got {x.dim()}-D")
    torch._check(colsum.dim() == 1, lambda: f"colsum_matvec: colsum must be 1-D, got {colsum.dim()}-D")
    torch._check(x.dtype in FLOAT_DTYPES, lambda: f"colsum_matvec: x must be a floating dtype, got {x.dtype}")
    torch._check(colsum.dtype == torch.float64, lambda: f"colsum_matvec: colsum must be float64, got {colsum.dtype}")
    torch._check(x.shape[1] == colsum.shape[0], lambda: "colsum_matvec: x's columns and colsum's length differ")
    return x.new_empty((x.shape[0], 1))


# ---- checks (the C++ kernels' own, for a first call made before the module is loaded) ----


def check_colsum_inputs(w: torch.Tensor) -> None:
    if w.layout != torch.strided:
        raise RuntimeError(f"colsum: weight must be a dense (strided) tensor, got layout {layout_name(w.layout)}")
    if w.dim() != 2:
        raise ValueError(f"colsum: weight must be 2-D (hidden, input), got {w.dim()}-D with shape {shape_text(w)}")
    if w.dtype not in FLOAT_DTYPES:
        raise TypeError(f"colsum: weight must be float32, float64, float16 or bfloat16, got {dtype_name(w.dtype)}")


def check_colsum_matvec_inputs(x: torch.Tensor, c: torch.Tensor, *_) -> None:
    if x.layout != torch.strided or c.layout != torch.strided:
        raise RuntimeError("colsum_matvec: x and colsum must be dense (strided) tensors")
    if x.dim() != 2:
        raise ValueError(f"colsum_matvec: x must be 2-D (batch, input), got {x.dim()}-D with shape {shape_text(x)}")
    if c.dim() != 1:
        raise ValueError(f"colsum_matvec: colsum must be 1-D (input,), got {c.dim()}-D with shape {shape_text(c)}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"colsum_matvec: x must be float32, float64, float16 or bfloat16, got {dtype_name(x.dtype)}")
    if c.dtype != torch.float64:
        raise TypeError(f"colsum_matvec: colsum must be float64 (as kb14::colsum returns it), got {dtype_name(c.dtype)}")
    if x.shape[1] != c.shape[0]:
        raise ValueError(f"colsum_matvec: x has {x.shape[1]} columns but colsum has {c.shape[0]} elements")
    if x.device != c.device:
        raise RuntimeError(f"colsum_matvec: x is on {x.device} but colsum is on {c.device}")


schema._first_use_kernel("colsum", check_colsum_inputs)
schema._first_use_kernel("colsum_matvec", check_colsum_matvec_inputs)


# ---- autograd ------------------------------------------------------------------------
# Registered at the Autograd key for a call made before the device's module is loaded;
# the modules register the same formulas in C++ at AutogradCPU / AutogradCUDA (which
# take precedence), so that later calls pay no Python on their way to the kernel.


def _colsum_setup(ctx, inputs, output):
    (w,) = inputs
    ctx.sizes, ctx.dtype = w.shape, w.dtype


def _colsum_backward(ctx, grad):
    # d colsum[k] / d W[j, k] = 1: every row of W receives the same gradient.
    return grad.to(ctx.dtype).unsqueeze(0).expand(ctx.sizes)


def _matvec_setup(ctx, inputs, output):
    x, c, scale = inputs
    ctx.scale, ctx.x_dtype = scale, x.dtype
    # Keep only what a gradient will read: c for x's, x for c's.
    ctx.save_for_backward(x if c.requires_grad else None, c if x.requires_grad else None)


def _matvec_backward(ctx, grad):
    # out = scale * (x @ c): d/dx = scale * grad * c (rounded to x's dtype), d/dc = x^T (scale * grad) in fp64.
    x, c = ctx.saved_tensors
    g = torch.mul(grad.to(torch.float64), ctx.scale)
    grad_x = torch.mul(g, c.unsqueeze(0)).to(ctx.x_dtype) if ctx.needs_input_grad[0] else None
    grad_c = torch.matmul(x.to(torch.float64).t(), g.squeeze(1)) if ctx.needs_input_grad[1] else None
    return grad_x, grad_c, None


torch.library.register_autograd("kb14::colsum", _colsum_backward, setup_context=_colsum_setup, lib=schema.IMPL)
torch.library.register_autograd("kb14::colsum_matvec", _matvec_backward, setup_context=_matvec_setup,
                                lib=schema.IMPL)
