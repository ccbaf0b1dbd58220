#!/usr/bin/env python
"""check.py: the correctness check a kernel author wishes KernelBench had.

Validates a candidate (by default `modelnew:ModelNew`) against `reference:Model`
(KernelBench level 2, problem 14) and says whether it passes and, if not, why.

    python check.py                                   # KernelBench's own check, 5 trials
    python check.py --trials 200                      # pass-rate estimate
    python check.py --model path/to/mine.py:ModelNew --dtype bf16 --json out.json
    python check.py --batch 64 --input 128 --hidden 256   # other sizes

The trial loop follows KernelBench's protocol exactly (seeds, order, `.to(device,
dtype)`, shape check, `torch.allclose(ref, new, atol=tol, rtol=tol)`), so a PASS on
the default run means KernelBench's check passes on the same machine. Around it,
it adds what KernelBench does not tell you: bit-exactness, where and by how much
the worst element fails, the error of both models against an fp64 oracle, pass
rates at several tolerances, and clear verdicts for broken candidates (import or
runtime errors, wrong shape/dtype/device, NaN, input mutation, stale outputs).

Exit status: 0 when every trial passes, 1 when the candidate fails, 2 when the
check itself cannot run (bad arguments, the reference fails).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import ast
import contextlib
import copy
import math
import os
import sys
import time
import traceback
from typing import Any, Callable, Optional

import torch

SCHEMA_VERSION = 1

# KernelBench's seed: set before each constructor and before drawing the trial seeds.
KERNELBENCH_SEED = 42
KERNELBENCH_TRIALS = 5

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# KernelBench's tolerance per precision (atol = rtol), since Nov 2025.
KERNELBENCH_TOL = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
# Tolerances at which the per-trial pass rate is reported.
SWEEP_TOLS = (1e-4, 1e-3, 1e-2)

REPO_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = "modelnew:ModelNew"
DEFAULT_REFERENCE = "reference:Model"

# Why a candidate fails, most fundamental first: the verdict names the first of these
# that occurred in any trial, because a later one is usually a consequence of it
# (a wrong shape makes the value comparison meaningless, and so on).
REASONS = (
    "import_error",      # the candidate's module or class could not be loaded
    "construct_error",   # the constructor raised
    "forward_error",     # forward (or the synchronize after it) raised
    "not_a_tensor",      # forward returned something other than a Tensor
    "wrong_shape",
    "wrong_dtype",
    "wrong_device",
    "mutated_input",     # the candidate changed its input tensor
    "nonfinite",         # NaN/Inf where the reference is finite
    "stale_output",      # an earlier trial's output again, although the inputs changed
    "mismatch",          # outside torch.allclose at the tolerance
)


class CheckError(Exception):
    """The check itself cannot run (bad spec, reference fails): exit status 2."""


# --------------------------------------------------------------------------- loading


def load_class(spec: str, default_class: str = "ModelNew") -> type:
    """Load `MODULE:CLASS` (an importable module) or `path/to/file.py:CLASS`."""
    module_part, _, class_name = spec.rpartition(":")
    if not module_part:  # no colon: the whole spec is the module
        module_part, class_name = spec, default_class
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        path = os.path.abspath(module_part)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such file: {module_part}")
        # The candidate may import its neighbours (a kernels package, a helper), as it
        # would when run from its own folder.
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        # A unique module name per path: two candidates called modelnew.py must not
        # shadow each other, and re-checking a file must re-read it.
        name = "_check_candidate_%x_%s" % (abs(hash(path)), os.path.splitext(os.path.basename(path))[0])
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_part)
    try:
        cls = getattr(module, class_name)
    except AttributeError:
        raise AttributeError(f"module {module_part!r} has no attribute {class_name!r}") from None
    if not callable(cls):
        raise TypeError(f"{spec} is a {type(cls).__name__}, not a class")
    return cls


def _describe(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def _error_info(stage: str, exc: BaseException) -> dict:
    return {
        "stage": stage,
        "type": type(exc).__name__,
        "message": str(exc).strip().splitlines()[0][:500] if str(exc).strip() else "",
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


# ------------------------------------------------------------------- KernelBench protocol


def kernelbench_trial_seeds(trials: int, seed: int = KERNELBENCH_SEED) -> list[int]:
    """The per-trial seeds, drawn up front exactly as KernelBench draws them."""
    torch.manual_seed(seed)
    return [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(trials)]


def set_seed(seed: int, device: torch.device) -> None:
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)


def _to(obj: Any, device: torch.device, dtype: torch.dtype) -> Any:
    # KernelBench casts only floating tensors to the precision; integer inputs keep theirs.
    if isinstance(obj, torch.Tensor):
        return obj.to(device=device, dtype=dtype) if obj.is_floating_point() else obj.to(device)
    return obj


def _clone(obj: Any) -> Any:
    return obj.clone() if isinstance(obj, torch.Tensor) else obj


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------- comparisons


def _float(v: float) -> Any:
    """A float for JSON: NaN and infinities become the strings "nan", "inf", "-inf"."""
    v = float(v)
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def compare_outputs(ref: torch.Tensor, new: torch.Tensor, atol: float, rtol: float) -> dict:
    """Element-wise comparison of two same-shape, same-dtype outputs.

    Uses torch.allclose's own rule, |ref - new| <= atol + rtol * |new| (the second
    argument, the candidate, scales the tolerance: KernelBench calls
    allclose(reference_output, candidate_output)).
    """
    close = torch.isclose(ref, new, atol=atol, rtol=rtol)
    ref64, new64 = ref.double(), new.double()
    diff = (ref64 - new64).abs()
    allowed = atol + rtol * new64.abs()
    finite_diff = diff[torch.isfinite(diff)]
    # The worst element is the one furthest outside its own allowance (|diff| / allowed),
    # not the largest |diff|: near-zero outputs fail with small differences.
    ratio = torch.where(torch.isnan(diff) | torch.isnan(allowed), torch.full_like(diff, math.inf), diff / allowed)
    flat = int(torch.argmax(ratio.flatten()).item()) if ratio.numel() else 0
    index = list(torch.unravel_index(torch.tensor(flat), tuple(ref.shape))) if ref.dim() else []
    index = [int(i) for i in index]
    r, n = ref64.flatten()[flat].item(), new64.flatten()[flat].item()
    # For a NaN/Inf candidate no tolerance helps; show what a finite value would have been allowed.
    rel_term = rtol * (abs(n) if math.isfinite(n) else abs(r))
    return {
        "allclose": bool(close.all().item()),
        "n_fail": int((~close).sum().item()),
        "n_elements": ref.numel(),
        "max_abs_diff": _float(diff.max().item()) if diff.numel() else 0.0,
        "mean_abs_diff": _float(diff.mean().item()) if diff.numel() else 0.0,
        "max_abs_diff_finite": _float(finite_diff.max().item()) if finite_diff.numel() else 0.0,
        "candidate_all_zero": bool((new == 0).all().item()),
        "worst": {
            "index": index,
            "reference": _float(r),
            "candidate": _float(n),
            "abs_diff": _float(abs(r - n)),
            "allowed": _float(atol + rel_term),
            "ratio": _float(ratio.flatten()[flat].item()),
            "dominant": "atol" if atol >= rel_term else "rtol",
        },
    }


def pass_at(ref: torch.Tensor, new: torch.Tensor, tol: float) -> bool:
    return bool(torch.allclose(ref, new, atol=tol, rtol=tol))


def oracle_output(x: torch.Tensor, weight: Optional[torch.Tensor], scale: float,
                  colsum64: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The exact answer in fp64: sum_j (x @ W.T)[:, j] / 2 * s == x @ W.sum(0) * (s / 2).

    W is the reference's weight as it sits on the device (after the cast to the
    precision), so the oracle is the truth for exactly the numbers both models saw.
    """
    if colsum64 is None:
        colsum64 = weight.sum(0, dtype=torch.float64)
    return (x.double() @ colsum64 * (scale / 2)).unsqueeze(1)


