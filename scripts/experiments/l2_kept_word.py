"""Cycles of one read of a word after a 256 MB flush (a read: torch.max; a write: fill_), plain
against kept in L2 by an evict_last policy; with no flush both are L2 hits (the control).
Medians of 200 writes-flush-read sequences.

    python scripts/experiments/l2_kept_word.py [OUT.json]
"""
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def main() -> int:
    major, minor = torch.cuda.get_device_capability()
    so = Path(tempfile.mkdtemp()) / "l2_kept_word.so"
    subprocess.run(["nvcc", "-O3", f"-arch=sm_{major}{minor}", "-shared", "-Xcompiler", "-fPIC", "-o", str(so),
                    str(HERE / "l2_kept_word.cu")], check=True)
    lib = ctypes.CDLL(str(so))
    dev = torch.device("cuda")
    out = torch.zeros(2, dtype=torch.int64, device=dev)
    big = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    flushes = {"none": lambda: None, "read": lambda: big.view(torch.int32).max(), "write": lambda: big.fill_(1)}
    cycles = {}
    for flush_name, flush in flushes.items():
        for kept in (0, 1):
            samples = []
            for i in range(200):
                lib.probe_write(ctypes.c_ulonglong(i + 1))
                flush()
                lib.probe_read(kept, ctypes.c_void_p(out.data_ptr()))
                torch.cuda.synchronize()
                samples.append(int(out[0]))
            key = f"{flush_name}_{'kept' if kept else 'plain'}"
            cycles[key] = {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}
            print(flush_name, "kept" if kept else "plain", cycles[key], flush=True)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "cycles": cycles}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
