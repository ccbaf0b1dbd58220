"""The tail's launch decisions of another commit against the working tree's, on the host, without a GPU.

Each tree's launcher (kernels/fused_reduce*.cu, unchanged) is compiled with nvcc and linked, instead
of the CUDA runtime, to stubs that answer the device queries with a chosen GPU and record every
launch (the kernel's name, grid, block, dynamic shared memory, launch attribute, the first 48 bytes
of its argument struct) and every scratch request. A driver then calls the launcher over a grid of
calls: dtype x rows x columns x layout (contiguous, misaligned start, padded rows, strided columns)
x divisor x GPU size, for both release groups; the two trees' records must be equal line for line,
kernel names compared without the template arguments the newer sources dropped
(compare_builds.normalise). The launch kind: the older sources compiled it per build
(KB14_PROGRAMMATIC_LAUNCH), the newer take it per call (pdl), so three pairings are compared:
programmatic build / pdl=True on sm_90 GPUs, plain build / pdl=False on sm_90 GPUs, plain build /
pdl=True on sm_80 GPUs (a base that takes pdl per call, such as main, gets the same pdl as the tree).

    python scripts/compare_dispatch.py [--base 39a345c]
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from compare_builds import demangle, normalise, tail_units  # noqa: E402

STUBS = r"""
// The CUDA runtime as the launcher sees it: device queries answered from a table, launches recorded.
#include <cuda_runtime_api.h>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

// Registration runs before main, in any order of translation units: the map is built on first use.
static std::map<const void*, std::string>& names() {
  static std::map<const void*, std::string> map;
  return map;
}
static int attributes[64][3];
FILE* out = stdout;

extern "C" {
void** __cudaRegisterFatBinary(void*) { static void* handle; return &handle; }
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
void __cudaRegisterFunction(void**, const char* host, char*, const char* name, int, void*, void*, void*, void*, int*) {
  names()[host] = name;
}
unsigned __cudaPushCallConfiguration(dim3, dim3, size_t, void*) { return 0; }
cudaError_t __cudaPopCallConfiguration(dim3*, dim3*, size_t*, void*) { return cudaSuccess; }
cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) { return cudaErrorNotSupported; }
// What the kernels' own stubs reference (a triple-chevron launch; the launcher makes none).
cudaError_t __cudaGetKernel(cudaKernel_t*, const void*) { return cudaErrorNotSupported; }
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = attributes[device][0]; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = attributes[device][1]; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = attributes[device][2]; return cudaSuccess;
    default: return cudaErrorInvalidValue;
  }
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* c, const void* func, void** args) {
  int programmatic = 0;
  for (unsigned i = 0; i < c->numAttrs; ++i)
    if (c->attrs[i].id == cudaLaunchAttributeProgrammaticStreamSerialization)
      programmatic = c->attrs[i].val.programmaticStreamSerializationAllowed;
  const std::string& name = names()[func];
  std::fprintf(out, "L %s %u,%u,%u %u,%u,%u %zu %d ", name.c_str(), c->gridDim.x, c->gridDim.y, c->gridDim.z,
               c->blockDim.x, c->blockDim.y, c->blockDim.z, c->dynamicSmemBytes, programmatic);
  const unsigned char* bytes = static_cast<const unsigned char*>(args[0]);
  for (int i = 0; i < 48; ++i) std::fprintf(out, "%02x", bytes[i]);
  if (!name.empty() && name.back() == 'b') std::fprintf(out, " %d", *static_cast<const bool*>(args[1]));
  std::fprintf(out, "\n");
  return cudaSuccess;
}
void kb14_stub_device(int device, int sms, int threads, int major) {
  attributes[device][0] = sms;
  attributes[device][1] = threads;
  attributes[device][2] = major;
}
}
"""

DRIVER = r"""
// Calls the launcher over the grid of calls; one line per call, then one per launch.
#include "fused_reduce_launch.h"
#include <cstdio>
#include <cstdint>

extern "C" void kb14_stub_device(int device, int sms, int threads, int major);
extern FILE* out;

