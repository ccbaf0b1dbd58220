"""scripts/sanitizer_rows.py: compute-sanitizer's logs of scripts/sanitize_cuda.py made into table rows
(no GPU needed: the logs are written here, in the tools' own words)."""

import importlib.util
from pathlib import Path

import pytest

from harness import results_table

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sanitizer_rows.py"
_spec = importlib.util.spec_from_file_location("sanitizer_rows", SCRIPT)
sanitizer_rows = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sanitizer_rows)

START = "========= COMPUTE-SANITIZER\nsanitize_cuda: GPU X, torch 9.9.0+cu999\n"
CLEAN = START + "sanitize_cuda: 0 mismatches\n========= ERROR SUMMARY: 0 errors\n"
RACE_CLEAN = START + ("sanitize_cuda: 0 mismatches\n"
                      "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
ONE_ERROR = START + ("========= Invalid __global__ read of size 4 bytes\n"
                     "sanitize_cuda: 0 mismatches\n========= ERROR SUMMARY: 1 error\n")
RACE_WARNING = START + ("sanitize_cuda: 0 mismatches\n"
                        "========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n")
MISMATCH = START + "sanitize_cuda: 3 mismatches\n========= ERROR SUMMARY: 0 errors\n"
CUT_SHORT = START


def _run(tmp_path, logs: dict[str, str]):
    paths = []
    for tool, text in logs.items():
        paths.append(tmp_path / f"sanitize_{tool}.log")
        paths[-1].write_text(text)
    table = tmp_path / "rows.csv"
    status = sanitizer_rows.main([*map(str, paths), "--table", str(table)])
    return status, (results_table.read(table) if table.exists() else [])


def test_clean_logs_make_one_row_per_tool_and_exit_zero(tmp_path):
    status, rows = _run(tmp_path, {"memcheck": CLEAN, "racecheck": RACE_CLEAN, "synccheck": CLEAN,
                                   "initcheck": CLEAN})
    assert status == 0
    assert [r["method"] for r in rows] == [f"compute-sanitizer {t}, scripts/sanitize_cuda.py"
                                           for t in ("memcheck", "racecheck", "synccheck", "initcheck")]
    # The GPU and torch the run named, not this machine's.
    assert all(r["gpu"] == "GPU X" and r["torch"] == "9.9.0+cu999" and r["exact"] == "yes" for r in rows)
    assert rows[1]["note"] == "0 errors, 0 hazards; 0 results differing from the reference"
    assert rows[0]["note"] == "0 errors; 0 results differing from the reference"


@pytest.mark.parametrize("tool, text, note, exact", [
    ("memcheck", ONE_ERROR, "1 errors; 0 results differing from the reference", "yes"),
    ("racecheck", RACE_WARNING, "0 errors, 2 hazards; 0 results differing from the reference", "yes"),
    ("initcheck", MISMATCH, "0 errors; 3 results differing from the reference", "no"),
], ids=["memcheck error", "racecheck warning", "initcheck mismatch"])
def test_an_error_a_hazard_or_a_mismatch_is_recorded_and_fails_the_run(tmp_path, tool, text, note, exact):
    status, rows = _run(tmp_path, {"synccheck": CLEAN, tool: text})
    assert status == 1
    assert [(r["note"], r["exact"]) for r in rows][1] == (note, exact)


@pytest.mark.parametrize("text", [CUT_SHORT, CLEAN.replace(START, "========= COMPUTE-SANITIZER\n")],
                         ids=["no summary", "no GPU line"])
def test_a_log_cut_short_gives_no_row_and_fails_the_run(tmp_path, capsys, text):
    status, rows = _run(tmp_path, {"memcheck": CLEAN, "synccheck": text})
    assert status == 1
    assert [r["method"].split()[1] for r in rows] == ["memcheck,"]
    assert "sanitize_synccheck.log: no GPU line, summary or mismatch count" in capsys.readouterr().out


def test_a_log_not_named_after_a_tool_is_refused(tmp_path, capsys):
    log = tmp_path / "sanitize.log"
    log.write_text(CLEAN)
    with pytest.raises(SystemExit) as exit_:
        sanitizer_rows.main([str(log)])
    assert exit_.value.code != 0 and "sanitize_<tool>.log" in capsys.readouterr().err
