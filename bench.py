#!/usr/bin/env python
"""bench.py: timings of KernelBench level 2 problem 14 that a kernel author can trust.

Every number is printed beside the roofline measured in the same process:

* ceilings: read bandwidth (``torch.sum`` of a large fp32 tensor), copy bandwidth
  (device-to-device copy, bytes read + written) and fp32 GEMM FLOP/s (TF32 off);
* the whole model: reference eager, reference under ``torch.compile``, ``ModelNew``,
  any ``--model MODULE:CLASS`` candidate, and ``torch.matmul`` alone (the GEMM the
  fused tail cannot beat);
* the tail alone on the GEMM output ``y``: ours (``kernels.div_sum_scale``), the eager
  tail, ``torch.sum(y, 1)`` alone, and Inductor's compiled tail;
* ``--sweep``: the tail alone over batch sizes and hidden sizes.

Two timing methods are reported for every row:

1. KernelBench's own (``kernelbench_time``): 3 warm-up calls, then per trial a
   synchronize, an L2 flush (writing 256 MB), CUDA events around one call; mean, std,
   min, max over 100 trials. This is the number KernelBench will print.
2. A robust one (``robust_time``): median and interquartile range over many calls,
   each preceded by an L2 flush that reads 256 MB (a write flush leaves dirty lines
   whose write-back overlaps the timed call: small kernels then vary run to run). For tails, also CUDA-graph replay (``graph_time``):
   N calls captured in one graph over rotating input buffers, replayed, divided by N;
   this removes launch gaps, which dominate small tails.

On ``--device cpu`` the same code runs with host timers (``time.perf_counter``) and
smaller repeat counts. Run ``python bench.py --help`` for the options; the JSON
schema is described in ``bench_readme`` notes and in ``run_bench``'s docstring.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.nn as nn

REPO_DIR = Path(__file__).resolve().parent
if str(REPO_DIR) not in sys.path:  # so `import reference`, `import kernels` work from anywhere
    sys.path.insert(0, str(REPO_DIR))

import reference  # noqa: E402

SCHEMA = "kb14-bench/1"
DIVISOR = 2  # the reference's `x / 2`
SEED = 42  # KernelBench's set_seed(42) before building each model

MiB = 1024**2
GiB = 1024**3

# KernelBench's timing parameters (src/kernelbench/timing.py, its scripts).
KB_WARMUP = 3
KB_TRIALS = 100
CUDA_FLUSH_BYTES = 256 * MiB  # KernelBench fills a (32, 1024, 1024) int64 tensor: 256 MiB
CPU_FLUSH_BYTES = 64 * MiB  # larger than any server CPU's last-level cache slice we meet

# CPU defaults: a default CPU run must finish in about a minute on 2 cores, where one
# forward of the full-size model (137 GFLOP) takes ~1.5 s.
CPU_KB_WARMUP = 1
CPU_KB_TRIALS = 3
CPU_REPEATS = 3

# The sweep (tail only). Powers of two plus odd values that miss every vector width.
SWEEP_BATCHES = sorted({2**k for k in range(15)} | {3, 100, 1000, 5000})
SWEEP_HIDDENS = sorted({2**k for k in range(7, 17)} | {129, 1000, 3000, 10007})
# Up to this many bytes read, a call is launch-bound on an H200: timed alone after a
# flush, it carries the ~3 us an empty kernel takes to launch and be timed (2.7-3.3 us
# measured), and at 32 MiB its median moved by up to 9% between processes, where
# CUDA-graph replay over rotating L2-cold inputs repeated within 0.3%
# (results/kernel_notes.md). For such rows the graph time is the primary one.
LAUNCH_BOUND_BYTES = 64 * MiB

_T0 = time.perf_counter()


def log(msg: str) -> None:
    """Progress on stderr, so stdout stays the result table."""
    print(f"[bench {time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    """A problem with the arguments or the machine: reported in one line, exit code 2."""


# --------------------------------------------------------------------------------------
# Timing primitives. Each takes its synchronize / flush / timer as parameters so the
# loops can be tested on CPU with fakes; `make_backend` builds the real ones.
# --------------------------------------------------------------------------------------


class CudaEventTimer:
    """CUDA events on the current stream around one call: GPU time, launch gaps included."""

    __slots__ = ("_start", "_end")

    def __init__(self) -> None:
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._end.record()

    def elapsed_ms(self) -> float:
        self._end.synchronize()
        return self._start.elapsed_time(self._end)


class HostTimer:
    """time.perf_counter around one call; `sync` makes asynchronous work finish first."""

    __slots__ = ("_sync", "_t0", "_t1")

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._t0 = self._t1 = 0.0

    def start(self) -> None:
        self._sync()
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        self._sync()
        self._t1 = time.perf_counter()

    def elapsed_ms(self) -> float:
        return (self._t1 - self._t0) * 1e3


def _noop() -> None:
    pass


@dataclass
class Backend:
    """How to time on one device."""

    device: torch.device
    timer_name: str
    sync: Callable[[], None]
    flush: Callable[[], None]
    new_timer: Callable[[], Any]
    flush_bytes: int
    # The robust method's flush. On CUDA it evicts the cache by reading: that leaves
    # only clean lines behind, where the write flush leaves dirty ones whose write-back
    # overlaps the next timed call and makes a ~10 us kernel's time vary run to run.
    robust_flush: Callable[[], Any]


def make_backend(device: torch.device, flush_bytes: int | None = None) -> Backend:
    """The real timers and flush for `device`. The flush buffer is allocated once: the
    write of `flush_bytes` is what evicts the cache, as in KernelBench's fill_()."""
    if device.type == "cuda":
        nbytes = CUDA_FLUSH_BYTES if flush_bytes is None else flush_bytes
        buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

        def sync() -> None:
            torch.cuda.synchronize(device)

        return Backend(device, "cuda-events", sync, buf.zero_, CudaEventTimer, nbytes, robust_flush=buf.max)
    nbytes = CPU_FLUSH_BYTES if flush_bytes is None else flush_bytes
    buf = torch.empty(nbytes // 4, dtype=torch.int32)
    return Backend(device, "host-perf_counter", _noop, buf.zero_, lambda: HostTimer(_noop), nbytes,
                   robust_flush=buf.zero_)


def _resolve(backend, sync, flush, new_timer, robust: bool = False):
    if backend is None and (sync is None or flush is None or new_timer is None):
        if not torch.cuda.is_available():
            raise BenchError("no timing backend given and no CUDA GPU for the default one")
        backend = make_backend(torch.device("cuda", torch.cuda.current_device()))
    return (
        sync if sync is not None else backend.sync,
        flush if flush is not None else (backend.robust_flush if robust else backend.flush),
        new_timer if new_timer is not None else backend.new_timer,
    )


def _stats_mean(times: Sequence[float]) -> dict:
    # KernelBench reports np.mean / np.std (population std), min and max.
    return {
        "mean_ms": statistics.fmean(times),
        "std_ms": statistics.pstdev(times) if len(times) > 1 else 0.0,
        "min_ms": min(times),
        "max_ms": max(times),
    }


def _stats_median(times: Sequence[float]) -> dict:
    if len(times) >= 2:
        q1, med, q3 = statistics.quantiles(times, n=4, method="inclusive")
    else:
        q1 = med = q3 = times[0]
    return {"median_ms": med, "q1_ms": q1, "q3_ms": q3, "iqr_ms": q3 - q1,
            "min_ms": min(times), "max_ms": max(times)}


def _timed_call(fn: Callable, args: Sequence, sync, flush, new_timer) -> float:
    """One KernelBench-style timed call: synchronize, flush, events around the call,
    synchronize; milliseconds."""
    sync()
    flush()
    timer = new_timer()
    timer.start()
    fn(*args)
    timer.stop()
    sync()
    return timer.elapsed_ms()


def kernelbench_time(
    fn: Callable,
    args: Sequence = (),
    *,
    warmup: int = KB_WARMUP,
    trials: int = KB_TRIALS,
    backend: Backend | None = None,
    sync: Callable[[], None] | None = None,
    flush: Callable[[], None] | None = None,
    new_timer: Callable[[], Any] | None = None,
) -> dict:
    """KernelBench's "cuda_event" timing: `warmup` calls (each followed by a sync), then
    per trial: synchronize, flush L2, events around ONE call, synchronize, read.

    Returns mean/std/min/max in ms (population std, as np.std) plus the counts.
    """
    sync, flush, new_timer = _resolve(backend, sync, flush, new_timer)
    for _ in range(warmup):
        fn(*args)
        sync()
    times = [_timed_call(fn, args, sync, flush, new_timer) for _ in range(trials)]
    return {**_stats_mean(times), "trials": trials, "warmup": warmup, "times_ms": times}


def robust_time(
    fn: Callable,
    args: Sequence = (),
    *,
    warmup: int = 10,
    min_calls: int = 50,
    max_calls: int = 1000,
    budget_s: float | None = 1.0,
    backend: Backend | None = None,
    sync: Callable[[], None] | None = None,
    flush: Callable[[], None] | None = None,
    new_timer: Callable[[], Any] | None = None,
) -> dict:
    """Median and IQR over many calls, the cache flushed before each one (by the
    backend's `robust_flush` unless `flush` is given: a 256 MB read on CUDA).

    The number of calls is what fits in `budget_s` (estimated from the warm-up, flush
    included), clamped to [min_calls, max_calls]; `budget_s=None` means max_calls.
    Calls are queued without a host synchronize between them: the flush before each
    call keeps the GPU busy while the host enqueues the call, so the events measure
    the call's GPU time, and the median ignores the odd slow one.
    """
    sync, flush, new_timer = _resolve(backend, sync, flush, new_timer, robust=True)
    sync()
    t0 = time.perf_counter()
    for _ in range(warmup):
        flush()
        fn(*args)
    sync()
    per_call = (time.perf_counter() - t0) / warmup if warmup else None
    if budget_s is None or per_call is None:
        calls = max_calls
    else:
        calls = int(min(max_calls, max(min_calls, budget_s / max(per_call, 1e-9))))
    timers = []
    for _ in range(calls):
        flush()
        timer = new_timer()
        timer.start()
        fn(*args)
        timer.stop()
        timers.append(timer)
    sync()
    times = [t.elapsed_ms() for t in timers]
    return {**_stats_median(times), "calls": calls, "warmup": warmup}


def paired_time(fns: dict, *, rounds: int, backend: Backend) -> dict:
    """Each function once per round, in turn, each after a cache flush: per-function
    times (ms) taken side by side. The GEMM's time drifts by tens of microseconds
    between runs; interleaving makes the differences between rows immune to that drift,
    so they can resolve a ~10 us tail under a 2.7 ms GEMM."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(_timed_call(fn, (), backend.sync, backend.flush, backend.new_timer))
    return times


def paired_differences(times: dict, base: str) -> dict:
    """Median (and IQR) of each row's per-round difference from `base`, in ms."""
    out = {}
    for name, t in times.items():
        if name != base:
            out[f"{name} - {base}"] = _stats_median([a - b for a, b in zip(t, times[base])])
    return out


def graph_replay_ms(fn: Callable, arg_sets: Sequence[Sequence], *, calls_per_graph: int, replays: int,
                    warmup: int = 3) -> list[float]:
    """Per-call milliseconds of each replay of one CUDA graph that makes `calls_per_graph`
    calls back to back, call i on arg_sets[i % len(arg_sets)]; replays are queued and
    each is timed with CUDA events."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up off the default stream, as capture requires
        for i in range(warmup):
            fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls_per_graph):
            fn(*arg_sets[i % len(arg_sets)])
    graph.replay()  # first replay uploads the graph
    torch.cuda.synchronize()
    timers = []
    for _ in range(replays):
        t = CudaEventTimer()
        t.start()
        graph.replay()
        t.stop()
        timers.append(t)
    torch.cuda.synchronize()
    per_call = [t.elapsed_ms() / calls_per_graph for t in timers]
    del graph
    return per_call


def graph_time(
    fn: Callable,
    arg_sets: Sequence[Sequence],
    *,
    calls_per_graph: int = 20,
    replays: int = 10,
    warmup: int = 3,
    l2_bytes: int | None = None,
    bytes_per_call: int | None = None,
) -> dict:
    """CUDA-graph replay: capture `calls_per_graph` calls, call i on arg_sets[i % k],
    replay the graph `replays` times with events around each, report per-call median.

    Replaying removes the host launch cost and the gaps between kernels, which is what
    a small tail is made of. Rotating over buffers whose total exceeds 2x L2 keeps the
    input reads L2-cold; smaller totals (tiny tails) are L2-warm, flagged in `l2_cold`.
    """
    per_call = graph_replay_ms(fn, arg_sets, calls_per_graph=calls_per_graph, replays=replays, warmup=warmup)
    l2_cold = None
    if l2_bytes and bytes_per_call:
        l2_cold = len(arg_sets) * bytes_per_call >= 2 * l2_bytes
    return {**_stats_median(per_call), "calls_per_graph": calls_per_graph, "replays": replays,
            "buffers": len(arg_sets), "l2_cold": l2_cold}


# --------------------------------------------------------------------------------------
# The machine: device choice, memory, ceilings, provenance.
# --------------------------------------------------------------------------------------


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


def l2_cache_bytes(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 0) or 50 * MiB)


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


def rotation_buffers(nbytes: int, l2: int, cap: int) -> int:
    """How many copies of an input make the rotation exceed 2x L2 (at least 2)."""
    if l2 <= 0:
        return 1
    return max(2, min(cap, math.ceil(2 * l2 / max(nbytes, 1)) + 1))


def rotating_copies(t: torch.Tensor, l2: int, cap: int) -> list[torch.Tensor]:
    """`t` and clones of it, together over twice the L2 (see rotation_buffers)."""
    k = rotation_buffers(t.numel() * t.element_size(), l2, cap)
    return [t] + [t.clone() for _ in range(k - 1)]


def estimate_bytes(args, device: torch.device) -> dict:
    """Peak memory of each phase of the run, so a run that cannot fit fails before it
    allocates anything. Counts fp32 tensors; 10% headroom is left for the allocator."""
    e = 4
    b, i, h = args.batch, args.input, args.hidden
    flush = CUDA_FLUSH_BYTES if device.type == "cuda" else CPU_FLUSH_BYTES
    l2 = l2_cache_bytes(device)
    c = ceiling_sizes(device, args.fast_ceilings)
    phases = {"ceilings": max(c["read_bytes"], 3 * c["matmul_n"] ** 2 * e) + flush}
    if not args.sweep_only:
        # reference + ModelNew (+ ModelNewColsum) + candidates (own W each)
        n_models = 2 + int(bool(getattr(args, "colsum", False))) + len(args.model or [])
        y = b * h * e
        k = rotation_buffers(y, l2, 64) if device.type == "cuda" else 1
        x_copies = k * b * i * e if getattr(args, "colsum", False) else 0  # ModelNewColsum's rotation
        phases["models"] = n_models * h * i * e + b * i * e + (4 + k) * y + x_copies + flush
    if args.sweep or args.sweep_only:
        worst = 0
        for bb, hh in sweep_points(args):
            y = bb * hh * e
            k = rotation_buffers(y, l2, 100) if (device.type == "cuda" and y <= LAUNCH_BOUND_BYTES) else 1
            worst = max(worst, (k + 3) * y)
        phases["sweep"] = worst + flush
    return phases


def check_memory(args, device: torch.device) -> dict:
    phases = estimate_bytes(args, device)
    avail = available_bytes(device)
    name, need = max(phases.items(), key=lambda kv: kv[1])
    if need > 0.9 * avail:
        raise BenchError(
            f"sizes do not fit: the {name} phase needs about {need / GiB:.2f} GiB but "
            f"{device.type} has {avail / GiB:.2f} GiB free; reduce --batch/--input/--hidden"
            + (" or the sweep" if name == "sweep" else ""))
    return {"phases_bytes": phases, "available_bytes": avail}


def measure_ceilings(device: torch.device, backend: Backend, fast: bool = False) -> dict:
    """Read, copy and fp32 GEMM ceilings, measured now, on this device. Random data:
    zeros can run faster than real data. No flush: each buffer dwarfs the caches."""
    sizes = ceiling_sizes(device, fast)
    cuda = device.type == "cuda"
    nelem = sizes["read_bytes"] // 4
    reps = dict(warmup=3 if cuda else 1, min_calls=1, max_calls=(30 if cuda else 5) if not fast else 2,
                budget_s=None, sync=backend.sync, flush=_noop, new_timer=backend.new_timer)
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


# --------------------------------------------------------------------------------------
# What is timed.
# --------------------------------------------------------------------------------------


class EagerTail(nn.Module):
    """The reference's tail, written as it writes it (divisor a literal, the scale an
    attribute), so that torch.compile sees the same constants it sees in the model."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, y):
        return torch.sum(y / 2, dim=1, keepdim=True) * self.scale


