"""Rows of the measurements table from compute-sanitizer's logs of scripts/sanitize_cuda.py, one per tool:

    python3 scripts/sanitizer_rows.py OUT/sanitize_memcheck.log OUT/sanitize_racecheck.log ... \
        --table OUT/measurements_new.csv

Each log is named sanitize_<tool>.log (scripts/gpu_evidence.sh's sanitize step writes them); the GPU and
torch are the ones sanitize_cuda.py names in it, so rows can be made on any machine. A tool's run is clean
when its summary reports no error and sanitize_cuda.py found every result equal to the reference. A log
without those lines (a run cut short) gives no row. Exits 1 unless every log is complete and clean."""

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
WHERE = re.compile(r"^sanitize_cuda: (.+), torch (\S+)$", re.M)


def parse(log: Path) -> dict:
    """{'tool', 'gpu', 'torch', 'errors', 'hazards' (racecheck's, else None), 'mismatches'}; None for what
    the log does not say."""
    match = re.fullmatch(r"sanitize_(\w+)\.log", log.name)
    if match is None or match.group(1) not in TOOLS:
        raise ValueError(f"{log}: expected a name sanitize_<tool>.log, tool one of {', '.join(TOOLS)}")
    tool, text = match.group(1), log.read_text(errors="replace")
    mismatches, where = MISMATCHES.findall(text), WHERE.search(text)
    errors = hazards = None
    if tool == "racecheck":
        race = RACE_SUMMARY.findall(text)
        if race:
            hazards, errors = int(race[-1][0]), int(race[-1][1])
    else:
        summary = SUMMARY.findall(text)
        if summary:
            errors = int(summary[-1])
    return {"tool": tool, "gpu": where and where.group(1), "torch": where and where.group(2), "errors": errors,
            "hazards": hazards, "mismatches": int(mismatches[-1]) if mismatches else None}


def table_row(result: dict) -> dict:
    note = f"{result['errors']} errors"
    if result["hazards"] is not None:
        note += f", {result['hazards']} hazards"
    note += f"; {result['mismatches']} results differing from the reference"
    return results_table.row(commit=results_table.current_commit(), gpu=result["gpu"], torch=result["torch"],
                             shape="(sanitize_cuda's own)", dtype="all",
                             method=f"compute-sanitizer {result['tool']}, scripts/sanitize_cuda.py",
                             implementation=PATHS, exact=result["mismatches"] == 0, note=note)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--table", type=Path, help="append the rows to this measurements table")
    args = parser.parse_args(argv)
    try:
        results = [parse(log) for log in args.logs]
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    rows, clean = [], True
    for log, result in zip(args.logs, results):
        if None in (result["gpu"], result["errors"], result["mismatches"]):
            print(f"{log}: no GPU line, summary or mismatch count (a run cut short): no row")
            clean = False
            continue
        clean &= result["errors"] == 0 and result["mismatches"] == 0 and not result["hazards"]
        rows.append(table_row(result))
        print(f"{result['tool']}: {rows[-1]['note']}")
    if args.table and rows:
        results_table.append(rows, args.table)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
