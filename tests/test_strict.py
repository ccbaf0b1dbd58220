"""check.py --strict against tests/cheats/: every cheating candidate is caught for its own
reason, every honest control passes; the pieces of harness.strict on their own."""

import ast
import threading
import time
from pathlib import Path

import pytest
import torch

import check
from harness import strict
from tests.cases import PROBLEMS

CHEATS = Path(__file__).resolve().parent / "cheats"
STRICT_SEED = 20261204


def _declared(path: Path) -> dict:
    """The PROBLEM / CAUGHT_AS / WARNS / GPU_ONLY a cheat declares, read without importing it."""
    names = {}
    for stmt in ast.parse(path.read_text()).body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id.isupper():
            names[stmt.targets[0].id] = ast.literal_eval(stmt.value)
    return names


FILES = sorted(CHEATS.glob("*.py"))
DECLARED = {p.stem: _declared(p) for p in FILES}


def _cases(caught: bool):
    for name, d in DECLARED.items():
        if (d["CAUGHT_AS"] is not None) != caught:
            continue
        devices = ["cuda"] if d["GPU_ONLY"] else ["cpu", "cuda"]
        for device in devices:
            yield pytest.param(name, device, id=f"{name}-{device}",
                               marks=[pytest.mark.gpu] if device == "cuda" else [])


@pytest.fixture(autouse=True)
def put_back_what_a_cheat_replaced():
    watch = strict.Watch()
    yield
    watch.patched("after the test")  # a cheat checked without --strict patches for good otherwise


def _run(name: str, device: str, **kwargs):
    d = DECLARED[name]
    return check.run_check(model=f"{CHEATS / name}.py:ModelNew", reference=f"{PROBLEMS / d['PROBLEM']}.py:Model",
                           device=device, **{"strict": True, "strict_seed": STRICT_SEED, **kwargs})


def test_the_corpus_is_large_and_declares_itself():
    cheats = [n for n, d in DECLARED.items() if d["CAUGHT_AS"]]
    assert len(cheats) >= 15
    for name, d in DECLARED.items():
        assert (PROBLEMS / f"{d['PROBLEM']}.py").is_file(), name
        assert d["CAUGHT_AS"] is None or d["CAUGHT_AS"] in strict.STRICT_REASONS, name
    # Every reason --strict has is shown by at least one cheat.
    assert set(strict.STRICT_REASONS) <= {d["CAUGHT_AS"] for d in DECLARED.values()}


@pytest.mark.parametrize("name, device", list(_cases(caught=True)))
def test_each_cheat_is_caught_for_its_own_reason(name, device):
    r = _run(name, device)
    expected = DECLARED[name]["CAUGHT_AS"]
    assert (r["verdict"], r["reason"]) == ("FAIL", expected), r["message"]
    assert f"--strict-seed {STRICT_SEED}" in r["message"]  # the seed that replays it
    assert f"--strict --strict-seed {STRICT_SEED}" in check.format_report(r)


@pytest.mark.parametrize("name, device", list(_cases(caught=False)))
def test_each_honest_control_passes(name, device):
    r = _run(name, device)
    assert r["verdict"] == "PASS", r["message"]
    assert r["strict"]["seed"] == STRICT_SEED
    assert len(r["strict"]["calls"]) == strict.FRESH_CALLS + strict.REPLAYED_TRIALS
    warns = DECLARED[name].get("WARNS")
    if warns:
        assert any(warns in w for w in r["strict"]["warnings"]), r["strict"]["warnings"]
        assert "warning: " in check.format_report(r)
    else:
        assert r["strict"]["warnings"] == []


# Without --strict (KernelBench's five trials) these pass: the reason --strict exists.
PASS_WITHOUT_STRICT = ["replay_after_trials", "precomputed_trials", "zeros_after_trials", "raises_after_trials",
                       "lazy_subclass", "patched_event_timer", "patched_perf_counter", "patched_tensor_eq",
                       "background_thread", "buffer_output", "reused_workspace", "nondeterministic_late"]


def test_a_patched_reference_fails_without_strict_too():
    # The reference answers before the candidate's import patches it: a mismatch (KernelBench's own
    # loop, which runs the reference after the import, passes it); --strict names the patch.
    r = _run("patched_reference", "cpu", strict=False)
    assert (r["verdict"], r["reason"]) == ("FAIL", "mismatch")


@pytest.mark.parametrize("name", PASS_WITHOUT_STRICT)
def test_without_strict_the_cheat_passes(name):
    r = _run(name, "cpu", strict=False)
    assert r["verdict"] == "PASS", r["message"]
    assert r["strict"] is None


