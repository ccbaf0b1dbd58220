"""Where KernelBench's timing exceeds the GPU time: the host's launches or the write flush.

Per model (hybrid_evidence's: the reference and the three candidates), at KernelBench's shape and
hybrid_evidence's timing input:
- KernelBench's protocol (synchronize, 256 MB write flush, events around one call);
- the same with the GPU kept busy (a spin of --lead-us) before the flush: the host then queues
  the whole call while the GPU still works, so what is left over the GPU time is the flush's;
- the host time to queue one forward (the GPU spinning meanwhile);
- the GPU time (the read flush, calls queued, median).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hybrid_evidence  # noqa: E402
from harness import results_table  # noqa: E402
from harness.timing import kernelbench_time, make_backend, robust_time  # noqa: E402


def spin_cycles(us: float) -> int:
    khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 1_980_000)  # kHz; absent in older torch
    return int(us * khz / 1e3)


def host_us(model, x, calls: int = 30) -> float:
    """Median host time to queue one forward while the GPU is busy."""
    times = []
    torch.cuda.synchronize()
    torch.cuda._sleep(spin_cycles(200_000))  # 200 ms of GPU work ahead of the host
    for _ in range(calls):
        t = time.perf_counter()
        model(x)
        times.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--lead-us", type=float, default=2000.0)
    p.add_argument("--rounds", type=int, default=1, help="time every model this many times, in turn")
    p.add_argument("--models", nargs="*", help="only these models (default: all)")
    p.add_argument("--json", type=Path)
    p.add_argument("--table", type=Path, help="append rows to this measurements CSV")
    args = p.parse_args()

    batch, inp, hidden = 1024, 8192, 8192
    models = hybrid_evidence.models(batch, inp, hidden, only=args.models)
    x = hybrid_evidence.inputs("rand", batch, inp, hybrid_evidence.TIMING_SEED)
    backend = make_backend(torch.device("cuda"))
    lead = spin_cycles(args.lead_us)

    def lead_flush():
        torch.cuda._sleep(lead)
        backend.flush()

    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "lead_us": args.lead_us, "rows": []}
    with torch.no_grad():
        for name, m in [item for _ in range(args.rounds) for item in models.items()]:
            for _ in range(3):
                m(x)
            kb = kernelbench_time(m, (x,), trials=args.trials, backend=backend)["mean_ms"]
            kb_lead = kernelbench_time(m, (x,), trials=args.trials, backend=backend, flush=lead_flush)["mean_ms"]
            gpu = robust_time(m, (x,), backend=backend, budget_s=2.0, max_calls=300)["median_ms"]
            host = host_us(m, x)
            row = {"model": name, "kernelbench_ms": kb, "kernelbench_gpu_ahead_ms": kb_lead, "read_flush_ms": gpu,
                   "host_us_per_forward": host}
            res["rows"].append(row)
            print(f"{name:>15}: KernelBench {kb:.4f} ms, GPU kept ahead {kb_lead:.4f}, read flush {gpu:.4f}; "
                  f"host {host:.1f} us a forward", flush=True)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    if args.table:
        common = dict(commit=results_table.current_commit(), gpu=res["gpu"], torch=res["torch"],
                      shape=f"{batch}x{inp}x{hidden}", dtype="fp32", note="scripts/experiments/host_gaps.py")
        rows = []
        for r in res["rows"]:
            rows.append(results_table.row(**common, method="KernelBench (256 MB write flush, events, one call; mean)",
                                          implementation=r["model"], time_ms=r["kernelbench_ms"]))
            rows.append(results_table.row(**common, method=f"KernelBench, GPU spinning {args.lead_us:.0f} us first; mean",
                                          implementation=r["model"], time_ms=r["kernelbench_gpu_ahead_ms"]))
            rows.append(results_table.row(**common, method="host time to queue one forward, median",
                                          implementation=r["model"], time_ms=r["host_us_per_forward"] / 1e3))
        results_table.append(rows, args.table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
