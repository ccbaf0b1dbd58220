"""Compile the CUDA modules' sources for sm_90 with nvcc (no GPU needed) and fail on
register spills reported by ptxas; the CUDA op's launcher and the hybrid's kernels compile without torch
headers; the host units of the CUDA modules and the torch-free experiments compile; the launcher's device
cache, run against a stand-in for the CUDA runtime, answers right. Skips when nvcc is not installed."""

import atexit
import re
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from torch.utils.cpp_extension import include_paths

from kernels import jit

NVCC = shutil.which("nvcc")


# The CUDA modules with an nvcc unit: the one without (the C++ autograd) is built and loaded on
# every machine by tests/test_jit.py, which hangs it on the CPU tail.
CUDA_MODULES = [name for name, m in jit.MODULES.items() if m.device == "cuda" and m.cuda]
# The tail's nvcc units (its launcher and switch, one element type or two each).
TAIL_UNITS = jit.MODULES["tail_cuda"].cuda
# scripts/experiments' CUDA sources built by nvcc alone (the others load torch's headers, 20-40 s each here).
TORCH_FREE_EXPERIMENTS = ["l2_kept_word.cu", "matvec_variants.cu", "pdl_wait_probe.cu", "read_floor.cu"]


def _torch_compile_flags(tmp_path):
    # The CPU wheel ships the c10/cuda headers but not this generated one.
    shim = tmp_path / "c10" / "cuda" / "impl"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return [jit.torch_cxx_standard(), *(f"-I{p}" for p in include_paths()), f"-I{tmp_path}", f"-I{jit.SOURCE_DIR}"]


def _commands(out):
    """Every nvcc build the tests below check, by name: (command, what the test reads)."""
    torch_flags = _torch_compile_flags(out)
    sm90 = ["-gencode=arch=compute_90,code=sm_90", "-O3", "--fmad=false", "-Xptxas=-v"]
    commands = {}
    # scripts/tail_variants.cu compiles the library's launcher (the tail's nvcc units, every kernel of its
    # switch) and the experiments' kernels, without torch's include paths.
    for version in (209, 211):
        commands[f"tail{version}"] = [NVCC, "-c", str(jit.SOURCE_DIR.parent / "scripts" / "tail_variants.cu"),
                                      "-o", str(out / f"t{version}.o"), "-std=c++17", *sm90,
                                      f"-DKB14_TORCH_VERSION={version}", f"-I{jit.SOURCE_DIR}"]
    commands["colsum"] = [NVCC, "-c", str(jit.SOURCE_DIR / "colsum.cu"), "-o", str(out / "c.o"), *sm90,
                          "-DKB14_TORCH_VERSION=211", *torch_flags]
    # The hybrid's nvcc unit includes nothing of torch either: no torch include path.
    commands["hybrid"] = [NVCC, "-c", str(jit.SOURCE_DIR / "hybrid.cu"), "-o", str(out / "hy.o"), "-std=c++17", *sm90,
                          "-DKB14_TORCH_VERSION=211", f"-I{jit.SOURCE_DIR}"]
    # The tail's nvcc units as kernels/jit.py builds them, for each architecture.
    for arch in ("90", "80"):
        for unit in TAIL_UNITS:
            commands[f"launcher{arch} {unit}"] = [NVCC, "-c", str(jit.SOURCE_DIR / unit), "-o",
                                                  str(out / f"l{arch}_{unit}.o"), "-std=c++17", "-Xptxas=-v",
                                                  *jit.nvcc_flags(arch), f"-I{jit.SOURCE_DIR}"]
    # The experiments' torch-free CUDA sources include the library's headers: they must still compile (to
    # PTX only: ptxas adds time and nothing these builds check).
    for source in TORCH_FREE_EXPERIMENTS:
        commands[f"experiment {source}"] = [NVCC, "-c", str(jit.SOURCE_DIR.parent / "scripts" / "experiments" / source),
                                            "-o", str(out / f"{source}.o"), "-std=c++17",
                                            "-gencode=arch=compute_90,code=compute_90", "-DKB14_TORCH_VERSION=211",
                                            f"-I{jit.SOURCE_DIR}"]
    # query_device_shape's cache, built and run against a stand-in for the CUDA runtime (tests/device_cache_probe.cu).
    probe = out / "device_cache_probe"
    build_probe = [NVCC, str(Path(__file__).with_name("device_cache_probe.cu")), "-o", str(probe), "-std=c++17", "-O2",
                   "-Xcompiler", "-pthread", "--cudart", "none", "-gencode=arch=compute_90,code=sm_90",
                   f"-I{jit.SOURCE_DIR}"]
    commands["device cache"] = ["sh", "-c", f"{shlex.join(build_probe)} && {shlex.quote(str(probe))}"]
    # The host compiler's unit of each CUDA module (the ops, their registration, the C++ autograd); nvcc
    # drives the host compiler so that the CUDA headers are found.
    for module in CUDA_MODULES:
        for k, source in enumerate(jit.MODULES[module].cpp):
            commands[f"host {module} {k}"] = [NVCC, "-c", str(jit.SOURCE_DIR / source),
                                              "-o", str(out / f"h_{module}_{k}.o"), "-O1", *torch_flags]
    return commands


