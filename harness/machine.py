"""The machine a run happens on: device choice, memory, measured ceilings, provenance."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from harness.timing import GiB, MiB, Backend, BenchError, noop, l2_cache_bytes, robust_time

REPO_DIR = Path(__file__).resolve().parent.parent

_T0 = time.perf_counter()


def elapsed_s() -> float:
    """Seconds since this process imported the harness."""
    return time.perf_counter() - _T0


def log(msg: str) -> None:
    """Progress on stderr, so stdout stays the result table."""
    print(f"[bench {time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
        if name == "cpu":
            log("no CUDA GPU visible: timing on the CPU with host timers (--device cpu)")
    if name == "cuda":
        if torch.version.cuda is None:
            raise BenchError(
                f"--device cuda: this torch ({torch.__version__}) is a CPU-only build; "
                "install a CUDA build or use --device cpu")
        if not torch.cuda.is_available():
            raise BenchError("--device cuda: no CUDA GPU is visible "
                             "(check CUDA_VISIBLE_DEVICES / the driver) or use --device cpu")
        return torch.device("cuda", torch.cuda.current_device())
    if name == "cpu":
        return torch.device("cpu")
    raise BenchError(f"unknown device {name!r} (use auto, cuda or cpu)")


def available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def ceiling_sizes(device: torch.device, fast: bool = False) -> dict:
    """Sizes of the ceiling measurements: large enough to saturate, small enough on CPU.
    `fast` (tests) shrinks them: the numbers are then only placeholders."""
    if fast:
        return {"read_bytes": 32 * MiB, "matmul_n": 512}
    if device.type == "cuda":
        return {"read_bytes": 2 * GiB, "matmul_n": 8192}
    return {"read_bytes": 256 * MiB, "matmul_n": 4096}


def measure_ceilings(device: torch.device, backend: Backend, fast: bool = False) -> dict:
    """Read, copy and fp32 GEMM ceilings, measured now, on this device. Random data:
    zeros can run faster than real data. No flush: each buffer dwarfs the caches."""
    sizes = ceiling_sizes(device, fast)
    cuda = device.type == "cuda"
    nelem = sizes["read_bytes"] // 4
    reps = dict(warmup=3 if cuda else 1, min_calls=1, max_calls=(30 if cuda else 5) if not fast else 2,
                budget_s=None, sync=backend.sync, flush=noop, new_timer=backend.new_timer)
    out: dict[str, Any] = {}

    log(f"ceiling: read bandwidth, torch.sum of {sizes['read_bytes'] / GiB:g} GiB fp32")
    buf = torch.rand(nelem, device=device)
    r = robust_time(torch.sum, (buf,), **reps)
    out["read_sum_gbps"] = sizes["read_bytes"] / (r["median_ms"] * 1e-3) / 1e9
    out["read"] = {"bytes": sizes["read_bytes"], **r}
    # The same bytes as rows of 8192 summed per row (the tail's own access pattern): on
    # some CPUs the full reduction is slower than memory; the ceiling is the better one.
    rows2d = buf.view(-1, 8192)
    r = robust_time(torch.sum, (rows2d, 1), **reps)
    out["read_rowsum_gbps"] = sizes["read_bytes"] / (r["median_ms"] * 1e-3) / 1e9
    out["read_rowsum"] = {"bytes": sizes["read_bytes"], **r}
    out["read_gbps"] = max(out["read_sum_gbps"], out["read_rowsum_gbps"])

    log("ceiling: copy bandwidth, device copy of one half onto the other (read + write)")
    half = nelem // 2
    src, dst = buf[:half], buf[half:2 * half]
    r = robust_time(dst.copy_, (src,), **reps)
    copy_bytes = 2 * half * 4
    out["copy_gbps"] = copy_bytes / (r["median_ms"] * 1e-3) / 1e9
    out["copy"] = {"bytes": copy_bytes, **r}
    del buf, src, dst, rows2d

    n = sizes["matmul_n"]
    log(f"ceiling: fp32 GEMM {n}^3 torch.matmul, TF32 off")
    a = torch.randn(n, n, device=device)
    bm = torch.randn(n, n, device=device)
    reps["max_calls"] = (20 if cuda else 3) if not fast else 2
    r = robust_time(torch.matmul, (a, bm), **reps)
    flops = 2 * n**3
    out["fp32_tflops"] = flops / (r["median_ms"] * 1e-3) / 1e12
    out["matmul"] = {"n": n, "flops": flops, **r}
    del a, bm
    # A ceiling is the best the machine did: recompute the rates from the fastest call
    # (on a GPU within ~1% of the median; on a shared CPU the median can be far off).
    for key, rate, scale in (("read", "read_sum_gbps", 1e9), ("read_rowsum", "read_rowsum_gbps", 1e9),
                             ("copy", "copy_gbps", 1e9), ("matmul", "fp32_tflops", 1e12)):
        work = out[key]["flops"] if key == "matmul" else out[key]["bytes"]
        out[rate] = work / (out[key]["min_ms"] * 1e-3) / scale
    out["read_gbps"] = max(out["read_sum_gbps"], out["read_rowsum_gbps"])
    out["rate_from"] = "fastest call"
    for key in ("read", "read_rowsum", "copy", "matmul"):  # keep the JSON small
        out[key].pop("warmup", None)
    return out


def git_info() -> dict:
    # A copy of the tree (a remote GPU machine) may carry a stale .git or none: the
    # caller then names the commit measured.
    if os.environ.get("KB14_GIT_COMMIT"):
        return {"commit": os.environ["KB14_GIT_COMMIT"], "dirty": None}

    def git(*cmd):
        return subprocess.run(["git", *cmd], cwd=REPO_DIR, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def machine_info(device: torch.device) -> dict:
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_threads": torch.get_num_threads(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "git": git_info(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["sm_count"] = props.multi_processor_count
        info["l2_bytes"] = l2_cache_bytes(device)
        info["capability"] = f"{props.major}.{props.minor}"
    return info
