"""The cached JIT builds: nothing at import, one module per op group and device on first
use, keyed, shared across processes, safe under concurrency and crashes."""

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from kernels import jit

ROOT = Path(__file__).resolve().parent.parent
IMPORT = "import time; t = time.perf_counter(); import kernels; print(f'IMPORT_SECONDS {time.perf_counter() - t:.3f}')"
FIRST_CALL = IMPORT + "; import torch; kernels.div_sum_scale(torch.ones(3, 300), 2, 1.5)"


def _import_in_subprocess(cache_dir=None, code=FIRST_CALL, **extra_env):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra_env)
    if cache_dir is not None:
        env["KB14_CACHE_DIR"] = str(cache_dir)
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out, err


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory):
    """A cache holding the CPU tail's module, built by one first-use process (so tests that
    need a built cache do not depend on another test having run first in this worker)."""
    cache = tmp_path_factory.mktemp("kb14cache")
    _finish(_import_in_subprocess(cache))
    return cache


def _cpu_tail_only(built_cache, cache):
    shutil.copytree(built_cache, cache)
    for other in cache.glob("kb14_*"):
        if other.is_dir() and not other.name.startswith("kb14_tail_cpu_"):
            shutil.rmtree(other)
    return cache


@pytest.fixture
def cpu_tail_cache(built_cache, tmp_path):
    """A cache of this test's own holding only the CPU tail's module (a copy of built_cache's): the
    tests of a module built after it need the CPU tail loaded, not built again."""
    return _cpu_tail_only(built_cache, tmp_path / "cache")


def test_import_compiles_nothing(tmp_path):
    out, err = _finish(_import_in_subprocess(tmp_path / "cache", code=IMPORT))
    assert "compiling" not in err and not (tmp_path / "cache").exists(), err


def test_a_cache_that_cannot_be_written_is_named(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("KB14_CACHE_DIR", str(tmp_path / "a_file" / "cache"))
    with pytest.raises(RuntimeError, match="the build cache .*a_file/cache cannot be written.*KB14_CACHE_DIR"):
        jit.build("tail_cpu")


def test_concurrent_first_uses_build_once(tmp_path):
    fresh_cache = tmp_path / "cache"
    procs = [_import_in_subprocess(fresh_cache) for _ in range(2)]
    results = [_finish(p) for p in procs]
    stderr = "".join(err for _, err in results)
    assert stderr.count("compiling") == 1, stderr
    assert "waiting for another process" in stderr
    # The CPU call built the CPU tail's module and nothing else.
    assert [p.parent.name.split("_")[1:3] for p in fresh_cache.glob("kb14_*/.done")] == [["tail", "cpu"]]


def test_second_process_loads_from_the_cache_without_compiling(built_cache):
    out, err = _finish(_import_in_subprocess(built_cache))
    assert "compiling" not in err
    assert "IMPORT_SECONDS" in out


def _first_use():
    """scripts/first_use.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("first_use", ROOT / "scripts" / "first_use.py")
    first_use = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(first_use)
    return first_use


def test_first_use_reads_each_build_step_from_ninjas_log(built_cache):
    steps = _first_use().ninja_steps(built_cache)
    assert list(steps) == ["tail_cpu"] and set(steps["tail_cpu"]) == {"tail_cpu.o", "tail_cpu_16bit.o", "link"}, steps
    assert all(seconds >= 0 for seconds in steps["tail_cpu"].values()) and steps["tail_cpu"]["tail_cpu.o"] > 0


def test_first_use_rows_name_the_gpu_the_run_recorded():
    """Rows are made from a GPU run's JSON on any machine (this one may have no GPU)."""
    result = {"device": "cuda", "gpu": "GPU X", "model": "ModelNew", "torch": "9.9", "runs": 2,
              "seconds": {"import torch": {"all": [3.0, 4.0]}},
              "first output's build steps, seconds, by run": [{"tail_cuda": {"link": t}} for t in (0.5, 0.7)]}
    rows = _first_use().table_rows(result)
    assert [(r["gpu"], r["implementation"], r["time_ms"]) for r in rows] == [
        ("GPU X", "import torch", "3500"), ("GPU X", "first ModelNew output's build: tail_cuda link", "600")]


def test_a_build_killed_half_way_is_rebuilt(built_cache):
    build_dir = next(built_cache.glob("kb14_*/.done")).parent
    # What a builder killed mid-way leaves: no completion marker, torch's own
    # baton file, half-written objects. Our flock died with the process.
    (build_dir / ".done").unlink()
    (build_dir / "lock").write_text("")
    for so in build_dir.glob("*.so"):
        so.write_bytes(b"truncated")
    proc = _import_in_subprocess(built_cache)
    _, err = _finish(proc, timeout=300)
    assert "compiling" in err
    assert (build_dir / ".done").exists()


# A module named in another's `after` (as the C++ autograd is in tail_cuda's), hung here
# on the CPU tail so that the test runs without a GPU: the autograd module builds and
# registers on any machine.
HUNG_ON_CPU_TAIL = IMPORT + """
import dataclasses, subprocess, sys, time, torch
from kernels import jit
jit.MODULES["tail_cpu"] = dataclasses.replace(jit.MODULES["tail_cpu"], after=("tail_cuda_autograd",))
"""
AFTER_CPU_TAIL = HUNG_ON_CPU_TAIL + """
def cpp_autograd():
    lines = torch._C._dispatch_dump("kb14::div_sum_scale").splitlines()
    return any(line.startswith("AutogradCUDA:") and "tail_autograd_cuda.cpp" in line for line in lines)
from harness.strict import Watch
watch = Watch()
kernels.div_sum_scale(torch.ones(3, 300), 2, 1.5)
print("PENDING", sorted(jit.background_builds), "CPP_AUTOGRAD", cpp_autograd())
print("EXTRA_THREADS", watch.new_threads("after the call"))
import atexit  # runs after the interpreter has joined its threads
atexit.register(lambda: print("EXITING_AT", time.time(), flush=True))
"""
POLL_UNTIL_LOADED = """
deadline = time.monotonic() + 600
while jit.background_builds and time.monotonic() < deadline:
    time.sleep(0.2)
    kernels.div_sum_scale(torch.ones(3, 300), 2, 1.5)
print("LOADED_BY_A_LATER_CALL", cpp_autograd())
"""


@pytest.fixture(scope="module")
def exiting_with_a_build_pending(built_cache, tmp_path_factory):
    """The next test's first process (its cache, the process), started when a test first asks: the test
    before it asks too, so that their two builds of the C++ autograd module (18 s each) run side by side."""
    cache = _cpu_tail_only(built_cache, tmp_path_factory.mktemp("pending") / "cache")
    proc = _import_in_subprocess(cache, code=AFTER_CPU_TAIL)
    yield cache, proc
    if proc.poll() is None:  # the next test was deselected or failed before waiting for it
        proc.kill()
        proc.communicate()
    _wait_for_background_builds(cache)


def _wait_for_background_builds(cache, seconds=600):
    """Until every build started in the background in `cache` has ended (they outlive their process)."""
    deadline = time.monotonic() + seconds
    for log in cache.glob("kb14_*.log"):
        done = log.with_suffix("") / ".done"
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.5)


