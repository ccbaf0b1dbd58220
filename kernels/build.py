"""Build every kernel module this machine can run, ahead of time, in parallel.

    python -m kernels.build            # CPU modules, and CUDA ones where a GPU is visible
    python -m kernels.build --device cpu
"""

from __future__ import annotations

import argparse
import sys
import time

from kernels import jit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), action="append",
                        help="only this device's modules (repeatable); default: every device present")
    args = parser.parse_args()
    start = time.perf_counter()
    built = jit.build_all(tuple(args.device) if args.device else None)
    for name, library in built.items():
        print(f"{name:12s} {library}")
    print(f"{len(built)} modules ready in {time.perf_counter() - start:.1f} s (cache: {jit.cache_root()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
