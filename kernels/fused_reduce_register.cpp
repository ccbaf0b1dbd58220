// Registers kb14::div_sum_scale's CUDA kernel (fused_reduce_cuda.cpp) when the tail_cuda module
// is loaded. Apart from the op because torch/library.h alone takes as long to parse as the op's
// headers: the two units compile side by side. The schema is defined from Python (kernels/schema.py).
#include <torch/library.h>

namespace kb14 {
at::Tensor div_sum_scale_cuda(const at::Tensor& y, double divisor, double scale, bool pdl);
}

TORCH_LIBRARY_IMPL(kb14, CUDA, m) {
  m.impl("div_sum_scale", &kb14::div_sum_scale_cuda);
}
