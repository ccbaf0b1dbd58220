"""The cached JIT build: keyed, shared across processes, safe under concurrency and crashes."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernels import jit

ROOT = Path(__file__).resolve().parent.parent
IMPORT = "import time; t = time.perf_counter(); import kernels; print(f'IMPORT_SECONDS {time.perf_counter() - t:.3f}')"


def _import_in_subprocess(cache_dir=None, **extra_env):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra_env)
    if cache_dir is not None:
        env["KB14_CACHE_DIR"] = str(cache_dir)
    return subprocess.Popen([sys.executable, "-c", IMPORT], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out, err


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("kb14cache")


def test_concurrent_first_imports_build_once(fresh_cache):
    procs = [_import_in_subprocess(fresh_cache) for _ in range(2)]
    results = [_finish(p) for p in procs]
    stderr = "".join(err for _, err in results)
    assert stderr.count("compiling") == 1, stderr
    assert "waiting for another process" in stderr
    assert len(list(fresh_cache.glob("kb14_*/.done"))) == 1


def test_second_process_loads_from_the_cache_without_compiling(fresh_cache):
    out, err = _finish(_import_in_subprocess(fresh_cache))
    assert "compiling" not in err
    assert "IMPORT_SECONDS" in out


def test_a_build_killed_half_way_is_rebuilt(fresh_cache):
    build_dir = next(fresh_cache.glob("kb14_*/.done")).parent
    # What a builder killed mid-way leaves: no completion marker, torch's own
    # baton file, half-written objects. Our flock died with the process.
    (build_dir / ".done").unlink()
    (build_dir / "lock").write_text("")
    for so in build_dir.glob("*.so"):
        so.write_bytes(b"truncated")
    proc = _import_in_subprocess(fresh_cache)
    _, err = _finish(proc, timeout=300)
    assert "compiling" in err
    assert (build_dir / ".done").exists()


def test_key_follows_sources_flags_and_verbosity(tmp_path, monkeypatch):
    spec = jit.BuildSpec.for_this_machine()
    key = spec.key()
    assert key == jit.BuildSpec.for_this_machine().key()
    copy = tmp_path / "kernels"
    shutil.copytree(jit.SOURCE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(jit, "SOURCE_DIR", copy)
    assert spec.key() == key
    (copy / "fused_reduce_cpu.cpp").write_text((copy / "fused_reduce_cpu.cpp").read_text() + "\n// changed\n")
    assert spec.key() != key
    monkeypatch.setattr(jit, "SOURCE_DIR", jit.SOURCE_DIR)
    monkeypatch.setenv("KB14_VERBOSE", "1")
    assert jit.BuildSpec.for_this_machine() != spec


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KB14_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert jit.cache_root() == tmp_path / "elsewhere"


@pytest.mark.skipif(jit.process_libstdcxx() is None, reason="no shared libstdc++ in this process")
def test_library_links_the_process_libstdcxx_and_carries_no_copy_of_it():
    library = jit.load_library()
    assert jit.process_libstdcxx() in jit.link_flags()
    needed = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    assert "libstdc++.so" in needed, needed
    exported = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                              check=True).stdout
    # A private copy of libstdc++'s locale code is what crashed number formatting.
    assert "_ZNSt6locale" not in exported


def test_error_formatting_reproducer_raises_when_linked_like_the_library():
    # scripts/probe_error_formatting.py: a one-op extension per way of failing, each
    # called in its own process. Linked as the library links, none may crash.
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "probe_error_formatting.py"), "--library-link",
                           "--check"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
