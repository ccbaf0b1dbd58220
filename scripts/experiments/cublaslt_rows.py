"""Can cuBLASLt run the hybrid's exact rows? Every fp32 algorithm and configuration it accepts
without split-K, run on the gathered rows, kept where its bits equal torch.matmul's on the full
shape (KernelBench's 1024 x 8192 x 8192), and the fastest of those timed beside kb14::rows_gemm
(read flush before each call, median).

    python scripts/experiments/cublaslt_rows.py [--counts 179 192 256] [--json out.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness import results_table  # noqa: E402
from harness.timing import make_backend, robust_time  # noqa: E402
import experiment  # noqa: E402

WORKSPACE = 32 * 1024**2
FIELDS = ("id", "tile", "stages", "splitk", "reduction", "swizzle", "custom", "inner", "cluster", "numerics")


def cublaslt_dirs() -> tuple[str, str]:
    """(include folder, library file) of the cuBLASLt torch loads: its pip package, else the toolkit's."""
    roots = [os.path.join(p, "nvidia", sub) for p in sys.path for sub in ("cu13", "cu12", "cublas")]
    roots += [os.environ.get("CUDA_HOME", "/usr/local/cuda"), "/usr/local/cuda"]
    for r in roots:
        libs = sorted(glob.glob(os.path.join(r, "lib*", "libcublasLt.so*")))
        if libs and os.path.exists(os.path.join(r, "include", "cublasLt.h")):
            return os.path.join(r, "include"), libs[-1]
    raise SystemExit("cuBLASLt's header and library not found beside torch or under CUDA_HOME")


