"""The benchmark of any KernelBench problem: what `bench.py --reference FILE:Model` runs.

Rows: the reference eager, the reference under `torch.compile`, and each candidate
(`--model`), all built after KernelBench's `set_seed(42)` from the problem's
`get_init_inputs()` and run on the same `get_inputs()` (module-level values overridable
with `--set`). Each row is checked against the reference eager (bitwise, and allclose at
KernelBench's fp32 tolerance) and timed with KernelBench's method (write flush, one
call, mean over trials) and the robust one (read flush, median).

Roofline, labelled as estimates: the flops torch's flop counter reports for the
reference's forward, and a lower bound on the bytes moved (every input, parameter,
buffer and the output, once). A row's "% of roofline" is the larger of flops / the fp32
GEMM ceiling and bytes / the read ceiling, both measured in the same run, over its time.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

import torch

from harness.compare import changed_inputs, compare_outputs
from harness.machine import elapsed_s, log, machine_info, measure_ceilings
from harness.problem import CheckError, describe, error_info, load_class, problem_overrides, problem_values
from harness.protocol import KERNELBENCH_SEED, KERNELBENCH_TOL, cast_note, set_seed, to_device
from harness.timing import (CPU_KB_TRIALS, CPU_KB_WARMUP, CPU_REPEATS, KB_TRIALS, KB_WARMUP, Backend, BenchError,
                            format_ms, kernelbench_time, make_backend, robust_time)

SCHEMA = "kernelbench-problem-bench/1"


def flops_estimate(model: torch.nn.Module, inputs: Sequence) -> int | None:
    """Flops of one forward as torch's flop counter reports them (matmuls, convolutions,
    attention; elementwise work is not counted), or None if it cannot run."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            model(*inputs)
        return int(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - an estimate; its absence is reported as such
        return None


def bytes_lower_bound(model: torch.nn.Module, inputs: Sequence, output: Any) -> int:
    """Every input, parameter, buffer and output tensor read or written once."""
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    tensors += list(model.parameters()) + list(model.buffers())
    outputs = output if isinstance(output, (tuple, list)) else [output]
    tensors += [t for t in outputs if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def _check(out: Any, ref: torch.Tensor, tol: float) -> dict:
    if not isinstance(out, torch.Tensor):
        return {"ok": False, "kind": "not_a_tensor", "reason": f"returned {type(out).__name__}, not a Tensor"}
    for kind, mine, theirs in (("wrong_shape", tuple(out.shape), tuple(ref.shape)), ("wrong_dtype", out.dtype, ref.dtype)):
        if mine != theirs:
            return {"ok": False, "kind": kind, "reason": f"{mine}, the reference's {theirs}"}
    cmp = compare_outputs(ref, out, tol, tol)
    return {"ok": cmp["allclose"], "kind": None if cmp["allclose"] else "mismatch",
            "bitwise_equal": bool(torch.equal(out, ref)), "max_abs_diff": cmp["max_abs_diff"],
            "reason": None if cmp["allclose"] else f"{cmp['n_fail']} of {cmp['n_elements']} elements outside {tol:g}"}


def _row(name: str, fn, inputs: list, ref_out, backend: Backend, args, tol: float) -> dict:
    row: dict[str, Any] = {"name": name, "error": None, "check": None}
    # Each row gets its own copy: a candidate that writes into its inputs must not change
    # what the next row is given.
    originals = inputs
    inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        with torch.no_grad():
            out = fn(*inputs)
            backend.sync()
            row["check"] = _check(out, ref_out, tol)
            changed = [c["input"] for c in changed_inputs(originals, inputs)]
            if changed and row["check"]["ok"]:
                row["check"] = {**row["check"], "ok": False, "kind": "mutated_input",
                                "reason": f"the call changed its input(s) {changed}: the reference's never change"}
            kb = kernelbench_time(fn, inputs, warmup=args.kb_warmup, trials=args.kb_trials, backend=backend)
            rb = robust_time(fn, inputs, warmup=1, min_calls=min(args.repeats, 50), max_calls=args.repeats,
                             budget_s=1.0, backend=backend)
    except Exception as exc:  # noqa: BLE001 - the row fails alone
        row["error"] = f"{type(exc).__name__}: {exc}"
        log(f"  {name} failed: {row['error']}")
        return row
    row["kernelbench"] = {k: v for k, v in kb.items() if k != "times_ms"}
    row["robust"] = rb
    row["time_ms"] = rb["median_ms"]
    return row


def run_problem_bench(args, device: torch.device, sets: dict) -> dict:
    """Build, check and time every row; measure the ceilings; return the JSON-able result."""
    # KernelBench never enables TF32: the reference's matmuls are full fp32. Pinned for the run.
    prev_tf32, prev_precision = torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        return _run(args, device, sets)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
        torch.set_float32_matmul_precision(prev_precision)


def _run(args, device: torch.device, sets: dict) -> dict:
    try:
        ref_cls = load_class(args.reference, "Model")
    except Exception as exc:
        raise BenchError(f"--reference {args.reference!r}: {type(exc).__name__}: {exc}") from None
    module = sys.modules[ref_cls.__module__]
    cuda = device.type == "cuda"
    if args.kb_warmup is None:
        args.kb_warmup = KB_WARMUP if cuda else CPU_KB_WARMUP
    if args.kb_trials is None:
        args.kb_trials = KB_TRIALS if cuda else CPU_KB_TRIALS
    if args.repeats is None:
        args.repeats = 1000 if cuda else CPU_REPEATS
    backend = make_backend(device)
    tol = KERNELBENCH_TOL["fp32"]
    try:
        with problem_overrides(module, sets):
            keep_integer = getattr(args, "keep_integer_inputs", False)
            set_seed(KERNELBENCH_SEED, device)  # the constructor's tensors are drawn, cast and moved as in check.py
            init_inputs = [to_device(x, device, torch.float32, keep_integer) for x in module.get_init_inputs()]
            set_seed(KERNELBENCH_SEED, device)
            drawn = list(module.get_inputs())
            inputs = [to_device(x, device, torch.float32, keep_integer) for x in drawn]
            values = {k: list(v) if isinstance(v, tuple) else v for k, v in problem_values(module).items()}
            names = dict(vars(module))  # what a candidate may use unimported, as in KernelBench's eval
    except CheckError as exc:  # a bad --set
        raise BenchError(str(exc)) from None
    except Exception as exc:
        raise BenchError(f"the problem's get_init_inputs / get_inputs raised: {type(exc).__name__}: {exc}") from None
    set_seed(KERNELBENCH_SEED, device)
    ref_model = ref_cls(*init_inputs).to(device=device, dtype=torch.float32).eval()
    try:
        with torch.no_grad():
            ref_out = ref_model(*inputs)
    except Exception as exc:
        why = cast_note(drawn, torch.float32, keep_integer)
        raise BenchError(f"the reference's forward raised: {type(exc).__name__}: {exc}{why}") from None
    flops = flops_estimate(ref_model, inputs)
    nbytes = bytes_lower_bound(ref_model, inputs, ref_out)

    rows_to_run: list[tuple[str, Any]] = [("reference eager", ref_model)]
    if not args.no_compile:
        rows_to_run.append(("reference compiled", torch.compile(ref_model)))
    for spec in args.model or []:
        try:
            cls = load_class(spec, problem_names=names)
            set_seed(KERNELBENCH_SEED, device)
            rows_to_run.append((spec, cls(*init_inputs).to(device=device, dtype=torch.float32).eval()))
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot be built is a failed row
            rows_to_run.append((spec, None))
            log(f"  {spec} cannot be built: {error_info('construct', exc)['message']}")
    rows = []
    for name, fn in rows_to_run:
        log(f"timing {name}")
        rows.append(_row(name, fn, inputs, ref_out, backend, args, tol) if fn is not None
                    else {"name": name, "error": "cannot be built", "check": None})
    log("measuring the ceilings")
    ceilings = measure_ceilings(device, backend, fast=args.fast_ceilings)
    eager = rows[0].get("time_ms")
    compiled = next((r.get("time_ms") for r in rows if r["name"] == "reference compiled"), None)
    for r in rows:
        t = r.get("time_ms")
        if not t:
            continue
        r["speedup_vs_eager"] = eager / t if eager else None
        r["speedup_vs_compiled"] = compiled / t if compiled else None
        bound_s = max((flops or 0) / (ceilings["fp32_tflops"] * 1e12), nbytes / (ceilings["read_gbps"] * 1e9))
        r["pct_of_roofline_estimate"] = 100.0 * bound_s / (t * 1e-3)
        r["roofline_floor_ms"] = bound_s * 1e3
        # Placeholder ceilings (--fast-ceilings) bound nothing.
        r["impossible"] = None if args.fast_ceilings else beyond_floor(r, bound_s * 1e3)
    return {
        "schema": SCHEMA,
        "meta": {**machine_info(device), "elapsed_s": elapsed_s()},
        "problem": {"reference": describe(args.reference), "init_inputs": [repr(v) for v in init_inputs],
                    "values": values, "overrides": sets},
        "estimates": {"flops": flops, "bytes_lower_bound": nbytes,
                      "note": "flops from torch's flop counter (elementwise work not counted); bytes: every "
                              "input, parameter, buffer and output once"},
        "ceilings": ceilings,
        "tolerance": tol,
        "rows": rows,
    }


# A time this much under the floor at the measured ceilings is impossible: the ceilings are
# measured, not the data sheet's, so a kernel at the true peak may beat them by a few percent.
IMPOSSIBLE_MARGIN = 1.25


def beyond_floor(row: dict, floor_ms: float) -> list:
    """Each method whose time is below the roofline floor (bytes at the read ceiling, flops
    at the fp32 GEMM ceiling) by more than IMPOSSIBLE_MARGIN: that time cannot be real
    (work on another stream, a patched timer, or not the problem's work)."""
    times = {"kernelbench mean": row.get("kernelbench", {}).get("mean_ms"),
             "strict median": row.get("robust", {}).get("median_ms")}
    return [{"method": m, "time_ms": t, "floor_ms": floor_ms} for m, t in times.items()
            if t is not None and t * IMPOSSIBLE_MARGIN < floor_ms]


def format_problem_table(result: dict) -> str:
    est, m = result["estimates"], result["meta"]
    lines = [f"problem {result['problem']['reference']}; {m.get('gpu') or m['device']}, torch {m['torch']}",
             f"estimates: {est['flops'] if est['flops'] is not None else '?'} flops (torch's flop counter), "
             f"at least {est['bytes_lower_bound']:,} bytes moved; ceilings: read {result['ceilings']['read_gbps']:.0f} "
             f"GB/s, fp32 GEMM {result['ceilings']['fp32_tflops']:.2f} TFLOP/s", "",
             f"{'row':<40} {'KernelBench':>12} {'strict':>12} {'x eager':>8} {'x comp':>7} {'%roof*':>7}  check"]
    lines.append("-" * len(lines[-1]))
    for r in result["rows"]:
        if r.get("error"):
            lines.append(f"{r['name'][:40]:<40} error: {r['error']}")
            continue
        c = r["check"]
        check = ("bits==" if c.get("bitwise_equal") else "ok") if c["ok"] else f"FAIL ({c['reason']})"
        if r.get("impossible"):
            check += "; IMPOSSIBLE: " + ", ".join(f"{x['method']} {format_ms(x['time_ms'])} is below the roofline "
                                                  f"floor {format_ms(x['floor_ms'])}" for x in r["impossible"])
        sp = lambda v: f"{v:.3f}" if v else "-"  # noqa: E731
        pct = r.get("pct_of_roofline_estimate")
        lines.append(f"{r['name'][:40]:<40} {format_ms(r['kernelbench']['mean_ms']):>12} {format_ms(r['time_ms']):>12} "
                     f"{sp(r.get('speedup_vs_eager')):>8} {sp(r.get('speedup_vs_compiled')):>7} "
                     f"{(f'{pct:.1f}' if pct else '-'):>7}  {check}")
    lines.append("KernelBench: its method as it is (warm-ups, then per trial a 256 MB write flush and CUDA events on "
                 "the current stream around one call; mean). strict: the median of single calls, each after a read "
                 "flush (the primary time, which the speedups use)")
    lines.append(f"* roofline from the estimates above; checks against the reference eager at {result['tolerance']:g}")
    return "\n".join(lines)


def write_problem_plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r.get("time_ms")]
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.5))
    ax.barh([r["name"] for r in rows], [r["time_ms"] for r in rows],
            color=["tab:green" if r["check"]["ok"] else "tab:red" for r in rows])
    ax.set(xlabel="median time (ms), read-flushed", title=result["problem"]["reference"])
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
