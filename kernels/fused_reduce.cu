// kb14::div_sum_scale's CUDA launcher (the reference's bits in one pass): fused_reduce_dispatch.h picks the kernel,
// fused_reduce_switch.cuh launches it; float here. No torch headers (the op: fused_reduce_cuda.cpp).
#include "fused_reduce_switch.cuh"

namespace kb14 {
cudaError_t launch_div_sum_scale(const TailCall& call, TailScratch scratch, void* context, cudaStream_t stream) {
  using namespace tail;
  DeviceShape device;
  if (const cudaError_t err = query_device_shape(call.device, &device); err != cudaSuccess) return err;
  const Config c = dispatch({call.dtype, call.rows, call.cols, call.row_stride, call.col_stride,
                             reinterpret_cast<uintptr_t>(call.y), call.divisor, device, KB14_TORCH_VERSION, call.pdl});
  switch (call.dtype) {
    case TailDtype::kFloat: return launch_typed<float>(call, c, scratch, context, stream);
    case TailDtype::kDouble: return launch_typed<double>(call, c, scratch, context, stream);
    case TailDtype::kHalf: return launch_typed<__half>(call, c, scratch, context, stream);
    case TailDtype::kBFloat16: return launch_typed<__nv_bfloat16>(call, c, scratch, context, stream);
  }
  return cudaErrorInvalidValue;
}
}  // namespace kb14
