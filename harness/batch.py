"""Batch mode: every problem/candidate pair of a folder, each checked in its own process.

Naming convention: in the folder, a problem file defines `Model`, `get_inputs` and
`get_init_inputs` (KernelBench's format); a candidate file is named
`<problem>_<anything>.py` and defines `ModelNew`. A candidate belongs to the longest
problem name its file name starts with, so `gemm_epilogue_fast.py` goes with
`gemm_epilogue.py`, not `gemm.py`.

Each pair runs as its own `check.py` (or `bench.py`) process, so a candidate that raises,
crashes its process, hangs past `timeout_s` or breaks its CUDA context fails alone and the run
goes on. On Linux that process is forked from one that imported torch once (harness.forkserver):
a pair starts in a tenth of a second, not the seconds of a torch import. `workers` worker slots
run at once, each pinned to one GPU on CUDA (`CUDA_VISIBLE_DEVICES`; more slots than GPUs share
them round-robin, except for timing, where a GPU runs one pair at a time); a slot takes the next
pair as soon as its last one ends, and every record names the slot and GPU it ran on. A pair
that breaks its CUDA context or hangs ends with its own process: the slot's next pair starts a
fresh one. `shard` (K, N) keeps pairs K-1, K-1+N, ... of the sorted list, so that N machines (a
Slurm array, Ray, any job runner) split a folder between them; `merge` joins their JSON files
into the result one run would have given. `keep` keeps each pair's own report (its JSON, its
printed output and, for bench.py, its plot) in a folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import forkserver
from harness.problem import BATCH_BEGAN_ENV
from harness.timing import format_ms

SCHEMA = "kernelbench-batch/1"
CHECK_PY = Path(__file__).resolve().parent.parent / "check.py"
BENCH_PY = CHECK_PY.parent / "bench.py"
PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")
CANDIDATE_NAME = "ModelNew"


@dataclass(frozen=True)
class Pair:
    problem: str  # the problem's name (its file's stem)
    candidate: str  # the candidate's file name
    folder: str


def top_level_names(path: Path) -> set | None:
    """The names a file defines at module level (classes, functions, assignments,
    imports), or None when it does not parse."""
    import ast

    try:
        tree = ast.parse(path.read_text(errors="replace"), filename=str(path))
    except SyntaxError:
        return None
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return names


def discover(folder: str | Path) -> list[Pair]:
    """Every (problem, candidate) pair of `folder`, sorted."""
    return discover_all(folder)[0]


def discover_all(folder: str | Path) -> tuple[list[Pair], list[dict]]:
    """Every (problem, candidate) pair of `folder`, sorted, and every .py file that is
    neither, each with why ({"file", "reason"}). A file that defines ModelNew is a
    candidate even when it also defines Model and get_inputs (a whole-file copy of its
    problem); a problem defines Model, get_inputs and get_init_inputs and no ModelNew."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"--problems {str(folder)!r} is not a folder")
    ignored, problems, candidates = [], set(), []
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            ignored.append({"file": path.name, "reason": "its name starts with '_' (a helper module)"})
            continue
        names = top_level_names(path)
        if names is None:
            # A candidate with a syntax error still fails as a candidate (import_error).
            if f"class {CANDIDATE_NAME}" in path.read_text(errors="replace"):
                candidates.append(path)
            else:
                ignored.append({"file": path.name, "reason": "does not parse (SyntaxError) and defines no ModelNew"})
            continue
        if CANDIDATE_NAME in names:
            candidates.append(path)
        elif all(n in names for n in PROBLEM_NAMES):
            problems.add(path.stem)
        else:
            missing = [n for n in PROBLEM_NAMES if n not in names]
            ignored.append({"file": path.name, "reason": f"defines no ModelNew, and as a problem it lacks "
                                                         f"{', '.join(missing)}"})
    pairs = []
    for path in candidates:
        owners = [q for q in problems if path.stem.startswith(q + "_")]
        if owners:
            pairs.append(Pair(max(owners, key=len), path.name, str(folder)))
        else:
            ignored.append({"file": path.name, "reason": "defines ModelNew, but no problem NAME.py of this folder "
                                                         "matches its name (NAME_<anything>.py)"})
    ignored.sort(key=lambda x: x["file"])
    return sorted(pairs, key=lambda x: (x.problem, x.candidate)), ignored