def load_model_class(spec: str) -> type:
    """`MODULE:CLASS` where MODULE is a dotted module name or a path to a .py file."""
    if ":" not in spec:
        raise BenchError(f"--model {spec!r}: expected MODULE:CLASS (e.g. modelnew:ModelNew "
                         "or path/to/file.py:ModelNew)")
    mod_name, cls_name = spec.rsplit(":", 1)
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            path = Path(mod_name).expanduser()
            if not path.is_file():
                raise BenchError(f"--model {spec!r}: no such file {str(path)!r}")
            uniq = f"_bench_candidate_{abs(hash(str(path.resolve())))}"
            mspec = importlib.util.spec_from_file_location(uniq, path)
            if mspec is None or mspec.loader is None:
                raise BenchError(f"--model {spec!r}: cannot load {str(path)!r} as a module")
            module = importlib.util.module_from_spec(mspec)
            sys.modules[uniq] = module
            mspec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except BenchError:
        raise
    except ModuleNotFoundError as exc:
        raise BenchError(f"--model {spec!r}: module not found ({exc})") from None
    except Exception as exc:  # the candidate's own import failed: say so, no traceback
        raise BenchError(f"--model {spec!r}: importing {mod_name!r} failed: "
                         f"{type(exc).__name__}: {exc}") from None
    cls = getattr(module, cls_name, None)
    if cls is None or not isinstance(cls, type):
        raise BenchError(f"--model {spec!r}: {mod_name!r} has no class {cls_name!r}")
    return cls