def test_the_same_strict_seed_draws_the_same_calls():
    a, b = _run("honest_softmax", "cpu"), _run("honest_softmax", "cpu")
    assert a["strict"]["calls"] == b["strict"]["calls"]
    c = _run("honest_softmax", "cpu", strict_seed=STRICT_SEED + 1)
    assert [x["input_seed"] for x in c["strict"]["calls"]] != [x["input_seed"] for x in a["strict"]["calls"]]


def test_without_a_strict_seed_a_fresh_one_is_drawn_and_printed():
    r = _run("honest_softmax", "cpu", strict_seed=None)
    assert isinstance(r["strict"]["seed"], int)
    assert f"strict seed {r['strict']['seed']}" in check.format_report(r)


def test_strict_from_the_command_line(tmp_path, capsys):
    args = ["--reference", f"{PROBLEMS / 'softmax'}.py:Model", "--device", "cpu", "--quiet", "--strict",
            "--strict-seed", "5"]
    assert check.main([*args, "--model", str(CHEATS / "replay_after_trials.py")]) == 1
    out = capsys.readouterr().out
    assert "FAIL (replayed_output, --strict)" in out and "--strict-seed 5" in out
    assert check.main([*args, "--model", str(CHEATS / "honest_softmax.py")]) == 0


# ----------------------------------------------------------------------------- the pieces


def test_the_watch_names_and_puts_back_a_replaced_timer():
    watch = strict.Watch()
    real = time.perf_counter
    time.perf_counter = lambda: 0.0
    try:
        found = watch.patched("now")
    finally:
        time.perf_counter = real if time.perf_counter is not real else time.perf_counter
    assert [f["reason"] for f in found] == ["patched_timer"] and "time.perf_counter" in found[0]["message"]
    assert time.perf_counter is real and watch.patched("again") == []


def test_the_watch_removes_an_override_the_class_did_not_own():
    watch = strict.Watch()
    torch.Tensor.__eq__ = lambda self, other: True
    found = watch.patched("now")
    assert found and found[0]["reason"] == "patched_check"
    assert "__eq__" not in vars(torch.Tensor) and bool((torch.ones(2) == torch.zeros(2)).any()) is False


def test_a_thread_that_ended_is_not_reported_and_a_live_one_is():
    watch = strict.Watch()
    done = threading.Thread(target=lambda: None)
    done.start()
    done.join()
    assert watch.new_threads("now") == []
    stop = threading.Event()
    alive = threading.Thread(target=stop.wait, name="lingering")
    alive.start()
    try:
        found = watch.new_threads("now")
    finally:
        stop.set()
        alive.join()
    assert len(found) == 1 and "lingering" in found[0]["message"]


def test_storage_overlap_sees_views_and_not_neighbours():
    base = torch.zeros(100)
    assert strict.shares_storage(base[10:20], base[50:60])  # one storage: a write through one shows in the other
    assert not strict.shares_storage(base, base.clone())
    assert not strict.shares_storage(torch.zeros(0), base)


def test_aliasing_is_allowed_where_the_reference_aliases_too():
    x = torch.randn(4, 4)
    model = torch.nn.Linear(4, 4)
    assert strict.aliasing_findings(x.view(16), [x], model, None, {"input"}, "now", 1) == []
    found = strict.aliasing_findings(x.view(16), [x], model, None, set(), "now", 1)
    assert found and "input 0" in found[0]["message"]
    found = strict.aliasing_findings(model.weight.detach(), [x], model, None, set(), "now", 1)
    assert found and "weight" in found[0]["message"]
    assert strict.aliasing_findings(model.weight.detach(), [x], model, None, {"parameter"}, "now", 1) == []


def test_degenerate_answers_are_named():
    ref = torch.full((4, 4), 3.0)
    assert strict.degenerate_warnings(ref, [], 1e-4, 1e-4) == {"a constant output (the reference's mean)"}
    assert strict.degenerate_warnings(ref * 1e-6, [], 1e-4, 1e-4) >= {"an all-zeros output"}
    x = torch.randn(4, 4)
    assert "input 0 returned as it is" in strict.degenerate_warnings(x, [x.clone()], 1e-4, 1e-4)
    assert strict.degenerate_warnings(torch.randn(64, 64), [torch.randn(64, 64)], 1e-4, 1e-4) == set()


