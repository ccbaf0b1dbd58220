"""Physical mappings of the tail against each other and against Inductor, in one process.

Builds scripts/tail_variants.cu (the library's launcher, kernels/fused_reduce*.cu, and variants behind a C ABI,
no torch headers) with nvcc, then for each shape and dtype checks every variant's bits
against the eager tail and times it three ways (bench.py's methods): KernelBench's
(write flush, events, one call), a read flush, and CUDA-graph replay over rotating
L2-cold copies. `--ncu` instead runs each once inside cudaProfilerStart/Stop, for Nsight
Compute. Its variants are exploratory (findings in results/kernel_notes.md); it stays beside
the evidence as the torch-free build of the library's launcher (build, variant_fn: order_evidence.py,
vs_inductor.py and experiments/ use them) and for gpu_evidence.sh's comparison with 39a345c.
Variants are named (VARIANTS: their index in tail_variants.cu's switch -> the name `--variants` takes).

    python scripts/tail_variants.py --out DIR [--variants library general ...]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import dataclasses
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch
import triton.testing

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from harness import timing  # noqa: E402
import kernels  # noqa: E402
from kernels.jit import torch_order  # noqa: E402

VARIANTS = {0: "general", 6: "library", 9: "empty_kernel", 10: "unordered_read", 13: "unordered_read_ef",
            14: "bulk_rows", 25: "lean_exact_rows", 26: "lean_looped", 27: "lean_warp_rows_u3", 30: "general_pdl",
            33: "warp_rows_u8_b128", 35: "warp_rows_u16_b128", 37: "lean_shallow_warp_rows",
            39: "lean_four_vector_rows", 45: "lean_two_vector_warp_rows", 46: "block_rows_u1", 47: "block_rows_u2",
            49: "library_plain_launch", 50: "split_lanes_u32", 51: "split_lanes_u16",
            52: "split_lanes_u64", 53: "split_lanes_u48", 54: "split_lanes_u64_b6",
            55: "split_lanes_u48_b8", 60: "block_rows_u4_b3", 61: "block_rows_u4_b2", 62: "block_rows_u8_b2",
            63: "lean_two_vector_block_rows", 64: "ring_rows_b1", 65: "ring_rows_b2", 66: "ring_rows_b3",
            67: "ring_rows_b4", 68: "warm_rows_1x", 69: "warm_rows_2x", 70: "warm_rows_half",
            71: "warm_rows_bulk", 72: "warm_rows_none", 73: "warm_bulk_2x", 74: "warm_bulk_ef_1x",
            75: "warm_bulk_ef_2x", 78: "warm_ahead_2x", 79: "warm_ahead_ef_2x", 80: "warm_ahead_1x",
            81: "library_unwarmed", 82: "two_rows_b4", 83: "two_rows_b3", 84: "four_rows_b2",
            85: "staged_split_lanes", 86: "split_lanes16_u8", 87: "split_lanes16_u16", 92: "library_deep16",
            93: "library_staged_1024"}
INDEX = {name: v for v, name in VARIANTS.items()}  # name -> the index kb14x_tail takes
GRID_SIZED = ("unordered_read", "unordered_read_ef")  # variants whose grid --grid-caps sets
NOT_A_TAIL = ("empty_kernel", "unordered_read", "unordered_read_ef")
DTYPES = {"float32": (torch.float32, 0), "float16": (torch.float16, 1), "bfloat16": (torch.bfloat16, 2)}
CASES = [((1024, 8192), "float32"), ((128, 8192), "float32"), ((4096, 8192), "float32"),
         ((16384, 8192), "float32"), ((1024, 65536), "float32"), ((4096, 8192), "bfloat16"),
         ((16384, 8192), "bfloat16"), ((1024, 65536), "bfloat16"), ((16384, 8192), "float16"),
         ((8192, 1024), "float32"), ((1000, 8191), "float32"), ((8192, 1024), "bfloat16"), ((1000, 8191), "bfloat16"),
         ((1000, 8191), "float16"), ((1024, 8192), "bfloat16"), ((1024, 8192), "float16"),
         ((1, 8192), "float32"), ((4, 8192), "float32"), ((8, 8192), "bfloat16"), ((1024, 128), "bfloat16"),
         ((3, 200003), "float32"), ((1, 300007), "bfloat16"),
         ((1024, 1000), "float32"), ((1024, 2048), "float32"), ((1024, 4096), "float32"), ((1024, 4096), "bfloat16"),
         ((128, 6000), "float32"), ((4096, 4096), "float32"), ((16384, 2048), "bfloat16"),
         ((4096, 4096), "bfloat16"), ((1024, 512), "float32"), ((1024, 1024), "bfloat16"), ((2048, 2048), "float16"),
         ((1000, 4095), "float32"), ((129, 1031), "bfloat16"),
         ((1024, 10007), "float32"), ((1024, 10007), "bfloat16"), ((1024, 12288), "float32"), ((1024, 16384), "float32"),
         ((2048, 10007), "float32"), ((512, 8000), "float32"), ((1024, 6144), "float32"), ((4096, 10007), "float32"),
         ((1024, 9000), "float32"), ((1024, 10240), "float32"), ((256, 8000), "float32"), ((1024, 3000), "float32"),
         ((512, 4096), "bfloat16"), ((1024, 7000), "bfloat16"), ((256, 3000), "float32"), ((1024, 2049), "float32"),
         ((128, 2500), "float32"), ((128, 8192), "bfloat16"),
         ((16384, 1024), "float32"), ((8192, 2048), "float32"), ((8192, 4096), "float32"), ((5000, 1500), "float32"),
         ((6000, 8000), "float32"), ((8192, 600), "float32"), ((16384, 512), "float32"), ((8192, 1000), "float32"),
         ((128, 4096), "float32"), ((512, 4100), "float32"), ((768, 6000), "float32"), ((1024, 5000), "float32"),
         ((384, 8188), "float32"), ((1024, 8188), "float32"),
         ((512, 5000), "float32"), ((512, 6144), "float32"), ((512, 7000), "float32"), ((640, 6000), "float32"),
         ((640, 8000), "float32"), ((768, 5000), "float32"), ((768, 7000), "float32"), ((768, 8000), "float32"),
         ((896, 4608), "float32"), ((896, 6144), "float32"), ((1024, 5500), "float32"), ((1024, 7000), "float32"),
         ((1024, 8000), "float32"), ((1024, 4608), "float32"),
         ((128, 8000), "float32"), ((256, 5000), "float32"), ((256, 6000), "float32"), ((384, 6000), "float32"),
         ((384, 8000), "float32"), ((576, 6000), "float32"), ((576, 8000), "float32"), ((600, 5000), "float32"),
         ((64, 8000), "float32"), ((192, 7000), "float32"), ((200, 4600), "float32"), ((320, 6000), "float32"),
         ((320, 8000), "float32"), ((448, 8000), "float32"), ((480, 5500), "float32"), ((620, 8000), "float32"),
         ((620, 6000), "float32"), ((700, 4100), "float32"), ((1024, 65536), "float16"),
         ((1024, 32768), "bfloat16"), ((256, 65536), "bfloat16"), ((4096, 65536), "bfloat16"),
         ((1024, 131072), "bfloat16"), ((1024, 32768), "float32"),
         ((1024, 16384), "bfloat16"), ((1024, 24576), "bfloat16"), ((1024, 40001), "bfloat16"),
         ((1024, 32768), "float16"), ((128, 65536), "bfloat16"), ((1024, 36864), "bfloat16"),
         ((1024, 40960), "bfloat16"), ((1024, 49152), "bfloat16"), ((1024, 57344), "bfloat16"),
         ((1024, 61440), "bfloat16"), ((1024, 65535), "bfloat16"), ((1024, 81920), "bfloat16"),
         ((1024, 98304), "bfloat16"), ((128, 40001), "bfloat16"), ((1024, 57344), "float16")]
# Cases 120-139 (run51): few long bf16 rows, each row count at four lengths; 140 one of them in fp16.
CASES += [((rows, cols), "bfloat16") for rows in (32, 128, 200, 264, 400) for cols in (16384, 36864, 49152, 81920)]
CASES += [((128, 36864), "float16")]
# Cases 141-148 (c9fe33f's rule): fp32 warp-per-row rows that start mid-vector, in the staged kernel's domain.
CASES += [((1024, 3001), "float32"), ((1024, 2049), "float32"), ((700, 4099), "float32"), ((512, 5001), "float32"),
          ((1024, 5001), "float32"), ((256, 8001), "float32"), ((640, 6001), "float32"), ((1024, 4095), "float32")]
# Cases 149-152 (6726213's kernel): fp32 staged rows below 128 rows (whole rows, mid-vector).
CASES += [((16, 7000), "float32"), ((7, 8188), "float32"), ((33, 4097), "float32"), ((100, 3001), "float32")]
# Cases 153-158 (4899f73's limit): fp32 warp-per-row rows past 1024 rows that the deep kernel takes.
CASES += [((2048, 4096), "float32"), ((4096, 2048), "float32"), ((1536, 6000), "float32"), ((3000, 8000), "float32"),
          ((2048, 3000), "float32"), ((1025, 4096), "float32")]
# Cases 159-163 (4899f73's limit): fp32 warp rows of 1025-1536 rows, which the staged and split-lane plans take since.
CASES += [((1200, 5000), "float32"), ((1280, 8000), "float32"), ((1100, 2500), "float32"), ((1536, 3000), "float32"),
          ((1300, 4097), "float32")]


def build_shared_library(source: str, out_dir: Path, *extra_flags: str, root: Path = REPO) -> ctypes.CDLL:
    """nvcc `root/scripts/<source>.cu` (source may name a subfolder: `experiments/x`) with root/kernels on the
    include path into `out_dir/<source>.so` for this GPU (ptxas's report in `<source>_ptxas.txt`) and load it."""
    major, minor = torch.cuda.get_device_capability()
    so = out_dir / f"{source}.so"
    so.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["nvcc", "-O3", f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}", "-shared", "-Xcompiler",
           "-fPIC", "-Xptxas=-v", *extra_flags, f"-I{root / 'kernels'}", "-o", str(so),
           str(root / "scripts" / f"{source}.cu")]
    # A build is reused while its command and every source it reads are unchanged.
    stamp = out_dir / f"{source}.cmd"
    include_dirs = [root / "kernels", root / "scripts", *(Path(f[2:]) for f in extra_flags if f.startswith("-I"))]
    sources = [root / "scripts" / f"{source}.cu",
               *(p for d in include_dirs for p in [*d.glob("*.cuh"), *d.glob("*.h"), *d.glob("*.cu")])]
    fresh = (so.exists() and stamp.exists() and stamp.read_text() == " ".join(cmd)
             and all(f.stat().st_mtime < so.stat().st_mtime for f in sources))
    if not fresh:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        (out_dir / f"{source}_ptxas.txt").write_text(proc.stdout + proc.stderr)
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        stamp.write_text(" ".join(cmd))
    return ctypes.CDLL(str(so))


