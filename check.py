#!/usr/bin/env python
"""check.py: the correctness check a kernel author wishes KernelBench had.

Validates a candidate (by default `modelnew:ModelNew`) against a KernelBench problem's
`Model` (by default this repository's `reference:Model`, level 2 problem 14) and says
whether it passes and, if not, why. The check itself is `harness.checker`.

    python check.py                                   # KernelBench's own check, 5 trials
    python check.py --trials 200                      # pass-rate estimate
    python check.py --model path/to/mine.py:ModelNew --dtype bf16 --json out.json
    python check.py --batch 64 --input 128 --hidden 256   # other sizes
    python check.py --reference path/to/problem.py:Model --model path/to/solution.py --set batch_size=64
    python check.py --model path/to/mine.py:ModelNew --strict        # also catch a candidate gaming the check
    python check.py --problems path/to/folder --json all.json [--shard 1/4] [--workers 8 --timeout 300]  # strict
    python check.py --merge shard1.json shard2.json ... --json all.json

Exit status: 0 when every trial passes, 1 when the candidate fails, 2 when the
check itself cannot run (bad arguments, the reference fails).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

from harness.checker import (DEFAULT_MODEL, DEFAULT_REFERENCE, DTYPES, KERNELBENCH_SEED, KERNELBENCH_TRIALS,
                             REASONS, SCHEMA_VERSION, CheckError, format_report, kernelbench_trial_seeds, run_check)
from harness import batch
from harness.compare import json_ready
from harness.problem import SIZE_FLAGS, check_counts, parse_sets

# What scripts and tests use from this module besides the command line.
__all__ = ["REASONS", "SCHEMA_VERSION", "CheckError", "format_report", "kernelbench_trial_seeds", "main", "run_check"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="check.py",
        description="Check a candidate against a KernelBench problem's Model (by default this "
                    "repository's reference.Model) the way KernelBench does, and explain failures.")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="candidate as MODULE:CLASS or path/to/file.py:CLASS (default %(default)s)")
    p.add_argument("--reference", default=DEFAULT_REFERENCE,
                   help="reference as MODULE:CLASS or path/to/problem.py:Model, a file in KernelBench's format "
                        "(Model, get_inputs, get_init_inputs) (default %(default)s)")
    p.add_argument("--trials", type=int, default=KERNELBENCH_TRIALS, help="number of trials (default %(default)s)")
    p.add_argument("--seed", type=int, default=KERNELBENCH_SEED,
                   help="seed for drawing the trial seeds (default %(default)s, KernelBench's); "
                        "the constructors always get 42")
    p.add_argument("--device", default=None, help="cuda, cuda:1, cpu (default: cuda when available)")
    p.add_argument("--dtype", choices=list(DTYPES), default="fp32")
    p.add_argument("--batch", type=int, help="override the batch size")
    p.add_argument("--input", dest="input_size", type=int, help="override input_size")
    p.add_argument("--hidden", type=int, help="override hidden_size")
    p.add_argument("--scale", type=float, help="override scaling_factor")
    p.add_argument("--set", dest="sets", action="append", metavar="NAME=VALUE",
                   help="override a module-level value of the reference's problem file (repeatable), "
                        "e.g. --set batch_size=64 for any KernelBench problem")
    p.add_argument("--atol", type=float, help="override atol (default: KernelBench's for the dtype)")
    p.add_argument("--rtol", type=float, help="override rtol (default: KernelBench's for the dtype)")
    p.add_argument("--keep-integer-inputs", action="store_true",
                   help="integer and bool input tensors keep their dtype (default: cast to --dtype, as KernelBench "
                        "casts every input tensor)")
    p.add_argument("--strict", action="store_true", default=None,
                   help="also catch candidates that game the check: replayed outputs, aliasing, tensor subclasses, "
                        "patched timers or comparisons, extra threads, side streams (default in batch mode)")
    p.add_argument("--no-strict", dest="strict", action="store_false",
                   help="batch mode: KernelBench's trials only")
    p.add_argument("--strict-seed", type=int, help="the seed of --strict's extra inputs (default: a fresh one, "
                                                   "printed so that a failure can be replayed)")
    p.add_argument("--json", metavar="PATH", help="also write the full result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--traceback", action="store_true", help="print the candidate's full traceback on errors")
    batch.add_arguments(p, "check", default_timeout=600)
    return p


def batch_main(args) -> int:
    """--problems / --merge: one summary table and one JSON for a whole folder."""
    progress = None if args.quiet else (lambda msg: print(f"[check] {msg}", file=sys.stderr, flush=True))
    extra = ["--dtype", args.dtype, "--seed", str(args.seed)] + \
            (["--keep-integer-inputs"] if args.keep_integer_inputs else []) + \
            (["--strict"] if args.strict is not False else []) + \
            (["--strict-seed", str(args.strict_seed)] if args.strict_seed is not None else []) + \
            (["--atol", str(args.atol)] if args.atol is not None else []) + \
            (["--rtol", str(args.rtol)] if args.rtol is not None else [])
    try:
        sets = batch_sets(args)
    except CheckError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    result = batch.main_from_args(args, tool="check", device=args.device or "auto", extra=extra, trials=args.trials,
                                  progress=progress, sets=sets)
    if result is None:
        return 2
    return 0 if all(r["verdict"] == "PASS" for r in result["results"]) else 1


def batch_sets(args) -> dict:
    """--set and the size flags as {name: value} for every pair (the size flags are this
    problem's names: batch_size, input_size, hidden_size, scaling_factor)."""
    sets = parse_sets(args.sets)
    check_counts(batch=args.batch, input=args.input_size, hidden=args.hidden)
    for flag, value in (("batch", args.batch), ("input", args.input_size), ("hidden", args.hidden),
                        ("scale", args.scale)):
        if value is not None:
            sets[SIZE_FLAGS[flag]] = value
    return sets


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.json:  # expanded once: the folder checked is the one every writer below (and a batch's) uses
        args.json = str(Path(args.json).expanduser())
    if args.json and not Path(args.json).resolve().parent.is_dir():  # before the run, not after
        print(f"ERROR: cannot write {args.json!r}: its folder does not exist", file=sys.stderr)
        return 2
    if args.problems or args.merge:
        return batch_main(args)
    progress = None if args.quiet else (lambda msg: print(f"[check] {msg}", file=sys.stderr, flush=True))
    try:
        result = run_check(
            model=args.model, reference=args.reference, trials=args.trials, seed=args.seed,
            device=args.device, dtype=args.dtype, batch=args.batch, input_size=args.input_size,
            hidden=args.hidden, scale=args.scale, atol=args.atol, rtol=args.rtol, progress=progress,
            sets=parse_sets(args.sets), keep_integer_inputs=args.keep_integer_inputs, strict=bool(args.strict),
            strict_seed=args.strict_seed)
    except CheckError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"schema_version": SCHEMA_VERSION, "verdict": "ERROR", "passed": False,
                           "reason": "check_error", "message": f"ERROR: {exc}"}, f, indent=2)
        return 2
    print(format_report(result))
    if args.traceback and result.get("error"):
        print(result["error"]["traceback"], file=sys.stderr)
    if args.json:  # serialised whole before the file is opened: a value JSON cannot hold must not truncate it
        Path(args.json).write_text(json.dumps(json_ready(result), indent=2, allow_nan=False))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())

