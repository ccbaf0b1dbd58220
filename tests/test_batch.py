"""check.py's batch mode: every pair of tests/problems/, each in its own process; a
crashing and a hanging candidate fail alone; shards merge into the table of one run; a pair's
timeout counts from when its process begins the pair, not from its start."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import check
from harness import batch, forkserver
from tests.cases import PROBLEMS, WRONG_BECAUSE

# candidate file -> (verdict, reason); every other candidate passes
EXPECTED = {f"{name}_wrong.py": ("FAIL", reason) for name, reason in WRONG_BECAUSE.items()}
EXPECTED.update({"elementwise_crash.py": ("CRASH", "crash"), "elementwise_hang.py": ("TIMEOUT", "timeout"),
                 # honest for int64 targets / a bool mask, which KernelBench's protocol casts to floats
                 "cross_entropy_int_targets.py": ("FAIL", "forward_error"),
                 "masked_cumsum_bool_mask.py": ("FAIL", "forward_error"),
                 "mask_buffer_bool_mask.py": ("FAIL", "forward_error")})
# Pairs at once: the machine's cores and one more, up to 8 (the hanging pair sleeps in its slot for its timeout;
# a GPU machine's CUDA torch takes seconds a process to import).
WORKERS = str(min(8, (os.cpu_count() or 2) + 1))
# A pair takes 1-3 s here once its process has begun it; the timeout (the hanging pair's cost) is a few times that.
ARGS = ["--device", "cpu", "--workers", WORKERS, "--timeout", "12", "--trials", "2", "--quiet"]


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
    assert len(got) == 27
    for candidate, verdict in got.items():
        assert verdict == EXPECTED.get(candidate, ("PASS", None)), candidate
    assert whole_run["seconds_total"] > 0 and whole_run["config"]["pairs_in_folder"] == 27


# Six pairs of three problems, a crash among them (the whole folder's hang would cost its timeout twice more).
SHARDED = ["elementwise.py", "elementwise_ok.py", "elementwise_wrong.py", "elementwise_crash.py", "reduction.py",
           "reduction_ok.py", "reduction_wrong.py", "softmax.py", "softmax_ok.py"]


def test_two_shards_merge_to_the_whole_run(whole_run, tmp_path, capsys):
    folder = tmp_path / "problems"
    folder.mkdir()
    for name in SHARDED:
        shutil.copy(PROBLEMS / name, folder / name)
    # The whole folder's run holds these pairs too, in the same order.
    whole = [v for v in _verdicts(whole_run) if v[1] in SHARDED]
    parts = []
    for k in (1, 2):
        part = tmp_path / f"shard{k}.json"
        check.main(["--problems", str(folder), "--shard", f"{k}/2", "--json", str(part), *ARGS])
        parts.append(str(part))
    halves = [json.loads(Path(p).read_text()) for p in parts]
    assert len(halves[0]["results"]) == len(halves[1]["results"]) == 3
    merged = tmp_path / "merged.json"
    assert check.main(["--merge", *parts, "--json", str(merged), "--quiet"]) == 1
    m = json.loads(merged.read_text())
    assert len(whole) == 6 and _verdicts(m) == whole
    assert {v[2] for v in _verdicts(m)} == {"PASS", "FAIL", "CRASH"}
    assert m["config"]["complete"] is True
    assert "6 pairs" in capsys.readouterr().out


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


def test_a_report_cut_short_is_that_pairs_crash_not_the_batchs(tmp_path):
    # A candidate that leaves half a JSON report behind (as a value JSON could not hold once did).
    shutil.copy(PROBLEMS / "softmax.py", tmp_path / "softmax.py")
    shutil.copy(PROBLEMS / "softmax_ok.py", tmp_path / "softmax_ok.py")
    (tmp_path / "softmax_cut.py").write_text(
        "import os, sys\nclass ModelNew:\n    pass\n"
        "open(sys.argv[sys.argv.index('--json') + 1], 'w').write('{\"verdict\": ')\nos._exit(0)\n")
    result = batch.run_batch(str(tmp_path), device="cpu", workers=1, timeout_s=120, trials=1, extra=["--quiet"])
    got = {r["candidate"]: (r["verdict"], r["message"]) for r in result["results"]}
    assert got["softmax_ok.py"][0] == "PASS"
    assert got["softmax_cut.py"][0] == "CRASH" and "JSON report is not valid" in got["softmax_cut.py"][1]


# Candidates run in name order on one slot: the first leaves a mark in its process and patches the
# checker to pass everything; the second is wrong, and notices the mark if it is there.
LEAVES_A_MARK = """import builtins, torch, harness.checker
from elementwise_ok import ModelNew
builtins.KB_EARLIER_PAIR = True
harness.checker.run_check = lambda *a, **k: {"verdict": "PASS"}
"""
SEES_THE_MARK = """import builtins, torch
class ModelNew(torch.nn.Module):
    def __init__(self, alpha):
        super().__init__()
        if hasattr(builtins, "KB_EARLIER_PAIR"):
            raise RuntimeError("an earlier pair's process state")
    def forward(self, x):
        return x