def enum_names(header: str, prefix: str) -> dict[int, str]:
    """value -> name of a cublasLt.h enum whose members start with prefix (in order, values implicit or given)."""
    names, value = {}, -1
    for m in re.finditer(rf"^\s*{prefix}(\w+)\s*(?:=\s*(\d+))?\s*,", Path(header).read_text(), re.M):
        value = int(m.group(2)) if m.group(2) else value + 1
        names[value] = m.group(1)
    return names


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--counts", type=int, nargs="*", default=[179, 192, 256])
    p.add_argument("--shape", type=int, nargs=3, default=[1024, 8192, 8192], metavar=("M", "K", "N"))
    p.add_argument("--timed", type=int, default=6, help="bit-exact configurations timed with the flush, per count")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timing per configuration")
    p.add_argument("--json")
    p.add_argument("--table", help="append the rows to this measurements table (results/measurements.csv's columns)")
    args = p.parse_args()
    include, lib = cublaslt_dirs()
    experiment.build("cublaslt_rows.cu", ldflags=(f"-L{os.path.dirname(lib)}", f"-l:{os.path.basename(lib)}",
                                                 f"-Wl,-rpath,{os.path.dirname(lib)}"), include_paths=(include,))
    ops = torch.ops.kb14_cublaslt_rows
    header = os.path.join(include, "cublasLt.h")
    tiles, stages = enum_names(header, "CUBLASLT_MATMUL_TILE_"), enum_names(header, "CUBLASLT_MATMUL_STAGES_")

    def describe(algo):
        d = dict(zip(FIELDS, ops.describe(algo).tolist()))
        d["tile"], d["stages"] = tiles.get(d["tile"], d["tile"]), stages.get(d["stages"], d["stages"])
        return d

    m, k, n = args.shape
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.rand(m, k, device=dev, generator=gen)
    w = torch.randn(n, k, device=dev, generator=gen)
    ref = torch.matmul(x, w.T)
    x2 = torch.randn(m, k, device=dev, generator=gen)  # a second draw: the kept configurations checked again
    ref2 = torch.matmul(x2, w.T)
    perm = torch.randperm(m, device=dev, generator=gen)
    ws = torch.empty(WORKSPACE, dtype=torch.uint8, device=dev)
    backend = make_backend(dev)
    cublas = robust_time(lambda: torch.matmul(x, w.T), backend=backend, budget_s=2.0, max_calls=200)["median_ms"]
    full_rate = 2.0 * m * k * n / cublas / 1e9
    out = {"shape": [m, k, n], "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cublaslt": lib,
           "cublas_ms": cublas, "counts": {}}
    print(f"cuBLAS all rows: {cublas:.3f} ms, {full_rate:.1f} TFLOP/s", flush=True)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    first_exact = None
    for c in args.counts:
        chosen = perm[:c]
        xs, refs, xs2, refs2 = x[chosen].contiguous(), ref[chosen], x2[chosen].contiguous(), ref2[chosen]
        # Every configuration at the first count; at the others, those exact at the first.
        configs = ops.configurations(c, n, k, WORKSPACE) if first_exact is None else first_exact
        heur = ops.heuristic(c, n, k, 8, WORKSPACE)
        print(f"{c} rows: {len(configs)} configurations without split-K, {len(heur)} heuristic choices", flush=True)
        found = []
        for source, algos in (("heuristic", heur), ("enumerated", configs)):
            for algo in algos:
                try:
                    y = ops.matmul(xs, w, algo, ws)
                    torch.cuda.synchronize()
                except RuntimeError as e:
                    print(f"  {describe(algo)}: {str(e).splitlines()[0]}", flush=True)
                    continue
                start.record()
                for _ in range(3):
                    ops.matmul(xs, w, algo, ws)
                stop.record()
                stop.synchronize()
                exact = bool(torch.equal(y, refs)) and bool(torch.equal(ops.matmul(xs2, w, algo, ws), refs2))
                found.append({"source": source, "algo": algo, "warm_ms": start.elapsed_time(stop) / 3, "exact": exact,
                              **describe(algo)})
        exact = sorted((f for f in found if f["exact"]), key=lambda f: f["warm_ms"])
        if first_exact is None:
            first_exact = [f["algo"] for f in exact if f["source"] == "enumerated"]
        best_any = sorted(found, key=lambda f: f["warm_ms"])[:3]
        print(f"  {len(exact)} of {len(found)} bit-exact; fastest of any order: "
              + "; ".join(f"{f['tile']} {f['stages']} id {f['id']} splitk {f['splitk']} {f['warm_ms']:.3f} ms" for f in best_any),
              flush=True)
        timed = []
        for f in exact[:args.timed] + [f for f in best_any if not f["exact"]][:1]:
            t = robust_time(lambda: ops.matmul(xs, w, f["algo"], ws), backend=backend, budget_s=args.budget, max_calls=200)
            rate = 2.0 * c * k * n / t["median_ms"] / 1e9
            row = {key: v for key, v in f.items() if key != "algo"}
            row.update(median_ms=t["median_ms"], tflops=rate, vs_cublas_rate=rate / full_rate)
            timed.append(row)
            print(f"  {'exact ' if f['exact'] else 'OTHER '} id {f['id']} {f['tile']} {f['stages']} swz {f['swizzle']} "
                  f"custom {f['custom']} inner {f['inner']} cluster {f['cluster']}: {t['median_ms']:.3f} ms, "
                  f"{rate:.1f} TFLOP/s ({rate / full_rate:.2f} of cuBLAS's full-shape rate)", flush=True)
        out["counts"][c] = {"configurations": len(found), "exact": [{k2: v for k2, v in f.items() if k2 != "algo"} for f in exact],
                            "timed": timed}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    if args.table:
        common = experiment.table_columns(out)
        rows = [results_table.row(**common, implementation=f"cuBLASLt id {r['id']} {r['tile']} {r['stages']} swizzle {r['swizzle']} custom {r['custom']}, {c} gathered rows",
                                  time_ms=r["median_ms"], exact=r["exact"],
                                  note=f"scripts/experiments/cublaslt_rows.py; {r['vs_cublas_rate']:.2f} of cuBLAS's rate")
                for c, d in out["counts"].items() for r in d["timed"]]
        results_table.append(rows, Path(args.table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