def test_a_module_named_after_another_builds_in_the_background_and_a_later_call_loads_it(
        cpu_tail_cache, exiting_with_a_build_pending):
    out, err = _finish(_import_in_subprocess(cpu_tail_cache, code=AFTER_CPU_TAIL + POLL_UNTIL_LOADED), timeout=600)
    # The first call returned before the module was built, then a later call loaded it.
    assert "PENDING ['tail_cuda_autograd'] CPP_AUTOGRAD False" in out, out + err
    assert "LOADED_BY_A_LATER_CALL True" in out, out + err
    assert "in the background (log: " in err
    # A child process builds it: no thread of the candidate for check.py --strict to fail.
    assert "EXTRA_THREADS []" in out, out + err


def test_a_background_build_outlives_its_process_and_the_next_process_loads_it_at_once(
        exiting_with_a_build_pending):
    cache, first = exiting_with_a_build_pending
    out, err = _finish(first, timeout=600)
    assert "PENDING ['tail_cuda_autograd'] CPP_AUTOGRAD False" in out, out + err
    log = next(cache.glob("kb14_tail_cuda_autograd_*.log"))
    _wait_for_background_builds(cache)
    done = log.with_suffix("") / ".done"
    assert done.exists(), log.read_text()
    exiting_at = float(out.split("EXITING_AT")[1].split()[0])
    assert exiting_at < done.stat().st_mtime, "the process waited for the build before exiting"
    out, err = _finish(_import_in_subprocess(cache, code=AFTER_CPU_TAIL))
    assert "PENDING [] CPP_AUTOGRAD True" in out and "compiling" not in err, out + err


# Two calls after the background build is settled (never started, or failed): the op still answers.
TWO_CALLS_EQUAL = """
y = torch.randn(4, 300)
for _ in range(2):
    got = kernels.div_sum_scale(y, 2, 1.5)
print("PENDING", sorted(jit.background_builds), "EQUAL", torch.equal(got, kernels.div_sum_scale_reference(y, 2, 1.5)))
"""
NO_CHILD_PROCESS = HUNG_ON_CPU_TAIL + """
def refused(*args, **kwargs):
    raise OSError(11, "Resource temporarily unavailable")
jit.subprocess.Popen = refused
""" + TWO_CALLS_EQUAL


