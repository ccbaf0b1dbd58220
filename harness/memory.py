"""Memory: what a check needs, worked out before anything runs.

The check keeps on the device one copy of the inputs, the reference's output and the
candidate's output (and both models' parameters), and compares the outputs there a chunk at a
time; the pristine inputs, the fp64 oracle, the history and --strict's answers stay on the
host. `estimate_bytes` works the sizes out on torch's meta device (no memory, no compute);
`refuse_if_too_big` stops a problem that cannot fit, with the numbers, instead of letting it
fail half-way with an OOM (on the device, or on the host where the operating system kills
the process); `host_bytes` says what the host holds, and what the oracle would add.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from harness.compare import COMPARE_CHUNK, COMPARISON_BYTES_PER_ELEMENT, DEVICE_CHUNK
from harness.problem import CheckError
from harness.protocol import to_device
from harness.strict import ANSWER_BUDGET_BYTES

META = torch.device("meta")


def tensor_bytes(objs: Any) -> int:
    """Bytes of every tensor in a tensor, list or tuple (nested)."""
    if isinstance(objs, torch.Tensor):
        return objs.numel() * objs.element_size()
    if isinstance(objs, (list, tuple)):
        return sum(tensor_bytes(o) for o in objs)
    return 0


def estimate_bytes(ref_cls: type, init_inputs: list, make_inputs: Callable, dtype: torch.dtype,
                   keep_integer_inputs: bool = False) -> Optional[dict]:
    """The device bytes of one check: one copy of the inputs, two outputs, two models'
    parameters, each in the check's precision, and a comparison chunk's temporaries (on a GPU;
    on the CPU host_bytes counts them). The output's size comes from the reference
    run on the meta device; when it cannot run there, the largest input stands for it
    (`output_known` False). None when even the inputs cannot be drawn on the meta device."""
    try:
        with META:
            inputs = [to_device(x, META, dtype, keep_integer_inputs) for x in make_inputs()]
    except Exception:  # noqa: BLE001 - a problem that builds its inputs another way: no estimate
        return None
    input_bytes = tensor_bytes(inputs)
    params = output = None
    try:
        with META:
            model = ref_cls(*init_inputs).to(dtype=dtype)
        params = sum(tensor_bytes(t) for t in [*model.parameters(), *model.buffers()])
        with torch.no_grad():
            output = tensor_bytes(model(*inputs))
    except Exception:  # noqa: BLE001 - an op without a meta kernel: the estimate says it guessed
        pass
    largest_input = max([tensor_bytes(x) for x in inputs] + [0])
    output_bytes = output if output is not None else largest_input
    params = params or 0
    elements = output_bytes // torch.empty((), dtype=dtype).element_size()
    comparison = COMPARISON_BYTES_PER_ELEMENT * min(elements, DEVICE_CHUNK)
    return {"inputs": input_bytes, "output": output_bytes, "parameters": params, "output_known": output is not None,
            "comparison": comparison, "total": input_bytes + 2 * output_bytes + 2 * params + comparison}


def host_bytes(estimate: Optional[dict], device: torch.device, dtype: torch.dtype,
               strict: bool = False) -> Optional[dict]:
    """The host bytes of one check: the pristine inputs (on a CPU device, also the device's
    set: one more input copy, both outputs, an output's worth of masks and the models'
    parameters); with --strict, the larger of that and its calls' set (the inputs,
    the reference's answer, the output and the one before it) plus the answers it keeps; a
    comparison chunk's temporaries; apart, the fp64 oracle's inputs and output while it runs."""
    if estimate is None:
        return None
    widen = 8 / torch.empty((), dtype=dtype).element_size()
    on_cpu = device.type == "cpu"  # the device's copies are host memory too (its outputs are the host copies)
    inputs, output, params = estimate["inputs"], estimate["output"], estimate["parameters"]
    temporaries = 64 * COMPARE_CHUNK  # a chunk's fp64 temporaries in the comparison, and masks
    # On the CPU at 19_ReLU's half size (3.2 GB in and out) a check peaked at 5.9x the input.
    check = inputs + (inputs + 3 * output + 2 * params if on_cpu else 0)
    if strict:
        calls = inputs * 2 + 5 * output + 2 * params if on_cpu else inputs + 3 * output
        check = max(check, calls) + min(ANSWER_BUDGET_BYTES, 8 * output)
    check += temporaries
    return {"check": int(check), "oracle": int(widen * (inputs + output + params))}


def free_host_bytes() -> Optional[int]:
    """The memory the operating system says is available (Linux's MemAvailable), or None."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


HOST_MARGIN = 1.1  # the host's use is estimated less closely than the device's


def refuse_if_host_too_small(host: Optional[dict], free_bytes: Optional[int]) -> bool:
    """CheckError when the check's own host bytes exceed `free_bytes`; False when the fp64
    oracle would not fit beside them (the check then goes on without it), True otherwise."""
    if host is None or free_bytes is None:
        return True
    gib = 2**30
    if host["check"] * HOST_MARGIN > free_bytes:
        raise CheckError(
            f"this problem cannot fit in host memory: the check needs {host['check'] / gib:.2f} GiB there (the "
            f"pristine inputs, on a CPU device the outputs, with --strict its calls' and the answers it keeps), "
            f"{HOST_MARGIN - 1:.0%} more for what the estimate misses, and {free_bytes / gib:.2f} GiB is available; use smaller sizes "
            f"(--set NAME=VALUE)")
    return (host["check"] + host["oracle"]) * HOST_MARGIN <= free_bytes


def free_device_bytes(device: torch.device) -> int:
    """What this process can still get: the driver's free memory plus what torch's caching
    allocator holds unused."""
    free, _ = torch.cuda.mem_get_info(device)
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def refuse_if_too_big(estimate: Optional[dict], free_bytes: int, device: str) -> None:
    """CheckError, before anything runs, when the check's device bytes exceed `free_bytes`."""
    if estimate is None or estimate["total"] <= free_bytes:
        return
    gib = 2**30
    guessed = "" if estimate["output_known"] else " (the output's size guessed as the largest input's)"
    raise CheckError(
        f"this problem cannot fit on {device}: the check needs {estimate['total'] / gib:.2f} GiB at once (the inputs "
        f"{estimate['inputs'] / gib:.2f} GiB, two outputs of {estimate['output'] / gib:.2f} GiB{guessed}, two models' "
        f"parameters of {estimate['parameters'] / gib:.2f} GiB, the comparison's temporaries of "
        f"{estimate.get('comparison', 0) / gib:.2f} GiB) and {free_bytes / gib:.2f} GiB is free; use smaller "
        f"sizes (--set NAME=VALUE) or a device with more memory")
