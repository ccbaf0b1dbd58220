// The torch side of kb14::div_sum_scale on CUDA (fused_reduce_cuda.cpp): the checks,
// the layout test and the composite. The CPU side does the same in Python
// (kernels/tail_cpu.py), with the same messages.
//
// The op returns exactly what `torch.sum(y / divisor, dim=1, keepdim=True) * scale`
// returns: the same shape, dtype, device and bits.
#pragma once

#include "device_shape.h"
#include "error_message.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_ops.h>

namespace kb14 {

// The element types every op of this library takes.
inline bool is_float_dtype(at::ScalarType dt) {
  return dt == at::kFloat || dt == at::kDouble || dt == at::kHalf || dt == at::kBFloat16;
}

// Every precondition (2-D, floating dtype, strided), with a message that names the problem.
inline void check_div_sum_scale_inputs(const at::Tensor& y) {
  KB14_CHECK_VALUE(y.dim() == 2, "div_sum_scale: y must be 2-D (rows, columns), got ", y.dim(),
                   "-D with shape ", y.sizes());
  const auto dt = y.scalar_type();
  KB14_CHECK_TYPE(is_float_dtype(dt), "div_sum_scale: y must be float32, float64, float16 or bfloat16, got ", dt);
  KB14_CHECK(y.layout() == at::kStrided, "div_sum_scale: y must be a dense (strided) tensor, got layout ",
             y.layout());
}

// True when the reference's intermediate `y / divisor` is laid out row-major,
// so that its row sums take the inner-reduction path our kernels reproduce.
// (A column-major `y`, e.g. a transposed view, makes TensorIterator allocate a
// column-major intermediate, whose sum runs PyTorch's outer-reduction code.)
inline bool intermediate_is_row_major(const at::Tensor& y) {
  const int64_t rows = y.size(0), cols = y.size(1);
  if (rows <= 1 || cols <= 1) return true;  // one dimension: every layout reads the same
  // Rows apart, dimension 1 the faster: TensorIterator keeps it innermost (no meta-device probe).
  if (y.stride(1) >= 1 && y.stride(0) >= cols * y.stride(1)) return true;
  // Ask TensorIterator itself, on the meta device: it lays out the quotient
  // exactly as the reference's division would, without touching any data.
  auto probe = y.new_empty_strided(y.sizes(), y.strides(), y.options().device(at::kMeta));
  auto quotient = probe.div(2.0);
  return quotient.stride(1) == 1 && quotient.stride(0) == cols;
}

// The reference computed with the reference's own ops. Used only where no
// fused path reproduces PyTorch's order (see README, "Coverage").
inline at::Tensor div_sum_scale_composite(const at::Tensor& y, double divisor, double scale) {
  return y.div(divisor).sum({1}, /*keepdim=*/true).mul(scale);
}

// at::empty's own call: ATen/ops/empty.h's other headers take longer to parse than a whole glue unit.
inline at::Tensor empty_tensor(at::IntArrayRef size, const at::TensorOptions& o) {
  return at::_ops::empty_memory_format::call(c10::fromIntArrayRefSlow(size), o.dtype().toScalarType(), o.layout(),
                                             o.device(), std::nullopt, std::nullopt);
}

// kb14::div_sum_scale on CUDA as another module reaches it (the hybrid's fallback tail).
using WholeTail = at::Tensor (*)(const at::Tensor& y, double divisor, double scale, bool pdl);

}  // namespace kb14
