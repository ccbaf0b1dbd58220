// The launcher of kb14::div_sum_scale on CUDA: `torch.sum(y / d, 1, keepdim=True) * s`
// in one pass over y, with the reference's bits. The kernels and their launch plans
// are in tail_kernels.cuh; this file picks the plan for a call and launches it. No
// torch headers: the op around it (checks, output, device guard, stream, autograd)
// is fused_reduce_cuda.cpp, compiled by the host compiler alongside.

#include "tail_kernels.cuh"
#include "tail_launch.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace kb14 {
namespace {

// The comparison switch, read once per process: KB14_TAIL_PATH=general sends every
// shape to the general kernels (the lean path must return the same bits).
bool general_only() {
  static const bool general = [] {
    const char* path = std::getenv("KB14_TAIL_PATH");
    return path != nullptr && std::strcmp(path, "general") == 0;
  }();
  return general;
}

template <typename cuda_t>
cudaError_t launch_typed(const TailCall& c, TailScratch scratch, void* context, cudaStream_t stream) {
  using acc_t = typename tail::Arith<cuda_t>::acc_t;
  DeviceShape prop;
  if (const cudaError_t err = query_device_shape(c.device, &prop); err != cudaSuccess) return err;
  const tail::Plan p = tail::plan_reference_sum(c.rows, c.cols, tail::kInputVec<cuda_t>, prop);
  acc_t* partials = nullptr;
  if (p.ctas > 1) {
    partials = static_cast<acc_t*>(scratch(context, p.rows * p.ctas, static_cast<int>(sizeof(acc_t))));
    if (partials == nullptr) return cudaErrorMemoryAllocation;
  }
  const tail::Args<cuda_t> a =
      tail::planned_args(p, static_cast<const cuda_t*>(c.y), c.row_stride, c.col_stride, static_cast<cuda_t*>(c.out),
                         c.out_stride, c.divisor, c.scale, partials);
  return tail::launch_planned(p, a, prop, stream, general_only());
}

}  // namespace

cudaError_t launch_div_sum_scale(const TailCall& call, TailScratch scratch, void* context, cudaStream_t stream) {
  switch (call.dtype) {
    case TailDtype::kFloat: return launch_typed<float>(call, scratch, context, stream);
    case TailDtype::kDouble: return launch_typed<double>(call, scratch, context, stream);
    case TailDtype::kHalf: return launch_typed<__half>(call, scratch, context, stream);
    case TailDtype::kBFloat16: return launch_typed<__nv_bfloat16>(call, scratch, context, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace kb14
