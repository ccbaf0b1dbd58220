"""scripts/gpu_evidence.sh's step selection, with the GPU programs replaced by stubs that log
their arguments (no GPU needed): STEPS runs the steps named, in the order named."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_evidence.sh"


@pytest.fixture
def stub_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("python3", "compute-sanitizer", "ncu"):
        stub = bin_dir / program
        stub.write_text(f'#!/bin/sh\necho "{program} $*" >> "{tmp_path}/calls.txt"\n')
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def _run(tmp_path, path, steps):
    env = {**os.environ, "PATH": path, "STEPS": steps}
    return subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out"), "600"], env=env, capture_output=True,
                          text=True, cwd=SCRIPT.parents[1], timeout=60)


def test_steps_run_in_the_order_named(tmp_path, stub_path):
    result = _run(tmp_path, stub_path, "first_use sanitize build")
    assert result.returncode == 0, result.stderr
    started = [line[3:] for line in result.stdout.splitlines() if line.startswith("== ")]
    assert started == ["first_use", "sanitize", "build"]
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls[0].startswith("python3 scripts/first_use.py --device cuda")
    # Every sanitizer, each into its own log, then a row per log.
    tools = [c.split()[2] for c in calls[1:5] if c.startswith("compute-sanitizer --tool ")]
    assert tools == ["memcheck", "racecheck", "synccheck", "initcheck"]
    assert calls[5] == (f"python3 scripts/sanitizer_rows.py "
                        + " ".join(f"{tmp_path}/out/sanitize_{t}.log" for t in tools)
                        + f" --table {tmp_path}/out/measurements_new.csv")
    assert calls[-1].startswith("python3 -c from kernels import jit")
    assert (tmp_path / "out.tgz").exists()


def test_the_hybrid_s_first_use_is_its_own_step(tmp_path, stub_path):
    result = _run(tmp_path, stub_path, "first_use_hybrid")
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls == [f"python3 scripts/first_use.py --device cuda --model ModelNewHybrid --runs 2 --out "
                     f"{tmp_path}/out/first_use_hybrid.json --table {tmp_path}/out/measurements_new.csv"]


def test_a_step_name_no_step_has_is_an_error(tmp_path, stub_path):
    result = _run(tmp_path, stub_path, "build sanitise")
    assert result.returncode == 2
    assert "no step named 'sanitise'" in result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("== ")] == ["== build"]


def test_the_gpu_suite_s_groups_run_every_test_file_once(tmp_path, stub_path):
    result = _run(tmp_path, stub_path, "gpu_suite")
    assert result.returncode == 0, result.stderr
    build, *calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert build.startswith("python3 -c from kernels import jit")  # the groups load what it built
    assert len(calls) == 4 and all(c.startswith("python3 -m pytest") for c in calls)
    files = {p.relative_to(SCRIPT.parents[1]).as_posix() for p in (SCRIPT.parents[1] / "tests").glob("test_*.py")}
    runs = []
    for call in calls:
        args = call.split()
        ignored = {a.removeprefix("--ignore=") for a in args if a.startswith("--ignore=")}
        named = {a for a in args if a.startswith("tests/test_")}
        runs += sorted(files - ignored) if "tests" in args else sorted(named)
        assert named <= files
    assert sorted(runs) == sorted(files)  # each file in exactly one group