def build_model(cls: type, init_inputs: Sequence, device: torch.device) -> nn.Module:
    torch.manual_seed(SEED)  # KernelBench: set_seed(42) before each model's constructor
    return cls(*init_inputs).to(device=device, dtype=torch.float32)


@dataclass
class Case:
    name: str
    kind: str  # "model" (roofline: FLOP/s) or "tail" (roofline: read bandwidth)
    fn: Callable
    args: tuple
    bytes: int
    flops: int
    make_arg_sets: Callable[[], list] | None = None  # rotating inputs for graph replay
    check: Callable[[], dict] | None = None


def _check_against(out_fn: Callable, ref: torch.Tensor, exact: bool = True, ok_tol: float = 1e-4,
                   note: str | None = None) -> Callable[[], dict]:
    """A row's check: bitwise equality and allclose at 1e-4 and 1e-2; `ok` at `ok_tol`."""
    def check() -> dict:
        with torch.no_grad():
            out = out_fn()
        if out.shape != ref.shape:
            return {"ok": False, "reason": f"shape {tuple(out.shape)} != {tuple(ref.shape)}"}
        res = {"max_abs_diff": (out.double() - ref.double()).abs().max().item()}
        for tol in (1e-4, 1e-2):
            res[f"allclose_{tol:.0e}".replace("e-0", "e-")] = bool(torch.allclose(out, ref, atol=tol, rtol=tol))
        if exact:
            res["bitwise_equal"] = bool(torch.equal(out, ref))
        res["ok"] = bool(torch.allclose(out, ref, atol=ok_tol, rtol=ok_tol))
        if note:
            res["note"] = note
        return res
    return check


