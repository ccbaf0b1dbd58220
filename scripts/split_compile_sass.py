"""What nvcc's --split-compile changes in the code of a CUDA unit: the unit compiled to a cubin
in one part and in N parts (kernels/jit.py's NVCC_SPLIT by default), each kernel's SASS compared
(addresses aside), and the seconds each build took.

    python scripts/split_compile_sass.py [--source fused_reduce.cu] [--parts 4 8 16] [--torch-version 211]

Needs nvcc and cuobjdump (Triton's copy serves: TRITON's backends/nvidia/bin); no GPU.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from kernels import jit  # noqa: E402


def cuobjdump() -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    import triton
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if bundled.exists():
        return str(bundled)
    raise SystemExit("cuobjdump not found (CUDA toolkit or Triton)")


def kernels_sass(cubin: Path) -> dict[str, list[str]]:
    """{kernel: its SASS lines without the addresses}."""
    text = subprocess.run([cuobjdump(), "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    out = {}
    for part in re.split(r"\n\s*Function : ", text)[1:]:
        name, _, body = part.partition("\n")
        out[name.strip()] = [re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).strip() for line in body.splitlines()
                             if line.strip()]
    return out


def build(source: Path, flags: list[str], cubin: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["nvcc", "-cubin", *flags, f"-I{jit.SOURCE_DIR}", "-o", str(cubin), str(source)], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="fused_reduce.cu", help="a torch-free CUDA unit in kernels/")
    parser.add_argument("--parts", type=int, nargs="*", default=[jit.NVCC_SPLIT])
    parser.add_argument("--arch", default="90")
    parser.add_argument("--torch-version", type=int, help="the order's torch release, as 211 (default: installed)")
    args = parser.parse_args()
    source = jit.SOURCE_DIR / args.source
    flags = [f for f in jit.nvcc_flags(args.arch, args.torch_version) if not f.startswith("--split-compile")]
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "whole.cubin"
        print(f"{args.source}, flags {' '.join(flags)}")
        print(f"one part: {build(source, flags, whole):.1f} s")
        base = kernels_sass(whole)
        for n in args.parts:
            split = Path(tmp) / f"split{n}.cubin"
            seconds = build(source, [*flags, f"--split-compile={n}"], split)
            other = kernels_sass(split)
            differ = [k for k in base if base[k] != other.get(k)]
            print(f"{n} parts: {seconds:.1f} s; {len(base)} kernels, {len(differ)} with other SASS"
                  f"{', ' + str(len(set(other) - set(base))) + ' new' if set(other) - set(base) else ''}")
            for k in differ:
                a, b = base[k], other.get(k, [])
                lines = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
                print(f"    {k}: {len(a)} / {len(b)} lines, {lines} differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