_started = {}  # build name -> Future, once start_builds() has run
_running = set()  # the nvcc processes under way


def start_builds():
    """Start every build and return at once. conftest calls this at collection, so that the builds (niced,
    two at a time) use what the other tests leave of the cores, and runs this file's checks last."""
    if NVCC is None or _started:
        return _started
    out = Path(tempfile.mkdtemp(prefix="kb14nvcc_"))
    atexit.register(shutil.rmtree, out, True)
    nice = ["nice", "-n", "10"] if shutil.which("nice") else []

    def run(cmd):
        with subprocess.Popen(nice + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            _running.add(proc)
            try:
                report = proc.communicate(timeout=900)[0]
            except subprocess.TimeoutExpired:
                proc.kill()  # as subprocess.run does, or leaving the `with` waits for it
                raise
            finally:
                _running.discard(proc)
            return proc.returncode, report

    pool = ThreadPoolExecutor(2)
    _started.update({name: pool.submit(run, cmd) for name, cmd in _commands(out).items()})
    pool.shutdown(wait=False)
    return _started


def cancel_builds():
    """Drop the builds not yet done, so that a run ending early (-x, Ctrl-C) does not wait for them."""
    for future in _started.values():
        future.cancel()
    for proc in list(_running):
        proc.kill()


@pytest.fixture(scope="module")
def builds():
    """{name: (return code, nvcc's and ptxas's output)} of every build."""
    if NVCC is None:
        pytest.skip("nvcc not installed")
    return {name: future.result() for name, future in start_builds().items()}


def _built(builds, name: str) -> str:
    rc, report = builds[name]
    assert rc == 0, report[-3000:]
    return report


def _no_spills(report: str) -> None:
    kernels = re.findall(r"Compiling entry function '([^']+)'", report)
    assert kernels, report[-3000:]
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", report)]
    assert len(spills) >= len(kernels) and not any(spills), report[-3000:]


@pytest.mark.parametrize(
    "build", ["tail209", "tail211", "colsum", "hybrid"],
    ids=["fused_reduce-order-2.4-2.9", "fused_reduce-order-2.10+", "colsum", "hybrid-without-torch-headers"])
def test_sm90_build_has_no_spills(builds, build):
    _no_spills(_built(builds, build))


@pytest.mark.parametrize("torch_version", [209, 211])
def test_tail_kernels_build_without_torch_headers(builds, torch_version):
    # scripts/tail_variants.cu includes the tail's nvcc units and nothing of torch: with no torch
    # include path it must still compile, without spills.
    report = _built(builds, f"tail{torch_version}")
    assert "lean_rows_kernel" in report and "split_lane_rows_kernel" in report
    _no_spills(report)


@pytest.mark.parametrize("arch", ["90", "80"])
def test_cuda_launcher_builds_without_torch_headers(builds, arch):
    # The tail_cuda module's nvcc units include nothing of torch; built as kernels/jit.py builds them,
    # every architecture with the same kernels (the launch kind is the call's).
    report = "".join(_built(builds, f"launcher{arch} {unit}") for unit in TAIL_UNITS)
    kernels = set(re.findall(r"Compiling entry function '(_ZN4kb144tail[^']+)'", report))
    lean = {k for k in kernels if "lean_rows_kernel" in k}
    # The switch's leaves (kernels/fused_reduce_switch.cuh), lean_rows_kernel: float block rows (aligned or
    # shifted), rows of one chunk, warmed, five vectors, warp rows, deep and wide warp rows (2 + 1 + 1 + 2 + 2
    # + 2 + 2); half and bfloat16 block rows, warp rows and deep block rows, each aligned or shifted with
    # either multiply, and rows of one chunk with either multiply (2 x (4 + 4 + 4 + 2)).
    assert len(lean) == 12 + 28, sorted(lean)
    # split_lane_rows_kernel: float 32, 48, 64 loads and staged, 16-bit 8 and 16, each aligned or shifted
    # (16-bit: with either multiply); the general kernels: 3 of each dtype.
    assert len(kernels) - len(lean) == 8 + 16 + 12, sorted(kernels - lean)


@pytest.mark.parametrize("source", TORCH_FREE_EXPERIMENTS)
def test_torch_free_experiments_compile(builds, source):
    _built(builds, f"experiment {source}")


@pytest.mark.parametrize("module", CUDA_MODULES)
def test_cuda_module_host_units_compile(builds, module):
    names = [name for name in builds if name.startswith(f"host {module} ")]
    assert len(names) == len(jit.MODULES[module].cpp)
    for name in names:
        _built(builds, name)


def test_the_device_cache_queries_each_device_once_and_threads_agree(builds):
    report = _built(builds, "device cache")
    wrong, after_race, after_cached, after_failed, failed, refused = (int(v) for v in re.search(
        r"^WRONG (\d+) QUERIES (\d+) (\d+) (\d+) FAILED (\d+) REFUSED (\d+)$", report, re.M).groups())
    assert wrong == 0 and after_race >= 9  # 3 devices x 3 attributes, more where threads raced
    assert after_cached == after_race  # known devices are not queried again
    assert failed == 2 and after_failed == after_cached + 2  # a failed query is returned, not cached
    assert refused == 2


def test_loads_before_first_wait_counts_loads_until_a_loaded_register_is_read():
    import sys

    sys.path.insert(0, str(jit.SOURCE_DIR.parent / "scripts"))
    from split_compile_sass import loads_before_first_wait

    sass = ["LDC R1, c[0x0][0x28] ;",
            "@!P0 LDG.E.CONSTANT R3, desc[UR14][R22.64] ;",
            "LDG.E.NA.128.CONSTANT R4, desc[UR4][R20.64] ;",
            "ISETP.GE.AND P1, PT, R0, UR9, PT ;",  # reads R0 only
            "IMAD.WIDE R8, R2, 0x10, R20 ;",  # reads R2 and R20, neither loaded yet
            "@P1 LDG.E.CONSTANT R2, desc[UR14][R26.64] ;",
            "FMUL R12, R6, UR5 ;",  # R6: the second load's
            "LDG.E R13, desc[UR4][R24.64] ;"]
    assert loads_before_first_wait(sass) == 3
    assert loads_before_first_wait(sass[:6] + ["STG.E desc[UR4][R10.64], R3 ;"]) == 3  # a store reads its data
    assert loads_before_first_wait(["LDG.E R2, desc[UR4][R4.64] ;", "LDG.E R3, desc[UR4][R2.64] ;"]) == 1
