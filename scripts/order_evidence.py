"""GPU evidence for the order model (oracle/cuda_order_model.py), in one process.

(a) The model against torch's own CUDA tail, `torch.sum(y / d, 1, keepdim=True) * s` for
    (d, s) = (2, 1.5) and (3.0, 0.7), on this GPU under the installed torch's release group:
    300+ shapes x {float32, bfloat16, float16}, contiguous, misaligned slices and padded row
    strides, randn and large-dynamic-range data. Equal / total per dtype and per branch.
(b) The library's kernel, built torch-free from scripts/tail_variants.cu for each release
    group (KB14_TORCH_VERSION 209 and 211, variant 6: the library's own dispatch), against the
    model, for each GPU size (SM count with that GPU's threads per SM) passed to both:
    200+ shapes x 3 dtypes per combination, with the branch counts per combination.
(c) A second oracle from older torch wheels' Reduce.cuh is out of scope and skipped.

Writes order_evidence.json and order_evidence.md into --out; exits 1 on any mismatch.

    python scripts/order_evidence.py --out results
    python scripts/order_evidence.py --dry-run --out /tmp/order     # no GPU: shapes, configs, CPU model
    python scripts/order_evidence.py --build-only sm_90 --out /tmp/order   # no GPU: compile both groups
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}  # kb14x_tail's dtype argument
PAIRS = ((2, 1.5), (3.0, 0.7))  # (divisor, scale)
LIBRARY_VARIANT = 6  # kb14x_tail: lean kernel where it applies, else the general kernels
TORCH_VERSION_CODES = {"2.4-2.9": 209, "2.10+": 211}  # -DKB14_TORCH_VERSION per release group
# GPU sizes: SM count -> (a GPU of that size, its maxThreadsPerMultiProcessor).
GPU_SIZES = {40: ("T4", 1024), 58: ("L4", 1536), 80: ("A10G", 1536), 108: ("A100", 2048),
             114: ("H100 PCIe", 2048), 132: ("H100 SXM / H200", 2048), 142: ("L40S", 1536)}
BRANCHES = ("vectorized", "not_vectorized", "misaligned_head", "vector_tail", "split_across_warps",
            "warp_per_row", "sub_warp_block", "wide_block_x", "ctas_gt_1", "one_column")
MAX_NUMEL = 8_000_000  # per shape, except the grid-threshold shapes


sys.path.insert(0, str(ROOT))
from oracle import cuda_order_model as model  # noqa: E402


# ---------------------------------------------------------------------------------------------
# Shapes. A case is (rows, cols, layout, data kind); layout "contiguous", "slice+k" (y = big[:, k:],
# k not a multiple of any vector width) or "stride+p" (rows padded by p elements).

def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _cap(rows: int, cols: int, limit: int = MAX_NUMEL) -> tuple[int, int]:
    return max(1, min(rows, limit // cols)), cols


def grid_threshold_shapes() -> list[tuple[int, int]]:
    """Rows at and just past each GPU size's target grid (SMs x blocks of 512 per SM), with rows
    long enough (> 130560 columns) that blocks split a row only while the grid fits the target."""
    out = []
    for sms, (_, threads) in GPU_SIZES.items():
        target = sms * (threads // 512)
        out += [(target, 131073), (target + 1, 131200)]
    return sorted(set(out))


def make_cases(n_random: int, seed: int, few_long: int, include_thresholds: bool) -> list[dict]:
    rng = random.Random(seed)
    shapes: list[tuple[str, tuple[int, int]]] = []
    named = [(1, 1), (1, 2), (2, 1), (5, 1), (7, 2), (1, 31), (3, 32), (1, 33), (64, 127), (64, 128), (64, 129),
             (100, 255), (100, 256), (100, 257), (1000, 8191), (1000, 8192), (1024, 8192), (128, 8192),
             (3, 200003), (1, 1_000_000), (16, 300000), (8192, 1024), (4096, 1000), (1, 129), (2, 128)]
    shapes += [("named", s) for s in named]
    # Short rows: warp per row, sub-warp blocks, one and two columns.
    shapes += [("short rows", (_log_uniform(rng, 1, 20000), rng.randint(1, 64))) for _ in range(n_random // 4)]
    # Around the vectorisation threshold.
    for rows in (1, 2, 5, 33, 300, 4097):
        shapes += [("127/128/129", (rows, cols)) for cols in (126, 127, 128, 129, 130)]
    # Rows that start mid-vector: odd lengths, many rows.
    shapes += [("mid-vector", (rng.randint(2, 2000), rng.choice([8191, 8193, 4099, 1001, 16387, 2053, 8190, 8196])))
               for _ in range(n_random // 4)]
    # Few long rows, several blocks per row; how many depends on the SM count.
    shapes += [("few long rows", _cap(rng.randint(1, 64), rng.randint(65_537, 300_000))) for _ in range(few_long)]
    # Anything.
    shapes += [("random", _cap(_log_uniform(rng, 1, 20000), _log_uniform(rng, 1, 300_000), 4_000_000))
               for _ in range(n_random)]
    if include_thresholds:
        shapes += [("grid threshold", s) for s in grid_threshold_shapes()]
    cases = []
    for i, (category, (rows, cols)) in enumerate(shapes):
        layout = ("contiguous", f"slice+{rng.choice([1, 2, 3, 5])}", f"stride+{rng.choice([1, 3, 8, 64])}")[i % 3]
        kind = "dynamic" if i % 3 == 1 else "randn"
        cases.append({"category": category, "rows": rows, "cols": cols, "layout": layout, "data": kind})
    return cases


def make_input(case: dict, dtype: torch.dtype, seed: int, device) -> torch.Tensor:
    """The case's y: a view of a larger tensor for slices and padded strides."""
    rows, cols, layout = case["rows"], case["cols"], case["layout"]
    extra = int(layout.split("+")[1]) if "+" in layout else 0
    gen = torch.Generator(device=device).manual_seed(seed)
    big = torch.randn(rows, cols + extra, device=device, generator=gen)
    if case["data"] == "dynamic":
        # Large dynamic range; fp16 keeps to a range whose row sums stay finite.
        span = 6 if dtype == torch.float16 else 20
        big = big * torch.exp2(torch.randint(-span, span + 1, big.shape, device=device, generator=gen).float())
    big = big.to(dtype)
    if layout.startswith("slice"):
        return big[:, extra:]
    return big[:, :cols]


