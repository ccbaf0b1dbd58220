"""Tests of bench.py that run on a CPU in well under a minute: argument handling, the
JSON it writes, and the structure of its timing loops (with fake timers and flushes)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import bench  # noqa: E402

TINY = ["--device", "cpu", "--batch", "8", "--input", "32", "--hidden", "64",
        "--kb-trials", "2", "--kb-warmup", "1", "--repeats", "2",
        "--no-compile", "--fast-ceilings"]


# ---- the timing loops, observed through fakes ----------------------------------------


class Recorder:
    """Records, in order, every sync, flush, timer start/stop and call."""

    def __init__(self):
        self.events = []

    def sync(self):
        self.events.append("sync")

    def flush(self):
        self.events.append("flush")

    def fn(self, *args):
        self.events.append("call")

    def new_timer(self):
        rec = self

        class FakeTimer:
            def start(self):
                rec.events.append("start")

            def stop(self):
                rec.events.append("stop")

            def elapsed_ms(self):
                return 1.0 + 0.5 * len([e for e in rec.events if e == "stop"]) % 3

        return FakeTimer()

    def kwargs(self):
        return {"sync": self.sync, "flush": self.flush, "new_timer": self.new_timer}


def test_kernelbench_time_structure():
    rec = Recorder()
    res = bench.kernelbench_time(rec.fn, warmup=3, trials=7, **rec.kwargs())
    ev = rec.events
    assert ev.count("call") == 3 + 7  # exactly warmup + trials calls
    # warm-up: each call followed by a sync, no flush, no timer
    assert ev[:6] == ["call", "sync"] * 3
    # every timed trial: sync, flush, start, ONE call, stop, sync
    assert ev[6:] == ["sync", "flush", "start", "call", "stop", "sync"] * 7
    assert res["trials"] == 7 and res["warmup"] == 3
    assert len(res["times_ms"]) == 7
    assert res["min_ms"] <= res["mean_ms"] <= res["max_ms"]
    assert res["std_ms"] >= 0


def test_kernelbench_time_statistics_match_numpy_conventions():
    times = iter([1.0, 2.0, 3.0, 6.0])

    class T:
        def start(self):
            pass

        def stop(self):
            pass

        def elapsed_ms(self):
            return next(times)

    res = bench.kernelbench_time(lambda: None, warmup=0, trials=4, sync=lambda: None,
                                 flush=lambda: None, new_timer=T)
    assert res["mean_ms"] == pytest.approx(3.0)
    # population standard deviation, as np.std
    assert res["std_ms"] == pytest.approx(((4 + 1 + 0 + 9) / 4) ** 0.5)
    assert (res["min_ms"], res["max_ms"]) == (1.0, 6.0)


def test_robust_time_flushes_before_every_timed_call():
    rec = Recorder()
    res = bench.robust_time(rec.fn, warmup=2, min_calls=5, max_calls=5, budget_s=None, **rec.kwargs())
    ev = rec.events
    assert ev.count("call") == 2 + 5
    timed = ev[ev.index("start") - 1:]
    # flush, start, call, stop for each timed call
    body = [e for e in timed if e != "sync"]
    assert body == ["flush", "start", "call", "stop"] * 5
    assert res["calls"] == 5
    assert res["q1_ms"] <= res["median_ms"] <= res["q3_ms"]
    assert res["iqr_ms"] == pytest.approx(res["q3_ms"] - res["q1_ms"])


def test_robust_time_budget_clamps_calls():
    rec = Recorder()
    res = bench.robust_time(rec.fn, warmup=1, min_calls=3, max_calls=9, budget_s=1e6, **rec.kwargs())
    assert res["calls"] == 9  # a huge budget is capped at max_calls
    rec = Recorder()
    res = bench.robust_time(rec.fn, warmup=1, min_calls=3, max_calls=9, budget_s=0.0, **rec.kwargs())
    assert res["calls"] == 3  # a zero budget still gets min_calls


def test_interleaved_robust_time_balances_the_order_and_flushes_before_each_call():
    from harness import timing

    rec = Recorder()
    calls = []
    backend = timing.Backend(torch.device("cpu"), "fake", rec.sync, rec.flush, rec.new_timer, 0,
                             robust_flush=rec.flush)
    fns = {name: (lambda n: lambda: (calls.append(n), rec.fn()))(name) for name in "abc"}
    times = timing.interleaved_robust_time(fns, rounds=4, backend=backend)
    assert {k: len(v) for k, v in times.items()} == {"a": 4, "b": 4, "c": 4}
    assert calls[3:] == list("abc" "bca" "cab" "cba")  # after one warm-up call each: round_order
    body = [e for e in rec.events[rec.events.index("start") - 1:] if e != "sync"]
    assert body == ["flush", "start", "call", "stop"] * 12
    diffs = timing.paired_differences(times, "a")
    assert set(diffs) == {"b - a", "c - a"}
    lo, hi = diffs["b - a"]["ci95_ms"]
    assert lo <= diffs["b - a"]["median_ms"] <= hi


def test_calls_in_turn_runs_nothing_between_calls_unless_asked():
    from harness import timing

    rec = Recorder()
    calls = []
    fns = {name: (lambda n: lambda: (calls.append(n), rec.fn()))(name) for name in "ab"}
    times = timing.calls_in_turn(fns, rounds=3, new_timer=rec.new_timer, sync=rec.sync)
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3}
    assert calls == list("ab" "ba" "ab")  # round_order for two names, no warm-up
    assert [e for e in rec.events if e != "sync"] == ["start", "call", "stop"] * 6
    assert rec.events[-1] == "sync"


def test_in_turn_loops_continue_the_order_from_first_round():
    from harness import timing

    rec = Recorder()
    backend = timing.Backend(torch.device("cpu"), "fake", rec.sync, rec.flush, rec.new_timer, 0,
                             robust_flush=rec.flush)
    calls = []
    fns = {name: (lambda n: lambda: calls.append(n))(name) for name in "abc"}
    timing.interleaved_robust_time(fns, rounds=2, backend=backend, first_round=2)
    assert calls[3:] == list("cab" "cba")  # rounds 2 and 3 of round_order, after one warm-up each
    calls.clear()
    timing.paired_time(fns, rounds=2, backend=backend, first_round=2)
    assert calls == list("cab" "cba")


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7])
def test_round_order_puts_each_function_in_each_place_and_behind_each_other_equally_often(n):
    from collections import Counter

    from harness import timing

    names = [f"f{i}" for i in range(n)]
    period = n if n % 2 == 0 else 2 * n
    places, followers = Counter(), Counter()
    for r in range(3 * period):
        order = timing.round_order(names, r)
        assert sorted(order) == names
        places.update(enumerate(order))
        followers.update(zip(order, order[1:]))
    assert set(places.values()) == {3 * period // n}
    assert len(followers) == n * (n - 1)  # every ordered pair of neighbours occurs ...
    assert len(set(followers.values())) <= 1  # ... equally often


def test_median_interval_is_the_binomial_order_statistics():
    from harness import timing

    # Ranks 40 and 61 of 100: the textbook 95% interval for a median (each tail 1.8%).
    assert timing.median_interval(range(100, 0, -1)) == (40, 61)
    # Five values leave no rank with both tails under 2.5%: the whole range (94% coverage).
    assert timing.median_interval([3.0, 1.0, 5.0, 2.0, 4.0]) == (1.0, 5.0)
    assert timing.median_interval([7.0]) == (7.0, 7.0)
    # A gap the rounds resolve: shifted differences give an interval that excludes 0.
    lo, hi = timing.median_interval([0.5 + 0.01 * ((7 * i) % 13 - 6) for i in range(200)])
    assert 0 < lo <= 0.5 <= hi < 0.6


def test_host_backend_times_real_work():
    be = bench.make_backend(torch.device("cpu"), flush_bytes=1 << 20)
    res = bench.kernelbench_time(torch.mm, (torch.randn(64, 64), torch.randn(64, 64)),
                                 warmup=1, trials=3, backend=be)
    assert res["min_ms"] > 0


# ---- argument handling ----------------------------------------------------------------


def test_unknown_model_module(capsys):
    assert bench.main(TINY + ["--model", "no_such_module_xyz:Model"]) == 2
    err = capsys.readouterr().err
    assert "no_such_module_xyz" in err and "not found" in err
    assert "Traceback" not in err


def test_unknown_model_class(capsys):
    assert bench.main(TINY + ["--model", "reference:NoSuchClass"]) == 2
    assert "has no class 'NoSuchClass'" in capsys.readouterr().err


def test_model_spec_without_class(capsys):
    assert bench.main(TINY + ["--model", "reference"]) == 2
    assert "MODULE:CLASS" in capsys.readouterr().err


def test_model_from_missing_file(capsys):
    assert bench.main(TINY + ["--model", "/nonexistent/dir/cand.py:ModelNew"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_model_from_file_path(tmp_path):
    f = tmp_path / "cand.py"
    f.write_text("import torch\nclass Cand(torch.nn.Module):\n    pass\n")
    cls = bench.load_model_class(f"{f}:Cand")
    assert cls.__name__ == "Cand"


def test_cuda_without_gpu(capsys, monkeypatch):
    # Hide the GPU where there is one, so the test runs (and means the same) everywhere.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main(["--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--device cuda" in err and "--device cpu" in err


def test_oversized_sizes(capsys):
    rc = bench.main(["--device", "cpu", "--batch", "1000000", "--input", "100000", "--hidden", "100000"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "do not fit" in err and "GiB" in err


def test_nonpositive_size(capsys):
    assert bench.main(TINY[:2] + ["--batch", "0"]) == 2
    assert "--batch must be positive" in capsys.readouterr().err


def test_bad_sweep_list(capsys):
    assert bench.main(TINY + ["--sweep-batches", "1,x"]) == 2
    assert "comma-separated" in capsys.readouterr().err


def test_plot_without_matplotlib(monkeypatch, tmp_path, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert bench.main(TINY + ["--plot", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "matplotlib" in err and "Traceback" not in err


def test_output_folder_missing(capsys):
    assert bench.main(TINY + ["--json", "/nonexistent/dir/out.json"]) == 2
    assert "folder does not exist" in capsys.readouterr().err


# ---- a tiny end-to-end CPU run and its JSON -------------------------------------------


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "out.json"
    rc = bench.main(TINY + ["--json", str(path), "--sweep",
                            "--sweep-batches", "1,3", "--sweep-hiddens", "128,129"])
    assert rc == 0
    return json.loads(path.read_text())


def test_json_top_level(tiny_result):
    r = tiny_result
    assert r["schema"] == bench.SCHEMA
    assert set(r) >= {"schema", "meta", "params", "memory", "ceilings", "rows", "breakdown", "sweep"}
    m = r["meta"]
    for key in ("date", "device", "gpu", "torch", "cuda", "git", "python", "cpu_threads"):
        assert key in m
    assert m["device"] == "cpu" and m["torch"] == torch.__version__
    assert set(m["git"]) == {"commit", "dirty"}
    p = r["params"]
    assert (p["batch"], p["input"], p["hidden"]) == (8, 32, 64)
    assert p["kb_trials"] == 2 and p["kb_warmup"] == 1 and p["repeats"] == 2
    c = r["ceilings"]
    for key in ("read_gbps", "copy_gbps", "fp32_tflops"):
        assert c[key] > 0


def test_json_rows(tiny_result):
    rows = {row["name"]: row for row in tiny_result["rows"]}
    assert {"reference eager", "ModelNew", "matmul alone", "tail ours", "tail eager",
            "tail sum(y,1) only"} <= set(rows)
    assert "reference compiled" not in rows  # --no-compile
    for row in rows.values():
        assert row["error"] is None, row["error"]
        assert row["kind"] in ("model", "tail")
        kb = row["kernelbench"]
        assert kb["trials"] == 2 and kb["warmup"] == 1
        assert kb["min_ms"] <= kb["mean_ms"] <= kb["max_ms"]
        rb = row["robust"]
        assert rb["calls"] == 2 and rb["q1_ms"] <= rb["median_ms"] <= rb["q3_ms"]
        assert row["time_ms"] == rb["median_ms"]
        assert row["pct_of_ceiling"] > 0 and row["gbps"] > 0
        assert row["graph"] is None  # no CUDA graphs on CPU
    assert rows["reference eager"]["speedup_vs_eager"] == pytest.approx(1.0)
    assert rows["reference eager"]["tflops"] > 0 and rows["tail ours"]["tflops"] is None
    assert rows["tail ours"]["bytes"] == (8 * 64 + 8) * 4
    assert rows["reference eager"]["flops"] == 2 * 8 * 32 * 64
    assert rows["ModelNew"]["check"]["bitwise_equal"] is True
    assert rows["tail ours"]["check"]["bitwise_equal"] is True
    b = tiny_result["breakdown"]
    assert b["matmul_ms"] > 0 and "GEMM bounds" in b["statement"]


def test_json_sweep(tiny_result):
    sw = tiny_result["sweep"]
    pts = {(p["batch"], p["hidden"]) for p in sw["points"]}
    assert pts == {(1, 64), (3, 64), (8, 128), (8, 129)}
    for p in sw["points"]:
        assert set(p["variants"]) == {"ours", "eager"}
        for v in p["variants"].values():
            assert v["error"] is None and v["time_ms"] > 0 and v["pct_of_read_ceiling"] > 0
        assert p["variants"]["ours"]["bits_equal_eager"] is True
        assert p["variants"]["eager"]["bits_equal_eager"] is True
        assert p["speedup_vs_eager"] > 0


def test_from_json_replots(tiny_result, tmp_path, capsys):
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(tiny_result))
    assert bench.main(["--from-json", str(path)]) == 0
    assert "tail ours" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert bench.main(["--from-json", str(bad)]) == 2


def test_table_prints(tiny_result):
    text = bench.format_table(tiny_result)
    assert "ceilings:" in text and "tail ours" in text and "sweep" in text


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib not installed")
def test_plots(tiny_result, tmp_path):
    bench.write_plot(tiny_result, str(tmp_path / "sweep.png"))
    no_sweep = dict(tiny_result, sweep=None)
    bench.write_plot(no_sweep, str(tmp_path / "bars.png"))
    for name in ("sweep.png", "bars.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_impossible_row_is_called_so(tiny_result):
    import copy

    result = copy.deepcopy(tiny_result)
    assert all(r.get("impossible") is None for r in result["rows"])  # placeholder ceilings bound nothing
    row = next(r for r in result["rows"] if r["name"] == "tail ours")
    row["impossible"] = [{"method": "kernelbench mean", "time_ms": 1e-6, "floor_ms": 1e-3}]
    line = next(x for x in bench.format_table(result).splitlines() if x.startswith("tail ours"))
    assert "IMPOSSIBLE: kernelbench mean below the roofline floor" in line