# --------------------------------------------------------------------------------------
# The run.
# --------------------------------------------------------------------------------------


def _fmt_time(ms: float | None) -> str:
    if ms is None:
        return "-"
    if abs(ms) >= 1.0:
        return f"{ms:.3f} ms"
    return f"{ms * 1e3:.2f} us"


def _time_case(case: Case, args, device: torch.device, backend: Backend, l2: int) -> dict:
    cuda = device.type == "cuda"
    row: dict[str, Any] = {"name": case.name, "kind": case.kind, "bytes": case.bytes,
                           "flops": case.flops, "error": None}
    try:
        with torch.no_grad():
            case.fn(*case.args)  # compile / build / autotune outside every timing
            backend.sync()
            row["check"] = case.check() if case.check else None
            kb = kernelbench_time(case.fn, case.args, warmup=args.kb_warmup, trials=args.kb_trials,
                                  backend=backend)
            row["kernelbench"] = {k: v for k, v in kb.items() if k != "times_ms"}
            if cuda:
                rb = robust_time(case.fn, case.args, warmup=10, min_calls=50,
                                 max_calls=args.repeats or 1000, budget_s=1.0, backend=backend)
            else:
                rb = robust_time(case.fn, case.args, warmup=0, max_calls=args.repeats,
                                 budget_s=None, backend=backend)
            row["robust"] = rb
            row["graph"] = None
            if cuda and case.make_arg_sets is not None and not args.no_graph:
                try:
                    sets = case.make_arg_sets()
                    row["graph"] = graph_time(case.fn, sets, calls_per_graph=max(20, len(sets)),
                                              replays=20, l2_bytes=l2, bytes_per_call=case.bytes)
                except Exception as exc:  # a non-capturable op: report, keep going
                    row["graph"] = {"error": f"{type(exc).__name__}: {exc}"}
                    torch.cuda.synchronize()
        g = row.get("graph")
        if g and "median_ms" in g and case.bytes <= LAUNCH_BOUND_BYTES:
            row["time_ms"], row["method"] = g["median_ms"], "cuda-graph"
        else:
            row["time_ms"], row["method"] = row["robust"]["median_ms"], "robust"
    except BenchError:
        raise
    except Exception as exc:  # one broken row (say a failing kernel build) must not end the run
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["time_ms"] = None
        log(f"  {case.name}: FAILED: {row['error']}")
    return row


def _add_roofline(row: dict, ceilings: dict) -> None:
    t = row.get("time_ms")
    row["gbps"] = row["tflops"] = row["pct_of_ceiling"] = row["floor_ms"] = None
    if not t:
        return
    read = ceilings["read_gbps"] * 1e9
    row["gbps"] = row["bytes"] / (t * 1e-3) / 1e9
    if row["kind"] == "tail":
        row["ceiling"] = "read_gbps"
        row["pct_of_ceiling"] = 100.0 * row["gbps"] * 1e9 / read
        row["floor_ms"] = row["bytes"] / read * 1e3
    else:
        row["ceiling"] = "fp32_tflops"
        row["tflops"] = row["flops"] / (t * 1e-3) / 1e12
        row["pct_of_ceiling"] = 100.0 * row["tflops"] / ceilings["fp32_tflops"]
        row["floor_ms"] = max(row["flops"] / (ceilings["fp32_tflops"] * 1e12),
                              row["bytes"] / read) * 1e3


def _speedups(rows: list[dict]) -> None:
    by = {r["name"]: r.get("time_ms") for r in rows}
    base = {"model": ("reference eager", "reference compiled"),
            "tail": ("tail eager", "tail compiled")}
    for r in rows:
        eager, comp = (by.get(n) for n in base[r["kind"]])
        t = r.get("time_ms")
        r["speedup_vs_eager"] = eager / t if (t and eager) else None
        r["speedup_vs_compiled"] = comp / t if (t and comp) else None