def build(out_dir: Path, torch_version: int, *extra_flags: str, root: Path = REPO) -> ctypes.CDLL:
    lib = build_shared_library("tail_variants", out_dir, "--fmad=false", f"-DKB14_TORCH_VERSION={torch_version}",
                               *extra_flags, root=root)
    lib.kb14x_tail.restype = ctypes.c_int
    lib.kb14x_tail.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong,
                               ctypes.c_longlong, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_double,
                               ctypes.c_double, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_void_p, ctypes.c_void_p]
    return lib


def variant_fn(lib, name: str, dtype_code: int, props, partials, grid_cap: int = 0):
    """The variant called `name` (VARIANTS) of a build's kb14x_tail as a function of y."""
    sms, tpm, major = props
    variant = INDEX[name]

    def fn(y: torch.Tensor) -> torch.Tensor:
        out = torch.empty((y.shape[0], 1), dtype=y.dtype, device=y.device)
        err = lib.kb14x_tail(variant, dtype_code, y.data_ptr(), y.shape[0], y.shape[1], y.stride(0),
                             out.data_ptr(), out.stride(0), 2.0, 1.5, sms, tpm, major, grid_cap,
                             partials.data_ptr(), torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"variant {name}: error {err}")
        return out

    return fn


def placed_inputs(rows: int, cols: int, dtype, device, offsets_mib) -> dict:
    """randn(rows, cols) (seed 0) once per placement: for each offset, its own allocation with
    the values that many MiB in, so that one process times the same kernels on the same
    values at several addresses. {offset_mib: tensor}."""
    torch.manual_seed(0)
    values = torch.randn(rows, cols, device=device, dtype=dtype)
    placed = {}
    for off in offsets_mib:
        skip = (off << 20) // values.element_size()
        placed[off] = torch.empty(skip + rows * cols, device=device, dtype=dtype)[skip:].view(rows, cols)
        placed[off].copy_(values)
    return placed