def branch_names(cfg) -> list[str]:
    return [name for name, on in cfg.branches().items() if on]


# ---------------------------------------------------------------------------------------------
# (a) model vs torch

def evidence_vs_torch(cases: list[dict], device, sms: int, threads: int, release: str) -> dict:
    per_dtype = {}
    rows_out, failures = [], []
    per_branch = defaultdict(lambda: [0, 0])
    for dname, dtype in DTYPES.items():
        equal = total = 0
        t0 = time.perf_counter()
        for i, case in enumerate(cases):
            y = make_input(case, dtype, seed=1000 + i, device=device)
            cfg = model.launch_config(case["rows"], case["cols"], dtype, release=release, multiprocessors=sms,
                                      max_threads_per_multiprocessor=threads)
            for divisor, scale in PAIRS:
                ref = torch.sum(y / divisor, 1, keepdim=True) * scale
                ours = model.reference_tail(y, divisor, scale, release=release, multiprocessors=sms,
                                            max_threads_per_multiprocessor=threads)
                same = bool(torch.equal(ours, ref))
                equal += same
                total += 1
                for b in branch_names(cfg):
                    per_branch[f"{dname}/{b}"][0] += same
                    per_branch[f"{dname}/{b}"][1] += 1
                rows_out.append([case["rows"], case["cols"], case["layout"], case["data"], dname, divisor, scale, same])
                if not same:
                    failures.append({**case, "dtype": dname, "divisor": divisor, "scale": scale,
                                     "rows_differing": int((ours != ref).sum().item()), "config": cfg.as_dict()})
        per_dtype[dname] = {"equal": equal, "total": total}
        print(f"(a) {dname:8s}: model == torch on {equal}/{total} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return {"release": release, "multiprocessors": sms, "max_threads_per_multiprocessor": threads,
            "per_dtype": per_dtype,
            "per_branch": {k: {"equal": v[0], "total": v[1]} for k, v in sorted(per_branch.items())},
            "failures": failures, "cases": rows_out}


# ---------------------------------------------------------------------------------------------
# (b) kernel vs model