def test_side_stream_timing_rule():
    same = [{"event_ms": 1.0, "device_ms": 1.05, "changed_after_stream": False}]
    assert strict.side_stream_findings(same, 1) == []
    hidden = [{"event_ms": 0.01, "device_ms": 10.0, "changed_after_stream": False}]
    assert strict.side_stream_findings(hidden, 1)[0]["reason"] == "side_stream"
    changed = [{"event_ms": 1.0, "device_ms": 1.0, "changed_after_stream": True}]
    assert "another stream" in strict.side_stream_findings(changed, 1)[0]["message"]


def test_the_free_blocks_to_fill_come_from_the_snapshot():
    mib = 1 << 20
    snapshot = [{"device": 0, "segment_type": "large",
                 "blocks": [{"size": 512, "state": "inactive"}, {"size": 4096, "state": "active_allocated"},
                            {"size": 3 * mib, "state": "inactive"}]},
                {"device": 0, "segment_type": "small", "blocks": [{"size": mib + mib // 2, "state": "inactive"}]},
                {"device": 1, "stream": 7, "segment_type": "large", "blocks": [{"size": 1 << 30, "state": "inactive"}]}]
    # A small-pool block is asked for in pieces the small pool serves (at most 1 MiB each).
    assert strict.free_block_requests(snapshot, 0) == [3 * mib, mib, mib // 2, 512]
    assert strict.free_block_requests(snapshot, 1) == [1 << 30]
    assert strict.free_block_requests(snapshot, 1, stream=0) == []  # another stream's pool serves none of ours


@pytest.mark.gpu
def test_poisoning_fills_a_freed_block_with_nan():
    dev = torch.device("cuda")
    block = torch.ones(1 << 20, device=dev)  # 4 MiB of ones, then freed: the cache keeps the block
    del block
    assert strict.poison_free_memory(dev) >= 4 << 20
    again = torch.empty(1 << 20, device=dev)  # the same block again, as a kernel that never writes would return
    assert bool(again.isnan().all())


def test_a_thread_pool_that_torch_starts_is_not_the_candidates(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    watch = strict.Watch()
    baseline = set(watch.threads)
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1)
    pool.submit(stop.wait)  # started from this file: someone else's thread
    try:
        assert len(watch.new_threads("now")) == 1
        monkeypatch.setattr(strict, "_LIBRARY_DIRS", (str(Path(__file__).parent),))
        watch.threads = set(baseline)  # as if not reported yet
        assert watch.new_threads("now") == []  # started from a library's folder: not reported
    finally:
        stop.set()
        pool.shutdown()


PATCH_THEN_FAIL = {
    "import": "torch.equal = lambda *a, **k: True\nraise ImportError('no kernel')\n",
    "constructor": "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   "        torch.equal = lambda *a, **k: True\n        raise RuntimeError('no device')\n",
    "forward": "class ModelNew(nn.Module):\n    def forward(self, x):\n"
               "        torch.equal = lambda *a, **k: True\n        raise RuntimeError('launch failed')\n",
}


@pytest.mark.parametrize("where", sorted(PATCH_THEN_FAIL))
def test_what_a_failing_candidate_replaced_is_put_back(where, tmp_path):
    path = tmp_path / "cand.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n" + PATCH_THEN_FAIL[where])
    real = torch.equal
    r = check.run_check(model=f"{path}:ModelNew", reference=f"{PROBLEMS / 'softmax'}.py:Model", device="cpu",
                        strict=True, strict_seed=1)
    assert torch.equal is real
    assert r["verdict"] == "FAIL" and [f["reason"] for f in r["strict"]["findings"]] == ["patched_check"]


def test_a_torch_function_replaced_is_found_and_put_back_but_torch_s_own_wrappers_are_not():
    watch = strict.Watch()
    real_softmax, real_seed = torch.softmax, torch.manual_seed
    torch.softmax = lambda *a, **k: None  # a cheat's: changes the reference's answer too
    # torch.compile wraps manual_seed with its own decorator: torch's code, the original inside.
    torch.manual_seed = torch._disable_dynamo(real_seed)
    found = watch.patched("in the test")
    assert [f["reason"] for f in found] == ["patched_reference"] and "torch.softmax" in found[0]["message"]
    assert torch.softmax is real_softmax
    torch.manual_seed = real_seed
    # A wrapper that claims the original (functools.wraps) but is not torch's is still found.
    import functools

    @functools.wraps(real_softmax)
    def fake(*args, **kwargs):
        return None

    torch.softmax = fake
    assert [f["reason"] for f in watch.patched("in the test")] == ["patched_reference"]
    assert torch.softmax is real_softmax
