// Registers the column-sum ops' C++ autograd (colsum_autograd.h) for CPU tensors. A unit apart from
// the kernels (colsum.cpp): torch's autograd headers take as long to compile as all of that file,
// and the two compile side by side.
#include "colsum_autograd.h"

#include <torch/library.h>

TORCH_LIBRARY_IMPL(kb14, AutogradCPU, m) {
  m.impl("colsum", &kb14::colsum_autograd::colsum_autograd);
  m.impl("colsum_matvec", &kb14::colsum_autograd::colsum_matvec_autograd);
}
