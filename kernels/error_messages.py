"""How the ops' Python checks name dtypes, layouts and shapes: as c10 prints them, so that
a check made in Python (a CPU call, a first call) reads exactly like the same check in C++
(kernels/error_message.h)."""

from __future__ import annotations

import torch

# c10's names, as the C++ checks print them (c10::toString(ScalarType)).
C10_NAMES = {
    torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int", torch.int64: "Long",
    torch.bool: "Bool", torch.complex32: "ComplexHalf", torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble", torch.float16: "Half", torch.float32: "Float", torch.float64: "Double",
    torch.bfloat16: "BFloat16",
}
LAYOUT_NAMES = {torch.sparse_coo: "Sparse", torch.sparse_csr: "SparseCsr", torch.sparse_csc: "SparseCsc",
                torch.sparse_bsr: "SparseBsr", torch.sparse_bsc: "SparseBsc", torch._mkldnn: "Mkldnn"}


def dtype_name(dtype: torch.dtype) -> str:
    return C10_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def layout_name(layout: torch.layout) -> str:
    return LAYOUT_NAMES.get(layout, str(layout))


def shape_text(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(n) for n in t.shape) + "]"