def _oracle_error(out: torch.Tensor, truth: torch.Tensor) -> dict:
    err = out.double() - truth
    return {"rms": _float(err.pow(2).mean().sqrt().item()), "max_abs": _float(err.abs().max().item())}


# ------------------------------------------------------------------------- the check


# This problem's size flags, as the module-level names of its KernelBench file.
SIZE_FLAGS = {"batch": "batch_size", "input": "input_size", "hidden": "hidden_size", "scale": "scaling_factor"}


def problem_values(module) -> dict:
    """The module-level numbers of a problem file (its sizes): what `--set` can change."""
    def plain(v):
        return isinstance(v, (bool, int, float)) or (isinstance(v, tuple) and all(isinstance(e, (int, float)) for e in v))

    return {k: v for k, v in vars(module).items() if not k.startswith("_") and plain(v)}


@contextlib.contextmanager
def problem_overrides(module, sets: dict):
    """The problem file with some module-level values replaced (`--set name=value`), for
    the duration of the check: KernelBench's get_inputs and get_init_inputs read them
    when called. The old values come back afterwards."""
    known = problem_values(module)
    unknown = [k for k in sets if k not in known]
    if unknown:
        raise CheckError(f"the reference module has no module-level value {', '.join(map(repr, unknown))} "
                         f"to set; it has: {', '.join(sorted(known)) or 'none'}")
    old = {k: getattr(module, k) for k in sets}
    try:
        for k, v in sets.items():
            setattr(module, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


def parse_sets(items: Optional[list]) -> dict:
    """`name=value` pairs; values are Python literals (8192, 1.5, (3, 3), True)."""
    out = {}
    for item in items or []:
        name, eq, text = item.partition("=")
        if not eq or not name.isidentifier():
            raise CheckError(f"--set wants name=value, got {item!r}")
        try:
            out[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise CheckError(f"--set {name}: {text!r} is not a Python literal") from None
    return out


def resolve_sizes(reference_module, batch=None, input_size=None, hidden=None, scale=None,
                  sets: Optional[dict] = None) -> tuple[dict, dict]:
    """This problem's sizes (KernelBench's unless overridden) and every override as
    module-level names: the size flags map to this problem's names."""
    sets = dict(sets or {})
    for flag, value in (("batch", batch), ("input", input_size), ("hidden", hidden), ("scale", scale)):
        if value is not None:
            name = SIZE_FLAGS[flag]
            if not hasattr(reference_module, name):
                raise CheckError(f"--{flag} sets {name}, which the reference module does not have; "
                                 f"use --set NAME=VALUE for this problem's values")
            sets[name] = value
    values = {**problem_values(reference_module), **sets}
    sizes = {flag: values[name] for flag, name in SIZE_FLAGS.items() if name in values}
    return sizes, sets


def is_this_problem(ref_cls) -> bool:
    """The reference is this repository's reference.Model (KernelBench L2/14), whose
    exact answer has a closed form; any other problem gets the fp64 run as its oracle."""
    module = sys.modules.get(ref_cls.__module__)
    path = getattr(module, "__file__", None)
    return path is not None and os.path.abspath(path) == os.path.join(REPO_DIR, "reference.py")


def _double_inputs(inputs: list) -> list:
    return [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def run_check(
    model: Any = DEFAULT_MODEL,
    reference: Any = DEFAULT_REFERENCE,
    trials: int = KERNELBENCH_TRIALS,
    seed: int = KERNELBENCH_SEED,
    device: Optional[str] = None,
    dtype: str = "fp32",
    batch: Optional[int] = None,
    input_size: Optional[int] = None,
    hidden: Optional[int] = None,
    scale: Optional[float] = None,
    atol: Optional[float] = None,
    rtol: Optional[float] = None,
    progress: Optional[Callable[[str], None]] = None,
    sets: Optional[dict] = None,
) -> dict:
    """Run the check and return its JSON-able result (see README for the schema).

    `model` and `reference` are `MODULE:CLASS` / `file.py:CLASS` specs or classes.
    Raises CheckError when the check itself cannot run; a failing candidate is a
    result (verdict "FAIL"), never an exception.
    """
    say = progress or (lambda msg: None)
    started = time.perf_counter()
    if dtype not in DTYPES:
        raise CheckError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    if trials < 1:
        raise CheckError("--trials must be at least 1")
    torch_dtype = DTYPES[dtype]
    dev = torch.device(device if device else ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CheckError(f"device {dev} requested but torch.cuda.is_available() is False")
    kb_tol = KERNELBENCH_TOL[dtype]
    atol = kb_tol if atol is None else atol
    rtol = kb_tol if rtol is None else rtol

    # Reference: its failures are the check's failures (exit 2), not the candidate's.
    try:
        ref_cls = load_class(reference, "Model") if isinstance(reference, str) else reference
        ref_module = sys.modules[ref_cls.__module__]
        sizes, overrides = resolve_sizes(ref_module, batch, input_size, hidden, scale, sets)
    except CheckError:
        raise
    except Exception as exc:
        raise CheckError(f"cannot load the reference {_describe(reference)}: {type(exc).__name__}: {exc}") from exc
    with problem_overrides(ref_module, overrides):
        try:
            init_inputs = list(ref_module.get_init_inputs())
        except Exception as exc:
            raise CheckError(f"the reference's get_init_inputs() raised: {type(exc).__name__}: {exc}") from exc
        return _run_check(model, reference, ref_cls, ref_module, init_inputs, sizes, overrides, trials, seed, dev,
                          dtype, torch_dtype, atol, rtol, kb_tol, say, started)


def _run_check(model, reference, ref_cls, ref_module, init_inputs, sizes, overrides, trials, seed, dev, dtype,
               torch_dtype, atol, rtol, kb_tol, say, started) -> dict:
    make_inputs = ref_module.get_inputs
    overridden = bool(overrides)

    result: dict = {
        "schema_version": SCHEMA_VERSION,
        "verdict": None,
        "passed": False,
        "reason": None,
        "message": None,
        "hints": [],
        "config": {
            "model": _describe(model),
            "reference": _describe(reference),
            "device": str(dev),
            "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "dtype": dtype,
            "trials": trials,
            "seed": seed,
            "init_seed": KERNELBENCH_SEED,
            "sizes": sizes,
            "sizes_overridden": overridden,
            "overrides": overrides,
            "problem_values": {k: list(v) if isinstance(v, tuple) else v
                               for k, v in {**problem_values(ref_module), **overrides}.items()},
            "oracle": "closed form (fp64)" if is_this_problem(ref_cls) else "the reference run in float64",
            "atol": atol,
            "rtol": rtol,
            "kernelbench_tol": kb_tol,
            "torch_version": torch.__version__,
        },
        "summary": None,
        "trials": [],
        "error": None,
        "seconds": {},
    }

    with torch.no_grad():  # KernelBench runs both models under no_grad
        say(f"constructing the reference {_describe(reference)} {init_inputs} ...")
        try:
            set_seed(KERNELBENCH_SEED, dev)
            ref_model = ref_cls(*init_inputs).to(device=dev, dtype=torch_dtype)
        except Exception as exc:
            raise CheckError(f"the reference cannot be constructed: {type(exc).__name__}: {exc}") from exc

        say(f"loading and constructing the candidate {_describe(model)} ...")
        try:
            new_cls = load_class(model) if isinstance(model, str) else model
        except BaseException as exc:  # SystemExit from a candidate module must not end the check
            if isinstance(exc, KeyboardInterrupt):
                raise
            result["error"] = _error_info("import", exc)
            return _finish(result, started, "import_error")
        try:
            set_seed(KERNELBENCH_SEED, dev)
            new_model = new_cls(*init_inputs).to(device=dev, dtype=torch_dtype)
            _sync(dev)
        except Exception as exc:
            result["error"] = _error_info("construct", exc)
            return _finish(result, started, "construct_error")
        result["seconds"]["construct"] = time.perf_counter() - started

        # The fp64 oracle. This problem's exact answer is x @ W.sum(0) * (s / 2) with the
        # weight the reference holds; any other problem's is its reference run in float64.
        colsum64 = oracle_scale = oracle_model = None
        if is_this_problem(ref_cls):
            colsum64 = ref_model.weight.sum(0, dtype=torch.float64)
            oracle_scale = ref_model.scaling_factor
        else:
            try:
                oracle_model = copy.deepcopy(ref_model).to(torch.float64)
            except Exception:  # noqa: BLE001 - no oracle, then; the check goes on
                oracle_model = None

        seeds = kernelbench_trial_seeds(trials, seed)
        every = max(1, math.ceil(trials / 20))  # about 20 progress lines at most
        history = []  # (reference, candidate) outputs of earlier trials that passed
        for i, trial_seed in enumerate(seeds):
            trial = _run_trial(
                i, trial_seed, dev, torch_dtype, make_inputs, ref_model, new_model,
                atol, rtol, kb_tol, colsum64, oracle_scale, history, oracle_model,
            )
            result["trials"].append(trial.pop("_record"))
            rec = result["trials"][-1]
            if (i + 1) % every == 0 or i + 1 == trials or rec["status"] != "pass":
                say(
                    f"trial {i + 1}/{trials} seed {trial_seed}: {rec['status'].upper()}"
                    + (f" ({', '.join(rec['reasons'])})" if rec["reasons"] else "")
                    + f"  [{time.perf_counter() - started:.1f} s]"
                )
            if "forward_error" in rec["reasons"]:
                # Later trials would raise again, and after a CUDA fault the context is gone.
                result["error"] = trial["_error"]
                break

    reasons = [r for t in result["trials"] for r in t["reasons"]]
    first = next((r for r in REASONS if r in reasons), None)
    return _finish(result, started, first)


def _run_trial(i, trial_seed, dev, torch_dtype, make_inputs, ref_model, new_model,
               atol, rtol, kb_tol, colsum64, oracle_scale, history, oracle_model=None) -> dict:
    """One trial: fresh inputs, each model on its own copy, then every check."""
    rec: dict = {
        "index": i, "seed": trial_seed, "status": "pass", "reasons": [],
        "kernelbench_pass": False, "bit_exact": False, "allclose": False,
        "pass_at": {f"{t:g}": False for t in SWEEP_TOLS},
        "reference_shape": None, "candidate_shape": None, "candidate_dtype": None, "candidate_device": None,
        "comparison": None, "oracle": None, "nonfinite": None, "mutation": None, "seconds": {},
    }
    out: dict = {"_record": rec}

    set_seed(trial_seed, dev)
    pristine = [_to(x, dev, torch_dtype) for x in make_inputs()]
    ref_inputs = [_clone(x) for x in pristine]
    new_inputs = [_clone(x) for x in pristine]

    t0 = time.perf_counter()
    try:
        ref_out = ref_model(*ref_inputs)
        _sync(dev)
    except Exception as exc:
        raise CheckError(f"the reference's forward raised in trial {i}: {type(exc).__name__}: {exc}") from exc
    rec["seconds"]["reference"] = time.perf_counter() - t0
    rec["reference_shape"] = list(ref_out.shape)

    t0 = time.perf_counter()
    try:
        new_out = new_model(*new_inputs)
        _sync(dev)
    except Exception as exc:
        rec["status"], rec["reasons"] = "fail", ["forward_error"]
        out["_error"] = _error_info(f"forward (trial {i})", exc)
        return out
    rec["seconds"]["candidate"] = time.perf_counter() - t0

    # Input mutation: compare the candidate's copy with the pristine one. KernelBench
    # would not notice (it hands both models the same tensors), but a kernel that
    # writes into its input is a bug waiting for a caller that reuses it.
    changed = []
    for k, (mine, orig) in enumerate(zip(new_inputs, pristine)):
        if isinstance(orig, torch.Tensor) and not (
            isinstance(mine, torch.Tensor) and mine.shape == orig.shape and torch.equal(mine, orig)
        ):
            n = int((mine != orig).sum().item()) if mine.shape == orig.shape else orig.numel()
            changed.append({"input": k, "n_changed": n, "n_elements": orig.numel()})
    if changed:
        rec["reasons"].append("mutated_input")
        rec["mutation"] = changed

    if not isinstance(new_out, torch.Tensor):
        rec["reasons"].insert(0, "not_a_tensor")
        rec["candidate_shape"] = type(new_out).__name__
        rec["status"] = "fail"
        return out
    rec["candidate_shape"] = list(new_out.shape)
    rec["candidate_dtype"] = str(new_out.dtype).replace("torch.", "")
    rec["candidate_device"] = str(new_out.device)
    structural = []
    if new_out.shape != ref_out.shape:
        structural.append("wrong_shape")
    if new_out.dtype != ref_out.dtype:
        structural.append("wrong_dtype")
    if new_out.device != ref_out.device:
        structural.append("wrong_device")
    rec["reasons"] = structural + rec["reasons"]
    if structural:  # KernelBench fails these too (shape check, or allclose raises)
        rec["status"] = "fail"
        return out

    ref_bad = int((~torch.isfinite(ref_out)).sum().item())
    new_bad_where_ref_ok = int((~torch.isfinite(new_out) & torch.isfinite(ref_out)).sum().item())
    rec["nonfinite"] = {"reference": ref_bad, "candidate_where_reference_finite": new_bad_where_ref_ok}
    if new_bad_where_ref_ok:
        rec["reasons"].append("nonfinite")

    cmp = compare_outputs(ref_out, new_out, atol, rtol)
    rec["comparison"] = cmp
    rec["allclose"] = cmp["allclose"]
    rec["bit_exact"] = bool(torch.equal(ref_out, new_out))
    rec["pass_at"] = {f"{t:g}": pass_at(ref_out, new_out, t) for t in SWEEP_TOLS}
    rec["kernelbench_pass"] = pass_at(ref_out, new_out, kb_tol)
    if not cmp["allclose"]:
        rec["reasons"].append("mismatch")

    # A cached result: the candidate repeats an earlier output although the reference's
    # changed. Only earlier outputs that were right for their own inputs count: a
    # candidate that is wrong the same way every time (all zeros) is not caching.
    if any(new_out.shape == old_new.shape and torch.equal(old_new, new_out) and not torch.equal(old_ref, ref_out)
           for old_ref, old_new in history):
        rec["reasons"].insert(rec["reasons"].index("mismatch") if "mismatch" in rec["reasons"] else len(rec["reasons"]),
                              "stale_output")
    if cmp["allclose"] and len(history) < 8:  # a cache returns an early output; 8 is plenty
        history.append((ref_out.detach().clone(), new_out.detach().clone()))

    x = pristine[0] if pristine and isinstance(pristine[0], torch.Tensor) else None
    truth = None
    if colsum64 is not None and x is not None and x.dim() == 2 and x.shape[1] == colsum64.shape[0] \
            and ref_out.shape == (x.shape[0], 1):
        truth = oracle_output(x, None, oracle_scale, colsum64)
    elif oracle_model is not None:
        try:
            truth = oracle_model(*_double_inputs(pristine))
        except Exception:  # noqa: BLE001 - an op without float64 support: no oracle for this trial
            truth = None
        if not isinstance(truth, torch.Tensor) or truth.shape != ref_out.shape:
            truth = None
    if truth is not None:
        rec["oracle"] = {"reference": _oracle_error(ref_out, truth), "candidate": _oracle_error(new_out, truth)}

    rec["status"] = "fail" if rec["reasons"] else "pass"
    return out


def _rms_over_trials(trials: list, who: str) -> Optional[dict]:
    vals = [t["oracle"][who] for t in trials if t.get("oracle")]
    if not vals or any(isinstance(v["rms"], str) or isinstance(v["max_abs"], str) for v in vals):
        return None if not vals else {"rms": "nan", "max_abs": "nan"}
    return {"rms": math.sqrt(sum(v["rms"] ** 2 for v in vals) / len(vals)), "max_abs": max(v["max_abs"] for v in vals)}


def _finish(result: dict, started: float, reason: Optional[str]) -> dict:
    """Fill in the summary, the verdict line and the hints."""
    trials = result["trials"]
    cfg = result["config"]
    n = len(trials)
    compared = [t for t in trials if t["comparison"]]
    summary = {
        "trials_run": n,
        "trials_passed": sum(t["status"] == "pass" for t in trials),
        "kernelbench_trials_passed": sum(t["kernelbench_pass"] for t in trials),
        "bit_exact_trials": sum(t["bit_exact"] for t in trials),
        "max_abs_diff": max((t["comparison"]["max_abs_diff"] for t in compared),
                            key=lambda v: math.inf if isinstance(v, str) else v, default=None),
        "mean_abs_diff": (sum(t["comparison"]["mean_abs_diff"] for t in compared
                              if not isinstance(t["comparison"]["mean_abs_diff"], str)) / len(compared))
        if compared else None,
        "pass_rate": {f"{tol:g}": (sum(t["pass_at"][f"{tol:g}"] for t in trials) / n if n else 0.0)
                      for tol in SWEEP_TOLS},
        "p_trial_kernelbench": None,
        "p_kernelbench_5_trials": None,
        "oracle": {"reference": _rms_over_trials(trials, "reference"),
                   "candidate": _rms_over_trials(trials, "candidate")},
    }
    if n:
        p = summary["kernelbench_trials_passed"] / n
        summary["p_trial_kernelbench"] = p
        summary["p_kernelbench_5_trials"] = p ** KERNELBENCH_TRIALS
    result["summary"] = summary
    result["reason"] = reason
    result["passed"] = reason is None and n == cfg["trials"]
    result["verdict"] = "PASS" if result["passed"] else "FAIL"
    result["message"] = _verdict_message(result)
    result["hints"] = _hints(result)
    result["seconds"]["total"] = time.perf_counter() - started
    return result


def _g(v: Any, digits: int = 4) -> str:
    return v if isinstance(v, str) else f"{v:.{digits}g}"


def _first_with(trials: list, reason: str) -> dict:
    return next(t for t in trials if reason in t["reasons"])


def _verdict_message(result: dict) -> str:
    cfg, s, trials, reason = result["config"], result["summary"], result["trials"], result["reason"]
    tol = f"allclose(atol={cfg['atol']:g}, rtol={cfg['rtol']:g})"
    n = s["trials_run"]
    if reason is None:
        return (f"PASS: {n}/{n} trials within {tol}, {s['bit_exact_trials']}/{n} bit-exact "
                f"({cfg['dtype']}, {cfg['device']})")
    err = result.get("error") or {}
    if reason == "import_error":
        return f"FAIL: cannot import the candidate {cfg['model']}: {err['type']}: {err['message']}"
    if reason == "construct_error":
        return f"FAIL: the candidate's constructor raised {err['type']}: {err['message']}"
    t = _first_with(trials, reason)
    where = f"trial {t['index']}"
    if reason == "forward_error":
        return f"FAIL: the candidate's forward raised {err['type']} in {where}: {err['message']}"
    if reason == "not_a_tensor":
        return f"FAIL: the candidate returned a {t['candidate_shape']}, not a Tensor ({where})"
    if reason == "wrong_shape":
        return f"FAIL: wrong shape {tuple(t['candidate_shape'])} vs {tuple(t['reference_shape'])} ({where})"
    if reason == "wrong_dtype":
        return f"FAIL: wrong dtype {t['candidate_dtype']} vs {str(DTYPES[cfg['dtype']]).replace('torch.', '')} ({where})"
    if reason == "wrong_device":
        return f"FAIL: output on the wrong device: {t['candidate_device']} vs {cfg['device']} ({where})"
    if reason == "mutated_input":
        m = t["mutation"][0]
        return (f"FAIL: candidate mutated its input (input {m['input']}: {m['n_changed']} of "
                f"{m['n_elements']} elements changed, {where})")
    if reason == "nonfinite":
        w = t["comparison"]["worst"]
        return (f"FAIL: candidate returned NaN/Inf in {t['nonfinite']['candidate_where_reference_finite']} "
                f"element(s) where the reference is finite (first at {tuple(w['index'])}, {where})")
    if reason == "stale_output":
        return (f"FAIL: candidate returned an earlier trial's output for new inputs "
                f"(cached result? {where})")
    failed = [x for x in trials if "mismatch" in x["reasons"]]
    worst_trial = max(failed, key=lambda x: _ratio(x["comparison"]["worst"]["ratio"]))
    w = worst_trial["comparison"]["worst"]
    return (f"FAIL: {len(failed)}/{n} trials outside {tol}; worst at {tuple(w['index'])} in trial "
            f"{worst_trial['index']}: ref {_g(w['reference'], 8)} vs {_g(w['candidate'], 8)}, "
            f"|diff| {_g(w['abs_diff'])} > allowed {_g(w['allowed'])} ({w['dominant']}-dominated)")


def _ratio(v: Any) -> float:
    return math.inf if isinstance(v, str) else v


def _hints(result: dict) -> list:
    """What the author can do about it, in a sentence or two each."""
    cfg, s, trials, reason = result["config"], result["summary"], result["trials"], result["reason"]
    hints = []
    n = s["trials_run"]
    if reason in ("import_error", "construct_error", "forward_error"):
        hints.append("run with --traceback for the full traceback")
    if reason == "construct_error":
        hints.append("the candidate must take the reference's constructor arguments "
                     "(input_size, hidden_size, scaling_factor)")
    if reason == "wrong_shape":
        hints.append("the reference keeps the summed dimension: (batch, 1), i.e. sum(..., dim=1, keepdim=True)")
    if reason == "mutated_input":
        hints.append("write into a new tensor (torch.empty_like / a workspace), never into x")
    if any(t["nonfinite"] and t["nonfinite"]["reference"] for t in trials):
        hints.append("the reference itself produced NaN/Inf: torch.allclose fails NaN == NaN, "
                     "so KernelBench fails even the reference here")
    ref_o, new_o = s["oracle"]["reference"], s["oracle"]["candidate"]
    if ref_o and new_o and not isinstance(ref_o["rms"], str) and not isinstance(new_o["rms"], str):
        if reason == "mismatch" and new_o["rms"] < ref_o["rms"]:
            hints.append(
                f"the candidate is closer to the fp64 truth than the reference (rms error {new_o['rms']:.3g} "
                f"vs {ref_o['rms']:.3g}): it fails because it does not reproduce the reference's rounding, "
                f"not because it is less accurate; KernelBench judges against the reference")
    if reason == "mismatch":
        failed = [t for t in trials if "mismatch" in t["reasons"]]
        if all(t["comparison"]["candidate_all_zero"] for t in failed):
            hints.append("the candidate returned all zeros: is the kernel launched, and does it write its output?")
        if all(t["comparison"]["worst"]["dominant"] == "atol" and t["pass_at"]["0.01"] for t in failed):
            hints.append(
                "the failing elements are outputs near zero, where allclose allows only about atol: "
                "a different summation order alone fails there at fp32 1e-4")
        loose = s["pass_rate"].get("0.01", 0)
        if loose == 1.0 and cfg["kernelbench_tol"] < 1e-2:
            hints.append("every trial passes at 1e-2 (the fp16/bf16 and pre-Nov-2025 tolerance): "
                         "a rounding difference, not a wrong result; to pass fp32 1e-4 reliably, "
                         "sum in the reference's order (see kernels.div_sum_scale)")
        elif loose < 1.0:
            hints.append("trials fail even at 1e-2: a wrong result, not a rounding difference")
    if result["passed"] and s["bit_exact_trials"] < n:
        hints.append(f"passes, but only {s['bit_exact_trials']}/{n} trials are bit-exact: "
                     f"other seeds may fail; estimate with --trials 200")
    if s["p_kernelbench_5_trials"] is not None and n < 20 and 0 < s["p_trial_kernelbench"] < 1:
        hints.append(f"the pass-rate estimate rests on {n} trials; use --trials 200 for a real one")
    return hints


# --------------------------------------------------------------------------- reporting


def format_report(result: dict, max_rows: int = 20) -> str:
    cfg, s, trials = result["config"], result["summary"], result["trials"]
    sz = cfg["sizes"]
    if set(sz) == set(SIZE_FLAGS):  # this problem's sizes, as before
        shown = f"batch {sz['batch']}, input {sz['input']}, hidden {sz['hidden']}, scale {sz['scale']}"
    else:
        shown = ", ".join(f"{k} {v}" for k, v in cfg.get("problem_values", {}).items()) or "no module-level sizes"
    lines = [
        result["message"],
        f"  candidate {cfg['model']} vs reference {cfg['reference']}; {cfg['dtype']} on {cfg['device']} "
        f"({cfg['device_name']}); {shown}"
        f"{' (overridden)' if cfg['sizes_overridden'] else ' (KernelBench sizes)'}; "
        f"trial seeds from {cfg['seed']}",
    ]
    if trials:
        lines.append("")
        header = (f"{'trial':>5} {'seed':>10} {'result':<6} {'exact':<5} {'max|diff|':>9} {'mean|diff|':>10} "
                  f"{'n_fail':>6}  {'worst element: index ref -> new (allowed, term)':<52} "
                  f"{'rms err vs fp64: ref / new':>26}")
        lines.append(header)
        rows = trials if len(trials) <= max_rows else (
            [t for t in trials if t["status"] != "pass"][:max_rows] or trials[:5])
        for t in rows:
            c = t["comparison"]
            if c and t["bit_exact"]:
                worst = "(bit-exact)"
                diffs = f"{0:>9} {0:>10} {0:>6}"
            elif c:
                w = c["worst"]
                worst = (f"{tuple(w['index'])} {_g(w['reference'], 7)} -> {_g(w['candidate'], 7)} "
                         f"({_g(w['allowed'], 2)}, {w['dominant']})")
                diffs = f"{_g(c['max_abs_diff'], 3):>9} {_g(c['mean_abs_diff'], 3):>10} {c['n_fail']:>6}"
            else:
                worst = ", ".join(t["reasons"]) or "-"
                diffs = f"{'-':>9} {'-':>10} {'-':>6}"
            o = t["oracle"]
            orc = f"{_g(o['reference']['rms'], 3)} / {_g(o['candidate']['rms'], 3)}" if o else "-"
            result_word = "pass" if t["status"] == "pass" else "FAIL"
            lines.append(f"{t['index']:>5} {t['seed']:>10} {result_word:<6} {('yes' if t['bit_exact'] else 'no'):<5} "
                         f"{diffs}  {worst:<52} {orc:>26}")
        if len(rows) < len(trials):
            lines.append(f"  ({len(trials) - len(rows)} more trials not shown; all are in --json)")
    if any(t["comparison"] for t in trials):
        n = s["trials_run"]
        lines.append("")
        lines.append(f"bit-exact trials: {s['bit_exact_trials']}/{n}; KernelBench check "
                     f"(allclose {cfg['kernelbench_tol']:g}): {s['kernelbench_trials_passed']}/{n} trials")
        lines.append("pass rate per trial: " + ", ".join(
            f"{k} {s['pass_rate'][k] * 100:.0f}%" for k in s["pass_rate"]))
        if s["p_kernelbench_5_trials"] is not None:
            lines.append(f"estimated P(pass KernelBench's 5-trial check) = p^5 = "
                         f"{s['p_trial_kernelbench']:.3g}^5 = {s['p_kernelbench_5_trials']:.3g} (from {n} trials)")
        ro, no = s["oracle"]["reference"], s["oracle"]["candidate"]
        if ro and no:
            lines.append(f"error vs fp64 oracle (rms / max): reference {_g(ro['rms'], 3)} / {_g(ro['max_abs'], 3)}, "
                         f"candidate {_g(no['rms'], 3)} / {_g(no['max_abs'], 3)}")
    for h in result["hints"]:
        lines.append(f"hint: {h}")
    lines.append(f"({result['seconds'].get('total', 0):.1f} s)")
    return "\n".join(lines)


# -------------------------------------------------------------------------------- CLI


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
    p.add_argument("--json", metavar="PATH", help="also write the full result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--traceback", action="store_true", help="print the candidate's full traceback on errors")
    return p


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    progress = None if args.quiet else (lambda msg: print(f"[check] {msg}", file=sys.stderr, flush=True))
    try:
        result = run_check(
            model=args.model, reference=args.reference, trials=args.trials, seed=args.seed,
            device=args.device, dtype=args.dtype, batch=args.batch, input_size=args.input_size,
            hidden=args.hidden, scale=args.scale, atol=args.atol, rtol=args.rtol, progress=progress,
            sets=parse_sets(args.sets))
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
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2, allow_nan=False)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