static void* scratch(void*, int64_t elements, int bytes) {
  std::fprintf(out, "S %lld %d\n", static_cast<long long>(elements), bytes);
  return reinterpret_cast<void*>(uintptr_t(0x7000000000));
}

int main() {
  const int sms[] = {SMS};
  const int64_t rows[] = {ROWS};
  const int64_t cols[] = {COLS};
  const double divisors[] = {2.0, 3.0, 1e-3};
  const int sizes[] = {4, 8, 2, 2};  // bytes per element, by TailDtype
  int device = 0;
  for (int s : sms) kb14_stub_device(device++, s, THREADS, MAJOR);
  for (int d = 0; d < device; ++d)
    for (int dtype = 0; dtype < 4; ++dtype)
      for (int64_t r : rows)
        for (int64_t c : cols)
          for (int layout = 0; layout < 5; ++layout)
            for (double divisor : divisors) {
              // 0 contiguous; 1 start one element past an aligned address; 2 rows padded by one element;
              // 3 rows padded by 16 elements; 4 every second column.
              const int64_t row_stride = layout == 2 ? c + 1 : layout == 3 ? c + 16 : layout == 4 ? 2 * c : c;
              const int64_t col_stride = layout == 4 ? 2 : 1;
              if (r * row_stride * sizes[dtype] >= (int64_t(1) << 31)) continue;  // the op takes the composite
              kb14::TailCall call{};
              call.dtype = static_cast<kb14::TailDtype>(dtype);
              call.device = d;
              call.y = reinterpret_cast<const void*>(uintptr_t(0x100000000) + (layout == 1 ? sizes[dtype] : 0));
              call.rows = r;
              call.cols = c;
              call.row_stride = row_stride;
              call.col_stride = col_stride;
              call.out = reinterpret_cast<void*>(uintptr_t(0x200000000));
              call.out_stride = 1;
              call.divisor = divisor;
              call.scale = 1.5;
#ifdef PDL
              call.pdl = PDL;
#endif
              std::fprintf(out, "C %d %d %lld %lld %d %g\n", d, dtype, static_cast<long long>(r),
                           static_cast<long long>(c), layout, divisor);
              const int err = kb14::launch_div_sum_scale(call, &scratch, nullptr, reinterpret_cast<cudaStream_t>(0x10));
              if (err) std::fprintf(out, "E %d\n", err);
            }
  return 0;
}
"""

ROWS = [1, 2, 3, 7, 16, 31, 100, 128, 129, 200, 255, 256, 257, 384, 385, 500, 528, 529, 576, 577, 700, 768, 769,
        1000, 1024, 1025, 1100, 1536, 1537, 2048, 4096, 4097, 8192, 16384]
COLS = [2, 3, 100, 127, 128, 129, 255, 512, 1024, 1031, 2048, 2049, 3000, 4095, 4096, 4097, 4100, 5000, 5001, 6000,
        6144, 7000, 8000, 8191, 8192, 8193, 9000, 10007, 10243, 16384, 32768, 36864, 40001, 65536, 81920, 131072,
        200003]
SMS = [40, 66, 78, 108, 114, 132]


def build(kernels_dir: Path, out: Path, torch_version: int, defines: list[str], major: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    driver = (DRIVER.replace("SMS", ", ".join(map(str, SMS))).replace("ROWS", ", ".join(map(str, ROWS)))
              .replace("COLS", ", ".join(map(str, COLS))).replace("THREADS", "2048").replace("MAJOR", str(major)))
    if "tail_launch.h" in {p.name for p in kernels_dir.iterdir()}:  # the older sources' name of the interface
        driver = driver.replace('"fused_reduce_launch.h"', '"tail_launch.h"')
    (out / "driver.cu").write_text(driver)
    (out / "stubs.cpp").write_text(STUBS)
    exe = out / "calls"
    arch = "-gencode=arch=compute_90,code=compute_90"  # PTX only: the host code is what is compared
    subprocess.run(["nvcc", "-std=c++17", "-O1", arch, "-cudart", "none", f"-DKB14_TORCH_VERSION={torch_version}",
                    *defines, f"-I{kernels_dir}", "-o", str(exe), *map(str, tail_units(kernels_dir)),
                    str(out / "driver.cu"), str(out / "stubs.cpp")], check=True, cwd=out)
    return exe


def takes_pdl(kernels_dir: Path) -> bool:
    """Whether these sources take the launch kind per call (TailCall::pdl), not per build."""
    return any("bool pdl" in (kernels_dir / n).read_text() for n in ("fused_reduce_launch.h", "tail_launch.h")
               if (kernels_dir / n).exists())


def records(exe: Path) -> list[str]:
    text = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    lines = text.splitlines()
    mangled = sorted({line.split()[1] for line in lines if line.startswith("L ")})
    plain = dict(zip(mangled, (normalise(n) for n in demangle(mangled))))
    out = []
    for line in lines:
        if line.startswith("L "):
            parts = line.split(" ")
            parts[1] = plain[parts[1]].replace(" ", "")
            line = " ".join(parts)
        out.append(line)
    return out


def family(record: str) -> str:
    """A record's kernel without its template arguments but the element type (or the record kind)."""
    if not record.startswith("L "):
        return record.split()[0]
    name = record.split()[1]
    kernel = name.split("<")[0].replace("voidkb14::", "")
    dtype = next((t for t in ("__half", "__nv_bfloat16", "double", "float") if t in name), "?")
    return f"{kernel}<{dtype}>"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="39a345c", help="the commit whose kernels/ is compared (default 39a345c)")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="kb14_dispatch_") as tmp:
        tmp = Path(tmp)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "kernels"], check=True,
                                 capture_output=True).stdout
        (tmp / "base").mkdir()
        subprocess.run(["tar", "-x", "-C", str(tmp / "base")], input=archive, check=True)
        pairings = [("programmatic build / pdl=True, sm_90", ["-DKB14_PROGRAMMATIC_LAUNCH=1"], ["-DPDL=true"], 9),
                    ("plain build / pdl=False, sm_90", ["-DKB14_PROGRAMMATIC_LAUNCH=0"], ["-DPDL=false"], 9),
                    ("plain build / pdl=True, sm_80", ["-DKB14_PROGRAMMATIC_LAUNCH=0"], ["-DPDL=true"], 8)]
        jobs = []
        with ThreadPoolExecutor(2) as pool:
            for (what, old_defs, new_defs, major), version in itertools.product(pairings, (209, 213)):
                tag = f"{version}_{len(jobs)}"
                if takes_pdl(tmp / "base" / "kernels"):  # a base as new as the launch kind per call
                    old_defs = new_defs
                old = pool.submit(build, tmp / "base" / "kernels", tmp / f"old_{tag}", version, old_defs, major)
                new = pool.submit(build, ROOT / "kernels", tmp / f"new_{tag}", version, new_defs, major)
                jobs.append((what, version, old, new))
            for what, version, old, new in jobs:
                a, b = records(old.result()), records(new.result())
                calls = sum(line.startswith("C ") for line in a)
                launches = sum(line.startswith("L ") for line in a)
                kernels = {line.split()[1] for line in a if line.startswith("L ")}
                same = a == b
                ok &= same
                print(f"{what}, KB14_TORCH_VERSION={version}: {calls} calls, {launches} launches of {len(kernels)} "
                      f"kernels: {'identical' if same else 'DIFFERENT'}")
                if not same:
                    shown = 0
                    for i, (x, y) in enumerate(zip(a, b)):
                        if x != y and shown < 5:
                            call = next(line for line in reversed(a[:i + 1]) if line.startswith("C "))
                            print(f"  at {call}\n    {args.base}: {x}\n    new: {y}")
                            shown += 1
                    if len(a) != len(b):
                        print(f"  {len(a)} lines against {len(b)}")
                    # Every difference by kind: the kernel families (and element type) before and after.
                    kinds = Counter((family(x), family(y)) for x, y in zip(a, b) if x != y)
                    for (was, now), n in sorted(kinds.items()):
                        print(f"  {n} lines: {was} -> {now}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
