"""Which kernel for the hybrid's row statistics (kb14::hybrid_rows' first kernel): the
library's (four rows a block, one element a thread a step) beside warp-per-row variants with
16-byte loads, each timed (read flush before each call, median) and compared with the
library's outputs: the column-sum answer's bits, z, and the rows the cut sends to the exact
path.

    python scripts/experiments/row_stats.py [--json out.json] [--table results/measurements.csv]
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
from kernels import hybrid_ops  # noqa: E402

# name -> the index of row_stats_variant's switch in row_stats.cu.
VARIANTS = {"library": 0,  # four rows a block of 256 threads, a thread an element a step, loads 4 steps deep
            "warp-per-row": 1,  # a warp a row, 16-byte loads, eight warps a block sharing the vectors
            "warp-two-rows": 2,  # the same, two rows a warp
            "unbatched": 4}  # the library's before 7f25fe5: loads issued step by step
SCALE = 1.5 / 2


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--table", help="append the rows to this measurements table (results/measurements.csv's columns)")
    p.add_argument("--shape", type=int, nargs=3, default=[1024, 8192, 8192], metavar=("M", "K", "N"))
    p.add_argument("--budget", type=float, default=1.5, help="seconds of timing per variant")
    args = p.parse_args()
    experiment.build("row_stats.cu")
    op = torch.ops.kb14_row_stats.row_stats_variant
    m, k, n = args.shape
    dev = torch.device("cuda")
    torch.manual_seed(42)
    w = torch.randn(n, k).to(dev)  # KernelBench's weight draw
    x = torch.rand(m, k, device=dev)
    stats = hybrid_ops.weight_statistics(w)
    call_args = (x, stats.colsum, stats.model_vectors, stats.scalars, SCALE, hybrid_ops.KAPPA,
                 hybrid_ops.tail_depth(n), hybrid_ops.SIGMA_FACTOR, hybrid_ops.ATOL, hybrid_ops.RTOL)
    backend = make_backend(dev)
    out = {"shape": [m, k, n], "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    lib = hybrid_ops.hybrid_rows(x, stats, SCALE, n)
    t_lib = robust_time(lambda: hybrid_ops.hybrid_rows(x, stats, SCALE, n), backend=backend, budget_s=args.budget,
                        max_calls=300)
    out["hybrid_rows_ms"] = t_lib["median_ms"]
    print(f"kb14::hybrid_rows in all (statistics, cut, compaction): {t_lib['median_ms'] * 1e3:.1f} us, "
          f"{int(lib[3].item())} exact rows", flush=True)
    approx0, z0, risk0 = op(*call_args, 0)
    exact0 = hybrid_ops.cut(z0, risk0)
    assert torch.equal(exact0, lib[1]), "the cut in torch differs from the library's"
    for name, v in VARIANTS.items():
        approx, z, risk = op(*call_args, v)
        exact = hybrid_ops.cut(z, risk)
        finite = torch.isfinite(z0) & torch.isfinite(z)
        rel = ((z - z0).abs() / z0.abs().clamp(min=1e-300))[finite].max().item() if finite.any() else 0.0
        t = robust_time(lambda: op(*call_args, v), backend=backend, budget_s=args.budget, max_calls=300)
        row = {"variant": name, "median_ms": t["median_ms"],
               "approx_equal": int((approx.view(torch.int32) == approx0.view(torch.int32)).sum()),
               "rows": m, "z_max_rel_diff": rel, "same_exact_rows": bool(torch.equal(exact, exact0)),
               "exact_rows": int(exact.sum())}
        out["rows"].append(row)
        print(f"{name:>14}: {t['median_ms'] * 1e3:7.1f} us, approx bits equal {row['approx_equal']}/{m}, "
              f"z within {rel:.1e}, exact rows {'same' if row['same_exact_rows'] else 'DIFFER'} ({row['exact_rows']})",
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    if args.table:
        common = experiment.table_columns(out)
        rows = [results_table.row(**common, implementation="kb14::hybrid_rows in all", time_ms=out["hybrid_rows_ms"],
                                  exact="", note="scripts/experiments/row_stats.py")]
        rows += [results_table.row(**common, implementation=f"row statistics: {r['variant']}", time_ms=r["median_ms"],
                                   exact="same rows" if r["same_exact_rows"] else "other rows",
                                   note=f"scripts/experiments/row_stats.py; approx bits equal {r['approx_equal']}/{m}")
                 for r in out["rows"]]
        results_table.append(rows, Path(args.table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
