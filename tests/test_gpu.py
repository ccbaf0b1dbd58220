"""CUDA: the fused kernel against the reference, bit for bit (torch.equal)."""

import random

import pytest
import torch

import kernels
from kernels import div_sum_scale, div_sum_scale_reference
from tests.cases import assert_same_gradients, layouts, random_shapes, same_bits, seeded_pair

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def _pair(y, divisor=2, scale=1.5):
    return div_sum_scale(y, divisor, scale), div_sum_scale_reference(y, divisor, scale)


def _assert_same(ours, ref, what):
    assert same_bits(ours, ref), (
        f"{what}: {(ours != ref).sum().item()} of {ref.numel()} outputs differ"
        if ours.shape == ref.shape else f"{what}: shape {tuple(ours.shape)} vs {tuple(ref.shape)}"
    )


# 320 shapes over rows 1..20000 and columns 1..300000, plus 24 with 1..8 rows and
# over 100000 columns (several blocks per row: the global-reduction path).
SWEEP = random_shapes(320, seed=14, max_rows=20000, max_cols=300000, max_numel=12_000_000, min_rows=1, min_cols=1)
FEW_LONG_ROWS = [(random.Random(i).randint(1, 8), random.Random(100 + i).randint(100_001, 300_000)) for i in range(24)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_sweep_contiguous_and_misaligned(dtype):
    gen = torch.Generator(device="cuda").manual_seed(0)
    failures = []
    for rows, cols in SWEEP + FEW_LONG_ROWS:
        big = torch.randn(rows, cols + 3, device="cuda", dtype=dtype, generator=gen)
        for name, y in (("contiguous", big[:, :cols].contiguous()), ("misaligned slice", big[:, 1 : cols + 1])):
            ours, ref = _pair(y)
            if not torch.equal(ours, ref):
                failures.append(f"{name} {rows}x{cols}: {(ours != ref).sum().item()} differ")
    assert not failures, f"{len(failures)} shapes differ, e.g. {failures[:5]}"


# Shapes the lean path takes (one 32 x 16 block per row, rows of whole aligned vectors):
# row counts around one wave of resident blocks and odd ones (two-row blocks leave one
# over), row lengths that are one chunk per thread or several, padded row strides; 16-bit
# rows of 15-16 vectors per thread (61448, 65536) keep eight in flight, 61448 with one
# thread's last round longer than the others', and so do rows of 9-10 (36872) where they
# are no more than the SMs (a last round of one or two vectors).
LEAN_ROWS = [16, 17, 100, 527, 528, 529, 1024, 2001]
LEAN_COLS = [8192, 8200, 12288, 16392, 36872, 61448, 65536]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_lean_path_shapes(dtype):
    gen = torch.Generator(device="cuda").manual_seed(1)
    failures = []
    for rows in LEAN_ROWS:
        for cols in LEAN_COLS:
            if rows * cols > 40_000_000:
                continue
            big = torch.randn(rows, cols + 8, device="cuda", dtype=dtype, generator=gen)
            for name, y in (("contiguous", big[:, :cols].contiguous()), ("padded rows", big[:, :cols])):
                ours, ref = _pair(y)
                if not torch.equal(ours, ref):
                    failures.append(f"{name} {rows}x{cols}: {(ours != ref).sum().item()} differ")
    assert not failures, f"{len(failures)} shapes differ, e.g. {failures[:5]}"


# The lean kernel's other shapes: a warp per row (rows of 128 to 8191 columns, at least 16 rows) and
# rows that start mid-vector, contiguous or with row strides padded by whole vectors (padding by 3
# takes the general kernels). Between them they take every leaf of the dispatch: tests/test_dispatch.py
# names the leaf of most of these shapes.
WARP_AND_SHIFTED = [(16, 128), (17, 129), (100, 1023), (512, 1024), (2049, 1000), (8192, 1024), (300, 4097),
                    (1000, 8191), (529, 8193), (64, 12289), (40, 65535), (8, 8191), (16, 255), (128, 6000),
                    (1024, 4096), (1025, 4096), (16, 7000), (1000, 4095), (4096, 2048), (4097, 2048),
                    (300, 10007), (64, 10240), (17, 8196), (64, 2049), (64, 2048), (5000, 1500), (4100, 1001),
                    (4097, 512), (4097, 511), (1024, 2052), (7, 8188), (512, 8000), (1024, 6144), (600, 4100),
                    (1024, 5000), (512, 5000), (700, 4100), (900, 4100), (200, 8000), (320, 6000), (33, 57345),
                    (1024, 2049), (128, 3001), (512, 5001), (256, 8001), (1200, 5000), (1300, 4097)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_lean_warp_rows_and_shifted_rows(dtype):
    gen = torch.Generator(device="cuda").manual_seed(2)
    failures = []
    for rows, cols in WARP_AND_SHIFTED:
        big = torch.randn(rows, cols + 16, device="cuda", dtype=dtype, generator=gen)
        for pad in (0, 8, 16, 3):
            y = big[:, :cols].contiguous() if pad == 0 else big.view(-1)[: rows * (cols + pad)].view(rows, cols + pad)[:, :cols]
            ours, ref = _pair(y)
            if not torch.equal(ours, ref):
                failures.append(f"pad {pad} {rows}x{cols}: {(ours != ref).sum().item()} differ")
    assert not failures, f"{len(failures)} shapes differ, e.g. {failures[:5]}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape", [(1024, 8192), (1, 1), (1, 127), (1, 128), (1, 129), (3, 128), (37, 199), (5, 1_000_003), (16384, 8192), (1024, 65536)]
)
def test_named_shapes(dtype, shape):
    y = torch.randn(shape, device="cuda", dtype=dtype)
    _assert_same(*_pair(y), f"{dtype} {shape}")


# 1e-3: a divisor whose reciprocal in float differs from its reciprocal in double
# rounded to float (which torch 2.10+ multiplies by; kOrder.reciprocal_in_double).
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("divisor,scale", [(2, 1.5), (3, 0.7), (-0.5, 2.0), (7.25, -1e-3), (0, 1.5), (float("inf"), 1.0),
                                           (1e-3, 1.5), (0.1, 0.3), (-13.0, 1.5), (70000.0, 3.0)])
def test_divisors_and_scales(dtype, divisor, scale):
    y = torch.randn(300, 4099, device="cuda", dtype=dtype)
    _assert_same(*_pair(y, divisor, scale), f"{dtype} divisor {divisor} scale {scale}")


def test_layouts():
    for name, y in layouts(torch.randn(700, 3000, device="cuda")).items():
        _assert_same(*_pair(y), name)


def _16bit_across_the_exponent_range(dtype, rows, cols, seed):
    """Finite values whose exponents sweep the type's whole range row by row: rows of
    subnormals, of the largest values, and everything between, both signs."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    exponent_bits = 5 if dtype == torch.float16 else 8
    mantissa_bits = 15 - exponent_bits
    top = (1 << exponent_bits) - 2  # the largest finite exponent field
    band = (torch.arange(rows, device="cuda") * (top + 1) // rows).unsqueeze(1)
    exponent = (band + torch.randint(-1, 2, (rows, cols), device="cuda", generator=gen)).clamp(0, top)
    mantissa = torch.randint(0, 1 << mantissa_bits, (rows, cols), device="cuda", generator=gen)
    sign = torch.randint(0, 2, (rows, cols), device="cuda", generator=gen)
    bits = (sign << 15) | (exponent << mantissa_bits) | mantissa
    return bits.to(torch.int32).to(torch.int16).view(dtype)  # int16 keeps the low 16 bits


# Powers of two inside the packed multiply's range (packed_quotient_exact: 1 / divisor
# = 2^k, half -14 <= k <= 15, bfloat16 -16 <= k <= 127), at its edges and outside it
# (2^-100 overflows most rows of bfloat16 quotients), and divisors that are not powers of two.
@pytest.mark.parametrize("divisor", [2, 0.5, 4096, 2**-14, 2**-15, 2**14, 2**15, 2**16, 2**17, 2**-20, 2**-100, 3,
                                     1e-3, -2])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16bit_quotients_across_the_exponent_range(dtype, divisor):
    y = _16bit_across_the_exponent_range(dtype, 96, 8192, seed=7)
    views = {"block per row": y, "warp per row": y.view(768, 1024), "rows of 8191": y[:, 1:].contiguous(),
             "misaligned slice": y[:, 1:]}
    for name, view in views.items():
        _assert_same(*_pair(view, divisor, 1.5), f"{dtype} divisor {divisor}, {name}")


def test_nan_inf_propagate():
    y = torch.randn(64, 5000, device="cuda")
    y[3, 17] = float("nan")
    y[5, 100] = float("inf")
    y[6, 1] = float("inf")
    y[6, 2] = float("-inf")
    y[7, :] = torch.finfo(torch.float32).max
    _assert_same(*_pair(y), "nan/inf")


def test_model_matches_reference_200_seeded_trials():
    import reference
    from modelnew import ModelNew

    ref_model, new_model = (m.cuda() for m in seeded_pair(42, reference.get_init_inputs(), ModelNew))
    exact = 0
    for trial in range(200):
        torch.manual_seed(1000 + trial)
        x = reference.get_inputs()[0].cuda()
        exact += torch.equal(ref_model(x), new_model(x))
    assert exact == 200


def test_compile_and_cuda_graph_give_eager_bits():
    y = torch.randn(1024, 8192, device="cuda")
    eager = div_sum_scale(y, 2, 1.5)
    compiled = torch.compile(lambda t: div_sum_scale(t, 2, 1.5), fullgraph=True)(y)
    assert torch.equal(compiled, eager)
    static = y.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        div_sum_scale(static, 2, 1.5)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = div_sum_scale(static, 2, 1.5)
    static.copy_(torch.randn_like(static))
    graph.replay()
    assert torch.equal(out, div_sum_scale_reference(static, 2, 1.5))


def test_model_compiled_fullgraph_and_gradients():
    from modelnew import ModelNew

    ref_model, new_model = (m.cuda() for m in seeded_pair(0, [512, 1024, 1.5], ModelNew))
    x = torch.rand(256, 512, device="cuda")
    assert torch.equal(torch.compile(new_model, fullgraph=True)(x), new_model(x))
    assert_same_gradients(ref_model, new_model, x)


def test_other_stream_and_device_guard():
    y = torch.randn(513, 777, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        ours = div_sum_scale(y, 2, 1.5)
    side.synchronize()
    _assert_same(ours, div_sum_scale_reference(y, 2, 1.5), "side stream")


def test_opcheck_cuda():
    y = torch.randn(33, 4097, device="cuda", requires_grad=True)
    torch.library.opcheck(kernels.ops.OP, (y, 2.0, 1.5))
    torch.library.opcheck(kernels.ops.OP, (y, 2.0, 1.5, False))


# A plain launch (pdl=False, ModelNew's behind its GEMM) takes the same kernels: the same bits, at a shape
# of each leaf (the fp32 rows of 8192 past one wave then skip the warming), tail after tail too.
PLAIN_SHAPES = [(1024, 8192), (128, 8192), (300, 10007), (1024, 12288), (40, 65535), (512, 8000), (1024, 5000),
                (1024, 6144), (1000, 4095), (1024, 4096), (8192, 1024), (4096, 2048), (4097, 511), (1000, 8191),
                (1, 300007)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_plain_launch_has_the_same_bits(dtype):
    gen = torch.Generator(device="cuda").manual_seed(3)
    for rows, cols in PLAIN_SHAPES:
        y = torch.randn(rows, cols, device="cuda", dtype=dtype, generator=gen)
        ref = div_sum_scale_reference(y, 2, 1.5)
        outs = [div_sum_scale(y, 2, 1.5, pdl=pdl) for pdl in (False, True, False, False)]
        for out in outs:
            _assert_same(out, ref, f"{dtype} {rows}x{cols}")


def test_back_to_back_calls_read_what_the_previous_kernel_wrote():
    # The lean kernel launches as a programmatic dependent (it may start while the
    # previous kernel drains) and must still read y only after that kernel's writes.
    y = torch.empty(1024, 8192, device="cuda")
    sources = [torch.randn(1024, 8192, device="cuda") for _ in range(4)]
    outs = []
    for src in sources * 3:
        y.copy_(src)
        outs.append(div_sum_scale(y, 2, 1.5))
    for src, out in zip(sources * 3, outs):
        assert torch.equal(out, div_sum_scale_reference(src, 2, 1.5))
    # The warp-per-row kernels (staged, deep) launch the same way.
    for shape in [(128, 6000), (1024, 2048)]:
        y = torch.empty(shape, device="cuda")
        sources = [torch.randn(shape, device="cuda") for _ in range(3)]
        outs = []
        for src in sources * 2:
            y.copy_(src)
            outs.append(div_sum_scale(y, 2, 1.5))
        for src, out in zip(sources * 2, outs):
            assert torch.equal(out, div_sum_scale_reference(src, 2, 1.5)), shape
    # fp32 rows of 8192, more than one wave of blocks, back to back: their first blocks ask
    # L2 for their row before the wait (warm_behind_warmed_launch); fewer rows do not warm.
    one_wave = 4 * torch.cuda.get_device_properties(0).multi_processor_count
    ys = [torch.randn(rows, 8192, device="cuda") for rows in (1024, 1024, one_wave + 1, 264, 2048, one_wave)]
    outs = [div_sum_scale(y, 2, 1.5) for y in ys * 2]
    for y, out in zip(ys * 2, outs):
        assert torch.equal(out, div_sum_scale_reference(y, 2, 1.5)), tuple(y.shape)
    # A warmed call reading what the kernel just before it writes: that kernel lets its
    # dependents launch early, so the warmed call's first blocks may ask L2 for their rows
    # while it still writes them (the record of the warmed call before is recent enough).
    rows_b = one_wave + 8
    a_in = torch.randn(rows_b * 8192, 2, device="cuda")
    div_sum_scale(ys[0], 2, 1.5)
    chained = div_sum_scale(div_sum_scale(a_in, 2, 1.5).view(rows_b, 8192), 2, 1.5)
    expected = div_sum_scale_reference(div_sum_scale_reference(a_in, 2, 1.5).view(rows_b, 8192), 2, 1.5)
    assert torch.equal(chained, expected)
    # Lean after lean: the first call's output, viewed as 16 rows of 8192, feeds the second.
    y1 = torch.randn(16 * 8192, 8192, device="cuda", dtype=torch.bfloat16)
    chained = div_sum_scale(div_sum_scale(y1, 2, 1.5).view(16, 8192), 2, 1.5)
    expected = div_sum_scale_reference(div_sum_scale_reference(y1, 2, 1.5).view(16, 8192), 2, 1.5)
    assert torch.equal(chained, expected)
