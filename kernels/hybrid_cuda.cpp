// The hybrid model's CUDA module, host side: registers the functions of hybrid.cu
// (compiled by the host compiler in parallel with hybrid.cu). They are not
// differentiable: modelnew.ModelNewHybrid carries its own gradient formula.

#include "div_sum_scale.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <tuple>

namespace kb14 {
namespace hybrid_cuda {
// Defined in hybrid.cu.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> hybrid_rows_cuda(
    const at::Tensor& x, const at::Tensor& colsum, const at::Tensor& vectors, const at::Tensor& scalars,
    double scale, double kappa, double tail_depth, double sigma_factor, double atol, double rtol, double budget);
at::Tensor rows_gemm_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count);
std::tuple<at::Tensor, at::Tensor> hybrid_forward_cuda(const at::Tensor& x, const at::Tensor& w,
                                                       const at::Tensor& colsum, const at::Tensor& vectors,
                                                       const at::Tensor& scalars, double divisor, double scaling_factor,
                                                       double kappa, double tail_depth, double sigma_factor,
                                                       double atol, double rtol, double budget, WholeTail whole_tail);
at::Tensor gemm_order_probe_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& r, const at::Tensor& h,
                                 int64_t chains, int64_t tile, bool tree);

// The tail's op through the dispatcher: its kernels are another module's.
at::Tensor dispatched_div_sum_scale(const at::Tensor& y, double divisor, double scale, bool pdl) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("kb14::div_sum_scale", "")
                             .typed<at::Tensor(const at::Tensor&, double, double, bool)>();
  return op.call(y, divisor, scale, pdl);
}

std::tuple<at::Tensor, at::Tensor> hybrid_forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& colsum,
                                                  const at::Tensor& vectors, const at::Tensor& scalars, double divisor,
                                                  double scaling_factor, double kappa, double tail_depth,
                                                  double sigma_factor, double atol, double rtol, double budget) {
  return hybrid_forward_cuda(x, w, colsum, vectors, scalars, divisor, scaling_factor, kappa, tail_depth, sigma_factor,
                             atol, rtol, budget, &dispatched_div_sum_scale);
}
}  // namespace hybrid_cuda
}  // namespace kb14

// The schemas are defined from Python (kernels/schema.py) before this library is loaded.
TORCH_LIBRARY_IMPL(kb14, CUDA, m) {
  m.impl("hybrid_rows", &kb14::hybrid_cuda::hybrid_rows_cuda);
  m.impl("rows_gemm", &kb14::hybrid_cuda::rows_gemm_cuda);
  m.impl("hybrid_forward", &kb14::hybrid_cuda::hybrid_forward);
  m.impl("gemm_order_probe", &kb14::hybrid_cuda::gemm_order_probe_cuda);
}
