"""The measurements table: rows keep every column, unknown columns raise, appends keep one header."""

import pytest

from harness import results_table


def test_append_writes_one_header_and_keeps_rows(tmp_path):
    path = tmp_path / "m.csv"
    results_table.append([results_table.row(implementation="a", time_ms=1.25, exact=True)], path)
    results_table.append([results_table.row(implementation="b", time_ms=2.0, exact=False)], path)
    rows = results_table.read(path)
    assert [r["implementation"] for r in rows] == ["a", "b"]
    assert [r["exact"] for r in rows] == ["yes", "no"]
    assert path.read_text().count("commit,date") == 1
    assert list(rows[0]) == list(results_table.COLUMNS)


def test_unknown_column_raises():
    with pytest.raises(KeyError, match="median"):
        results_table.row(median=1.0)


def test_committed_table_has_the_columns():
    rows = results_table.read()
    assert rows and list(rows[0]) == list(results_table.COLUMNS)
    assert all(r["commit"] and r["gpu"] and r["method"] for r in rows)
