"""The fused tail against Inductor's compiled tail, the eager tail and torch.sum.

Writes `vs_inductor.json` and `vs_inductor.md` into --out: for each shape and dtype,
the bits of ours and of Inductor's against eager (torch.equal), and the time of each
under four methods and three of them again taken in turn, all in one process:

* kernelbench: KernelBench's "cuda_event" timing (3 warm-ups; per trial synchronize,
  write 256 MB to flush L2, CUDA events around one call; median of 100 reported,
  mean kept too). The host's time per call shows where it exceeds the GPU's.
* do_bench: triton.testing.do_bench (calls queued back to back, each after a 256 MB
  write flush; median), the GPU time with the host hidden behind the flush.
* read_flush: bench.py's robust method (one call after a 256 MB read flush, median).
* rotating: CUDA-graph replay of calls back to back over L2-cold copies (median).
* kernelbench_interleaved, read_flush_interleaved, do_bench_interleaved: the single-call
  methods again (tail_variants.single_calls_in_turn), with the four functions called in
  turn, round by round in a balanced order (timing.round_order: each follows each other
  equally often; each call still after its own flush, timed alone; do_bench the median of
  its medians), so that the clock and memory drift of a sequential run, which moves a
  ~10 us kernel by several percent, hits all four alike: one do_bench after another put
  ours 3-9% behind at 1024 x 8192 fp32 where taken in turn the two tied
  (results/kernel_notes.md). The rounds come in PASSES passes over every point, spread
  over the run: one block of rounds put ours 0.86 us behind and, seconds later on the same
  values, 0.67 ahead (bf16 16384 x 8192), a drift between
  blocks that rounds within one block do not see. Each of those rows also gives ours
  minus Inductor round by round, pooled over the passes: the median difference, its
  distribution-free 95% interval (timing.median_interval), each pass's median, and a
  verdict (behind or ahead where the interval excludes 0).

"peers" times every reader of the same bytes that a floor claim must beat, one call each
after a read flush, in turn (PEER_POINTS): ours, ours unwarmed, Inductor's tail (default and
tuned), ATen's row sum, cuBLAS's product with ones, an order-free read and an empty kernel.
With Nsight Compute on the PATH it also profiles 1024 x 8192 fp32 (ours, Inductor's default
tail, ATen's and cuBLAS's kernels, the order-free read and the empty kernel) and stores the
durations under "ncu". "host_us" holds the host time per
call of back-to-back calls on tiny inputs (rounds of 2000 calls of each function in turn;
the median round).

    KB14_GIT_COMMIT=<sha> python scripts/vs_inductor.py --out results
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
from harness import machine, timing  # noqa: E402
import kernels  # noqa: E402
from kernels.jit import torch_order  # noqa: E402
import tail_variants  # noqa: E402
from tail_variants import eager_tail, read_ceiling_gbps, row_sum, single_calls_in_turn, time_methods  # noqa: E402

SHAPES = [(128, 8192), (1024, 8192), (4096, 8192), (16384, 8192), (1024, 65536), (8192, 1024), (1000, 8191),
          (3, 200003)]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
METHODS = ("kernelbench", "do_bench", "read_flush", "rotating")
INTERLEAVED = ("kernelbench_interleaved", "read_flush_interleaved", "do_bench_interleaved")
ROUNDS = 200  # per point, over all passes
DO_BENCH_ROUNDS = 8
PASSES = 4
HOST_ROUNDS = 9


def ours(y):
    return kernels.div_sum_scale(y, 2, 1.5)


def compiled_tail(**options):
    """Inductor's compiled eager tail under a code object of its own: Dynamo keeps compiled
    entries per code object and checks their guards in turn on every call, so one compiled
    function for all 24 points would charge each call the other points' guards. `options`:
    Inductor's, as torch.compile takes them."""
    fresh = types.FunctionType(eager_tail.__code__.replace(), eager_tail.__globals__, eager_tail.__name__)
    return torch.compile(fresh, dynamic=False, options=options or None)


# Inductor at its most thorough: every config its autotuner knows, then a coordinate descent
# over block sizes and warps from the best.
INDUCTOR_TUNED = {"max_autotune": True, "coordinate_descent_tuning": True}


