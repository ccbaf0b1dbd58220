// kb14::div_sum_scale on CUDA tensors: the op around the launcher (fused_reduce.cu),
// compiled by the host compiler: checks, the output, the device guard, the current
// stream. Registered at CUDA by fused_reduce_register.cpp, a unit of its own so that
// torch/library.h's parse runs beside this one's. The op's C++ autograd is its own
// module, tail_autograd_cuda.cpp: its headers would double the build's time.

#include "div_sum_scale.h"
#include "fused_reduce_launch.h"

#include <ATen/ops/empty_ops.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <limits>

namespace kb14 {
namespace {

// Shapes whose reduction torch splits into several 32-bit-indexed launches
// (TensorIterator::can_use_32bit_indexing fails on the quotient), single columns
// (no reduction runs: the sum is 0 + y) and column-major layouts go to the
// composite, which is the reference itself.
bool fused_path_applies(const at::Tensor& y) {
  const int64_t int32_max = std::numeric_limits<int32_t>::max();
  const int64_t elem = y.element_size();
  const int64_t max_offset = y.numel() * elem - elem + 1;
  return y.numel() <= int32_max && max_offset <= int32_max && y.size(1) > 1 && intermediate_is_row_major(y);
}

TailDtype tail_dtype(at::ScalarType t) {
  switch (t) {
    case at::kDouble: return TailDtype::kDouble;
    case at::kHalf: return TailDtype::kHalf;
    case at::kBFloat16: return TailDtype::kBFloat16;
    default: return TailDtype::kFloat;  // the checks admit only these four
  }
}

// at::empty's own call: ATen/ops/empty.h's other headers took longer to parse than the rest of this unit.
at::Tensor empty_tensor(at::IntArrayRef size, const at::TensorOptions& o) {
  return at::_ops::empty_memory_format::call(c10::fromIntArrayRefSlow(size), o.dtype().toScalarType(), o.layout(),
                                             o.device(), std::nullopt, std::nullopt);
}

// The launcher's scratch (partial sums across blocks), from torch's caching allocator.
struct Scratch {
  at::TensorOptions options;
  at::Tensor tensor;
};

void* allocate_scratch(void* context, int64_t elements, int bytes_each) {
  auto* s = static_cast<Scratch*>(context);
  s->tensor = empty_tensor({elements}, s->options.dtype(bytes_each == 8 ? at::kDouble : at::kFloat));
  return s->tensor.mutable_data_ptr();
}

}  // namespace

at::Tensor div_sum_scale_cuda(const at::Tensor& y, double divisor, double scale, bool pdl) {
  check_div_sum_scale_inputs(y);
  const c10::cuda::CUDAGuard guard(y.device());
  if (y.size(0) == 0 || !fused_path_applies(y)) {
    return div_sum_scale_composite(y, divisor, scale);
  }
  auto out = empty_tensor({y.size(0), 1}, y.options());
  TailCall call;
  call.dtype = tail_dtype(y.scalar_type());
  call.device = y.get_device();
  call.y = y.const_data_ptr();
  call.rows = y.size(0);
  call.cols = y.size(1);
  call.row_stride = y.stride(0);
  call.col_stride = y.stride(1);
  call.out = out.mutable_data_ptr();
  call.out_stride = out.stride(0);
  call.divisor = divisor;
  call.scale = scale;
  call.pdl = pdl;
  Scratch scratch{y.options(), at::Tensor()};
  C10_CUDA_CHECK(launch_div_sum_scale(call, &allocate_scratch, &scratch, c10::cuda::getCurrentCUDAStream()));
  return out;
}

}  // namespace kb14
