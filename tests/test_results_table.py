"""The measurements table: rows keep every column, unknown columns raise, appends keep one header."""

import csv
import fcntl
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness import results_table

ROOT = Path(__file__).resolve().parent.parent


def test_append_writes_one_header_and_keeps_rows(tmp_path):
    path = tmp_path / "m.csv"
    results_table.append([results_table.row(implementation="a", time_ms=1.25, exact=True)], path)
    results_table.append([results_table.row(implementation="b", time_ms=2.0, exact=False)], path)
    rows = results_table.read(path)
    assert [r["implementation"] for r in rows] == ["a", "b"]
    assert [r["exact"] for r in rows] == ["yes", "no"]
    assert path.read_text().count("commit,date") == 1
    assert b"\r" not in path.read_bytes()  # one line ending, as the committed table has
    assert list(rows[0]) == list(results_table.COLUMNS)


def test_append_waits_for_a_writer_holding_the_table(tmp_path):
    # The GPU suite's groups append at once: a row is written whole, the header once.
    path = tmp_path / "m.csv"
    with path.open("a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        writer = threading.Thread(target=results_table.append, args=([results_table.row(implementation="b")], path))
        writer.start()
        writer.join(timeout=0.5)
        assert writer.is_alive() and path.stat().st_size == 0
        held = csv.DictWriter(holder, fieldnames=results_table.COLUMNS, lineterminator="\n")
        held.writeheader()
        held.writerow(results_table.row(implementation="a"))
    writer.join(timeout=10)
    assert [r["implementation"] for r in results_table.read(path)] == ["a", "b"]
    assert path.read_text().count("commit,date") == 1


def test_unknown_column_raises():
    with pytest.raises(KeyError, match="median"):
        results_table.row(median=1.0)


def test_committed_table_has_the_columns():
    rows = results_table.read()
    assert rows and list(rows[0]) == list(results_table.COLUMNS)
    assert all(r["commit"] and r["gpu"] and r["method"] for r in rows)
    assert b"\r\n" not in results_table.TABLE.read_bytes()


def test_a_test_run_appends_its_outcome_counts_as_a_row(tmp_path):
    # The GPU suite's evidence: `pytest --results-table CSV` (tests/conftest.py) appends one row.
    table = tmp_path / "table.csv"
    chosen = "tests/test_results_table.py::test_unknown_column_raises"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", chosen,
                           "--results-table", str(table)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with table.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and rows[0]["implementation"] == chosen, rows
    assert rows[0]["note"].startswith("1 passed, 0 failed, 0 skipped (") and rows[0]["method"].startswith("pytest on the")
