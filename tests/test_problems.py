"""check.py on other KernelBench problems (tests/problems/, in KernelBench's format):
each problem's correct candidate passes and its wrong one fails for its own reason."""

import json

import pytest
import torch

import check
from tests.cases import PROBLEMS, STRICT_ONLY, WRONG_BECAUSE

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _check(problem, candidate, device, trials=3, **kwargs):
    return check.run_check(model=f"{PROBLEMS / candidate}:ModelNew", reference=f"{PROBLEMS / problem}.py:Model",
                           trials=trials, device=device, **kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("problem", sorted(WRONG_BECAUSE))
def test_correct_candidate_passes(problem, device):
    r = _check(problem, f"{problem}_ok.py", device)
    assert r["verdict"] == "PASS", r["message"]
    assert r["config"]["oracle"] == "the reference run in float64"
    # The oracle ran: both models' error against the fp64 run is known and small.
    oracle = r["summary"]["oracle"]
    assert oracle["reference"] is not None and oracle["candidate"] is not None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("problem", sorted(WRONG_BECAUSE))
def test_wrong_candidate_fails_for_its_reason(problem, device):
    if WRONG_BECAUSE[problem] in STRICT_ONLY:
        # Right values written into its input: KernelBench's verdict (pass) without --strict.
        plain = _check(problem, f"{problem}_wrong.py", device)
        assert plain["verdict"] == "PASS" and any(t["mutation"] for t in plain["trials"]), plain["message"]
    r = _check(problem, f"{problem}_wrong.py", device, strict=WRONG_BECAUSE[problem] in STRICT_ONLY)
    assert r["verdict"] == "FAIL"
    assert r["reason"] == WRONG_BECAUSE[problem], r["message"]


def test_set_changes_a_problem_value_and_restores_it(tmp_path):
    out = tmp_path / "r.json"
    rc = check.main(["--reference", f"{PROBLEMS / 'elementwise.py'}:Model", "--model",
                     f"{PROBLEMS / 'elementwise_ok.py'}:ModelNew", "--device", "cpu", "--trials", "2",
                     "--set", "batch_size=3", "--set", "alpha=0.25", "--json", str(out), "--quiet"])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["config"]["overrides"] == {"batch_size": 3, "alpha": 0.25}
    assert r["config"]["sizes_overridden"] is True
    assert all(t["reference_shape"] == [3, 300] for t in r["trials"])
    import sys

    module = next(m for m in sys.modules.values() if getattr(m, "__file__", None) == str(PROBLEMS / "elementwise.py"))
    assert (module.batch_size, module.alpha) == (16, 2.0)


@pytest.mark.parametrize("argv,match", [
    (["--set", "no_such_size=3"], "no module-level value 'no_such_size'"),
    (["--set", "batch_size"], "name=value"),
    (["--set", "batch_size=abc"], "not a Python literal"),
    (["--hidden", "3"], "use --set"),
])
def test_bad_overrides_are_named(argv, match, capsys):
    rc = check.main(["--reference", f"{PROBLEMS / 'softmax.py'}:Model", "--model",
                     f"{PROBLEMS / 'softmax_ok.py'}:ModelNew", "--device", "cpu", "--quiet", *argv])
    assert rc == 2
    assert match in capsys.readouterr().err


def test_this_problem_keeps_its_closed_form_oracle():
    r = check.run_check(model="reference:Model", trials=1, device="cpu", batch=8, input_size=16, hidden=32)
    assert r["config"]["oracle"] == "closed form (fp64)"
    assert r["config"]["sizes"] == {"batch": 8, "input": 16, "hidden": 32, "scale": 1.5}
    assert r["trials"][0]["oracle"] is not None
    assert torch.__version__  # the check ran in this process


def test_set_recomputes_the_values_derived_from_it():
    # conv_bias_act.py has bias_shape = (out_channels, 1, 1): it must follow out_channels.
    r = _check("conv_bias_act", "conv_bias_act_ok.py", "cpu", sets={"out_channels": 5})
    assert r["verdict"] == "PASS", r["message"]
    assert r["config"]["problem_values"]["bias_shape"] == [5, 1, 1]
    assert r["trials"][0]["reference_shape"][1] == 5
    import sys

    module = next(m for m in sys.modules.values() if getattr(m, "__file__", "") == str(PROBLEMS / "conv_bias_act.py"))
    assert (module.out_channels, module.bias_shape) == (8, (8, 1, 1))  # restored afterwards


def test_set_of_a_derived_value_itself_wins():
    r = _check("conv_bias_act", "conv_bias_act_ok.py", "cpu", sets={"out_channels": 5, "bias_shape": (1, 1, 1)})
    assert r["verdict"] == "PASS", r["message"]
    assert r["config"]["problem_values"]["bias_shape"] == [1, 1, 1]


@pytest.mark.parametrize("problem, candidate", [("19_ReLU", "19_ReLU_clamp"), ("33_BatchNorm", "33_BatchNorm_functional")])
def test_the_kernelbench_stand_ins_pass_at_small_sizes(problem, candidate):
    folder = PROBLEMS / "kernelbench"
    small = {"batch_size": 4, "dim": 64} if problem == "19_ReLU" else {"batch_size": 2, "dim1": 8, "dim2": 8}
    r = check.run_check(model=f"{folder / candidate}.py:ModelNew", reference=f"{folder / problem}.py:Model",
                        trials=2, device="cpu", sets=small, strict=True, strict_seed=1)
    assert r["verdict"] == "PASS", r["message"]
    full = {"batch_size": 4096, "dim": 393216} if problem == "19_ReLU" else {"batch_size": 64, "dim1": 512}
    assert all(r["config"]["problem_values"][k] != v for k, v in full.items())


def test_the_stand_ins_at_their_real_sizes_are_estimated_without_running():
    import sys

    from harness.memory import estimate_bytes
    from harness.problem import load_class

    cls = load_class(f"{PROBLEMS / 'kernelbench' / '19_ReLU'}.py:Model", "Model")
    module = sys.modules[cls.__module__]
    est = estimate_bytes(cls, [], module.get_inputs, torch.float32)
    assert est["inputs"] == est["output"] == 4096 * 393216 * 4 and est["output_known"]


# KernelBench's eval runs a candidate's source in the namespace where it ran the problem's: a
# candidate may use the problem's Model and its (overridden) sizes without importing them.
SUBCLASS = "class ModelNew(Model):\n    pass\n"
USES_SIZES = '''import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.softmax(dim=-1).expand(batch_size, dim)
'''


@pytest.mark.parametrize("source", [SUBCLASS, USES_SIZES])
def test_a_candidate_sees_its_problems_names_as_in_kernelbench(source, tmp_path):
    path = tmp_path / "softmax_names.py"
    path.write_text(source)
    r = _check("softmax", path, "cpu", sets={"batch_size": 3})
    assert r["verdict"] == "PASS", r["message"]
    assert r["trials"][0]["candidate_shape"] == [3, 1000]


@pytest.mark.parametrize("source", [SUBCLASS, USES_SIZES])
def test_bench_runs_a_candidate_that_uses_its_problems_names(source, tmp_path, capsys):
    import bench

    path = tmp_path / "softmax_names.py"
    path.write_text(source)
    argv = ["--reference", f"{PROBLEMS / 'softmax'}.py:Model", "--model", f"{path}:ModelNew", "--set", "batch_size=3",
            "--no-compile", "--device", "cpu", "--fast-ceilings", "--kb-trials", "2", "--kb-warmup", "1",
            "--repeats", "2"]
    assert bench.main(argv) == 0
    printed = capsys.readouterr()
    assert "cannot be built" not in printed.err and "failed:" not in printed.err, printed.err


# The reference's forward draws from the generator KernelBench has just seeded with the trial's
# seed, the state get_inputs drew from: here the draw repeats the input, so x itself is right.
REDRAW = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.rand(x.shape)


def get_inputs():
    return [torch.rand(4, 8)]


def get_init_inputs():
    return []
'''


def test_the_reference_runs_from_the_trial_seed_as_in_kernelbench(tmp_path):
    (tmp_path / "redraw.py").write_text(REDRAW)
    (tmp_path / "redraw_same.py").write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                                             "    def forward(self, x):\n        return x.clone()\n")
    for strict in (False, True):  # --strict's extra calls run the reference from their inputs' seed too
        r = check.run_check(model=f"{tmp_path / 'redraw_same.py'}:ModelNew", reference=f"{tmp_path / 'redraw.py'}:Model",
                            trials=3, device="cpu", strict=strict, strict_seed=1)
        assert r["verdict"] == "PASS", r["message"]


def test_a_reference_that_returns_no_tensor_is_the_checks_error(tmp_path, capsys):
    # KernelBench reads output.shape and fails every candidate; the check says why, exit status 2.
    (tmp_path / "pair.py").write_text(REDRAW.replace("torch.rand(x.shape)", "x.max(dim=1)"))
    (tmp_path / "pair_new.py").write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                                          "    def forward(self, x):\n        return x.max(dim=1)\n")
    rc = check.main(["--reference", f"{tmp_path / 'pair.py'}:Model", "--model", f"{tmp_path / 'pair_new.py'}:ModelNew",
                     "--device", "cpu", "--quiet"])
    assert rc == 2
    assert "the reference's forward returned a max, not a tensor" in capsys.readouterr().err


def test_an_empty_output_compares_as_kernelbench_compares_it():
    # allclose of two empty tensors holds, so KernelBench passes any candidate of the right shape.
    for candidate in ("softmax_ok.py", "softmax_wrong.py"):
        r = _check("softmax", candidate, "cpu", sets={"batch_size": 0})
        assert r["verdict"] == "PASS", r["message"]
        assert r["trials"][0]["reference_shape"] == [0, 1000]


@pytest.mark.parametrize("candidate, verdict", [("torch.gt(x, 0)", "PASS"), ("x < 0", "FAIL")])
def test_a_bool_output_is_compared_as_kernelbench_compares_it(candidate, verdict, tmp_path):
    # allclose holds for equal bool tensors; the fp64 oracle's error is taken on them as numbers.
    (tmp_path / "sign.py").write_text(REDRAW.replace("torch.rand(x.shape)", "x > 0"))
    (tmp_path / "sign_new.py").write_text("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                                          f"    def forward(self, x):\n        return {candidate}\n")
    r = check.run_check(model=f"{tmp_path / 'sign_new.py'}:ModelNew", reference=f"{tmp_path / 'sign.py'}:Model",
                        trials=2, device="cpu")
    assert (r["verdict"], r["reason"]) == (verdict, None if verdict == "PASS" else "mismatch"), r["message"]
    assert r["trials"][0]["oracle"] is not None


def test_an_output_repeated_within_the_tolerance_is_not_stale():
    # In bf16 the mean loss of two trials rounds to the same value; the answer is right both times
    # (KernelBench passes it), so it is no cached output.
    r = _check("cross_entropy", "cross_entropy_ok.py", "cpu", dtype="bf16", trials=5)
    assert r["verdict"] == "PASS", r["message"]
