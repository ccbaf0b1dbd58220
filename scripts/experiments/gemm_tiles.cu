// Other instantiations of the library's rows_gemm kernel (kernels/hybrid.cu), for
// scripts/experiments/gemm_tiles.py: the tile shapes and register caps it compares.
#include "hybrid.cu"

#include <torch/library.h>

namespace kb14 {
namespace hybrid_cuda {

at::Tensor rows_gemm_variant(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count,
                             int64_t variant) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  at::Tensor y = at::empty({M, N}, x.options());
  GemmArgs a{x.const_data_ptr<float>(), w.const_data_ptr<float>(), y.mutable_data_ptr<float>(),
             rows.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(), M, N, K, x.stride(0), w.stride(0), 0, M};
  auto s = c10::cuda::getCurrentCUDAStream();
  switch (variant) {
    case 0: launch_rows_gemm<128, 128, 16, 8, 1>(a, true, s); break;
    case 1: launch_rows_gemm<128, 128, 8, 8, 2>(a, true, s); break;
    case 2: launch_rows_gemm<96, 128, 16, 6, 1>(a, true, s); break;
    case 3: launch_rows_gemm<64, 128, 16, 4, 1>(a, true, s); break;
    case 4: launch_rows_gemm<96, 128, 8, 6, 2>(a, true, s); break;
    case 5: launch_rows_gemm<64, 128, 16, 4, 2>(a, true, s); break;
    default: TORCH_CHECK(false, "no such variant");
  }
  return y;
}

}  // namespace hybrid_cuda
}  // namespace kb14

TORCH_LIBRARY(kb14_gemm_tiles, m) {
  m.def("rows_gemm_variant(Tensor x, Tensor w, Tensor rows, Tensor count, int variant) -> Tensor");
  m.impl("rows_gemm_variant", c10::DispatchKey::CUDA, &kb14::hybrid_cuda::rows_gemm_variant);
}
