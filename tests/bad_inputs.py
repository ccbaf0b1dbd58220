"""Bad inputs against every entry point, each case judged in a worker process.

Entry points: the Python API (`kernels.div_sum_scale`, `kernels.colsum`,
`kernels.colsum_matvec`), the registered ops (`torch.ops.kb14.*`, which torch.compile,
opcheck and users reach past the Python checks) and the models' forward. Every case
must end in a Python exception whose message names the problem, or in the reference's
own result where the reference accepts the input.

    python tests/bad_inputs.py DEVICE [FIRST]            # worker: runs the cases from index FIRST
    python tests/bad_inputs.py --report DEVICE OUT.json  # the whole matrix, as JSON

The worker prints `START i` before case i and `DONE i PASS|FAIL detail` after it, so
the parent (tests/test_bad_input.py, `run_matrix`) counts a case during which the
process died as a crash and starts a new worker after it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ERRORS = (TypeError, ValueError, RuntimeError, NotImplementedError, IndexError)


@dataclass
class Case:
    name: str
    run: Callable[[], object]  # the call under test
    reference: Callable[[], object] | None  # the reference's own call, or None
    expect: str  # "reject", "reference", or "reject_or_reference"
    keywords: tuple[str, ...] = ()  # one of them must appear in a rejection's message
    compare: str = "bits"  # "bits", "close" (fp64 sums in another order) or "meta"
    tags: list[str] = field(default_factory=list)


def _same(ours, ref, how: str) -> bool:
    from tests.cases import same_bits

    if not isinstance(ours, torch.Tensor) or ours.shape != ref.shape or ours.dtype != ref.dtype:
        return False
    if ours.device != ref.device:
        return False
    if how == "meta":
        return True
    if how == "close":
        return torch.allclose(ours.double().cpu(), ref.double().cpu(), rtol=1e-6, atol=1e-9, equal_nan=True)
    return same_bits(ours, ref)


def judge(case: Case) -> tuple[bool, str]:
    try:
        ours, ours_error = case.run(), None
    except ERRORS as e:
        ours, ours_error = None, e
    except Exception as e:  # noqa: BLE001 - anything else is a failure, named
        return False, f"raised {type(e).__name__} (not a user-facing error type): {e}"
    ref, ref_error = None, None
    if case.reference is not None:
        try:
            ref = case.reference()
        except Exception as e:  # noqa: BLE001
            ref_error = e
    if ours_error is not None:
        message = str(ours_error).splitlines()[0] if str(ours_error) else ""
        if case.expect == "reference" and ref_error is None:
            return False, f"raised {type(ours_error).__name__}: {message} (the reference accepts this input)"
        if case.keywords and not any(k.lower() in message.lower() for k in case.keywords):
            return False, f"message does not name the problem {case.keywords}: {message}"
        return True, f"raised {type(ours_error).__name__}: {message}"
    if case.expect == "reject":
        return False, f"returned {type(ours).__name__} where it must raise"
    if ref_error is not None:
        return False, f"returned where the reference raises {type(ref_error).__name__}: {ref_error}"
    if not _same(ours, ref, case.compare):
        shape = tuple(ours.shape) if isinstance(ours, torch.Tensor) else type(ours).__name__
        return False, f"returned {shape} that differs from the reference's {tuple(ref.shape)}"
    return True, "matches the reference"


def cases(device: str) -> list[Case]:
    import kernels
    import reference
    from modelnew import ModelNew, ModelNewColsum

    dev = torch.device(device)
    other = torch.device("cpu") if dev.type == "cuda" else (torch.device("cuda") if torch.cuda.is_available() else None)
    gen = torch.Generator().manual_seed(0)

    def randn(*shape, dtype=torch.float32, on=dev):
        return torch.randn(*shape, generator=gen, dtype=torch.float32).to(dtype=dtype, device=on)

    out: list[Case] = []
    tail_ref = kernels.div_sum_scale_reference

    # ---- div_sum_scale: the Python API and the op ----
    entries = {"api": kernels.div_sum_scale, "op": torch.ops.kb14.div_sum_scale}
    for entry, fn in entries.items():
        def tail(name, y, d=2.0, s=1.5, expect="reference", keywords=(), compare="bits", fn=fn, entry=entry):
            out.append(Case(f"div_sum_scale[{entry}] {name}", lambda: fn(y, d, s), lambda: tail_ref(y, d, s),
                            expect, keywords, compare))

        tail("rank 0", randn(()), expect="reject", keywords=("2-D",))
        tail("rank 1", randn(10), expect="reject", keywords=("2-D",))
        tail("rank 3", randn(2, 3, 4), expect="reject", keywords=("2-D",))
        for dtype in (torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64):
            y = (randn(3, 200) * 10).to(dtype) if dtype != torch.complex64 else randn(3, 200).to(dtype)
            tail(f"dtype {dtype}", y, expect="reject_or_reference", keywords=("float", "dtype", str(dtype)))
        tail("empty rows", randn(0, 300))
        tail("empty columns", randn(7, 0))
        tail("empty both", randn(0, 0))
        tail("meta", torch.empty(64, 9000, device="meta"), compare="meta")
        tail("strided columns", randn(40, 3000)[:, ::3])
        tail("transposed", randn(300, 40).t())
        tail("overlapping (expanded) rows", randn(1, 9000).expand(32, -1))
        tail("zero row stride, one column", randn(1, 1).expand(5, 1))
        base = randn(4 * 1_000_003)
        tail("huge row stride", base.as_strided((4, 5), (1_000_003, 1)))
        tail("huge column stride", base.as_strided((3, 4), (1, 1_000_000)))
        tail("misaligned start", randn(33, 8193)[:, 1:])
        tail("divisor 0", randn(5, 300), d=0.0)
        tail("divisor nan", randn(5, 300), d=float("nan"))
        tail("divisor inf", randn(5, 300), d=float("inf"))
        tail("scale inf", randn(5, 300), s=float("inf"))
        tail("scale -0.0", randn(5, 300), s=-0.0)
        tail("int divisor and scale", randn(5, 300), d=3, s=2)
        tail("divisor a string", randn(5, 30), d="2", expect="reject", keywords=("divisor", "float", "str"))
        tail("divisor None", randn(5, 30), d=None, expect="reject", keywords=("divisor", "float", "None"))
        tail("divisor a tensor", randn(5, 30), d=torch.tensor(2.0), expect="reject_or_reference",
             keywords=("divisor", "float", "Tensor"))
        tail("scale a list", randn(5, 30), s=[1.5], expect="reject", keywords=("scale", "float", "list"))
        out.append(Case(f"div_sum_scale[{entry}] y a list", lambda fn=fn: fn([[1.0, 2.0]], 2.0, 1.5), None,
                        "reject", ("tensor", "Tensor", "list")))
        tail("sparse", randn(4, 200).to_sparse(), expect="reject_or_reference",
             keywords=("dense", "strided", "sparse", "Sparse"))
        if other is not None:
            tail(f"on {other.type}", randn(5, 300, on=other))

    # ---- colsum ----
    for entry, fn in {"api": kernels.colsum, "op": torch.ops.kb14.colsum}.items():
        def colsum(name, w, expect="reference", keywords=(), compare="close", fn=fn, entry=entry):
            out.append(Case(f"colsum[{entry}] {name}", lambda: fn(w), lambda: w.double().sum(0), expect, keywords,
                            compare))

        colsum("rank 1", randn(10), expect="reject", keywords=("2-D",))
        colsum("rank 3", randn(2, 3, 4), expect="reject", keywords=("2-D",))
        for dtype in (torch.int32, torch.bool, torch.complex64):
            colsum(f"dtype {dtype}", randn(6, 40).to(dtype), expect="reject", keywords=("float", "dtype"))
        colsum("empty rows", randn(0, 40))
        colsum("empty columns", randn(40, 0))
        colsum("meta", torch.empty(64, 300, device="meta"), compare="meta")
        colsum("strided", randn(50, 300)[::2, ::3])
        colsum("overlapping", randn(1, 300).expand(70, -1))
        colsum("nan and inf", torch.tensor([[float("nan"), 1.0], [float("inf"), 2.0]], device=dev))
        out.append(Case(f"colsum[{entry}] a list", lambda fn=fn: fn([[1.0]]), None, "reject", ("tensor", "Tensor")))

    # ---- colsum_matvec ----
    for entry, fn in {"api": kernels.colsum_matvec, "op": torch.ops.kb14.colsum_matvec}.items():
        def matvec(name, x, c, s=0.75, expect="reference", keywords=(), compare="close", fn=fn, entry=entry):
            def ref():
                if x.dim() != 2 or c.dim() != 1 or c.dtype != torch.float64 or not x.dtype.is_floating_point:
                    raise ValueError("outside the op's contract")
                return (x.double() @ c * s).unsqueeze(1).to(x.dtype)

            out.append(Case(f"colsum_matvec[{entry}] {name}", lambda: fn(x, c, s), ref, expect, keywords, compare))

        c64 = randn(300, dtype=torch.float64)
        matvec("x rank 1", randn(300), c64, expect="reject", keywords=("2-D",))
        matvec("colsum rank 2", randn(4, 300), randn(300, 1, dtype=torch.float64), expect="reject", keywords=("1-D",))
        matvec("length mismatch", randn(4, 299), c64, expect="reject", keywords=("columns", "299"))
        matvec("colsum float32", randn(4, 300), randn(300), expect="reject", keywords=("float64",))
        matvec("x int", (randn(4, 300) * 9).to(torch.int32), c64, expect="reject", keywords=("float", "dtype"))
        matvec("x bool", randn(4, 300) > 0, c64, expect="reject", keywords=("float", "dtype"))
        matvec("empty batch", randn(0, 300), c64)
        matvec("empty inputs", randn(4, 0), randn(0, dtype=torch.float64))
        matvec("meta", torch.empty(8, 300, device="meta"), torch.empty(300, dtype=torch.float64, device="meta"),
               compare="meta")
        matvec("strided x", randn(8, 900)[:, ::3], c64)
        matvec("scale nan", randn(4, 300), c64, s=float("nan"))
        matvec("scale a string", randn(4, 300), c64, s="1", expect="reject", keywords=("scale", "float", "str"))
        if other is not None:
            matvec(f"colsum on {other.type}", randn(4, 300), randn(300, dtype=torch.float64, on=other),
                   expect="reject", keywords=("device", "cpu", "cuda"))
            matvec(f"x on {other.type}", randn(4, 300, on=other), c64, expect="reject",
                   keywords=("device", "cpu", "cuda"))

    # ---- the models ----
    for cls in (ModelNew, ModelNewColsum):
        torch.manual_seed(0)
        model = cls(256, 64, 1.5).to(dev)
        torch.manual_seed(0)
        ref_model = reference.Model(256, 64, 1.5).to(dev)
        compare = "bits" if cls is ModelNew else "close"

        def forward(name, x, expect="reference", keywords=(), model=model, ref_model=ref_model, cls=cls,
                    compare=compare):
            out.append(Case(f"{cls.__name__} {name}", lambda: model(x), lambda: ref_model(x), expect, keywords,
                            compare))

        forward("x rank 1", randn(256), expect="reject", keywords=("2-D",))
        forward("x wrong width", randn(8, 255), expect="reject", keywords=("256", "2-D"))
        forward("x float64", randn(8, 256, dtype=torch.float64), expect="reject", keywords=("dtype", "float64"))
        forward("x int", (randn(8, 256) * 5).to(torch.int64), expect="reject", keywords=("dtype", "int64"))
        forward("empty batch", randn(0, 256))
        if other is not None:
            forward(f"x on {other.type}", randn(8, 256, on=other), expect="reject", keywords=("cpu", "cuda"))
    return out


def worker(device: str, first: int) -> None:
    all_cases = cases(device)
    for i in range(first, len(all_cases)):
        print(f"START {i} {all_cases[i].name}", flush=True)
        ok, detail = judge(all_cases[i])
        if device == "cuda":
            torch.cuda.synchronize()  # an asynchronous fault must land on its own case
        print(f"DONE {i} {'PASS' if ok else 'FAIL'} {all_cases[i].name} :: {detail}", flush=True)
    print(f"END {len(all_cases)}", flush=True)


def run_matrix(device: str, timeout_s: float = 600) -> dict[str, tuple[str, str]]:
    """Every case's outcome, {name: (PASS|FAIL|CRASH, detail)}, a fresh worker after each crash."""
    results: dict[str, tuple[str, str]] = {}
    first, total = 0, None
    while total is None or first < total:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), device, str(first)], capture_output=True,
                              text=True, timeout=timeout_s, cwd=ROOT)
        current = current_name = None
        for line in proc.stdout.splitlines():
            if line.startswith("START "):
                _, index, current_name = line.split(" ", 2)
                current = int(index)
            elif line.startswith("DONE "):
                _, index, verdict, rest = line.split(" ", 3)
                name, _, detail = rest.partition(" :: ")
                results[name] = (verdict, detail)
                current = None
                first = int(index) + 1
            elif line.startswith("END "):
                total = int(line.split()[1])
        if total is not None and first >= total:
            break
        if current is None:  # died before its first case, or between cases: not a case's fault
            raise RuntimeError(f"bad-input worker failed outside any case (rc {proc.returncode}):\n"
                               f"{proc.stderr[-3000:]}")
        results[current_name] = ("CRASH", f"process ended with {proc.returncode}: {proc.stderr[-400:]}")
        first = current + 1
    return results


if __name__ == "__main__":
    if sys.argv[1] == "--report":  # python tests/bad_inputs.py --report DEVICE OUT.json
        import json

        outcome = run_matrix(sys.argv[2])
        counts = {v: sum(1 for o in outcome.values() if o[0] == v) for v in ("PASS", "FAIL", "CRASH")}
        report = {"device": sys.argv[2], "torch": torch.__version__, "counts": counts,
                  "cases": {k: {"verdict": v[0], "detail": v[1]} for k, v in outcome.items()}}
        with open(sys.argv[3], "w") as f:
            json.dump(report, f, indent=1)
        print(counts)
        sys.exit(0 if counts["PASS"] == len(outcome) else 1)
    worker(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
