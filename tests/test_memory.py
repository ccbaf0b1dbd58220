"""Memory: the estimate a check makes before it runs (on the meta device), the refusal of a
problem that cannot fit on the device or the host, and what the check keeps on the device."""

import os
import sys

import pytest
import torch

import check
from harness import memory
from harness.problem import CheckError, load_class
from tests.cases import PROBLEMS

ROOT = PROBLEMS.parent.parent


def _problem(name):
    cls = load_class(f"{PROBLEMS / name}.py:Model", "Model")
    return cls, sys.modules[cls.__module__]


def test_the_estimate_counts_one_input_copy_two_outputs_two_models_and_a_comparison_chunk():
    from harness.compare import COMPARISON_BYTES_PER_ELEMENT, DEVICE_CHUNK

    cls, module = _problem("gemm_epilogue")  # x (32, 64) -> (32, 48), Linear(64, 48)
    est = memory.estimate_bytes(cls, list(module.get_init_inputs()), module.get_inputs, torch.float32)
    assert est["output_known"] and est["inputs"] == 32 * 64 * 4 and est["output"] == 32 * 48 * 4
    assert est["parameters"] == (64 * 48 + 48) * 4
    assert est["comparison"] == COMPARISON_BYTES_PER_ELEMENT * 32 * 48  # the whole output in one chunk
    assert est["total"] == est["inputs"] + 2 * est["output"] + 2 * est["parameters"] + est["comparison"]
    half = memory.estimate_bytes(cls, list(module.get_init_inputs()), module.get_inputs, torch.float16)
    assert half["comparison"] == est["comparison"]  # fp64 temporaries per element, whatever the dtype
    assert (half["total"] - half["comparison"]) * 2 == est["total"] - est["comparison"]
    big = memory.estimate_bytes(torch.nn.ReLU, [], lambda: [torch.rand(3 * DEVICE_CHUNK)], torch.float32)
    assert big["comparison"] == COMPARISON_BYTES_PER_ELEMENT * DEVICE_CHUNK  # a chunk at a time, not the output


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc/self")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_comparison_chunk_stays_within_its_bytes_per_element(dtype):
    # The peak of one chunk's temporaries: the peak resident memory of a fresh interpreter,
    # reset just before (Linux; large allocations mapped and unmapped one by one); torch's own
    # first-use allocations fall in it too, so the bound is met with room to spare.
    import subprocess

    script = f"""
import torch
from harness import compare


def status(field):  # kB, from Linux's /proc/self/status
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field + ":"))


n = 1 << 22
compare.COMPARE_CHUNK = n
torch.set_num_threads(1)
torch.manual_seed(0)
ref = torch.rand(n, dtype=torch.{dtype})
new = ref.clone()
new[::7] += 1e-3
new[5] = float("nan")
open("/proc/self/clear_refs", "w").write("5")  # the peak starts again from here
base = status("VmRSS")
compare.compare_outputs(ref, new, 1e-4, 1e-4)
compare.pass_at(ref, new, 1e-4)
compare.count_nonfinite(ref, new)
compare.fingerprint(new)
print((status("VmHWM") - base) * 1024 / n)
"""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    from harness.compare import COMPARISON_BYTES_PER_ELEMENT

    per_element = float(result.stdout)
    assert 8 < per_element <= COMPARISON_BYTES_PER_ELEMENT, per_element  # at least one fp64 copy of the chunk


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


def test_the_host_holds_the_pristine_inputs_and_the_oracle_twice_their_fp32_bytes():
    from harness.compare import COMPARE_CHUNK
    from harness.strict import ANSWER_BUDGET_BYTES

    est = {"inputs": 3 * 2**30, "output": 2 * 2**30, "parameters": 2**30, "output_known": True, "total": 0}
    temporaries = 64 * COMPARE_CHUNK
    gpu = memory.host_bytes(est, torch.device("cuda"), torch.float32)  # the outputs are compared on the GPU
    assert gpu == {"check": 3 * 2**30 + temporaries, "oracle": 2 * 6 * 2**30}
    cpu = memory.host_bytes(est, torch.device("cpu"), torch.float32)  # the device's copies are host memory too
    assert cpu["check"] == (3 + 3 + 2 * 2 + 2 + 2) * 2**30 + temporaries and cpu["oracle"] == gpu["oracle"]
    assert memory.host_bytes(est, torch.device("cpu"), torch.float16)["oracle"] == 4 * 6 * 2**30
    assert memory.host_bytes(None, torch.device("cpu"), torch.float32) is None
    strict = memory.host_bytes(est, torch.device("cuda"), torch.float32, strict=True)  # its calls, its answers
    assert strict["check"] == max(3, 3 + 3 * 2) * 2**30 + min(ANSWER_BUDGET_BYTES, 8 * 2 * 2**30) + temporaries
    margin = memory.HOST_MARGIN
    with pytest.raises(CheckError, match=r"cannot fit in host memory: the check needs 4.00 GiB .* 3.00 GiB is available"):
        memory.refuse_if_host_too_small(gpu, 3 * 2**30)
    assert memory.refuse_if_host_too_small(gpu, int(gpu["check"] * margin) + 1) is False  # the check fits, its oracle not
    assert memory.refuse_if_host_too_small(gpu, int((gpu["check"] + gpu["oracle"]) * margin) + 1) is True
    assert memory.refuse_if_host_too_small(None, 0) is True and memory.refuse_if_host_too_small(gpu, None) is True
    free = memory.free_host_bytes()
    assert free is None or free > 0


