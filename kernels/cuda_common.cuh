// Helpers for the CUDA sources that include torch (colsum.cu, hybrid.cu), not used by the tail.
#pragma once

#include "device_math.cuh"
#include "error_message.h"

#include <c10/cuda/CUDAException.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

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

// The CUDA type of a torch element type.
template <typename T> struct CudaType { using type = T; };
template <> struct CudaType<c10::Half> { using type = __half; };
template <> struct CudaType<c10::BFloat16> { using type = __nv_bfloat16; };

// The device properties the launch plans read (query_device_shape), or an exception.
inline DeviceShape device_shape(int device) {
  DeviceShape shape;
  KB14_CHECK(device >= 0 && device < 64, "kb14: CUDA device index ", device, " out of range");
  C10_CUDA_CHECK(query_device_shape(device, &shape));
  return shape;
}

}  // namespace kb14
