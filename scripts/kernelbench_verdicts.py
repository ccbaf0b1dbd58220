#!/usr/bin/env python
"""KernelBench's own verdicts beside check.py's, pair by pair, on the CPU.

    python scripts/kernelbench_verdicts.py --kernelbench /path/to/KernelBench          # the default pairs
    python scripts/kernelbench_verdicts.py --kernelbench DIR --pair PROBLEM.py CANDIDATE.py [--set NAME=VALUE]

DIR is a work tree of KernelBench's repository (its evaluation is imported from DIR/src at run
time; none of its code is kept here). For each (problem, candidate) pair, each in a process of
its own: (a) KernelBench's `kernelbench.eval.eval_kernel_against_ref` on the problem's and the
candidate's source, 5 correctness trials, seed 42, fp32 or --dtype, as its scripts call it; (b) `check.py`
with KernelBench's protocol; (c) `check.py --strict`. The default pairs: every pair of
tests/problems/ as batch mode finds them, and tests/problems/kernelbench/ at small sizes (--set).

KernelBench's eval assumes CUDA. To run it on the CPU, and for the length of the call only:
  - the modules it imports but eval never calls (openai, litellm: its LLM clients; tqdm) are empty
    stand-ins when they are not installed;
  - inside kernelbench.eval and kernelbench.utils (get_gpu_vendor), the name `torch` is a view of
    torch whose `cuda` is a CPU stand-in: is_available() is True (eval asserts it), get_device_name()
    is "cpu", and set_device, synchronize, manual_seed, empty_cache, reset_peak_memory_stats do
    nothing (its set_seed still calls torch.manual_seed, which seeds the CPU), device(...) is a null
    context; every other name, torch.allclose and all the comparison included, is torch itself;
  - `device=torch.device("cpu")` is passed.
Its comparison, seeds, input casts and trial loop run as written.

Exit status: 0 when every plain verdict equals KernelBench's, 1 when one differs, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import subprocess
import sys
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.batch import discover, set_arguments  # noqa: E402
from harness.problem import parse_sets  # noqa: E402

PROBLEMS = REPO / "tests" / "problems"
# tests/problems/kernelbench's problems are GiB-sized; the CPU run takes them at these sizes.
SMALL = {"19_ReLU": {"batch_size": 16, "dim": 1024},
         "33_BatchNorm": {"batch_size": 4, "features": 8, "dim1": 16, "dim2": 16}}
MARK = "KERNELBENCH_VERDICT "


def default_pairs() -> list:
    pairs = [(PROBLEMS / f"{p.problem}.py", PROBLEMS / p.candidate, {}) for p in discover(PROBLEMS)]
    folder = PROBLEMS / "kernelbench"
    return pairs + [(folder / f"{p.problem}.py", folder / p.candidate, SMALL.get(p.problem, {}))
                    for p in discover(folder)]


# ---- (a) KernelBench's eval, in the child process ------------------------------------------------

class _CudaOnCpu:
    """What eval.py calls on torch.cuda, on a machine without CUDA."""
    is_available = staticmethod(lambda: True)
    get_device_name = staticmethod(lambda device=None: "cpu")
    set_device = synchronize = manual_seed = empty_cache = reset_peak_memory_stats = \
        staticmethod(lambda *args, **kwargs: None)
    device = staticmethod(lambda device=None: contextlib.nullcontext())


@contextlib.contextmanager
def cuda_on_cpu(modules):
    import torch

    view = types.ModuleType("torch")
    view.__getattr__ = lambda name: getattr(torch, name)
    view.cuda = _CudaOnCpu
    for m in modules:
        m.torch = view
    try:
        yield
    finally:
        for m in modules:
            m.torch = torch


def import_kernelbench(src: Path):
    for name in ("openai", "litellm", "tqdm"):
        try:
            importlib.import_module(name)
        except ImportError:
            stand_in = types.ModuleType(name)
            stand_in.OpenAI = stand_in.completion = stand_in.tqdm = None
            sys.modules[name] = stand_in
    sys.path.insert(0, str(src / "src"))
    return importlib.import_module("kernelbench.eval"), importlib.import_module("kernelbench.utils")


def kernelbench_verdict(src: Path, problem: Path, candidate: Path, sets: dict, dtype: str) -> dict:
    import torch
    from harness.problem import overridden_source
    from harness.protocol import DTYPES

    ev, utils = import_kernelbench(src)
    ref_src = overridden_source(str(problem), sets) if sets else problem.read_text()
    try:
        with cuda_on_cpu([ev, utils]):
            r = ev.eval_kernel_against_ref(ref_src, candidate.read_text(), seed_num=42, num_correct_trials=5,
                                           measure_performance=False, device=torch.device("cpu"),
                                           precision=DTYPES[dtype])
    except Exception as exc:  # it catches only RuntimeError around the candidate's constructor
        return {"verdict": "RAISED", "why": f"{type(exc).__name__}: {exc}".splitlines()[0][:120]}
    if r is None:
        return {"verdict": "NONE", "why": "eval returned None (it asks for a retry)"}
    md = r.metadata
    why = md.get("correctness_issue") or md.get("runtime_error") or md.get("compilation_error")
    diffs = [float(d) for d in md.get("max_difference", [])]
    return {"verdict": "PASS" if r.correctness else "FAIL", "compiled": r.compiled,
            "trials": md.get("correctness_trials"), "max_difference": max(diffs) if diffs else None,
            "why": None if why is None else str(why).splitlines()[0][:120]}


# ---- (b), (c) and the table, in the parent --------------------------------------------------------

def run(cmd: list, timeout: float) -> tuple:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return None, None
    return p.returncode, p.stdout


def kernelbench_side(args, problem, candidate, sets) -> dict:
    rc, out = run([sys.executable, __file__, "--kernelbench", str(args.kernelbench), "--dtype", args.dtype, "--one",
                   str(problem), str(candidate), json.dumps(sets)], args.timeout)
    if rc is None:
        return {"verdict": "TIMEOUT", "why": f"over {args.timeout:g} s"}
    line = next((s for s in out.splitlines() if s.startswith(MARK)), None)
    return json.loads(line[len(MARK):]) if line else {"verdict": "CRASH", "why": f"exit status {rc}"}


def ours(args, problem, candidate, sets, strict: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [sys.executable, str(REPO / "check.py"), "--reference", f"{problem}:Model", "--model",
               f"{candidate}:ModelNew", "--device", "cpu", "--dtype", args.dtype, "--quiet", "--json", str(out)]
        strict_args = ["--strict", "--strict-seed", str(args.strict_seed)] if strict else []
        rc, _ = run(cmd + set_arguments(sets) + strict_args, args.timeout)
        if rc is None:
            return {"verdict": "TIMEOUT", "reason": "timeout", "why": f"over {args.timeout:g} s"}
        if not out.is_file():
            return {"verdict": "CRASH", "reason": "crash", "why": f"exit status {rc}"}
        r = json.loads(out.read_text())
    findings = (r.get("strict") or {}).get("findings") or []
    why = next((f["message"] for f in findings if f["reason"] == r["reason"]), r.get("message") or "")
    return {"verdict": r["verdict"], "reason": r["reason"], "why": why.splitlines()[0][:160] if why else None}


def compare(args, pair) -> dict:
    problem, candidate, sets = pair
    kb = kernelbench_side(args, problem, candidate, sets)
    plain, strict = ours(args, problem, candidate, sets, False), ours(args, problem, candidate, sets, True)
    return {"pair": f"{problem.stem}/{candidate.name}", "sets": sets, "kernelbench": kb, "ours": plain,
            "strict": strict, "agree": (kb["verdict"] == "PASS") == (plain["verdict"] == "PASS")}


def table(rows: list) -> str:
    def kb(k):
        return (k["verdict"] + (f" {k['trials']}" if k.get("trials") else "")
                + (f" max_diff {k['max_difference']:.3g}" if k.get("max_difference") is not None else "")
                + (f" ({k['why']})" if k.get("why") and k["verdict"] != "PASS" else ""))

    def us(o):
        return o["verdict"] + (f" {o['reason']}" if o.get("reason") else "")

    lines = [f"{'pair':44} {'KernelBench':58} {'check.py':22} {'--strict':30} agree"]
    lines += [f"{r['pair']:44} {kb(r['kernelbench'])[:58]:58} {us(r['ours']):22} {us(r['strict']):30} "
              f"{'yes' if r['agree'] else 'NO'}" for r in rows]
    n, agree = len(rows), sum(r["agree"] for r in rows)
    lines.append(f"\n{n} pairs; plain verdicts equal to KernelBench's: {agree}/{n}")
    lines += [f"  differs: {r['pair']}: check.py {r['ours']['reason']}: {r['ours']['why']}" for r in rows
              if not r["agree"]]
    differ = [r for r in rows if (r["strict"]["verdict"] == "PASS") != (r["kernelbench"]["verdict"] == "PASS")]
    lines.append(f"--strict's verdict differs from KernelBench's on {len(differ)}:")
    lines += [f"  {r['pair']}: {r['strict']['reason']}: {r['strict']['why']}" for r in differ]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernelbench", type=Path, required=True, help="a work tree of KernelBench's repository")
    p.add_argument("--pair", nargs=2, action="append", metavar=("PROBLEM", "CANDIDATE"),
                   help="a problem file and a candidate file (repeatable; default: the pairs above)")
    p.add_argument("--set", dest="sets", action="append", metavar="NAME=VALUE", help="for every --pair")
    p.add_argument("--dtype", choices=["fp32", "fp16", "bf16"], default="fp32", help="KernelBench's precision")
    p.add_argument("--timeout", type=float, default=60, help="seconds per run (default %(default)s)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--strict-seed", type=int, default=1)
    p.add_argument("--json", type=Path, help="also write the rows as JSON")
    p.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # the child: PROBLEM CANDIDATE SETS_JSON
    args = p.parse_args(argv)
    if not (args.kernelbench / "src" / "kernelbench" / "eval.py").is_file():
        p.error(f"{args.kernelbench}/src/kernelbench/eval.py not found: give a KernelBench work tree")
    if args.one:
        problem, candidate, sets = args.one
        verdict = kernelbench_verdict(args.kernelbench.resolve(), Path(problem), Path(candidate), json.loads(sets),
                                      args.dtype)
        print(MARK + json.dumps(verdict), flush=True)
        return 0
    sets = parse_sets(args.sets)
    pairs = [(Path(a).resolve(), Path(b).resolve(), sets) for a, b in args.pair] if args.pair else default_pairs()
    with ThreadPoolExecutor(args.workers) as pool:
        rows = list(pool.map(lambda pair: compare(args, pair), pairs))
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
