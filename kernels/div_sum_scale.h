// Shared by the CPU and CUDA implementations of kb14::div_sum_scale.
//
// The op returns exactly what `torch.sum(y / divisor, dim=1, keepdim=True) * scale`
// returns: the same shape, dtype, device and bits.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace kb14 {

// "(2, 3)": a shape for error messages. Formatted here rather than by streaming
// sizes(): on the H200 machine's torch 2.11 build, streaming an IntArrayRef inside
// TORCH_CHECK from this extension crashed the process.
inline std::string shape_string(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + (t.dim() == 1 ? ",)" : ")");
}

// TORCH_CHECKs every precondition (2-D, floating dtype) with a message that
// names the problem.
void check_div_sum_scale_inputs(const at::Tensor& y);

// True when the reference's intermediate `y / divisor` is laid out row-major,
// so that its row sums take the inner-reduction path our kernels reproduce.
// (A column-major `y`, e.g. a transposed view, makes TensorIterator allocate a
// column-major intermediate, whose sum runs PyTorch's outer-reduction code.)
bool intermediate_is_row_major(const at::Tensor& y);

// The reference computed with the reference's own ops. Used only where no
// fused path reproduces PyTorch's order (see README, "Coverage").
at::Tensor div_sum_scale_composite(const at::Tensor& y, double divisor, double scale);

}  // namespace kb14
