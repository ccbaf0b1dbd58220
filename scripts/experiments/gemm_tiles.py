"""Which tile for kb14::rows_gemm: the library's kernel template at other tile sizes and
register caps, each checked bit for bit against torch.matmul and timed beside cuBLAS
(read flush before each call, median) for every row and for a fifth of them.

    python scripts/experiments/gemm_tiles.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness import results_table  # noqa: E402
from harness.timing import make_backend, robust_time  # noqa: E402
import experiment  # noqa: E402

# name -> the index of rows_gemm_variant's switch in gemm_tiles.cu. BMxBNxBK tile, TMxTN
# accumulators a thread, blocks an SM where the register cap allows more than one.
VARIANTS = {
    "library-192x64x16-12x4": 23,  # one row tile, 8 warps: the library's tile up to 192 rows
    "library-128x128x16-8x8": 0,  # 1/SM: the library's tile past 192 rows
    "library-128x128x8-8x8-2sm": 5,  # 2/SM: the library's tile past 3/8 of the batch until 2026-12-05
    "narrow-192x64x16-12x4": 7, "narrow-192x64x16-12x4-2sm": 8,
    "narrow-192x32x16-12x4-2sm": 9, "narrow-256x64x16-8x8": 10, "narrow-96x64x16-12x4-2sm": 11,
    "narrow-64x64x16-8x8-4sm": 12, "narrow-128x64x16-8x8-2sm": 13, "narrow-96x128x24-8x8": 14,
    "narrow-192x64x12-8x8": 15, "narrow-192x64x16-12x8": 16, "narrow-192x64x8-12x8": 17,
    "narrow-96x64x16-12x8-2sm": 18,
    # One launch of N / 64 blocks for counts up to 192 that also zero the rows not gathered.
    "narrow-192x64x16-12x8-fused-zero": 19,
    "narrow-192x64x12-8x8-fused-zero": 26,
    "kmajor-192x64x16-12x8-3stage": 20, "kmajor-192x64x32-12x8-3stage": 21, "kmajor-192x64x16-12x8-4stage": 22,
    # The library's one-row tile with 16-, 32- or 64-k slabs in dynamic shared memory, loads unchecked.
    "wideslab-192x64x16-12x4": 27, "wideslab-192x64x32-12x4": 28, "wideslab-192x64x64-12x4": 29,
    "wideslab-192x64x64-8x4": 30, "wideslab-192x64x32-4x4": 31, "wideslab-192x64x16-12x4-serpentine": 32,
    # The same with lanes paired for shared loads, with stores bank-skewed, both, both + serpentine.
    "wideslab-192x64x16-12x4-paired": 33, "wideslab-192x64x16-12x4-skewed": 34,
    "wideslab-192x64x16-12x4-paired-skewed": 35, "wideslab-192x64x16-12x4-paired-skewed-serpentine": 36,
    # The library's whole-slab tile from 221e746 until the staged one (a frozen copy: paired lanes fed by
    # cp.async into XOR-swizzled shared rows) at 2 or 3 slabs of 32 k in flight.
    "swizzled-192x64x32-12x4-2stage": 37, "swizzled-192x64x32-12x4-3stage": 38,
    # cuBLAS's feed: 4-byte cp.async transposing each slab into one shared row per k, FFMAs in 2x2 blocks,
    # the next slab's barrier, copies and first fragments inside the last k of this one.
    "transposed-192x64x32-12x4-3stage-ahead": 42,
    # 42's compute fed through registers: 16-byte loads, 4-float stores into the other of two buffers
    # (the library's whole-slab tile since ae84a45; since cc518c1 storing at k = 4 of a slab).
    "staged-192x64x32-12x4-ahead": 47,
    # 47 storing the next slab at another k of this one than 4 (31: the library's until cc518c1) and
    # loading the slab after it right behind (a frozen copy).
    "staged-192x64x32-12x4-store-at-31": 51, "staged-192x64x32-12x4-store-at-16": 52,
    "staged-192x64x32-12x4-store-at-8": 54, "staged-192x64x32-12x4-store-at-2": 55, "staged-192x64x32-12x4-store-at-0": 56,
    # 47 with its FFMAs row by row, the columns of odd rows backwards (more operands from the reuse cache).
    "staged-192x64x32-12x4-row-serpentine": 57,
}
# Variants of one row tile (their launch covers counts up to this many rows).
FULL_GRIDS = ("library-128", "narrow-")  # launched over every row tile, unless their blocks zero the rows ("fused-zero")
MAX_COUNT = {name: 192 for name in VARIANTS if not name.startswith(FULL_GRIDS) or "fused-zero" in name}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--table", help="append the rows to this measurements table (results/measurements.csv's columns)")
    p.add_argument("--shape", type=int, nargs=3, default=[1024, 8192, 8192], metavar=("M", "K", "N"))
    p.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS), metavar="NAME",
                   help="the variants to time, by name: " + ", ".join(VARIANTS))
    p.add_argument("--counts", type=int, nargs="*", help="row counts to time (default: all, half, 179, 128, a tenth)")
    p.add_argument("--budget", type=float, default=2.0, help="seconds of timing per variant and count")
    args = p.parse_args()
    experiment.build("gemm_tiles.cu")
    op = torch.ops.kb14_gemm_tiles.rows_gemm_variant
    m, k, n = args.shape
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.rand(m, k, device=dev, generator=gen)
    w = torch.randn(n, k, device=dev, generator=gen)
    ref = torch.matmul(x, w.T)
    backend = make_backend(dev)
    perm = torch.randperm(m, device=dev, generator=gen).int()
    rows_all = torch.arange(m, device=dev, dtype=torch.int32)
    counts = {"all rows": (rows_all, m), "half": (perm, m // 2), "179 rows": (perm, 179), "128 rows": (perm, 128), "a tenth": (perm, m // 10)}
    if args.counts:
        counts = {f"{c} rows": (rows_all if c == m else perm, c) for c in args.counts}
    out = {"shape": [m, k, n], "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    cublas = robust_time(lambda: torch.matmul(x, w.T), backend=backend, budget_s=2.0, max_calls=200)
    flop = 2.0 * m * k * n
    out["cublas_ms"] = cublas["median_ms"]
    print(f"cuBLAS all rows: {cublas['median_ms']:.3f} ms, {flop / cublas['median_ms'] / 1e9:.1f} TFLOP/s", flush=True)
    out["cublas_gathered"] = {}
    for label, (rows, c) in counts.items():  # cuBLAS on the gathered rows alone: its own order, a peer's speed
        xs = x[rows[:c].long()].contiguous()
        t = robust_time(lambda: torch.matmul(xs, w.T), backend=backend, budget_s=args.budget, max_calls=200)
        out["cublas_gathered"][c] = t["median_ms"]
        print(f"cuBLAS on {c} gathered rows: {t['median_ms']:.3f} ms, {2.0 * c * k * n / t['median_ms'] / 1e9:.1f} TFLOP/s",
              flush=True)
    for name in args.variants:
        v = VARIANTS[name]
        for label, (rows, c) in counts.items():
            if c > MAX_COUNT.get(name, m):
                continue
            count = torch.tensor([c], device=dev, dtype=torch.int32)
            y = op(x, w, rows, count, v)
            chosen = rows[:c].long()
            others = rows[c:].long()  # the rows not gathered must be zeros
            exact = bool(torch.equal(y[chosen], ref[chosen])) and not bool(y[others].any())
            t = robust_time(lambda: op(x, w, rows, count, v), backend=backend, budget_s=args.budget, max_calls=200)
            rate = 2.0 * c * k * n / t["median_ms"] / 1e9
            out["rows"].append({"variant": name, "rows": label, "count": c, "median_ms": t["median_ms"],
                                "tflops": rate, "bit_exact": exact,
                                "vs_cublas_rate": rate / (flop / cublas["median_ms"] / 1e9)})
            print(f"{name:>34} {label:>9}: {t['median_ms']:.3f} ms, {rate:.1f} TFLOP/s "
                  f"({out['rows'][-1]['vs_cublas_rate']:.2f} of cuBLAS's), bits {'==' if exact else 'DIFFER'}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    if args.table:
        common = experiment.table_columns(out)
        rows = [results_table.row(**common, implementation="cuBLAS torch.matmul, all rows", time_ms=out["cublas_ms"],
                                  exact="yes", note="scripts/experiments/gemm_tiles.py")]
        rows += [results_table.row(**common, implementation=f"rows_gemm {r['variant']}, {r['count']} rows",
                                   time_ms=r["median_ms"], exact=r["bit_exact"],
                                   note=f"scripts/experiments/gemm_tiles.py; {r['vs_cublas_rate']:.2f} of cuBLAS's rate")
                 for r in out["rows"]]
        results_table.append(rows, Path(args.table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
