"""CPU: kernels.div_sum_scale against the reference tail, bit for bit (torch.equal)."""

import pytest
import torch

from kernels import div_sum_scale, div_sum_scale_reference
from tests.cases import layouts, random_shapes, same_bits as _same

# 320 shapes, rows 0..5000 and columns 0..70000 (primes and powers of two among them).
SHAPES = random_shapes(316, seed=7, max_rows=5000, max_cols=70000, max_numel=3_000_000) + [
    (0, 8192), (5000, 0), (5000, 1), (1, 70000)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_shapes_contiguous_and_sliced(dtype):
    gen = torch.Generator().manual_seed(1)
    failures = []
    for rows, cols in SHAPES:
        big = torch.randn(rows, cols + 2, dtype=dtype, generator=gen)
        for name, y in (("contiguous", big[:, :cols].contiguous()), ("slice", big[:, 1 : cols + 1])):
            if not _same(div_sum_scale(y, 2, 1.5), div_sum_scale_reference(y, 2, 1.5)):
                failures.append(f"{name} {rows}x{cols}")
    assert not failures, f"{len(failures)} of {2 * len(SHAPES)} differ, e.g. {failures[:5]}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types(dtype):
    gen = torch.Generator().manual_seed(2)
    for rows, cols in random_shapes(60, seed=3, max_rows=3000, max_cols=70000, max_numel=1_000_000):
        y = torch.randn(rows, cols + 1, dtype=dtype, generator=gen)[:, 1:]
        assert _same(div_sum_scale(y, 2, 1.5), div_sum_scale_reference(y, 2, 1.5)), (rows, cols)


# Every 16-bit pattern (subnormals, infinities and NaNs among them), in single columns, rows shorter than a
# vector and of whole vectors: each quotient rounds to the dtype as the reference's does (float16:
# tail_cpu_16bit.cpp's F16C lanes).
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("divisor", [2.0, 3.0, 1e-3, 7e4])
def test_every_16_bit_value(dtype, divisor):
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    for cols in (1, 7, 16, 100, 4096):
        y = every[: every.numel() // cols * cols].reshape(-1, cols)
        assert _same(div_sum_scale(y, divisor, 0.7), div_sum_scale_reference(y, divisor, 0.7)), cols


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
@pytest.mark.parametrize("cols", [32767, 32768, 65536, 100_003, 1_000_003])
def test_single_long_row_follows_the_thread_split(threads, cols):
    # One output: torch splits the row across threads; the split is part of the order.
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            y = torch.randn(1, cols, dtype=dtype)
            assert _same(div_sum_scale(y, 2, 1.5), div_sum_scale_reference(y, 2, 1.5)), dtype
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("divisor,scale", [(2, 1.5), (3, 0.7), (-0.5, 2.0), (7.25, -1e-3), (0, 1.5),
                                           (float("inf"), 1.0), (1e-30, 1e30), (2, float("nan"))])
def test_divisors_and_scales(divisor, scale):
    y = torch.randn(300, 4099)
    assert _same(div_sum_scale(y, divisor, scale), div_sum_scale_reference(y, divisor, scale))


# Divisors that are not exact in 16 bits or whose reciprocal rounds differently in float and
# in double (the CUDA reference multiplies by a reciprocal; the CPU one divides).
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("divisor", [1e-3, 0.1, 1 / 3, 7.3, 70000.0, 1e-8, -13.0])
def test_divisors_inexact_in_the_dtype(dtype, divisor):
    y = torch.randn(37, 4099, dtype=dtype) * 10
    assert _same(div_sum_scale(y, divisor, 1.5), div_sum_scale_reference(y, divisor, 1.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_layouts(dtype):
    for name, y in layouts(torch.randn(700, 3000).to(dtype)).items():
        assert _same(div_sum_scale(y, 2, 1.5), div_sum_scale_reference(y, 2, 1.5)), name


def test_the_kernel_refuses_strided_16_bit_rows_which_the_glue_copies():
    from kernels import tail_cpu

    kernel = tail_cpu._kernel or tail_cpu._load()
    y = torch.randn(4, 64, dtype=torch.float16)
    out = torch.empty(4, 1, dtype=torch.float16)

    def call(dtype, col_stride):  # 4 rows of 32 columns, every col_stride-th element of y's rows
        return kernel(tail_cpu.DTYPE_CODE[dtype], y.data_ptr(), out.data_ptr(), 4, 32, 64, col_stride, 1, 2.0, 1.5, 1)

    assert call(torch.float16, 2) == -2 and call(torch.bfloat16, 2) == -2
    assert call(torch.float16, 1) == 0


# Rows of -0 at widths on both sides of the short-row path (fewer than 16 groups of four vectors, where the
# cascade's empty levels are skipped) and of one vector: the sign of each zero is the reference's.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_signed_zero_rows_at_every_cascade_depth(dtype):
    for cols in (2, 7, 8, 9, 16, 33, 63, 64, 65, 255, 256, 257, 511, 512, 513, 1024, 2048, 4097):
        y = torch.full((6, cols), -0.0, dtype=dtype)
        y[1, 0] = 1.0  # a row that is not all zeros
        for divisor, scale in ((2.0, 1.5), (-3.0, 1.5), (2.0, -0.5)):
            ours, ref = div_sum_scale(y, divisor, scale), div_sum_scale_reference(y, divisor, scale)
            assert _same(ours, ref) and torch.equal(torch.signbit(ours), torch.signbit(ref)), (cols, divisor, scale)


# 16-bit rows at every width up to five vectors and around the cascade's first level (1024 elements): the
# register path for rows below it (tail_cpu_16bit.cpp, short_row_sum), its bound, and its quotients' rounding.
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_rows_on_both_sides_of_the_first_cascade_level(dtype):
    gen = torch.Generator().manual_seed(5)
    for cols in [*range(1, 81), *range(1000, 1050)]:
        # A wide range of magnitudes, so that float sums round and their order shows.
        y = (torch.randn(9, cols, generator=gen) * 2.0 ** torch.randint(-12, 12, (9, cols), generator=gen)).to(dtype)
        y[1, cols // 2] = float("inf")
        y[2, cols - 1] = float("nan")
        y[3, :] = torch.finfo(dtype).max
        for divisor in (2.0, 3.0, 1e-3):
            assert _same(div_sum_scale(y, divisor, 1.5), div_sum_scale_reference(y, divisor, 1.5)), (cols, divisor)


# Rows whose 16-bit result shows the order in which the cascade's four accumulators meet: lane 0 holds
# 1 + 2^-(m+1) (a tie of the dtype, m its mantissa bits) and two of the others 2^-24 each. Added one at a
# time, each 2^-24 is half a float ulp and rounds away, and the tie rounds to 1; the two 2^-24 added first
# would make 2^-23 and lift the result to 1 + 2^-m.
@pytest.mark.parametrize("dtype,mantissa", [(torch.float16, 10), (torch.bfloat16, 7)])
def test_16_bit_rows_keep_the_accumulators_order(dtype, mantissa):
    for cols in (64, 100, 1000):
        y = torch.zeros(3, cols, dtype=dtype)
        y[:, 0], y[:, 8] = 1.0, 2.0 ** -(mantissa + 1)  # vector 0, lane 0: accumulator 0
        y[0, 16], y[0, 32] = 2.0 ** -24, 2.0 ** -24  # accumulators 1 and 2
        y[1, 32], y[1, 48] = 2.0 ** -24, 2.0 ** -24  # 2 and 3
        y[2, 16], y[2, 48] = 2.0 ** -24, 2.0 ** -24  # 1 and 3
        ref = div_sum_scale_reference(y, 1.0, 1.0)
        assert torch.equal(ref, torch.ones_like(ref))
        assert torch.equal(div_sum_scale(y, 1.0, 1.0), ref), cols


# Packed rows shorter than one vector (their quotients a block of rows at a time, tail_cpu.h), every width,
# blocks cut mid-thread-range, and the same widths as padded rows (the per-row path).
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_rows_shorter_than_one_vector(dtype):
    gen = torch.Generator().manual_seed(13)
    for cols in range(2, 16):
        for rows in (1, 7, 1025, 40000):
            y = (torch.randn(rows, cols + 1, generator=gen) * 2.0 ** torch.randint(-12, 12, (rows, cols + 1),
                                                                                      generator=gen)).to(dtype)
            y[0, 0], y[-1, -1] = float("nan"), float("inf")
            for view in (y[:, :cols].contiguous(), y[:, :cols]):
                for divisor in (2.0, 3.0):
                    ours, ref = div_sum_scale(view, divisor, 1.5), div_sum_scale_reference(view, divisor, 1.5)
                    assert _same(ours, ref), (cols, rows, divisor)


# One column: the elementwise path (tail_cpu.h, cols == 1), contiguous and as a strided view, on both sides
# of the row split across threads; -0, NaN and inf among the values.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_single_column_rows(dtype):
    gen = torch.Generator().manual_seed(11)
    for rows in (1, 5, 1000, 70001):
        y = (torch.randn(rows, 3, generator=gen) * 100).to(dtype)
        y[0, :] = -0.0
        if rows > 2:
            y[1, :], y[2, :] = float("nan"), float("-inf")
        for column in (y[:, 1:2], y[:, 1:2].contiguous()):
            for divisor, scale in ((2.0, 1.5), (3.0, -0.7), (1e-3, 2.0)):
                ours, ref = div_sum_scale(column, divisor, scale), div_sum_scale_reference(column, divisor, scale)
                assert _same(ours, ref), (rows, divisor, scale)
                assert torch.equal(torch.signbit(ours[0]), torch.signbit(ref[0]))


def test_nan_inf_and_signed_zero():
    y = torch.randn(64, 5000)
    y[3, 17] = float("nan")
    y[5, 100] = float("inf")
    y[6, 1], y[6, 2] = float("inf"), float("-inf")
    y[7, :] = torch.finfo(torch.float32).max
    y[8, :] = -0.0
    ours, ref = div_sum_scale(y, 2, 1.5), div_sum_scale_reference(y, 2, 1.5)
    assert _same(ours, ref)
    assert torch.equal(torch.signbit(ours), torch.signbit(ref))
