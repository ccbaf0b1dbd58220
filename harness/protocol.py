"""KernelBench's protocol: seeds, precisions and tolerances, moves to a device."""

from __future__ import annotations

from typing import Any

import torch

# KernelBench's seed: set before each constructor and before drawing the trial seeds.
KERNELBENCH_SEED = 42
KERNELBENCH_TRIALS = 5

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# KernelBench's tolerance per precision (atol = rtol), since Nov 2025.
KERNELBENCH_TOL = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}


def kernelbench_trial_seeds(trials: int, seed: int = KERNELBENCH_SEED) -> list[int]:
    """The per-trial seeds, drawn up front exactly as KernelBench draws them."""
    torch.manual_seed(seed)
    return [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(trials)]


def set_seed(seed: int, device: torch.device) -> None:
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)


def to_device(obj: Any, device: torch.device, dtype: torch.dtype, keep_integer_inputs: bool = False) -> Any:
    """An input as KernelBench hands it to the models: every tensor, integer and bool ones
    included, cast to the precision (KernelBench's released eval does `x.to(dtype=precision)`
    on each input tensor). With `keep_integer_inputs`, integer and bool tensors keep their
    dtype (index and mask inputs stay usable), and only floating ones are cast."""
    if isinstance(obj, torch.Tensor):
        if keep_integer_inputs and not obj.is_floating_point():
            return obj.to(device)
        return obj.to(device=device, dtype=dtype)
    return obj


def cast_note(inputs: list, dtype: torch.dtype, keep_integer_inputs: bool, what: str = "input(s)") -> str:
    """Why a reference may have raised on these inputs: their integer or bool tensors were cast
    to `dtype` as KernelBench casts them ("" when none were)."""
    cast = [k for k, x in enumerate(inputs) if isinstance(x, torch.Tensor) and not x.is_floating_point()]
    if not cast or keep_integer_inputs:
        return ""
    return (f" ({what} {cast} are integer or bool tensors, cast to {str(dtype).replace('torch.', '')} as KernelBench "
            f"casts them; --keep-integer-inputs keeps their dtype)")


def clone(obj: Any) -> Any:
    return obj.clone() if isinstance(obj, torch.Tensor) else obj


# Taken when this module is imported, before any candidate's: a candidate that replaces
# torch.cuda.synchronize cannot make the check skip its own synchronisation.
_SYNCHRONIZE = torch.cuda.synchronize


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        _SYNCHRONIZE(device)

