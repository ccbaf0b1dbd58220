"""Bit-exact fused kernels for KernelBench level 2, problem 14.

`div_sum_scale(y, divisor, scale)` computes `torch.sum(y / divisor, 1, keepdim=True) * scale`
in one pass over `y` and returns the reference's exact bits. Importing the package
builds the kernels on first use (see `kernels.jit`) and registers `torch.ops.kb14`.

`colsum(W)` and `colsum_matvec(x, c, scale)` compute the same model by its algebraic
rewrite, `scale / divisor * (x @ W.sum(0))`, in fp64: not the reference's bits, but
two orders of magnitude faster and closer to the exact answer (see kernels.colsum_ops).
"""

from kernels.jit import load_library

load_library()

from kernels.colsum_ops import colsum, colsum_matvec, colsum_matvec_reference  # noqa: E402
from kernels.ops import div_sum_scale, div_sum_scale_reference  # noqa: E402

__all__ = [
    "colsum",
    "colsum_matvec",
    "colsum_matvec_reference",
    "div_sum_scale",
    "div_sum_scale_reference",
    "load_library",
]
