"""Tests for check.py: every known-wrong candidate is rejected, for the right reason.

Tiny sizes keep them fast on a 2-core CPU; only the summation-order test needs sizes
where a different order shows up at fp32 1e-4 (see `ORDER_SIZES`).
"""

import json
import math
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import check  # noqa: E402

KNOWN_WRONG = os.path.join(ROOT, "tests", "known_wrong.py")
TINY = dict(batch=64, input_size=128, hidden=256)

# A tail that only sums in another order fails fp32 1e-4 on rows whose output is near
# zero (allowed error ~ atol there, while the reordering error grows with the row's
# partial sums). The chance of such a row per trial grows with the batch and with
# hidden (more terms, larger rounding); the scale lifts the error far above atol.
# At these sizes ~5 rows fail per trial (measured), so a passing trial is rare.
ORDER_SIZES = dict(batch=2048, input_size=64, hidden=32768, scale=100.0)


def wrong(name):
    return f"{KNOWN_WRONG}:{name}"


def run(name, **kw):
    args = dict(TINY)
    args.update(kw)
    return check.run_check(model=wrong(name) if ":" not in name else name, **args)


# ---------------------------------------------------------------- passing candidates


def test_reference_against_itself_is_bit_exact():
    r = check.run_check(model="reference:Model", **TINY)
    assert r["verdict"] == "PASS" and r["passed"] and r["reason"] is None
    s = r["summary"]
    assert s["trials_run"] == 5 and s["bit_exact_trials"] == 5
    assert s["pass_rate"] == {"0.0001": 1.0, "0.001": 1.0, "0.01": 1.0}
    assert s["p_kernelbench_5_trials"] == 1.0
    assert s["oracle"]["reference"] == s["oracle"]["candidate"]
    assert s["oracle"]["reference"]["rms"] < 1e-3


def test_modelnew_passes_bit_exact():
    r = check.run_check(model="modelnew:ModelNew", **TINY)
    assert r["passed"] and r["summary"]["bit_exact_trials"] == 5


def test_trial_seeds_follow_kernelbench():
    torch.manual_seed(42)
    expected = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(5)]
    assert check.kernelbench_trial_seeds(5) == expected
    r = check.run_check(model="reference:Model", **TINY)
    assert [t["seed"] for t in r["trials"]] == expected


# ----------------------------------------------------------- rounding, not wrongness


@pytest.mark.parametrize("name", ["ReorderedSum", "Fp64Sum"])
def test_other_summation_order_fails_fp32_but_passes_1e2(name):
    r = run(name, trials=4, **ORDER_SIZES)
    s = r["summary"]
    assert r["verdict"] == "FAIL" and r["reason"] == "mismatch"
    assert s["bit_exact_trials"] == 0
    assert s["pass_rate"]["0.01"] == 1.0  # not a wrong result...
    assert s["pass_rate"]["0.0001"] < 1.0  # ...but KernelBench's fp32 check fails it
    if name == "ReorderedSum":
        assert s["pass_rate"]["0.0001"] <= 0.5
    failing = [t for t in r["trials"] if "mismatch" in t["reasons"]]
    # Near-zero outputs are where it fails: the worst element's |ref| is tiny.
    assert any(abs(t["comparison"]["worst"]["reference"]) < 1e3 for t in failing)
    assert any("1e-2" in h for h in r["hints"])


def test_column_sum_rewrite_is_not_bit_exact_and_fails_fp32():
    r = run("ColumnSum", trials=4, **ORDER_SIZES)
    assert r["reason"] == "mismatch" and r["summary"]["bit_exact_trials"] == 0
    assert r["summary"]["pass_rate"]["0.01"] == 1.0
    # At tiny sizes it can pass allclose, but never bit for bit.
    tiny = run("ColumnSum")
    assert tiny["summary"]["bit_exact_trials"] == 0


# -------------------------------------------------------------------- wrong results


def test_zeros():
    r = run("Zeros")
    assert r["reason"] == "mismatch"
    assert r["summary"]["pass_rate"]["0.01"] == 0.0
    assert all(t["comparison"]["n_fail"] == TINY["batch"] for t in r["trials"])
    assert any("all zeros" in h for h in r["hints"])


@pytest.mark.parametrize("name", ["LastRowZero", "LastRowGarbage"])
def test_last_row_missing(name):
    r = run(name)
    assert r["reason"] == "mismatch" and r["summary"]["trials_passed"] == 0
    for t in r["trials"]:
        assert t["comparison"]["n_fail"] == 1
        assert t["comparison"]["worst"]["index"] == [TINY["batch"] - 1, 0]
    assert f"({TINY['batch'] - 1}, 0)" in r["message"]


