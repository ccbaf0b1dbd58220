"""Compile the CUDA modules' sources for sm_90 with nvcc (no GPU needed) and fail on
register spills reported by ptxas; the CUDA op's launcher compiles without torch
headers; the host units of the CUDA modules compile. Skips when nvcc is not installed."""

import re
import shutil
import subprocess

import pytest
from torch.utils.cpp_extension import include_paths

from kernels import jit

NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize(
    "source,torch_version",
    [("fused_reduce.cu", 209), ("fused_reduce.cu", 211), ("colsum.cu", 211)],
    ids=["fused_reduce-order-2.4-2.9", "fused_reduce-order-2.10+", "colsum"],
)
def test_sm90_build_has_no_spills(tmp_path, source, torch_version):
    # Both launch kinds of the lean kernel (no KB14_PROGRAMMATIC_LAUNCH), as comparison builds have them.
    cmd = [NVCC, "-c", str(jit.SOURCE_DIR / source), "-o", str(tmp_path / "k.o"),
           "-gencode=arch=compute_90,code=sm_90", "-O3", "--fmad=false",
           "-Xptxas=-v", f"-DKB14_TORCH_VERSION={torch_version}", *_torch_compile_flags(tmp_path)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-3000:]
    kernels = re.findall(r"Compiling entry function '([^']+)'", report)
    assert kernels, report[-3000:]
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", report)]
    assert len(spills) >= len(kernels) and not any(spills), report[-3000:]


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("torch_version", [209, 211])
def test_tail_kernels_build_without_torch_headers(tmp_path, torch_version):
    # scripts/tail_variants.cu includes kernels/tail_kernels.cuh and nothing of torch:
    # with no torch include path it must still compile, without spills.
    cmd = [NVCC, "-c", str(jit.SOURCE_DIR.parent / "scripts" / "tail_variants.cu"), "-o", str(tmp_path / "t.o"),
           "-gencode=arch=compute_90,code=sm_90", "-std=c++17", "-O3", "--fmad=false", "-Xptxas=-v",
           f"-DKB14_TORCH_VERSION={torch_version}", f"-I{jit.SOURCE_DIR}"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-3000:]
    assert "lean_rows_kernel" in report
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", report)]
    assert spills and not any(spills), report[-3000:]


def _torch_compile_flags(tmp_path):
    # The CPU wheel ships the c10/cuda headers but not this generated one.
    shim = tmp_path / "c10" / "cuda" / "impl"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return [jit.torch_cxx_standard(), *(f"-I{p}" for p in include_paths()), f"-I{tmp_path}", f"-I{jit.SOURCE_DIR}"]


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("arch,programmatic", [("90", 1), ("80", 0)])
def test_cuda_launcher_builds_without_torch_headers(tmp_path, arch, programmatic):
    # fused_reduce.cu (the tail_cuda module's nvcc unit) includes nothing of torch; built as
    # kernels/jit.py builds it, with only the lean kernels that architecture launches.
    flags = jit.nvcc_flags(arch)
    assert f"-DKB14_PROGRAMMATIC_LAUNCH={programmatic}" in flags
    cmd = [NVCC, "-c", str(jit.SOURCE_DIR / "fused_reduce.cu"), "-o", str(tmp_path / "l.o"), "-std=c++17",
           "-Xptxas=-v", *flags, f"-I{jit.SOURCE_DIR}"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-3000:]
    lean = re.findall(r"Compiling entry function '(_ZN4kb144tail16lean_rows_kernel[^']+)'", report)
    # float, half, bfloat16 x (block or warp per row) x (aligned or shifted rows), one launch
    # kind; half and bfloat16 again with the packed multiply (power-of-two 1 / divisor); rows
    # of exactly one chunk (kExactRows, aligned): float, and half and bfloat16 with either
    # multiply; the deep warp-per-row kernel (few rows) again for each type, row alignment and
    # multiply; float rows of five vectors per thread, and float warp rows of eight vectors per
    # lane (many rows), either alignment; half and bfloat16 block rows of eight vectors in
    # flight, either alignment and multiply; with programmatic launches, float rows of one
    # chunk again warming L2 behind another warmed launch
    assert len(set(lean)) == 12 + 8 + 1 + 4 + 10 + 2 + 2 + 8 + programmatic, lean


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("module", [name for name, m in jit.MODULES.items() if m.device == "cuda"])
def test_cuda_module_host_units_compile(tmp_path, module):
    # The host compiler's unit of each CUDA module (the ops, their registration, the C++
    # autograd); nvcc drives the host compiler so that the CUDA headers are found.
    for source in jit.MODULES[module].cpp:
        cmd = [NVCC, "-c", str(jit.SOURCE_DIR / source), "-o", str(tmp_path / "h.o"), "-O1",
               *_torch_compile_flags(tmp_path)]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


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
