"""Exercise every CUDA path on odd, misaligned and strided shapes, for
`compute-sanitizer --tool memcheck|racecheck|synccheck|initcheck python scripts/sanitize_cuda.py`.

The paths: the tail's lean kernel with a 32 x 16 block per row (1024 x 8192, 1025 x 8192,
16 x 16392; rows starting mid-vector: 1000 x 8191; five vectors per thread: 300 x 10007;
eight vectors in flight, 16-bit: 17 x 61448, 16 x 57345 and 16 x 40001 starting mid-vector)
or a warp per row (two vectors per lane: 4100 x 300; deep: 2048 x 1024, 1024 x 2048, 129 x 1031
starting mid-vector, where 16-bit rows take the split-lane kernel, 8 loads in flight, and with
16 at 128 x 6000, 7 x 3710 and 33 x 4097 starting mid-vector; eight per lane over many rows,
fp32: 4100 x 1001 starting mid-vector; each lane's four accumulators on four threads,
128-1536 rows on a vector boundary, 32, 48 or 64 loads in flight: 512 x 6200, 900 x 4100
and 128 x 6000, 660 x 6000 and 200 x 8000, and starting mid-vector 1000 x 4095, 300 x 4097,
256 x 8001;
the same staged in shared memory, by one bulk copy on sm_90: 520 x 6000, 7 x 8188, 33 x 4097
starting mid-vector), the general split-row kernel (misaligned or strided rows), several blocks
per row plus the combine kernel (few long rows), one warp per row (strided rows), tiny rows
(fewer than 32 threads), and the column-sum and matrix-vector kernels (the matrix-vector
product's resident kernel: 1024 x 8192, 1025 x 8192, 3001 x 4104).
A block of the lean path may also run back to back with the previous call
(programmatic launch), which consecutive calls here exercise.

The hybrid's kernels: the row statistics and cut (one and several blocks), rows_gemm's two tiles
(192 x 64 over whole slabs or bounds-checked, 128 x 128; vector and scalar loads; no, some and
every row gathered; zeros elsewhere), hybrid_forward with the gathered tail (block rows of one
chunk and looped) and with the whole tail through the dispatcher, and the calibration's probe.
Exits non-zero if any result differs from the reference."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernels import colsum, colsum_matvec, div_sum_scale, div_sum_scale_reference, hybrid_ops  # noqa: E402

SHAPES = [(1, 2), (1, 127), (1, 128), (1, 129), (3, 7049), (2, 291), (7, 3710), (37, 199),
          (5, 100_003), (1, 300_007), (33, 4097), (1024, 8192), (1025, 8192), (16, 16392), (129, 1031),
          (4000, 37), (2048, 1024), (1000, 8191), (3001, 4104), (128, 6000), (1024, 2048),
          (300, 10007), (4100, 1001), (4100, 300), (7, 8188), (512, 6200), (900, 4100), (520, 6000),
          (660, 6000), (200, 8000), (17, 61448), (16, 57345), (16, 40001), (1000, 4095), (300, 4097),
          (256, 8001)]

# Where the run was (scripts/sanitizer_rows.py reads it back from the log).
print(f"sanitize_cuda: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
bad = 0
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
    for rows, cols in SHAPES:
        big = torch.randn(rows + 1, cols + 3, device="cuda", dtype=dtype)
        for y in (big[:rows, :cols].contiguous(), big[:rows, 1 : cols + 1], big[1:, 3:], big[:rows, : cols + 3 : 2]):
            ours, ref = div_sum_scale(y, 2, 1.5), div_sum_scale_reference(y, 2, 1.5)
            bad += not torch.equal(ours, ref)
            # The column sum and the matrix-vector product, against fp64 torch: the
            # order differs, so allow fp64 rounding only. The column sums' reference is taken
            # on the CPU: initcheck flags reads of uninitialised memory inside ATen's own CUDA
            # reduction (at::native::reduce_kernel) of these column sums, which are not ours.
            c = colsum(y)
            bad += not torch.allclose(c.cpu(), y.cpu().double().sum(0), rtol=1e-9, atol=1e-9)
            v = torch.randn(y.shape[1], device="cuda", dtype=torch.float64)
            mv = colsum_matvec(y, v, 0.75)
            want = (y.double() @ v * 0.75).to(dtype).unsqueeze(1)
            tol = {torch.float64: 1e-9, torch.float32: 1e-5}.get(dtype, 1e-2)  # the output's rounding
            bad += not torch.allclose(mv.double(), want.double(), rtol=tol, atol=tol)


def near_zero_rows(x, w, every=2):
    """x with every `every`-th row's component along W's column sums taken out: those rows' answers
    sit near zero, where the hybrid gives the reference's bits (tests/test_hybrid.py does the same)."""
    c = w.double().sum(0)
    xd = x.double()
    xd[::every] -= (xd[::every] @ c / (c @ c)).unsqueeze(1) * c
    return xd.float()