def build_kernels(out_dir: Path, arch: str | None = None) -> dict:
    """tail_variants.build for each release group, in parallel (nvcc runs outside the GIL).
    With `arch` (e.g. sm_90) the device capability is taken from it, so that the build can be
    checked on a machine without a GPU; tail_variants.build itself is unchanged."""
    from concurrent.futures import ThreadPoolExecutor
    from unittest import mock

    try:
        import triton.testing  # noqa: F401  (tail_variants imports it)
    except ImportError:
        if arch is None:
            raise
        import types
        stub = types.ModuleType("triton")
        stub.testing = types.ModuleType("triton.testing")
        sys.modules.setdefault("triton", stub)
        sys.modules.setdefault("triton.testing", stub.testing)
    sys.path.insert(0, str(ROOT / "scripts"))
    import tail_variants

    def one(release: str):
        return release, tail_variants.build(out_dir / f"tail_variants_{TORCH_VERSION_CODES[release]}",
                                            TORCH_VERSION_CODES[release])

    t0 = time.perf_counter()
    patch = contextlib.nullcontext()
    if arch:
        digits = arch.split("_")[-1]  # sm_90 -> (9, 0), sm_100 -> (10, 0)
        capability = (int(digits[:-1]), int(digits[-1]))
        patch = mock.patch.object(torch.cuda, "get_device_capability", lambda *args: capability)
    with patch, ThreadPoolExecutor(2) as pool:
        libs = dict(pool.map(one, model.RELEASES))
    print(f"built tail_variants for {', '.join(f'{r} ({TORCH_VERSION_CODES[r]})' for r in libs)} "
          f"in {time.perf_counter() - t0:.1f} s", flush=True)
    return libs


def evidence_kernel(cases: list[dict], libs: dict, device, cc_major: int) -> dict:
    # partials: one float per row and block of it, with room to spare.
    max_partials = 1 << 22
    for case in cases:
        for sms, (_, threads) in GPU_SIZES.items():
            for dtype in DTYPES.values():
                for release in libs:
                    cfg = model.launch_config(case["rows"], case["cols"], dtype, release=release,
                                              multiprocessors=sms, max_threads_per_multiprocessor=threads)
                    max_partials = max(max_partials, 4 * case["rows"] * cfg.ctas_per_row)
    partials = torch.zeros(max_partials, device=device, dtype=torch.float32)
    on_gpu = device.type == "cuda"
    stream = torch.cuda.current_stream(device).cuda_stream if on_gpu else None
    combos, failures = [], []
    for dname, dtype in DTYPES.items():
        t0 = time.perf_counter()
        inputs = [make_input(case, dtype, seed=5000 + i, device=device) for i, case in enumerate(cases)]
        for release, lib in libs.items():
            # The model's bits depend on the GPU size only through the launch configuration.
            cache: dict = {}
            for sms, (gpu, threads) in GPU_SIZES.items():
                equal, branches, errors, ctas_total = 0, Counter(), 0, 0
                for i, (case, y) in enumerate(zip(cases, inputs)):
                    divisor, scale = PAIRS[i % len(PAIRS)]
                    cfg = model.launch_config(case["rows"], case["cols"], dtype, release=release,
                                              multiprocessors=sms, max_threads_per_multiprocessor=threads)
                    branches.update(branch_names(cfg))
                    ctas_total += cfg.ctas_per_row
                    key = (i, cfg.vectorized, cfg.block_width, cfg.block_height, cfg.split_across_warps,
                           cfg.ctas_per_row)
                    if key not in cache:
                        cache[key] = model.reference_tail(y, divisor, scale, release=release, multiprocessors=sms,
                                                          max_threads_per_multiprocessor=threads)
                    expected = cache[key]
                    out = torch.full((case["rows"], 1), float("nan"), device=device, dtype=dtype)
                    err = lib.kb14x_tail(LIBRARY_VARIANT, DTYPE_CODES[dname], y.data_ptr(), case["rows"], case["cols"],
                                         y.stride(0), out.data_ptr(), out.stride(0), float(divisor), float(scale),
                                         sms, threads, cc_major, 0, partials.data_ptr(), stream)
                    same = err == 0 and bool(torch.equal(out, expected))
                    equal += same
                    if err:
                        errors += 1
                    if not same:
                        failures.append({**case, "dtype": dname, "release": release, "multiprocessors": sms,
                                         "threads_per_sm": threads, "divisor": divisor, "scale": scale,
                                         "error": err, "config": cfg.as_dict(),
                                         "rows_differing": None if err else int((out != expected).sum().item())})
                if on_gpu:
                    torch.cuda.synchronize(device)
                combos.append({"release": release, "multiprocessors": sms, "gpu": gpu, "threads_per_sm": threads,
                               "dtype": dname, "shapes": len(cases), "equal": equal, "errors": errors,
                               "branches": {b: branches.get(b, 0) for b in BRANCHES}, "ctas_total": ctas_total})
                print(f"(b) {release:7s} {sms:3d} SMs ({gpu}, {threads}/SM) {dname:8s}: kernel == model on "
                      f"{equal}/{len(cases)}  ctas>1 {branches['ctas_gt_1']} (blocks per row summed: {ctas_total})  "
                      f"misaligned {branches['misaligned_head']}",
                      flush=True)
        del inputs
        print(f"(b) {dname}: {time.perf_counter() - t0:.1f} s", flush=True)
    return {"variant": LIBRARY_VARIANT, "cc_major": cc_major, "combinations": combos, "failures": failures}