def check_set_names(folder: str | Path, pairs: list[Pair], sets: dict) -> None:
    """Refuse, before anything runs, a --set (or size flag) name that a problem of the
    run does not define at module level: it would change nothing there."""
    if not sets:
        return
    missing = {}
    for problem in sorted({p.problem for p in pairs}):
        names = top_level_names(Path(folder) / f"{problem}.py") or set()
        lacking = [k for k in sets if k not in names]
        if lacking:
            missing[problem] = lacking
    if missing:
        where = "; ".join(f"{problem}.py has no {', '.join(names)}" for problem, names in missing.items())
        raise ValueError(f"--set names a value that is not a module-level value of every problem: {where}")


def set_arguments(sets: dict) -> list[str]:
    """`sets` as the --set arguments of a pair's own process."""
    return [arg for name, value in sets.items() for arg in ("--set", f"{name}={value!r}")]


def parse_shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard wants K/N (e.g. 2/4), got {text!r}") from None
    if not (n >= 1 and 1 <= k <= n):
        raise ValueError(f"--shard {text}: K must be between 1 and N")
    return k, n


def shard_of(pairs: list[Pair], shard: tuple[int, int] | None) -> list[Pair]:
    if shard is None:
        return pairs
    k, n = shard
    return pairs[k - 1::n]


def _command(tool: str, pair: Pair, out: Path, trials: int, extra: list[str], plot: Path | None = None) -> list[str]:
    folder = Path(pair.folder)
    problem, candidate = f"{folder / pair.problem}.py:Model", f"{folder / pair.candidate}:ModelNew"
    if tool == "check":
        return [sys.executable, str(CHECK_PY), "--reference", problem, "--model", candidate, "--trials", str(trials),
                "--json", str(out), "--quiet", *extra]
    return [sys.executable, str(BENCH_PY), "--reference", problem, "--model", candidate, "--json", str(out),
            *(["--plot", str(plot)] if plot else []), *extra]


# A pair's timeout counts from when its process begins the pair (harness.problem's
# BATCH_BEGAN_ENV), not from its start: a loaded machine may take long to start Python and
# torch, and that must not turn a candidate's verdict into a timeout.
STARTUP_LIMIT_S = 600.0


def _wait_for(proc: subprocess.Popen, began: Path, timeout_s: float) -> tuple[str | None, str, str]:
    """`proc`'s stdout and stderr, killing it `timeout_s` after its pair began (or when it has
    not begun within STARTUP_LIMIT_S), with why it was killed (else None) first."""
    start = time.perf_counter()
    begun_at = None
    while True:
        try:
            return (None, *proc.communicate(timeout=0.2))
        except subprocess.TimeoutExpired:
            pass
        now = time.perf_counter()
        if begun_at is None and began.exists():
            begun_at = now
        if begun_at is None and now - start > STARTUP_LIMIT_S:
            why = f"the process had not begun the pair after {STARTUP_LIMIT_S:g} s"
        elif begun_at is not None and now - begun_at > timeout_s:
            why = f"no result within {timeout_s:g} s"
        else:
            continue
        proc.kill()
        return (why, *proc.communicate())


def report_stem(pair: Pair) -> str:
    """The file name (without suffix) of a pair's kept report."""
    return f"{pair.problem}__{Path(pair.candidate).stem}"


