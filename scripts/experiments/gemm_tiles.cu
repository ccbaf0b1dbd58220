// Frozen variants of kernels/hybrid.cu's rows_gemm kernel, for scripts/experiments/gemm_tiles.py:
// the library's kernel generalised to other tiles and per-thread accumulators (TM x TN), beside the
// library's own two. Uses the library's GemmArgs and load4. The first generalisation (variants 1-4,
// two halves of TM/2 rows) was removed after f1e91db; its figures are rows of results/measurements.csv.
#include "hybrid.cu"

#include <torch/library.h>

namespace kb14 {
namespace hybrid_cuda {

// Tiles narrower in columns, up to 256 rows tall: every gathered row of a small count in one
// row tile, so the computing tiles are few rows wasted, and one per SM. TM x TN accumulators
// a thread, as TM/4 row groups of 4 and TN/4 column groups of 4, each a quarter-tile
// apart (16-byte shared loads). Grid: x = column tile, y = row tile, so that the computing
// tiles (y = 0) are dispatched before the zeroing ones.
template <int BM, int BN, int BK, int TM, int TN>
struct NarrowTile {
  static constexpr int RG = BM / TM, CG = BN / TN;
  static constexpr int kThreads = RG * CG;
  static constexpr int kPad = 4;
  static constexpr int kALoads = BM * BK / 4 / kThreads, kBLoads = BN * BK / 4 / kThreads;
  static_assert(BM * BK / 4 % kThreads == 0 && BN * BK / 4 % kThreads == 0, "loads must divide among threads");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "whole vectors");
};

template <int BM, int BN, int BK, int TM, int TN, int kMinBlocks>
__global__ void __launch_bounds__(NarrowTile<BM, BN, BK, TM, TN>::kThreads, kMinBlocks)
    narrow_rows_gemm_kernel(GemmArgs a) {
  using Tile = NarrowTile<BM, BN, BK, TM, TN>;
  constexpr int T = Tile::kThreads, P = Tile::kPad, RG = Tile::RG, CG = Tile::CG;
  __shared__ __align__(16) float As[2][BK][BM + P];
  __shared__ __align__(16) float Bs[2][BK][BN + P];
  const int tid = threadIdx.x;
  const int64_t count = min(max(static_cast<int64_t>(*a.count), int64_t(0)), a.M);
  if (count < a.min_count || count > a.max_count) return;
  const int64_t slot0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * BN;
  if (slot0 >= count) {
    for (int i = tid; i < BM * BN; i += T) {
      const int64_t slot = slot0 + i / BN, h = h0 + i % BN;
      if (slot >= a.M || h >= a.N) continue;
      const int64_t r = a.rows[slot];
      if (r >= 0 && r < a.M) a.y[r * a.N + h] = 0.f;
    }
    return;
  }
  const float* a_src[Tile::kALoads];
  bool a_ok[Tile::kALoads];
  int a_row[Tile::kALoads], a_k[Tile::kALoads];
#pragma unroll
  for (int i = 0; i < Tile::kALoads; ++i) {
    const int idx = tid + i * T;
    a_row[i] = idx / (BK / 4);
    a_k[i] = idx % (BK / 4) * 4;
    const int64_t slot = slot0 + a_row[i];
    const int64_t r = slot < count ? a.rows[slot] : -1;
    a_ok[i] = r >= 0 && r < a.M;
    a_src[i] = a.x + (a_ok[i] ? r * a.x_stride : 0);
  }
  const float* b_src[Tile::kBLoads];
  bool b_ok[Tile::kBLoads];
  int b_row[Tile::kBLoads], b_k[Tile::kBLoads];
#pragma unroll
  for (int i = 0; i < Tile::kBLoads; ++i) {
    const int idx = tid + i * T;
    b_row[i] = idx / (BK / 4);
    b_k[i] = idx % (BK / 4) * 4;
    b_ok[i] = h0 + b_row[i] < a.N;
    b_src[i] = a.w + (b_ok[i] ? (h0 + b_row[i]) * a.w_stride : 0);
  }
  float4 a_reg[Tile::kALoads], b_reg[Tile::kBLoads];
  auto load_slab = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < Tile::kALoads; ++i) a_reg[i] = load4<true>(a_src[i], k0 + a_k[i], a.K, a_ok[i] && k0 + a_k[i] < a.K);
#pragma unroll
    for (int i = 0; i < Tile::kBLoads; ++i) b_reg[i] = load4<true>(b_src[i], k0 + b_k[i], a.K, b_ok[i] && k0 + b_k[i] < a.K);
  };
  auto store_slab = [&](int buf) {
#pragma unroll
    for (int i = 0; i < Tile::kALoads; ++i) {
      As[buf][a_k[i] + 0][a_row[i]] = a_reg[i].x;
      As[buf][a_k[i] + 1][a_row[i]] = a_reg[i].y;
      As[buf][a_k[i] + 2][a_row[i]] = a_reg[i].z;
      As[buf][a_k[i] + 3][a_row[i]] = a_reg[i].w;
    }
#pragma unroll
    for (int i = 0; i < Tile::kBLoads; ++i) {
      Bs[buf][b_k[i] + 0][b_row[i]] = b_reg[i].x;
      Bs[buf][b_k[i] + 1][b_row[i]] = b_reg[i].y;
      Bs[buf][b_k[i] + 2][b_row[i]] = b_reg[i].z;
      Bs[buf][b_k[i] + 3][b_row[i]] = b_reg[i].w;
    }
  };
  const int tr = tid / CG, tc = tid % CG;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  const int64_t slabs = (a.K + BK - 1) / BK;
  load_slab(0);
  store_slab(0);
  __syncthreads();
  for (int64_t s = 0; s < slabs; ++s) {
    const int buf = static_cast<int>(s & 1);
    if (s + 1 < slabs) load_slab((s + 1) * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float av[TM], bv[TN];
#pragma unroll
      for (int q = 0; q < TM / 4; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(&As[buf][k][q * 4 * RG + tr * 4]);
        av[4 * q] = v.x, av[4 * q + 1] = v.y, av[4 * q + 2] = v.z, av[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int p = 0; p < TN / 4; ++p) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][k][p * 4 * CG + tc * 4]);
        bv[4 * p] = v.x, bv[4 * p + 1] = v.y, bv[4 * p + 2] = v.z, bv[4 * p + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
    }
    if (s + 1 < slabs) store_slab(buf ^ 1);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t slot = slot0 + (i / 4) * 4 * RG + tr * 4 + i % 4;
    if (slot >= a.M) continue;
    const bool computed = slot < count;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) continue;
    float* dst = a.y + r * a.N;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t h = h0 + (j / 4) * 4 * CG + tc * 4 + j % 4;
      if (h < a.N) dst[h] = computed ? acc[i][j] : 0.f;
    }
  }
}