# ---------------------------------------------------------------------------------------------
# Without a GPU: configurations and branch coverage per GPU size, and the model on the CPU.

def dry_run(cases_a: list[dict], cases_b: list[dict]) -> dict:
    coverage = {}
    for release in model.RELEASES:
        for sms, (gpu, threads) in GPU_SIZES.items():
            for dname, dtype in DTYPES.items():
                counts = Counter()
                for case in cases_b:
                    counts.update(branch_names(model.launch_config(case["rows"], case["cols"], dtype, release=release,
                                                                   multiprocessors=sms,
                                                                   max_threads_per_multiprocessor=threads)))
                coverage[f"{release} {sms} {dname}"] = {b: counts.get(b, 0) for b in BRANCHES}
    # The model on the CPU for a few small cases of each category: integer data, exact in any order.
    checked = 0
    seen_categories = set()
    for case in cases_a:
        if case["category"] in seen_categories or case["rows"] * case["cols"] > 400_000:
            continue
        seen_categories.add(case["category"])
        for dname, dtype in DTYPES.items():
            y = torch.randint(-16, 17, (case["rows"], case["cols"])).to(dtype)
            for release in model.RELEASES:
                got = model.reference_tail(y, 2, 0.5, release=release, multiprocessors=132)
                exact = ((y.double() / 2).sum(1, keepdim=True).to(dtype).double() * 0.5).to(dtype)
                if not torch.equal(got, exact):
                    raise SystemExit(f"dry run: model not exact on {case} {dname} {release}")
                checked += 1
    print(f"dry run: {len(cases_a)} shapes for (a), {len(cases_b)} for (b); model exact on {checked} CPU checks "
          f"({sorted(seen_categories)})", flush=True)
    return {"coverage_b": coverage, "cpu_checks": checked}


# ---------------------------------------------------------------------------------------------
# Report