"""


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "fresh-python"])
def test_a_pair_never_sees_an_earlier_pairs_process_state(tmp_path, monkeypatch, fork):
    for name in ("elementwise.py", "elementwise_ok.py"):
        shutil.copy(PROBLEMS / name, tmp_path / name)
    (tmp_path / "elementwise_a_marks.py").write_text(LEAVES_A_MARK)
    (tmp_path / "elementwise_b_wrong.py").write_text(SEES_THE_MARK)
    monkeypatch.setattr(forkserver, "available", lambda: fork)  # False: every pair its own Python, as off Linux
    result = batch.run_batch(str(tmp_path), device="cpu", workers=1, timeout_s=120, trials=1, extra=["--quiet"])
    got = {r["candidate"]: (r["verdict"], r["reason"]) for r in result["results"]}
    assert got == {"elementwise_a_marks.py": ("PASS", None), "elementwise_b_wrong.py": ("FAIL", "mismatch"),
                   "elementwise_ok.py": ("PASS", None)}


# Kills the process it was forked from (only that one: never the test's), then waits to be ended.
KILLS_ITS_SERVER = """import os, signal, time
if b"harness.forkserver" in open(f"/proc/{os.getppid()}/cmdline", "rb").read():
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)
class ModelNew:
    pass
"""


@pytest.mark.skipif(not forkserver.available(), reason="pairs are forked on Linux only")
def test_a_pair_that_kills_the_fork_server_crashes_and_the_next_pair_gets_a_new_one(tmp_path):
    for name in ("elementwise.py", "elementwise_ok.py", "elementwise_wrong.py"):
        shutil.copy(PROBLEMS / name, tmp_path / name)
    (tmp_path / "elementwise_kills.py").write_text(KILLS_ITS_SERVER)
    result = batch.run_batch(str(tmp_path), device="cpu", workers=1, timeout_s=120, trials=1, extra=["--quiet"])
    got = {r["candidate"]: r for r in result["results"]}
    assert got["elementwise_kills.py"]["verdict"] == "CRASH"
    assert "the fork server ended before this pair's process did" in got["elementwise_kills.py"]["message"]
    assert [got[c]["verdict"] for c in ("elementwise_ok.py", "elementwise_wrong.py")] == ["PASS", "FAIL"]


@pytest.mark.gpu
def test_forked_pairs_each_start_their_own_cuda_context(tmp_path):
    for name in ("elementwise.py", "elementwise_ok.py", "elementwise_wrong.py", "softmax.py", "softmax_ok.py"):
        shutil.copy(PROBLEMS / name, tmp_path / name)
    result = batch.run_batch(str(tmp_path), device="cuda", workers=2, timeout_s=300, trials=2, extra=["--quiet"])
    got = {r["candidate"]: (r["verdict"], r["reason"]) for r in result["results"]}
    assert got == {"elementwise_ok.py": ("PASS", None), "elementwise_wrong.py": ("FAIL", "mismatch"),
                   "softmax_ok.py": ("PASS", None)}, result["results"]


def test_a_whole_file_copy_of_its_problem_is_a_candidate_and_ignored_files_say_why(tmp_path):
    problem = (PROBLEMS / "softmax.py").read_text()
    (tmp_path / "softmax.py").write_text(problem)
    # KernelBench's candidates often keep the problem's Model, get_inputs and sizes.
    (tmp_path / "softmax_copy.py").write_text(problem + "\n\nclass ModelNew(Model):\n    pass\n")
    (tmp_path / "softmax_notes.py").write_text("x = 1\n")
    (tmp_path / "other_new.py").write_text("class ModelNew:\n    pass\n")
    (tmp_path / "_helpers.py").write_text("y = 2\n")
    pairs, ignored = batch.discover_all(tmp_path)
    assert [(p.problem, p.candidate) for p in pairs] == [("softmax", "softmax_copy.py")]
    why = {item["file"]: item["reason"] for item in ignored}
    assert set(why) == {"softmax_notes.py", "other_new.py", "_helpers.py"}
    assert "no problem" in why["other_new.py"] and "lacks Model" in why["softmax_notes.py"]
    result = batch.run_batch(str(tmp_path), device="cpu", workers=1, timeout_s=120, trials=1, extra=["--quiet"])
    assert [(r["candidate"], r["verdict"]) for r in result["results"]] == [("softmax_copy.py", "PASS")]
    assert "ignored other_new.py" in batch.format_batch(result)


def _derived_problem(folder: Path) -> None:
    """A problem whose sizes derive from others, as KernelBench's conv problems do."""
    (folder / "derived.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, bias_shape):\n        super().__init__()\n"
        "        self.bias = nn.Parameter(torch.randn(bias_shape))\n\n"
        "    def forward(self, x):\n        return x + self.bias\n\n\n"
        "batch_size = 4\nchannels = 3\ninput_shape = (batch_size, channels, 5)\nbias_shape = (channels, 1)\n\n\n"
        "def get_inputs():\n    return [torch.randn(input_shape)]\n\n\n"
        "def get_init_inputs():\n    return [bias_shape]\n")
    (folder / "derived_ok.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, bias_shape):\n        super().__init__()\n"
        "        self.bias = nn.Parameter(torch.randn(bias_shape))\n\n"
        "    def forward(self, x):\n        return self.bias + x\n")