def test_wrong_shape():
    r = run("WrongShape")
    assert r["reason"] == "wrong_shape"
    assert r["message"].startswith("FAIL: wrong shape (64, 2) vs (64, 1)")
    r = run("NoKeepdim")
    assert r["reason"] == "wrong_shape" and "(64,) vs (64, 1)" in r["message"]


def test_wrong_dtype_and_not_a_tensor():
    assert run("WrongDtype")["message"].startswith("FAIL: wrong dtype float64 vs float32")
    assert run("ReturnsTuple")["reason"] == "not_a_tensor"


def test_nan_in_one_element():
    r = run("OneNaN")
    assert r["reason"] == "nonfinite"
    assert "NaN" in r["message"] and f"({TINY['batch'] // 2}, 0)" in r["message"]
    assert all(t["nonfinite"]["candidate_where_reference_finite"] == 1 for t in r["trials"])


def test_mutated_input_keeps_kernelbenchs_verdict_and_fails_under_strict():
    # Its values are right: KernelBench passes it (it never looks at the inputs again), and so
    # does the plain check, with a warning; --strict fails it.
    r = run("MutatesInput")
    assert r["verdict"] == "PASS" and r["summary"]["kernelbench_trials_passed"] == 5
    assert r["trials"][0]["mutation"][0]["n_changed"] == TINY["batch"] * TINY["input_size"]
    assert any("wrote into its input in 5/5 trials" in h and "--strict fails it" in h for h in r["hints"])
    strict = run("MutatesInput", strict=True)
    assert strict["reason"] == "mutated_input"
    assert strict["message"].startswith("FAIL: candidate mutated its input")


def test_changed_inputs_counts_values_not_nans_left_in_place():
    from harness.compare import changed_inputs

    x = torch.tensor([1.0, float("nan"), 3.0])
    pristine = [x.clone(), 7, torch.ones(2)]
    assert changed_inputs(pristine, [x, 7, torch.ones(2)]) == []  # a NaN that stays put is no change
    x[0], x[1] = -1.0, 2.0  # one value changed, one NaN overwritten
    assert changed_inputs(pristine, [x, 7, torch.ones(3)]) == [
        {"input": 0, "n_changed": 2, "n_elements": 3}, {"input": 2, "n_changed": 2, "n_elements": 2}]


def test_cached_output():
    r = run("CachesOutput")
    assert r["reason"] == "stale_output"
    assert r["trials"][0]["status"] == "pass"
    assert all("stale_output" in t["reasons"] for t in r["trials"][1:])


# ------------------------------------------------------------- broken candidates


def test_raises_in_forward():
    r = run("RaisesInForward")
    assert r["reason"] == "forward_error" and not r["passed"]
    assert "RuntimeError" in r["message"] and "illegal memory access" in r["message"]
    assert len(r["trials"]) == 1  # stops after the first error
    assert "Traceback" in r["error"]["traceback"]


def test_bad_constructor():
    r = run("BadConstructor")
    assert r["reason"] == "construct_error" and "TypeError" in r["message"]


@pytest.mark.parametrize("spec", ["no_such_module_xyz:ModelNew", f"{KNOWN_WRONG}:NoSuchClass",
                                  "tests/does_not_exist.py:ModelNew"])
def test_cannot_import(spec):
    r = check.run_check(model=spec, **TINY)
    assert r["verdict"] == "FAIL" and r["reason"] == "import_error"
    assert r["message"].startswith("FAIL: cannot import the candidate")
    assert r["trials"] == []


# ----------------------------------------------------------------------- CLI + JSON


def test_main_json_schema(tmp_path, capsys):
    path = tmp_path / "out.json"
    rc = check.main(["--model", wrong("LastRowZero"), "--batch", "64", "--input", "128", "--hidden", "256",
                     "--trials", "3", "--json", str(path), "--quiet"])
    assert rc == 1
    printed = capsys.readouterr().out
    assert printed.startswith("FAIL: 3/3 trials outside allclose")
    data = json.loads(path.read_text())
    assert data["schema_version"] == check.SCHEMA_VERSION
    for key in ("verdict", "passed", "reason", "message", "hints", "config", "summary", "trials", "error", "seconds"):
        assert key in data
    assert data["verdict"] == "FAIL" and data["reason"] == "mismatch"
    assert data["config"]["sizes"] == {"batch": 64, "input": 128, "hidden": 256, "scale": 1.5}
    assert data["config"]["atol"] == data["config"]["rtol"] == 1e-4
    for key in ("trials_run", "trials_passed", "kernelbench_trials_passed", "bit_exact_trials", "max_abs_diff",
                "mean_abs_diff", "pass_rate", "p_trial_kernelbench", "p_kernelbench_5_trials", "oracle"):
        assert key in data["summary"]
    t = data["trials"][0]
    for key in ("index", "seed", "status", "reasons", "kernelbench_pass", "bit_exact", "allclose", "pass_at",
                "comparison", "oracle", "nonfinite", "mutation"):
        assert key in t
    for key in ("index", "reference", "candidate", "abs_diff", "allowed", "ratio", "dominant"):
        assert key in t["comparison"]["worst"]
    assert set(t["oracle"]) == {"reference", "candidate"}


