"""Device memory: the estimate a check makes before it runs (on the meta device), the
refusal of a problem that cannot fit, and what the check keeps on the device."""

import sys

import pytest
import torch

import check
from harness import memory
from harness.problem import CheckError, load_class
from tests.cases import PROBLEMS


def _problem(name):
    cls = load_class(f"{PROBLEMS / name}.py:Model", "Model")
    return cls, sys.modules[cls.__module__]


def test_the_estimate_counts_one_input_copy_two_outputs_and_two_models():
    cls, module = _problem("gemm_epilogue")  # x (32, 64) -> (32, 48), Linear(64, 48)
    est = memory.estimate_bytes(cls, list(module.get_init_inputs()), module.get_inputs, torch.float32)
    assert est["output_known"] and est["inputs"] == 32 * 64 * 4 and est["output"] == 32 * 48 * 4
    assert est["parameters"] == (64 * 48 + 48) * 4
    assert est["total"] == est["inputs"] + 2 * est["output"] + 2 * est["parameters"]
    half = memory.estimate_bytes(cls, list(module.get_init_inputs()), module.get_inputs, torch.float16)
    assert half["total"] * 2 == est["total"]


def test_an_output_the_meta_device_cannot_compute_is_guessed_and_said_so():
    class NoMeta(torch.nn.Module):
        def forward(self, x):
            return torch.from_numpy(x.numpy())  # needs real data

    est = memory.estimate_bytes(NoMeta, [], lambda: [torch.randn(10, 10)], torch.float32)
    assert est["output_known"] is False and est["output"] == 400


def test_a_problem_that_cannot_fit_is_refused_with_its_numbers():
    est = {"inputs": 3 * 2**30, "output": 2 * 2**30, "parameters": 0, "output_known": True, "total": 7 * 2**30}
    with pytest.raises(CheckError, match=r"cannot fit on cuda:0: the check needs 7.00 GiB .* 4.00 GiB is free"):
        memory.refuse_if_too_big(est, 4 * 2**30, "cuda:0")
    memory.refuse_if_too_big(est, 8 * 2**30, "cuda:0")  # fits: nothing happens
    memory.refuse_if_too_big(None, 0, "cuda:0")  # no estimate: nothing to refuse on


def test_the_check_records_its_estimate():
    r = check.run_check(model=f"{PROBLEMS / 'softmax_ok'}.py:ModelNew", reference=f"{PROBLEMS / 'softmax'}.py:Model",
                        trials=1, device="cpu")
    assert r["config"]["device_bytes_estimate"]["output"] == 16 * 1000 * 4


def test_each_model_gets_one_device_copy_of_the_inputs_per_trial(monkeypatch):
    from harness import checker

    made = []
    real = checker.device_copies
    monkeypatch.setattr(checker, "device_copies", lambda inputs, dev: made.append(len(inputs)) or real(inputs, dev))
    r = check.run_check(model=f"{PROBLEMS / 'several_inputs_ok'}.py:ModelNew",
                        reference=f"{PROBLEMS / 'several_inputs'}.py:Model", trials=3, device="cpu")
    assert r["verdict"] == "PASS", r["message"]
    assert made == [3] * 6  # three inputs, copied once for the reference and once for the candidate per trial


def test_the_oracle_runs_on_the_host(monkeypatch):
    from harness import checker

    devices = []
    real = checker.double_inputs
    monkeypatch.setattr(checker, "double_inputs", lambda xs: devices.extend(x.device.type for x in xs) or real(xs))
    r = check.run_check(model=f"{PROBLEMS / 'softmax_ok'}.py:ModelNew", reference=f"{PROBLEMS / 'softmax'}.py:Model",
                        trials=2, device="cuda" if torch.cuda.is_available() else "cpu")
    assert r["summary"]["oracle"]["reference"] is not None and devices == ["cpu", "cpu"]


@pytest.mark.gpu
def test_on_cuda_the_device_holds_the_inputs_and_two_outputs_only():
    dev = torch.device("cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(dev)
    before = torch.cuda.memory_allocated(dev)
    r = check.run_check(model=f"{PROBLEMS / 'softmax_ok'}.py:ModelNew", reference=f"{PROBLEMS / 'softmax'}.py:Model",
                        trials=5, device="cuda", sets={"batch_size": 4096, "dim": 4096})
    assert r["verdict"] == "PASS", r["message"]
    est = r["config"]["device_bytes_estimate"]
    # Softmax's own workspace aside, the peak stays near one input and two outputs.
    assert torch.cuda.max_memory_allocated(dev) - before <= est["total"] + est["output"]
