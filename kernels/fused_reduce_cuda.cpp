// kb14::div_sum_scale on CUDA tensors: the op around the launcher (fused_reduce.cu),
// compiled by the host compiler: checks, the output, the device guard, the current
// stream, and its registration at CUDA. The op's C++ autograd is its own module,
// tail_autograd_cuda.cpp: its headers would double the build's time. Headers are chosen
// for the first use's wait (results/kernel_notes.md, "The build").

#include "div_sum_scale.h"
#include "fused_reduce_launch.h"

#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

// torch 2.7 and newer register a boxed kernel through torch's C shim, which parses in a tenth of
// torch/library.h's time (0.4 s against 3.5 on the 2-core machine).
#if __has_include(<torch/csrc/stable/library.h>)
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#define KB14_SHIM_REGISTRATION 1
#else
#include <torch/library.h>
#endif

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

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
  const c10::DeviceGuard guard(y.device());
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
  C10_CUDA_CHECK(launch_div_sum_scale(call, &allocate_scratch, &scratch, c10::cuda::getCurrentCUDAStream(call.device)));
  return out;
}

}  // namespace kb14

#if KB14_SHIM_REGISTRATION
namespace {
// The op as torch's shim calls it: a slot of 64 bits per argument, then the result in slot 0. A tensor
// is an owned at::Tensor* (AtenTensorHandle), a double or a bool its bits in the slot's low bytes.
void div_sum_scale_boxed(StableIValue* stack, uint64_t, uint64_t) {
  const std::unique_ptr<at::Tensor> y(reinterpret_cast<at::Tensor*>(stack[0]));
  double divisor, scale;
  bool pdl;
  std::memcpy(&divisor, &stack[1], sizeof divisor);
  std::memcpy(&scale, &stack[2], sizeof scale);
  std::memcpy(&pdl, &stack[3], sizeof pdl);
  stack[0] = reinterpret_cast<StableIValue>(new at::Tensor(kb14::div_sum_scale_cuda(*y, divisor, scale, pdl)));
}

// The schema is defined from Python (kernels/schema.py) before this library is loaded.
struct Registration {
  TorchLibraryHandle library = nullptr;
  Registration() {
    aoti_torch_library_init_impl("kb14", "CUDA", __FILE__, __LINE__, &library);
    aoti_torch_library_impl(library, "div_sum_scale", &div_sum_scale_boxed);
  }
  ~Registration() { aoti_torch_delete_library_object(library); }
} registration;
}  // namespace
#else
TORCH_LIBRARY_IMPL(kb14, CUDA, m) {
  m.impl("div_sum_scale", &kb14::div_sum_scale_cuda);
}
#endif