def check(ok, what):
    """1 and a line naming the case where ok is false."""
    if not ok:
        print(f"sanitize_cuda: mismatch in {what}")
    return int(not ok)


# rows_gemm: (M, K, N) and the gathered counts; K % 32 == 0 and N % 64 == 0 take whole slabs.
for m, k, n, counts in [(300, 256, 512, (0, 1, 192, 193, 300)), (200, 100, 200, (7, 192, 200)),
                        (65, 37, 129, (65,))]:
    x, w = torch.randn(m, k + 4, device="cuda"), torch.randn(n, k, device="cuda") / k**0.5
    for xs in (x[:, :k], x[:, 1 : k + 1]):  # aligned rows (vector loads where K % 4 == 0), rows a float off
        for count in counts:
            rows = torch.randperm(m, device="cuda").int()  # the first `count` gathered
            y = hybrid_ops.rows_gemm(xs, w, rows, torch.tensor([count], dtype=torch.int32, device="cuda"))
            picked, rest = rows[:count].long(), rows[count:].long()
            want = xs[picked].double() @ w.double().T
            case = f"rows_gemm {m} x {k} x {n}, {count} rows, x's stride {xs.stride(0)}"
            bad += check(torch.allclose(y[picked].double(), want, rtol=1e-4, atol=1e-4), case)
            bad += check(not bool(y[rest].ne(0).any()), case + ", zeros")

# hybrid_forward: its exact rows are the library's tail over rows_gemm's rows, bit for bit; the others
# hybrid_rows' column-sum answer, against fp64. (M, K, N): the gathered tail over block rows of one chunk,
# looped block rows, and the whole tail through the dispatcher.
for m, k, n in [(528, 256, 8192), (64, 128, 12288), (300, 200, 1000), (5, 64, 96)]:
    w = torch.randn(n, k, device="cuda")
    x = near_zero_rows(64 * torch.rand(m, k, device="cuda"), w)  # wide enough errors: near-zero rows exact
    stats = hybrid_ops.weight_statistics(w)
    out, exact = hybrid_ops.hybrid_forward(x, w, stats, 2.0, 1.5)
    approx, exact_rows, rows, count = hybrid_ops.hybrid_rows(x, stats, 1.5 / 2.0, n)
    case = f"hybrid_forward {m} x {k} x {n}"
    rows_agree = torch.equal(exact, exact_rows) and int(count) == int(exact.sum())
    bad += check(rows_agree and bool(exact.any()), case + ", rows")
    whole = div_sum_scale(hybrid_ops.rows_gemm(x, w, rows, count), 2.0, 1.5, pdl=False)
    bad += check(torch.equal(out[exact], whole[exact]) and torch.equal(out[~exact], approx[~exact]), case + ", bits")
    want = (x.double() @ w.double().sum(0) * 0.75).unsqueeze(1)
    bad += check(torch.allclose(out[~exact].double(), want[~exact], rtol=1e-5, atol=1e-5), case + ", column sums")

# The probe: sampled outputs in a few orders of the family, against fp64.
x, w = torch.randn(100, 1000, device="cuda"), torch.randn(300, 1000, device="cuda") / 1000**0.5
r, h = torch.randint(0, 100, (4096,), device="cuda"), torch.randint(0, 300, (4096,), device="cuda")
want = ((x.double() @ w.double().T)[r, h])
for chains, tile, tree in [(2, 4, False), (4, 64, True), (16, 256, True)]:
    got = hybrid_ops.ORDER_PROBE(x, w, r, h, chains, tile, tree)
    bad += check(torch.allclose(got.double(), want, rtol=1e-4, atol=1e-4), f"gemm_order_probe {chains} {tile} {tree}")

torch.cuda.synchronize()
print(f"sanitize_cuda: {bad} mismatches")
sys.exit(1 if bad else 0)
