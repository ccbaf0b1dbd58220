// The hybrid model's CUDA module, host side: registers the functions of hybrid.cu
// (compiled by the host compiler in parallel with hybrid.cu). They are not
// differentiable: modelnew.ModelNewHybrid carries its own gradient formula.

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <tuple>

namespace kb14 {
namespace hybrid_cuda {
// Defined in hybrid.cu.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> hybrid_rows_cuda(
    const at::Tensor& x, const at::Tensor& colsum, const at::Tensor& vectors, const at::Tensor& scalars,
    double scale, double kappa, double tail_depth, double sigma_factor, double atol, double rtol, double budget);
at::Tensor rows_gemm_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count);
at::Tensor gemm_order_probe_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& r, const at::Tensor& h,
                                 int64_t chains, int64_t tile, bool tree);
}  // namespace hybrid_cuda
}  // namespace kb14

// The schemas are defined from Python (kernels/schema.py) before this library is loaded.
TORCH_LIBRARY_IMPL(kb14, CUDA, m) {
  m.impl("hybrid_rows", &kb14::hybrid_cuda::hybrid_rows_cuda);
  m.impl("rows_gemm", &kb14::hybrid_cuda::rows_gemm_cuda);
  m.impl("gemm_order_probe", &kb14::hybrid_cuda::gemm_order_probe_cuda);
}