def default_cases(args, device: torch.device, l2: int) -> list[Case]:
    """The rows of the default run, built lazily enough that a broken import (say the
    kernel build) only loses its own rows."""
    b, i, h, s = args.batch, args.input, args.hidden, args.scaling_factor
    init = [i, h, s]
    e = 4
    model_bytes = (b * i + h * i + b) * e
    flops = 2 * b * i * h
    tail_bytes = (b * h + b) * e
    cases: list[Case] = []

    log(f"building the models at batch={b} input={i} hidden={h} scale={s}")
    ref = build_model(reference.Model, init, device).eval()
    torch.manual_seed(SEED)
    x = torch.rand(b, i).to(device)  # reference.get_inputs(): uniform [0, 1)
    with torch.no_grad():
        ref_out = ref(x)
        w = ref.weight.detach()
        y = torch.matmul(x, w.T)  # the tail's input: the real GEMM output
        tail_ref = EagerTail(s)(y)

    def model_case(name, module):
        return Case(name, "model", module, (x,), model_bytes, flops,
                    check=_check_against(lambda: module(x), ref_out, exact=True))

    cases.append(model_case("reference eager", ref))
    if not args.no_compile:
        cases.append(model_case("reference compiled", torch.compile(ref)))
    log("importing modelnew / kernels (the first import on a machine builds them: can take minutes)")
    try:
        import modelnew  # imports kernels: builds them on first use
        cases.append(model_case("ModelNew", build_model(modelnew.ModelNew, init, device).eval()))
    except Exception as exc:
        log(f"ModelNew unavailable: {type(exc).__name__}: {exc}")
        cases.append(Case("ModelNew", "model", _raiser(exc), (), model_bytes, flops))
    if getattr(args, "colsum", False):
        # The column-sum rewrite: not bit-exact by design, so its check is allclose at
        # 1e-2 (KernelBench's fp16/bf16 tolerance; it fails fp32's 1e-4). Timed with a
        # warm cache (the column sum is computed once, on the first call); it reads x
        # once and does 2 * batch * input FLOPs.
        try:
            import modelnew
            colsum_model = build_model(modelnew.ModelNewColsum, init, device).eval()
            colsum_bytes = (b * i + b) * e + i * 8
            def sets_of_x():  # its forward reads only x: rotate x to keep the reads L2-cold
                return [(t,) for t in rotating_copies(x, l2, 64)]

            cases.append(Case("ModelNewColsum", "model", colsum_model, (x,), colsum_bytes, 2 * b * i,
                              make_arg_sets=sets_of_x,
                              check=_check_against(lambda: colsum_model(x), ref_out, ok_tol=1e-2,
                                                   note="column-sum rewrite: not bit-exact by design, "
                                                        "checked at 1e-2")))
        except Exception as exc:
            log(f"ModelNewColsum unavailable: {type(exc).__name__}: {exc}")
            cases.append(Case("ModelNewColsum", "model", _raiser(exc), (), model_bytes, flops))
    for spec in args.model or []:
        cls = load_model_class(spec)
        try:
            cand = build_model(cls, init, device).eval()
            cases.append(model_case(f"candidate {spec}", cand))
        except Exception as exc:
            raise BenchError(f"--model {spec!r}: constructing {cls.__name__}{tuple(init)} failed: "
                             f"{type(exc).__name__}: {exc}") from None
    cases.append(Case("matmul alone", "model", lambda xx: torch.matmul(xx, w.T), (x,),
                      model_bytes - b * e + b * h * e, flops))

    def sets_of_y():
        return [(t,) for t in rotating_copies(y, l2, 64)]

    def tail_case(name, fn, check=True):
        chk = _check_against(lambda: fn(y), tail_ref, exact=True) if check else None
        return Case(name, "tail", fn, (y,), tail_bytes, 0, make_arg_sets=sets_of_y, check=chk)

    try:
        import kernels
        cases.append(tail_case("tail ours", lambda t: kernels.div_sum_scale(t, DIVISOR, s)))
    except Exception as exc:
        log(f"kernels unavailable: {type(exc).__name__}: {exc}")
        cases.append(Case("tail ours", "tail", _raiser(exc), (), tail_bytes, 0))
    eager_tail = EagerTail(s)
    cases.append(tail_case("tail eager", eager_tail))
    cases.append(tail_case("tail sum(y,1) only", lambda t: torch.sum(t, 1), check=False))
    if not args.no_compile:
        cases.append(tail_case("tail compiled", torch.compile(EagerTail(s))))
    return cases


def _raiser(exc: Exception) -> Callable:
    def fn(*_a):
        raise exc
    return fn


def breakdown(rows: list[dict], ceilings: dict) -> dict | None:
    by = {r["name"]: r for r in rows}
    mn, mm = by.get("ModelNew"), by.get("matmul alone")
    if not (mn and mm and mn.get("time_ms") and mm.get("time_ms")):
        return None
    t_new, t_mm = mn["time_ms"], mm["time_ms"]
    tail = by.get("tail ours", {}).get("time_ms")
    ref_e = by.get("reference eager", {}).get("time_ms")
    ref_c = by.get("reference compiled", {}).get("time_ms")
    out = {
        "modelnew_ms": t_new,
        "matmul_ms": t_mm,
        "tail_overhead_ms": t_new - t_mm,
        "tail_alone_ms": tail,
        "gemm_share_pct": 100.0 * t_mm / t_new,
        "matmul_pct_of_fp32_ceiling": mm.get("pct_of_ceiling"),
        "max_speedup_vs_eager_keeping_gemm": ref_e / t_mm if ref_e else None,
        "max_speedup_vs_compiled_keeping_gemm": ref_c / t_mm if ref_c else None,
    }
    bound = out["max_speedup_vs_eager_keeping_gemm"]
    out["statement"] = (
        f"ModelNew takes {_fmt_time(t_new)}, of which torch.matmul alone is {_fmt_time(t_mm)} "
        f"({out['gemm_share_pct']:.1f}%, at {mm.get('pct_of_ceiling') or 0:.0f}% of the fp32 GEMM "
        f"ceiling). ModelNew - matmul = {_fmt_time(t_new - t_mm)} is the tail's overhead"
        + (" (negative: the two medians differ by less than their noise)" if t_new < t_mm else "")
        + (f" (our tail alone: {_fmt_time(tail)})" if tail else "")
        + ". The GEMM bounds the speedup: with it kept, even a free tail gives at most "
        + (f"{bound:.3f}x over the reference eager." if bound else "matmul-bound times.")
    )
    return out


