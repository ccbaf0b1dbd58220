"""What compiling costs, header by header and unit by unit (plain wall-clock timing).

* each torch header alone, parsed by the host compiler (-fsyntax-only, -O3);
* each translation unit of the kernel modules compiled to an object as kernels/jit.py
  compiles it (host units with -O3; nvcc units for sm_90, skipped without nvcc; the host
  units of CUDA modules through nvcc, which finds the CUDA headers).

    python scripts/experiments/header_costs.py --out header_costs_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

HEADERS = ["c10/util/Exception.h", "c10/util/Half.h", "c10/util/BFloat16.h", "c10/core/ScalarType.h",
           "ATen/Parallel.h", "ATen/core/Tensor.h", "ATen/TensorIterator.h", "ATen/core/dispatch/Dispatcher.h",
           "torch/library.h", "ATen/ATen.h", "torch/csrc/autograd/variable.h",
           "torch/csrc/autograd/custom_function.h", "torch/csrc/stable/library.h"]


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(" ".join(cmd) + "\n" + result.stderr[-2000:])
    return round(seconds, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    args = parser.parse_args()
    import torch
    from torch.utils.cpp_extension import include_paths

    from kernels import jit

    cxx = os.environ.get("CXX", "c++")
    nvcc = shutil.which("nvcc")
    std = jit.torch_cxx_standard()
    includes = [f"-I{p}" for p in include_paths()] + [f"-I{jit.SOURCE_DIR}"]
    result = {"torch": torch.__version__, "cpus": os.cpu_count(), "machine": platform.machine(),
              "compiler": subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0],
              "headers_syntax_only_s": {}, "units_s": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        shim = tmp / "c10" / "cuda" / "impl"  # the CPU wheel lacks this generated header
        shim.mkdir(parents=True)
        (shim / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        includes.append(f"-I{tmp}")
        for header in HEADERS:
            src = tmp / "h.cpp"
            src.write_text(f"#include <{header}>\n")
            result["headers_syntax_only_s"][header] = timed([cxx, std, "-O3", "-fsyntax-only", *includes, str(src)])
            print(f"{header:45s} {result['headers_syntax_only_s'][header]:6.2f} s", flush=True)
        host = [*jit.HOST_FLAGS, "-fPIC"]
        for name, module in jit.MODULES.items():
            for source in module.cpp:
                if module.cuda:
                    if nvcc is None:
                        continue
                    cmd = [nvcc, "-c", "-O3", std, "-Xcompiler", "-fPIC", *includes, str(jit.SOURCE_DIR / source)]
                else:
                    cmd = [cxx, "-c", std, *host, *includes, str(jit.SOURCE_DIR / source)]
                result["units_s"][f"{name}: {source}"] = timed(cmd + ["-o", str(tmp / "u.o")])
            for source in module.cuda:
                if nvcc is None:
                    continue
                cmd = [nvcc, "-c", std, *jit.nvcc_flags("90"), *includes, str(jit.SOURCE_DIR / source),
                       "-o", str(tmp / "u.o")]
                result["units_s"][f"{name}: {source}"] = timed(cmd)
        for unit, seconds in result["units_s"].items():
            print(f"{unit:45s} {seconds:6.2f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
