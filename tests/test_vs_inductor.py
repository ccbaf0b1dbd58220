"""scripts/vs_inductor.py's rounds in turn, on the CPU: the passes together keep the balanced
order, and their times pool into one gap with each pass's median beside it."""

import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

pytest.importorskip("triton.testing")  # tail_variants times with triton's do_bench
import vs_inductor  # noqa: E402
from harness import timing  # noqa: E402


def test_passes_together_give_every_function_every_place_equally_often(monkeypatch):
    import tail_variants

    places = {"flush": Counter(), "kernelbench": Counter(), "do_bench": Counter()}

    def recorder(method):
        def record(fns, *args, rounds=None, backend=None, first_round=0):
            rounds = args[-1] if rounds is None else rounds  # do_bench_in_turn takes it by position
            for r in range(first_round, first_round + rounds):
                places[method].update((name, i) for i, name in enumerate(timing.round_order(list(fns), r)))
            return {}
        return record

    class Backend:
        def sync(self):
            pass

    monkeypatch.setattr(tail_variants.timing, "interleaved_robust_time", recorder("flush"))
    monkeypatch.setattr(tail_variants.timing, "paired_time", recorder("kernelbench"))
    monkeypatch.setattr(tail_variants, "do_bench_in_turn", recorder("do_bench"))
    fns = {name: (lambda y: None) for name in ("ours", "inductor", "eager", "torch_sum")}
    for p in range(vs_inductor.PASSES):
        vs_inductor.in_turn_pass(fns, None, Backend(), p, vs_inductor.PASSES)
    rounds = {"flush": vs_inductor.ROUNDS, "kernelbench": vs_inductor.ROUNDS, "do_bench": vs_inductor.DO_BENCH_ROUNDS}
    for method, counts in places.items():
        assert len(counts) == len(fns) ** 2, method
        assert set(counts.values()) == {rounds[method] // len(fns)}, method


def test_pooled_in_turn_pools_rounds_and_keeps_each_pass_median():
    def one_pass(gap_ms):
        ours = [0.010 + gap_ms + 0.001 * i for i in range(5)]
        peer = [0.010 + 0.001 * i for i in range(5)]
        return {"read_flush": {"ours": ours, "inductor": peer}}

    medians, gaps = vs_inductor.pooled_in_turn([one_pass(0.002), one_pass(-0.001), one_pass(0.002)])
    gap = gaps["read_flush_interleaved"]
    assert gap["rounds"] == 15
    assert gap["pass_medians"] == pytest.approx([2.0, -1.0, 2.0])
    assert gap["median"] == pytest.approx(2.0)
    assert gap["ci95"][0] <= gap["median"] <= gap["ci95"][1]
    assert medians["inductor"]["read_flush_interleaved"] == pytest.approx(12.0)
    assert vs_inductor.gap_verdict({"ci95": [0.1, 0.3]}) == "behind"
    assert "(passes +2.00 -1.00 +2.00)" in vs_inductor.gap_text(gap)


def test_peers_table_gives_each_reader_its_gap_to_ours_and_share_of_the_ceiling():
    point = {"shape": [1024, 8192], "dtype": "float32", "bytes": 1 << 25, "rounds": 400,
             "us": {"ours": 12.0, "cublas_gemv": 14.0, "empty": 3.9},
             "minus_ours_us": {"cublas_gemv": {"median": 2.0, "ci95": [1.9, 2.1]}, "empty": {"median": -8.1,
                                                                                            "ci95": [-8.2, -8.0]}},
             "pct_of_ceiling": {"ours": 63.9, "cublas_gemv": 54.8}}
    result = {"gpu": "GPU", "torch": "2.x", "commit": "abc", "read_ceiling_gbps": 4380.0, "rows": [],
              "host_us": {}, "peers": [point], "peers_read_ceiling_gbps": 4400.0}
    text = vs_inductor.markdown(result)
    assert "400 rounds; read ceiling 4400 GB/s" in text
    assert "| ours | 12.00, 63.9% |" in text
    assert "| cublas_gemv | 14.00 (+2.00 [+1.90, +2.10]), 54.8% |" in text
    assert "| empty | 3.90 (-8.10 [-8.20, -8.00]) |" in text
