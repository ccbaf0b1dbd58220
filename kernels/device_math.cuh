// Device helpers shared by the CUDA sources of this folder. No torch headers: the
// kernels compile with nvcc alone (fast, and testable without torch).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kb14 {

// 16-bit floats to float, exactly, and float to 16-bit, rounded to nearest even.
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T round_to(float v);
template <> __device__ __forceinline__ __half round_to<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 round_to<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// What the launch plans read off the GPU.
struct DeviceShape {
  int multiprocessors;
  int max_threads_per_multiprocessor;
  int compute_major;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace kb14
