"""check.py's batch mode: every pair of tests/problems/, each in its own process; a
crashing and a hanging candidate fail alone; shards merge into the table of one run; a pair's
timeout counts from when its process begins the pair, not from its start."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import check
from harness import batch
from tests.cases import PROBLEMS, WRONG_BECAUSE

# candidate file -> (verdict, reason); every other candidate passes
EXPECTED = {f"{name}_wrong.py": ("FAIL", reason) for name, reason in WRONG_BECAUSE.items()}
EXPECTED.update({"elementwise_crash.py": ("CRASH", "crash"), "elementwise_hang.py": ("TIMEOUT", "timeout")})
ARGS = ["--device", "cpu", "--workers", "2", "--timeout", "30", "--trials", "2", "--quiet"]


def _verdicts(result):
    return [(r["problem"], r["candidate"], r["verdict"], r["reason"]) for r in result["results"]]


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("batch") / "all.json"
    rc = check.main(["--problems", str(PROBLEMS), "--json", str(out), *ARGS])
    assert rc == 1  # some candidates are wrong on purpose
    return json.loads(out.read_text())


def test_every_pair_gets_its_verdict(whole_run):
    got = {r["candidate"]: (r["verdict"], r["reason"]) for r in whole_run["results"]}
    assert len(got) == 18
    for candidate, verdict in got.items():
        assert verdict == EXPECTED.get(candidate, ("PASS", None)), candidate
    assert whole_run["seconds_total"] > 0 and whole_run["config"]["pairs_in_folder"] == 18


def test_two_shards_merge_to_the_whole_run(whole_run, tmp_path, capsys):
    parts = []
    for k in (1, 2):
        part = tmp_path / f"shard{k}.json"
        check.main(["--problems", str(PROBLEMS), "--shard", f"{k}/2", "--json", str(part), *ARGS])
        parts.append(str(part))
    halves = [json.loads(Path(p).read_text()) for p in parts]
    assert len(halves[0]["results"]) + len(halves[1]["results"]) == 18
    merged = tmp_path / "merged.json"
    assert check.main(["--merge", *parts, "--json", str(merged), "--quiet"]) == 1
    m = json.loads(merged.read_text())
    assert _verdicts(m) == _verdicts(whole_run)
    assert m["config"]["complete"] is True
    assert "18 pairs" in capsys.readouterr().out


def test_a_pair_twice_in_the_merge_is_refused(whole_run, tmp_path, capsys):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(whole_run))
    assert check.main(["--merge", str(path), str(path)]) == 2
    assert "more than one file" in capsys.readouterr().err


def test_candidates_go_to_the_longest_problem_name(tmp_path):
    problem = "class Model:\n    pass\ndef get_inputs():\n    pass\ndef get_init_inputs():\n    pass\n"
    (tmp_path / "gemm.py").write_text(problem)
    (tmp_path / "gemm_epilogue.py").write_text(problem)
    (tmp_path / "gemm_epilogue_fast.py").write_text("class ModelNew:\n    pass\n")
    (tmp_path / "gemm_v2.py").write_text("class ModelNew:\n    pass\n")
    (tmp_path / "gemm_notes.py").write_text("x = 1\n")  # no ModelNew: not a candidate
    pairs = [(p.problem, p.candidate) for p in batch.discover(tmp_path)]
    assert pairs == [("gemm", "gemm_v2.py"), ("gemm_epilogue", "gemm_epilogue_fast.py")]


@pytest.mark.parametrize("text", ["2", "0/2", "3/2", "a/b"])
def test_bad_shards_are_named(text):
    with pytest.raises(ValueError, match="shard"):
        batch.parse_shard(text)


def test_shards_are_a_partition():
    pairs = list(range(11))
    parts = [batch.shard_of(pairs, (k, 3)) for k in (1, 2, 3)]
    assert sorted(sum(parts, [])) == pairs


def test_bench_batch_times_each_pair_and_isolates_a_crash(tmp_path, capsys):
    import shutil

    import bench

    for name in ("elementwise.py", "elementwise_ok.py", "elementwise_wrong.py", "elementwise_crash.py",
                 "mlp.py", "mlp_wrong.py"):
        shutil.copy(PROBLEMS / name, tmp_path / name)
    out = tmp_path / "bench.json"
    rc = bench.main(["--problems", str(tmp_path), "--device", "cpu", "--workers", "2", "--timeout", "120",
                     "--no-compile", "--fast-ceilings", "--kb-trials", "2", "--kb-warmup", "1", "--repeats", "2",
                     "--json", str(out), "--keep", str(tmp_path / "reports")])
    assert rc == 0
    r = json.loads(out.read_text())
    got = {x["candidate"]: x for x in r["results"]}
    # Each pair's own report is kept: its bench JSON (none for the crash) and its printed output.
    kept = {p.name for p in (tmp_path / "reports").iterdir()}
    for stem in ("elementwise__elementwise_ok", "elementwise__elementwise_wrong", "mlp__mlp_wrong"):
        assert {f"{stem}.json", f"{stem}.txt"} <= kept, kept
        assert json.loads((tmp_path / "reports" / f"{stem}.json").read_text())["rows"]
    assert "elementwise__elementwise_crash.txt" in kept and "elementwise__elementwise_crash.json" not in kept
    if importlib.util.find_spec("matplotlib") is not None:
        assert "elementwise__elementwise_ok.png" in kept
    assert (got["elementwise_ok.py"]["verdict"], got["elementwise_ok.py"]["time_ms"] > 0) == ("PASS", True)
    assert (got["elementwise_wrong.py"]["verdict"], got["elementwise_wrong.py"]["reason"]) == ("FAIL", "mismatch")
    assert (got["mlp_wrong.py"]["verdict"], got["mlp_wrong.py"]["reason"]) == ("FAIL", "wrong_dtype")
    assert got["elementwise_crash.py"]["verdict"] == "CRASH"
    assert r["config"]["tool"] == "bench" and "x eager" in capsys.readouterr().out


def test_more_workers_than_gpus_share_them_round_robin(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    gpus = batch.visible_gpus()
    assert gpus == ["2", "5"]
    assert [batch.gpu_of_slot(s, gpus) for s in range(5)] == ["2", "5", "2", "5", "2"]


def _wait_for_child(tmp_path, code: str, timeout_s: float):
    """batch._wait_for on a Python child running `code`, which may touch the file `began`."""
    began = tmp_path / "began"
    proc = subprocess.Popen([sys.executable, "-c", f"import time\nbegan = {str(began)!r}\n{code}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    late, stdout, _ = batch._wait_for(proc, began, timeout_s=timeout_s)
    return late, stdout, proc


def test_start_up_does_not_count_against_the_timeout(tmp_path):
    late, stdout, _ = _wait_for_child(tmp_path, "time.sleep(2)\nopen(began, 'a').close()\nprint('done')", 1.0)
    assert late is None and stdout.strip() == "done"


def test_a_pair_that_began_is_killed_at_its_timeout(tmp_path):
    late, _, proc = _wait_for_child(tmp_path, "open(began, 'a').close()\nwhile True: time.sleep(1)", 0.5)
    assert late == "no result within 0.5 s" and proc.returncode is not None
