"""Integer and bool inputs: cast to the precision, as KernelBench's released eval casts
every input tensor (the constructor's too), unless --keep-integer-inputs keeps their dtype."""

import pytest
import torch

import check
from harness.protocol import to_device

GATHER_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, index):
        return x.gather(1, index)


rows, cols = 8, 16


def get_inputs():
    return [torch.randn(rows, cols), torch.randint(0, cols, (rows, 4))]


def get_init_inputs():
    return []
'''

GATHER_CANDIDATE = '''import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, index):
        return x.gather(1, index)
'''

MASK_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, mask):
        return x * mask


shape = (6, 10)


def get_inputs():
    return [torch.randn(shape), torch.rand(shape) > 0.5]


def get_init_inputs():
    return []
'''

# Passes only when the mask arrives as the precision's floats, as KernelBench hands it over.
MASK_CANDIDATE_EXPECTS_FLOAT = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, mask):
        if mask.dtype != x.dtype:
            raise TypeError(f"mask arrived as {mask.dtype}")
        return x * mask
'''


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_every_tensor_is_cast_unless_integers_are_kept(dtype):
    x = torch.ones(3, dtype=dtype)
    assert to_device(x, torch.device("cpu"), torch.float16).dtype == torch.float16
    assert to_device(x, torch.device("cpu"), torch.float16, keep_integer_inputs=True).dtype == dtype
    floats = to_device(torch.ones(3), torch.device("cpu"), torch.bfloat16, keep_integer_inputs=True)
    assert floats.dtype == torch.bfloat16
    assert to_device(7, torch.device("cpu"), torch.float16) == 7


def _files(tmp_path, problem, candidate):
    (tmp_path / "p.py").write_text(problem)
    (tmp_path / "p_new.py").write_text(candidate)
    return [f"--reference={tmp_path / 'p.py'}:Model", f"--model={tmp_path / 'p_new.py'}:ModelNew",
            "--device", "cpu", "--trials", "2", "--quiet"]


def test_a_cast_index_makes_the_reference_fail_and_the_message_names_the_flag(tmp_path, capsys):
    args = _files(tmp_path, GATHER_PROBLEM, GATHER_CANDIDATE)
    assert check.main(args) == 2
    assert "--keep-integer-inputs" in capsys.readouterr().err
    assert check.main([*args, "--keep-integer-inputs"]) == 0


def test_a_bool_mask_arrives_as_the_precision_by_default(tmp_path, capsys):
    args = _files(tmp_path, MASK_PROBLEM, MASK_CANDIDATE_EXPECTS_FLOAT)
    assert check.main(args) == 0
    assert check.main([*args, "--keep-integer-inputs"]) == 1
    assert "mask arrived as torch.bool" in capsys.readouterr().out


def test_bench_keeps_an_index_only_with_the_flag(tmp_path, capsys):
    import bench

    (tmp_path / "p.py").write_text(GATHER_PROBLEM)
    (tmp_path / "p_new.py").write_text(GATHER_CANDIDATE)
    argv = ["--reference", f"{tmp_path / 'p.py'}:Model", "--model", f"{tmp_path / 'p_new.py'}:ModelNew",
            "--no-compile", "--device", "cpu", "--fast-ceilings", "--kb-trials", "2", "--kb-warmup", "1",
            "--repeats", "2"]
    assert bench.main(argv) == 2  # the cast index: the reference itself cannot run
    assert "--keep-integer-inputs" in capsys.readouterr().err
    assert bench.main([*argv, "--keep-integer-inputs"]) == 0


def _run(problem, candidate, *flags):
    from tests.cases import PROBLEMS

    return check.main([f"--reference={PROBLEMS / problem}:Model", f"--model={PROBLEMS / candidate}:ModelNew",
                       "--device", "cpu", "--trials", "2", "--quiet", *flags])


def test_a_bool_constructor_tensor_is_cast_as_kernelbench_casts_it(capsys):
    # KernelBench casts get_init_inputs' tensors as it casts get_inputs': a candidate that needs
    # its constructor's mask to stay bool fails there, and here unless the flag keeps it.
    assert _run("mask_buffer.py", "mask_buffer_bool_mask.py") == 1
    assert "only implemented on integer and Boolean" in capsys.readouterr().out
    assert _run("mask_buffer.py", "mask_buffer_bool_mask.py", "--keep-integer-inputs") == 0
    assert _run("mask_buffer.py", "mask_buffer_ok.py") == 0


COUNTS_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, labels, noise):
        super().__init__()
        self.register_buffer("weights", 1.0 / torch.bincount(labels, minlength=4).clamp_min(1))

    def forward(self, x):
        return x * self.weights


def get_inputs():
    return [torch.randn(3, 4)]


def get_init_inputs():
    return [torch.randint(0, 4, (20,)), torch.rand(5)]
'''

# Holds the reference's weights only when get_init_inputs was drawn right after manual_seed(42),
# as KernelBench draws it.
COUNTS_CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, labels, noise):
        super().__init__()
        torch.manual_seed(42)
        expected = torch.randint(0, 4, (20,))
        if not torch.equal(labels.long(), expected):
            raise ValueError("get_init_inputs was not drawn from seed 42")
        self.register_buffer("weights", 1.0 / torch.bincount(labels.long(), minlength=4).clamp_min(1))

    def forward(self, x):
        return x * self.weights
'''


def test_an_integer_constructor_tensor_that_cannot_be_cast_names_the_flag(tmp_path, capsys):
    args = _files(tmp_path, COUNTS_PROBLEM, COUNTS_CANDIDATE)
    assert check.main(args) == 2  # bincount refuses the float labels: the reference cannot be built
    assert "constructor input(s) [0] are integer or bool tensors" in capsys.readouterr().err
    torch.manual_seed(0)  # whatever state the caller left: the check seeds get_init_inputs itself
    assert check.main([*args, "--keep-integer-inputs"]) == 0  # drawn from seed 42, as the candidate checks


def test_bench_casts_a_bool_constructor_tensor_unless_kept(capsys):
    import bench
    from tests.cases import PROBLEMS

    argv = ["--reference", f"{PROBLEMS / 'mask_buffer.py'}:Model", "--model",
            f"{PROBLEMS / 'mask_buffer_bool_mask.py'}:ModelNew", "--no-compile", "--device", "cpu", "--fast-ceilings",
            "--kb-trials", "2", "--kb-warmup", "1", "--repeats", "2"]
    assert bench.main(argv) == 0  # a candidate that fails is a row with its error
    assert "only implemented on integer and Boolean" in capsys.readouterr().err
    assert bench.main([*argv, "--keep-integer-inputs"]) == 0
    assert "failed:" not in capsys.readouterr().err
