"""The column-sum path's matrix-vector product against its variants, the tail, torch.mv
and Inductor's compiled `x @ colsum`, in one process (KernelBench size, fp32).

Builds scripts/experiments/matvec_variants.cu with nvcc, checks each exact variant's bits against the
library's `kb14::colsum_matvec` (variants that add in another order are expected to
differ in the last bits; their largest relative error against an fp64 matvec is
printed), and times everything with tail_variants' four methods. Probes (no column-sum
reads; fp32 arithmetic) are not products the library could return: they show what
each part of the work costs. `--ncu` runs each once for Nsight Compute instead.
Exploratory (findings in results/kernel_notes.md).

    python scripts/experiments/matvec_variants.py --out DIR [--ncu | --interleaved ROUNDS]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]
from harness import timing  # noqa: E402
import kernels  # noqa: E402
from kernels.colsum_ops import colsum_matvec  # noqa: E402
from tail_variants import (build_shared_library, in_turn_summary, read_ceiling_gbps, single_calls_in_turn,  # noqa: E402
                           time_methods)

# The index of each variant in matvec_variants.cu's switch -> its name, which --variants takes:
# threads x blocks an SM, R rows a block, U the unroll (the .cu's template arguments); aheadN: N rows
# read ahead; warmed: L2 warmed, no gate (behind_warmed: warmed only behind a warmed launch).
VARIANTS = {0: "library_256x8_u2", 1: "512x4_u4", 2: "256x8_u4", 3: "512x4_u2", 4: "128x16_u2",
            5: "256x4_u4", 6: "1024x2_u2", 7: "512x4_r2_u1", 8: "256x8_r2_u1", 9: "512x2_r4_u1", 13: "512x2_r2_u2",
            14: "256x4_r4_u1", 15: "1024x1_r4_u1", 10: "probe_no_colsum", 11: "probe_fp32_256x8",
            12: "probe_fp32_512x4",
            20: "resident_512x2_u4_ahead1", 21: "resident_1024x1_u2_ahead2",
            22: "resident_512x2_u4_block_per_row", 23: "resident_1024x1_u2_ahead1",
            24: "resident_512x1_u4_ahead2", 25: "shared_sums_512x3_u4_ahead1",
            26: "shared_sums_512x2_u4_ahead2", 27: "shared_sums_1024x2_u2_ahead1",
            30: "ring_512x1_u4_bulk_copies", 31: "ring_512x2_u4_bulk_copies",
            40: "staged_512x2_u4_3rows_cp_async", 41: "staged_512x2_u4_2rows_cp_async",
            42: "staged_512x1_u4_6rows_cp_async", 43: "staged_512x2_u4_3rows_warmed",
            45: "resident_512x2_u4_warmed", 46: "resident_512x2_u4_behind_warmed",
            47: "resident_512x2_u4_every_block_warmed",
            50: "block_per_row_512x4_u4_sums_l1", 51: "block_per_row_512x3_u4_sums_l1",
            52: "block_per_row_512x4_u4_sums_l1_warmed",
            53: "block_per_row_512x4_u4_x_past_l1", 54: "block_per_row_512x4_u4_x_past_l1_sums_prefetched",
            55: "block_per_row_512x3_u4_x_past_l1_sums_prefetched",
            56: "resident_512x1_u4_ahead4", 57: "resident_512x1_u4_ahead4_warmed"}
INDEX = {name: v for v, name in VARIANTS.items()}
PROBES = ("probe_no_colsum", "probe_fp32_256x8", "probe_fp32_512x4")  # no column-sum reads or fp32 only
SCALE = 0.75


def build(out_dir: Path) -> ctypes.CDLL:
    lib = build_shared_library("experiments/matvec_variants", out_dir)
    lib.kb14x_matvec.restype = ctypes.c_int
    lib.kb14x_matvec.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_int,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double, ctypes.c_int,
                                 ctypes.c_void_p]
    return lib


def variant_fn(lib, name: str, c: torch.Tensor, c32: torch.Tensor, programmatic: bool):
    variant = INDEX[name]

    def fn(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty((x.shape[0], 1), dtype=x.dtype, device=x.device)
        err = lib.kb14x_matvec(variant, x.data_ptr(), x.shape[0], x.stride(0), x.shape[1] // 4, c.data_ptr(),
                               c32.data_ptr(), out.data_ptr(), SCALE, int(programmatic),
                               torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"variant {name}: error {err}")
        return out

    return fn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/matvec_variants")
    parser.add_argument("--ncu", action="store_true")
    parser.add_argument("--rows", type=int, nargs="*", default=[1024, 4096])
    parser.add_argument("--variants", nargs="*", choices=list(INDEX), metavar="NAME",
                        help="the variants to time, by name, in VARIANTS' order (default: all): " + ", ".join(INDEX))
    parser.add_argument("--interleaved", type=int, metavar="ROUNDS",
                        help="single calls only, the functions taken in turn (as tail_variants.py's option), "
                             "without Inductor and torch.mv; differences paired against the library")
    parser.add_argument("--do-bench-rounds", type=int, default=0, metavar="ROUNDS",
                        help="with --interleaved, also triton's do_bench in turn")
    args = parser.parse_args()
    out_dir = Path(args.out)
    lib = build(out_dir)
    dev = torch.device("cuda")
    backend = timing.make_backend(dev)
    l2 = timing.l2_cache_bytes(dev)
    programmatic = torch.cuda.get_device_capability()[0] >= 9
    torch._dynamo.config.cache_size_limit = 64
    if not args.ncu:
        print(f"read ceiling: {read_ceiling_gbps(dev, backend):.0f} GB/s ({torch.cuda.get_device_name(dev)}, "
              f"torch {torch.__version__})", flush=True)
    rows_out = []
    for rows in args.rows:
        torch.manual_seed(0)
        x = torch.rand(rows, 8192, device=dev)
        c = torch.randn(8192, device=dev, dtype=torch.float64) * 90
        c32 = c.float()
        compiled = torch.compile(lambda t: (t @ c32 * SCALE).unsqueeze(1), dynamic=False)
        fns = {"library kb14::colsum_matvec": lambda t: colsum_matvec(t, c, SCALE),
               "tail (same bytes)": lambda t: kernels.div_sum_scale(t, 2, 1.5),
               "torch.mv": lambda t: torch.mv(t, c32), "inductor x @ colsum": compiled}
        fns.update({name: variant_fn(lib, name, c, c32, programmatic) for name in INDEX
                    if not args.variants or name in args.variants})
        exact = (x.double() @ c * SCALE).unsqueeze(1)
        library = fns["library kb14::colsum_matvec"](x)
        notes = {}
        for name, fn in fns.items():
            got = fn(x)
            got = fn(x)
            if name.startswith("tail") or name in PROBES:
                notes[name] = "probe" if name in PROBES else "not a matvec"
                continue
            rel = ((got.double() - exact).abs() / exact.abs().clamp_min(1e-30)).max().item()
            notes[name] = f"bits==library {torch.equal(got, library)}, max rel err {rel:.1e}"
        torch.cuda.synchronize()
        if args.ncu:
            torch.cuda.profiler.start()
            for fn in fns.values():
                fn(x)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            print("ncu order:", list(fns), flush=True)
            continue
        if args.interleaved:
            in_turn = {name: fn for name, fn in fns.items() if name not in ("torch.mv", "inductor x @ colsum")}
            base = "library kb14::colsum_matvec"
            by_method = single_calls_in_turn(in_turn, x, backend, flush_rounds=args.interleaved,
                                             kernelbench_rounds=max(1, args.interleaved // 4),
                                             do_bench_rounds=args.do_bench_rounds)
            for method, name, fields, text in in_turn_summary(by_method, base, "library", "the library"):
                rows_out.append({"shape": [rows, 8192], "fn": name, "note": notes[name], **fields})
                print(f"{rows}x8192 {name:30s} {method:11s} in turn {text}", flush=True)
            continue
        copies = timing.rotating_copies(x, l2, cap=64)
        for name, fn in fns.items():
            t = time_methods(fn, x, copies, backend, budget_s=0.3)
            rows_out.append({"shape": [rows, 8192], "fn": name, "note": notes[name], **t})
            print(f"{rows}x8192 {name:30s} kb {t['kernelbench']:7.2f}  db {t['do_bench']:7.2f}  "
                  f"rf {t['read_flush']:7.2f}  rot {t['rotating']:7.2f}  {notes[name]}", flush=True)
        del copies
    if not args.ncu:
        (out_dir / "matvec_variants.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(dev),
                                                                  "torch": torch.__version__, "rows": rows_out},
                                                                 indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
