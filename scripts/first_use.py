"""How long a new user waits: fresh processes, an empty build cache, then a warm one.

For each of `--runs` repetitions, in a new process each time:

* `import torch` alone (the baseline);
* `import torch, kernels` with an empty cache and again with the warm cache (neither
  compiles anything: the modules are built on an op's first call on a device);
* first output of `--model` (ModelNew unless named) at the KernelBench sizes on the device,
  from process start, empty cache (which builds the modules its ops need on that device) and
  warm cache, with each compile and link step of those builds (ninja's log);
* the reference Model's first output, the same way: what any user of the model waits
  (torch's import, the weights' initialisation, the GPU's start, cuBLAS), the library's
  share being the difference;
* `python -m kernels.build` with an empty cache: every module of this machine, ahead
  of time, in parallel.

    python scripts/first_use.py --device cpu --out first_use_cpu.json
    python scripts/first_use.py --device cuda --model ModelNewHybrid
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness import results_table  # noqa: E402

MODELS = ("ModelNew", "ModelNewHybrid", "ModelNewColsum")  # modelnew's, for --model
IMPORT_TORCH = "import time; t0 = time.perf_counter(); import torch; print('SECONDS', time.perf_counter() - t0)"
IMPORT_KERNELS = ("import time; t0 = time.perf_counter(); import torch, kernels; "
                  "print('SECONDS', time.perf_counter() - t0)")
FIRST_OUTPUT = """
import time; t0 = time.perf_counter()
import torch
import reference
{import_model}
device = torch.device({device!r})
torch.manual_seed(42)
model = {model}(*reference.get_init_inputs()).to(device)
x = reference.get_inputs()[0].to(device)
with torch.no_grad():
    out = model(x)
if device.type == "cuda":
    torch.cuda.synchronize()
print('SECONDS', time.perf_counter() - t0)
"""
# After the model's first output: the next measurement starts on an idle machine, with this cache complete.
BACKGROUND_BUILDS_DONE = """
from kernels import jit
jit.load_finished_builds(wait=True)
"""
# ModelNew's tail on CUDA: its C++ autograd, built in the background, must have loaded.
TAIL_AUTOGRAD_LOADED = """
if device.type == "cuda" and not any(line.startswith("AutogradCUDA:") and "tail_autograd_cuda.cpp" in line
                                     for line in torch._C._dispatch_dump("kb14::div_sum_scale").splitlines()):
    raise SystemExit("the C++ autograd, built in the background, did not load")
