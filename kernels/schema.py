"""The ops of `torch.ops.kb14`, defined from Python, and their first-use kernels.

Defining the schemas here costs no compilation: `import kernels` builds nothing. Each
op's kernels for a device live in a module that kernels/jit.py builds (or loads from
its cache) on the op's first call on that device. Until then the op's kernel for
every backend is the first-use kernel below, registered at CompositeExplicitAutograd:
it loads the device's module, whose C++ kernels register at the backend's own key
(CPU, CUDA), which takes precedence over CompositeExplicitAutograd, and calls the op
again. Later calls go straight to the C++ kernels; the first-use kernel stays
registered underneath them, unused.
"""

from __future__ import annotations

import torch

from kernels import jit

LIB = torch.library.Library("kb14", "DEF")  # noqa: TOR901 - the schemas are ours
LIB.define("div_sum_scale(Tensor y, float divisor, float scale, bool pdl=True) -> Tensor")
LIB.define("colsum(Tensor weight) -> Tensor")
LIB.define("colsum_matvec(Tensor x, Tensor colsum, float scale) -> Tensor")
LIB.define("hybrid_rows(Tensor x, Tensor colsum, Tensor vectors, Tensor scalars, float scale, float kappa, "
           "float tail_depth, "
           "float sigma_factor, float atol, float rtol, float budget) -> (Tensor, Tensor, Tensor, Tensor)")
LIB.define("rows_gemm(Tensor x, Tensor weight, Tensor rows, Tensor count) -> Tensor")
LIB.define("hybrid_forward(Tensor x, Tensor weight, Tensor colsum, Tensor vectors, Tensor scalars, float divisor, "
           "float scaling_factor, float kappa, float tail_depth, float sigma_factor, float atol, float rtol, "
           "float budget) -> (Tensor, Tensor)")
LIB.define("gemm_order_probe(Tensor x, Tensor weight, Tensor r, Tensor h, int chains, int tile, bool tree) -> Tensor")

IMPL = torch.library.Library("kb14", "IMPL")  # noqa: TOR901

# op -> {device type -> the module holding its kernel for that device}
MODULE_OF = {
    "div_sum_scale": {"cpu": "tail_cpu", "cuda": "tail_cuda"},
    "colsum": {"cpu": "colsum_cpu", "cuda": "colsum_cuda"},
    "colsum_matvec": {"cpu": "colsum_cpu", "cuda": "colsum_cuda"},
    "hybrid_rows": {"cuda": "hybrid_cuda"},
    "rows_gemm": {"cuda": "hybrid_cuda"},
    "hybrid_forward": {"cuda": "hybrid_cuda"},
    "gemm_order_probe": {"cuda": "hybrid_cuda"},
}


def _first_use_kernel(op_name: str, check):
    op = getattr(torch.ops.kb14, op_name).default
    modules = MODULE_OF[op_name]

    def kernel(keyset, *args):
        tensor = next(a for a in args if isinstance(a, torch.Tensor))
        check(*args)  # a bad input gets the op's own message, whatever its device or layout
        device = tensor.device.type
        if device not in modules:
            has = " and ".join(d.upper() for d in modules)
            raise NotImplementedError(f"kb14::{op_name}: no kernel for {device} tensors ({has} tensors only)")
        jit.load(modules[device])
        key = {"cpu": "CPU", "cuda": "CUDA"}[device]
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"kb14::{op_name}", key):
            raise NotImplementedError(f"kb14::{op_name}: module {modules[device]} registered no {key} kernel")
        return op.redispatch(keyset, *args)

    IMPL.impl(op_name, kernel, "CompositeExplicitAutograd", with_keyset=True)
