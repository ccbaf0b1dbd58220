"""oracle/cuda_order_model.py: the launch configuration it derives, its arithmetic against a
thread-by-thread simulation, exactness, the two release groups, bad input; on a GPU, torch."""

from __future__ import annotations

import math
import random
import sys

import numpy as np
import pytest
import torch

from kernels import jit
from oracle import cuda_order_model as model

OLD, NEW = model.RELEASES
H100 = {"multiprocessors": 132, "max_threads_per_multiprocessor": 2048}


def config(rows, cols, dtype=torch.float32, release=NEW, sms=132, threads=2048):
    return model.launch_config(rows, cols, dtype, release=release, multiprocessors=sms,
                               max_threads_per_multiprocessor=threads)


# ---------------------------------------------------------------------------------------------
# setReduceConfig (Reduce.cuh), derived by hand. Notation: dim0 = columns (divided by the vector
# width when vectorised), dim1 = rows; block_width = min(pow2(dim0), 32), block_height =
# min(pow2(dim1), 512 / block_width), block_width = min(pow2(dim0), 512 / block_height), pow2 =
# last power of two <= x, capped at 512; values_per_thread = ceil(cols / step_input); warps split
# the input when values_per_thread >= min(16 * block_height, 256); blocks split it when it is then
# still >= 256 and the grid fits target = SMs * (threads per SM / block threads): ctas =
# max(min(ceil(target / grid), ceil(vpt / 16)), ceil(vpt / 256)).

def test_kernelbench_shape():
    # 1024 x 8192 fp32: vectorised (8192 > 128), dim0 = 2048 -> 32 x 16; vpt = 8192/32 = 256 >= 256:
    # warps split the row; vpt = 8192/512 = 16 < 256: one block per row.
    for release in model.RELEASES:
        c = config(1024, 8192, release=release)
        assert (c.block_width, c.block_height, c.split_across_warps, c.ctas_per_row) == (32, 16, True, 1)
        assert (c.step_input, c.vectorized, c.input_vec_size, c.grid) == (512, True, 4, (1024, 1))


