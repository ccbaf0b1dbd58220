// Shared by the CPU and CUDA implementations of kb14::div_sum_scale.
//
// The op returns exactly what `torch.sum(y / divisor, dim=1, keepdim=True) * scale`
// returns: the same shape, dtype, device and bits.
#pragma once

#include "error_message.h"

#include <ATen/ATen.h>

namespace kb14 {

inline int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The element types every op of this library takes.
inline bool is_float_dtype(at::ScalarType dt) {
  return dt == at::kFloat || dt == at::kDouble || dt == at::kHalf || dt == at::kBFloat16;
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
