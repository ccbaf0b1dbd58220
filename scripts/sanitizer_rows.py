"""Rows of the measurements table from compute-sanitizer's logs of scripts/sanitize_cuda.py, one per tool:

    python3 scripts/sanitizer_rows.py OUT/sanitize_memcheck.log OUT/sanitize_racecheck.log ... \
        --table OUT/measurements_new.csv

Each log is named sanitize_<tool>.log (scripts/gpu_evidence.sh's sanitize step writes them). A tool's run
is clean when its summary reports no error and sanitize_cuda.py found every result equal to the reference.
A log without both lines (a run cut short) gives no row. Exits 1 unless every log is complete and clean."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness import results_table  # noqa: E402

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
PATHS = ("every CUDA path: the tail's leaves, general and combine kernels, column sum, matrix-vector, "
         "the hybrid's kernels")
SUMMARY = re.compile(r"^========= ERROR SUMMARY: (\d+) errors?$", re.M)
RACE_SUMMARY = re.compile(r"^========= RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)$",
                          re.M)
MISMATCHES = re.compile(r"^sanitize_cuda: (\d+) mismatch(?:es)?$", re.M)


def parse(log: Path) -> dict:
    """{'tool', 'errors', 'hazards' (racecheck's, else None), 'mismatches'}; None for a count whose line is
    missing."""
    match = re.fullmatch(r"sanitize_(\w+)\.log", log.name)
    if match is None or match.group(1) not in TOOLS:
        raise ValueError(f"{log}: expected a name sanitize_<tool>.log, tool one of {', '.join(TOOLS)}")
    tool, text = match.group(1), log.read_text(errors="replace")
    mismatches = MISMATCHES.findall(text)
    errors = hazards = None
    if tool == "racecheck":
        race = RACE_SUMMARY.findall(text)
        if race:
            hazards, errors = int(race[-1][0]), int(race[-1][1])
    else:
        summary = SUMMARY.findall(text)
        if summary:
            errors = int(summary[-1])
    return {"tool": tool, "errors": errors, "hazards": hazards,
            "mismatches": int(mismatches[-1]) if mismatches else None}


def table_row(result: dict, gpu: str, torch_version: str) -> dict:
    note = f"{result['errors']} errors"
    if result["hazards"] is not None:
        note += f", {result['hazards']} hazards"
    note += f"; {result['mismatches']} results differing from the reference"
    return results_table.row(commit=results_table.current_commit(), gpu=gpu, torch=torch_version,
                             shape="(sanitize_cuda's own)", dtype="all",
                             method=f"compute-sanitizer {result['tool']}, scripts/sanitize_cuda.py",
                             implementation=PATHS, exact=result["mismatches"] == 0, note=note)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--table", type=Path, help="append the rows to this measurements table")
    parser.add_argument("--gpu", help="the GPU's name (default: torch's name for device 0)")
    args = parser.parse_args(argv)
    import torch

    if args.gpu is None and not torch.cuda.is_available():
        parser.error("no GPU is visible: name the one the logs came from with --gpu")
    gpu = args.gpu or torch.cuda.get_device_name(0)
    try:
        results = [parse(log) for log in args.logs]
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    rows, clean = [], True
    for log, result in zip(args.logs, results):
        if result["errors"] is None or result["mismatches"] is None:
            print(f"{log}: no summary or no mismatch count (a run cut short): no row")
            clean = False
            continue
        clean &= result["errors"] == 0 and result["mismatches"] == 0 and not result["hazards"]
        rows.append(table_row(result, gpu, torch.__version__))
        print(f"{result['tool']}: {rows[-1]['note']}")
    if args.table and rows:
        results_table.append(rows, args.table)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