def in_turn_pass(fns: dict, y: torch.Tensor, backend, p: int, passes: int) -> dict:
    """Pass p of `passes` over the single-call methods taken in turn (2 warm-ups each): its
    share of ROUNDS and DO_BENCH_ROUNDS, continuing round_order's balanced sequence where pass
    p - 1 left it. {method: {name: [ms]}}."""
    for fn in fns.values():
        for _ in range(2):
            fn(y)
    backend.sync()
    return single_calls_in_turn(fns, y, backend, flush_rounds=ROUNDS // passes, kernelbench_rounds=ROUNDS // passes,
                                do_bench_rounds=DO_BENCH_ROUNDS // passes, block=p)


def pooled_in_turn(passes: list, ours: str = "ours", peer: str = "inductor") -> tuple[dict, dict]:
    """in_turn_pass results pooled, keyed `<method>_interleaved`: the median microseconds per
    function, and fns[ours] minus fns[peer] round by round (its median, the median's 95%
    interval, the rounds, and each pass's median)."""
    methods = list(passes[0])
    names = list(passes[0][methods[0]])
    pooled = {m: {name: [t for one in passes for t in one[m][name]] for name in names} for m in methods}
    medians = {name: {f"{m}_interleaved": statistics.median(pooled[m][name]) * 1e3 for m in methods} for name in names}

    def ours_minus_peer(times: dict) -> dict:
        return timing.paired_differences({ours: times[ours], peer: times[peer]}, peer)[f"{ours} - {peer}"]

    gaps = {}
    for m in methods:
        gap = ours_minus_peer(pooled[m])
        gaps[f"{m}_interleaved"] = {"median": gap["median_ms"] * 1e3, "ci95": [v * 1e3 for v in gap["ci95_ms"]],
                                    "rounds": len(pooled[m][ours]),
                                    "pass_medians": [ours_minus_peer(one[m])["median_ms"] * 1e3 for one in passes]}
    return medians, gaps


def interleaved_times(fns: dict, y: torch.Tensor, backend, ours: str = "ours",
                      peer: str = "inductor") -> tuple[dict, dict]:
    """The single-call methods taken in turn for one point, in one pass: pooled_in_turn's
    medians and gaps."""
    return pooled_in_turn([in_turn_pass(fns, y, backend, 0, 1)], ours, peer)


def gap_verdict(gap: dict) -> str:
    """Where ours stands against Inductor by the paired differences' 95% interval."""
    lo, hi = gap["ci95"]
    return "behind" if lo > 0 else "ahead" if hi < 0 else "tie"


def gap_text(gap: dict, sep: str = " ") -> str:
    """`median [lo, hi]` (and the passes' medians), sep, the verdict: one paired gap as the
    tables print it."""
    passes = f" (passes {' '.join(f'{v:+.2f}' for v in gap['pass_medians'])})" if len(gap.get("pass_medians", [])) > 1 else ""
    return f"{gap['median']:+.2f} [{gap['ci95'][0]:+.2f}, {gap['ci95'][1]:+.2f}]{passes}{sep}{gap_verdict(gap)}"


@torch.no_grad()  # KernelBench's protocol; with grad on, ModelNewColsum recomputes its column sum
def host_times() -> dict:
    """Microseconds of host time per call, back-to-back calls on tiny CUDA inputs."""
    from modelnew import ModelNewColsum

    # A module still building in the background (the C++ autograd, on a first use) would
    # both send calls through its Python stand-in and compete for the CPU: wait for it.
    kernels.jit.load_finished_builds(wait=True)

    y = torch.randn(4, 256, device="cuda")
    torch.manual_seed(0)
    model = ModelNewColsum(256, 64, 1.5).cuda()
    x = torch.randn(4, 256, device="cuda")
    c = torch.randn(256, device="cuda")
    op = torch.ops.kb14.div_sum_scale.default
    # Inductor's compiled tail, compiled for this input alone: its wrapper's host time is what
    # makes its single calls host-bound in some processes (the tables' rows far above ours).
    compiled = torch.compile(eager_tail, dynamic=False)
    fns = {"torch.sum": lambda: torch.sum(y, 1), "div_sum_scale": lambda: kernels.div_sum_scale(y, 2, 1.5),
           "torch.ops.kb14.div_sum_scale": lambda: op(y, 2.0, 1.5), "eager tail": lambda: eager_tail(y),
           "Inductor's compiled tail": lambda: compiled(y),
           "ModelNewColsum(x)": lambda: model(x), "ModelNewColsum.forward": lambda: model.forward(x),
           "torch.mv": lambda: torch.mv(x, c)}
    for fn in fns.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    # Rounds of 2000 calls of each function in turn (timing.round_order), so that the
    # host's drift over the run hits every function alike; the median round per function.
    names = list(fns)
    samples = {name: [] for name in names}
    for r in range(HOST_ROUNDS):
        for name in timing.round_order(names, r):
            fn = fns[name]
            t0 = time.perf_counter()
            for _ in range(2000):
                fn()
            samples[name].append((time.perf_counter() - t0) / 2000 * 1e6)
            torch.cuda.synchronize()
    return {name: statistics.median(v) for name, v in samples.items()}


@torch.no_grad()  # KernelBench's protocol; with grad on, ModelNewColsum recomputes its column sum
def colsum_forward_rows(backend, l2) -> list[dict]:
    """ModelNewColsum's forward against Inductor's compiled `x @ colsum * 0.75` at the
    KernelBench size (both read the 32 MiB x once)."""
    from modelnew import ModelNewColsum

    torch.manual_seed(42)
    model = ModelNewColsum(8192, 8192, 1.5).cuda()
    x = torch.rand(1024, 8192, device="cuda")
    model(x)  # the column sum is computed once and cached
    colsum32 = model.weight.detach().sum(0)
    compiled = torch.compile(lambda t: (t @ colsum32 * 0.75).unsqueeze(1), dynamic=False)
    compiled(x)
    copies = timing.rotating_copies(x, l2, cap=64)
    ours_name, peer_name = "ModelNewColsum.forward", "inductor x @ colsum"
    fns = {ours_name: model, peer_name: compiled, "torch.mv": lambda t: torch.mv(t, colsum32)}
    together, gaps = interleaved_times(fns, x, backend, ours=ours_name, peer=peer_name)
    rows = []
    for name, fn in fns.items():
        t = {**time_methods(fn, x, copies, backend), **together[name]}
        rows.append({"what": name, "shape": [1024, 8192], **{m: t[m] for m in METHODS + INTERLEAVED}})
        if name == ours_name:
            rows[-1]["minus_inductor_us"] = gaps
    return rows


# The readers of a point's bytes that a floor claim must beat, taken in turn after a read
# flush in one process: ours and the same plan unwarmed, Inductor's tail (also
# tuned: INDUCTOR_TUNED), ATen's row sum, cuBLAS's product with a vector of ones, a read of
# the bytes in any order and an empty kernel on the rows' grid (tail_variants' variants
# library_unwarmed, unordered_read and empty_kernel).
PEER_POINTS = (((1024, 8192), "float32"), ((1000, 8191), "float32"), ((1024, 65536), "bfloat16"),
               ((1024, 65536), "float16"))
PEER_ROUNDS = 400  # per point, over PASSES passes
TAIL_VARIANTS_DIR = Path("/tmp/kb14_vs_inductor")


def gemv_with_ones(cols: int, dtype, device):
    """cuBLAS's matrix-vector product of y with ones (torch.mv): a library's one read of y."""
    ones = torch.ones(cols, dtype=dtype, device=device)
    return lambda y: torch.mv(y, ones)


PEER_VARIANTS = {"ours_unwarmed": "library_unwarmed", "unordered_read": "unordered_read", "empty": "empty_kernel"}


def variant_readers(y: torch.Tensor, variants: dict = PEER_VARIANTS) -> dict:
    """tail_variants' variants ({label: variant name}; by default its unwarmed library plan, order-free
    read and empty kernel) as functions of a tensor of y's dtype."""
    lib = tail_variants.build(TAIL_VARIANTS_DIR, torch_order())
    prop = torch.cuda.get_device_properties(y.device)
    props = (prop.multi_processor_count, prop.max_threads_per_multi_processor, prop.major)
    partials = torch.empty(1 << 20, device=y.device)
    code = tail_variants.DTYPES[str(y.dtype).removeprefix("torch.")][1]
    return {label: tail_variants.variant_fn(lib, name, code, props, partials) for label, name in variants.items()}


def peers_part(backend, ceiling_gbps: float) -> list[dict]:
    """For each of PEER_POINTS: every reader's median after a read flush, its paired difference
    from ours (median, 95% interval), its share of the read ceiling, and the tails' bits."""
    rows = []
    for (rows_, cols), dname in PEER_POINTS:
        torch.manual_seed(0)
        y = torch.randn(rows_, cols, device="cuda", dtype=DTYPES[dname])
        readers = variant_readers(y)
        fns = {"ours": ours, "ours_unwarmed": readers["ours_unwarmed"], "inductor": compiled_tail(),
               "inductor_tuned": compiled_tail(**INDUCTOR_TUNED), "torch_sum": row_sum,
               "cublas_gemv": gemv_with_ones(cols, y.dtype, y.device), "unordered_read": readers["unordered_read"],
               "empty": readers["empty"]}
        ref = eager_tail(y)
        bits = {k: bool(torch.equal(fns[k](y), ref)) for k in ("ours", "ours_unwarmed", "inductor", "inductor_tuned")}
        for fn in fns.values():
            for _ in range(2):
                fn(y)
        backend.sync()
        per_pass = PEER_ROUNDS // PASSES
        times = {k: [] for k in fns}
        for p in range(PASSES):
            one = timing.interleaved_robust_time(fns, (y,), rounds=per_pass, backend=backend, first_round=p * per_pass)
            for k in fns:
                times[k] += one[k]
        diffs = timing.paired_differences(times, "ours")
        nbytes = y.numel() * y.element_size()
        rows.append({"shape": [rows_, cols], "dtype": dname, "bytes": nbytes, "rounds": len(times["ours"]),
                     "bits": bits,
                     "us": {k: statistics.median(v) * 1e3 for k, v in times.items()},
                     "minus_ours_us": {k: {"median": d["median_ms"] * 1e3, "ci95": [v * 1e3 for v in d["ci95_ms"]]}
                                       for k in fns if (d := diffs.get(f"{k} - ours"))}})
        rows[-1]["pct_of_ceiling"] = {k: nbytes / (us * 1e-6) / 1e9 / ceiling_gbps * 100
                                      for k, us in rows[-1]["us"].items() if k != "empty"}
        print(f"peers {rows_}x{cols} {dname}: " + " ".join(f"{k} {v:.2f}" for k, v in rows[-1]["us"].items()),
              flush=True)
    return rows


NCU_ROUNDS = 7


def ncu_target(shape=(1024, 8192), rounds: int = NCU_ROUNDS) -> None:
    """What `--ncu` profiles: the candidates in turn, `rounds` rounds, in a
    cudaProfilerStart/Stop range. `--ncu-target ROWSxCOLS ROUNDS` profiles another fp32 shape
    (a run of ncu by hand, for its other sections)."""
    y = torch.randn(*shape, device="cuda")
    readers = variant_readers(y)
    compiled = torch.compile(eager_tail, dynamic=False)
    fns = {"ours": ours, "inductor": compiled, "torch_sum": row_sum,
           "cublas_gemv": gemv_with_ones(shape[1], y.dtype, y.device), "empty": readers["empty"],
           "unordered_read": readers["unordered_read"]}
    for fn in fns.values():
        fn(y)
        fn(y)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(rounds):  # in turn, so that any drift over the run hits all alike
        for fn in fns.values():
            fn(y)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def run_ncu() -> dict | None:
    metrics = ("gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,"
               "smsp__inst_executed.sum")
    cmd = ["ncu", "--clock-control", "none", "--cache-control", "all", "--profile-from-start", "off", "--metrics",
           metrics, sys.executable, str(Path(__file__).resolve()), "--ncu-target"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    kinds = {"lean_rows_kernel": "ours", "split_row_kernel": "ours", "triton_": "inductor",
             "empty_kernel": "empty", "unordered_read_kernel": "unordered_read", "reduce_kernel": "torch_sum",
             "gemv": "cublas_gemv", "internal::kernel<": "cublas_gemv"}
    found: dict[str, list[dict]] = {}
    for block in re.split(r"\n  (?=\S)", proc.stdout):
        name = block.split("(")[0].strip()
        kind = next((k for key, k in kinds.items() if key in name), f"other: {name[:60]}" if name else None)
        values = dict(re.findall(r"(gpu__time_duration\.sum|dram__throughput\.avg\.pct_of_peak_sustained_elapsed|"
                                 r"launch__registers_per_thread|smsp__inst_executed\.sum)\s+\S*\s+([\d.,]+)", block))
        if kind and values:
            found.setdefault(kind, []).append({"kernel": name[:80], **{k: float(v.replace(",", ""))
                                                                      for k, v in values.items()}})
    summary = {k: {"duration_us_median": statistics.median(r["gpu__time_duration.sum"] for r in v),
                   "dram_pct_median": statistics.median(r["dram__throughput.avg.pct_of_peak_sustained_elapsed"]
                                                        for r in v),
                   "duration_us_range": [min(r["gpu__time_duration.sum"] for r in v),
                                         max(r["gpu__time_duration.sum"] for r in v)],
                   "instructions": v[0].get("smsp__inst_executed.sum"),
                   "registers": v[0]["launch__registers_per_thread"], "kernel": v[0]["kernel"], "runs": len(v)}
               for k, v in found.items()}
    if not summary:
        return {"error": (proc.stdout + proc.stderr)[-2000:]}
    return {"shape": [1024, 8192], "dtype": "float32", "command": " ".join(cmd[:9]) + " ...", **summary}


def markdown(result: dict) -> str:
    lines = [f"# The tail against Inductor ({result['gpu']}, torch {result['torch']}, commit {result['commit']})", "",
             "Times in microseconds, medians; `bits` says whether the result equals the eager tail's bit for bit.",
             f"Read ceiling (torch.sum of 2 GiB fp32) in the same run: {result['read_ceiling_gbps']:.0f} GB/s.", ""]
    for method in METHODS + INTERLEAVED:
        if not any(r["method"] == method for r in result["rows"]):
            continue
        paired = any("ours_minus_inductor_us" in r for r in result["rows"] if r["method"] == method)
        extra = " ours - Inductor, paired: median [95% interval] | verdict |" if paired else ""
        lines += [f"## {method}", ""]
        if paired:
            lines += ["Ours minus Inductor round by round: the median difference and its 95% interval "
                      "(distribution-free); `behind` or `ahead` where the interval excludes 0, else `tie`.", ""]
        lines += ["| shape | dtype | ours | Inductor | eager | torch.sum | ours / Inductor | "
                  "bits ours | bits Inductor | ours, % of read ceiling |" + extra, "|" + " --- |" * (12 if paired else 10)]
        for r in result["rows"]:
            if r["method"] != method:
                continue
            pct = r["bytes"] / (r["ours_us"] * 1e-6) / 1e9 / result["read_ceiling_gbps"] * 100
            line = (f"| {r['shape'][0]} x {r['shape'][1]} | {r['dtype']} | {r['ours_us']:.2f} | "
                    f"{r['inductor_us']:.2f} | {r['eager_us']:.2f} | {r['torch_sum_us']:.2f} | "
                    f"{r['ours_us'] / r['inductor_us']:.3f} | {r['bits_ours']} | {r['bits_inductor']} | "
                    f"{pct:.0f}% |")
            if paired:
                line += f" {gap_text(r['ours_minus_inductor_us'], ' | ')} |"
            lines.append(line)
        lines.append("")
    if result.get("ncu"):
        runs = next((v["runs"] for v in result["ncu"].values() if isinstance(v, dict) and "runs" in v), 0)
        lines += [f"## Nsight Compute, 1024 x 8192 fp32 (kernel duration, median and range of {runs}, taken in turn)",
                  "", "| kernel | duration us | range | DRAM % of peak | registers | instructions |",
                  "|" + " --- |" * 6]
        for k, v in result["ncu"].items():
            if isinstance(v, dict) and "duration_us_median" in v:
                lo, hi = v.get("duration_us_range", [float("nan")] * 2)
                inst = f"{v['instructions'] / 1e6:.2f} M" if v.get("instructions") else "-"
                lines.append(f"| {k} (`{v['kernel'][:50]}`) | {v['duration_us_median']:.2f} | {lo:.2f}-{hi:.2f} | "
                             f"{v['dram_pct_median']:.1f} | {v['registers']:.0f} | {inst} |")
        lines.append("")
    if result.get("peers"):
        ceiling = result.get("peers_read_ceiling_gbps", result["read_ceiling_gbps"])
        names = list(result["peers"][0]["us"])
        lines += [f"## Every reader of the same bytes: one call each after a read flush, in turn "
                  f"({result['peers'][0]['rounds']} rounds; read ceiling {ceiling:.0f} GB/s)", "",
                  "us, the reader minus ours paired round by round (median [95% interval]), % of the read ceiling. "
                  "`ours_unwarmed`: the library's plan without the warming gate; `unordered_read`: the bytes "
                  "summed in any order; `empty`: a kernel on the rows' grid that reads nothing.", "",
                  "| reader | " + " | ".join(f"{r['shape'][0]} x {r['shape'][1]} {r['dtype']}"
                                              for r in result["peers"]) + " |",
                  "|" + " --- |" * (len(result["peers"]) + 1)]
        for name in names:
            cells = []
            for r in result["peers"]:
                gap = r["minus_ours_us"].get(name)
                pct = r["pct_of_ceiling"].get(name)
                cells.append(f"{r['us'][name]:.2f}" + (f" ({gap['median']:+.2f} [{gap['ci95'][0]:+.2f}, "
                                                       f"{gap['ci95'][1]:+.2f}])" if gap and name != "ours" else "")
                             + (f", {pct:.1f}%" if pct else ""))
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    if result.get("colsum_forward"):
        methods = [m for m in METHODS + INTERLEAVED if m in result["colsum_forward"][0]]
        lines += ["## ModelNewColsum's forward, 1024 x 8192 fp32, under torch.no_grad() (column sum cached)", "",
                  "| what | " + " | ".join(methods) + " |", "|" + " --- |" * (len(methods) + 1)]
        for r in result["colsum_forward"]:
            lines.append(f"| {r['what']} | " + " | ".join(f"{r[m]:.2f}" for m in methods) + " |")
            if "minus_inductor_us" in r:
                gaps = r["minus_inductor_us"]
                lines.append(f"| {r['what']} minus Inductor's, paired: median [95% interval] | " +
                             " | ".join(gap_text(gaps[m]) if m in gaps else "-" for m in methods) + " |")
        lines.append("")
    lines += ["## Host time per call (us, back-to-back calls on tiny CUDA inputs, under torch.no_grad())", "",
              "| call | us |", "| --- | --- |"]
    lines += [f"| {k} | {v:.2f} |" for k, v in result["host_us"].items()]
    return "\n".join(lines) + "\n"


def point_row(dname: str, y: torch.Tensor, method: str, times: dict, bits: dict) -> dict:
    """One row of the tables: every function's time under `method` (times: {name: {method: us}})."""
    return {"shape": list(y.shape), "dtype": dname, "method": method, "bytes": y.numel() * y.element_size(),
            "ours_us": times["ours"][method], "inductor_us": times["inductor"][method],
            "eager_us": times["eager"][method], "torch_sum_us": times["torch_sum"][method],
            "bits_ours": bits["ours"], "bits_inductor": bits["inductor"]}


def write_outputs(out: Path, result: dict) -> None:
    (out / "vs_inductor.json").write_text(json.dumps(result, indent=1))
    (out / "vs_inductor.md").write_text(markdown(result))


def redo_parts(out: Path, commit_key: str, parts: dict) -> int:
    """Recompute only `parts` ({key: function returning its value}) into the JSON already in
    `out`, recording the commit that measured them under `commit_key`."""
    result = json.loads((out / "vs_inductor.json").read_text())
    result[commit_key] = machine.git_info()["commit"]
    for key, compute in parts.items():
        result[key] = compute()
    write_outputs(out, result)
    print(markdown(result)[-1500:])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results")
    parser.add_argument("--ncu-target", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--no-ncu", action="store_true")
    parser.add_argument("--extras-only", action="store_true",
                        help="redo only the column-sum and host-time parts, into the existing JSON in --out")
    parser.add_argument("--ncu-only", action="store_true",
                        help="redo only the Nsight Compute part, into the existing JSON in --out")
    parser.add_argument("--peers-only", action="store_true",
                        help="redo only the part with every reader of the same bytes, into the existing JSON in --out")
    args = parser.parse_args()
    if args.ncu_target is not None:
        shape = tuple(int(v) for v in args.ncu_target[0].split("x")) if args.ncu_target else (1024, 8192)
        ncu_target(shape, *(int(v) for v in args.ncu_target[1:2]))
        return 0
    if not torch.cuda.is_available():
        raise SystemExit("vs_inductor.py needs a CUDA GPU")
    out = Path(args.out)
    if args.ncu_only:  # before the flush buffer: the profiled process is a child
        return redo_parts(out, "ncu_commit", {"ncu": run_ncu})
    dev = torch.device("cuda")
    backend = timing.make_backend(dev)
    l2 = timing.l2_cache_bytes(dev)
    torch._dynamo.config.cache_size_limit = 64
    if args.extras_only:
        return redo_parts(out, "extras_commit", {"colsum_forward": lambda: colsum_forward_rows(backend, l2),
                                                 "host_us": host_times})
    if args.peers_only:
        ceiling = read_ceiling_gbps(dev, backend)
        return redo_parts(out, "peers_commit", {"peers_read_ceiling_gbps": lambda: ceiling,
                                                "peers": lambda: peers_part(backend, ceiling)})
    ceiling = read_ceiling_gbps(dev, backend)
    rows = []
    result = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__,
              "commit": machine.git_info()["commit"], "read_ceiling_gbps": ceiling, "rows": rows,
              "colsum_forward": None, "host_us": {}, "ncu": None}
    out.mkdir(parents=True, exist_ok=True)
    points = []  # (dtype name, y, fns, bits) of every point, kept for the passes in turn
    for dname, dtype in DTYPES.items():
        for rows_, cols in SHAPES:
            torch.manual_seed(0)
            y = torch.randn(rows_, cols, device=dev, dtype=dtype)
            ref = eager_tail(y)
            fns = {"ours": ours, "inductor": compiled_tail(), "eager": eager_tail, "torch_sum": row_sum}
            bits = {"ours": bool(torch.equal(ours(y), ref)), "inductor": bool(torch.equal(fns["inductor"](y), ref))}
            copies = timing.rotating_copies(y, l2, cap=64)
            times = {name: time_methods(fn, y, copies, backend) for name, fn in fns.items()}
            for method in METHODS:
                rows.append(point_row(dname, y, method, times, bits))
                if method == "kernelbench":
                    rows[-1]["means_us"] = {k: v["kernelbench_mean"] for k, v in times.items()}
            print(f"{rows_}x{cols} {dname}: bits ours {bits['ours']} inductor {bits['inductor']}; rotating ours "
                  f"{times['ours']['rotating']:.2f} inductor {times['inductor']['rotating']:.2f}", flush=True)
            del copies
            points.append((dname, y, fns, bits))
            write_outputs(out, result)  # after each point and part, so a run cut short keeps what it measured
    in_turn = [[] for _ in points]
    for p in range(PASSES):
        for i, (dname, y, fns, bits) in enumerate(points):
            in_turn[i].append(in_turn_pass(fns, y, backend, p, PASSES))
        print(f"pass {p + 1} of {PASSES} in turn done", flush=True)
    for (dname, y, fns, bits), passes in zip(points, in_turn):
        medians, gaps = pooled_in_turn(passes)
        for method in INTERLEAVED:
            rows.append({**point_row(dname, y, method, medians, bits), "ours_minus_inductor_us": gaps[method]})
    del points, in_turn
    write_outputs(out, result)
    parts = [("peers", lambda: peers_part(backend, ceiling)),
             ("colsum_forward", lambda: colsum_forward_rows(backend, l2)), ("host_us", host_times)]
    if not args.no_ncu:
        parts.append(("ncu", run_ncu))
    for key, part in parts:
        try:
            result[key] = part()
        except Exception as e:  # noqa: BLE001 - record it; the other parts still run
            result[key + "_error"] = f"{type(e).__name__}: {e}"
        write_outputs(out, result)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
