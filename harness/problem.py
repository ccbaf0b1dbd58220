"""Loading a KernelBench problem and a candidate.

A problem file is KernelBench's format: a module with a `Model` class, `get_inputs()`,
`get_init_inputs()` and module-level values (its sizes) that those functions read when
called, which is what makes `--set NAME=VALUE` work for any problem.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import math
import os
import sys
import traceback
import types
from typing import Any, Optional

import torch

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Batch mode (harness.batch) names a file here; it is touched when the first class loads,
# where a pair's timeout starts: the interpreter's and torch's start-up do not count.
BATCH_BEGAN_ENV = "KB_BATCH_BEGAN_FILE"


class CheckError(Exception):
    """The check itself cannot run (bad spec, reference fails): exit status 2."""


def load_class(spec: str, default_class: str = "ModelNew", problem_names: Optional[dict] = None) -> type:
    """Load `MODULE:CLASS` (an importable module) or `path/to/file.py:CLASS`. A file's module
    starts with `problem_names` (a problem module's namespace) when given: KernelBench's eval
    runs a candidate's source in the namespace where it ran its problem's, so a candidate may
    use the problem's `Model` and sizes without importing them."""
    began = os.environ.get(BATCH_BEGAN_ENV)
    if began:
        open(began, "a").close()
    module_part, _, class_name = spec.rpartition(":")
    if not module_part:  # no colon: the whole spec is the module
        module_part, class_name = spec, default_class
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        path = os.path.abspath(module_part)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such file: {module_part}")
        # The candidate may import its neighbours (a kernels package, a helper), as it
        # would when run from its own folder.
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        # A unique module name per path: two candidates called modelnew.py must not
        # shadow each other, and re-checking a file must re-read it.
        name = "_check_candidate_%x_%s" % (abs(hash(path)), os.path.splitext(os.path.basename(path))[0])
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None:
            raise ImportError(f"{module_part} is not a Python source file (a .py path)")
        module = importlib.util.module_from_spec(module_spec)
        for key, value in (problem_names or {}).items():
            if not key.startswith("__"):
                setattr(module, key, value)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_part)
    try:
        cls = getattr(module, class_name)
    except AttributeError:
        raise AttributeError(f"module {module_part!r} has no attribute {class_name!r}") from None
    if not callable(cls):
        raise TypeError(f"{spec} is a {type(cls).__name__}, not a class")
    return cls