def test_batch_forwards_set_size_flags_and_seed_to_each_pair(tmp_path):
    _derived_problem(tmp_path)
    keep = tmp_path / "kept"
    rc = check.main(["--problems", str(tmp_path), "--device", "cpu", "--workers", "1", "--trials", "1", "--quiet",
                     "--set", "channels=6", "--seed", "7", "--keep", str(keep)])
    assert rc == 0
    report = json.loads((keep / "derived__derived_ok.json").read_text())
    values = report["config"]["problem_values"]
    # The derived sizes follow the override: the file's module-level code ran again.
    assert (values["channels"], values["bias_shape"], values["input_shape"]) == (6, [6, 1], [4, 6, 5])
    assert report["config"]["seed"] == 7 and report["trials"][0]["reference_shape"] == [4, 6, 5]


def test_batch_size_flag_reaches_the_pair_as_its_problem_name(tmp_path):
    for name in ("gemm_epilogue.py", "gemm_epilogue_ok.py"):
        (tmp_path / name).write_text((PROBLEMS / name).read_text())
    keep = tmp_path / "kept"
    rc = check.main(["--problems", str(tmp_path), "--device", "cpu", "--workers", "1", "--trials", "1", "--quiet",
                     "--set", "batch_size=3", "--keep", str(keep)])
    assert rc == 0
    report = json.loads((keep / "gemm_epilogue__gemm_epilogue_ok.json").read_text())
    assert report["trials"][0]["reference_shape"][0] == 3
    assert batch.set_arguments({"batch_size": 3, "shape": (2, 2)}) == ["--set", "batch_size=3", "--set", "shape=(2, 2)"]


@pytest.mark.parametrize("flags", [["--set", "no_such_size=3"], ["--hidden", "64"]])
def test_an_unknown_set_name_in_batch_mode_is_an_error(flags, capsys):
    rc = check.main(["--problems", str(PROBLEMS), "--device", "cpu", "--quiet", *flags])
    assert rc == 2
    err = capsys.readouterr().err
    assert "not a module-level value" in err and "softmax.py has no" in err