"""

BUILD_ALL = ("import time; t0 = time.perf_counter(); import torch; from kernels import jit; jit.build_all(); "
             "print('SECONDS', time.perf_counter() - t0)")


def timed(code: str, cache: Path) -> float:
    # The process's own clock starts after the interpreter: add what `python -c pass` costs.
    env = dict(os.environ, PYTHONPATH=str(ROOT), KB14_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return float(proc.stdout.split("SECONDS")[-1])


def ninja_steps(cache: Path) -> dict[str, dict[str, float]]:
    """Each build's compile and link steps, in seconds, from the .ninja_log ninja leaves in its folder:
    where the empty cache's wait goes (the host unit, the nvcc unit, the link)."""
    steps: dict[str, dict[str, float]] = {}
    for log in sorted(cache.glob("kb14_*/.ninja_log")):
        module = log.parent.name.split("_", 1)[1].rsplit("_", 1)[0]  # kb14_<module>_<key>
        for line in log.read_text().splitlines():
            fields = line.split("\t")
            if line.startswith("#") or len(fields) < 4:
                continue
            output = "link" if fields[3].endswith(".so") else fields[3]
            steps.setdefault(module, {})[output] = (int(fields[1]) - int(fields[0])) / 1e3
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="ModelNew", choices=MODELS, help="modelnew's model to time")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out")
    parser.add_argument("--table", help="append the medians to this measurements table (results/measurements.csv)")
    args = parser.parse_args()
    empty, warm = f"first {args.model} output, empty cache", f"first {args.model} output, warm cache"
    rows: dict[str, list[float]] = {k: [] for k in ("import torch", "import kernels, empty cache",
                                                    "import kernels, warm cache", empty, warm,
                                                    "first reference Model output",
                                                    "build_all (every module), empty cache")}
    first = (FIRST_OUTPUT.format(device=args.device, import_model=f"from modelnew import {args.model}",
                                 model=args.model)
             + BACKGROUND_BUILDS_DONE + (TAIL_AUTOGRAD_LOADED if args.model == "ModelNew" else ""))
    first_reference = FIRST_OUTPUT.format(device=args.device, import_model="", model="reference.Model")
    build_steps: list[dict[str, dict[str, float]]] = []
    for _ in range(args.runs):
        cache = Path(tempfile.mkdtemp(prefix="kb14_first_use_"))
        try:
            rows["import torch"].append(timed(IMPORT_TORCH, cache))
            rows[empty].append(timed(first, cache))
            build_steps.append(ninja_steps(cache))
            rows[warm].append(timed(first, cache))
            rows["first reference Model output"].append(timed(first_reference, cache))
            shutil.rmtree(cache)
            cache.mkdir()
            rows["import kernels, empty cache"].append(timed(IMPORT_KERNELS, cache))
            rows["import kernels, warm cache"].append(timed(IMPORT_KERNELS, cache))
            shutil.rmtree(cache)
            cache.mkdir()
            rows["build_all (every module), empty cache"].append(timed(BUILD_ALL, cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    import torch

    result = {"device": args.device, "model": args.model, "torch": torch.__version__, "cpus": os.cpu_count(),
              "machine": platform.machine(), "runs": args.runs,
              "gpu": torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else None,
              "seconds": {k: {"median": statistics.median(v), "all": v} for k, v in rows.items()},
              "first output's build steps, seconds, by run": build_steps,
              "note": "seconds from the start of each process's Python code (interpreter start not counted)"}
    for k, v in result["seconds"].items():
        print(f"{k:44s} {v['median']:7.2f} s  {['%.2f' % t for t in v['all']]}")
    for run, steps in enumerate(build_steps):
        print(f"run {run + 1}, the first output's builds:",
              "; ".join(f"{m} " + ", ".join(f"{o} {t:.1f} s" for o, t in outs.items()) for m, outs in steps.items()))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    if args.table:
        results_table.append(table_rows(result), Path(args.table))
    return 0


def table_rows(result: dict) -> list[dict]:
    """A row per measured step: the median in ms, the runs' range as the interval."""
    if result["device"] == "cpu":
        machine = f"{result['cpus']}-core CPU machine"
    else:  # the GPU's name as the run recorded it, so that rows can be made on another machine
        machine = result["gpu"]
    runs = result["runs"]
    model = result["model"]
    model_option = "" if model == "ModelNew" else f" --model {model}"

    def table_row(name: str, method: str, seconds: list[float]) -> dict:
        return results_table.row(commit=results_table.current_commit(), gpu=machine, torch=result["torch"],
                                 shape="1024x8192x8192", dtype="fp32", method=f"{method}, median of {runs} runs",
                                 implementation=name, time_ms=1e3 * statistics.median(seconds),
                                 interval_ms=1e3 * (max(seconds) - min(seconds)),
                                 note=f"scripts/first_use.py --device {result['device']}{model_option} --runs {runs}; "
                                      "interval = the runs' range")

    rows = [table_row(name, "whole process from start", v["all"]) for name, v in result["seconds"].items()]
    steps = result.get("first output's build steps, seconds, by run", [])
    for module, outputs in (steps[0] if steps else {}).items():
        for output in outputs:
            seconds = [run[module][output] for run in steps if output in run.get(module, {})]
            rows.append(table_row(f"first {model} output's build: {module} {output}", "ninja's log", seconds))
    return rows


if __name__ == "__main__":
    sys.exit(main())
