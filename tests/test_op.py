"""The op's contract: registration, torch.compile, autograd, errors, edge cases."""

import pytest
import torch

import kernels
from kernels import div_sum_scale, div_sum_scale_reference


def test_opcheck():
    y = torch.randn(33, 4097, requires_grad=True)
    torch.library.opcheck(kernels.ops.OP, (y, 2.0, 1.5))
    torch.library.opcheck(kernels.ops.OP, (torch.randn(5, 300, dtype=torch.float64), 3.0, -0.5))


def test_compile_fullgraph_gives_eager_bits():
    y = torch.randn(257, 8193)
    compiled = torch.compile(lambda t: div_sum_scale(t, 2, 1.5), fullgraph=True)
    assert torch.equal(compiled(y), div_sum_scale(y, 2, 1.5))


def test_gradient_matches_reference_bits():
    y = torch.randn(64, 1000, dtype=torch.float32)
    ours, ref = y.clone().requires_grad_(), y.clone().requires_grad_()
    g = torch.randn(64, 1)
    div_sum_scale(ours, 3, 0.7).backward(g)
    div_sum_scale_reference(ref, 3, 0.7).backward(g)
    assert torch.equal(ours.grad, ref.grad)


def test_gradcheck_float64():
    y = torch.randn(6, 37, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: div_sum_scale(t, 2.0, 1.5), (y,))


@pytest.mark.parametrize(
    "y,error,match",
    [
        (torch.randn(4), ValueError, r"2-D \(rows, columns\), got 1-D with shape \[4\]"),
        (torch.randn(2, 3, 4), ValueError, "2-D"),
        (torch.ones(4, 5, dtype=torch.int32), TypeError, "float32, float64, float16 or bfloat16, got Int"),
        (torch.ones(4, 5, dtype=torch.complex64), TypeError, "float32, float64, float16 or bfloat16"),
    ],
)
def test_bad_tensors_are_named(y, error, match):
    with pytest.raises(error, match=match):
        div_sum_scale(y, 2, 1.5)


def test_the_op_itself_checks_dtype():
    with pytest.raises(TypeError, match="float32, float64, float16 or bfloat16"):
        kernels.ops.OP(torch.ones(4, 5, dtype=torch.int32), 2.0, 1.5)


def test_bad_scalars_are_named():
    with pytest.raises(TypeError, match="divisor must be a Python int or float"):
        div_sum_scale(torch.randn(2, 3), torch.tensor(2.0), 1.5)
    with pytest.raises(TypeError, match="scale must be a Python int or float"):
        div_sum_scale(torch.randn(2, 3), 2, "1.5")
    with pytest.raises(TypeError, match="y must be a torch.Tensor"):
        div_sum_scale([[1.0, 2.0]], 2, 1.5)


def test_divisor_zero_does_what_the_reference_does():
    y = torch.tensor([[1.0, -1.0], [0.0, 0.0], [1.0, 2.0]])
    ours, ref = div_sum_scale(y, 0, 1.5), div_sum_scale_reference(y, 0, 1.5)
    assert torch.equal(torch.isnan(ours), torch.isnan(ref)) and torch.isnan(ours[0]).all()
    assert torch.isinf(ours[2]).all() and torch.equal(ours[2], ref[2])


@pytest.mark.parametrize("shape", [(0, 10), (10, 0), (0, 0)])
def test_empty(shape):
    y = torch.randn(shape)
    ours, ref = div_sum_scale(y, 2, 1.5), div_sum_scale_reference(y, 2, 1.5)
    assert ours.shape == ref.shape and torch.equal(ours, ref)


def test_meta_tensors_give_shape_only():
    out = kernels.ops.OP(torch.empty(7, 9, device="meta"), 2.0, 1.5)
    assert out.shape == (7, 1) and out.device.type == "meta"


def test_dispatch_modes_and_fake_tensors_still_see_the_op_on_cpu():
    # The CPU autograd kernel goes straight to the kernel only for plain tensors with no
    # mode active: a dispatch mode must still see the op, and fake tensors get the fake kernel.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    y = torch.randn(4, 300)
    with Log():
        out = div_sum_scale(y, 2, 1.5)
    assert kernels.ops.OP in seen and torch.equal(out, div_sum_scale_reference(y, 2, 1.5))
    with FakeTensorMode() as mode:
        fake = kernels.ops.OP(mode.from_tensor(y), 2.0, 1.5)
    assert fake.shape == (4, 1)
