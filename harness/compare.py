"""Comparing a candidate's output with the reference's, and with an fp64 oracle."""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

# Tolerances at which the per-trial pass rate is reported.
SWEEP_TOLS = (1e-4, 1e-3, 1e-2)


def json_float(v: float) -> Any:
    """A float for JSON: NaN and infinities become the strings "nan", "inf", "-inf"."""
    v = float(v)
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def json_ready(value: Any) -> Any:
    """`value` for strict JSON: json_float on every float inside it."""
    if isinstance(value, float):
        return json_float(value)
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


# Elements compared at a time: the fp64 temporaries of a chunk, not of a whole output
# (five outputs' worth in fp64 for a 6 GB output would not fit beside the rest). On a GPU the
# statistics run beside the two outputs, so its chunks are smaller: their temporaries stay
# within COMPARISON_BYTES_PER_ELEMENT * DEVICE_CHUNK of device memory.
COMPARE_CHUNK = 1 << 24
DEVICE_CHUNK = 1 << 22
COMPARISON_BYTES_PER_ELEMENT = 48  # measured: 26 (fp32) and 38 (fp64) on the CPU, torch.isclose the largest


def chunk_elements(t: torch.Tensor) -> int:
    """How many elements of t a chunk takes: COMPARE_CHUNK on the host, DEVICE_CHUNK elsewhere."""
    return COMPARE_CHUNK if t.device.type == "cpu" else DEVICE_CHUNK


def compare_outputs(ref: torch.Tensor, new: torch.Tensor, atol: float, rtol: float) -> dict:
    """Element-wise comparison of two same-shape, same-dtype outputs.

    Uses torch.allclose's own rule, |ref - new| <= atol + rtol * |new| (the second
    argument, the candidate, scales the tolerance: KernelBench calls
    allclose(reference_output, candidate_output)). Taken a chunk at a time (chunk_elements).
    """
    ref_flat, new_flat = ref.reshape(-1), new.reshape(-1)
    total = ref_flat.numel()
    n_fail, all_zero = 0, True
    maxima, finite_maxima, sums = [], [], []
    worst_ratio, flat, begin = None, 0, 0
    for r_chunk, n_chunk in chunks(ref_flat, new_flat):
        n_fail += int((~torch.isclose(r_chunk, n_chunk, atol=atol, rtol=rtol)).sum().item())
        all_zero = all_zero and bool((n_chunk == 0).all().item())
        # Two fp64 temporaries alive at a time, the rest in place on them, never on the outputs
        # (.double() of an fp64 output is the output itself): COMPARISON_BYTES_PER_ELEMENT.
        diff = (r_chunk.double() - n_chunk.double()).abs_()
        allowed = n_chunk.double().abs().mul_(rtol).add_(atol)
        maxima.append(diff.max())
        sums.append(diff.sum())
        finite_max = torch.nan_to_num(diff, nan=-math.inf, posinf=-math.inf).max()
        if finite_max.item() > -math.inf:
            finite_maxima.append(finite_max)
        # The worst element is the one furthest outside its own allowance (|diff| / allowed),
        # not the largest |diff|: near-zero outputs fail with small differences.
        invalid = diff.isnan() | allowed.isnan()
        ratio = diff.div_(allowed).masked_fill_(invalid, math.inf)
        del allowed, invalid
        at = int(torch.argmax(ratio).item())
        value = ratio[at].item()
        if worst_ratio is None or value > worst_ratio or (math.isnan(value) and not math.isnan(worst_ratio)):
            worst_ratio, flat = value, begin + at
        begin += r_chunk.numel()
    index = list(torch.unravel_index(torch.tensor(flat), tuple(ref.shape))) if ref.dim() and total else []
    index = [int(i) for i in index]
    r, n = (ref_flat[flat].double().item(), new_flat[flat].double().item()) if total else (0.0, 0.0)
    # For a NaN/Inf candidate no tolerance helps; show what a finite value would have been allowed.
    rel_term = rtol * (abs(n) if math.isfinite(n) else abs(r))
    return {
        "allclose": n_fail == 0,
        "n_fail": n_fail,
        "n_elements": ref.numel(),
        "max_abs_diff": json_float(torch.stack(maxima).max().item()) if total else 0.0,
        "mean_abs_diff": json_float(sum(x.item() for x in sums) / total) if total else 0.0,
        "max_abs_diff_finite": json_float(torch.stack(finite_maxima).max().item()) if finite_maxima else 0.0,
        "candidate_all_zero": all_zero,
        "worst": {
            "index": index,
            "reference": json_float(r),
            "candidate": json_float(n),
            "abs_diff": json_float(abs(r - n)),
            "allowed": json_float(atol + rel_term),
            "ratio": json_float(worst_ratio if worst_ratio is not None else 0.0),
            "dominant": "atol" if atol >= rel_term else "rtol",
        },
    }


def evenly_spaced(numel: int, count: int) -> torch.Tensor:
    """min(count, numel) int64 indices from 0 to numel - 1, evenly spaced, in integer arithmetic
    (fp32's linspace rounds the last index of 2**30 elements and more up to numel)."""
    count = min(count, numel)
    if count <= 1:
        return torch.zeros(count, dtype=torch.int64)
    return torch.arange(count, dtype=torch.int64) * (numel - 1) // (count - 1)


