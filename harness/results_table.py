"""The measurements table, results/measurements.csv: one row per timed implementation per
shape per run, appended by the benchmark scripts (never rewritten), read by the figures.

Columns: commit, date, gpu, torch, shape, dtype, method, implementation, time_ms (the
method's statistic: a median, or KernelBench's mean), interval_ms (the spread the method
reports: IQR or std), exact (the output's bits equal the reference's: yes / no / part, or ''
where not checked), note."""

from __future__ import annotations

import csv
import datetime
import fcntl
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "results" / "measurements.csv"
COLUMNS = ("commit", "date", "gpu", "torch", "shape", "dtype", "method", "implementation", "time_ms",
           "interval_ms", "exact", "note")


def current_commit() -> str:
    """The checkout's commit, with '+' when the tree has uncommitted changes ('unknown' outside
    git); KB14_COMMIT overrides it where the tree was copied without its history (a lent GPU)."""
    if os.environ.get("KB14_COMMIT"):
        return os.environ["KB14_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def row(**fields) -> dict:
    """A row with every column; unknown names raise (a typo must not become a silent blank)."""
    extra = set(fields) - set(COLUMNS)
    if extra:
        raise KeyError(f"measurements table: no column {sorted(extra)}")
    out = {c: "" for c in COLUMNS}
    out["date"] = datetime.date.today().isoformat()
    out.update({k: ("" if v is None else v) for k, v in fields.items()})
    for k in ("time_ms", "interval_ms"):
        if isinstance(out[k], float):
            out[k] = f"{out[k]:.6g}"
    if isinstance(out["exact"], bool):
        out["exact"] = "yes" if out["exact"] else "no"
    return out


def append(rows: list[dict], path: Path = TABLE) -> None:
    """Append rows (made by `row`), writing the header if the file is new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # writers at once (the GPU suite's groups): whole rows, one header
        new = f.seek(0, os.SEEK_END) == 0
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")  # csv's default is "\r\n"
        if new:
            writer.writeheader()
        writer.writerows(rows)


def read(path: Path = TABLE) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))
