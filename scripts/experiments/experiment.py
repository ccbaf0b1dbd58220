"""What the experiments share: their CUDA source built with the library's flags against its
headers (kernels/), cached beside the library's builds, and the columns every row of theirs
carries in results/measurements.csv."""

from __future__ import annotations

from pathlib import Path

import torch

from harness import results_table
from kernels import jit

ROOT = Path(__file__).resolve().parents[2]


def build(source: str, ldflags: tuple[str, ...] = (), include_paths: tuple[str, ...] = ()) -> None:
    """Build scripts/experiments/SOURCE (a .cu with its own TORCH_LIBRARY kb14_<stem>) for this GPU,
    with extra linker flags and include folders where it needs a library beside torch."""
    from torch.utils.cpp_extension import load_inline

    stem = Path(source).stem
    arch = "".join(map(str, torch.cuda.get_device_capability()))
    build_dir = jit.cache_root() / f"experiments_{stem}"
    build_dir.mkdir(parents=True, exist_ok=True)
    load_inline(name=f"kb14_{stem}", cpp_sources=[""], cuda_sources=[(Path(__file__).with_name(source)).read_text()],
                is_python_module=False, extra_cuda_cflags=jit.nvcc_flags(arch), extra_cflags=list(jit.HOST_FLAGS),
                extra_ldflags=jit.link_flags() + list(ldflags), extra_include_paths=[str(ROOT / "kernels"), *include_paths],
                build_directory=str(build_dir))


def table_columns(out: dict) -> dict:
    """The columns of a run's rows that its JSON `out` (gpu, torch, shape) fixes."""
    return dict(commit=results_table.current_commit(), gpu=out["gpu"], torch=out["torch"],
                shape="x".join(map(str, out["shape"])), dtype="fp32", method="read flush, median")
