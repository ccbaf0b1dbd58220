"""How long the tail's first blocks wait at griddepcontrol.wait, by what ran before them.

A probe kernel on the library's 1024-block grid, launched as a programmatic dependent (as
the library's kernels are), stores for each block the wait's length (%globaltimer ns and
SM cycles). It runs after each of: nothing (the GPU idle), the read flush that bench.py and
vs_inductor take (a spin, then torch.max over 256 MB), KernelBench's write flush (fill of 256
MB), and the library's own tail at 1024 x 8192 fp32, each followed by an event as the timed
rounds have. Prints, per case, the quartiles over runs of the first SMs' blocks' wait and of
all blocks'. Then the test of the warming gate without a record (its second warp waits and
sets a shared flag; thread 0 watches for it at most 800 cycles) alone, in three forms, after
the same four: how many of those blocks gave up, and the cycles watched.

    python scripts/experiments/pdl_wait_probe.py OUTDIR
"""
import ctypes
import json
import statistics
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]
from harness import timing  # noqa: E402
import kernels  # noqa: E402
from tail_variants import build_shared_library  # noqa: E402

BLOCKS = 1024  # the library's grid at 1024 x 8192


def quartiles(values: list) -> list:
    return [round(x, 1) for x in statistics.quantiles(values, n=4)]


def main() -> int:
    out_dir = Path(sys.argv[1])
    lib = build_shared_library("experiments/pdl_wait_probe", out_dir)
    lib.kb14x_wait_probe.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.kb14x_gate_probe.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p]
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    backend = timing.make_backend(dev)
    y = torch.randn(1024, 8192, device=dev)
    kernels.div_sum_scale(y, 2, 1.5)
    mark = torch.cuda.Event()
    before = {"idle": lambda: None, "read flush": backend.robust_flush, "write flush": backend.flush,
              "library tail 1024x8192": lambda: kernels.div_sum_scale(y, 2, 1.5)}

    def first_blocks_after(run_before, launch, out: torch.Tensor) -> torch.Tensor:
        """out on the host after one launch behind run_before() and an event (as the timed rounds
        have between what ran before and the call), the GPU idle before both."""
        torch.cuda.synchronize()
        run_before()
        mark.record()
        err = launch(out.data_ptr(), torch.cuda.current_stream().cuda_stream)
        if err:
            raise SystemExit(f"launch error {err}")
        return out.cpu()

    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "sms": sms, "cases": {}}
    waits_out = torch.zeros(BLOCKS, 2, dtype=torch.int64, device=dev)  # per block: ns, cycles
    for name, run_before in before.items():
        first, every, first_cycles = [], [], []
        for _ in range(60):
            o = first_blocks_after(run_before, lambda p, s: lib.kb14x_wait_probe(p, BLOCKS, s), waits_out)
            first.append(statistics.median(o[:sms, 0].tolist()))
            every.append(statistics.median(o[:, 0].tolist()))
            first_cycles.append(statistics.median(o[:sms, 1].tolist()))
        report["cases"][name] = {"first_blocks_wait_ns_quartiles": quartiles(first),
                                 "all_blocks_wait_ns_quartiles": quartiles(every),
                                 "first_blocks_wait_cycles_quartiles": quartiles(first_cycles)}
        print(f"{name:24s} first {sms} blocks' wait (median per run; quartiles over 60 runs): {quartiles(first)} ns, "
              f"{quartiles(first_cycles)} cycles; all blocks {quartiles(every)} ns", flush=True)
    # The record-free gate's test alone, in three forms, after each of the same.
    gate_out = torch.zeros(BLOCKS, 2, dtype=torch.int64, device=dev)  # per block: gave up, cycles watched
    report["gate"] = {}
    for how, form in enumerate(("volatile flag, named barrier", "volatile flag, __syncthreads", "shared atomics")):
        for name, run_before in before.items():
            gave_up, watched = [], []
            for _ in range(30):
                o = first_blocks_after(run_before, lambda p, s: lib.kb14x_gate_probe(p, BLOCKS, how, 800, s),
                                       gate_out)[:sms]
                gave_up.append(int(o[:, 0].sum()))
                watched.append(statistics.median(o[:, 1].tolist()))
            report["gate"][f"{form} / {name}"] = {"gave_up_blocks_per_run": gave_up, "watched_cycles_median": watched}
            print(f"gate {form:30s} after {name:24s}: blocks that gave up per run (of {sms}) median "
                  f"{statistics.median(gave_up)} max {max(gave_up)}; cycles watched median {statistics.median(watched)}",
                  flush=True)
    (out_dir / "pdl_wait_probe.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