def test_json_path_with_a_tilde_is_written_where_its_folder_was_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    rc = check.main(["--model", wrong("LastRowZero"), "--batch", "8", "--input", "16", "--hidden", "32",
                     "--trials", "1", "--json", "~/tilde.json", "--quiet"])
    assert rc == 1 and json.loads((tmp_path / "tilde.json").read_text())["verdict"] == "FAIL"
    assert not (tmp_path / "~").exists()


def test_main_json_with_nan_is_valid_json(tmp_path):
    path = tmp_path / "nan.json"
    rc = check.main(["--model", wrong("OneNaN"), "--batch", "64", "--input", "128", "--hidden", "256",
                     "--trials", "2", "--json", str(path), "--quiet"])
    assert rc == 1
    data = json.loads(path.read_text())  # strict JSON: NaN is written as the string "nan"
    assert data["trials"][0]["comparison"]["worst"]["candidate"] == "nan"


def test_main_pass_exit_zero_and_options(capsys):
    rc = check.main(["--model", "reference:Model", "--batch", "16", "--input", "32", "--hidden", "64",
                     "--trials", "3", "--seed", "7", "--dtype", "bf16", "--device", "cpu", "--quiet"])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS: 3/3 trials within allclose(atol=0.01, rtol=0.01)")


def test_progress_lines():
    lines = []
    check.run_check(model="reference:Model", trials=3, progress=lines.append, **TINY)
    assert sum(line.startswith("trial ") for line in lines) == 3


def test_tolerance_override():
    r = run("ColumnSum", atol=0.0, rtol=0.0)
    assert r["reason"] == "mismatch"  # only bit-exact passes at 0


def test_bad_arguments_exit_2(capsys):
    assert check.main(["--trials", "0", "--quiet"]) == 2
    assert check.main(["--reference", "no_such_reference_xyz:Model", "--quiet"]) == 2


