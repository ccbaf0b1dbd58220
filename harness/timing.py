"""Timing on a GPU or a CPU: KernelBench's method, a robust median, CUDA-graph replay.

Each primitive takes its synchronize / flush / timer as parameters (or a `Backend` that
holds them), so the loops can be tested on the CPU with fakes; `make_backend` builds
the real ones.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

MiB = 1024**2


GiB = 1024**3

# KernelBench's timing parameters (src/kernelbench/timing.py, its scripts).
KB_WARMUP = 3


KB_TRIALS = 100


CUDA_FLUSH_BYTES = 256 * MiB  # KernelBench fills a (32, 1024, 1024) int64 tensor: 256 MiB


CPU_FLUSH_BYTES = 64 * MiB  # larger than any server CPU's last-level cache slice we meet

# GPU cycles the CUDA read flush spins before it reads (about 130 us at the H200's
# 1.98 GHz): longer than any host path per call met here (Inductor's compiled tail: 40-80 us).
CUDA_SPACER_CYCLES = 1 << 18

# CPU defaults: a default CPU run must finish in about a minute on 2 cores, where one
# forward of the full-size model (137 GFLOP) takes ~1.5 s.
CPU_KB_WARMUP = 1


CPU_KB_TRIALS = 3


CPU_REPEATS = 3


def format_ms(ms: float | None) -> str:
    """A time in milliseconds for a table: "1.234 ms", "56.78 us", or "-" when absent."""
    if ms is None:
        return "-"
    if abs(ms) >= 1.0:
        return f"{ms:.3f} ms"
    return f"{ms * 1e3:.2f} us"


class BenchError(Exception):
    """A problem with the arguments or the machine: reported in one line, exit code 2."""


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


def noop() -> None:
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
    # The robust method's flush. On CUDA it evicts the cache by reading (behind a spin that
    # keeps the GPU ahead of the host: make_backend): that leaves only clean lines behind,
    # where the write flush leaves dirty ones whose write-back overlaps the next timed
    # call and makes a ~10 us kernel's time vary run to run.
    robust_flush: Callable[[], Any]


def make_backend(device: torch.device, flush_bytes: int | None = None) -> Backend:
    """The real timers and flush for `device`. The flush buffer is allocated once: the
    write of `flush_bytes` is what evicts the cache, as in KernelBench's fill_()."""
    if device.type == "cuda":
        nbytes = CUDA_FLUSH_BYTES if flush_bytes is None else flush_bytes
        buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

        def sync() -> None:
            torch.cuda.synchronize(device)

        def read_flush() -> torch.Tensor:
            # Queued calls are timed by events that run when the GPU reaches them: a caller
            # whose host work per call outlasts the flush's ~60 us lets the queue drain, and
            # its events then time the host too (Inductor's tail at 1024 x 8192 read 50-95 us
            # for an 11 us kernel). The spin keeps the GPU ahead.
            torch.cuda._sleep(CUDA_SPACER_CYCLES)
            return buf.max()

        return Backend(device, "cuda-events", sync, buf.zero_, CudaEventTimer, nbytes, robust_flush=read_flush)
    nbytes = CPU_FLUSH_BYTES if flush_bytes is None else flush_bytes
    buf = torch.empty(nbytes // 4, dtype=torch.int32)
    return Backend(device, "host-perf_counter", noop, buf.zero_, lambda: HostTimer(noop), nbytes,
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


def stats_mean(times: Sequence[float]) -> dict:
    # KernelBench reports np.mean / np.std (population std), min and max.
    return {
        "mean_ms": statistics.fmean(times),
        "std_ms": statistics.pstdev(times) if len(times) > 1 else 0.0,
        "min_ms": min(times),
        "max_ms": max(times),
    }


def stats_median(times: Sequence[float]) -> dict:
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
    return {**stats_mean(times), "trials": trials, "warmup": warmup, "times_ms": times}


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
    return {**stats_median(times), "calls": calls, "warmup": warmup}


def paired_time(fns: dict, *, rounds: int, backend: Backend, first_round: int = 0) -> dict:
    """Each function once per round, in turn (round_order), each after a cache flush:
    per-function times (ms) taken side by side. The GEMM's time drifts by tens of microseconds
    between runs; interleaving makes the differences between rows immune to that drift,
    so they can resolve a ~10 us tail under a 2.7 ms GEMM. `first_round`: where in
    round_order's sequence these rounds start (calls split into blocks continue it)."""
    times = {name: [] for name in fns}
    for r in range(first_round, first_round + rounds):
        for name in round_order(list(fns), r):
            times[name].append(_timed_call(fns[name], (), backend.sync, backend.flush, backend.new_timer))
    return times


def round_order(names: Sequence, r: int) -> list:
    """Round r's order of `names` when functions are timed in turn: a balanced Latin square
    (Williams'), so that over n rounds (2n for an odd count n) each function takes each place
    equally often and follows each other function equally often. A call can inherit its
    predecessor's state (an idle GPU behind a host-bound call, measured at 0.2 us on a
    120 us call): a plain rotation keeps every function behind
    the same neighbour and turns that into a bias."""
    n = len(names)
    row = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]  # 0, 1, n-1, 2, n-2, ...
    k = r % (n if n % 2 == 0 else 2 * n)
    order = [names[(i + k) % n] for i in row]
    return order if k < n else order[::-1]


def interleaved_robust_time(fns: dict, args: Sequence = (), *, rounds: int, backend: Backend,
                            first_round: int = 0) -> dict:
    """robust_time's read-flush calls for several functions, taken in turn: each round
    calls every function once (each after a read flush, in round_order's order),
    all queued without a host synchronize. Drift of the clocks or the memory state then
    hits every function alike, so per-round differences (paired_differences) resolve gaps
    that timing one function after another confounds with drift. Milliseconds per call.
    `first_round` as in paired_time."""
    for fn in fns.values():  # warm-up
        backend.robust_flush()
        fn(*args)
    backend.sync()
    return calls_in_turn(fns, args, rounds=rounds, new_timer=backend.new_timer, sync=backend.sync,
                         before_each=backend.robust_flush, first_round=first_round)


def calls_in_turn(fns: dict, args: Sequence = (), *, rounds: int, new_timer: Callable, sync: Callable,
                  before_each: Callable = noop, first_round: int = 0) -> dict:
    """Each round calls every function once, in round_order's order, each after before_each()
    and timed alone by new_timer(); all queued without a host synchronize but every 50
    rounds (to bound the queue). Milliseconds per call, {name: [one per round]}."""
    names = list(fns)
    timers = {name: [] for name in names}
    for r in range(first_round, first_round + rounds):
        for name in round_order(names, r):
            before_each()
            timer = new_timer()
            timer.start()
            fns[name](*args)
            timer.stop()
            timers[name].append(timer)
        if r % 50 == 49:
            sync()
    sync()
    return {name: [t.elapsed_ms() for t in ts] for name, ts in timers.items()}


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median of `values`: the k-th smallest
    and k-th largest value, k the largest rank at which each tail holds at most (1 -
    confidence) / 2 of a binomial(n, 1/2). A paired difference whose interval excludes 0 is a
    gap, not drift. Below 6 values no such k exists and the whole range is returned (its
    coverage is 1 - 2^(1-n): 94% at 5 values)."""
    xs = sorted(values)
    n = len(xs)
    tail = (1.0 - confidence) / 2
    k, below = 0, 0.0  # below: P(binomial(n, 1/2) <= k - 1)
    while k < n // 2:
        below_next = below + math.comb(n, k) / 2 ** n
        if below_next > tail:
            break
        k, below = k + 1, below_next
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def paired_differences(times: dict, base: str) -> dict:
    """Median, IQR and the median's 95% interval (median_interval) of each row's per-round
    difference from `base`, in ms."""
    out = {}
    for name, t in times.items():
        if name != base:
            diffs = [a - b for a, b in zip(t, times[base])]
            out[f"{name} - {base}"] = {**stats_median(diffs), "ci95_ms": list(median_interval(diffs))}
    return out


def capture_graph(body: Callable[[], None], warmup: Callable[[], None]) -> "torch.cuda.CUDAGraph":
    """A CUDA graph of body()'s work, replayed once (the first replay uploads it): warmup()
    runs first on a side stream, as capture requires, and the device is synchronized."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        warmup()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def graph_replay_ms(fn: Callable, arg_sets: Sequence[Sequence], *, calls_per_graph: int, replays: int,
                    warmup: int = 3) -> list[float]:
    """Per-call milliseconds of each replay of one CUDA graph that makes `calls_per_graph`
    calls back to back, call i on arg_sets[i % len(arg_sets)]; replays are queued and
    each is timed with CUDA events."""
    def calls(n: int) -> None:
        for i in range(n):
            fn(*arg_sets[i % len(arg_sets)])

    graph = capture_graph(lambda: calls(calls_per_graph), warmup=lambda: calls(warmup))
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
    return {**stats_median(per_call), "calls_per_graph": calls_per_graph, "replays": replays,
            "buffers": len(arg_sets), "l2_cold": l2_cold}


def l2_cache_bytes(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 0) or 50 * MiB)


def rotation_buffers(nbytes: int, l2: int, cap: int) -> int:
    """How many copies of an input make the rotation exceed 2x L2 (at least 2)."""
    if l2 <= 0:
        return 1
    return max(2, min(cap, math.ceil(2 * l2 / max(nbytes, 1)) + 1))


def rotating_copies(t: torch.Tensor, l2: int, cap: int) -> list[torch.Tensor]:
    """`t` and clones of it, together over twice the L2 (see rotation_buffers)."""
    k = rotation_buffers(t.numel() * t.element_size(), l2, cap)
    return [t] + [t.clone() for _ in range(k - 1)]