def test_a_check_whose_oracle_does_not_fit_on_the_host_goes_on_without_it(monkeypatch):
    from harness import checker

    est = memory.host_bytes({"inputs": 16 * 1000 * 4, "output": 16 * 1000 * 4, "parameters": 0}, torch.device("cpu"),
                            torch.float32)
    margin = memory.HOST_MARGIN
    monkeypatch.setattr(checker, "free_host_bytes", lambda: int((est["check"] + est["oracle"]) * margin) - 1)
    r = check.run_check(model=f"{PROBLEMS / 'softmax_ok'}.py:ModelNew", reference=f"{PROBLEMS / 'softmax'}.py:Model",
                        trials=2, device="cpu")
    assert r["verdict"] == "PASS", r["message"]
    assert r["config"]["oracle"].startswith("none: ") and r["config"]["host_bytes_estimate"] == est
    assert all(t["oracle"] is None for t in r["trials"]) and "fp64 oracle: none: " in check.format_report(r)
    monkeypatch.setattr(checker, "free_host_bytes", lambda: int(est["check"] * margin) - 1)
    with pytest.raises(CheckError, match="cannot fit in host memory"):
        check.run_check(model=f"{PROBLEMS / 'softmax_ok'}.py:ModelNew", reference=f"{PROBLEMS / 'softmax'}.py:Model",
                        trials=1, device="cpu")


def test_the_check_records_its_estimate_and_on_cuda_its_peak():
    r = check.run_check(model=f"{PROBLEMS / 'softmax_ok'}.py:ModelNew", reference=f"{PROBLEMS / 'softmax'}.py:Model",
                        trials=1, device="cpu")
    assert r["config"]["device_bytes_estimate"]["output"] == 16 * 1000 * 4
    assert r["device_memory"] is None and "device memory" not in check.format_report(r)
    r["device_memory"] = {"peak_allocated_bytes": 3 << 30, "estimate_bytes": 2 << 30}  # as CUDA reports it
    assert "device memory: peak 3.00 GiB allocated (estimated 2.00 GiB" in check.format_report(r)


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
    before = torch.cuda.memory_allocated(dev)
    r = check.run_check(model=f"{PROBLEMS / 'softmax_ok'}.py:ModelNew", reference=f"{PROBLEMS / 'softmax'}.py:Model",
                        trials=5, device="cuda", sets={"batch_size": 4096, "dim": 4096})
    assert r["verdict"] == "PASS", r["message"]
    est = r["config"]["device_bytes_estimate"]
    # Softmax's own workspace (one output's worth) aside, the peak stays near one input and two
    # outputs; 1 MiB for the check's own small tensors (seen on the H200: 16 KiB over without it).
    assert r["device_memory"]["peak_allocated_bytes"] - before <= est["total"] + est["output"] + 2**20


def test_the_comparison_in_chunks_equals_the_whole(monkeypatch):
    from harness import compare

    torch.manual_seed(0)
    ref = torch.randn(300, 7)
    new = ref + 1e-5 * torch.randn_like(ref)
    new[3, 4], new[250, 1] = float("nan"), float("inf")
    whole = compare.compare_outputs(ref, new, 1e-4, 1e-4)
    monkeypatch.setattr(compare, "COMPARE_CHUNK", 64)
    chunked = compare.compare_outputs(ref, new, 1e-4, 1e-4)
    assert chunked["worst"] == whole["worst"] and chunked["n_fail"] == whole["n_fail"] == 2
    for key in ("max_abs_diff", "max_abs_diff_finite"):
        assert chunked[key] == whole[key]
    assert chunked["mean_abs_diff"] == whole["mean_abs_diff"] == "nan"


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_the_comparison_leaves_both_outputs_as_they_were(dtype):
    from harness import compare

    torch.manual_seed(0)
    ref = torch.randn(64, 33, dtype=dtype)
    new = (ref.double() + 1e-3 * torch.randn(64, 33, dtype=torch.float64)).to(dtype)
    new[1, 2] = float("nan")
    ref_before, new_before = ref.clone(), new.clone()
    compare.compare_outputs(ref, new, 1e-4, 1e-4)
    compare.oracle_error(new, ref.double())
    assert torch.equal(ref, ref_before) and torch.equal(new.nan_to_num(), new_before.nan_to_num())
    assert bool(new.isnan()[1, 2])


def test_fingerprints_tell_outputs_apart_without_keeping_them():
    from harness.compare import fingerprint, same_fingerprint

    a = torch.randn(1000, 10)
    assert same_fingerprint(fingerprint(a), fingerprint(a.clone()))
    b = a.clone()
    b[500, 3] += 1.0
    assert not same_fingerprint(fingerprint(a), fingerprint(b))  # one element off: the sum differs
    assert not same_fingerprint(fingerprint(a), fingerprint(a.view(10, 1000)))
    nan = a.clone()
    nan[0, 0] = float("nan")
    assert same_fingerprint(fingerprint(nan), fingerprint(nan.clone()))


def test_the_answers_kept_for_replays_stay_within_their_budget(monkeypatch):
    from harness import strict

    monkeypatch.setattr(strict, "ANSWER_BUDGET_BYTES", 1000)
    answers = {1: torch.zeros(200)}  # 800 bytes
    assert strict.keep_answer(answers, torch.zeros(50)) and not strict.keep_answer(answers, torch.zeros(51))


def test_fingerprint_picks_stay_in_bounds_past_fp32s_exact_integers():
    # 19_ReLU's output has 1,610,612,736 elements: fp32's linspace put its last pick at numel.
    from harness.compare import evenly_spaced

    for numel in (1, 2, 4095, 4096, 4097, 1_610_612_736, 2**31 + 3):
        picks = evenly_spaced(numel, 4096)
        assert picks.dtype == torch.int64 and len(picks) == min(numel, 4096)
        assert int(picks[0]) == 0 and int(picks[-1]) == numel - 1
        assert bool((picks[1:] > picks[:-1]).all())
    assert len(evenly_spaced(0, 4096)) == 0
