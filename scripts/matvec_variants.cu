// The column-sum path's aligned matrix-vector product (kernels/colsum.cu,
// colsum_matvec_aligned_kernel) in several shapes and with probes that drop part of
// its work, behind a C ABI, so that scripts/matvec_variants.py can time them against
// the library, torch.mv and Inductor in one process. fp32 x, fp64 column sums.
//   nvcc -O3 -arch=sm_90 -shared -Xcompiler -fPIC -Ikernels -o matvec_variants.so scripts/matvec_variants.cu
#include "device_math.cuh"

#include <cstdint>

using namespace kb14;

namespace {

enum Mode : int {
  kExact = 0,      // the library's arithmetic: fp64 products of widened x and fp64 c, fp64 sums
  kNoColsum = 1,   // probe: fp64 sum of widened x, c never read
  kFloatOnly = 2,  // probe: fp32 products and sums with an fp32 copy of c, no widening
};

template <int kThreads>
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_sums[kThreads / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_down_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_sums[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_down_sync(0xffffffffu, v, o));
  }
  return v;
}

template <int kThreads, int kBlocksPerSm, int U, int kMode>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    matvec_kernel(const float* __restrict__ x, const double* __restrict__ c, const float* __restrict__ c32,
                  float* __restrict__ out, int64_t row_stride, int nvec, double scale) {
  const uint4* row = reinterpret_cast<const uint4*>(x + blockIdx.x * row_stride);
  const double2* c2 = reinterpret_cast<const double2*>(c);
  const float4* c4 = reinterpret_cast<const float4*>(c32);
  double acc0 = 0.0, acc1 = 0.0;
  float f0 = 0.0f, f1 = 0.0f;
  wait_for_prior_grids();
  for (int v0 = threadIdx.x; v0 < nvec; v0 += U * kThreads) {
    uint4 buf[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (v0 + u * kThreads < nvec) buf[u] = __ldcs(row + v0 + u * kThreads);
    if (v0 == threadIdx.x) allow_dependent_launch();
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * kThreads;
      if (v < nvec) {
        const float e[4] = {__uint_as_float(buf[u].x), __uint_as_float(buf[u].y), __uint_as_float(buf[u].z),
                            __uint_as_float(buf[u].w)};
        if constexpr (kMode == kExact) {
          const double2 ca = __ldg(c2 + 2 * v), cb = __ldg(c2 + 2 * v + 1);
          acc0 = __fma_rn(double(e[0]), ca.x, acc0);
          acc1 = __fma_rn(double(e[1]), ca.y, acc1);
          acc0 = __fma_rn(double(e[2]), cb.x, acc0);
          acc1 = __fma_rn(double(e[3]), cb.y, acc1);
        } else if constexpr (kMode == kNoColsum) {
          acc0 = __dadd_rn(acc0, double(e[0]));
          acc1 = __dadd_rn(acc1, double(e[1]));
          acc0 = __dadd_rn(acc0, double(e[2]));
          acc1 = __dadd_rn(acc1, double(e[3]));
        } else {
          const float4 cf = __ldg(c4 + v);
          f0 = __fmaf_rn(e[0], cf.x, f0);
          f1 = __fmaf_rn(e[1], cf.y, f1);
          f0 = __fmaf_rn(e[2], cf.z, f0);
          f1 = __fmaf_rn(e[3], cf.w, f1);
        }
      }
    }
  }
  if constexpr (kMode == kFloatOnly) acc0 = double(f0) + double(f1);
  const double total = block_sum<kThreads>(__dadd_rn(acc0, acc1));
  if (threadIdx.x == 0) out[blockIdx.x] = __double2float_rn(__dmul_rn(scale, total));
}

template <int kThreads, int kBlocksPerSm, int U, int kMode>
int launch(const float* x, long long rows, long long row_stride, int nvec, const double* c, const float* c32,
           float* out, double scale, bool programmatic, cudaStream_t s) {
  return static_cast<int>(launch_programmatic(matvec_kernel<kThreads, kBlocksPerSm, U, kMode>,
                                              dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, s, programmatic,
                                              x, c, c32, out, static_cast<int64_t>(row_stride), nvec, scale));
}

}  // namespace

extern "C" int kb14x_matvec(int variant, const float* x, long long rows, long long row_stride, int nvec,
                            const double* c, const float* c32, float* out, double scale, int programmatic,
                            void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const bool p = programmatic != 0;
  switch (variant) {
    case 0: return launch<256, 8, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 1: return launch<512, 4, 4, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 2: return launch<256, 8, 4, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 3: return launch<512, 4, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 4: return launch<128, 16, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 5: return launch<256, 4, 4, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 6: return launch<1024, 2, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 10: return launch<256, 8, 2, kNoColsum>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 11: return launch<256, 8, 2, kFloatOnly>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 12: return launch<512, 4, 2, kFloatOnly>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    default: return -1;
  }
}
