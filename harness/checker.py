"""The check: KernelBench's trial protocol around a candidate, with diagnostics.

`run_check` follows KernelBench exactly (seeds, order, `.to(device, dtype)`, shape
check, `torch.allclose(ref, new, atol=tol, rtol=tol)`), and adds what KernelBench does
not tell: bit-exactness, where and by how much the worst element fails, both models'
error against an fp64 oracle, pass rates at several tolerances, and a verdict naming
the reason for a broken candidate. `format_report` turns the result into text.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from typing import Any, Callable, NamedTuple, Optional

import torch

from harness.compare import (SWEEP_TOLS, changed_inputs, compare_outputs, count_equal, count_nonfinite,
                             fingerprint, nan_where_finite, oracle_error, oracle_output, pass_at, same_fingerprint)
from harness.problem import (SIZE_FLAGS, CheckError, check_counts, describe, double_inputs, error_info, is_this_problem,
                             load_class, problem_overrides, problem_values, resolve_sizes)
from harness.memory import (estimate_bytes, free_device_bytes, free_host_bytes, host_bytes, refuse_if_host_too_small,
                            refuse_if_too_big, tensor_bytes)
from harness.strict import (STRICT_REASONS, Watch, finding, keep_answer, new_strict_seed, poison_free_memory,
                            strict_calls, subclass_finding)
from harness.protocol import (DTYPES, KERNELBENCH_SEED, KERNELBENCH_TOL, KERNELBENCH_TRIALS,
                              cast_note, kernelbench_trial_seeds, set_seed, sync, to_device)

SCHEMA_VERSION = 1

DEFAULT_MODEL = "modelnew:ModelNew"
DEFAULT_REFERENCE = "reference:Model"

# Why a candidate fails, most fundamental first: the verdict names the first of these
# that occurred in any trial, because a later one is usually a consequence of it
# (a wrong shape makes the value comparison meaningless, and so on).
REASONS = (
    "import_error",      # the candidate's module or class could not be loaded
    "construct_error",   # the constructor raised
    "patched_timer",     # --strict: see harness.strict.STRICT_REASONS for these
    "patched_check",
    "patched_reference",
    "extra_threads",
    "forward_error",     # forward (or the synchronize after it) raised
    "not_a_tensor",      # forward returned something other than a Tensor
    "tensor_subclass",
    "wrong_shape",
    "wrong_dtype",
    "wrong_device",
    "mutated_input",     # the candidate changed its input tensor
    "output_aliasing",
    "unwritten_output",
    "nonfinite",         # NaN/Inf where the reference is finite
    "stale_output",      # an earlier trial's output again, although the inputs changed
    "mismatch",          # outside torch.allclose at the tolerance
    "replayed_output",
    "mismatch_on_fresh_inputs",
    "forward_error_on_fresh_inputs",
    "nondeterministic",
    "side_stream",
)



def resolve_device(device: str | None) -> torch.device:
    """--device as a torch.device (default: cuda where available): cpu, or cuda[:N] of a visible GPU."""
    if not device:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise CheckError(f"--device {device!r} is not a device: use cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise CheckError(f"--device {device!r}: the check runs on cpu or cuda")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CheckError(f"device {dev} requested but torch.cuda.is_available() is False")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise CheckError(f"device {dev} requested but torch sees {torch.cuda.device_count()} GPU(s)")
    return dev


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
    keep_integer_inputs: bool = False,
    strict: bool = False,
    strict_seed: Optional[int] = None,
) -> dict:
    """Run the check and return its JSON-able result (see README for the schema).

    `model` and `reference` are `MODULE:CLASS` / `file.py:CLASS` specs or classes.
    Raises CheckError when the check itself cannot run; a failing candidate is a
    result (verdict "FAIL"), never an exception. Every input tensor is cast to `dtype`
    as KernelBench does, unless `keep_integer_inputs` keeps integer and bool ones.
    `strict` adds harness.strict's checks, their inputs drawn from `strict_seed` (a fresh
    one when None; the report prints it).
    """
    say = progress or (lambda msg: None)
    started = time.perf_counter()
    if dtype not in DTYPES:
        raise CheckError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    if trials < 1:
        raise CheckError("--trials must be at least 1")
    check_counts(batch=batch, input=input_size, hidden=hidden)
    torch_dtype = DTYPES[dtype]
    dev = resolve_device(device)
    kb_tol = KERNELBENCH_TOL[dtype]
    atol = kb_tol if atol is None else atol
    rtol = kb_tol if rtol is None else rtol
    for name, value in (("atol", atol), ("rtol", rtol)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise CheckError(f"--{name} must be a finite number >= 0, got {value!r}")

    # Reference: its failures are the check's failures (exit 2), not the candidate's.
    try:
        ref_cls = load_class(reference, "Model") if isinstance(reference, str) else reference
        ref_module = sys.modules[ref_cls.__module__]
        sizes, overrides = resolve_sizes(ref_module, batch, input_size, hidden, scale, sets)
    except CheckError:
        raise
    except Exception as exc:
        raise CheckError(f"cannot load the reference {describe(reference)}: {type(exc).__name__}: {exc}") from exc
    with problem_overrides(ref_module, overrides):
        try:
            set_seed(KERNELBENCH_SEED, dev)  # KernelBench seeds get_init_inputs as it seeds the constructors
            init_inputs = list(ref_module.get_init_inputs())
        except Exception as exc:
            raise CheckError(f"the reference's get_init_inputs() raised: {type(exc).__name__}: {exc}") from exc
        # Refused before anything runs when the inputs and the two outputs cannot fit.
        needs = estimate_bytes(ref_cls, init_inputs, ref_module.get_inputs, torch_dtype, keep_integer_inputs)
        if dev.type == "cuda":
            refuse_if_too_big(needs, free_device_bytes(dev), str(dev))
            torch.cuda.reset_peak_memory_stats(dev)  # the report's peak is this check's
        host = host_bytes(needs, dev, torch_dtype, strict)
        oracle_fits = refuse_if_host_too_small(host, free_host_bytes())
        return _run_check(model, reference, ref_cls, ref_module, init_inputs, sizes, overrides, trials, seed, dev,
                          dtype, torch_dtype, atol, rtol, kb_tol, say, started, keep_integer_inputs,
                          (new_strict_seed() if strict_seed is None else strict_seed) if strict else None, needs,
                          host, oracle_fits)


def _run_check(model, reference, ref_cls, ref_module, init_inputs, sizes, overrides, trials, seed, dev, dtype,
               torch_dtype, atol, rtol, kb_tol, say, started, keep_integer_inputs=False, strict_seed=None,
               device_bytes=None, host_bytes_estimate=None, oracle_fits=True) -> dict:
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
            "model": describe(model),
            "reference": describe(reference),
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
            "oracle": ("closed form (fp64)" if is_this_problem(ref_cls) else "the reference run in float64"
                       if oracle_fits else "none: the reference in float64 would not fit in host memory beside the check"),
            "atol": atol,
            "rtol": rtol,
            "kernelbench_tol": kb_tol,
            "keep_integer_inputs": keep_integer_inputs,
            "strict": strict_seed is not None,
            "strict_seed": strict_seed,
            "device_bytes_estimate": device_bytes,
            "host_bytes_estimate": host_bytes_estimate,
            "torch_version": torch.__version__,
        },
        "summary": None,
        "trials": [],
        "error": None,
        "strict": None if strict_seed is None else {"seed": strict_seed, "findings": [], "warnings": [], "calls": []},
        "seconds": {},
        "device_memory": None,
    }
    strict_result = result["strict"]

    # The constructor's tensors are cast and moved as the forward's are (KernelBench does both).
    init_note = cast_note(init_inputs, torch_dtype, keep_integer_inputs, "constructor input(s)")
    init_inputs = [to_device(x, dev, torch_dtype, keep_integer_inputs) for x in init_inputs]
    with torch.no_grad():  # KernelBench runs both models under no_grad
        say(f"constructing the reference {describe(reference)} {init_inputs} ...")
        try:
            set_seed(KERNELBENCH_SEED, dev)
            ref_model = ref_cls(*init_inputs).to(device=dev, dtype=torch_dtype)
        except Exception as exc:
            raise CheckError(f"the reference cannot be constructed: {type(exc).__name__}: {exc}{init_note}") from exc

        # The reference's answers come first: a candidate's import can reach the reference's
        # instance (gc) or code, but not answers already on the host.
        seeds = kernelbench_trial_seeds(trials, seed)
        say(f"the reference's answers to the {trials} trials' inputs, before the candidate is loaded ...")
        ahead = _reference_answers(seeds, dev, torch_dtype, make_inputs, ref_model, keep_integer_inputs)
        result["config"]["reference_answers_first"] = len(ahead)

        # The fp64 oracle. This problem's exact answer is x @ W.sum(0) * (s / 2) with the
        # weight the reference holds; any other problem's is its reference run in float64.
        # Both live on the host: the device holds only the inputs and the two outputs.
        colsum64 = oracle_scale = oracle_model = None
        if is_this_problem(ref_cls):
            colsum64 = ref_model.weight.sum(0, dtype=torch.float64).cpu()
            oracle_scale = ref_model.scaling_factor
        elif oracle_fits:
            try:
                oracle_model = copy.deepcopy(ref_model).to(device="cpu", dtype=torch.float64)
            except Exception:  # noqa: BLE001 - no oracle, then; the check goes on
                oracle_model = None

        say(f"loading and constructing the candidate {describe(model)} ...")
        watch = Watch(ref_cls) if strict_result is not None else None  # before the candidate's module runs
        try:
            new_cls = load_class(model, problem_names=vars(ref_module)) if isinstance(model, str) else model
        except BaseException as exc:  # SystemExit from a candidate module must not end the check
            if isinstance(exc, KeyboardInterrupt):
                raise
            result["error"] = error_info("import", exc)
            if watch is not None:  # what it replaced before failing is put back all the same
                strict_result["findings"] += watch.patched("by the candidate's import", strict_seed)
            return _finish(result, started, "import_error")
        try:
            set_seed(KERNELBENCH_SEED, dev)
            new_model = new_cls(*init_inputs).to(device=dev, dtype=torch_dtype)
            sync(dev)
        except Exception as exc:
            result["error"] = error_info("construct", exc)
            if watch is not None:
                strict_result["findings"] += watch.patched("by the candidate's import or constructor", strict_seed)
            return _finish(result, started, "construct_error")
        result["seconds"]["construct"] = time.perf_counter() - started
        if watch is not None:
            strict_result["findings"] += watch.patched("by the candidate's import or constructor", strict_seed)
            strict_result["findings"] += watch.new_threads("after the candidate's import", strict_seed)

        every = max(1, math.ceil(trials / 20))  # about 20 progress lines at most
        history = []  # (reference, candidate) outputs of earlier trials that passed
        answers = {}  # --strict: trial seed -> the reference's output, on the host
        for i, trial_seed in enumerate(seeds):
            trial = _run_trial(
                i, trial_seed, dev, torch_dtype, make_inputs, ref_model, new_model,
                atol, rtol, kb_tol, colsum64, oracle_scale, history, oracle_model, keep_integer_inputs,
                watch, strict_seed, ahead.pop(i, None),
            )
            if strict_result is not None:
                strict_result["findings"] += trial.get("_findings", [])
                if "_answer" in trial and keep_answer(answers, trial["_answer"]):
                    answers[trial_seed] = trial["_answer"]
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

    # What a candidate says of its own bits (ModelNewHybrid: which rows take the reference's
    # path, and why the others pass), shown beside what the check measured, never instead of it.
    claim = getattr(new_model, "exactness", None)
    if callable(claim) and result["trials"]:
        try:
            result["candidate_says"] = str(claim())
        except Exception as exc:  # noqa: BLE001 - a claim that cannot be made is reported as such
            result["candidate_says"] = f"(its exactness() raised {type(exc).__name__}: {exc})"

    reasons = [r for t in result["trials"] for r in t["reasons"]]
    if strict_result is not None and not reasons:
        say(f"strict: extra calls on fresh inputs (strict seed {strict_seed}) ...")
        with torch.no_grad():
            extra = strict_calls(ref_model, new_model, make_inputs, dev, torch_dtype, keep_integer_inputs, atol, rtol,
                                 seeds, strict_seed, watch, answers)
        strict_result["calls"] = extra["calls"]
        strict_result["warnings"] = extra["warnings"]
        strict_result["findings"] += extra["findings"]
    if strict_result is not None:
        reasons += [f["reason"] for f in strict_result["findings"]]
    first = next((r for r in REASONS if r in reasons), None)
    return _finish(result, started, first)


def device_copies(inputs: list, dev: torch.device) -> list:
    """A fresh copy of each tensor on `dev` (a copy on the CPU too: the model may write into it)."""
    return [x.to(dev, copy=True) if isinstance(x, torch.Tensor) else x for x in inputs]


# Host bytes of the inputs and answers of the trials answered before the candidate is loaded
# (trial 0 always is); later trials run the reference in turn, as KernelBench does.
ANSWERS_FIRST_BYTES = 2 << 30


class Answer(NamedTuple):
    """A trial's inputs as the reference got them, its output and the random state it left."""

    inputs: list  # on the host, cast as KernelBench casts them
    output: torch.Tensor  # on the host
    rng: tuple
    seconds: float


