// Other instantiations of the library's rows_gemm kernel (kernels/hybrid.cu), for
// scripts/experiments/gemm_tiles.py: the tile sizes and register caps it compares.
#include "hybrid.cu"

#include <torch/library.h>

namespace kb14 {
namespace hybrid_cuda {

template <int BM, int BN, int BK, int MinBlocks>
at::Tensor rows_gemm_tile(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  at::Tensor y = at::empty({M, N}, x.options());
  GemmArgs a{x.const_data_ptr<float>(), w.const_data_ptr<float>(), y.mutable_data_ptr<float>(),
             rows.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(), M, N, K, x.stride(0), w.stride(0)};
  const dim3 grid(static_cast<unsigned>(div_up(M, BM)), static_cast<unsigned>(div_up(N, BN)));
  rows_gemm_kernel<BM, BN, BK, MinBlocks, true>
      <<<grid, GemmTile<BM, BN, BK>::kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

at::Tensor rows_gemm_variant(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count,
                             int64_t variant) {
  switch (variant) {
    case 0: return rows_gemm_tile<64, 128, 8, 3>(x, w, rows, count);
    case 1: return rows_gemm_tile<64, 128, 8, 4>(x, w, rows, count);
    case 2: return rows_gemm_tile<128, 128, 8, 2>(x, w, rows, count);
    case 3: return rows_gemm_tile<64, 128, 16, 3>(x, w, rows, count);
    case 4: return rows_gemm_tile<128, 64, 8, 3>(x, w, rows, count);
    case 5: return rows_gemm_tile<64, 64, 8, 4>(x, w, rows, count);
    case 6: return rows_gemm_tile<128, 128, 16, 2>(x, w, rows, count);
    default: TORCH_CHECK(false, "no such variant");
  }
}

}  // namespace hybrid_cuda
}  // namespace kb14

TORCH_LIBRARY(kb14_gemm_tiles, m) {
  m.def("rows_gemm_variant(Tensor x, Tensor w, Tensor rows, Tensor count, int variant) -> Tensor");
  m.impl("rows_gemm_variant", c10::DispatchKey::CUDA, &kb14::hybrid_cuda::rows_gemm_variant);
}
