"""The tail's dispatch (kernels/fused_reduce_dispatch.h), compiled by the host compiler and run on the CPU
against a table of calls and the kernel each must get, as results/kernel_notes.md ("The tail") decided
them. No GPU: the header is plain C++. Whether the launcher launches what the dispatch says is
scripts/compare_dispatch.py's question (the same decisions as before the dispatch became data)."""

import ctypes
import hashlib
import shutil
import subprocess

import pytest

from kernels import jit

GXX = shutil.which("g++")
LEAVES = ["general", "block_rows", "block_rows_one_chunk", "block_rows_warm", "block_rows_five", "block_rows_deep",
          "warp_rows", "warp_rows_deep", "warp_rows_wide", "split_lanes", "split_lanes_staged"]
DTYPES = {"fp32": 0, "fp64": 1, "fp16": 2, "bf16": 3}
BYTES = {"fp32": 4, "fp64": 8, "fp16": 2, "bf16": 2}

WRAPPER = r"""
#include "fused_reduce_dispatch.h"
extern "C" void kb14_dispatch(int dtype, long long rows, long long cols, long long row_stride, long long col_stride,
                              unsigned long long y, double divisor, int sms, int threads, int major, int torch_version,
                              int pdl, int* out) {
  using namespace kb14;
  const tail::Config c = tail::dispatch({static_cast<TailDtype>(dtype), rows, cols, row_stride, col_stride,
                                         static_cast<uintptr_t>(y), divisor, DeviceShape{sms, threads, major},
                                         torch_version, pdl != 0});
  const int fields[] = {static_cast<int>(c.leaf), c.loads, c.shifted, c.packed, c.programmatic, c.plan.bx, c.plan.by,
                        c.plan.split_y, c.plan.ctas, c.plan.vectorized};
  for (int i = 0; i < 10; ++i) out[i] = fields[i];
}
"""


@pytest.fixture(scope="module")
def dispatch_lib():
    if GXX is None:
        pytest.skip("g++ not installed")
    headers = [jit.SOURCE_DIR / n for n in ("fused_reduce_dispatch.h", "fused_reduce_order.h", "device_shape.h")]
    key = hashlib.sha256(WRAPPER.encode() + b"".join(p.read_bytes() for p in headers)).hexdigest()[:16]
    so = jit.cache_root() / f"kb14_dispatch_test_{key}.so"
    if not so.exists():  # built once per change of the headers, shared by later runs
        so.parent.mkdir(parents=True, exist_ok=True)
        src = so.with_suffix(".cpp")
        src.write_text(WRAPPER)
        tmp = so.with_suffix(f".{id(src)}.tmp")
        subprocess.run([GXX, "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{jit.SOURCE_DIR}", "-o", str(tmp), str(src)],
                       check=True)
        tmp.replace(so)
    lib = ctypes.CDLL(str(so))
    ll, dbl, i = ctypes.c_longlong, ctypes.c_double, ctypes.c_int
    lib.kb14_dispatch.argtypes = [i, ll, ll, ll, ll, ctypes.c_ulonglong, dbl, i, i, i, i, i, ctypes.POINTER(i)]
    return lib


def dispatch(lib, dtype, rows, cols, *, pad=0, col_stride=1, offset=0, divisor=2.0, sms=132, major=9,
             torch_version=211, pdl=True):
    out = (ctypes.c_int * 10)()
    y = 0x100000000 + offset * BYTES[dtype]
    lib.kb14_dispatch(DTYPES[dtype], rows, cols, cols + pad if col_stride == 1 else cols * col_stride, col_stride, y,
                      divisor, sms, 2048, major, torch_version, int(pdl), out)
    leaf, loads, shifted, packed, programmatic = out[:5]
    return {"leaf": LEAVES[leaf], "loads": loads, "shifted": bool(shifted), "packed": bool(packed),
            "programmatic": bool(programmatic), "plan": tuple(out[5:])}


