"""Inductor's compiled tail for one shape, as a cubin the microbenchmarks here can launch.

    python scripts/microbench/inductor_cubin.py OUTDIR DTYPE:ROWS:COLS [DTYPE:ROWS:COLS ...]

For each shape (DTYPE: float32, bfloat16 or float16) it compiles the eager tail
(`torch.sum(y / 2, 1, keepdim=True) * 1.5`) with torch.compile in a fresh process with its own
Triton and Inductor caches, takes the kernel configuration Inductor chose, and writes
OUTDIR/DTYPE_ROWSxCOLS.cubin, .json (name, block, rows per program, shared memory, registers,
whether its result equals eager's bits), .py (Inductor's generated module) and .env, the
variables KB14_TRITON_CUBIN / _NAME / _SMEM / _THREADS / _XBLOCK that row_read_patterns and
warp_row_staging read (`source OUTDIR/float32_1024x8192.env`). Needs a GPU; reads Inductor's
internals (PyCodeCache's modules, a launcher's cache_hash), as of torch 2.11.
"""
import glob
import json
import os
import shutil
import subprocess
import sys


def compile_one(out_dir: str, spec: str) -> None:
    import torch
    from torch._inductor.codecache import PyCodeCache

    dtype, rows, cols = spec.split(":")
    y = torch.randn(int(rows), int(cols), device="cuda", dtype=getattr(torch, dtype))
    tail = torch.compile(lambda t: torch.sum(t / 2, 1, keepdim=True) * 1.5, dynamic=False)
    got = tail(y)
    eager = torch.sum(y / 2, 1, keepdim=True) * 1.5
    # After autotuning a kernel keeps its chosen configuration only; the same kernel may sit
    # in more than one loaded module.
    tuned = {}
    for m in PyCodeCache.modules:
        for name in dir(m):
            launchers = getattr(getattr(m, name, None), "launchers", None)
            if launchers:
                tuned.setdefault(launchers[0].cache_hash, (name, launchers[0], m))
    if len(tuned) != 1:
        raise SystemExit(f"{spec}: expected one compiled kernel, found {[t[0] for t in tuned.values()]}")
    name, launcher, module = next(iter(tuned.values()))
    cubin = glob.glob(os.path.join(os.environ["TRITON_CACHE_DIR"], launcher.cache_hash, "*.cubin"))
    base = os.path.join(out_dir, f"{dtype}_{rows}x{cols}")
    shutil.copy(cubin[0], base + ".cubin")
    info = {"kernel": name, "threads": 32 * launcher.config.num_warps,
            "xblock": launcher.config.kwargs.get("XBLOCK", 1), "smem": launcher.shared,
            "config": str(launcher.config), "registers": launcher.n_regs, "spills": launcher.n_spills,
            "bits_equal_eager": bool(torch.equal(got, eager))}
    with open(base + ".json", "w") as f:
        json.dump(info, f, indent=1)
    shutil.copy(module.__file__, base + ".py")
    with open(base + ".env", "w") as f:
        f.write(f"export KB14_TRITON_CUBIN={os.path.abspath(base)}.cubin KB14_TRITON_NAME={name} "
                f"KB14_TRITON_SMEM={launcher.shared} KB14_TRITON_THREADS={info['threads']} "
                f"KB14_TRITON_XBLOCK={info['xblock']}\n")
    print(spec, json.dumps(info))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        compile_one(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    procs = []
    for spec in sys.argv[2:]:  # in parallel: each compile is a process of its own
        key = spec.replace(":", "_")
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(out_dir, "triton_" + key),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(out_dir, "inductor_" + key))
        procs.append(subprocess.Popen([sys.executable, __file__, "--one", out_dir, spec], env=env))
    failed = [spec for spec, p in zip(sys.argv[2:], procs) if p.wait() != 0]
    if failed:
        raise SystemExit(f"failed: {failed}")


if __name__ == "__main__":
    main()
