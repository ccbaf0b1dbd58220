#!/usr/bin/env python
"""bench.py: timings of KernelBench level 2 problem 14 that a kernel author can trust.

Times the reference eager, under torch.compile, ModelNew (and any --model), torch.matmul
alone and the tail alone (ours, eager, torch.sum, Inductor's), with KernelBench's method
and a robust one, beside ceilings measured in the same run; `--sweep` adds the tail over
batch and hidden sizes. What each row and method means is in `harness/kb14_benchmark.py`;
the timing primitives are in `harness/timing.py`.

    python bench.py --json results/bench.json --plot results/bench.png
    python bench.py --sweep-only --json results/sweep.json
    python bench.py --device cpu
    python bench.py --reference path/to/problem.py:Model --model path/to/solution.py:ModelNew [--set NAME=VALUE]

    python bench.py --problems DIR --json all.json [--shard K/N]   # every pair of a folder

With `--reference`, any KernelBench problem: its reference eager, under torch.compile,
and each candidate, checked and timed the same two ways, with roofline estimates
(`harness/problem_benchmark.py`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Sequence

REPO_DIR = Path(__file__).resolve().parent
if str(REPO_DIR) not in sys.path:  # so `import reference`, `import kernels` work from anywhere
    sys.path.insert(0, str(REPO_DIR))

import reference  # noqa: E402
from harness import batch  # noqa: E402
from harness.kb14_benchmark import SCHEMA, format_table, load_model_class, run_bench, write_plot  # noqa: E402
from harness.machine import git_info, log, resolve_device  # noqa: E402
from harness.problem import CheckError, parse_sets  # noqa: E402
from harness.problem_benchmark import SCHEMA as PROBLEM_SCHEMA  # noqa: E402
from harness.problem_benchmark import format_problem_table, run_problem_bench, write_problem_plot  # noqa: E402
from harness.timing import (CPU_KB_TRIALS, CPU_KB_WARMUP, CPU_REPEATS, KB_TRIALS, KB_WARMUP,  # noqa: E402
                            BenchError, graph_time, kernelbench_time, l2_cache_bytes, make_backend, robust_time,
                            rotating_copies)

# What scripts and tests use from this module besides the command line.
__all__ = ["SCHEMA", "BenchError", "format_table", "git_info", "graph_time", "kernelbench_time", "l2_cache_bytes",
           "load_model_class", "main", "make_backend", "robust_time", "rotating_copies", "run_bench", "write_plot"]


def _int_list(text: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench.py",
        description="Time KernelBench L2/14 (reference eager, compiled, ModelNew, candidates, the tail "
                    "alone) with KernelBench's method and a robust one, beside measured ceilings.")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                   help="auto: cuda when a GPU is visible, else cpu (host timers)")
    p.add_argument("--model", action="append", metavar="MODULE:CLASS",
                   help="a candidate to time too: dotted module or path/to/file.py, then :Class; repeatable")
    p.add_argument("--reference", metavar="FILE.py:Model",
                   help="time another KernelBench problem: its reference eager and compiled, and each --model "
                        "(default: this repository's problem and its rows)")
    p.add_argument("--set", dest="sets", action="append", metavar="NAME=VALUE",
                   help="with --reference: override a module-level value of the problem file (repeatable)")
    p.add_argument("--batch", type=int, default=None, help=f"this problem's batch (default {reference.batch_size})")
    p.add_argument("--input", type=int, default=None, help=f"input_size (default {reference.input_size})")
    p.add_argument("--hidden", type=int, default=None, help=f"hidden_size (default {reference.hidden_size})")
    p.add_argument("--scaling-factor", type=float, default=None,
                   help=f"scaling_factor (default {reference.scaling_factor})")
    p.add_argument("--repeats", type=int, default=None,
                   help="calls of the robust method (default: cuda up to 1000 within 1 s per row, "
                        f"200 per sweep variant; cpu {CPU_REPEATS})")
    p.add_argument("--kb-trials", type=int, default=None,
                   help=f"KernelBench-method trials (default cuda {KB_TRIALS}, cpu {CPU_KB_TRIALS})")
    p.add_argument("--kb-warmup", type=int, default=None,
                   help=f"KernelBench-method warm-up calls (default cuda {KB_WARMUP}, cpu {CPU_KB_WARMUP})")
    p.add_argument("--sweep", action="store_true", help="also sweep the tail over batch and hidden sizes")
    p.add_argument("--sweep-only", action="store_true", help="the sweep and the ceilings, no default rows")
    p.add_argument("--sweep-batches", type=_int_list, default=None, metavar="N,N,...",
                   help="batch sizes of the sweep (default: 1..16384 powers of 2 and 3,100,1000,5000)")
    p.add_argument("--sweep-hiddens", type=_int_list, default=None, metavar="N,N,...",
                   help="hidden sizes of the sweep (default: 128..65536 powers of 2 and 129,1000,3000,10007)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads for CPU runs (default: torch's choice)")
    p.add_argument("--colsum", action="store_true",
                   help="also time modelnew:ModelNewColsum (the column-sum rewrite: not bit-exact, "
                        "checked at 1e-2)")
    p.add_argument("--keep-integer-inputs", action="store_true",
                   help="with --reference: integer and bool input tensors keep their dtype (default: cast to fp32, "
                        "as KernelBench casts every input tensor)")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    p.add_argument("--no-graph", action="store_true", help="skip CUDA-graph replay timing")
    p.add_argument("--fast-ceilings", action="store_true",
                   help="small ceilings, 2 calls each: placeholders, for tests only")
    p.add_argument("--json", metavar="PATH", help="write the full result here")
    p.add_argument("--plot", metavar="PATH", help="write a PNG here (needs matplotlib)")
    p.add_argument("--from-json", metavar="PATH",
                   help="run nothing: print the table of a saved --json file (and --plot it)")
    batch.add_arguments(p, "time", default_timeout=900)
    return p


def batch_main(args) -> int:
    """--problems / --merge: one summary table and one JSON for a whole folder."""
    extra = [flag for flag, on in (("--no-compile", args.no_compile), ("--no-graph", args.no_graph),
                                   ("--fast-ceilings", args.fast_ceilings),
                                   ("--keep-integer-inputs", args.keep_integer_inputs)) if on]
    for flag, value in (("--kb-trials", args.kb_trials), ("--kb-warmup", args.kb_warmup), ("--repeats", args.repeats)):
        if value is not None:
            extra += [flag, str(value)]
    try:
        sets = parse_sets(args.sets)
    except CheckError as exc:
        print(f"bench.py: error: {exc}", file=sys.stderr)
        return 2
    # A pair's process takes --reference, where this problem's size flags are --set names.
    for name, value in (("batch_size", args.batch), ("input_size", args.input), ("hidden_size", args.hidden),
                        ("scaling_factor", args.scaling_factor)):
        if value is not None:
            sets[name] = value
    result = batch.main_from_args(args, tool="bench", device=args.device, extra=extra, progress=log,
                                  error_prefix="bench.py: error: ", sets=sets)
    return 2 if result is None else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its message
        return int(exc.code or 0)
    if args.problems or args.merge:
        return batch_main(args)
    try:
        for name in ("repeats", "kb_trials"):
            if getattr(args, name) is not None and getattr(args, name) < 1:
                raise BenchError(f"--{name.replace('_', '-')} must be at least 1")
        if args.kb_warmup is not None and args.kb_warmup < 0:
            raise BenchError("--kb-warmup must be 0 or more")
        if args.plot and importlib.util.find_spec("matplotlib") is None:
            raise BenchError("--plot needs matplotlib, which is not installed "
                             "(pip install matplotlib), or drop --plot")
        for path in (args.json, args.plot):
            if path and not Path(path).expanduser().resolve().parent.is_dir():
                raise BenchError(f"cannot write {path!r}: its folder does not exist")
        if args.from_json:  # re-print / re-plot a saved run (say, fetched from the GPU machine)
            try:
                result = json.loads(Path(args.from_json).read_text())
            except (OSError, ValueError) as exc:
                raise BenchError(f"--from-json {args.from_json!r}: {exc}") from None
            if result.get("schema") not in (SCHEMA, PROBLEM_SCHEMA):
                raise BenchError(f"--from-json {args.from_json!r}: not a {SCHEMA} or {PROBLEM_SCHEMA} file")
        elif args.reference:
            this_problem = ("--batch", args.batch), ("--input", args.input), ("--hidden", args.hidden), \
                ("--scaling-factor", args.scaling_factor), ("--sweep", args.sweep or args.sweep_only), \
                ("--colsum", args.colsum)
            for flag, value in this_problem:
                if value:
                    raise BenchError(f"{flag} is for this repository's problem; with --reference use --set NAME=VALUE")
            try:
                sets = parse_sets(args.sets)
            except CheckError as exc:
                raise BenchError(str(exc)) from None
            result = run_problem_bench(args, resolve_device(args.device), sets)
        else:
            if args.sets:
                raise BenchError("--set needs --reference (this problem's sizes are --batch, --input, --hidden, "
                                 "--scaling-factor)")
            for name, default in (("batch", reference.batch_size), ("input", reference.input_size),
                                  ("hidden", reference.hidden_size), ("scaling_factor", reference.scaling_factor)):
                if getattr(args, name) is None:
                    setattr(args, name, default)
            result = run_bench(args)
    except BenchError as exc:
        print(f"bench.py: error: {exc}", file=sys.stderr)
        return 2
    problem = result.get("schema") == PROBLEM_SCHEMA
    print(format_problem_table(result) if problem else format_table(result))
    if args.json and not args.from_json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        log(f"wrote {args.json}")
    if args.plot:
        (write_problem_plot if problem else write_plot)(result, args.plot)
        log(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