# (dtype, rows, cols, options) -> (leaf, loads): the H200 (132 SMs), torch 2.10+'s order, divisor 2, pdl,
# unless the options say otherwise. The shapes are tests/test_gpu.py's, where the same leaves run on the GPU.
TABLE = [
    # rows of one chunk (8192): loop-free; fp32 beyond one wave of blocks (4 x 132) warms L2 behind a warmed launch
    ("fp32", 1024, 8192, {}, "block_rows_warm", 4),
    ("fp32", 529, 8192, {}, "block_rows_warm", 4),
    ("fp32", 528, 8192, {}, "block_rows_one_chunk", 4),
    ("fp32", 1024, 8192, {"pdl": False}, "block_rows_one_chunk", 4),
    ("fp32", 1024, 8192, {"major": 8}, "block_rows_one_chunk", 4),
    ("fp32", 1024, 8192, {"sms": 66}, "block_rows_warm", 4),
    ("bf16", 1024, 8192, {}, "block_rows_one_chunk", 2),
    ("fp16", 16384, 8192, {}, "block_rows_one_chunk", 2),
    ("bf16", 1024, 8192, {"torch_version": 209}, "block_rows_one_chunk", 4),
    # block rows: five vectors per thread (fp32), eight in flight on long 16-bit rows, else the looped kernel
    ("fp32", 300, 10007, {}, "block_rows_five", 5),
    ("fp32", 64, 10240, {}, "block_rows_five", 5),
    ("fp32", 17, 8196, {}, "block_rows_five", 5),
    ("fp32", 1024, 12288, {}, "block_rows", 4),
    ("bf16", 40, 65535, {}, "block_rows_deep", 8),
    ("fp16", 33, 57345, {}, "block_rows_deep", 8),
    ("bf16", 1024, 65536, {}, "block_rows_deep", 8),
    ("bf16", 1024, 61448, {}, "block_rows_deep", 8),
    ("bf16", 100, 36872, {}, "block_rows_deep", 8),  # a short last round, but no more rows than SMs
    ("bf16", 1024, 36872, {}, "block_rows", 2),  # a short last round loses
    ("fp32", 1024, 65536, {}, "block_rows", 4),
    # fp32 warp rows, 128-1536 rows: split lanes with 32, 48 or 64 loads, or the row staged
    ("fp32", 512, 8000, {}, "split_lanes", 32),
    ("fp32", 900, 4100, {}, "split_lanes", 48),
    ("fp32", 1024, 5000, {}, "split_lanes", 48),
    ("fp32", 128, 6000, {}, "split_lanes", 48),
    ("fp32", 320, 6000, {}, "split_lanes", 48),
    ("fp32", 1200, 5000, {}, "split_lanes", 48),
    ("fp32", 1024, 6144, {}, "split_lanes", 64),
    ("fp32", 200, 8000, {}, "split_lanes", 64),
    ("fp32", 300, 4097, {}, "split_lanes", 48),
    ("fp32", 1300, 4097, {}, "split_lanes", 48),
    ("fp32", 256, 8001, {}, "split_lanes", 64),
    ("fp32", 1000, 4095, {}, "split_lanes", 32),
    ("fp32", 600, 4100, {}, "split_lanes_staged", 1),
    ("fp32", 700, 4100, {}, "split_lanes_staged", 1),
    ("fp32", 1024, 4096, {}, "split_lanes_staged", 1),
    ("fp32", 1025, 4096, {}, "split_lanes_staged", 1),
    ("fp32", 512, 5000, {}, "split_lanes_staged", 1),
    ("fp32", 16, 7000, {}, "split_lanes_staged", 1),
    ("fp32", 1024, 2052, {}, "split_lanes_staged", 1),
    ("fp32", 7, 8188, {}, "general", 4),  # 7 rows: 128-lane rows, which the lean kernels do not reproduce
    ("fp32", 128, 3001, {}, "split_lanes_staged", 1),
    # fp32 warp rows beyond: wide (more than 4096 rows), deep (up to 4096), or two vectors per lane
    ("fp32", 8192, 1024, {}, "warp_rows_wide", 8),
    ("fp32", 4097, 2048, {}, "warp_rows_wide", 8),
    ("fp32", 5000, 1500, {}, "warp_rows_wide", 8),
    ("fp32", 4097, 512, {}, "warp_rows_wide", 8),
    ("fp32", 4096, 2048, {}, "warp_rows_deep", 16),
    ("fp32", 64, 2048, {}, "warp_rows_deep", 16),
    ("fp32", 1537, 4096, {}, "warp_rows_deep", 16),
    ("fp32", 4097, 511, {}, "warp_rows", 2),
    # 16-bit warp rows: split lanes with 8 loads, 16 past 2048 columns, up to 4096 rows; two vectors beyond
    ("bf16", 512, 1024, {}, "split_lanes", 8),
    ("fp16", 4096, 2048, {}, "split_lanes", 8),
    ("bf16", 1024, 4096, {}, "split_lanes", 16),
    ("fp16", 300, 4097, {}, "split_lanes", 16),
    ("bf16", 1000, 4095, {}, "split_lanes", 16),
    ("bf16", 8192, 1024, {}, "warp_rows", 2),
    ("fp16", 4097, 511, {}, "warp_rows", 2),
    # the 2.4-2.9 group's 16-bit vectors are 8 bytes: split lanes read four words a vector, so warp rows
    ("bf16", 1024, 4096, {"torch_version": 209}, "warp_rows", 2),
    ("fp16", 64, 512, {"torch_version": 209}, "warp_rows", 2),
    # the general kernels: fp64, rows the lean path cannot reproduce, plans of several blocks per row
    ("fp64", 1024, 8192, {}, "general", 4),
    ("fp32", 1024, 8192, {"pad": 3}, "general", 4),
    ("fp32", 1024, 8192, {"col_stride": 2}, "general", 4),
    ("fp32", 1024, 8192, {"offset": 1}, "general", 4),
    ("bf16", 1, 300007, {}, "general", 2),
    ("fp32", 3, 127, {}, "general", 4),
    ("fp32", 100, 128, {"torch_version": 209}, "general", 4),  # not vectorised before 2.10
]