def at_placements(fns: dict, placed: dict, fillers=("eager", "torch.sum")) -> dict:
    """Each of fns once per placement (`name@<offset>MiB`, called on that placement's input
    whatever it is given); the fillers once, on the first placement."""
    first = next(iter(placed.values()))
    out = {}
    for name, fn in fns.items():
        if name in fillers:
            out[name] = lambda _y, fn=fn: fn(first)
            continue
        for off, y in placed.items():
            out[f"{name}@{off}MiB"] = lambda _y, fn=fn, y=y: fn(y)
    return out


def placement_gaps(by_method: dict, base: str, peer: str, offsets_mib):
    """For single_calls_in_turn's result at placements (at_placements): peer minus base at each
    placement (paired by round) and over all placements pooled, per method: (method, label,
    fields, text); the difference's median, IQR and 95% interval in us."""
    for method, times in by_method.items():
        pairs = {f"{off}MiB": (times[f"{peer}@{off}MiB"], times[f"{base}@{off}MiB"]) for off in offsets_mib}
        peers, bases = zip(*pairs.values())
        pairs["pooled"] = ([t for ts in peers for t in ts], [t for ts in bases for t in ts])
        for label, (peer_ms, base_ms) in pairs.items():
            gap = timing.paired_differences({peer: peer_ms, base: base_ms}, base)[f"{peer} - {base}"]
            med, iqr, (lo, hi) = gap["median_ms"] * 1e3, gap["iqr_ms"] * 1e3, (v * 1e3 for v in gap["ci95_ms"])
            fields = {"method": f"{method}_interleaved", "placement": label, f"{peer}_minus_{base}_us": med,
                      "iqr_us": iqr, "ci95_us": [lo, hi], "pairs": len(peer_ms)}
            text = f"{peer} minus {base} {med:+.2f} us (IQR {iqr:.2f}, 95% [{lo:+.2f}, {hi:+.2f}], {len(peer_ms)} pairs)"
            yield method, label, fields, text