def write_report(out_dir: Path, result: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "order_evidence.json").write_text(json.dumps(result, indent=1))
    lines = ["# The order model as evidence", "",
             f"GPU: {result.get('gpu', '-')}; torch {result['torch']}; "
             f"{'dry run (no GPU)' if result.get('dry_run') else 'one process'}; {result['seconds']:.0f} s.", ""]
    a = result.get("vs_torch")
    if a:
        lines += [f"## (a) Model vs torch's CUDA tail ({a['release']}, {a['multiprocessors']} SMs, "
                  f"{a['max_threads_per_multiprocessor']} threads/SM)", "",
                  f"{result['shapes_a']} shapes x {len(PAIRS)} (divisor, scale) pairs {list(PAIRS)}.", "",
                  "| dtype | equal / total |", "| --- | --- |"]
        lines += [f"| {d} | {v['equal']} / {v['total']} |" for d, v in a["per_dtype"].items()]
        lines += ["", "| dtype/branch | equal / total |", "| --- | --- |"]
        lines += [f"| {k} | {v['equal']} / {v['total']} |" for k, v in a["per_branch"].items()]
        lines += ["", f"Failures: {len(a['failures'])}"] + [f"- {f}" for f in a["failures"][:50]] + [""]
    b = result.get("kernel_vs_model")
    if b:
        lines += ["## (b) Kernel (tail_variants.cu, variant 6) vs model, per release group and GPU size", "",
                  f"{result['shapes_b']} shapes per row; cc_major {b['cc_major']}.", "",
                  "Branch columns count shapes; ctas sum adds up the blocks per row over the shapes.", "",
                  "| release | SMs | GPU | threads/SM | dtype | equal / shapes | " + " | ".join(BRANCHES)
                  + " | ctas sum |", "| --- " * (7 + len(BRANCHES)) + "|"]
        for c in b["combinations"]:
            lines.append(f"| {c['release']} | {c['multiprocessors']} | {c['gpu']} | {c['threads_per_sm']} "
                         f"| {c['dtype']} | "
                         f"{c['equal']} / {c['shapes']} | " + " | ".join(str(c["branches"][k]) for k in BRANCHES)
                         + f" | {c['ctas_total']} |")
        lines += ["", f"Failures: {len(b['failures'])}"] + [f"- {f}" for f in b["failures"][:50]] + [""]
    if result.get("dry_run"):
        lines += ["## Dry run: branch counts of the (b) shapes per release group, GPU size and dtype", "",
                  "| combination | " + " | ".join(BRANCHES) + " |", "| --- " * (1 + len(BRANCHES)) + "|"]
        lines += [f"| {k} | " + " | ".join(str(v[b]) for b in BRANCHES) + " |"
                  for k, v in result["dry_run"]["coverage_b"].items()]
        lines.append("")
    lines += ["## (c) Older torch wheels as a second oracle", "", result["older_wheels"], ""]
    (out_dir / "order_evidence.md").write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/order_evidence", help="folder for order_evidence.{json,md}")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: shapes, configurations, the model on the CPU")
    parser.add_argument("--build-only", metavar="ARCH",
                        help="no GPU: compile tail_variants.cu for both groups (e.g. sm_90)")
    args = parser.parse_args()
    out_dir = Path(args.out)
    t0 = time.perf_counter()
    cases_a = make_cases(n_random=140, seed=14, few_long=45, include_thresholds=False)
    cases_a += [{"category": "grid threshold", "rows": r, "cols": c, "layout": "contiguous", "data": "randn"}
                for r, c in ((528, 131073), (529, 131200))]  # this GPU's target if it has 132 SMs
    cases_b = make_cases(n_random=72, seed=15, few_long=45, include_thresholds=True)
    result = {"torch": torch.__version__, "shapes_a": len(cases_a), "shapes_b": len(cases_b),
              "older_wheels": "Skipped: out of scope for this evidence (it would need each wheel's Reduce.cuh "
                              "built and run on the GPU)."}
    if args.build_only:
        build_dir = Path(tempfile.mkdtemp(prefix="kb14_order_"))  # kept: the caller asked for the build
        build_kernels(build_dir, arch=args.build_only)
        print(f"built under {build_dir}")
        return 0
    if args.dry_run:
        result["dry_run"] = dry_run(cases_a, cases_b)
        result["seconds"] = time.perf_counter() - t0
        write_report(out_dir, result)
        print(f"wrote {out_dir / 'order_evidence.md'}")
        return 0
    if not torch.cuda.is_available():
        print("order_evidence.py needs a CUDA GPU (torch.cuda.is_available() is False here). "
              "Without one, --dry-run checks the shapes, configurations and the model on the CPU, and "
              "--build-only sm_90 compiles the kernels.", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    prop = torch.cuda.get_device_properties(device)
    release = model.release_group(torch.__version__)
    result["gpu"] = f"{prop.name}, {prop.multi_processor_count} SMs, {prop.max_threads_per_multi_processor} threads/SM"
    print(f"{result['gpu']}; torch {torch.__version__} ({release}); {len(cases_a)} shapes for (a), "
          f"{len(cases_b)} for (b)", flush=True)
    with tempfile.TemporaryDirectory(prefix="kb14_order_") as build_dir:  # the .so files stay out of --out
        libs = build_kernels(Path(build_dir))
        result["vs_torch"] = evidence_vs_torch(cases_a, device, prop.multi_processor_count,
                                               prop.max_threads_per_multi_processor, release)
        result["kernel_vs_model"] = evidence_kernel(cases_b, libs, device, prop.major)
    result["seconds"] = time.perf_counter() - t0
    write_report(out_dir, result)
    bad = len(result["vs_torch"]["failures"]) + len(result["kernel_vs_model"]["failures"])
    print(f"{'ALL EQUAL' if not bad else f'{bad} MISMATCHES'}; wrote {out_dir / 'order_evidence.md'} "
          f"({result['seconds']:.0f} s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
