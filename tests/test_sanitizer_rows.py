"""scripts/sanitizer_rows.py: compute-sanitizer's logs of scripts/sanitize_cuda.py made into table rows
(no GPU needed: the logs are written here, in the tools' own words)."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness import results_table

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sanitizer_rows.py"
CLEAN = "========= COMPUTE-SANITIZER\nsanitize_cuda: 0 mismatches\n========= ERROR SUMMARY: 0 errors\n"
RACE_CLEAN = ("========= COMPUTE-SANITIZER\nsanitize_cuda: 0 mismatches\n"
              "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
ONE_ERROR = ("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n"
             "sanitize_cuda: 0 mismatches\n========= ERROR SUMMARY: 1 error\n")
RACE_WARNING = ("========= COMPUTE-SANITIZER\nsanitize_cuda: 0 mismatches\n"
                "========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n")
MISMATCH = "========= COMPUTE-SANITIZER\nsanitize_cuda: 3 mismatches\n========= ERROR SUMMARY: 0 errors\n"
CUT_SHORT = "========= COMPUTE-SANITIZER\n"


def _run(tmp_path, logs: dict[str, str]):
    paths = []
    for tool, text in logs.items():
        paths.append(tmp_path / f"sanitize_{tool}.log")
        paths[-1].write_text(text)
    table = tmp_path / "rows.csv"
    result = subprocess.run([sys.executable, str(SCRIPT), *map(str, paths), "--table", str(table), "--gpu", "GPU X"],
                            capture_output=True, text=True, timeout=120)
    return result, (results_table.read(table) if table.exists() else [])


def test_clean_logs_make_one_row_per_tool_and_exit_zero(tmp_path):
    result, rows = _run(tmp_path, {"memcheck": CLEAN, "racecheck": RACE_CLEAN, "synccheck": CLEAN,
                                   "initcheck": CLEAN})
    assert result.returncode == 0, result.stdout + result.stderr
    assert [r["method"] for r in rows] == [f"compute-sanitizer {t}, scripts/sanitize_cuda.py"
                                           for t in ("memcheck", "racecheck", "synccheck", "initcheck")]
    assert all(r["gpu"] == "GPU X" and r["exact"] == "yes" for r in rows)
    assert rows[1]["note"] == "0 errors, 0 hazards; 0 results differing from the reference"
    assert rows[0]["note"] == "0 errors; 0 results differing from the reference"


@pytest.mark.parametrize("tool, text, note, exact", [
    ("memcheck", ONE_ERROR, "1 errors; 0 results differing from the reference", "yes"),
    ("racecheck", RACE_WARNING, "0 errors, 2 hazards; 0 results differing from the reference", "yes"),
    ("initcheck", MISMATCH, "0 errors; 3 results differing from the reference", "no"),
], ids=["memcheck error", "racecheck warning", "initcheck mismatch"])
def test_an_error_a_hazard_or_a_mismatch_is_recorded_and_fails_the_run(tmp_path, tool, text, note, exact):
    result, rows = _run(tmp_path, {"synccheck": CLEAN, tool: text})
    assert result.returncode == 1
    assert [(r["note"], r["exact"]) for r in rows][1] == (note, exact)


def test_a_log_cut_short_gives_no_row_and_fails_the_run(tmp_path):
    result, rows = _run(tmp_path, {"memcheck": CLEAN, "synccheck": CUT_SHORT})
    assert result.returncode == 1
    assert [r["method"].split()[1] for r in rows] == ["memcheck,"]
    assert "sanitize_synccheck.log: no summary" in result.stdout


def test_a_log_not_named_after_a_tool_is_refused(tmp_path):
    log = tmp_path / "sanitize.log"
    log.write_text(CLEAN)
    result = subprocess.run([sys.executable, str(SCRIPT), str(log), "--gpu", "GPU X"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "sanitize_<tool>.log" in result.stderr
