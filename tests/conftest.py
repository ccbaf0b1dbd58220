import os
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

HAS_GPU = torch.cuda.is_available()


def pytest_configure(config):
    config.kb14_started = time.monotonic()  # for --results-table's row
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped when none is present")


_nvcc_checks = None  # test_build_cuda, once its builds have started


def pytest_unconfigure(config):
    if _nvcc_checks is not None:
        _nvcc_checks.cancel_builds()


def _needs_nvcc_builds(item) -> bool:
    return hasattr(getattr(item, "module", None), "start_builds") and "builds" in item.fixturenames


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config, items):
    # test_build_cuda's nvcc builds, minutes of a core, start now and run behind the other tests; its checks go last.
    first = next((item for item in items if _needs_nvcc_builds(item)), None)
    if first is not None and not config.option.collectonly:
        global _nvcc_checks
        _nvcc_checks = first.module
        _nvcc_checks.start_builds()
        items.sort(key=_needs_nvcc_builds)  # stable: the other tests keep their order
    if HAS_GPU:
        return  # never skip GPU tests where a GPU is present
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_addoption(parser):
    parser.addoption("--results-table", metavar="CSV",
                     help="append the run's outcome counts as a row of this measurements table "
                          "(results/measurements.csv's format): the GPU suite's evidence")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    path = config.getoption("--results-table")
    if not path:
        return
    from harness import results_table

    counts = {name: len(terminalreporter.stats.get(key, []))
              for name, key in (("passed", "passed"), ("failed", "failed"), ("errors", "error"), ("skipped", "skipped"))}
    seconds = time.monotonic() - config.kb14_started
    where = torch.cuda.get_device_name() if HAS_GPU else f"{os.cpu_count()}-core CPU machine"
    chosen = " ".join(os.path.relpath(a, ROOT) if os.path.exists(a) else a for a in config.args)
    if config.getoption("ignore"):
        chosen += " except " + " ".join(os.path.relpath(a, ROOT) for a in config.getoption("ignore"))
    note = ", ".join(f"{n} {k}" for k, n in counts.items() if n or k != "errors") + f" ({seconds:.0f} s)"
    results_table.append([results_table.row(
        commit=results_table.current_commit(), gpu=where, torch=torch.__version__, shape="(the tests' own)",
        method="pytest on the GPU" if HAS_GPU else "pytest on the CPU", implementation=chosen, note=note)],
        Path(path))