@pytest.mark.parametrize("dtype,rows,cols,options,leaf,loads", TABLE,
                         ids=[f"{d}-{r}x{c}-{'-'.join(f'{k}{v}' for k, v in o.items()) or 'h200'}"
                              for d, r, c, o, _, _ in TABLE])
def test_dispatch_table(dispatch_lib, dtype, rows, cols, options, leaf, loads):
    got = dispatch(dispatch_lib, dtype, rows, cols, **options)
    assert (got["leaf"], got["loads"]) == (leaf, loads), got


def test_launch_kind_is_the_callers_on_sm90_and_newer(dispatch_lib):
    assert dispatch(dispatch_lib, "fp32", 512, 8000)["programmatic"]
    assert not dispatch(dispatch_lib, "fp32", 512, 8000, pdl=False)["programmatic"]
    assert not dispatch(dispatch_lib, "fp32", 512, 8000, major=8)["programmatic"]
    assert not dispatch(dispatch_lib, "fp64", 16, 100, pdl=False)["programmatic"]
    assert dispatch(dispatch_lib, "fp64", 16, 100, major=10)["programmatic"]


def test_rows_that_start_mid_vector_and_the_packed_multiply(dispatch_lib):
    assert dispatch(dispatch_lib, "fp32", 1000, 8191)["shifted"]
    assert not dispatch(dispatch_lib, "fp32", 1024, 8192)["shifted"]
    assert dispatch(dispatch_lib, "fp32", 1000, 12288, pad=8)["leaf"] == "block_rows"  # padded by whole vectors
    # 1 / divisor a power of two within the type's normal range: half 2^-14..2^15, bfloat16 2^-16..2^127
    assert dispatch(dispatch_lib, "fp16", 1024, 8192, divisor=2.0)["packed"]
    assert not dispatch(dispatch_lib, "fp16", 1024, 8192, divisor=3.0)["packed"]
    assert not dispatch(dispatch_lib, "fp16", 1024, 8192, divisor=2.0 ** -16)["packed"]
    assert dispatch(dispatch_lib, "bf16", 1024, 8192, divisor=2.0 ** -16)["packed"]
    assert not dispatch(dispatch_lib, "bf16", 1024, 8192, divisor=2.0 ** 17)["packed"]
    assert not dispatch(dispatch_lib, "fp32", 1024, 8192, divisor=2.0)["packed"]


def test_plan_is_the_references(dispatch_lib):
    # (bx, by, split_y, ctas, vectorized): Reduce.cuh's configuration
    assert dispatch(dispatch_lib, "fp32", 1024, 8192)["plan"] == (32, 16, 1, 1, 1)
    assert dispatch(dispatch_lib, "fp32", 8192, 1024)["plan"] == (32, 16, 0, 1, 1)
    assert dispatch(dispatch_lib, "fp32", 1, 300007)["plan"][2:4] == (1, 37)  # min(132 x 4 blocks, 586 values / 16)
    assert dispatch(dispatch_lib, "fp32", 3, 127)["plan"][4] == 0
