// The checks of kb14::colsum and kb14::colsum_matvec, shared by their CPU module
// (colsum.cpp) and their CUDA module (colsum.cu); every message names the problem.
#pragma once

#include "div_sum_scale.h"

namespace kb14 {

inline void check_colsum_inputs(const at::Tensor& w) {
  KB14_CHECK(w.layout() == at::kStrided, "colsum: weight must be a dense (strided) tensor, got layout ",
             w.layout());
  KB14_CHECK_VALUE(w.dim() == 2, "colsum: weight must be 2-D (hidden, input), got ", w.dim(), "-D with shape ",
                   w.sizes());
  KB14_CHECK_TYPE(is_float_dtype(w.scalar_type()),
                  "colsum: weight must be float32, float64, float16 or bfloat16, got ", w.scalar_type());
}

inline void check_colsum_matvec_inputs(const at::Tensor& x, const at::Tensor& c) {
  KB14_CHECK(x.layout() == at::kStrided && c.layout() == at::kStrided,
              "colsum_matvec: x and colsum must be dense (strided) tensors");
  KB14_CHECK_VALUE(x.dim() == 2, "colsum_matvec: x must be 2-D (batch, input), got ", x.dim(),
                   "-D with shape ", x.sizes());
  KB14_CHECK_VALUE(c.dim() == 1, "colsum_matvec: colsum must be 1-D (input,), got ", c.dim(), "-D with shape ",
                   c.sizes());
  KB14_CHECK_TYPE(is_float_dtype(x.scalar_type()),
                  "colsum_matvec: x must be float32, float64, float16 or bfloat16, got ", x.scalar_type());
  KB14_CHECK_TYPE(c.scalar_type() == at::kDouble,
                  "colsum_matvec: colsum must be float64 (as kb14::colsum returns it), got ", c.scalar_type());
  KB14_CHECK_VALUE(x.size(1) == c.size(0), "colsum_matvec: x has ", x.size(1), " columns but colsum has ",
                   c.size(0), " elements");
  KB14_CHECK(x.device() == c.device(), "colsum_matvec: x is on ", x.device(), " but colsum is on ", c.device());
}

}  // namespace kb14
