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
it is far closer to the exact answer. The kernels are registered from C++
(colsum.cpp, colsum.cu); this module adds what torch.compile and autograd need.
"""

from __future__ import annotations

import torch

from kernels.ops import FLOAT_DTYPES, as_number

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


# ---- autograd ------------------------------------------------------------------------
# Registered from C++ (colsum.cpp): a Python autograd kernel would cost every call a
# few microseconds of Python.