def describe(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def error_info(stage: str, exc: BaseException) -> dict:
    return {
        "stage": stage,
        "type": type(exc).__name__,
        "message": str(exc).strip().splitlines()[0][:500] if str(exc).strip() else "",
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }



SIZE_FLAGS = {"batch": "batch_size", "input": "input_size", "hidden": "hidden_size", "scale": "scaling_factor"}


def check_counts(**flags) -> None:
    """The size flags that count something (--batch, --input, --hidden) must be positive."""
    for flag, value in flags.items():
        if value is not None and value < 1:
            raise CheckError(f"--{flag} must be positive, got {value}")


def problem_values(module) -> dict:
    """The module-level numbers of a problem file (its sizes): what `--set` can change."""
    def plain(v):
        return isinstance(v, (bool, int, float)) or (isinstance(v, tuple) and all(isinstance(e, (int, float)) for e in v))

    return {k: v for k, v in vars(module).items() if not k.startswith("_") and plain(v)}


@contextlib.contextmanager
def problem_overrides(module, sets: dict):
    """The problem file with some module-level values replaced (`--set name=value`), for
    the duration of the check: KernelBench's get_inputs and get_init_inputs read them
    when called. The file's module-level code runs again with each override put right
    after the name's own assignment, so values derived from it (`bias_shape =
    (out_channels, 1, 1)`) follow. The old namespace comes back afterwards."""
    known = problem_values(module)
    unknown = [k for k in sets if k not in known]
    if unknown:
        raise CheckError(f"the reference module has no module-level value {', '.join(map(repr, unknown))} "
                         f"to set; it has: {', '.join(sorted(known)) or 'none'}")
    if not sets:
        yield
        return
    namespace = vars(module)
    saved = dict(namespace)
    try:
        code = overridden_module_code(module, sets)
        if code is None:  # no source to run again: the plain values, derived ones unchanged
            namespace.update(sets)
        else:
            try:
                exec(code, namespace)  # noqa: S102 - the problem file itself, which the check runs anyway
            except Exception as exc:
                raise CheckError(f"the problem file fails with {sets}: {type(exc).__name__}: {exc}") from exc
            # The classes and functions the check already holds stay the ones in the module
            # (`super(Model, self)` looks Model up); they read the new values as globals.
            namespace.update({k: v for k, v in saved.items()
                              if isinstance(v, (type, types.FunctionType, types.ModuleType))})
        yield
    finally:
        namespace.clear()
        namespace.update(saved)


OVERRIDES_NAME = "__kb_overrides__"


def overridden_module_code(module, sets: dict):
    """The module's source compiled with `name = __kb_overrides__[name]` after every
    top-level statement that assigns an overridden name (None when there is no source)."""
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py") or not os.path.isfile(path):
        return None
    return compile(overridden_tree(path, sets), path, "exec")


def overridden_source(path: str, sets: dict) -> str:
    """A problem file's source as `--set` runs it, for a tool that takes the problem as text
    (KernelBench's eval does)."""
    return ast.unparse(overridden_tree(path, sets))


def overridden_tree(path: str, sets: dict) -> ast.Module:
    with open(path) as f:
        tree = ast.parse(f.read(), filename=path)
    body = [ast.parse(f"{OVERRIDES_NAME} = {source_literal(sets)}").body[0]]
    for stmt in tree.body:
        body.append(stmt)
        for name in sorted(assigned_names(stmt) & set(sets)):
            body.append(ast.parse(f"{name} = {OVERRIDES_NAME}[{name!r}]").body[0])
    body.append(ast.parse(f"del {OVERRIDES_NAME}").body[0])
    tree.body = body
    return ast.fix_missing_locations(tree)


def source_literal(value) -> str:
    """Python source for a --set value: repr, except non-finite floats, whose repr (nan, inf) is a name."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({repr(value)!r})"
    if isinstance(value, tuple):  # a trailing comma each: (3,) stays a tuple
        return "(" + "".join(f"{source_literal(v)}, " for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(source_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{source_literal(k)}: {source_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def assigned_names(stmt) -> set:
    """The names a top-level assignment binds (`a = b = 1`, `h, w = 16, 12`, `n += 1`)."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def parse_sets(items: Optional[list]) -> dict:
    """`name=value` pairs; values are Python literals (8192, 1.5, (3, 3), True)."""
    out = {}
    for item in items or []:
        name, eq, text = item.partition("=")
        if not eq or not name.isidentifier():
            raise CheckError(f"--set wants name=value, got {item!r}")
        if text.strip() in ("nan", "inf", "-inf"):  # float's spellings, as a batch passes a --scale on
            out[name] = float(text)
            continue
        try:
            out[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise CheckError(f"--set {name}: {text!r} is not a Python literal") from None
    return out


def resolve_sizes(reference_module, batch=None, input_size=None, hidden=None, scale=None,
                  sets: Optional[dict] = None) -> tuple[dict, dict]:
    """This problem's sizes (KernelBench's unless overridden) and every override as
    module-level names: the size flags map to this problem's names."""
    sets = dict(sets or {})
    for flag, value in (("batch", batch), ("input", input_size), ("hidden", hidden), ("scale", scale)):
        if value is not None:
            name = SIZE_FLAGS[flag]
            if not hasattr(reference_module, name):
                raise CheckError(f"--{flag} sets {name}, which the reference module does not have; "
                                 f"use --set NAME=VALUE for this problem's values")
            sets[name] = value
    values = {**problem_values(reference_module), **sets}
    sizes = {flag: values[name] for flag, name in SIZE_FLAGS.items() if name in values}
    return sizes, sets


def is_this_problem(ref_cls) -> bool:
    """The reference is this repository's reference.Model (KernelBench L2/14), whose
    exact answer has a closed form; any other problem gets the fp64 run as its oracle."""
    module = sys.modules.get(ref_cls.__module__)
    path = getattr(module, "__file__", None)
    return path is not None and os.path.abspath(path) == os.path.join(REPO_DIR, "reference.py")


def double_inputs(inputs: list) -> list:
    return [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]

