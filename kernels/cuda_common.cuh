// Torch-facing helpers shared by the CUDA sources of this folder (compiled as one
// translation unit by kernels/jit.py, or one at a time by tests/test_build_cuda.py).
#pragma once

#include "device_math.cuh"
#include "error_message.h"

#include <c10/cuda/CUDAException.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <array>
#include <mutex>

namespace kb14 {

// The CUDA type of a torch element type.
template <typename T> struct CudaType { using type = T; };
template <> struct CudaType<c10::Half> { using type = __half; };
template <> struct CudaType<c10::BFloat16> { using type = __nv_bfloat16; };

// The device properties the launch plans read, queried once per device.
inline DeviceShape device_shape(int device) {
  static std::array<DeviceShape, 64> cache{};
  static std::array<std::once_flag, 64> once;
  KB14_CHECK(device >= 0 && device < 64, "kb14: CUDA device index ", device, " out of range");
  std::call_once(once[device], [device] {
    DeviceShape d{};
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&d.multiprocessors, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&d.max_threads_per_multiprocessor,
                                          cudaDevAttrMaxThreadsPerMultiProcessor, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&d.compute_major, cudaDevAttrComputeCapabilityMajor, device));
    cache[device] = d;
  });
  return cache[device];
}

}  // namespace kb14
