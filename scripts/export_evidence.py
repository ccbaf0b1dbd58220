"""Evidence for the exported KernelBench files (kernels/export.py), on a GPU: each file
loaded as KernelBench loads a result, checked against reference.Model with KernelBench's
protocol, compared with the library's own model, and timed with KernelBench's timing beside
the reference and the library's model.

    python -m kernels.export ModelNew -o /tmp/modelnew.py
    python -m kernels.export ModelNewHybrid -o /tmp/hybrid.py
    python scripts/export_evidence.py /tmp/modelnew.py /tmp/hybrid.py [--trials 100] [--json OUT]

Per file:
* the static rules (kernels.export.static_findings) on its text;
* the load: its text, with KernelBench's two lines above it (TORCH_EXTENSIONS_DIR), compiled
  and run in a plain dict; ModelNew taken from there and built under torch.no_grad() after
  torch.manual_seed(42), as reference.Model is (the first construction compiles: timed);
* correctness: `--trials` trials (default 100), seeds drawn from torch.manual_seed(42) as
  KernelBench draws them, inputs from reference.get_inputs() moved to the GPU, pass where
  torch.allclose(reference, file, atol=rtol=1e-4); also counted: outputs equal to the
  reference's (torch.equal) and to the library's model's;
* timing: KernelBench's cuda_event method (3 warm-up calls; per trial a 256 MiB L2 flush,
  events around one call; mean of `--timing-trials`), the reference, the library's model and
  the file's, taken `--rounds` times in turn.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import modelnew  # noqa: E402
import reference  # noqa: E402
from harness.protocol import KERNELBENCH_SEED, kernelbench_trial_seeds, set_seed, sync  # noqa: E402
from harness.timing import kernelbench_time, make_backend  # noqa: E402
from kernels import export  # noqa: E402

DEV = torch.device("cuda")
TOL = 1e-4
LIBRARY_MODELS = {"ModelNew": modelnew.ModelNew, "ModelNewHybrid": modelnew.ModelNewHybrid}


def say(msg: str) -> None:
    print(msg, flush=True)


def load_as_kernelbench(text: str, build_dir: str) -> tuple[type, dict]:
    """(ModelNew, the namespace) from the file's text, loaded as KernelBench's eval loads a CUDA result."""
    prefixed = "import os\n" f"os.environ['TORCH_EXTENSIONS_DIR'] = '{build_dir}'\n" + text
    context: dict = {}
    exec(compile(prefixed, "<string>", "exec"), context)
    return context["ModelNew"], context


def build(cls: type) -> torch.nn.Module:
    init = reference.get_init_inputs()
    with torch.no_grad():
        set_seed(KERNELBENCH_SEED, DEV)
        return cls(*init).to(device=DEV, dtype=torch.float32)


def correctness(ref, candidate, library, trials: int) -> dict:
    passed = equal_ref = equal_library = 0
    exact_rows = []
    worst = 0.0
    with torch.no_grad():
        for seed in kernelbench_trial_seeds(trials):
            set_seed(seed, DEV)
            x = reference.get_inputs()[0].to(DEV)
            want = ref(x)
            got = candidate(x)
            lib = library(x)
            sync(DEV)
            passed += bool(torch.allclose(want, got, atol=TOL, rtol=TOL))
            equal_ref += bool(torch.equal(want, got))
            equal_library += bool(torch.equal(lib, got))
            # How far inside the tolerance the worst output of the trial is (1: at the edge).
            worst = max(worst, float(((want - got).abs() / (TOL + TOL * got.abs())).max()))
            rows = getattr(candidate, "last_exact_rows", None)
            if rows is not None:
                exact_rows.append(int(rows.sum()))
    out = {"trials": trials, "passed": passed, "equal_to_reference": equal_ref, "equal_to_library_model": equal_library,
           "worst_error_over_tolerance": worst}
    if exact_rows:
        out["exact_rows_per_trial"] = {"min": min(exact_rows), "max": max(exact_rows),
                                       "mean": sum(exact_rows) / len(exact_rows)}
    return out


def timing(models: dict, rounds: int, trials: int) -> dict:
    backend = make_backend(DEV)
    set_seed(KERNELBENCH_SEED, DEV)
    x = reference.get_inputs()[0].to(DEV)
    means: dict[str, list[float]] = {name: [] for name in models}
    with torch.no_grad():
        for _ in range(rounds):
            for name, model in models.items():
                means[name].append(kernelbench_time(model, [x], trials=trials, backend=backend)["mean_ms"])
    return {name: {"mean_ms_per_round": values, "best_round_ms": min(values)} for name, values in means.items()}


def evidence_for(path: Path, args) -> dict:
    text = path.read_text()
    row: dict = {"file": str(path), "static_findings": export.static_findings(text)}
    with tempfile.TemporaryDirectory() as build_dir:
        cls, context = load_as_kernelbench(text, build_dir)
        name = context["EXPORTED_MODEL"]
        row.update(model=name, exported_torch_order=context["EXPORTED_TORCH_ORDER"],
                   release_group=context["EXPORTED_RELEASE_GROUP"], header=ast.get_docstring(ast.parse(text)))
        start = time.perf_counter()
        candidate = build(cls)
        row["first_construction_s"] = round(time.perf_counter() - start, 1)
        ref = build(reference.Model)
        library = build(LIBRARY_MODELS[name])
        assert torch.equal(candidate.weight, ref.weight), "the file's weight differs from the reference's"
        say(f"{path.name}: {name}, built in {row['first_construction_s']} s; {args.trials} trials ...")
        row["correctness"] = correctness(ref, candidate, library, args.trials)
        say(f"  {row['correctness']}")
        row["timing_ms"] = timing({"reference": ref, f"library {name}": library, f"exported {name}": candidate},
                                  args.rounds, args.timing_trials)
        for who, t in row["timing_ms"].items():
            say(f"  {who:28s} " + "  ".join(f"{v:.4f}" for v in t["mean_ms_per_round"]) + " ms (KernelBench mean)")
        del candidate, ref, library
        torch.cuda.empty_cache()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="exported files (python -m kernels.export ...)")
    parser.add_argument("--trials", type=int, default=100, help="correctness trials per file (default 100)")
    parser.add_argument("--timing-trials", type=int, default=100, help="timed calls per measurement (default 100)")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds, the models in turn (default 3)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    result = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(),
              "capability": list(torch.cuda.get_device_capability()), "files": []}
    for path in args.files:
        result["files"].append(evidence_for(path, args))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    ok = all(not f["static_findings"] and f["correctness"]["passed"] == f["correctness"]["trials"]
             for f in result["files"])
    say("every file passes the static rules and every trial" if ok else "SOME FILE FAILED (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