@pytest.mark.parametrize("argv,message", [
    (["--device", "tpu"], "--device 'tpu' is not a device"),
    (["--device", "meta"], "runs on cpu or cuda"),
    (["--atol", "-1"], "--atol must be a finite number >= 0, got -1.0"),
    (["--rtol", "nan"], "--rtol must be a finite number >= 0, got nan"),
    (["--problems", str(Path(__file__).parent / "problems"), "--device", "cuda:0"], "a batch runs on cpu or cuda"),
    (["--json", "/no_such_folder/result.json"], "cannot write '/no_such_folder/result.json'"),
    (["--batch", "-1"], "--batch must be positive, got -1"),
    (["--problems", str(Path(__file__).parent / "problems"), "--batch", "0"], "--batch must be positive, got 0"),
    (["--hidden", "0"], "--hidden must be positive, got 0"),
    (["--reference", str(Path(__file__).parent / "conftest.pyc") + ":Model"], "no such file"),
    (["--reference", str(Path(__file__).parents[1] / "requirements.txt") + ":Model"], "is not a Python source file"),
    (["--problems", str(Path(__file__).parent / "problems"), "--json", "/no_such_folder/all.json"], "cannot write"),
])
def test_bad_device_tolerance_or_json_path_is_an_error_before_any_model_runs(argv, message, capsys):
    # Before: torch's own traceback after the models had run (tolerances), or a batch on the default device.
    assert check.main([*argv, "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_a_gpu_index_past_the_visible_ones_is_named(monkeypatch):
    from harness import checker
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(check.CheckError, match="cuda:1 requested but torch sees 1 GPU"):
        checker.resolve_device("cuda:1")
    assert checker.resolve_device("cuda:0") == torch.device("cuda:0")


def test_a_non_finite_size_override_runs_the_problem_file():
    # --scale nan once wrote `nan` into the problem's source (a NameError); the check now runs and
    # reports the reference's own NaN.
    r = check.run_check(model="reference:Model", trials=1, device="cpu", batch=4, input_size=16, hidden=8,
                        scale=float("nan"))
    assert r["verdict"] == "FAIL" and any("reference itself produced NaN" in h for h in r["hints"])


def test_source_literal_round_trips_what_repr_does_not():
    from harness.problem import source_literal
    for value in (float("nan"), float("-inf"), (1, float("inf")), (3,), [2.5, float("nan")], {"a": float("inf")},
                  8192, 1.5, True, None, "s"):
        back = eval(source_literal(value))  # noqa: S307 - the literal this module writes into problem files
        assert repr(back) == repr(value) and type(back) is type(value)


def test_set_takes_float_spellings_of_non_finite_values():
    from harness.problem import parse_sets
    sets = parse_sets(["scaling_factor=nan", "a=inf", "b=-inf", "c=(3, 3)"])
    assert math.isnan(sets["scaling_factor"]) and sets["a"] == math.inf and sets["b"] == -math.inf and sets["c"] == (3, 3)


def test_json_report_is_strict_json_with_non_finite_values(tmp_path):
    out = tmp_path / "r.json"
    assert check.main(["--scale", "nan", "--device", "cpu", "--batch", "4", "--input", "16", "--hidden", "8",
                       "--trials", "1", "--quiet", "--json", str(out)]) == 1

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    report = json.loads(out.read_text(), parse_constant=refuse)
    assert report["verdict"] == "FAIL" and report["config"]["sizes"]["scale"] == "nan"


INSTANCE_PATCH = '''
import gc
import torch
import torch.nn as nn

# The reference's instance exists before the candidate's module runs: make it answer zeros.
for o in gc.get_objects():
    if isinstance(o, nn.Module) and type(o).__name__ == "Model":
        o.forward = lambda x: torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()

    def forward(self, x):
        return torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device)
'''


def test_the_reference_answers_before_the_candidate_is_loaded(tmp_path):
    # When the reference answered in each trial, after the import, both sides said zeros and this passed.
    cheat = tmp_path / "instance_patch.py"
    cheat.write_text(INSTANCE_PATCH)
    r = run(f"{cheat}:ModelNew", trials=2, device="cpu")
    assert (r["verdict"], r["reason"]) == ("FAIL", "mismatch")
    assert r["config"]["reference_answers_first"] == 2


def _problem(folder, forward: str, inputs: str):
    (folder / "p.py").write_text(
        "import random\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        f"    def forward(self, x):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n")
    (folder / "p_new.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        f"    def forward(self, x):\n        return {forward}\n")
    return dict(model=f"{folder / 'p_new.py'}:ModelNew", reference=f"{folder / 'p.py'}:Model", device="cpu", trials=3)


def test_the_candidate_starts_from_the_random_state_the_reference_left(tmp_path, monkeypatch):
    # KernelBench runs the candidate right after the reference in each trial: a random draw in both
    # forwards gives consecutive numbers. With the answers computed first, every trial's comparison is
    # the one the reference answering in turn (KernelBench's order) gives.
    from harness import checker
    problem = _problem(tmp_path, "x + torch.rand_like(x)", "torch.rand(5, 8)[:4]")  # the draws differ in size
    first = check.run_check(**problem)
    monkeypatch.setattr(checker, "_reference_answers", lambda *args: {})
    in_turn = check.run_check(**problem)
    assert first["config"]["reference_answers_first"] == 3 and in_turn["config"]["reference_answers_first"] == 0
    assert (first["verdict"], first["reason"]) == (in_turn["verdict"], in_turn["reason"]) == ("FAIL", "mismatch")
    assert [t["comparison"] for t in first["trials"]] == [t["comparison"] for t in in_turn["trials"]]
    r = check.run_check(**_problem(tmp_path, "x * 2", "torch.rand(4, 8)"))
    assert r["verdict"] == "PASS" and not any("in turn" in h for h in r["hints"])


def test_inputs_the_seed_does_not_fix_are_drawn_once_for_both_models(tmp_path):
    # get_inputs drawing from Python's generator: each draw differs. A trial's inputs are drawn once
    # and the reference and the candidate both get them, as in KernelBench's loop.
    r = check.run_check(**_problem(tmp_path, "x * 2", "torch.full((4, 8), random.random())"))
    assert r["verdict"] == "PASS" and r["config"]["reference_answers_first"] == 3


def test_get_inputs_rewritten_at_import_is_not_called_again(tmp_path):
    # A candidate that rewrites the problem's get_inputs (to raise, here) and patches the reference's
    # instance: the trials answered first use the inputs drawn before, and the candidate's zeros fail.
    problem = _problem(tmp_path, "x * 2", "torch.rand(4, 8)")
    (tmp_path / "p_new.py").write_text(
        "import gc\nimport torch\nimport torch.nn as nn\n\n"
        "get_inputs.__code__ = (lambda: 1 / 0).__code__  # noqa: F821 - the problem's\n"
        "for o in gc.get_objects():\n"
        "    if isinstance(o, nn.Module) and type(o).__name__ == 'Model':\n"
        "        o.forward = lambda x: torch.zeros_like(x)\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.zeros_like(x)\n")
    r = check.run_check(**problem)
    assert (r["verdict"], r["reason"]) == ("FAIL", "mismatch") and r["config"]["reference_answers_first"] == 3