def sweep_points(args) -> list[tuple[int, int]]:
    batches = args.sweep_batches or SWEEP_BATCHES
    hiddens = args.sweep_hiddens or SWEEP_HIDDENS
    pts = [(bb, args.hidden) for bb in batches] + [(args.batch, hh) for hh in hiddens]
    seen, out = set(), []
    for p in pts:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def run_sweep(args, device: torch.device, backend: Backend, ceilings: dict, l2: int) -> dict:
    """The tail alone on random y of shape (batch, hidden): batch swept at the default
    hidden, hidden swept at the default batch. Runtime is kept short with time budgets
    per point, few repeats, and graph replay where launches dominate."""
    cuda = device.type == "cuda"
    s = args.scaling_factor
    try:
        import kernels
        ours = lambda t: kernels.div_sum_scale(t, DIVISOR, s)  # noqa: E731
    except Exception as exc:
        log(f"kernels unavailable in the sweep: {exc}")
        ours = _raiser(exc)
    eager = EagerTail(s)
    read = ceilings["read_gbps"] * 1e9
    pts = sweep_points(args)
    points = []
    for n, (bb, hh) in enumerate(pts, 1):
        nbytes = (bb * hh + bb) * 4
        log(f"sweep {n}/{len(pts)}: y = ({bb}, {hh}), {nbytes / MiB:.2f} MiB")
        torch.manual_seed(SEED + n)
        y = torch.randn(bb, hh, device=device)
        variants = {"ours": ours, "eager": eager}
        if not args.no_compile:
            torch._dynamo.reset()  # a fresh, shape-specialised compile per point
            variants["compiled"] = torch.compile(EagerTail(s), dynamic=False)
        launch_bound = cuda and nbytes <= LAUNCH_BOUND_BYTES and not args.no_graph
        sets = None
        if launch_bound:
            sets = [(t,) for t in rotating_copies(y, l2, 100)]
        point: dict[str, Any] = {"batch": bb, "hidden": hh, "bytes": nbytes, "variants": {}}
        with torch.no_grad():
            reference_bits = eager(y)
        for vname, fn in variants.items():
            v: dict[str, Any] = {"error": None}
            try:
                with torch.no_grad():
                    # Whether this variant returns the eager tail's bits at this point.
                    v["bits_equal_eager"] = bool(torch.equal(fn(y), reference_bits))
                    backend.sync()
                    if cuda:
                        rb = robust_time(fn, (y,), warmup=5, min_calls=10, max_calls=args.repeats or 200,
                                         budget_s=0.1, backend=backend)
                    else:
                        rb = robust_time(fn, (y,), warmup=1, max_calls=args.repeats, budget_s=None,
                                         backend=backend)
                    v["flushed"] = rb
                    v["time_ms"], v["method"] = rb["median_ms"], "flushed-median"
                    if sets is not None:
                        calls = int(min(100, max(len(sets), 2.0 / max(rb["median_ms"], 1e-4))))
                        g = graph_time(fn, sets, calls_per_graph=calls, replays=10,
                                       l2_bytes=l2, bytes_per_call=nbytes)
                        v["graph"] = g
                        v["time_ms"], v["method"] = g["median_ms"], "cuda-graph"
            except Exception as exc:
                v["error"] = f"{type(exc).__name__}: {exc}"
                v["time_ms"] = None
                log(f"  {vname} failed: {v['error']}")
                if cuda:
                    torch.cuda.synchronize()
            t = v.get("time_ms")
            v["gbps"] = nbytes / (t * 1e-3) / 1e9 if t else None
            v["pct_of_read_ceiling"] = 100.0 * nbytes / (t * 1e-3) / read if t else None
            point["variants"][vname] = v
        t_ours = point["variants"]["ours"].get("time_ms")
        for base in ("eager", "compiled"):
            tb = point["variants"].get(base, {}).get("time_ms")
            point[f"speedup_vs_{base}"] = tb / t_ours if (tb and t_ours) else None
        points.append(point)
        del y, sets
    return {"points": points, "launch_bound_bytes": LAUNCH_BOUND_BYTES,
            "note": "batch swept at the default hidden, hidden at the default batch; "
                    "time_ms is the cuda-graph median for launch-bound points, else the "
                    "L2-flushed median; bits_equal_eager: torch.equal with the eager tail"}


PAIRED_ROUNDS = 60


