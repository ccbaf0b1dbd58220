"""bench.py on other KernelBench problems (tests/problems/): for each, the table, the JSON
and (with matplotlib) the plot, with the correct candidate checked ok and the wrong one not."""

import importlib.util
import json

import pytest

import bench
from tests.cases import PROBLEMS, WRONG_BECAUSE

NAMES = sorted(WRONG_BECAUSE)
QUICK = ["--device", "cpu", "--fast-ceilings", "--kb-trials", "2", "--kb-warmup", "1", "--repeats", "2"]
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@pytest.mark.parametrize("name", NAMES)
def test_problem_table_json_and_plot(name, tmp_path, capsys):
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    argv = ["--reference", f"{PROBLEMS / name}.py:Model", "--model", f"{PROBLEMS / name}_ok.py:ModelNew",
            "--model", f"{PROBLEMS / name}_wrong.py:ModelNew", "--no-compile", "--json", str(out), *QUICK]
    if HAS_MATPLOTLIB:
        argv += ["--plot", str(png)]
    assert bench.main(argv) == 0
    table = capsys.readouterr().out
    assert f"problem {PROBLEMS / name}.py:Model" in table and "reference eager" in table
    r = json.loads(out.read_text())
    assert r["schema"] == "kernelbench-problem-bench/1"
    assert r["estimates"]["bytes_lower_bound"] > 0
    rows = {row["name"].rsplit("/", 1)[-1]: row for row in r["rows"]}
    eager, ok, wrong = rows["reference eager"], rows[f"{name}_ok.py:ModelNew"], rows[f"{name}_wrong.py:ModelNew"]
    assert eager["check"]["ok"] and eager["time_ms"] > 0 and eager["kernelbench"]["mean_ms"] > 0
    # The reference against its own first output: the same bits, but for the CPU convolution,
    # which returned other bits on a later call in 2 of about 10 full suite runs (not reproduced alone).
    assert eager["check"]["bitwise_equal"] or name == "conv_bias_act", eager["check"]
    assert ok["error"] is None and ok["check"]["ok"], ok
    assert ok["speedup_vs_eager"] > 0 and ok["pct_of_roofline_estimate"] > 0
    assert wrong["error"] is not None or not wrong["check"]["ok"], wrong
    if name == "several_inputs":  # it returns the right values, computed in its input's storage
        assert wrong["check"]["kind"] == "mutated_input", wrong
    if HAS_MATPLOTLIB:
        assert png.stat().st_size > 0
    # A saved run prints again.
    assert bench.main(["--from-json", str(out)]) == 0


def test_problem_flops_are_counted_for_a_gemm(tmp_path):
    out = tmp_path / "r.json"
    argv = ["--reference", f"{PROBLEMS / 'gemm_epilogue'}.py:Model", "--no-compile", "--json", str(out), *QUICK]
    assert bench.main(argv) == 0
    r = json.loads(out.read_text())
    assert r["estimates"]["flops"] == 2 * 32 * 64 * 48  # batch x in x out, multiply and add


@pytest.mark.parametrize("argv,match", [
    (["--sweep"], "--sweep is for this repository's problem"),
    (["--batch", "3"], "--batch is for this repository's problem"),
    (["--set", "nope=1"], "no module-level value 'nope'"),
])
def test_problem_flags_are_checked(argv, match, capsys):
    rc = bench.main(["--reference", f"{PROBLEMS / 'softmax'}.py:Model", *QUICK, *argv])
    assert rc == 2
    assert match in capsys.readouterr().err


def test_set_without_reference_is_refused(capsys):
    assert bench.main([*QUICK, "--set", "batch_size=3"]) == 2
    assert "--set needs --reference" in capsys.readouterr().err


def test_a_time_below_the_roofline_floor_is_called_impossible():
    from harness.problem_benchmark import IMPOSSIBLE_MARGIN, beyond_floor

    row = {"kernelbench": {"mean_ms": 0.001}, "robust": {"median_ms": 2.0}}
    found = beyond_floor(row, floor_ms=1.0)
    assert [x["method"] for x in found] == ["kernelbench mean"]  # a side stream fools the events, not the median
    assert beyond_floor({"kernelbench": {"mean_ms": 1.0 / IMPOSSIBLE_MARGIN * 1.01}, "robust": {}}, 1.0) == []


def test_the_batch_row_of_an_impossible_time_fails():
    from harness.batch import _bench_summary

    rows = [{"name": "reference eager", "time_ms": 1.0},
            {"name": "cand", "time_ms": 0.01, "kernelbench": {"mean_ms": 0.01}, "error": None,
             "check": {"ok": True, "kind": None, "reason": None},
             "impossible": [{"method": "strict median", "time_ms": 0.01, "floor_ms": 0.5}]}]
    summary = _bench_summary({"rows": rows})
    assert (summary["verdict"], summary["reason"]) == ("FAIL", "beyond_roofline")
    assert "below the roofline floor" in summary["message"] and summary["kernelbench_ms"] == 0.01


def test_the_table_labels_both_methods(tmp_path, capsys):
    argv = ["--reference", f"{PROBLEMS / 'softmax'}.py:Model", "--model", f"{PROBLEMS / 'softmax_ok'}.py:ModelNew",
            "--no-compile", *QUICK]
    assert bench.main(argv) == 0
    table = capsys.readouterr().out
    assert "KernelBench" in table and "strict" in table and "its method as it is" in table
