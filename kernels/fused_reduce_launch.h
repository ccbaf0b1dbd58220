// Between the CUDA op's torch glue (fused_reduce_cuda.cpp, host compiler, torch headers) and its
// launcher (fused_reduce*.cu, nvcc, no torch headers), so that they compile in parallel.
#pragma once

#include "fused_reduce_dispatch.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace kb14 {
// One checked call of kb14::div_sum_scale on a CUDA tensor (strides in elements).
struct TailCall {
  TailDtype dtype;
  int device;
  const void* y;
  int64_t rows, cols, row_stride, col_stride;
  void* out;
  int64_t out_stride;
  double divisor, scale;
  bool pdl;  // launch as a programmatic dependent of the stream's previous kernel (sm_90 and newer)
};

// Scratch for the launch: `elements` accumulators of `bytes_each` (4 or 8) bytes on the call's device,
// alive until the launch is queued (the glue takes them from torch's caching allocator, in `context`).
using TailScratch = void* (*)(void* context, int64_t elements, int bytes_each);

// Plans the reference's reduction for this call and GPU and launches it on `stream`.
cudaError_t launch_div_sum_scale(const TailCall& call, TailScratch scratch, void* context, cudaStream_t stream);
}  // namespace kb14