def test_a_background_build_that_cannot_start_leaves_the_call_working(cpu_tail_cache):
    out, err = _finish(_import_in_subprocess(cpu_tail_cache, code=NO_CHILD_PROCESS))
    assert "PENDING [] EQUAL True" in out, out + err
    assert err.count("could not start building tail_cuda_autograd in the background") == 1, err


FAILING_CHILD = HUNG_ON_CPU_TAIL + """
def failing_build(name):
    log = jit.cache_root() / "failing.log"
    with open(log, "w") as out:
        child = subprocess.Popen([sys.executable, "-c", "print('the compiler said no'); raise SystemExit(3)"],
                                 stdout=out, stderr=subprocess.STDOUT)
    return jit.BackgroundBuild(child, log)
jit._start_background_build = failing_build
kernels.div_sum_scale(torch.ones(3, 300), 2, 1.5)
jit.background_builds["tail_cuda_autograd"].process.wait()
""" + TWO_CALLS_EQUAL


def test_a_failed_background_build_is_reported_once_with_its_log(cpu_tail_cache):
    out, err = _finish(_import_in_subprocess(cpu_tail_cache, code=FAILING_CHILD))
    assert "PENDING [] EQUAL True" in out, out + err
    assert err.count("building tail_cuda_autograd in the background failed (exit status 3)") == 1, err
    assert "the compiler said no" in err


def test_modules_built_in_the_background_are_host_code():
    # Their child process computes the module's spec on its own: with nvcc units that would
    # ask the GPU for its architecture, a CUDA context beside the parent's.
    for module in jit.MODULES.values():
        for name in module.after:
            assert not jit.MODULES[name].cuda, name


# torch.compile(fullgraph=True) traced the entry point's check for finished background
# builds and failed (seen on the H200 while the C++ autograd was building). The build is a
# child that waits on its stdin until this process ends, so it is pending for certain; it
# builds nothing (building it is the two tests above's).
COMPILE_WHILE_PENDING = HUNG_ON_CPU_TAIL + """
def held_build(name):
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL)
    return jit.BackgroundBuild(child, jit.cache_root() / "held.log")
jit._start_background_build = held_build
y = torch.randn(4, 300)
eager = kernels.div_sum_scale(y, 2, 1.5)
compiled = torch.compile(lambda t: kernels.div_sum_scale(t, 2, 1.5), fullgraph=True, backend="eager")
got = compiled(y)
print("PENDING", sorted(jit.background_builds), "COMPILED_EQUAL", torch.equal(got, eager))
"""


def test_compile_while_a_background_build_is_pending(cpu_tail_cache):
    out, err = _finish(_import_in_subprocess(cpu_tail_cache, code=COMPILE_WHILE_PENDING), timeout=900)
    assert "PENDING ['tail_cuda_autograd'] COMPILED_EQUAL True" in out, out + err
    assert "compiling" not in err, err  # the CPU tail came from the cache; the held build compiled nothing


@pytest.mark.parametrize("module,edited", [("tail_cpu", "tail_cpu.cpp"), ("tail_cuda", "fused_reduce_lean.cuh"),
                                           ("colsum_cpu", "colsum.h"), ("colsum_cuda", "colsum.cu")])
