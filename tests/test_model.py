"""ModelNew as a drop-in for reference.Model on the CPU."""

import pytest
import torch

import reference
from modelnew import ModelNew
from tests.cases import assert_same_gradients, seeded_pair


def _pair(seed, init):
    return seeded_pair(seed, init, ModelNew)


@pytest.mark.parametrize("seed", [42, 0, 2026])
def test_bit_exact_at_kernelbench_sizes(seed):
    ref, new = _pair(seed, reference.get_init_inputs())
    torch.manual_seed(seed + 1)
    x = reference.get_inputs()[0]
    with torch.no_grad():
        assert torch.equal(ref(x), new(x))


def test_same_parameters_and_state_dict():
    ref, new = _pair(3, [64, 96, 1.5])
    assert [n for n, _ in ref.named_parameters()] == [n for n, _ in new.named_parameters()]
    assert ref.state_dict().keys() == new.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), new.state_dict().values()))
    other = ModelNew(64, 96, 1.5)
    other.load_state_dict(ref.state_dict())
    x = torch.rand(16, 64)
    assert torch.equal(other(x), ref(x))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_to_dtype(dtype):
    ref, new = _pair(4, [128, 256, 1.5])
    ref, new = ref.to("cpu", dtype), new.to("cpu", dtype)
    x = torch.rand(32, 128, dtype=dtype)
    assert torch.equal(ref(x), new(x))


def test_gradients_match_reference():
    ref, new = _pair(5, [128, 300, 1.5])
    assert_same_gradients(ref, new, torch.rand(40, 128))


def test_compile_fullgraph_same_bits():
    _, new = _pair(6, [128, 512, 1.5])
    x = torch.rand(64, 128)
    with torch.no_grad():
        assert torch.equal(torch.compile(new, fullgraph=True)(x), new(x))


def test_bad_inputs_are_named():
    _, new = _pair(7, [16, 8, 1.5])
    with pytest.raises(ValueError, match=r"2-D tensor \(batch, 16\)"):
        new(torch.rand(4, 15))
    with pytest.raises(ValueError, match="float64 on cpu but the weight is torch.float32"):
        new(torch.rand(4, 16, dtype=torch.float64))
