"""What nvcc's --split-compile changes in the code of a CUDA unit: the unit compiled to a cubin
in one part and in N parts (kernels/jit.py's NVCC_SPLIT by default), each kernel's SASS compared
(addresses aside), and the seconds each build took. With --baseline DIR, instead: what a change
to the sources did, the unit in DIR (a copy of another commit's kernels/, e.g. `git archive`)
against the working tree's, both in one part; for each kernel whose SASS differs, its
instructions and how many loads it issues before it first waits on one.

    python scripts/split_compile_sass.py [--source fused_reduce.cu] [--parts 4 8 16] [--torch-version 211]
    python scripts/split_compile_sass.py --baseline DIR [--source fused_reduce.cu]

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
    """{kernel: its SASS lines without the addresses, runs of spaces as one (cuobjdump pads its columns
    to the widest line of the file, so a kernel's lines depend on the others it is printed with)}."""
    text = subprocess.run([cuobjdump(), "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    out = {}
    for part in re.split(r"\n\s*Function : ", text)[1:]:
        name, _, body = part.partition("\n")
        out[name.strip()] = [re.sub(r"\s+", " ", re.sub(r"/\*[0-9a-f]{4,}\*/", "", line)).strip()
                             for line in body.splitlines() if line.strip()]
    return out


def build(source: Path, flags: list[str], cubin: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["nvcc", "-cubin", *flags, f"-I{source.parent}", "-o", str(cubin), str(source)], check=True)
    return time.perf_counter() - start


def loads_before_first_wait(sass: list[str]) -> int:
    """Global loads a kernel issues before its first instruction that reads a register one of
    them writes (the first wait on memory), in program order from the entry."""
    pending: set[int] = set()
    issued = 0
    for line in sass:
        words = line.rstrip(" ;").split(None, 1)
        if words and words[0].startswith("@"):  # a guard predicate
            words = words[1].split(None, 1) if len(words) > 1 else []
        if len(words) < 2:
            continue
        op, operands = words
        first, _, rest = operands.partition(",")
        # The first operand is written, unless the instruction stores (its address comes first)
        # or writes a predicate.
        writes_register = re.fullmatch(r"R\d+", first.strip()) and not op.startswith(("ST", "RED", "ATOM"))
        read = {int(r) for r in re.findall(r"\bR(\d+)\b", rest if writes_register else operands)}
        if pending & read:
            return issued
        if op.startswith("LDG"):
            width = 4 if ".128" in op else 2 if ".64" in op else 1
            dest = int(first.strip()[1:])
            pending.update(range(dest, dest + width))
            issued += 1
    return issued


def compare_with_baseline(baseline: Path, source_name: str, flags: list[str], tmp: Path) -> None:
    if not (baseline / source_name).is_file():
        raise SystemExit(f"--baseline: no {source_name} in {baseline} (give the copy's kernels/ folder)")
    ours, theirs = tmp / "ours.cubin", tmp / "baseline.cubin"
    print(f"{source_name}, flags {' '.join(flags)}; baseline {baseline}")
    print(f"working tree: {build(jit.SOURCE_DIR / source_name, flags, ours):.1f} s; "
          f"baseline: {build(baseline / source_name, flags, theirs):.1f} s")
    new, old = kernels_sass(ours), kernels_sass(theirs)
    differ = [k for k in new if new[k] != old.get(k)]
    print(f"{len(new)} kernels ({len(set(new) ^ set(old))} in one build only), {len(differ)} with other SASS")
    for k in differ:
        a, b = old.get(k, []), new[k]
        print(f"    {k}: {len(a)} -> {len(b)} instructions, loads before the first wait "
              f"{loads_before_first_wait(a)} -> {loads_before_first_wait(b)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="fused_reduce.cu",
                        help="a torch-free CUDA unit in kernels/ (the tail's: fused_reduce*.cu)")
    parser.add_argument("--parts", type=int, nargs="*", default=[jit.NVCC_SPLIT])
    parser.add_argument("--arch", default="90")
    parser.add_argument("--torch-version", type=int, help="the order's torch release, as 211 (default: installed)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="compare the working tree's unit with DIR's (another commit's kernels/) instead")
    args = parser.parse_args()
    source = jit.SOURCE_DIR / args.source
    flags = [f for f in jit.nvcc_flags(args.arch, args.torch_version) if not f.startswith("--split-compile")]
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline:
            compare_with_baseline(args.baseline.resolve(), args.source, flags, Path(tmp))
            return 0
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
