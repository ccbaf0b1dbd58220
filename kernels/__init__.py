"""Bit-exact fused kernels for KernelBench level 2, problem 14.

`div_sum_scale(y, divisor, scale)` computes `torch.sum(y / divisor, 1, keepdim=True) * scale`
in one pass over `y` and returns the reference's exact bits. Importing the package
defines `torch.ops.kb14` and compiles nothing: the first call of an op on a device
builds that op's module for that device (see `kernels.jit`; `kernels.jit.build_all()`
or `python -m kernels.build` builds every module ahead of time).

`colsum(W)` and `colsum_matvec(x, c, scale)` compute the same model by its algebraic
rewrite, `scale / divisor * (x @ W.sum(0))`, in fp64: not the reference's bits, but
two orders of magnitude faster and closer to the exact answer (see kernels.colsum_ops).
"""

from kernels.colsum_ops import colsum, colsum_matvec, colsum_matvec_reference
from kernels.jit import build_all
from kernels.ops import div_sum_scale, div_sum_scale_reference

__all__ = [
    "colsum",
    "colsum_matvec",
    "colsum_matvec_reference",
    "div_sum_scale",
    "div_sum_scale_reference",
    "build_all",
]
