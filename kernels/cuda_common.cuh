// Helpers for the CUDA source that includes torch (colsum.cu), not used by the tail or the hybrid.
#pragma once

#include "device_math.cuh"
#include "error_message.h"

#include <c10/cuda/CUDAException.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

namespace kb14 {

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
