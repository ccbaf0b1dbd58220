// CUDA implementation of kb14::div_sum_scale: `torch.sum(y / d, 1, keepdim=True) * s`
// in one pass over y, with the reference's bits. The kernels and their launch plans
// are in tail_kernels.cuh (no torch headers); this file is the op around them:
// checks, the output, the device guard and the current stream.

#include "cuda_common.cuh"
#include "div_sum_scale.h"
#include "tail_kernels.cuh"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace kb14 {
namespace {

using tail::Arith;
using tail::Args;
using tail::kInputVec;
using tail::Plan;

// Benchmarking and testing switches, read once: KB14_TAIL_PATH=general sends every
// shape to the general kernels (the lean path must return the same bits);
// KB14_LOGICAL_PER_THREAD=2|4|8|16 picks another mapping of the general split-row kernel.
struct TailSwitches {
  bool general_only = false;
  int logical_per_thread = 1;
};

const TailSwitches& tail_switches() {
  static const TailSwitches switches = [] {
    TailSwitches s;
    if (const char* path = std::getenv("KB14_TAIL_PATH")) s.general_only = std::strcmp(path, "general") == 0;
    if (const char* lpp = std::getenv("KB14_LOGICAL_PER_THREAD")) {
      const int n = std::atoi(lpp);
      if (n == 1 || n == 2 || n == 4 || n == 8 || n == 16) s.logical_per_thread = n;
    }
    return s;
  }();
  return switches;
}

template <typename scalar_t>
void div_sum_scale_typed(const at::Tensor& y, double divisor, double scale, at::Tensor& out) {
  using cuda_t = typename CudaType<scalar_t>::type;
  using op_t = typename Arith<cuda_t>::op_t;
  using acc_t = typename Arith<cuda_t>::acc_t;
  const DeviceShape prop = device_shape(y.get_device());
  constexpr int V = kInputVec<cuda_t>;
  const Plan p = tail::plan_reference_sum(y.size(0), y.size(1), V, prop);

  Args<cuda_t> a;
  a.y = reinterpret_cast<const cuda_t*>(y.const_data_ptr<scalar_t>());
  a.row_stride = y.stride(0);
  a.col_stride = y.size(1) == 1 ? 1 : y.stride(1);
  a.out = reinterpret_cast<cuda_t*>(out.mutable_data_ptr<scalar_t>());
  a.out_stride = out.stride(0);
  a.rows = p.rows;
  a.cols = p.cols;
  a.step = p.step;
  a.ctas = p.ctas;
  a.by_logical = p.split_y ? p.by : 1;
  // The reference computes 1 / divisor on the host in the op math type.
  a.inv = op_t(1) / static_cast<op_t>(divisor);
  a.scale = static_cast<op_t>(scale);
  at::Tensor partials;
  if (p.ctas > 1) {
    partials = at::empty({p.rows * p.ctas}, y.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    a.partials = partials.mutable_data_ptr<acc_t>();
  } else {
    a.partials = nullptr;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const TailSwitches& switches = tail_switches();
  if constexpr (sizeof(cuda_t) < 8) {  // the lean path is for float, half and bfloat16
    if (!switches.general_only && tail::lean_path_applies<cuda_t, V>(p, a)) {
      const cudaError_t err = tail::launch_lean<cuda_t, V>(p, a, prop, tail::LeanOptions{}, stream);
      C10_CUDA_CHECK(err);
      return;
    }
  }
  const cudaError_t err = tail::launch_general<cuda_t, V>(p, a, switches.logical_per_thread, stream);
  C10_CUDA_CHECK(err);
}

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

at::Tensor div_sum_scale_cuda(const at::Tensor& y, double divisor, double scale) {
  check_div_sum_scale_inputs(y);
  const c10::cuda::CUDAGuard guard(y.device());
  if (y.size(0) == 0 || !fused_path_applies(y)) {
    return div_sum_scale_composite(y, divisor, scale);
  }
  auto out = at::empty({y.size(0), 1}, y.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "div_sum_scale_cuda", [&] {
    div_sum_scale_typed<scalar_t>(y, divisor, scale, out);
  });
  return out;
}

}  // namespace
}  // namespace kb14

TORCH_LIBRARY_IMPL(kb14, CUDA, m) {
  m.impl("div_sum_scale", &kb14::div_sum_scale_cuda);
}