def test_key_follows_sources_and_headers(tmp_path, monkeypatch, module, edited):
    monkeypatch.setattr(jit, "_cuda_arch", lambda: "90")  # CUDA modules' keys without a GPU
    spec = jit.JitSpec.for_this_machine(module)
    key = spec.key()
    assert key == jit.JitSpec.for_this_machine(module).key()
    copy = tmp_path / "kernels"
    shutil.copytree(jit.SOURCE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(jit, "SOURCE_DIR", copy)
    assert spec.key() == key
    (copy / edited).write_text((copy / edited).read_text() + "\n// changed\n")
    assert spec.key() != key


def test_key_ignores_what_does_not_make_the_binary(monkeypatch):
    # The tests that hang a module on the CPU tail's `after` load the cached CPU tail, not a rebuilt one.
    key = jit.JitSpec.for_this_machine("tail_cpu").key()
    module = jit.MODULES["tail_cpu"]
    monkeypatch.setitem(jit.MODULES, "tail_cpu", dataclasses.replace(
        module, what="another line", default_seconds=99, after=("tail_cuda_autograd",)))
    assert jit.JitSpec.for_this_machine("tail_cpu").key() == key
    monkeypatch.setitem(jit.MODULES, "tail_cpu", dataclasses.replace(module, torch_free=not module.torch_free))
    assert jit.JitSpec.for_this_machine("tail_cpu").key() != key


def test_cuda_key_follows_arch_torch_order_split_parts_and_verbosity(monkeypatch):
    monkeypatch.setattr(jit, "_cuda_arch", lambda: "90")
    spec = jit.JitSpec.for_this_machine("tail_cuda")
    spec_order = jit.torch_order()
    assert "-DKB14_TORCH_VERSION=%d" % spec_order in spec.cuda_cflags
    assert "-gencode=arch=compute_90,code=sm_90" in spec.cuda_cflags
    monkeypatch.setattr(jit, "_cuda_arch", lambda: "100")
    assert jit.JitSpec.for_this_machine("tail_cuda").key() != spec.key()
    monkeypatch.setattr(jit, "_cuda_arch", lambda: "90")
    monkeypatch.setattr(jit, "torch_order", lambda: 209)
    assert jit.JitSpec.for_this_machine("tail_cuda").key() != spec.key()
    monkeypatch.setattr(jit, "torch_order", lambda: spec_order)
    # The generated code depends on the number of parts nvcc splits the device code into;
    # nvcc before CUDA 12.2 has no --split-compile.
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    split = jit.JitSpec.for_this_machine("tail_cuda")
    assert f"--split-compile={jit.NVCC_SPLIT}" in split.cuda_cflags
    monkeypatch.setattr(jit, "NVCC_SPLIT", jit.NVCC_SPLIT * 2)
    assert jit.JitSpec.for_this_machine("tail_cuda").key() != split.key()
    monkeypatch.setattr(torch.version, "cuda", "12.1")
    assert not any(flag.startswith("--split-compile") for flag in jit.JitSpec.for_this_machine("tail_cuda").cuda_cflags)
    monkeypatch.undo()
    monkeypatch.setattr(jit, "_cuda_arch", lambda: "90")
    monkeypatch.setenv("KB14_VERBOSE", "1")
    assert jit.JitSpec.for_this_machine("tail_cuda").key() != spec.key()


def test_gpus_older_than_sm80_get_a_clear_error(monkeypatch):
    # nvcc would fail on the first cache-hinted load with a ptxas error; the build says why first.
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    with pytest.raises(RuntimeError, match=r"compute capability 8\.0 or newer.*Tesla T4 is sm_75"):
        jit.JitSpec.for_this_machine("tail_cuda")
    assert jit.JitSpec.for_this_machine("tail_cpu").cuda_cflags == ()  # CPU modules do not ask
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert "-gencode=arch=compute_80,code=sm_80" in jit.JitSpec.for_this_machine("tail_cuda").cuda_cflags


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KB14_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert jit.cache_root() == tmp_path / "elsewhere"


@pytest.fixture(scope="module")
def built_all(tmp_path_factory):
    cache = tmp_path_factory.mktemp("kb14all")
    code = "from kernels import jit; import json; print('BUILT', json.dumps({k: str(v) for k, v in jit.build_all().items()}))"
    out, err = _finish(_import_in_subprocess(cache, code=code), timeout=900)
    return json.loads(out.split("BUILT", 1)[1]), err


def test_build_all_builds_every_module_of_this_machine_in_parallel(built_all):
    libraries, err = built_all
    expected = {name for name, m in jit.MODULES.items() if m.device == "cpu" or jit.cuda_build_wanted()}
    assert set(libraries) == expected
    assert all(Path(p).exists() and (Path(p).parent / ".done").exists() for p in libraries.values())
    # One progress line per module, naming what, where and how long, all started before any finished.
    lines = [line for line in err.splitlines() if line.startswith("[kb14]")]
    starts = [i for i, line in enumerate(lines) if "compiling" in line]
    assert len(starts) == len(expected) and max(starts) < min(i for i, l in enumerate(lines) if " built " in l), err
    assert all("first use only, about" in lines[i] and " into " in lines[i] for i in starts), err


@pytest.mark.skipif(jit.process_libstdcxx() is None, reason="no shared libstdc++ in this process")
def test_library_links_the_process_libstdcxx_and_carries_no_copy_of_it(built_all):
    libraries, _ = built_all
    assert jit.process_libstdcxx() in jit.link_flags()
    for library in libraries.values():
        needed = subprocess.run(["readelf", "-d", library], capture_output=True, text=True, check=True).stdout
        assert "libstdc++.so" in needed, needed
        exported = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True,
                                  check=True).stdout
        # A private copy of libstdc++'s locale code is what crashed number formatting.
        assert "_ZNSt6locale" not in exported


def test_error_formatting_reproducer_raises_when_linked_like_the_library():
    # scripts/experiments/probe_error_formatting.py: a one-op extension per way of failing, each
    # called in its own process. Linked as the library links, none may crash.
    probe = ROOT / "scripts" / "experiments" / "probe_error_formatting.py"
    proc = subprocess.run([sys.executable, str(probe), "--library-link", "--check"], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
