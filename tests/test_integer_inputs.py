"""Integer and bool inputs: cast to the precision, as KernelBench's released eval casts
every input tensor, unless --keep-integer-inputs keeps their dtype."""

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