def test_an_unknown_set_name_in_bench_batch_mode_is_an_error(capsys):
    import bench

    assert bench.main(["--problems", str(PROBLEMS), "--device", "cpu", "--set", "no_such_size=3"]) == 2
    assert "no_such_size" in capsys.readouterr().err


def test_batch_mode_is_strict_unless_told_otherwise(tmp_path):
    for name in ("softmax.py",):
        (tmp_path / name).write_text((PROBLEMS / name).read_text())
    (tmp_path / "softmax_replay.py").write_text((Path(__file__).parent / "cheats" / "replay_after_trials.py").read_text())
    common = ["--problems", str(tmp_path), "--device", "cpu", "--workers", "1", "--quiet"]
    strict_json, plain_json = tmp_path / "strict.json", tmp_path / "plain.json"
    assert check.main([*common, "--strict-seed", "3", "--json", str(strict_json)]) == 1
    row = json.loads(strict_json.read_text())["results"][0]
    assert (row["verdict"], row["reason"]) == ("FAIL", "replayed_output") and "--strict-seed 3" in row["message"]
    assert check.main([*common, "--no-strict", "--json", str(plain_json)]) == 0  # KernelBench's five trials pass it


# ---- slots: pairs handed out as slots free up, one pair per slot at a time (a simulated run) ----


def _fake_pairs(n):
    return [batch.Pair("p", f"p_{i}.py", ".") for i in range(n)]


def test_a_slow_pair_holds_up_only_its_own_slot():
    import threading
    import time as _time

    spans, lock = [], threading.Lock()

    def run(pair, slot):
        began = _time.perf_counter()
        _time.sleep(0.6 if pair.candidate == "p_0.py" else 0.05)
        with lock:
            spans.append((slot, pair.candidate, began, _time.perf_counter()))
        return {"problem": pair.problem, "candidate": pair.candidate, "verdict": "PASS", "seconds": 0.0, "gpu": None}

    results = batch.run_in_slots(_fake_pairs(9), 2, run)
    assert sorted(r["candidate"] for r in results) == sorted(p.candidate for p in _fake_pairs(9))
    slow_slot = next(s for s, c, _, _ in spans if c == "p_0.py")
    # While the slow pair ran, the other slot took every other pair (fixed rounds would give it half).
    assert sum(1 for s, _, _, _ in spans if s != slow_slot) == 8
    # No slot ever ran two pairs at once.
    for slot in {s for s, _, _, _ in spans}:
        mine = sorted((b, e) for s, _, b, e in spans if s == slot)
        assert all(e1 <= b2 for (_, e1), (b2, _) in zip(mine, mine[1:]))


def test_each_record_names_its_gpu_and_timing_takes_one_pair_per_gpu(monkeypatch, tmp_path):
    seen = []

    def fake_run_pair(pair, slot, device, timeout_s, trials, extra, tool, gpus, keep, spawn):
        import time as _time

        _time.sleep(0.1)  # long enough that both slots take pairs
        seen.append((slot, batch.gpu_of_slot(slot, gpus)))
        return {"problem": pair.problem, "candidate": pair.candidate, "verdict": "PASS", "reason": None,
                "message": None, "seconds": 0.01, "slot": slot, "gpu": batch.gpu_of_slot(slot, gpus)}

    (tmp_path / "p.py").write_text("class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n")
    for i in range(4):
        (tmp_path / f"p_{i}.py").write_text("class ModelNew: pass\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,7")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # two GPUs, simulated
    monkeypatch.setattr(batch, "_run_pair", fake_run_pair)
    result = batch.run_batch(str(tmp_path), device="cuda", workers=4, tool="bench")
    assert result["config"]["workers"] == 2  # two GPUs: two timing slots, not four
    assert {g for _, g in seen} == {"3", "7"}
    assert all(r["gpu"] in ("3", "7") for r in result["results"])
    table = batch.format_batch(result)
    assert "per GPU: GPU 3:" in table and "GPU 7:" in table