def run_bench(args) -> dict:
    """Run everything `args` asks for and return the result dict (the JSON).

    Schema "kb14-bench/1": {schema, meta{date, device, gpu, torch, cuda, python, cpu,
    cpu_threads, tf32_matmul, git{commit, dirty}, [sm_count, l2_bytes, capability]},
    params{...every argument...}, memory{phases_bytes, available_bytes},
    ceilings{read_gbps, copy_gbps, fp32_tflops, read{}, copy{}, matmul{}},
    rows[{name, kind, bytes, flops, error, check, kernelbench{mean_ms, std_ms, min_ms,
    max_ms, trials, warmup}, robust{median_ms, q1_ms, q3_ms, iqr_ms, min_ms, max_ms, calls,
    warmup}, graph{...}|null, time_ms, method ("robust" or "cuda-graph": which timing time_ms
    is), speedup_vs_eager, speedup_vs_compiled, gbps, tflops,
    ceiling, pct_of_ceiling, floor_ms}], breakdown{...}|null, sweep{points[...]}|null}.
    """
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    if args.threads is not None:
        if args.threads < 1:
            raise BenchError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    for name in ("batch", "input", "hidden"):
        if getattr(args, name) <= 0:
            raise BenchError(f"--{name} must be positive, got {getattr(args, name)}")
    if args.kb_warmup is None:
        args.kb_warmup = KB_WARMUP if cuda else CPU_KB_WARMUP
    if args.kb_trials is None:
        args.kb_trials = KB_TRIALS if cuda else CPU_KB_TRIALS
    if args.repeats is None and not cuda:
        args.repeats = CPU_REPEATS
    for spec in args.model or []:  # fail on a bad candidate before any long work
        load_model_class(spec)
    memory = check_memory(args, device)

    result: dict[str, Any] = {"schema": SCHEMA, "meta": machine_info(device),
                              "params": {k: v for k, v in sorted(vars(args).items())},
                              "memory": memory, "ceilings": None, "rows": [],
                              "breakdown": None, "sweep": None}
    l2 = l2_cache_bytes(device)
    # KernelBench never enables TF32: the reference GEMM is full fp32. Pin it for the run.
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    prev_prec = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        backend = make_backend(device)
        ceilings = measure_ceilings(device, backend, fast=args.fast_ceilings)
        result["ceilings"] = ceilings
        log(f"ceilings: read {ceilings['read_gbps']:.0f} GB/s (best of sum, row sums), copy {ceilings['copy_gbps']:.0f} GB/s "
            f"(read+write), fp32 GEMM {ceilings['fp32_tflops']:.2f} TFLOP/s")
        if not args.sweep_only:
            cases = default_cases(args, device, l2)
            rows = []
            for n, case in enumerate(cases, 1):
                log(f"[{n}/{len(cases)}] {case.name}")
                rows.append(_time_case(case, args, device, backend, l2))
                if rows[-1].get("time_ms"):
                    log(f"  median {_fmt_time(rows[-1]['time_ms'])}, KernelBench mean "
                        f"{_fmt_time(rows[-1]['kernelbench']['mean_ms'])}")
            models = {c.name: (lambda c=c: c.fn(*c.args)) for c in cases
                      if c.kind == "model" and not any(r["name"] == c.name and r.get("error") for r in rows)}
            del cases
            for r in rows:
                _add_roofline(r, ceilings)
            _speedups(rows)
            result["rows"] = rows
            result["breakdown"] = breakdown(rows, ceilings)
            if result["breakdown"] is not None and "matmul alone" in models:
                log(f"paired timing of the model rows ({PAIRED_ROUNDS} interleaved rounds)")
                with torch.no_grad():
                    paired = paired_time(models, rounds=PAIRED_ROUNDS if cuda else 2, backend=backend)
                result["breakdown"]["paired"] = {
                    "rounds": len(paired["matmul alone"]),
                    "median_ms": {k: _stats_median(v)["median_ms"] for k, v in paired.items()},
                    "vs_matmul": paired_differences(paired, "matmul alone"),
                    "vs_reference_eager": {
                        k: v for k, v in paired_differences(paired, "reference eager").items()
                        if not k.startswith("matmul alone")} if "reference eager" in paired else {},
                }
        if args.sweep or args.sweep_only:
            result["sweep"] = run_sweep(args, device, backend, ceilings, l2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
        torch.set_float32_matmul_precision(prev_prec)
    result["meta"]["elapsed_s"] = time.perf_counter() - _T0
    return result


# --------------------------------------------------------------------------------------
# Output: table, plot.
# --------------------------------------------------------------------------------------


def format_table(result: dict) -> str:
    c = result["ceilings"]
    m = result["meta"]
    lines = [
        f"device: {m['gpu'] or m['cpu']} ({m['device']}), torch {m['torch']}, CUDA {m['cuda']}, "
        f"commit {(m['git']['commit'] or '?')[:10]}{' (dirty)' if m['git']['dirty'] else ''}",
        f"ceilings: read {c['read_gbps']:.0f} GB/s (best of torch.sum {c['read_sum_gbps']:.0f}, "
        f"row sums {c['read_rowsum_gbps']:.0f}), copy {c['copy_gbps']:.0f} GB/s "
        f"(read+write), fp32 GEMM {c['fp32_tflops']:.2f} TFLOP/s (n={c['matmul']['n']}, TF32 off)",
    ]
    rows = result["rows"]
    if rows:
        hdr = (f"{'row':<26} {'KB mean +- std':>22} {'KB min..max':>22} {'median [IQR]':>24} "
               f"{'graph':>10} {'x eager':>8} {'x comp':>7} {'achieved':>12} {'%ceil':>6} check")
        lines += ["", hdr, "-" * len(hdr)]
        for r in rows:
            if r.get("error"):
                lines.append(f"{r['name']:<26} ERROR {r['error']}")
                continue
            kb, rb, g = r["kernelbench"], r["robust"], r.get("graph")
            gtxt = _fmt_time(g["median_ms"]) if g and "median_ms" in g else ("fail" if g else "-")
            rtxt = _fmt_time(rb['median_ms']) + ' [' + _fmt_time(rb['iqr_ms']) + ']'
            if r.get("method") == "cuda-graph":
                gtxt += "*"
            else:
                rtxt += "*"
            ach = (f"{r['tflops']:.2f} TFLOP/s" if r["kind"] == "model" else f"{r['gbps']:.0f} GB/s")
            chk = r.get("check")
            ctxt = "-" if not chk else ("bits==" if chk.get("bitwise_equal") else
                                        ("ok" if chk.get("ok") else "FAIL") +
                                        f" {chk.get('max_abs_diff', float('nan')):.1e}")
            if chk and "allclose_1e-2" in chk and not chk.get("bitwise_equal"):  # ModelNewColsum
                ctxt = (f"{'ok' if chk['allclose_1e-2'] else 'FAIL'}@1e-2 "
                        f"{'ok' if chk['allclose_1e-4'] else 'FAIL'}@1e-4 {chk['max_abs_diff']:.1e}")
            sp = lambda v: f"{v:.3f}" if v else "-"  # noqa: E731
            lines.append(
                f"{r['name']:<26} {_fmt_time(kb['mean_ms']) + ' +- ' + _fmt_time(kb['std_ms']):>22} "
                f"{_fmt_time(kb['min_ms']) + '..' + _fmt_time(kb['max_ms']):>22} "
                f"{rtxt:>24} "
                f"{gtxt:>10} {sp(r['speedup_vs_eager']):>8} {sp(r['speedup_vs_compiled']):>7} "
                f"{ach:>12} {r['pct_of_ceiling']:>5.1f}% {ctxt}")
        lines.append("check: output vs the reference eager (model rows) or the eager tail (tail rows): "
                     "bits== bitwise equal; ok / FAIL = allclose at 1e-4 (KernelBench fp32), max |diff|")
        if any(r["name"] == "ModelNewColsum" for r in rows):
            lines.append("ModelNewColsum (--colsum): the column-sum rewrite, not bit-exact by design; "
                         "allclose shown at 1e-2 and 1e-4; its TFLOP/s count 2*B*I flops")
        lines.append("model rows: % of fp32 GEMM ceiling (2*B*I*H flops); tail rows: % of read "
                     "ceiling (B*H*4 read + B*4 written). * marks each row's primary time (the graph "
                     f"median for launch-bound rows, up to {LAUNCH_BOUND_BYTES // MiB} MiB read), which the "
                     "speedups and the roofline columns use.")
    if result.get("breakdown"):
        lines += ["", "breakdown: " + result["breakdown"]["statement"]]
        paired = result["breakdown"].get("paired")
        if paired:
            lines.append(f"paired ({paired['rounds']} interleaved rounds, median of per-round differences):")
            for group in ("vs_matmul", "vs_reference_eager"):
                for name, st in paired[group].items():
                    lines.append(f"  {name:<45} {_fmt_time(st['median_ms']):>10}  [IQR {_fmt_time(st['iqr_ms'])}]")
    sw = result.get("sweep")
    if sw:
        names = sorted({k for p in sw["points"] for k in p["variants"]},
                       key=["ours", "eager", "compiled"].index)
        hdr = f"{'batch':>6} {'hidden':>6} {'MiB':>8} " + " ".join(
            f"{n + ' time':>11} {'%rd':>5} {'bits':>4}" for n in names) + f" {'x eager':>8} {'x comp':>7} method"
        lines += ["", "sweep (tail only)", hdr, "-" * len(hdr)]
        for p in sw["points"]:
            cells = []
            for n in names:
                v = p["variants"][n]
                pct = v.get("pct_of_read_ceiling")
                bits = {True: "==", False: "!="}.get(v.get("bits_equal_eager"), "-")
                cells.append(f"{_fmt_time(v.get('time_ms')):>11} {(f'{pct:.0f}' if pct else '-'):>5} {bits:>4}")
            sp = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
            lines.append(f"{p['batch']:>6} {p['hidden']:>6} {p['bytes'] / MiB:>8.3f} " + " ".join(cells)
                         + f" {sp(p['speedup_vs_eager']):>8} {sp(p.get('speedup_vs_compiled')):>7} "
                         f"{p['variants']['ours'].get('method', '-')}")
    return "\n".join(lines)


def write_plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    sw = result.get("sweep")
    if sw and sw["points"]:
        p = result["params"]
        series = {
            f"batch (hidden={p['hidden']})": [q for q in sw["points"] if q["hidden"] == p["hidden"]],
            f"hidden (batch={p['batch']})": [q for q in sw["points"] if q["batch"] == p["batch"]],
        }
        fig, axes = plt.subplots(2, 2, figsize=(13, 9))
        for col, (label, pts) in enumerate(series.items()):
            key = "batch" if label.startswith("batch") else "hidden"
            pts = sorted(pts, key=lambda q: q[key])
            xs = [q[key] for q in pts]
            ax = axes[0][col]
            for base in ("eager", "compiled"):
                ys = [q.get(f"speedup_vs_{base}") for q in pts]
                if any(ys):
                    ax.plot(xs, [v if v else float("nan") for v in ys], marker="o", label=f"ours vs {base}")
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set(xscale="log", xlabel=label, ylabel="speedup", title=f"tail speedup vs {key}")
            ax.legend()
            ax = axes[1][col]
            for name in ("ours", "eager", "compiled"):
                ys = [q["variants"].get(name, {}).get("pct_of_read_ceiling") for q in pts]
                if any(ys):
                    ax.plot(xs, [v if v else float("nan") for v in ys], marker="o", label=name)
            ax.set(xscale="log", xlabel=label, ylabel="% of read ceiling",
                   title=f"tail % of {result['ceilings']['read_gbps']:.0f} GB/s read ceiling")
            ax.set_ylim(bottom=0)
            ax.legend()
    else:
        rows = [r for r in result["rows"] if r.get("time_ms")]
        fig, axes = plt.subplots(1, 2, figsize=(13, 5))
        names = [r["name"] for r in rows]
        axes[0].barh(names, [r["time_ms"] for r in rows])
        axes[0].set(xscale="log", xlabel="median time (ms, log)", title="default rows")
        axes[1].barh(names, [r["pct_of_ceiling"] or 0 for r in rows],
                     color=["C0" if r["kind"] == "model" else "C1" for r in rows])
        axes[1].axvline(100.0, color="grey", lw=0.8)
        axes[1].set(xlabel="% of ceiling (model: fp32 GEMM, tail: read)", title="% of roofline")
        for ax in axes:
            ax.invert_yaxis()
    m = result["meta"]
    fig.suptitle(f"KernelBench L2/14 on {m['gpu'] or m['cpu']}, torch {m['torch']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------
# Command line.
# --------------------------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench.py",
        description="Time KernelBench L2/14 (reference eager, compiled, ModelNew, candidates, the tail "
                    "alone) with KernelBench's method and a robust one, beside measured ceilings.")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                   help="auto: cuda when a GPU is visible, else cpu (host timers)")
    p.add_argument("--model", action="append", metavar="MODULE:CLASS",
                   help="a candidate to time too: dotted module or path/to/file.py, then :Class; repeatable")
    p.add_argument("--batch", type=int, default=reference.batch_size)
    p.add_argument("--input", type=int, default=reference.input_size)
    p.add_argument("--hidden", type=int, default=reference.hidden_size)
    p.add_argument("--scaling-factor", type=float, default=reference.scaling_factor)
    p.add_argument("--repeats", type=int, default=None,
                   help="calls of the robust method (default: cuda up to 1000 within 1 s per row, "
                        f"200 per sweep variant; cpu {CPU_REPEATS})")
    p.add_argument("--kb-trials", type=int, default=None,
                   help=f"KernelBench-method trials (default cuda {KB_TRIALS}, cpu {CPU_KB_TRIALS})")
    p.add_argument("--kb-warmup", type=int, default=None,
                   help=f"KernelBench-method warm-up calls (default cuda {KB_WARMUP}, cpu {CPU_KB_WARMUP})")
    p.add_argument("--sweep", action="store_true", help="also sweep the tail over batch and hidden sizes")
    p.add_argument("--sweep-only", action="store_true", help="the sweep and the ceilings, no default rows")
    p.add_argument("--sweep-batches", type=_int_list, default=None, metavar="N,N,...",
                   help="batch sizes of the sweep (default: 1..16384 powers of 2 and 3,100,1000,5000)")
    p.add_argument("--sweep-hiddens", type=_int_list, default=None, metavar="N,N,...",
                   help="hidden sizes of the sweep (default: 128..65536 powers of 2 and 129,1000,3000,10007)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads for CPU runs (default: torch's choice)")
    p.add_argument("--colsum", action="store_true",
                   help="also time modelnew:ModelNewColsum (the column-sum rewrite: not bit-exact, "
                        "checked at 1e-2)")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    p.add_argument("--no-graph", action="store_true", help="skip CUDA-graph replay timing")
    p.add_argument("--fast-ceilings", action="store_true",
                   help="small ceilings, 2 calls each: placeholders, for tests only")
    p.add_argument("--json", metavar="PATH", help="write the full result here")
    p.add_argument("--plot", metavar="PATH", help="write a PNG here (needs matplotlib)")
    p.add_argument("--from-json", metavar="PATH",
                   help="run nothing: print the table of a saved --json file (and --plot it)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its message
        return int(exc.code or 0)
    try:
        for name in ("repeats", "kb_trials"):
            if getattr(args, name) is not None and getattr(args, name) < 1:
                raise BenchError(f"--{name.replace('_', '-')} must be at least 1")
        if args.kb_warmup is not None and args.kb_warmup < 0:
            raise BenchError("--kb-warmup must be 0 or more")
        if args.plot and importlib.util.find_spec("matplotlib") is None:
            raise BenchError("--plot needs matplotlib, which is not installed "
                             "(pip install matplotlib), or drop --plot")
        for path in (args.json, args.plot):
            if path and not Path(path).expanduser().resolve().parent.is_dir():
                raise BenchError(f"cannot write {path!r}: its folder does not exist")
        if args.from_json:  # re-print / re-plot a saved run (say, fetched from the GPU machine)
            try:
                result = json.loads(Path(args.from_json).read_text())
            except (OSError, ValueError) as exc:
                raise BenchError(f"--from-json {args.from_json!r}: {exc}") from None
            if result.get("schema") != SCHEMA:
                raise BenchError(f"--from-json {args.from_json!r}: not a {SCHEMA} file")
        else:
            result = run_bench(args)
    except BenchError as exc:
        print(f"bench.py: error: {exc}", file=sys.stderr)
        return 2
    print(format_table(result))
    if args.json and not args.from_json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        log(f"wrote {args.json}")
    if args.plot:
        write_plot(result, args.plot)
        log(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