def _rng_states(dev: torch.device) -> tuple:
    return torch.get_rng_state(), (torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None)


def _set_rng_states(states: tuple, dev: torch.device) -> None:
    torch.set_rng_state(states[0])
    if states[1] is not None:
        torch.cuda.set_rng_state(states[1], dev)


def _draw_inputs(trial_seed, dev, torch_dtype, make_inputs, keep_integer_inputs) -> tuple[list, str]:
    """A trial's inputs, drawn from its seed and cast as KernelBench does, on the host; and the cast note."""
    set_seed(trial_seed, dev)
    drawn = list(make_inputs())
    note = cast_note(drawn, torch_dtype, keep_integer_inputs)
    return [to_device(x, torch.device("cpu"), torch_dtype, keep_integer_inputs) for x in drawn], note


def _reference_forward(ref_model, pristine, trial_seed, dev, i, note) -> tuple[torch.Tensor, float]:
    """The reference on its own copy of the inputs, from the trial's seed (KernelBench seeds again
    after drawing them); its output and seconds."""
    ref_inputs = device_copies(pristine, dev)
    set_seed(trial_seed, dev)
    t0 = time.perf_counter()
    try:
        ref_out = ref_model(*ref_inputs)
        sync(dev)
    except Exception as exc:
        raise CheckError(f"the reference's forward raised in trial {i}: {type(exc).__name__}: {exc}{note}") from exc
    if not isinstance(ref_out, torch.Tensor):  # KernelBench compares one tensor: it fails every candidate here
        raise CheckError(f"the reference's forward returned a {type(ref_out).__name__}, not a tensor; KernelBench "
                         f"compares one output tensor (its check fails every candidate of this problem)")
    return ref_out, time.perf_counter() - t0


