"""The CPU tail of another commit against the working tree's, timed in turn beside the reference.

Both trees' CPU kernels (kernels/tail_cpu*.cpp) are compiled with kernels/jit.py's flags and called
through their C entry point on the same tensors; the reference is `torch.sum(y / 2, 1, keepdim=True)
* 1.5` in eager mode. Each round times every implementation once (the mean of `--calls` calls), in
turn, so that a busy machine slows all three alike; the medians over `--rounds` rounds are printed,
with both trees' outputs checked equal to the reference's (torch.equal). `--table` appends the
medians to the measurements table.

    python scripts/compare_cpu_tail.py [--base HEAD] [--threads 1 2] [--dtypes float16 bfloat16]
                                       [--shapes 8192x36 1024x8192 300000x1/3 ...]

A shape ROWSxCOLS/STRIDE is the first COLS columns of a ROWS x STRIDE tensor (rows STRIDE elements apart).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness import results_table  # noqa: E402
from kernels import jit  # noqa: E402
from kernels.tail_cpu import DTYPE_CODE, entry_point  # noqa: E402

SHAPES = [(8192, 36), (8192, 64), (8192, 100), (4096, 300), (2048, 1000), (1024, 8192)]


def build_base(rev: str, out: Path) -> Path:
    """REV's CPU tail, compiled as kernels/jit.py compiles the tree's."""
    from torch.utils import cpp_extension

    sources = out / "kernels"
    sources.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "kernels"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    module = jit.MODULES["tail_cpu"]
    name = "kb14_tail_cpu_base"
    cpp_extension.load(name=name, sources=[str(sources / n) for n in module.cpp], extra_cflags=list(jit.HOST_FLAGS),
                       extra_ldflags=jit.link_flags(), extra_include_paths=[str(sources)],
                       build_directory=str(out), is_python_module=False)
    return out / f"{name}.so"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default="HEAD", help="the commit to compare the working tree with")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    p.add_argument("--shapes", nargs="+", default=[f"{r}x{c}" for r, c in SHAPES], help="ROWSxCOLS[/STRIDE] ...")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--machine", default=f"{os.cpu_count()}-core CPU machine", help="the table's gpu column")
    p.add_argument("--table", help="append the medians to this measurements table (results/measurements.csv)")
    args = p.parse_args(argv)
    base_rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.base], check=True,
                              capture_output=True, text=True).stdout.strip()
    tree_rev = results_table.current_commit()
    with tempfile.TemporaryDirectory() as tmp:
        kernels = {f"kb14 CPU tail at {base_rev}": entry_point(build_base(args.base, Path(tmp))),
                   f"kb14 CPU tail at {tree_rev}": entry_point(jit.load("tail_cpu"))}
        rows = []
        for threads in args.threads:
            torch.set_num_threads(threads)
            for dtype in (getattr(torch, d) for d in args.dtypes):
                for shape in args.shapes:
                    size, _, stride = shape.partition("/")
                    r, c = map(int, size.split("x"))
                    rows += time_shape(kernels, dtype, r, c, int(stride or c), threads, args.rounds, args.calls)
    common = dict(commit=tree_rev, gpu=args.machine,
                  torch=torch.__version__, method="in turn, mean of calls, median of rounds")
    if args.table:
        results_table.append([results_table.row(**common, **r) for r in rows], Path(args.table))
    return 0


def time_shape(kernels: dict, dtype, rows: int, cols: int, stride: int, threads: int, rounds: int,
               calls: int) -> list[dict]:
    y = torch.randn(rows, stride, generator=torch.Generator().manual_seed(rows + cols)).to(dtype)[:, :cols]
    ref = torch.sum(y / 2.0, 1, keepdim=True) * 1.5
    outs = {name: torch.empty(rows, 1, dtype=dtype) for name in kernels}
    runs = {name: (lambda f=f, o=outs[name]: f(DTYPE_CODE[dtype], y.data_ptr(), o.data_ptr(), rows, cols, stride, 1,
                                                1, 2.0, 1.5, threads)) for name, f in kernels.items()}
    runs["reference (torch eager)"] = lambda: torch.sum(y / 2.0, 1, keepdim=True) * 1.5
    times = {name: [] for name in runs}
    for _ in range(3):
        for run in runs.values():
            run()
    exact = {name: torch.equal(out, ref) for name, out in outs.items()}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            for _ in range(calls):
                run()
            times[name].append((time.perf_counter() - start) / calls * 1e3)
    median = {name: statistics.median(t) for name, t in times.items()}
    quartiles = {name: statistics.quantiles(t, n=4) for name, t in times.items()}
    reference = median["reference (torch eager)"]
    shape = f"{rows} x {cols}" + (f" (row stride {stride})" if stride != cols else "")
    print(f"{str(dtype)[6:]:9} {shape:14} {threads} thread(s): " + ", ".join(
        f"{name} {ms * 1e3:.1f} us ({ms / reference:.2f}x)" for name, ms in median.items()), flush=True)
    return [dict(shape=shape, dtype=str(dtype)[6:], implementation=name, time_ms=ms,
                 interval_ms=quartiles[name][2] - quartiles[name][0],
                 exact=exact.get(name, ""), note=f"{threads} thread(s)") for name, ms in median.items()]


if __name__ == "__main__":
    sys.exit(main())
