// The column-sum kernels' device helpers (colsum.cu), torch-free so that scripts/experiments/matvec_variants.cu
// compiles them with nvcc alone.
#pragma once

#include "device_math.cuh"

namespace kb14 {

// The fp64 sum of v over a 1-D block of kBlock threads (a multiple of 32), valid in thread 0: warp trees,
// then warp 0's over their totals in `warp_sums` (reusable after a barrier; or alternate two sets).
template <int kBlock>
__device__ __forceinline__ double block_sum(double v, double (&warp_sums)[kBlock / 32]) {
  constexpr int kLanes = 32;
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) v = __dadd_rn(v, __shfl_down_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kBlock / kLanes ? warp_sums[lane] : 0.0;
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset >>= 1) v = __dadd_rn(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  return v;
}
// The same with slots of its own.
template <int kBlock>
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_sums[kBlock / 32];
  return block_sum<kBlock>(v, warp_sums);
}

// Warming L2 behind a draining kernel, before griddepcontrol.wait (safe: every SM's writes land in L2):
// thread 0 of each block b < SMs prefetches `bytes` of its first row. colsum.cu warms so always.
__device__ __forceinline__ void warm_first_row_per_sm(const void* row, uint32_t bytes) {
  if (threadIdx.x == 0 && blockIdx.x < sm_count()) bulk_prefetch_to_l2(row, bytes);
}

}  // namespace kb14
