"""The library's tail and Inductor's in torch's CUDA graph, at the rotations the microbenchmarks use.

    PYTHONPATH=. python scripts/experiments/torch_graph.py ROWS COLS   # fp32, needs a GPU

`kernels.div_sum_scale` as users call it, timed by `harness.timing.graph_time` (the rotating
method of bench.py and tail_variants) with 20 calls over 9 copies, 64 over 13 and 64 over 26:
what `warp_row_staging ROWS COLS graph` (scripts/microbench at 39a345c) measured with its own CUDA graph. It shows
which of the two harnesses a user's graph agrees with (results/kernel_notes.md).
"""
import sys

import torch

import kernels
from harness import timing


def main() -> None:
    rows, cols = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    y = torch.randn(rows, cols, device="cuda")

    def eager(t):
        return torch.sum(t / 2.0, 1, keepdim=True) * 1.5

    def ours(t):
        return kernels.div_sum_scale(t, 2.0, 1.5)

    inductor = torch.compile(eager, dynamic=False)
    assert torch.equal(ours(y), eager(y)), "the library's tail must return eager's bits"
    inductor(y)
    for calls, n_copies in ((20, 9), (64, 13), (64, 26)):
        copies = [y] + [y.clone() for _ in range(n_copies - 1)]
        per_call_us: dict[str, list[float]] = {"ours": [], "inductor": []}
        for _ in range(3):
            for name, fn in (("ours", ours), ("inductor", inductor)):
                r = timing.graph_time(fn, [(c,) for c in copies], calls_per_graph=calls, replays=20)
                per_call_us[name].append(round(r["median_ms"] * 1e3, 3))
        print(f"{rows} x {cols} fp32, torch CUDA graph, {calls} calls over {n_copies} copies, us per call, "
              f"3 repeats of 20 replays: {per_call_us}", flush=True)


if __name__ == "__main__":
    main()