def _bench_summary(result: dict) -> dict:
    """A bench run as a batch row: the candidate's check and times against the reference."""
    rows = result["rows"]
    cand = rows[-1]
    eager = rows[0].get("time_ms")
    compiled = next((r.get("time_ms") for r in rows if r["name"] == "reference compiled"), None)
    if cand.get("error"):
        return {"verdict": "FAIL", "reason": "forward_error", "message": cand["error"]}
    ok = cand["check"]["ok"]
    reason, message = cand["check"].get("kind"), cand["check"].get("reason")
    if ok and cand.get("impossible"):  # a time below the roofline floor is not a time
        ok, reason = False, "beyond_roofline"
        message = "; ".join(f"{x['method']} {x['time_ms']:.4g} ms is below the roofline floor {x['floor_ms']:.4g} ms"
                            for x in cand["impossible"])
    return {"verdict": "PASS" if ok else "FAIL", "reason": reason, "message": message, "time_ms": cand["time_ms"],
            "kernelbench_ms": cand.get("kernelbench", {}).get("mean_ms"), "eager_ms": eager,
            "compiled_ms": compiled, "speedup_vs_eager": eager / cand["time_ms"] if eager else None,
            "speedup_vs_compiled": compiled / cand["time_ms"] if compiled else None}


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (else 0..n-1)."""
    import torch

    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]


def gpu_of_slot(slot: int, gpus: list[str]) -> str:
    """Worker slots share the visible GPUs round-robin (more workers than GPUs is allowed)."""
    return gpus[slot % len(gpus)]


def _popen(cmd: list[str], env: dict, cwd: Path, out_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)


def _run_pair(pair: Pair, slot: int, device: str, timeout_s: float, trials: int, extra: list[str],
              tool: str = "check", gpus: list[str] | None = None, keep: Path | None = None, spawn=_popen) -> dict:
    with tempfile.TemporaryDirectory(prefix="kb_batch_") as tmp:
        out = (keep or Path(tmp)) / (f"{report_stem(pair)}.json" if keep else "result.json")
        out.unlink(missing_ok=True)  # a kept report of an earlier run must not stand for this one
        # bench.py refuses --plot without matplotlib: the kept report is then JSON and text.
        can_plot = importlib.util.find_spec("matplotlib") is not None
        plot = keep / f"{report_stem(pair)}.png" if keep and tool == "bench" and can_plot else None
        cmd = _command(tool, pair, out, trials, extra, plot)
        env = dict(os.environ)
        if device == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = gpu_of_slot(slot, gpus or ["0"])
            cmd += ["--device", "cuda"]
        elif device == "cpu":
            cmd += ["--device", "cpu"]
        started = time.perf_counter()
        record = {**asdict(pair), "slot": slot, "gpu": env.get("CUDA_VISIBLE_DEVICES") if device == "cuda" else None,
                  "verdict": None, "reason": None, "message": None, "returncode": None}
        del record["folder"]
        began = Path(tmp) / "began"
        env[BATCH_BEGAN_ENV] = str(began)
        proc = spawn(cmd, env, CHECK_PY.parent, Path(tmp))
        late, stdout, stderr = _wait_for(proc, began, timeout_s)
        if late:
            record.update(verdict="TIMEOUT", reason="timeout", message=f"{late}; the process was killed")
        else:
            record["returncode"] = proc.returncode
            if keep:
                (keep / f"{report_stem(pair)}.txt").write_text(stdout + stderr)
            how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
            tail = (stderr or stdout).strip().splitlines()[-1:] or [""]
            died = f"the process died ({how}): {tail[0][:300]}"
            try:
                result = json.loads(out.read_text()) if out.is_file() else None
            except ValueError as exc:  # a report cut short: the pair's failure, not the batch's
                result, died = None, f"its JSON report is not valid ({exc}; {how})"
            if result is not None and tool == "check":
                record.update(verdict=result.get("verdict"), reason=result.get("reason"),
                              message=result.get("message"))
            elif result is not None:
                record.update(_bench_summary(result))
            else:
                record.update(verdict="CRASH", reason="crash", message=died)
        record["seconds"] = time.perf_counter() - started
        return record


def run_in_slots(pairs: list, workers: int, run, progress=None) -> list[dict]:
    """Run `run(pair, slot)` for every pair on `workers` slots at once: each slot takes the next
    pair as soon as its previous one ends (a slow pair holds up only its own slot)."""
    todo: "queue.Queue" = queue.Queue()
    for pair in pairs:
        todo.put(pair)
    results: list[dict] = []
    lock = threading.Lock()

    def slot_loop(slot: int) -> None:
        while True:
            try:
                pair = todo.get_nowait()
            except queue.Empty:
                return
            record = run(pair, slot)
            if progress:
                where = f" on GPU {record['gpu']}" if record.get("gpu") is not None else ""
                progress(f"{record['problem']} / {record['candidate']}: {record['verdict']} "
                         f"({record['seconds']:.1f} s{where})")
            with lock:
                results.append(record)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(slot_loop, range(max(1, workers))))
    return results


def run_batch(folder: str, *, device: str = "auto", workers: int | None = None, timeout_s: float = 600,
              shard: tuple[int, int] | None = None, trials: int = 5, extra: list[str] | None = None,
              progress=None, tool: str = "check", keep: str | None = None, sets: dict | None = None) -> dict:
    """Check (or, with tool="bench", time) every pair of `folder` (or of its `shard`);
    return the JSON-able result. With `keep`, each pair's own report stays in that folder;
    `sets` ({name: value}, --set) goes to every pair's process."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):  # a batch spreads its pairs over the GPUs itself: no index
        raise ValueError(f"--device {device!r}: a batch runs on cpu or cuda (a GPU a slot)")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch.cuda.is_available() is False")
    if workers is None:
        workers = max(1, torch.cuda.device_count()) if device == "cuda" else max(1, (os.cpu_count() or 2) // 2)
    all_pairs, ignored = discover_all(folder)
    if progress:
        for item in ignored:
            progress(f"ignored {item['file']}: {item['reason']}")
    check_set_names(folder, all_pairs, sets or {})
    extra = [*(extra or []), *set_arguments(sets or {})]
    keep_dir = Path(keep) if keep else None
    if keep_dir:
        keep_dir.mkdir(parents=True, exist_ok=True)
    pairs = shard_of(all_pairs, shard)
    started = time.perf_counter()
    gpus = visible_gpus() if device == "cuda" else []
    if tool == "bench" and device == "cuda" and gpus and workers > len(gpus):
        # Two timed pairs on one GPU would time each other: one pair per GPU at a time.
        if progress:
            progress(f"timing: {workers} workers asked for, {len(gpus)} GPUs: one worker per GPU")
        workers = len(gpus)
    server = forkserver.ForkServer() if forkserver.available() else None
    try:
        results = run_in_slots(pairs, workers, lambda pair, slot: _run_pair(
            pair, slot, device, timeout_s, trials, extra, tool, gpus, keep_dir, server.start if server else _popen),
            progress)
    finally:
        if server:
            server.close()
    results.sort(key=lambda r: (r["problem"], r["candidate"]))
    return {"schema": SCHEMA, "config": {"tool": tool, "folder": str(folder), "device": device, "workers": workers,
                                         "timeout_s": timeout_s, "trials": trials,
                                         "shard": f"{shard[0]}/{shard[1]}" if shard else None,
                                         "pairs_in_folder": len(all_pairs), "kept_in": keep,
                                         "overrides": {k: list(v) if isinstance(v, tuple) else v
                                                       for k, v in (sets or {}).items()},
                                         "ignored": ignored},
            "results": results, "seconds_total": time.perf_counter() - started}


def merge(paths: list[str]) -> dict:
    """The shards' JSON files as one result: every pair once, sorted as one run sorts them."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    for p, part in zip(paths, parts):
        if part.get("schema") != SCHEMA:
            raise ValueError(f"{p}: not a {SCHEMA} file")
    seen: dict[tuple, dict] = {}
    for part in parts:
        for r in part["results"]:
            key = (r["problem"], r["candidate"])
            if key in seen:
                raise ValueError(f"{key[0]} / {key[1]} is in more than one file")
            seen[key] = r
    total = {part["config"]["pairs_in_folder"] for part in parts}
    results = [seen[k] for k in sorted(seen)]
    return {"schema": SCHEMA, "config": {**parts[0]["config"], "shard": None, "merged_from": list(paths),
                                         "complete": total == {len(results)}},
            "results": results, "seconds_total": sum(p["seconds_total"] for p in parts)}


def add_arguments(parser, tool: str, default_timeout: float) -> None:
    """The batch-mode options of check.py and bench.py."""
    group = parser.add_argument_group("batch mode: every problem/candidate pair of a folder, each in its own process")
    group.add_argument("--problems", metavar="DIR",
                       help=f"{tool} every pair of DIR (a problem NAME.py, its candidates NAME_*.py defining ModelNew)")
    group.add_argument("--workers", type=int, help="concurrent processes (default: one per visible GPU, or half "
                                                   "the CPU cores)")
    group.add_argument("--timeout", type=float, default=default_timeout,
                       help="seconds a pair may take once its process has started Python and torch "
                            "(default %(default)s)")
    group.add_argument("--shard", metavar="K/N", help="only pairs K-1, K-1+N, ... of the sorted list")
    group.add_argument("--merge", nargs="+", metavar="JSON", help="join shards' --json files into one table")
    what = "JSON, printed output and plot" if tool == "time" else "JSON and printed output"
    group.add_argument("--keep", metavar="DIR", help=f"keep each pair's own report ({what}) in DIR, "
                                                     "named PROBLEM__CANDIDATE.*")


def main_from_args(args, *, tool: str, device: str, extra: list[str], trials: int = 5, progress=None,
                   error_prefix: str = "ERROR: ", sets: dict | None = None) -> dict | None:
    """Run (or merge) a batch as the command line asked, print its table, write its JSON;
    None when the batch itself cannot run (the message is printed)."""
    try:
        if args.merge:
            result = merge(args.merge)
        else:
            result = run_batch(args.problems, device=device, workers=args.workers, timeout_s=args.timeout,
                               shard=parse_shard(args.shard) if args.shard else None, trials=trials, extra=extra,
                               progress=progress, tool=tool, keep=args.keep, sets=sets)
    except (ValueError, OSError) as exc:
        print(f"{error_prefix}{exc}", file=sys.stderr)
        return None
    print(format_batch(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


def format_batch(result: dict) -> str:
    rows = result["results"]
    width = max([len(f"{r['problem']} / {r['candidate']}") for r in rows] + [10])
    timed = result["config"].get("tool") == "bench"
    times = f" {'KernelBench':>11} {'strict':>10} {'x eager':>8} {'x comp':>7}" if timed else ""
    why = max([len(r["reason"] or "-") for r in rows] + [16])  # --strict's reasons are long
    on_gpus = any(r.get("gpu") is not None for r in rows)
    gpu_head = f" {'gpu':>4}" if on_gpus else ""
    lines = [f"{'problem / candidate':<{width}}  {'verdict':<8} {'reason':<{why}}{times} {'seconds':>8}{gpu_head}",
             "-" * (width + why + 20 + len(times) + len(gpu_head))]

    def x(v):
        return "-" if v is None else f"{v:.3f}"

    for r in rows:
        cells = (f" {format_ms(r.get('kernelbench_ms')):>11} {format_ms(r.get('time_ms')):>10} "
                 f"{x(r.get('speedup_vs_eager')):>8} {x(r.get('speedup_vs_compiled')):>7}" if timed else "")
        gpu = f" {r.get('gpu') if r.get('gpu') is not None else '-':>4}" if on_gpus else ""
        lines.append(f"{r['problem'] + ' / ' + r['candidate']:<{width}}  {r['verdict'] or '-':<8} "
                     f"{r['reason'] or '-':<{why}}{cells} {r['seconds']:>8.1f}{gpu}")
    counts = {}
    per_gpu = {}
    for r in rows:
        if r.get("gpu") is not None:
            n, busy = per_gpu.get(r["gpu"], (0, 0.0))
            per_gpu[r["gpu"]] = (n + 1, busy + r["seconds"])
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    cfg = result["config"]
    lines += ["", f"{len(rows)} pairs: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=str))
              + f"; {cfg['device']}, {cfg['workers']} workers, {result['seconds_total']:.1f} s in all"
              + (f"; shard {cfg['shard']}" if cfg.get("shard") else "")
              + ("; merged" if cfg.get("merged_from") else "")]
    if per_gpu:
        lines.append("per GPU: " + ", ".join(f"GPU {g}: {n} pairs, {busy:.1f} s busy"
                                            for g, (n, busy) in sorted(per_gpu.items())))
    lines += [f"ignored {item['file']}: {item['reason']}" for item in cfg.get("ignored", [])]
    return "\n".join(lines)
