"""An executable model of the order in which PyTorch's CUDA kernels compute the tail
`torch.sum(y / divisor, 1, keepdim=True) * scale`, written from ATen's sources
(aten/src/ATen/native/cuda/Reduce.cuh, ReduceSumProdKernel.cu, BinaryDivTrueKernel.cu),
independent of this library's kernels, so that it can serve as a second oracle for them.

Every floating-point step is one elementwise torch operation on tensors of the op math type
(`a + b` of two float32 tensors rounds once per element), never torch.sum, matmul or a fused
multiply-add, so the model gives the same bits on the CPU and on a GPU. It is vectorised over
rows and logical threads, so that it runs fast on CUDA tensors too.

Release groups (what differs between them, all in Reduce.cuh unless named):

* "2.4-2.9": ReduceOp::run reduces across warps (block_y_reduce) before across lanes
  (block_x_reduce); warp shuffles with offsets 1, 2, 4, ...; rows are vectorised when
  inputs_per_output > 128 and vt0 >= input_vec_size; 4-element vectors for every type.
* "2.10+": lanes before warps in run(); shuffle offsets dim_x/2 down to 1; vectorised when
  inputs_per_output >= 128; the sum of a 2-byte type loads 8-element vectors
  (ReduceSumProdKernel.cu, sum_functor: vt0 4, input_vec_size 8).

global_reduce (several blocks per row) reduces across warps, then lanes, in both groups.

Limits: 2-D y spanning fewer than 2**31 bytes (one launch with 32-bit indexing); dtypes
float32, float16, bfloat16, float64. The quotient `y / divisor` is a fresh contiguous tensor
whatever y's strides, so row r starts (r * cols) mod input_vec_size elements past a vector boundary (the allocator's blocks
are aligned far beyond a vector).

The module needs only torch and imports nothing from the library, whose mistakes it must not share.
It is not installed with the package: tests and scripts import it from the repository (`oracle/`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

RELEASES = ("2.4-2.9", "2.10+")
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)

WARP_SIZE = 32
MAX_NUM_THREADS = 512  # mnt_wrapper<T>::MAX_NUM_THREADS for every real type
VT0 = 4  # accumulators per thread in thread_reduce_impl (gpu_reduce_kernel's default)
MIN_VALUES_PER_THREAD = 16
MAX_VALUES_PER_THREAD = 256
INT32_MAX = 2**31 - 1  # TensorIterator::can_use_32bit_indexing: beyond it ATen splits the reduction


@dataclass(frozen=True)
class LaunchConfig:
    """What setReduceConfig derives for one tail shape, and which branches it takes."""

    rows: int
    cols: int
    reduction_on_fastest_dim: bool  # False only for one column: the output is then split across lanes
    vectorized: bool  # input_vectorized_thread_reduce_impl, else thread_reduce_impl
    input_vec_size: int  # elements per vector load for this dtype and release (used only when vectorized)
    output_vec_size: int
    block_width: int
    block_height: int
    split_across_warps: bool  # input split across warps (block_y_reduce); else each warp its own row
    ctas_per_row: int  # > 1: several blocks per row and global_reduce
    step_input: int  # logical threads per row: the stride between a thread's elements (vectors if vectorized)
    values_per_thread: int  # div_up(cols, step_input), in elements as Reduce.cuh counts them
    grid: tuple[int, int]
    target_grid_size: int

    @property
    def num_threads(self) -> int:
        return self.block_width * self.block_height

    def misaligned_rows(self) -> int:
        """Rows whose quotient starts off a vector boundary (only the vectorised path cares)."""
        if not self.vectorized:
            return 0
        vec = self.input_vec_size
        # (r * cols) mod vec repeats with period vec in r.
        off = [(r * self.cols) % vec != 0 for r in range(vec)]
        return sum(off) * (self.rows // vec) + sum(off[: self.rows % vec])

    def branches(self) -> dict[str, bool]:
        """Named branches this shape exercises, for evidence tables."""
        misaligned = self.misaligned_rows() > 0
        return {
            "vectorized": self.vectorized,
            "not_vectorized": not self.vectorized,
            "misaligned_head": misaligned,
            "vector_tail": self.vectorized and self._has_vector_tail(),
            "split_across_warps": self.split_across_warps,
            "warp_per_row": self.reduction_on_fastest_dim and not self.split_across_warps,
            "sub_warp_block": self.block_width < WARP_SIZE,
            "wide_block_x": self.block_width > WARP_SIZE,
            "ctas_gt_1": self.ctas_per_row > 1,
            "one_column": not self.reduction_on_fastest_dim,
        }

    def _has_vector_tail(self) -> bool:
        v = self.input_vec_size
        return any(_aligned_span(self.cols, (r * self.cols) % v, v)[2] for r in range(min(self.rows, v)))

    def as_dict(self) -> dict:
        d = asdict(self)
        d["grid"] = list(self.grid)
        return d


# The library has its own (kernels/jit.py): the oracle imports nothing from it.
def release_group(torch_version: str) -> str:
    """The release group ("2.4-2.9" or "2.10+") of a torch version string like "2.11.0+cu130"."""
    major, minor = (int(p) for p in torch_version.split("+")[0].split(".")[:2])
    if (major, minor) < (2, 4):
        raise ValueError(f"torch {torch_version}: the model covers releases 2.4 and later")
    return "2.4-2.9" if (major, minor) < (2, 10) else "2.10+"


def input_vec_size(dtype: torch.dtype, release: str) -> int:
    """Elements per vector load of the vectorised row reduction (ReduceSumProdKernel.cu)."""
    _check_release(release)
    _check_dtype(dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    return 8 if (release == "2.10+" and itemsize == 2) else VT0


def launch_config(rows: int, cols: int, dtype: torch.dtype, *, release: str, multiprocessors: int,
                  max_threads_per_multiprocessor: int = 2048) -> LaunchConfig:
    """setReduceConfig for a row sum of a contiguous (rows, cols) tensor on a GPU of this shape."""
    _check_release(release)
    _check_dtype(dtype)
    if rows < 1 or cols < 1:
        raise ValueError(f"the model needs a non-empty y, got {rows} x {cols}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    if 1 + (rows * cols - 1) * itemsize > INT32_MAX:
        raise ValueError(f"{rows} x {cols} {dtype} spans 2**31 bytes or more: ATen splits it into several "
                         "launches (32-bit indexing), which the model does not cover")
    if multiprocessors < 1 or max_threads_per_multiprocessor < MAX_NUM_THREADS:
        raise ValueError(f"implausible GPU: {multiprocessors} SMs, {max_threads_per_multiprocessor} threads per SM")
    vec = input_vec_size(dtype, release)
    # TensorIterator drops a reduced dimension of size 1, leaving nothing to reduce along the
    # fastest dimension; the sum is then split across outputs, one input per thread.
    on_fastest = cols > 1 or rows == 1
    output_vec_size = 1
    vectorized = False
    if on_fastest:
        dim0, dim1 = cols, rows
        wide_enough = cols >= 128 if release == "2.10+" else (cols > 128 and VT0 >= vec)
        if wide_enough:
            vectorized = True
            dim0 //= vec
    else:
        # get_output_vec_size: the largest of 4, 2, 1 dividing the row count (the base address
        # and strides of a fresh tensor are multiples of 4 elements).
        output_vec_size = next(v for v in (4, 2, 1) if rows % v == 0)
        dim0, dim1 = rows // output_vec_size, cols
    max_threads = MAX_NUM_THREADS // output_vec_size
    dim0_pow2 = _last_pow2(dim0) if dim0 < max_threads else max_threads
    dim1_pow2 = _last_pow2(dim1) if dim1 < max_threads else max_threads
    block_width = min(dim0_pow2, WARP_SIZE)
    block_height = min(dim1_pow2, max_threads // block_width)
    block_width = min(dim0_pow2, max_threads // block_height)
    num_inputs, num_outputs = (cols, rows) if on_fastest else (1, rows)
    step_input, step_output = 1, 1
    if on_fastest:
        step_input *= block_width  # input across lanes
    else:
        step_output *= block_width  # outputs across lanes
    values_per_thread = _div_up(num_inputs, step_input)
    split_across_warps = values_per_thread >= min(block_height * 16, MAX_VALUES_PER_THREAD)
    if split_across_warps:
        step_input *= block_height
    else:
        step_output *= block_height
    target_grid_size = multiprocessors * (max_threads_per_multiprocessor // (block_width * block_height))
    grid_x = _div_up(num_outputs // output_vec_size, step_output)
    values_per_thread = _div_up(num_inputs, step_input)
    ctas = 1
    if split_across_warps and values_per_thread >= MAX_VALUES_PER_THREAD and grid_x <= target_grid_size:
        ctas = max(min(_div_up(target_grid_size, grid_x), _div_up(values_per_thread, MIN_VALUES_PER_THREAD)),
                   _div_up(values_per_thread, MAX_VALUES_PER_THREAD))
        if ctas > 1:
            step_input *= ctas
            values_per_thread = _div_up(num_inputs, step_input)
    return LaunchConfig(rows=rows, cols=cols, reduction_on_fastest_dim=on_fastest, vectorized=vectorized,
                        input_vec_size=vec, output_vec_size=output_vec_size, block_width=block_width,
                        block_height=block_height, split_across_warps=split_across_warps, ctas_per_row=ctas,
                        step_input=step_input, values_per_thread=values_per_thread, grid=(grid_x, ctas),
                        target_grid_size=target_grid_size)


def reference_tail(y: torch.Tensor, divisor: float, scale: float, *, release: str, multiprocessors: int,
                   max_threads_per_multiprocessor: int = 2048) -> torch.Tensor:
    """The bits of `torch.sum(y / divisor, 1, keepdim=True) * scale` on a CUDA GPU with this many
    SMs and threads per SM under torch of this release group: a (rows, 1) tensor of y.dtype on y's device."""
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"y must be a tensor, got {type(y).__name__}")
    if y.dim() != 2:
        raise ValueError(f"y must be 2-D (rows, columns), got {y.dim()}-D with shape {list(y.shape)}")
    for name, value in (("divisor", divisor), ("scale", scale)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a Python int or float, got {type(value).__name__}")
    rows, cols = y.shape
    config = launch_config(rows, cols, y.dtype, release=release, multiprocessors=multiprocessors,
                           max_threads_per_multiprocessor=max_threads_per_multiprocessor)
    op_t = torch.float64 if y.dtype == torch.float64 else torch.float32
    # div_true_kernel_cuda with a CPU scalar divisor: y * (1 / divisor), the reciprocal taken on
    # the host (2.10+: in double, then rounded to op math; before: in op math), one rounding to
    # op math, then one to y's dtype.
    reciprocal_t = torch.float64 if release == "2.10+" else op_t
    one = torch.ones((), dtype=reciprocal_t, device=y.device)
    inv = (one / torch.tensor(float(divisor), dtype=reciprocal_t, device=y.device)).to(op_t)
    quotient = (y.to(op_t) * inv).to(y.dtype).to(op_t).contiguous()
    sums = _row_sums(quotient, config, release)
    # The sum is stored in y's dtype (func_wrapper's project); the multiply by the CPU scalar is
    # done in op math on the stored value and rounded once more.
    stored = sums.to(y.dtype).to(op_t)
    out = (stored * torch.tensor(float(scale), dtype=op_t, device=y.device)).to(y.dtype)
    return out.reshape(rows, 1)


# ---------------------------------------------------------------------------------------------
# The reduction, rows x logical threads at a time. Padding with +0.0 is exact: an accumulator
# starts at +0.0 (the identity) and is never -0.0 afterwards, and x + (+0.0) == x for every
# other x, so a thread that has no element at some step can add +0.0 instead.


def _row_sums(q: torch.Tensor, config: LaunchConfig, release: str) -> torch.Tensor:
    rows, cols = q.shape
    if not config.vectorized:
        return _block_and_global(_strided_thread_values(q, config), config, release)
    vec = config.input_vec_size
    shifts = (torch.arange(rows, device=q.device, dtype=torch.int64) * cols) % vec
    sums = torch.empty(rows, dtype=q.dtype, device=q.device)
    for shift in range(vec):
        if rows > 1:
            index = torch.nonzero(shifts == shift).flatten()
            if index.numel() == 0:
                continue
            part = q.index_select(0, index)
        elif shift:
            continue
        else:
            index, part = None, q
        values = _vectorized_thread_values(part, shift, config)
        reduced = _block_and_global(values, config, release)
        if index is None:
            sums = reduced
        else:
            sums.index_copy_(0, index, reduced)
    return sums


def _aligned_span(cols: int, shift: int, vec: int) -> tuple[int, int, int]:
    """(head, whole vectors, tail) elements of a row that starts `shift` elements past a boundary."""
    head = (vec - shift) % vec
    if head > cols:
        raise AssertionError("a vectorised row is always longer than one vector")
    n_vectors = (cols - head) // vec
    return head, n_vectors, cols - head - n_vectors * vec


def _vectorized_thread_values(q: torch.Tensor, shift: int, config: LaunchConfig) -> torch.Tensor:
    """input_vectorized_thread_reduce_impl for rows that all start `shift` elements past a vector
    boundary: (n, step_input) per-thread values, logical thread x + bx*y + bx*by*cta."""
    n, cols = q.shape
    vec, threads = config.input_vec_size, config.step_input
    head, n_vectors, tail = _aligned_span(cols, shift, vec)
    acc = torch.zeros(n, threads, vec, dtype=q.dtype, device=q.device)
    if head:
        # Lanes shift..vec-1 of warp 0 in block 0 load the elements before the first boundary,
        # into their first accumulator (lane x takes element x - shift).
        acc[:, shift:vec, 0] = acc[:, shift:vec, 0] + q[:, :head]
    if n_vectors:
        rounds = _div_up(n_vectors, threads)
        body = q[:, head:head + n_vectors * vec].reshape(n, n_vectors, vec)
        if rounds * threads != n_vectors:
            pad = torch.zeros(n, rounds * threads - n_vectors, vec, dtype=q.dtype, device=q.device)
            body = torch.cat([body, pad], dim=1)
        body = body.reshape(n, rounds, threads, vec)
        # Vector k goes to thread k % threads on its (k // threads)-th trip; element i of a vector
        # into accumulator i.
        for trip in range(rounds):
            acc = acc + body[:, trip]
    if tail:
        # After the loop, lanes 0..tail-1 of warp 0 in block 0 add the elements after the last
        # whole vector to their first accumulator.
        start = head + n_vectors * vec
        acc[:, :tail, 0] = acc[:, :tail, 0] + q[:, start:start + tail]
    value = acc[:, :, 0]
    for i in range(1, vec):
        value = value + acc[:, :, i]
    return value


def _strided_thread_values(q: torch.Tensor, config: LaunchConfig) -> torch.Tensor:
    """thread_reduce_impl on a contiguous row: thread t takes elements t, t + S, t + 2S, ...
    (S = step_input), its m-th element into accumulator m % 4, combined ((a0 + a1) + a2) + a3."""
    n, cols = q.shape
    threads = config.step_input
    if not config.reduction_on_fastest_dim:
        # One input per output: each thread's value is identity + element.
        return torch.zeros(n, 1, dtype=q.dtype, device=q.device) + q
    rounds = _div_up(cols, threads)
    body = q
    if rounds * threads != cols:
        body = torch.cat([q, torch.zeros(n, rounds * threads - cols, dtype=q.dtype, device=q.device)], dim=1)
    body = body.reshape(n, rounds, threads)
    acc = [torch.zeros(n, threads, dtype=q.dtype, device=q.device) for _ in range(VT0)]
    for m in range(rounds):
        acc[m % VT0] = acc[m % VT0] + body[:, m]
    value = acc[0]
    for i in range(1, VT0):
        value = value + acc[i]
    return value


def _block_and_global(values: torch.Tensor, config: LaunchConfig, release: str) -> torch.Tensor:
    """From (n, logical threads) per-thread values to (n,) row sums: block_x/y_reduce in the
    release's order, then global_reduce across blocks."""
    n = values.shape[0]
    if not config.reduction_on_fastest_dim:
        return values[:, 0]
    bx, by, ctas = config.block_width, config.block_height, config.ctas_per_row
    lanes_first = release == "2.10+"
    if config.split_across_warps:
        v = values.reshape(n, ctas, by, bx)
        if lanes_first:
            per_block = _fold_warps(_lane_tree(v, lanes_first), dim=2)
        else:
            per_block = _lane_tree(_fold_warps(v, dim=2), lanes_first)
    else:
        # Each warp (row of the block) reduces its own row of y: lanes only.
        per_block = _lane_tree(values.reshape(n, 1, bx), lanes_first)
    if ctas == 1:
        return per_block[:, 0]
    # global_reduce: block c stages its total at c; the last block's thread t = x + bx * y adds
    # staged values t, t + bx*by, ... from the identity, then warps are folded, then lanes.
    threads = bx * by
    rounds = _div_up(ctas, threads)
    staged = per_block
    if rounds * threads != ctas:
        staged = torch.cat([staged, torch.zeros(n, rounds * threads - ctas, dtype=staged.dtype,
                                                device=staged.device)], dim=1)
    staged = staged.reshape(n, rounds, threads)
    acc = torch.zeros(n, threads, dtype=staged.dtype, device=staged.device)
    for k in range(rounds):
        acc = acc + staged[:, k]
    folded = _fold_warps(acc.reshape(n, by, bx), dim=1)
    return _lane_tree(folded, lanes_first)


def _fold_warps(v: torch.Tensor, dim: int) -> torch.Tensor:
    """block_y_reduce along `dim` (size a power of two): warp y adds warp y + offset for offsets
    by/2, by/4, ..., 1; the result is warp 0's. The dimension is removed."""
    size = v.shape[dim]
    while size > 1:
        half = size // 2
        v = v.narrow(dim, 0, half) + v.narrow(dim, half, half)
        size = half
    return v.squeeze(dim)


def _lane_tree(v: torch.Tensor, descending_shuffles: bool) -> torch.Tensor:
    """block_x_reduce along the last dimension (block_width, a power of two): shared-memory halving
    while wider than a warp, then warp shuffles; lane 0's value. The dimension is removed."""
    size = v.shape[-1]
    while size > WARP_SIZE:
        half = size // 2
        v = v[..., :half] + v[..., half:]
        size = half
    while size > 1:
        if descending_shuffles:
            # Offsets size/2, ..., 1: lane x adds lane x + offset, folding the upper half.
            half = size // 2
            v = v[..., :half] + v[..., half:]
        else:
            # Offsets 1, 2, 4, ...: lane 0 ends with the tree of adjacent pairs.
            v = v[..., 0::2] + v[..., 1::2]
        size //= 2
    return v[..., 0]


def _last_pow2(n: int) -> int:
    return max(1, 1 << (int(n).bit_length() - 1)) if n > 0 else 1


def _div_up(a: int, b: int) -> int:
    return (a + b - 1) // b


def _check_release(release: str) -> None:
    if release not in RELEASES:
        raise ValueError(f"release must be one of {RELEASES}, got {release!r}")


def _check_dtype(dtype: torch.dtype) -> None:
    if dtype not in DTYPES:
        raise TypeError(f"y must be float32, float16, bfloat16 or float64, got {dtype}")


__all__ = ["RELEASES", "LaunchConfig", "launch_config", "input_vec_size", "reference_tail", "release_group"]
