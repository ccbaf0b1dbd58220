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
        "max_abs_diff": json_float(diff.max().item()) if diff.numel() else 0.0,
        "mean_abs_diff": json_float(diff.mean().item()) if diff.numel() else 0.0,
        "max_abs_diff_finite": json_float(finite_diff.max().item()) if finite_diff.numel() else 0.0,
        "candidate_all_zero": bool((new == 0).all().item()),
        "worst": {
            "index": index,
            "reference": json_float(r),
            "candidate": json_float(n),
            "abs_diff": json_float(abs(r - n)),
            "allowed": json_float(atol + rel_term),
            "ratio": json_float(ratio.flatten()[flat].item()),
            "dominant": "atol" if atol >= rel_term else "rtol",
        },
    }


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


def oracle_error(out: torch.Tensor, truth: torch.Tensor) -> dict:
    err = out.double() - truth
    return {"rms": json_float(err.pow(2).mean().sqrt().item()), "max_abs": json_float(err.abs().max().item())}

