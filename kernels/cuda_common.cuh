// Helpers shared by the CUDA sources of this folder (compiled as one translation
// unit by kernels/jit.py, or one at a time by tests/test_build_cuda.py).
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <mutex>

namespace kb14 {

// The CUDA type of a torch element type.
template <typename T> struct CudaType { using type = T; };
template <> struct CudaType<c10::Half> { using type = __half; };
template <> struct CudaType<c10::BFloat16> { using type = __nv_bfloat16; };

// 16-bit floats to float, exactly, and float to 16-bit, rounded to nearest even.
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T round_to(float v);
template <> __device__ __forceinline__ __half round_to<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 round_to<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// The device properties the launch plans read, queried once per device.
struct DeviceShape {
  int multiprocessors;
  int max_threads_per_multiprocessor;
};

inline DeviceShape device_shape(int device) {
  static std::array<DeviceShape, 64> cache{};
  static std::array<std::once_flag, 64> once;
  TORCH_CHECK(device >= 0 && device < 64, "kb14: CUDA device index ", device, " out of range");
  std::call_once(once[device], [device] {
    DeviceShape d{};
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&d.multiprocessors, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&d.max_threads_per_multiprocessor,
                                          cudaDevAttrMaxThreadsPerMultiProcessor, device));
    cache[device] = d;
  });
  return cache[device];
}

}  // namespace kb14