@pytest.mark.parametrize("sms, threads, ctas", [(132, 2048, 33), (108, 2048, 27), (40, 1024, 5), (58, 1536, 11)])
def test_few_long_rows_split_across_blocks_by_gpu_size(sms, threads, ctas):
    # 16 x 300000 fp32: 32 x 16 block, vpt = ceil(300000/512) = 586 >= 256 and grid 16 <= target:
    # target = sms * threads/512; ctas = max(min(ceil(target/16), ceil(586/16) = 37), ceil(586/256) = 3).
    assert math.ceil(sms * (threads // 512) / 16) == ctas  # the hand rule, restated
    c = config(16, 300000, sms=sms, threads=threads)
    assert (c.block_width, c.block_height, c.split_across_warps) == (32, 16, True)
    assert c.ctas_per_row == ctas and c.step_input == 512 * ctas and c.grid == (16, ctas)
    assert c.target_grid_size == sms * (threads // 512)


def test_three_long_rows_wide_block():
    # 3 x 200003 fp32: dim0 = 50000 -> pow2 512; dim1 = 3 -> 2; block 256 x 2; vpt = 782 >= min(32, 256):
    # warps split; vpt = 391 >= 256, grid 3 <= 528: ctas = max(min(176, 25), 2) = 25. Rows 1 and 2 start
    # mid-vector (200003 = 3 mod 4).
    c = config(3, 200003)
    assert (c.block_width, c.block_height, c.ctas_per_row, c.step_input) == (256, 2, 25, 12800)
    assert c.misaligned_rows() == 2 and c.branches()["wide_block_x"] and c.branches()["ctas_gt_1"]


def test_single_long_row():
    # 1 x 1000000 fp32: dim1 = 1 -> block 512 x 1; vpt 1954: ctas = max(min(528, 123), 8) = 123.
    c = config(1, 1_000_000)
    assert (c.block_width, c.block_height, c.ctas_per_row, c.step_input) == (512, 1, 123, 512 * 123)


def test_short_rows_sub_warp_blocks_warp_per_row():
    # 1000 x 20: not vectorised (20 <= 128); pow2(20) = 16, block 16 x 32; vpt = 2 < 256: each
    # warp row of the block its own row; grid = ceil(1000 / 32).
    c = config(1000, 20)
    assert (c.block_width, c.block_height, c.split_across_warps, c.vectorized) == (16, 32, False, False)
    assert c.step_input == 16
    assert c.grid == (32, 1) and c.branches()["sub_warp_block"] and c.branches()["warp_per_row"]


def test_128_columns_vectorised_only_since_2_10():
    # 2.4-2.9 needs dim0 > 128: 8 x 128 is not vectorised, block 64 x 8 (wider than a warp).
    old = config(8, 128, release=OLD)
    assert (old.vectorized, old.block_width, old.block_height, old.step_input) == (False, 64, 8, 64)
    # 2.10+ takes dim0 >= 128: 4-wide fp32 vectors, dim0 = 32, block 32 x 8.
    new = config(8, 128, release=NEW)
    assert (new.vectorized, new.block_width, new.block_height, new.step_input) == (True, 32, 8, 32)
    # bf16 in 2.10+: 8-wide vectors, dim0 = 16, block 16 x 8.
    bf = config(8, 128, torch.bfloat16, release=NEW)
    assert (bf.vectorized, bf.input_vec_size, bf.block_width, bf.block_height) == (True, 8, 16, 8)
    # 129 columns in fp16 under 2.4-2.9: 4-wide vectors, dim0 = 32.
    h = config(8, 129, torch.float16, release=OLD)
    assert (h.vectorized, h.input_vec_size, h.block_width) == (True, 4, 32)


def test_one_and_two_columns():
    # One column: TensorIterator drops the reduced dimension, outputs go across lanes
    # (get_output_vec_size: 5 rows -> 1; 8 rows -> 4, dim0 = 2).
    c = config(5, 1)
    assert (c.reduction_on_fastest_dim, c.output_vec_size, c.block_width, c.block_height) == (False, 1, 4, 1)
    assert config(8, 1).output_vec_size == 4 and config(8, 1).block_width == 2
    # Two columns: block 2 x 4 for 7 rows (pow2(7) = 4).
    c = config(7, 2)
    assert (c.block_width, c.block_height, c.split_across_warps, c.step_input) == (2, 4, False, 2)


def test_misaligned_rows_counted():
    # Row r starts (r * cols) mod vec elements off a boundary: 8191 columns, 4-wide vectors -> 3 in 4 rows.
    assert config(1000, 8191).misaligned_rows() == 750
    assert config(1000, 8192).misaligned_rows() == 0
    assert config(1000, 8196, torch.bfloat16, release=NEW).misaligned_rows() == 500  # 8196 = 4 mod 8
    assert config(1000, 8196, torch.bfloat16, release=OLD).misaligned_rows() == 0


def test_release_group_names():
    assert model.release_group("2.11.0+cu130") == NEW
    assert model.release_group("2.10.1") == NEW
    assert model.release_group("2.4.0") == OLD
    assert model.release_group("2.9.1+cu128") == OLD
    with pytest.raises(ValueError, match="2.4"):
        model.release_group("2.3.1")


def test_library_groups_releases_as_the_oracle_does():
    # The library's copy labels exported files; its kernels split at KB14_TORCH_VERSION 210.
    for minor in range(4, 16):
        version = f"2.{minor}.0+cu130"
        assert jit.release_group(version) == model.release_group(version)
        assert (jit.release_group(version) == NEW) == (200 + minor >= 210)
    with pytest.raises(ValueError, match="2.4"):
        jit.release_group("2.3.1")


# ---------------------------------------------------------------------------------------------
# The vectorised arithmetic against a literal, thread-by-thread simulation of the same kernel
# (numpy float32 scalars, one rounding per add). Values a thread never computes are NaN, so
# that any path that would read one shows.

def simulate_row_sums(q: np.ndarray, cfg, release: str) -> np.ndarray:
    rows, cols = q.shape
    zero = q.dtype.type(0)
    nan = q.dtype.type("nan")
    bx, by, ctas = cfg.block_width, cfg.block_height, cfg.ctas_per_row
    lanes_first = release == NEW

    def thread_value(row, x, y, cta):
        data = q[row]
        first_warp_block = (y == 0 or not cfg.split_across_warps) and cta == 0
        idx = x + (y * bx if cfg.split_across_warps else 0) + cta * bx * by
        if idx >= cols:
            return nan
        stride = cfg.step_input
        if cfg.vectorized:
            vec = cfg.input_vec_size
            base, end, value = 0, cols, zero
            shift = (row * cols) % vec
            if shift:
                base, end = -shift, cols + shift
                if shift <= x < vec and first_warp_block:
                    value = value + data[base + x]
                end -= vec
                base += vec
            acc = [value] + [zero] * (vec - 1)
            while idx * vec + vec - 1 < end:
                for i in range(vec):
                    acc[i] = acc[i] + data[base + idx * vec + i]
                idx += stride
            tail_start = end - end % vec
            if first_warp_block and tail_start + x < end:
                acc[0] = acc[0] + data[base + tail_start + x]
        else:
            acc = [zero] * 4
            m = 0
            while idx < cols:
                acc[m % 4] = acc[m % 4] + data[idx]
                idx += stride
                m += 1
        out = acc[0]
        for a in acc[1:]:
            out = out + a
        return out

    def lanes(vals):  # block_x_reduce over physical threads tid = x + bx * y
        vals = list(vals)
        dim = bx
        if dim > 32:
            off = dim // 2
            while off >= 32:
                for tid in range(len(vals)):
                    if tid % bx < off:
                        vals[tid] = vals[tid] + vals[tid + off]
                off //= 2
            dim = 32
        ascending = [1 << k for k in range(dim.bit_length() - 1)]
        order = ascending[::-1] if lanes_first else ascending
        for off in order:
            snap = list(vals)
            for tid in range(len(vals)):
                # shfl_down keeps its own value past the warp's end; lanes a small block lacks are NaN.
                src = tid + off if tid % 32 + off < 32 else tid
                vals[tid] = snap[tid] + (snap[src] if src < len(snap) else nan)
        return vals

    def warps(vals):  # block_y_reduce
        vals = list(vals)
        off = by // 2
        while off > 0:
            for tid in range(len(vals)):
                if tid // bx < off:
                    vals[tid] = vals[tid] + vals[tid + off * bx]
            off //= 2
        return vals

    sums = np.empty(rows, dtype=q.dtype)
    if not cfg.split_across_warps:
        for block_start in range(0, rows, by):
            vals = [thread_value(block_start + y, x, y, 0) if block_start + y < rows else nan
                    for y in range(by) for x in range(bx)]
            vals = lanes(vals)
            for y in range(by):
                if block_start + y < rows:
                    sums[block_start + y] = vals[y * bx]
        return sums
    for row in range(rows):
        staged = []
        for cta in range(ctas):
            vals = [thread_value(row, x, y, cta) for y in range(by) for x in range(bx)]
            vals = warps(lanes(vals)) if lanes_first else lanes(warps(vals))
            staged.append(vals[0])
        if ctas == 1:
            sums[row] = staged[0]
            continue
        vals = []
        for t in range(bx * by):
            v = zero
            for k in range(t, ctas, bx * by):
                v = v + staged[k]
            vals.append(v)
        sums[row] = lanes(warps(vals))[0]
    return sums


SIM_SHAPES = [(5, 20), (3, 2), (2, 33), (9, 127), (4, 128), (4, 129), (3, 1000), (2, 4099), (6, 8195),
              (1, 9000), (2, 17000), (1, 140_001)]


@pytest.mark.parametrize("release", model.RELEASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vectorised_model_equals_thread_simulation(release, dtype):
    rng = torch.Generator().manual_seed(3)
    seen = set()
    for rows, cols in SIM_SHAPES:
        cfg = config(rows, cols, dtype, release=release, sms=8 if cols > 100_000 else 132)
        seen |= {k for k, v in cfg.branches().items() if v}
        # Large dynamic range: every rounding shows.
        y = (torch.randn(rows, cols, generator=rng) * torch.exp2(torch.randint(-12, 13, (rows, cols), generator=rng)))
        q = y.to(dtype).float()
        ours = model._row_sums(q, cfg, release)
        sim = simulate_row_sums(q.numpy(), cfg, release)
        assert np.array_equal(ours.numpy(), sim), f"{rows} x {cols} {dtype} {release}: {ours} vs {sim}"
    wanted = {"vectorized", "not_vectorized", "misaligned_head", "vector_tail", "split_across_warps",
              "warp_per_row", "sub_warp_block", "wide_block_x", "ctas_gt_1"}
    assert wanted <= seen, f"branches not covered: {wanted - seen}"


# ---------------------------------------------------------------------------------------------
# Exactness: integer data whose every partial sum is exact gives the exact sum, rounded once, in
# any order: torch's CPU bits for float32 and float64, and for 16-bit types the exact sum rounded
# to the dtype (the CPU's own 16-bit sum of a 300000-element row is not exact, so it is no oracle).

EXACT_SHAPES = [(1, 1), (6, 1), (7, 2), (1000, 20), (9, 127), (9, 128), (9, 129), (100, 8191), (64, 8192),
                (3, 200003), (16, 70001), (1, 300000)]


@pytest.mark.parametrize("release", model.RELEASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_integer_data_gives_the_exact_sum(release, dtype):
    gen = torch.Generator().manual_seed(11)
    seen = set()
    for rows, cols in EXACT_SHAPES:
        cfg = config(rows, cols, dtype, release=release, sms=40, threads=1024)
        seen |= {k for k, v in cfg.branches().items() if v}
        # |y| <= 16, halved exactly: representable in bf16 and fp16; row sums < 2**23.
        y = torch.randint(-16, 17, (rows, cols), generator=gen).to(dtype)
        ours = model.reference_tail(y, 2, 0.5, release=release, multiprocessors=40, max_threads_per_multiprocessor=1024)
        exact = ((y.double() / 2).sum(1, keepdim=True).to(dtype).double() * 0.5).to(dtype)
        assert ours.dtype == dtype and ours.shape == (rows, 1)
        assert torch.equal(ours, exact), f"{rows} x {cols} {dtype} {release}"
        if dtype in (torch.float32, torch.float64):
            assert torch.equal(ours, torch.sum(y / 2, 1, keepdim=True) * 0.5)
    assert {"ctas_gt_1", "misaligned_head", "not_vectorized", "warp_per_row", "one_column"} <= seen


def test_quotient_rounds_through_the_reciprocal():
    # y / 3 on CUDA is y * fl(1/3): 16-bit quotients round once to float, once to the dtype.
    y = torch.tensor([[1.0, 5.0, 7.0, 10.0]])
    inv = torch.tensor(1.0) / torch.tensor(3.0)
    expected = ((y * inv).sum(1, keepdim=True) * torch.tensor(0.7, dtype=torch.float32))
    got = model.reference_tail(y, 3.0, 0.7, release=NEW, **H100)
    # four terms into four lanes of one warp: lanes 0..3 hold one term each; 2.10+ folds (0+2)+(1+3).
    q = y * inv
    lane_sum = (q[0, 0] + q[0, 2]) + (q[0, 1] + q[0, 3])
    assert torch.equal(got, (lane_sum * torch.tensor(0.7)).reshape(1, 1))
    assert got.shape == expected.shape


@pytest.mark.parametrize("divisor", [1e-3, -1e-3, 0.0, -0.0])
def test_reciprocal_per_release(divisor):
    # 2.10+ multiplies by float(1 / divisor) taken in double (1e-3: 1000.0), earlier releases
    # by float(1) / float(divisor) (1e-3: 999.99994); one column, so no order is involved.
    y = torch.tensor([[1.0]])
    new = model.reference_tail(y, divisor, 1.0, release=NEW, **H100)
    old = model.reference_tail(y, divisor, 1.0, release=OLD, **H100)
    in_double = torch.tensor(1.0 / divisor if divisor else math.copysign(math.inf, divisor), dtype=torch.float32)
    assert torch.equal(new, in_double.reshape(1, 1))
    assert torch.equal(old, (torch.tensor(1.0) / torch.tensor(divisor)).reshape(1, 1))
    if divisor:
        assert not torch.equal(new, old)


# ---------------------------------------------------------------------------------------------
# The two release groups give different bits where their orders differ.

def cancelling_rows(rows: int, cols: int, big: float, tiny: float, seed: int) -> torch.Tensor:
    """Rows of zeros with +big, -big and ten values too small to survive an addition to big, at
    random places: the row sums count the tiny values that meet big after -big, so any change
    of order shows even after rounding to a 16-bit type."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.zeros(rows, cols)
    for r in range(rows):
        places = torch.randperm(cols, generator=gen)[:12]
        y[r, places[0]], y[r, places[1]], y[r, places[2:]] = big, -big, tiny
    return y


@pytest.mark.parametrize("dtype, cols", [(torch.float32, 4096), (torch.float32, 128), (torch.bfloat16, 8192),
                                         (torch.bfloat16, 130), (torch.float16, 1000)])
def test_release_groups_differ(dtype, cols):
    if dtype == torch.float32:
        y = torch.randn(256, cols, generator=torch.Generator().manual_seed(5))
    else:
        # fp32 sums of 16-bit randn rows rarely differ by enough to round differently.
        big, tiny = (2.0**24, 1.0) if dtype == torch.bfloat16 else (2.0**15, 2.0**-10)
        y = cancelling_rows(256, cols, big, tiny, seed=5).to(dtype)
    old = model.reference_tail(y, 2, 1.5, release=OLD, **H100)
    new = model.reference_tail(y, 2, 1.5, release=NEW, **H100)
    assert (old != new).sum() >= 10, f"{dtype} x {cols}: the two groups should disagree on many rows"


def test_shuffle_direction_alone_changes_bits():
    # 32 lanes, one value each (rows of 32 columns, warp per row): only the shuffle tree differs.
    y = torch.randn(512, 32, generator=torch.Generator().manual_seed(6)) * 1000
    q = (y * 0.5)
    cfg = config(512, 32, release=NEW)
    assert (cfg.block_width, cfg.split_across_warps, cfg.vectorized) == (32, False, False)
    old = model._row_sums(q, config(512, 32, release=OLD), OLD)
    new = model._row_sums(q, cfg, NEW)
    assert (old != new).any()
    # Adjacent pairs (ascending offsets) against folded halves (descending), by hand for row 0.
    v = list(q[0])
    while len(v) > 1:
        v = [v[i] + v[i + 1] for i in range(0, len(v), 2)]
    assert torch.equal(old[0], v[0])
    w = list(q[0])
    while len(w) > 1:
        h = len(w) // 2
        w = [w[i] + w[i + h] for i in range(h)]
    assert torch.equal(new[0], w[0])


# ---------------------------------------------------------------------------------------------
# Bad input.

def test_validation_errors():
    y = torch.randn(4, 8)
    with pytest.raises(ValueError, match="release"):
        model.reference_tail(y, 2, 1.5, release="2.11", **H100)
    with pytest.raises(TypeError, match="float32"):
        model.reference_tail(y.to(torch.int32), 2, 1.5, release=NEW, **H100)
    with pytest.raises(ValueError, match="2-D"):
        model.reference_tail(torch.randn(8), 2, 1.5, release=NEW, **H100)
    with pytest.raises(ValueError, match="2-D"):
        model.reference_tail(torch.randn(2, 3, 4), 2, 1.5, release=NEW, **H100)
    with pytest.raises(ValueError, match="non-empty"):
        model.reference_tail(torch.randn(0, 8), 2, 1.5, release=NEW, **H100)
    with pytest.raises(TypeError, match="divisor"):
        model.reference_tail(y, True, 1.5, release=NEW, **H100)
    with pytest.raises(TypeError, match="scale"):
        model.reference_tail(y, 2, "1.5", release=NEW, **H100)
    with pytest.raises(ValueError, match="2\\*\\*31 bytes"):
        model.launch_config(2**16, 2**15, torch.float32, release=NEW, multiprocessors=132)
    # 32-bit indexing counts bytes: 2**29 + 2**15 floats are too many, as halves they fit.
    with pytest.raises(ValueError, match="2\\*\\*31 bytes"):
        model.launch_config(2**15, 2**14 + 1, torch.float32, release=NEW, multiprocessors=132)
    assert model.launch_config(2**15, 2**14 + 1, torch.float16, release=NEW, multiprocessors=132).ctas_per_row == 1
    with pytest.raises(ValueError, match="SMs"):
        model.launch_config(4, 8, torch.float32, release=NEW, multiprocessors=0)


def test_strided_input_uses_a_fresh_quotient():
    # The quotient is contiguous whatever y's layout: a misaligned slice and a padded stride give
    # the bits of the same values stored contiguously.
    big = torch.randn(50, 5003, generator=torch.Generator().manual_seed(8))
    sliced = big[:, 3:]
    assert torch.equal(model.reference_tail(sliced, 2, 1.5, release=NEW, **H100),
                       model.reference_tail(sliced.contiguous(), 2, 1.5, release=NEW, **H100))


# ---------------------------------------------------------------------------------------------
# GPU: the model against torch's own CUDA tail for the installed release (a light sweep; the
# evidence script runs hundreds of shapes).

GPU_SHAPES = [(1, 1), (5, 1), (7, 2), (1000, 20), (300, 31), (64, 127), (64, 128), (64, 129), (1000, 8191),
              (1024, 8192), (128, 8192), (3, 200003), (16, 300000), (1, 1_000_000), (2, 65537), (4096, 1000),
              (20000, 300), (513, 4097), (8, 33333), (40, 100_000), (100, 5000), (2, 300), (33, 777), (1, 129)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_model_matches_torch_cuda(dtype):
    props = torch.cuda.get_device_properties(0)
    release = model.release_group(torch.__version__)
    gen = torch.Generator(device="cuda").manual_seed(0)
    failures = []
    for rows, cols in GPU_SHAPES:
        big = torch.randn(rows, cols + 3, device="cuda", dtype=dtype, generator=gen)
        for name, y in (("contiguous", big[:, :cols]), ("misaligned slice", big[:, 1:cols + 1])):
            for divisor, scale in ((2, 1.5), (3.0, 0.7)):
                ref = torch.sum(y / divisor, 1, keepdim=True) * scale
                ours = model.reference_tail(y, divisor, scale, release=release,
                                            multiprocessors=props.multi_processor_count,
                                            max_threads_per_multiprocessor=props.max_threads_per_multi_processor)
                if not torch.equal(ours, ref):
                    failures.append(f"{name} {rows}x{cols} /{divisor}*{scale}: {(ours != ref).sum().item()} differ")
    assert not failures, f"{len(failures)} cases differ, e.g. {failures[:5]}"


def test_random_shapes_run_fast_on_cpu():
    # The model stays cheap enough for the evidence script: a mixed batch of shapes in well under a second each.
    rng = random.Random(2)
    for _ in range(6):
        rows, cols = rng.randint(1, 300), rng.randint(1, 20000)
        y = torch.randn(rows, cols)
        out = model.reference_tail(y, 2, 1.5, release=OLD, **H100)
        assert out.shape == (rows, 1) and torch.isfinite(out).all()


def test_header_reader_keeps_what_a_cuda_wheel_compiles():
    # 2.11's block_x_reduce picks its shuffle loop with `#if defined(USE_ROCM) ||
    # defined(FBCODE_CAFFE2)`; the reader once kept both loops and named no group.
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import release_headers

    text = "\n".join(["a", "#if defined(USE_ROCM) || defined(FBCODE_CAFFE2)", "rocm", "#else", "cuda", "#endif",
                      "#ifdef USE_ROCM", "rocm", "#endif", "#if defined(USE_ROCM)", "rocm", "#elif OTHER", "other",
                      "#endif", "#if CUDA_VERSION >= 12000", "versioned", "#endif", "b"])
    assert release_headers.cuda_lines(text) == ["a", "cuda", "other", "versioned", "b"]


def test_installed_torch_header_is_in_the_group_its_version_names():
    # The installed wheel's own Reduce.cuh (CUDA branches) against the version rule the
    # library and the model use: a release that moved a marker would fail here.
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "release_headers.py"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if "header says" not in proc.stdout:
        pytest.skip("this torch wheel ships no Reduce.cuh")
    group = model.release_group(torch.__version__)
    assert f"header says {group}, version says {group}" in proc.stdout
