"""No input, however wrong, kills the process: every entry point (the Python API, the
registered ops, the models) on every device either raises an exception that names
the problem or returns the reference's own result (tests/bad_inputs.py has the cases).
Each case runs in a worker process, so a crash is counted against its case."""

import pytest

from tests.bad_inputs import run_matrix


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_every_bad_input_raises_or_matches_the_reference(device):
    results = run_matrix(device)
    assert len(results) >= 100, f"only {len(results)} cases ran"
    bad = {name: outcome for name, outcome in results.items() if outcome[0] != "PASS"}
    assert not bad, "\n".join(f"{verdict} {name}: {detail}" for name, (verdict, detail) in bad.items())
