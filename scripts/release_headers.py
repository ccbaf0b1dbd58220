"""Which reduction-order group an installed torch belongs to, read from the Reduce.cuh its
wheel ships (torch/include/ATen/native/cuda/Reduce.cuh), CUDA branches only.

The library and oracle/cuda_order_model.py split releases into "2.4-2.9" and "2.10+" by
version number. This reads the three markers of that split from a release's own header, so a
wheel of any version can be checked without a GPU:

* ReduceOp::run: block_x_reduce (lanes) before block_y_reduce (warps), or after;
* block_x_reduce's warp shuffles: offsets dim_x/2 down to 1, or 1 up to dim_x/2;
* setReduceConfig's "vectorize along input": dim0 >= 128, or dim0 > 128.

    python scripts/release_headers.py [PYTHON ...] [--out FILE.json]

Each PYTHON (default: this one) is asked for its torch version and include folder.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

GROUP_MARKERS = {
    "2.10+": {"lanes_before_warps": True, "descending_shuffles": True, "vectorize_from_128_inclusive": True},
    "2.4-2.9": {"lanes_before_warps": False, "descending_shuffles": False, "vectorize_from_128_inclusive": False},
}


# Macros a CUDA wheel is built without: a conditional on any of them alone is a branch the
# wheel does not compile (2.11's block_x_reduce: `#if defined(USE_ROCM) || defined(FBCODE_CAFFE2)`).
UNDEFINED_IN_CUDA_WHEELS = ("USE_ROCM", "FBCODE_CAFFE2")


def _false_in_cuda_wheels(directive: str) -> bool:
    """Whether an #if/#ifdef line tests only macros a CUDA wheel leaves undefined."""
    m = re.match(r"#\s*ifdef\s+(\w+)\s*$", directive)
    if m:
        return m.group(1) in UNDEFINED_IN_CUDA_WHEELS
    m = re.match(r"#\s*if\s+(.*)$", directive)
    if not m:
        return False
    terms = [t.strip() for t in m.group(1).split("||")]
    return all(re.fullmatch(rf"defined\s*\(?\s*({'|'.join(UNDEFINED_IN_CUDA_WHEELS)})\s*\)?", t) for t in terms)


def cuda_lines(text: str) -> list[str]:
    """The header's lines as a CUDA wheel's build sees them: branches under conditionals on
    UNDEFINED_IN_CUDA_WHEELS dropped (their #else kept)."""
    kept, stack = [], []  # stack of (is_such_conditional, in_its_dropped_branch)
    for line in text.splitlines():
        directive = line.strip()
        if re.match(r"#\s*if", directive):
            dropped = _false_in_cuda_wheels(directive)
            stack.append((dropped, dropped))
        elif re.match(r"#\s*el", directive) and stack and stack[-1][0]:
            stack[-1] = (True, False)
        elif re.match(r"#\s*endif", directive) and stack:
            stack.pop()
        elif not any(cond and inside for cond, inside in stack):
            kept.append(line)
    return kept


def markers(header: Path) -> dict:
    text = "\n".join(cuda_lines(header.read_text()))
    run = re.search(r"C10_DEVICE void run\(\) const \{", text)
    x_def = re.search(r"C10_DEVICE [^\n(]* block_x_reduce\([^)]*shared_memory\) const \{", text)
    vector = re.search(r"reduction_on_fastest_striding_dimension && dim0 (>=?) 128", text)
    if run is None or x_def is None or vector is None:
        raise SystemExit(f"{header}: a marker was not found; the header's layout has changed")
    run_body = text[run.end():]
    x_at = run_body.find("block_x_reduce<output_vec_size>(value")
    y_at = run_body.find("block_y_reduce<output_vec_size>(value")
    x_body = text[x_def.end():]
    x_body = x_body[: x_body.index("return value;")]
    if min(x_at, y_at) < 0 or "offset <<= 1" not in x_body and "offset >>= 1" not in x_body:
        raise SystemExit(f"{header}: a marker was not found; the header's layout has changed")
    return {
        "lanes_before_warps": x_at < y_at,
        "descending_shuffles": re.search(r"offset = dim_x >> 1; offset > 0", x_body) is not None
        and re.search(r"offset = 1; offset < dim_x", x_body) is None,
        "vectorize_from_128_inclusive": vector.group(1) == ">=",
    }


def group_of(found: dict) -> str | None:
    return next((g for g, m in GROUP_MARKERS.items() if m == found), None)


def torch_of(python: str) -> tuple[str, Path]:
    code = ("import torch, pathlib; print(torch.__version__); "
            "print(pathlib.Path(torch.__file__).parent / 'include' / 'ATen' / 'native' / 'cuda' / 'Reduce.cuh')")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    return out[0].strip(), Path(out[1].strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="*", default=[sys.executable])
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from kernels.jit import release_group

    rows, bad = [], 0
    for python in args.pythons:
        version, header = torch_of(python)
        if not header.is_file():
            rows.append({"torch": version, "header": None, "note": "this wheel ships no Reduce.cuh"})
            continue
        found = markers(header)
        by_header, by_version = group_of(found), release_group(version)
        bad += by_header != by_version
        rows.append({"torch": version, "header": str(header), **found, "group_by_header": by_header,
                     "group_by_version": by_version})
        print(f"torch {version:16s} header says {by_header}, version says {by_version}  {found}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