def _reference_answers(seeds, dev, torch_dtype, make_inputs, ref_model, keep_integer_inputs) -> dict:
    """trial index -> Answer, each trial as KernelBench runs its reference, while the inputs and
    answers kept fit ANSWERS_FIRST_BYTES and a quarter of the host's free memory (trial 0 always:
    the check holds one trial's inputs in any case). A trial's inputs are drawn once; the
    candidate gets the same ones."""
    free = free_host_bytes()
    budget = ANSWERS_FIRST_BYTES if free is None else min(ANSWERS_FIRST_BYTES, free // 4)
    answers, held, last = {}, 0, 0
    for i, trial_seed in enumerate(seeds):
        if i > 0 and held + last > budget:  # decided before the forward: a reference runs once a trial
            break
        pristine, note = _draw_inputs(trial_seed, dev, torch_dtype, make_inputs, keep_integer_inputs)
        ref_out, seconds = _reference_forward(ref_model, pristine, trial_seed, dev, i, note)
        answers[i] = Answer(pristine, ref_out.cpu(), _rng_states(dev), seconds)
        last = tensor_bytes(pristine) + tensor_bytes(ref_out)
        held += last
    return answers


def _run_trial(i, trial_seed, dev, torch_dtype, make_inputs, ref_model, new_model,
               atol, rtol, kb_tol, colsum64, oracle_scale, history, oracle_model=None,
               keep_integer_inputs=False, watch=None, strict_seed=None, answer: Optional[Answer] = None) -> dict:
    """One trial: fresh inputs, each model on its own copy, then every check. `answer`: the
    trial's inputs and the reference's answer, computed before the candidate was loaded."""
    rec: dict = {
        "index": i, "seed": trial_seed, "status": "pass", "reasons": [],
        "kernelbench_pass": False, "bit_exact": False, "allclose": False, "equal_elements": 0, "elements": 0,
        "pass_at": {f"{t:g}": False for t in SWEEP_TOLS},
        "reference_shape": None, "candidate_shape": None, "candidate_dtype": None, "candidate_device": None,
        "comparison": None, "oracle": None, "nonfinite": None, "mutation": None, "seconds": {},
    }
    out: dict = {"_record": rec}

    # The pristine inputs stay on the host; each model gets its own device copy in turn, so
    # the device holds one copy of the inputs and the two outputs at a time.
    if answer is not None:  # the candidate starts from the random state the reference's forward left
        pristine, ref_out = answer.inputs, answer.output.to(dev)
        _set_rng_states(answer.rng, dev)
        rec["seconds"]["reference"] = answer.seconds
    else:
        pristine, note = _draw_inputs(trial_seed, dev, torch_dtype, make_inputs, keep_integer_inputs)
        ref_out, rec["seconds"]["reference"] = _reference_forward(ref_model, pristine, trial_seed, dev, i, note)
    rec["reference_shape"] = list(ref_out.shape)
    new_inputs = device_copies(pristine, dev)
    if watch is not None and dev.type == "cuda":
        # An output the candidate never writes then reads NaN, not an answer a freed tensor left.
        poison_free_memory(dev)

    t0 = time.perf_counter()
    try:
        new_out = new_model(*new_inputs)
        sync(dev)
    except Exception as exc:
        rec["status"], rec["reasons"] = "fail", ["forward_error"]
        out["_error"] = error_info(f"forward (trial {i})", exc)
        if watch is not None:
            out["_findings"] = watch.patched(f"during trial {i}", strict_seed)
        return out
    rec["seconds"]["candidate"] = time.perf_counter() - t0
    if watch is not None:  # --strict: before anything is compared with what the candidate could have patched
        found = watch.patched(f"during trial {i}", strict_seed) + subclass_finding(new_out, f"trial {i}", strict_seed)
        out["_findings"] = found
        rec["reasons"] += [f["reason"] for f in found]
        if any(f["reason"] == "tensor_subclass" for f in found):
            rec["status"] = "fail"
            return out

    # Input mutation: compare the candidate's copy with the pristine one. KernelBench does
    # not notice (it hands both models the same tensors), so the plain verdict keeps its
    # (the report warns); --strict fails it: a caller that reuses its input gets other values.
    changed = changed_inputs(pristine, [x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in new_inputs])
    del new_inputs
    if changed:
        rec["mutation"] = changed
        if watch is not None:
            rec["reasons"].append("mutated_input")

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

    # Every statistic is taken where the outputs are, a chunk at a time (on a GPU a pass over a
    # 6 GB output takes milliseconds where the host took a minute); only --strict's answer is copied out.
    ref_out, new_out = ref_out.detach(), new_out.detach()
    if watch is not None:
        out["_answer"] = ref_out.cpu()  # --strict tells a replayed answer by it (kept within a budget)
    ref_bad, new_bad_where_ref_ok = count_nonfinite(ref_out, new_out)
    rec["nonfinite"] = {"reference": ref_bad, "candidate_where_reference_finite": new_bad_where_ref_ok}
    if new_bad_where_ref_ok:
        # Under --strict on CUDA free memory holds NaN before the call: NaN is memory never written.
        poisoned = watch is not None and dev.type == "cuda" and nan_where_finite(ref_out, new_out)
        rec["reasons"].append("unwritten_output" if poisoned else "nonfinite")
        if poisoned:
            out.setdefault("_findings", []).append(finding(
                "unwritten_output", f"NaN where the reference is finite in trial {i}, after freed memory was filled "
                                    f"with NaN: an output the kernel never wrote (a launch that failed?)", strict_seed))

    cmp = compare_outputs(ref_out, new_out, atol, rtol)
    rec["comparison"] = cmp
    rec["allclose"] = cmp["allclose"]
    # A candidate exact on part of its output (ModelNewHybrid) is judged by how much of it is;
    # the shapes and dtypes are equal here, so all elements equal is torch.equal.
    rec["equal_elements"], rec["elements"] = count_equal(ref_out, new_out), ref_out.numel()
    rec["bit_exact"] = rec["equal_elements"] == rec["elements"]
    # One pass a distinct tolerance; the comparison's own counts answer its tolerance.
    passes = {t: cmp["allclose"] if t == atol == rtol else pass_at(ref_out, new_out, t) for t in {*SWEEP_TOLS, kb_tol}}
    rec["pass_at"] = {f"{t:g}": passes[t] for t in SWEEP_TOLS}
    rec["kernelbench_pass"] = passes[kb_tol]
    if not cmp["allclose"]:
        rec["reasons"].append("mismatch")

    # A cached result: the candidate repeats an earlier output although the reference's
    # changed, and it is wrong for these inputs. Only earlier outputs that were right for their
    # own inputs count: a candidate that is wrong the same way every time (all zeros) is not
    # caching; one right for these too is no failure (a bf16 scalar rounds to one value twice).
    # The history keeps fingerprints, not outputs (8 outputs of each model need not fit anywhere).
    ref_print, new_print = fingerprint(ref_out), fingerprint(new_out)
    if not cmp["allclose"] and any(same_fingerprint(old_new, new_print) and not same_fingerprint(old_ref, ref_print)
                                   for old_ref, old_new in history):
        rec["reasons"].insert(rec["reasons"].index("mismatch") if "mismatch" in rec["reasons"] else len(rec["reasons"]),
                              "stale_output")
    if cmp["allclose"] and len(history) < 8:  # a cache returns an early output; 8 is plenty
        history.append((ref_print, new_print))

    x = pristine[0] if pristine and isinstance(pristine[0], torch.Tensor) else None
    truth = None
    if colsum64 is not None and x is not None and x.dim() == 2 and x.shape[1] == colsum64.shape[0] \
            and ref_out.shape == (x.shape[0], 1):
        truth = oracle_output(x, None, oracle_scale, colsum64)
    elif oracle_model is not None:
        try:
            truth = oracle_model(*double_inputs(pristine))
        except Exception:  # noqa: BLE001 - an op without float64 support: no oracle for this trial
            truth = None
        if not isinstance(truth, torch.Tensor) or truth.shape != ref_out.shape:
            truth = None
    if truth is not None:
        rec["oracle"] = {"reference": oracle_error(ref_out, truth), "candidate": oracle_error(new_out, truth)}

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
        "equal_elements": sum(t.get("equal_elements", 0) for t in trials),
        "elements": sum(t.get("elements", 0) for t in trials),
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
    device = torch.device(cfg["device"])
    if device.type == "cuda":
        result["device_memory"] = {"peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
                                   "estimate_bytes": (cfg.get("device_bytes_estimate") or {}).get("total")}
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
    if reason in STRICT_REASONS:
        f = next(f for f in result["strict"]["findings"] if f["reason"] == reason)
        return (f"FAIL ({reason}, --strict): {f['message']}; replay with --seed {cfg['seed']} --strict "
                f"--strict-seed {f['seed']}")
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
    mutated = [t for t in trials if t.get("mutation")]
    if mutated and reason != "mutated_input":
        m = mutated[0]["mutation"][0]
        hints.append(f"the candidate wrote into its input in {len(mutated)}/{n} trials (input {m['input']}: "
                     f"{m['n_changed']} of {m['n_elements']} elements in trial {mutated[0]['index']}): KernelBench "
                     f"does not look, so neither does this verdict; --strict fails it (mutated_input)")
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
        share = f" ({100 * s['equal_elements'] / s['elements']:.1f}% of the outputs equal the reference's)" \
            if s.get("elements") else ""
        hints.append(f"passes, but only {s['bit_exact_trials']}/{n} trials are bit-exact{share}: the pass rests on "
                     f"the tolerance, and other seeds may fail; estimate with --trials 200")
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
        if s["elements"] and s["bit_exact_trials"] < n:
            lines.append(f"outputs equal to the reference's bits: {s['equal_elements']}/{s['elements']} "
                         f"({100 * s['equal_elements'] / s['elements']:.1f}%)")
        if result.get("candidate_says"):
            lines.append(f"the candidate says of its bits: {result['candidate_says']}")
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
        elif str(cfg.get("oracle", "")).startswith("none"):
            lines.append(f"fp64 oracle: {cfg['oracle']}")
    strict = result.get("strict")
    if strict is not None:
        lines.append(f"strict (strict seed {strict['seed']}): {len(strict['calls'])} extra call(s) on fresh and "
                     f"replayed inputs; {len(strict['findings'])} finding(s)")
        lines += [f"  {f['reason']}: {f['message']}" for f in strict["findings"]]
        lines += [f"warning: {w}" for w in strict["warnings"]]
    if not result["passed"] and result["reason"] not in ("import_error", "construct_error"):
        lines.append(f"replay: --seed {cfg['seed']}"
                     + (f" --strict --strict-seed {strict['seed']}" if strict is not None else ""))
    for h in result["hints"]:
        lines.append(f"hint: {h}")
    memory = result.get("device_memory")
    if memory:
        estimate = memory["estimate_bytes"]
        lines.append(f"device memory: peak {memory['peak_allocated_bytes'] / 2**30:.2f} GiB allocated"
                     + (f" (estimated {estimate / 2**30:.2f} GiB: one input copy, two outputs, two models)"
                        if estimate else ""))
    lines.append(f"({result['seconds'].get('total', 0):.1f} s)")
    return "\n".join(lines)