def eager_tail(y):
    return torch.sum(y / 2, dim=1, keepdim=True) * 1.5


def row_sum(y):
    return torch.sum(y, dim=1)


def read_ceiling_gbps(device: torch.device, backend) -> float:
    """The read ceiling the evidence quotes: torch.sum over 2 GiB of fp32, median."""
    big = torch.empty(2 << 30 >> 2, device=device).uniform_()
    read = timing.robust_time(torch.sum, (big,), backend=backend, min_calls=10, max_calls=20)
    return big.numel() * 4 / (read["median_ms"] * 1e-3) / 1e9


def do_bench_ms(fn, y) -> float:
    """triton's do_bench of fn(y): its calls queued, each after a 256 MB write flush; median ms."""
    return triton.testing.do_bench(lambda: fn(y), warmup=25, rep=100, return_mode="median")


def time_methods(fn, y, copies, backend, budget_s: float = 0.2) -> dict:
    """Microseconds of fn(y) four ways: KernelBench's timing (median, and its mean),
    triton's do_bench, one call after a read flush, and CUDA-graph replay over `copies`."""
    kb = timing.kernelbench_time(fn, (y,), backend=backend)
    rf = timing.robust_time(fn, (y,), backend=backend, budget_s=budget_s, min_calls=50, max_calls=300)
    gr = timing.graph_time(fn, [(c,) for c in copies], calls_per_graph=20, replays=10)
    db = do_bench_ms(fn, y)
    return {"kernelbench": statistics.median(kb["times_ms"]) * 1e3, "kernelbench_mean": kb["mean_ms"] * 1e3,
            "do_bench": db * 1e3, "read_flush": rf["median_ms"] * 1e3, "rotating": gr["median_ms"] * 1e3}


def do_bench_in_turn(fns: dict, y: torch.Tensor, rounds: int, first_round: int = 0) -> dict:
    """triton's do_bench of each function, `rounds` rounds in turn (timing.round_order, from
    `first_round` on): one do_bench after another confounds a gap of a few percent with drift."""
    times = {name: [] for name in fns}
    for r in range(first_round, first_round + rounds):
        for name in timing.round_order(list(fns), r):
            times[name].append(do_bench_ms(fns[name], y))
    return times


