"""kb14::div_sum_scale on CPU tensors: checks, layout test and composite in Python, the
kernel in C++ without torch headers (tail_cpu.h, module `tail_cpu`), called through
ctypes.

The CPU kernel needs no tensor API: a data pointer, sizes, strides, the thread count.
Compiled without torch headers, in two units at once (float and double; half and
bfloat16), it builds in 4-5 s on a 2-core machine (in one unit 6-9 s; behind a C++ op,
with torch's dispatcher and autograd headers, 18 s), which is what makes the first CPU
call fast. The price is a few microseconds of Python per call on CPU tensors (README,
"CPU tensors"); CUDA tensors never come here.
"""

from __future__ import annotations

import ctypes

import torch

from kernels import jit
from kernels.error_messages import dtype_name, layout_name, shape_text

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
DTYPE_CODE = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}

def check_inputs(y: torch.Tensor, *_) -> None:
    """The op's preconditions, with the messages (and exception types) of the CUDA op's C++ checks."""
    if y.dim() != 2:
        raise ValueError(f"div_sum_scale: y must be 2-D (rows, columns), got {y.dim()}-D with shape {shape_text(y)}")
    if y.dtype not in FLOAT_DTYPES:
        raise TypeError(f"div_sum_scale: y must be float32, float64, float16 or bfloat16, got {dtype_name(y.dtype)}")
    if y.layout != torch.strided:
        raise RuntimeError("div_sum_scale: y must be a dense (strided) tensor, got layout "
                           f"{layout_name(y.layout)}")


def intermediate_is_row_major(y: torch.Tensor) -> bool:
    """True when the reference's `y / divisor` is laid out row-major, so that its row sums
    take the inner-reduction path the kernel reproduces (div_sum_scale.h explains)."""
    rows, cols = y.shape
    if rows <= 1 or cols <= 1:
        return True
    row_stride, col_stride = y.stride()
    if col_stride >= 1 and row_stride >= cols * col_stride:
        return True  # rows apart, dimension 1 the faster: TensorIterator keeps it innermost (no 190 us probe)
    probe = torch.empty_strided(y.shape, y.stride(), dtype=y.dtype, device="meta")
    return (probe / 2.0).stride() == (cols, 1)


def composite(y: torch.Tensor, divisor: float, scale: float) -> torch.Tensor:
    return torch.mul(torch.sum(torch.div(y, divisor), 1, keepdim=True), scale)


def _vector_bytes() -> int:
    # SumKernel's vector bytes; 0 where its order has not been verified (the composite runs).
    return 32 if torch.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT", "NO AVX") else 0


_kernel = None
_vector = None


def entry_point(library):
    """The built module's C entry point (tail_cpu.cpp), typed for ctypes."""
    fn = ctypes.CDLL(str(library)).kb14_div_sum_scale_cpu
    i64, dbl, ptr = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
    fn.argtypes = [ctypes.c_int, ptr, ptr, i64, i64, i64, i64, i64, dbl, dbl, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def _load():
    global _kernel, _vector
    fn = entry_point(jit.load("tail_cpu"))
    _vector = _vector_bytes()
    _kernel = fn
    return fn


def div_sum_scale_cpu(y: torch.Tensor, divisor: float, scale: float, pdl: bool = True) -> torch.Tensor:
    """The op on CPU tensors (`pdl`, a CUDA launch kind, does not apply)."""
    kernel = _kernel or _load()
    check_inputs(y)
    rows, cols = y.shape
    if not _vector or not intermediate_is_row_major(y):
        return composite(y, divisor, scale)
    out = torch.empty(rows, 1, dtype=y.dtype)
    if rows:
        if y.element_size() == 2 and cols > 1 and y.stride(1) != 1:
            y = y.contiguous()  # the 16-bit kernels read whole vectors only (tail_cpu.h, dispatch_layout)
        row_stride, col_stride = y.stride()
        status = kernel(DTYPE_CODE[y.dtype], y.data_ptr(), out.data_ptr(), rows, cols, row_stride, col_stride, 1,
                        divisor, scale, torch.get_num_threads())
        if status != 0:
            raise RuntimeError(f"div_sum_scale: the CPU kernel refused a {dtype_name(y.dtype)} y of strides "
                               f"{tuple(y.stride())} (code {status})")
    return out