def fingerprint(t: torch.Tensor) -> tuple:
    """A few numbers that tell two outputs apart without keeping either: shape, dtype, the
    fp64 sum of the finite values, the count of NaN, and 4096 evenly spaced elements.
    Two outputs computed from different inputs never share all of them."""
    flat = t.detach().reshape(-1)
    picks = evenly_spaced(flat.numel(), 4096).to(flat.device)
    parts = [c for (c,) in chunks(flat)]  # no whole-size fp64 copy
    total = sum(torch.nansum(c, dtype=torch.float64).item() for c in parts)
    return (tuple(t.shape), t.dtype, total, sum(int(c.isnan().sum()) for c in parts),
            flat[picks].nan_to_num(nan=0.0).cpu())  # on the host: the history holds no device memory


def same_fingerprint(a: tuple, b: tuple) -> bool:
    return a[:4] == b[:4] and torch.equal(a[4], b[4])


def changed_inputs(before: list, after: list) -> list[dict]:
    """The tensor inputs a call changed: {"input": k, "n_changed", "n_elements"} for each.
    `before` holds pristine copies, `after` what the call was given. A NaN that stays in
    its place is unchanged; a tensor of another shape or dtype counts every element."""
    changed = []
    for k, (orig, now) in enumerate(zip(before, after)):
        if not isinstance(orig, torch.Tensor) or (isinstance(now, torch.Tensor) and torch.equal(now, orig)):
            continue
        if isinstance(now, torch.Tensor) and now.shape == orig.shape and now.dtype == orig.dtype:
            n = int((~((now == orig) | (now.isnan() & orig.isnan()))).sum().item())
        else:
            n = orig.numel()
        if n:
            changed.append({"input": k, "n_changed": n, "n_elements": orig.numel()})
    return changed


def chunks(*tensors: torch.Tensor):
    """The tensors' flattened elements a chunk at a time (chunk_elements of the first): lists
    of same-place slices."""
    flats = [t.reshape(-1) for t in tensors]
    size = chunk_elements(flats[0])
    for b in range(0, flats[0].numel(), size):
        yield [f[b:b + size] for f in flats]


def allclose(ref: torch.Tensor, new: torch.Tensor, atol: float, rtol: float) -> bool:
    """torch.allclose(ref, new, atol=atol, rtol=rtol), a chunk at a time (its temporaries are
    several outputs' worth)."""
    if ref.shape != new.shape:
        return bool(torch.allclose(ref, new, atol=atol, rtol=rtol))  # its own broadcast or error
    return all(bool(torch.allclose(r, n, atol=atol, rtol=rtol)) for r, n in chunks(ref, new))


def count_not_close(ref: torch.Tensor, new: torch.Tensor, atol: float, rtol: float) -> int:
    return sum(int((~torch.isclose(r, n, atol=atol, rtol=rtol)).sum()) for r, n in chunks(ref, new))


def pass_at(ref: torch.Tensor, new: torch.Tensor, tol: float) -> bool:
    return allclose(ref, new, tol, tol)


def equal_nan_as_zero(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal(a.nan_to_num(), b.nan_to_num()) for two same-shape tensors, in chunks."""
    return all(torch.equal(x.nan_to_num(), y.nan_to_num()) for x, y in chunks(a, b))


def count_nonfinite(ref: torch.Tensor, new: torch.Tensor) -> tuple[int, int]:
    """(non-finite elements of ref, non-finite elements of new where ref is finite), in chunks."""
    bad = bad_new = 0
    for r, n in chunks(ref, new):
        ok = torch.isfinite(r)
        bad += int((~ok).sum())
        bad_new += int((~torch.isfinite(n) & ok).sum())
    return bad, bad_new


def nan_where_finite(ref: torch.Tensor, new: torch.Tensor) -> bool:
    """Whether new is NaN somewhere ref is finite, in chunks."""
    return any(bool((n.isnan() & r.isfinite()).any()) for r, n in chunks(ref, new))


def count_equal(ref: torch.Tensor, new: torch.Tensor) -> int:
    """How many elements of two same-shape tensors are equal, a chunk at a time."""
    return sum(int((r == n).sum()) for r, n in chunks(ref, new))


def oracle_output(x: torch.Tensor, weight: Optional[torch.Tensor], scale: float,
                  colsum64: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The exact answer in fp64: sum_j (x @ W.T)[:, j] / 2 * s == x @ W.sum(0) * (s / 2).

    W is the reference's weight as it sits on the device (after the cast to the
    precision), so the oracle is the truth for exactly the numbers both models saw.
    """
    if colsum64 is None:
        colsum64 = weight.sum(0, dtype=torch.float64)
    return (x.double() @ colsum64 * (scale / 2)).unsqueeze(1)


def oracle_error(out: torch.Tensor, truth: torch.Tensor) -> dict:
    """RMS and largest error against the fp64 truth, a chunk at a time; the truth may be on
    another device (the host) than the output: each chunk of the output goes to it."""
    out_flat, truth_flat = out.reshape(-1), truth.reshape(-1)
    squares, maxima = [], []
    for t, o in chunks(truth_flat, out_flat):
        err = o.to(t.device).double() - t.double()  # an integer or bool truth too (a comparison's output)
        squares.append(err.pow(2).sum().item())
        maxima.append(err.abs().max())
    if not maxima:
        return {"rms": json_float(math.nan), "max_abs": json_float(math.nan)}
    return {"rms": json_float(math.sqrt(sum(squares) / out_flat.numel())),
            "max_abs": json_float(torch.stack(maxima).max().item())}

