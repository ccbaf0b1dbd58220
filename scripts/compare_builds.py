"""The tail's CUDA units of another commit against the working tree's, kernel by kernel, without a GPU.

Both trees' kernels/ are compiled for sm_90 with kernels/jit.py's nvcc flags as a CUDA torch of
12.2+ sets them (--split-compile included), for each release group; every kernel's SASS (addresses
aside) is compared with its counterpart in the other build. Kernels are paired by demangled name
with the template arguments that the newer sources no longer take (the lean load's flavour, the
launch kind) removed, and any kernel left unpaired by name is paired by identical SASS where one
exists. Prints the kernels before and after and, per kernel, identical or different; exit status 1
if a kept kernel's SASS differs.

    python scripts/compare_builds.py [--base 39a345c] [--torch-version 209 213]

Needs nvcc, and cuobjdump with nvdisasm on PATH (a CUDA toolkit's, or pip's nvidia-cuda-nvdisasm); no GPU.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from kernels import jit  # noqa: E402
from split_compile_sass import kernels_sass  # noqa: E402


def flags(torch_version: int) -> list[str]:
    split = [f"--split-compile={jit.NVCC_SPLIT}"]
    base = [f for f in jit.nvcc_flags("90", torch_version) if not f.startswith("--split-compile")]
    # Sources before the launch kind became the op's argument compiled one launch kind, as kernels/jit.py
    # then said (sm_90: programmatic); later sources ignore the define.
    return base + split + ["-DKB14_PROGRAMMATIC_LAUNCH=1"]


def demangle(names: list[str]) -> list[str]:
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def normalise(name: str) -> str:
    """A kernel's demangled name without the template arguments the newer sources dropped: the lean
    load's flavour and the launch kind (kPdl), which lean_rows_kernel took as its 4th and 5th and
    split_lane_rows_kernel as its 3rd; and without lean_rows_kernel's 11th, kGathered (a814759), where
    false: the tail's kernels as the sources before it named them."""
    name = name.replace("kb14::tail::", "kb14::")
    match = re.match(r"void kb14::(lean_rows_kernel|split_lane_rows_kernel)<(.*)>\((.*)\)$", name)
    if not match:
        return name
    kernel, args = match[1], match[2].split(", ")
    if kernel == "lean_rows_kernel" and len(args) == 12:
        del args[3:5]
    elif kernel == "lean_rows_kernel" and len(args) == 11 and args[10] == "false":
        del args[10]
    elif kernel == "split_lane_rows_kernel" and len(args) == 7:
        del args[2]
    return f"void kb14::{kernel}<{', '.join(args)}>({match[3]})"


def tail_units(kernels_dir: Path) -> list[Path]:
    """A tree's nvcc units of the tail (one before 07e9ff4, three since): its jit.py may not import here."""
    return sorted(kernels_dir.glob("fused_reduce*.cu"))


def build(kernels_dir: Path, torch_version: int, out: Path) -> dict[str, list[str]]:
    sass = {}
    for unit in tail_units(kernels_dir):
        cubin = out / f"{unit.stem}_{torch_version}.cubin"
        subprocess.run(["nvcc", "-cubin", "-std=c++17", *flags(torch_version), f"-I{kernels_dir}", "-o", str(cubin),
                        str(unit)], check=True, cwd=out)
        sass.update(kernels_sass(cubin))
    mangled = list(sass)
    return {normalise(d): sass[m] for m, d in zip(mangled, demangle(mangled))}


def compare(old: dict[str, list[str]], new: dict[str, list[str]]) -> tuple[list[str], bool]:
    lines, ok = [], True
    unpaired_old = {n: s for n, s in old.items() if n not in new}
    by_body = {"\n".join(s): n for n, s in unpaired_old.items()}
    for name, body in sorted(new.items()):
        if name in old:
            same = old[name] == body
            ok &= same
            lines.append(f"  {'identical' if same else 'DIFFERENT'}  {name}")
        elif "\n".join(body) in by_body:
            old_name = by_body["\n".join(body)]
            lines.append(f"  identical (renamed from {old_name})  {name}")
            unpaired_old.pop(old_name)
        else:
            ok = False
            lines.append(f"  NEW        {name}")
    for name in sorted(unpaired_old):
        lines.append(f"  dropped    {name}")
    return lines, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="39a345c", help="the commit whose kernels/ is compared (default 39a345c)")
    parser.add_argument("--torch-version", type=int, nargs="+", default=[209, jit.torch_order()],
                        help="release groups to build (major * 100 + minor)")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="kb14_compare_") as tmp:
        tmp = Path(tmp)
        base_dir = tmp / "base"
        base_dir.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "kernels"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_dir)], input=archive, check=True)
        for version in args.torch_version:
            (tmp / f"old{version}").mkdir()
            (tmp / f"new{version}").mkdir()
            with ThreadPoolExecutor(2) as pool:
                old = pool.submit(build, base_dir / "kernels", version, tmp / f"old{version}")
                new = pool.submit(build, jit.SOURCE_DIR, version, tmp / f"new{version}")
                old, new = old.result(), new.result()
            lines, same = compare(old, new)
            ok &= same
            print(f"KB14_TORCH_VERSION={version}: {len(old)} kernels at {args.base}, {len(new)} in the working tree; "
                  f"{'every kept kernel SASS-identical' if same else 'SASS DIFFERS'}")
            print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