def single_calls_in_turn(fns: dict, y: torch.Tensor, backend, *, flush_rounds: int, kernelbench_rounds: int,
                         do_bench_rounds: int = 0, flush: str = "read", block: int = 0) -> dict:
    """Milliseconds per call of each fn(y) under the single-call methods, the functions taken
    in turn so that drift hits all alike: queued calls each after the backend's robust flush
    (`{flush}_flush`, timing.interleaved_robust_time), KernelBench's per-call protocol
    (`kernelbench`, timing.paired_time) and, given rounds, triton's do_bench (`do_bench`).
    `block`: this call's place among calls of as many rounds each, spread over a run; its
    rounds continue timing.round_order's sequence, so that the blocks together keep its balance.
    {method: {name: [ms, one per round]}}."""
    times = {f"{flush}_flush": timing.interleaved_robust_time(fns, (y,), rounds=flush_rounds, backend=backend,
                                                             first_round=block * flush_rounds),
             "kernelbench": timing.paired_time({n: (lambda fn=fn: fn(y)) for n, fn in fns.items()},
                                               rounds=kernelbench_rounds, backend=backend,
                                               first_round=block * kernelbench_rounds)}
    if do_bench_rounds:
        times["do_bench"] = do_bench_in_turn(fns, y, do_bench_rounds, first_round=block * do_bench_rounds)
    return times


