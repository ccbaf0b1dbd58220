"""The tail behind the kernel that writes its input, as in the model, against the tail behind
another tail (vs_inductor's rotating method): where the warming gate pays and where it costs.

In the model the tail follows the GEMM that writes y. The gate warms L2 only behind another
warmed tail launch, so behind a GEMM it never warms and only its record read remains. Here,
for each fp32 shape, CUDA graphs of CALLS pairs [producer writes y_i; tail(y_i)] over rotating
buffers are replayed in turn (timing.round_order), one graph per tail: ours (the op's default,
pdl=True), ours launched plainly (pdl=False, as ModelNew launches it), tail_variants' variants
named by --variants (library_unwarmed: the library's plan without the gate), Inductor's
compiled tail, the eager tail, and the producer alone. A tail's cost behind its producer is
its graph's time per pair minus the producer-alone graph's in the same round. The producer is
cuBLAS's product of x_i (rows x K) with W (cols x K).T into y_i: a short GEMM whose output,
like the model's, was just written through L2. The same tails are then replayed back to back
with no producer (tail after tail over the same buffers). Prints a table; writes
after_producer.json into OUTDIR.

    python scripts/experiments/after_producer.py OUTDIR [--rounds N] [--variants library_unwarmed ...]
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]
from harness import timing  # noqa: E402
import kernels  # noqa: E402
from vs_inductor import compiled_tail, variant_readers  # noqa: E402
import tail_variants  # noqa: E402
from tail_variants import eager_tail  # noqa: E402

SHAPES = ((1024, 8192), (4096, 8192), (16384, 8192))
CALLS = 20  # pairs per graph


def ours(y):
    return kernels.div_sum_scale(y, 2, 1.5)


def ours_plain(y):
    return kernels.div_sum_scale(y, 2, 1.5, pdl=False)


def replay_in_turn(graphs: dict, rounds: int) -> dict:
    """us per call of each graph, one replay per round each, in a balanced order."""
    ms = timing.calls_in_turn({n: g.replay for n, g in graphs.items()}, rounds=rounds,
                              new_timer=timing.CudaEventTimer, sync=torch.cuda.synchronize)
    return {n: [t * 1e3 / CALLS for t in v] for n, v in ms.items()}


def gap(a: list, b: list) -> dict:
    d = [x - y for x, y in zip(a, b)]
    lo, hi = timing.median_interval(d)
    return {"median": statistics.median(d), "ci95": [lo, hi]}


def gap_cell(g: dict) -> str:
    return f" ({g['median']:+.2f} [{g['ci95'][0]:+.2f}, {g['ci95'][1]:+.2f}])"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--variants", nargs="*", default=["library_unwarmed"], choices=list(tail_variants.INDEX),
                        metavar="NAME", help="tail_variants' variants, by name")
    parser.add_argument("--producer-k", type=int, default=128, help="the producer GEMM's inner size (8192: the model's)")
    parser.add_argument("--shapes", nargs="*", default=[f"{r}x{c}" for r, c in SHAPES])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    l2 = timing.l2_cache_bytes(dev)
    report = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, "calls_per_graph": CALLS,
              "rounds": args.rounds, "producer": f"torch.mm(x_i (rows x {args.producer_k}), W.T, out=y_i)", "shapes": []}
    for rows, cols in (tuple(int(v) for v in s.split("x")) for s in args.shapes):
        torch.manual_seed(0)
        n = timing.rotation_buffers(rows * cols * 4, l2, cap=16)
        ys = [torch.empty(rows, cols, device=dev) for _ in range(n)]
        xs = [torch.randn(rows, args.producer_k, device=dev) for _ in range(n)]
        w_t = torch.randn(cols, args.producer_k, device=dev).t()
        tails = {"ours": ours, "ours pdl=False": ours_plain, **variant_readers(ys[0], {name: name for name in args.variants}),
                 "inductor": compiled_tail(), "eager": eager_tail}
        for i in range(n):
            torch.mm(xs[i], w_t, out=ys[i])
        ref = eager_tail(ys[0])
        bits = {k: bool(torch.equal(fn(ys[0]), ref)) for k, fn in tails.items()}

        def pairs(tail):
            def body():
                for c in range(CALLS):
                    torch.mm(xs[c % n], w_t, out=ys[c % n])
                    if tail is not None:
                        tail(ys[c % n])
            return body

        def back_to_back(tail):
            def body():
                for c in range(CALLS):
                    tail(ys[c % n])
            return body

        def capture(body):
            return timing.capture_graph(body, warmup=lambda: (body(), body()))

        behind = replay_in_turn({"producer": capture(pairs(None)), **{k: capture(pairs(f)) for k, f in tails.items()}},
                                args.rounds)
        alone = replay_in_turn({k: capture(back_to_back(f)) for k, f in tails.items()}, args.rounds)
        net = {k: [a - b for a, b in zip(behind[k], behind["producer"])] for k in tails}
        row = {"shape": [rows, cols], "buffers": n, "bits": bits,
               "producer_us": statistics.median(behind["producer"]),
               "behind_producer_us": {k: statistics.median(v) for k, v in net.items()},
               "behind_producer_minus_ours_us": {k: gap(net[k], net["ours"]) for k in tails if k != "ours"},
               "back_to_back_us": {k: statistics.median(v) for k, v in alone.items()},
               "back_to_back_minus_ours_us": {k: gap(alone[k], alone["ours"]) for k in tails if k != "ours"}}
        report["shapes"].append(row)
        print(f"{rows} x {cols} fp32 ({n} buffers; producer {row['producer_us']:.2f} us a call; bits {bits})")
        for k in tails:
            line = f"  {k:18s} behind the producer {row['behind_producer_us'][k]:7.2f}"
            if k != "ours":
                line += gap_cell(row["behind_producer_minus_ours_us"][k])
            line += f"   back to back {row['back_to_back_us'][k]:7.2f}"
            if k != "ours":
                line += gap_cell(row["back_to_back_minus_ours_us"][k])
            print(line, flush=True)
        ys = xs = None  # this shape's buffers, freed before the next (its closures read them)
    (args.out / "after_producer.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
