// The tail's kernels without torch, behind a C ABI, so that scripts/tail_variants.py can
// time physical mappings against each other and against Inductor in one process
// without building the library. Build (KB14_TORCH_VERSION as for the library):
//   nvcc -O3 --fmad=false -arch=sm_90 -shared -Xcompiler -fPIC -DKB14_TORCH_VERSION=211 \
//        -Ikernels -o tail_variants.so scripts/tail_variants.cu
#include "tail_kernels.cuh"

using namespace kb14;
using namespace kb14::tail;

namespace {

__global__ void empty_kernel() {}

// Sums y's words in any order, 8 loads in flight per thread over a grid-stride loop.
__global__ void __launch_bounds__(kLeanBlock) unordered_read_kernel(const uint4* __restrict__ y, int64_t n16,
                                                                    float* __restrict__ sink) {
  constexpr int U = 8;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  float acc = 0.0f;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n16; i += U * stride) {
    uint4 b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) b[u] = __ldg(y + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc += __uint_as_float(b[u].x) + __uint_as_float(b[u].y) + __uint_as_float(b[u].z) + __uint_as_float(b[u].w);
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldg(y + i);
    acc += __uint_as_float(v.x) + __uint_as_float(v.y) + __uint_as_float(v.z) + __uint_as_float(v.w);
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) sink[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = acc;
}

template <typename T>
int run(int variant, const void* y, long long rows, long long cols, long long row_stride, void* out,
        long long out_stride, double divisor, double scale, const DeviceShape& prop, int grid_cap,
        void* partials, cudaStream_t stream) {
  constexpr int V = kInputVec<T>;
  using op_t = typename Arith<T>::op_t;
  const Plan p = plan_reference_sum(rows, cols, V, prop);
  Args<T> a;
  a.y = static_cast<const T*>(y);
  a.row_stride = row_stride;
  a.col_stride = 1;
  a.out = static_cast<T*>(out);
  a.out_stride = out_stride;
  a.partials = static_cast<typename Arith<T>::acc_t*>(partials);
  a.rows = rows;
  a.cols = cols;
  a.step = p.step;
  a.ctas = p.ctas;
  a.by_logical = p.split_y ? p.by : 1;
  a.inv = op_t(1) / static_cast<op_t>(divisor);
  a.scale = static_cast<op_t>(scale);
  if (variant == 0) return launch_general<T, V>(p, a, 1, stream);
  if (variant == 6) {
    // What the library launches: the lean kernel where it applies, else the general ones.
    if (lean_path_applies<T, V>(p, a)) return launch_lean<T, V>(a, prop, LeanOptions{}, stream);
    return launch_general<T, V>(p, a, 1, stream);
  }
  if (variant == 9) {
    empty_kernel<<<static_cast<unsigned>(rows), kLeanBlock, 0, stream>>>();
    return cudaGetLastError();
  }
  if (variant == 10) {
    const int64_t n16 = rows * cols * int64_t(sizeof(T)) / 16;
    unordered_read_kernel<<<8 * prop.multiprocessors, kLeanBlock, 0, stream>>>(static_cast<const uint4*>(y), n16,
                                                                              static_cast<float*>(partials));
    return cudaGetLastError();
  }
  if (!lean_path_applies<T, V>(p, a)) return -1;
  LeanOptions opt;
  opt.evict_first = variant == 2 || variant == 3 || variant == 4;
  opt.programmatic_launch = variant == 3 || variant == 4 || variant == 5;
  opt.max_blocks = variant == 4 ? grid_cap : 0;
  return launch_lean<T, V>(a, prop, opt, stream);
}

}  // namespace

// variant: 0 the general kernels; 1 lean, plain loads; 2 lean, evict-first loads; 3 lean,
// evict-first, programmatic launch (the library's choice); 4 as 3 with at most grid_cap
// blocks, each looping over rows; 5 lean, plain loads, programmatic launch; 6 the library's
// dispatch (lean where it applies, else general), for any shape; 9 an empty
// kernel on the lean grid; 10 an unordered read of y (any order of additions: what
// reading the bytes costs, not a tail). Variants tried and removed (L2 bulk prefetch one
// wave ahead, two rows per block, 1 or 2 vectors in flight) are in results/kernel_notes.md.
// dtype: 0 float32, 1 float16, 2 bfloat16. Returns a cudaError_t, or -1 where the
// variant does not apply to the shape.
extern "C" int kb14x_tail(int variant, int dtype, const void* y, long long rows, long long cols,
                          long long row_stride, void* out, long long out_stride, double divisor, double scale,
                          int sms, int threads_per_sm, int cc_major, int grid_cap, void* partials,
                          void* stream) {
  const DeviceShape prop{sms, threads_per_sm, cc_major};
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case 0: return run<float>(variant, y, rows, cols, row_stride, out, out_stride, divisor, scale, prop, grid_cap, partials, s);
    case 1: return run<__half>(variant, y, rows, cols, row_stride, out, out_stride, divisor, scale, prop, grid_cap, partials, s);
    case 2: return run<__nv_bfloat16>(variant, y, rows, cols, row_stride, out, out_stride, divisor, scale, prop, grid_cap, partials, s);
    default: return -2;
  }
}