template <int BM, int BN, int BK, int TM, int TN, int kMinBlocks>
void launch_narrow(const GemmArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(div_up(a.N, BN)), static_cast<unsigned>(div_up(a.M, BM)));
  narrow_rows_gemm_kernel<BM, BN, BK, TM, TN, kMinBlocks>
      <<<grid, NarrowTile<BM, BN, BK, TM, TN>::kThreads, 0, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor rows_gemm_variant(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count,
                             int64_t variant) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  at::Tensor y = at::empty({M, N}, x.options());
  GemmArgs a{x.const_data_ptr<float>(), w.const_data_ptr<float>(), y.mutable_data_ptr<float>(),
             rows.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(), M, N, K, x.stride(0), w.stride(0), 0, M};
  auto s = c10::cuda::getCurrentCUDAStream();
  switch (variant) {
    case 0: launch_rows_gemm<128, 128, 16, 1>(a, true, s); break;  // the library's few-rows tile
    case 5: launch_rows_gemm<128, 128, 8, 2>(a, true, s); break;    // the library's many-rows tile
    case 6: launch_narrow<128, 128, 16, 8, 8, 1>(a, s); break;  // the library's tile in this template
    case 7: launch_narrow<192, 64, 16, 12, 4, 1>(a, s); break;
    case 8: launch_narrow<192, 64, 16, 12, 4, 2>(a, s); break;
    case 9: launch_narrow<192, 32, 16, 12, 4, 2>(a, s); break;
    case 10: launch_narrow<256, 64, 16, 8, 8, 1>(a, s); break;
    case 11: launch_narrow<96, 64, 16, 12, 4, 2>(a, s); break;
    case 12: launch_narrow<64, 64, 16, 8, 8, 4>(a, s); break;
    case 13: launch_narrow<128, 64, 16, 8, 8, 2>(a, s); break;
    case 14: launch_narrow<96, 128, 24, 8, 8, 1>(a, s); break;   // 6 warps, 179 rows in two 96-row tiles
    case 15: launch_narrow<192, 64, 12, 8, 8, 1>(a, s); break;   // 6 warps, 179 rows in one 192-row tile
    // One warp per scheduler, 96 accumulators each: 12288 outputs an SM, balanced over its 4 schedulers.
    case 16: launch_narrow<192, 64, 16, 12, 8, 1>(a, s); break;
    case 17: launch_narrow<192, 64, 8, 12, 8, 1>(a, s); break;
    case 18: launch_narrow<96, 64, 16, 12, 8, 2>(a, s); break;   // two 2-warp blocks an SM
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