def in_turn_summary(by_method: dict, base: str, key: str, base_label: str):
    """For single_calls_in_turn's result, every function under every method: (method, name,
    fields, text). fields: `method` (`<method>_interleaved`), `us` and `iqr_us` (median, IQR)
    and the paired differences name - base, `minus_<key>_us`, `minus_<key>_iqr_us` and
    `minus_<key>_ci95_us` (their median, IQR and the median's 95% interval); text: the same
    as printed, `minus <base_label>` naming the base."""
    for method, times in by_method.items():
        diffs = timing.paired_differences(times, base)
        for name, t in times.items():
            med = timing.stats_median(t)
            diff = diffs.get(f"{name} - {base}")
            us, iqr = med["median_ms"] * 1e3, med["iqr_ms"] * 1e3
            minus, minus_iqr, ci = ((diff["median_ms"] * 1e3, diff["iqr_ms"] * 1e3, [v * 1e3 for v in diff["ci95_ms"]])
                                    if diff else (0.0, 0.0, [0.0, 0.0]))
            fields = {"method": f"{method}_interleaved", "us": us, "iqr_us": iqr, f"minus_{key}_us": minus,
                      f"minus_{key}_iqr_us": minus_iqr, f"minus_{key}_ci95_us": ci}
            text = (f"{us:7.2f} us (IQR {iqr:.2f}); minus {base_label} {minus:+.2f} (IQR {minus_iqr:.2f}, "
                    f"95% [{ci[0]:+.2f}, {ci[1]:+.2f}])")
            yield method, name, fields, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/tail_variants")
    parser.add_argument("--ncu", action="store_true")
    parser.add_argument("--cases", type=int, nargs="*", help="indices into CASES (default: all)")
    parser.add_argument("--variants", nargs="*", choices=list(INDEX), metavar="NAME",
                        help="the variants to time, by name, in VARIANTS' order (default: all): " + ", ".join(INDEX))
    parser.add_argument("--grid-caps", type=int, nargs="*", default=[0],
                        help="grid sizes for the unordered reads (0: one round of 4 loads per thread)")
    parser.add_argument("--interleaved", type=int, metavar="ROUNDS",
                        help="instead: single-call times of the variants and Inductor taken in turn, ROUNDS rounds, "
                             "after a read flush and under KernelBench's timing, with each one's median difference "
                             "from the first variant")
    parser.add_argument("--flush", choices=("read", "write", "copy"),
                        help="what precedes each interleaved queued call: the library's read (torch.max over "
                             "256 MB, the default), KernelBench's write (fill_), or a 128 MB device-to-device "
                             "memcpy; with --ncu, run before each profiled call (run ncu with --cache-control none "
                             "to see the kernel in the cache state the flush leaves)")
    parser.add_argument("--do-bench-rounds", type=int, default=0, metavar="ROUNDS",
                        help="with --interleaved, also triton's do_bench (median of its own ~100 ms of calls) "
                             "of every function, ROUNDS rounds in turn, in timing.round_order's order")
    parser.add_argument("--no-inductor", action="store_true",
                        help="leave Inductor out (its host time per call can exceed a read flush's GPU time, "
                             "which leaves the GPU idle between the interleaved calls)")
    parser.add_argument("--library-op", action="store_true",
                        help="also time the library as users call it (kernels.div_sum_scale: the JIT-built torch "
                             "op) beside the `library` variant, its kernels built by this script")
    parser.add_argument("--offsets-mib", type=int, nargs="*", metavar="MIB",
                        help="with --interleaved: every function once per offset, on its own allocation "
                             "holding the same values that many MiB in, all in the same rounds; prints "
                             "Inductor minus the first variant at each placement and pooled")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also time the library of another commit as `baseline library`, in the same process: "
                             "DIR holds that commit's kernels/ and scripts/ (git archive COMMIT kernels scripts | "
                             "tar -x -C DIR), whose own tail_variants.cu is built")
    parser.add_argument("--library-build", metavar="LABEL=FLAGS", action="append", default=[],
                        help="also time the library built from this tree with extra nvcc FLAGS (say a -D "
                             "that selects an experiment's #ifdef) as `library LABEL`, in the same process; "
                             "repeatable")
    args = parser.parse_args()
    if args.offsets_mib and not args.interleaved:
        parser.error("--offsets-mib times calls in turn: give --interleaved")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Each build is one nvcc process on one core: they run side by side.
    # The baseline is built from its own tail_variants.cu and kernels/.
    flagged_specs = dict(spec.split("=", 1) for spec in args.library_build)
    with concurrent.futures.ThreadPoolExecutor(2 + len(flagged_specs)) as pool:
        lib = pool.submit(build, out_dir, torch_order())
        baseline = (pool.submit(build, out_dir / "baseline", torch_order(), root=Path(args.baseline).resolve())
                    if args.baseline else None)
        flagged = {label: pool.submit(build, out_dir / f"library_{label}", torch_order(), *flags.split())
                   for label, flags in flagged_specs.items()}
        lib, baseline = lib.result(), baseline.result() if baseline else None
        flagged = {label: f.result() for label, f in flagged.items()}
    dev = torch.device("cuda")
    prop = torch.cuda.get_device_properties(dev)
    props = (prop.multi_processor_count, prop.max_threads_per_multi_processor, prop.major)
    partials = torch.empty(1 << 22, device=dev)
    backend = timing.make_backend(dev)
    if args.flush == "write":
        backend = dataclasses.replace(backend, robust_flush=backend.flush)
    elif args.flush == "copy":
        halves = torch.empty(2, timing.CUDA_FLUSH_BYTES // 8, dtype=torch.int32, device=dev)
        backend = dataclasses.replace(backend, robust_flush=lambda: halves[1].copy_(halves[0]))
    l2 = timing.l2_cache_bytes(dev)
    torch._dynamo.config.cache_size_limit = 64
    inductor = torch.compile(eager_tail, dynamic=False)
    cases = [CASES[i] for i in args.cases] if args.cases else (CASES[:1] if args.ncu else CASES)
    variants = [name for name in INDEX if not args.variants or name in args.variants]
    rows_out = []
    if not args.ncu:
        ceiling = read_ceiling_gbps(dev, backend)
        print(f"read ceiling: {ceiling:.0f} GB/s ({prop.name}, torch {torch.__version__})", flush=True)
    placements = {}
    for (rows, cols), dname in cases:
        dtype, code = DTYPES[dname]
        if args.offsets_mib:
            placements = {}  # the last case's inputs freed first
            placements = placed_inputs(rows, cols, dtype, dev, args.offsets_mib)
            y = next(iter(placements.values()))
            print(f"{rows}x{cols} {dname} placed at " +
                  ", ".join(f"{off} MiB: {t.data_ptr():#x}" for off, t in placements.items()), flush=True)
        else:
            torch.manual_seed(0)
            y = torch.randn(rows, cols, device=dev, dtype=dtype)
        ref = eager_tail(y)
        fns = {"eager": eager_tail, "torch.sum": row_sum}
        if not args.no_inductor:
            fns["inductor"] = inductor
        for name in variants:
            for cap in (args.grid_caps if name in GRID_SIZED else [0]):
                fns[f"{name}@{cap}" if cap else name] = variant_fn(lib, name, code, props, partials, cap)
        if baseline is not None:  # 39a345c's switch has the library at the same index
            fns["baseline library"] = variant_fn(baseline, "library", code, props, partials)
        for label, flagged_lib in flagged.items():
            fns[f"library {label}"] = variant_fn(flagged_lib, "library", code, props, partials)
        if args.library_op:
            fns["library op"] = lambda t: kernels.div_sum_scale(t, 2, 1.5)  # built on its first call
        if placements:
            fns = at_placements(fns, placements)
        bits = {}
        for name, fn in list(fns.items()):
            try:
                got = fn(y)
                got = fn(y)
            except RuntimeError as e:
                print(f"  {name}: {e}")
                del fns[name]
                continue
            bits[name] = bool(torch.equal(got, ref)) if name.split("@")[0] not in ("torch.sum",) + NOT_A_TAIL else None
        if args.library_op:  # a module still building in the background would compete for the CPU
            kernels.jit.load_finished_builds(wait=True)
        torch.cuda.synchronize()
        if args.ncu:
            torch.cuda.profiler.start()
            for name, fn in fns.items():
                for _ in range(3):
                    if args.flush:
                        backend.robust_flush()
                    fn(y)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            print("ncu order:", list(fns))
            continue
        if args.interleaved:
            # eager and torch.sum stay in the rounds, as in vs_inductor.py (the read flush's spin
            # keeps the queue ahead of Inductor's host time). Queued calls are named by their flush.
            base = next(name for name in fns if name.split("@")[0] not in ("eager", "torch.sum", "inductor"))
            by_method = single_calls_in_turn(fns, y, backend, flush_rounds=args.interleaved,
                                             kernelbench_rounds=max(1, args.interleaved // 4),
                                             do_bench_rounds=args.do_bench_rounds, flush=args.flush or "read")
            for method, name, fields, text in in_turn_summary(by_method, base, "first", f"{base}:"):
                rows_out.append({"shape": [rows, cols], "dtype": dname, "fn": name, "bits": bits.get(name), **fields})
                print(f"{rows}x{cols} {dname:8s} {name:17s} bits={str(bits.get(name)):5s} {method:11s} interleaved "
                      f"{text}", flush=True)
            if placements and not args.no_inductor:
                plain = base.split("@")[0]
                for method, label, fields, text in placement_gaps(by_method, plain, "inductor", args.offsets_mib):
                    rows_out.append({"shape": [rows, cols], "dtype": dname, "fn": f"inductor - {plain}", **fields})
                    print(f"{rows}x{cols} {dname:8s} {method:11s} at {label:7s} {text}", flush=True)
            continue
        copies = timing.rotating_copies(y, l2, cap=64)
        nbytes = y.numel() * y.element_size()
        for name, fn in fns.items():
            t = time_methods(fn, y, copies, backend, budget_s=0.3)
            row = {"shape": [rows, cols], "dtype": dname, "fn": name, "bits": bits.get(name),
                   "kernelbench_median_us": t["kernelbench"], "kernelbench_mean_us": t["kernelbench_mean"],
                   "read_flush_us": t["read_flush"], "do_bench_us": t["do_bench"], "rotating_us": t["rotating"],
                   "rotating_gbps": nbytes / (t["rotating"] * 1e-6) / 1e9}
            rows_out.append(row)
            print(f"{rows}x{cols} {dname:8s} {name:17s} bits={str(bits.get(name)):5s} "
                  f"kb {row['kernelbench_median_us']:7.2f} (mean {row['kernelbench_mean_us']:7.2f})  "
                  f"db {row['do_bench_us']:7.2f}  rf {row['read_flush_us']:7.2f}  rot {row['rotating_us']:7.2f} "
                  f"({row['rotating_gbps']:.0f} GB/s)", flush=True)
        del copies
    if not args.ncu:
        (out_dir / "tail_variants.json").write_text(json.dumps(
            {"gpu": prop.name, "torch": torch.__version__, "read_ceiling_gbps": ceiling, "rows": rows_out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
