"""Shared test cases: random shapes for the bit-exactness sweeps (log-uniform, with
primes, powers of two and edge sizes forced in, capped in element count so a sweep
stays fast), layouts, the bitwise comparison, and seeded reference / candidate pairs."""

import math
import random
from pathlib import Path

import torch

import reference

PRIMES = [2, 3, 5, 7, 13, 31, 37, 127, 199, 257, 1021, 4093, 8191, 65521, 69997, 131071, 299993]


def log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(max(lo, 1)), math.log(hi)))))


def random_shapes(n, seed, max_rows, max_cols, max_numel, min_rows=0, min_cols=0):
    rng = random.Random(seed)
    specials = [p for p in PRIMES if p <= max_cols] + [2**k for k in range(0, 18) if 2**k <= max_cols]
    shapes = []
    while len(shapes) < n:
        kind = len(shapes) % 4
        rows = log_uniform(rng, max(min_rows, 1), max_rows)
        cols = rng.choice(specials) if kind == 1 else log_uniform(rng, max(min_cols, 1), max_cols)
        if kind == 2:
            rows = rng.choice([p for p in PRIMES if p <= max_rows] + [2**k for k in range(13) if 2**k <= max_rows])
        rows = max(min_rows, min(rows, max_rows, max(1, max_numel // max(cols, 1))))
        shapes.append((rows, cols))
    return shapes


def layouts(base):
    """Views of a 2-D tensor that exercise every layout path of the op."""
    return {
        "strided columns": base[:, ::3],
        "offset rows": base[5:, 7:],
        "transposed": base.t(),
        "expanded": base[:1].expand(64, -1),
        "single column": base[:, :1],
        "empty rows": base[:0],
        "empty columns": base[:, :0],
    }


def same_bits(ours, ref):
    """torch.equal, except that NaN matches NaN in the same places."""
    import torch

    nan = torch.isnan(ref)
    return (ours.shape == ref.shape and ours.dtype == ref.dtype and ours.device == ref.device
            and torch.equal(torch.isnan(ours), nan) and torch.equal(ours[~nan], ref[~nan]))


def seeded_pair(seed: int, init, new_cls):
    """reference.Model(*init) and new_cls(*init), each built after torch.manual_seed(seed)
    (KernelBench's way): a drop-in gets the same weight."""
    torch.manual_seed(seed)
    ref = reference.Model(*init)
    torch.manual_seed(seed)
    return ref, new_cls(*init)


def assert_same_gradients(ref, new, x):
    """Backward of sum(model(x)) through both models: bitwise equal grads of x and weight."""
    xr, xn = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref(xr).sum().backward()
    new(xn).sum().backward()
    assert torch.equal(xr.grad, xn.grad)
    assert torch.equal(ref.weight.grad, new.weight.grad)


# Problem files in KernelBench's format (tests/problems/): each NAME.py has a correct
# candidate NAME_ok.py and a wrong one NAME_wrong.py, which must fail for this reason
# (the reasons in STRICT_ONLY under --strict: KernelBench's verdict, kept without it, passes them).
PROBLEMS = Path(__file__).resolve().parent / "problems"
WRONG_BECAUSE = {
    "conv_bias_act": "wrong_shape",
    "cross_entropy": "mismatch",
    "elementwise": "mismatch",
    "gemm_epilogue": "mismatch",
    "mask_buffer": "mismatch",
    "masked_cumsum": "mismatch",
    "mlp": "wrong_dtype",
    "reduction": "mismatch",
    "several_inputs": "mutated_input",
    "softmax": "mismatch",
    "tuple_init": "forward_error",
}
STRICT_ONLY = {"mutated_input"}
