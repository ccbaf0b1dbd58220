// The column-sum path's CUDA module, host side: registers the CUDA functions of colsum.cu
// and the C++ autograd for CUDA tensors (colsum_autograd.h), compiled by the host
// compiler in parallel with colsum.cu.

#include "colsum_autograd.h"

#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace kb14 {
namespace colsum_cuda {
// Defined in colsum.cu.
at::Tensor colsum_cuda(const at::Tensor& w);
at::Tensor colsum_matvec_cuda(const at::Tensor& x, const at::Tensor& c, double scale);
}  // namespace colsum_cuda
}  // namespace kb14

// The schemas are defined from Python (kernels/schema.py) before this library is loaded.
TORCH_LIBRARY_IMPL(kb14, CUDA, m) {
  m.impl("colsum", &kb14::colsum_cuda::colsum_cuda);
  m.impl("colsum_matvec", &kb14::colsum_cuda::colsum_matvec_cuda);
}

TORCH_LIBRARY_IMPL(kb14, AutogradCUDA, m) {
  m.impl("colsum", &kb14::colsum_autograd::colsum_autograd);
  m.impl("colsum_matvec", &kb14::colsum_autograd::colsum_matvec_autograd);
}
