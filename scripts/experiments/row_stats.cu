// Frozen variants of kernels/hybrid.cu's row statistics (the first kernel of kb14::hybrid_rows),
// for scripts/experiments/row_stats.py. The library's kernel takes four rows a block of 256
// threads, each thread striding over k one element at a time, its loads four steps ahead; here
// step by step (the library's before 7f25fe5; two steps ahead, removed after 530b529; the next
// batch's loads first, 25.3-28.9 us against 22.8, removed after 7974810; 16-byte loads in the
// library's layout, 23.3-27.0 against 21.4, removed after 250ce1f: rows of
// results/measurements.csv). The warp variants give each row one warp, 16-byte loads of x
// and of the fp32 vectors (two 16-byte loads of the fp64 column sum), R rows a warp sharing
// each vector element, and the eight warps of a block reading the same vector elements at
// once (L1 serves the seven others). Same sums, in another order of fp64 additions, then the
// library's own epilogue (stats_epilogue).
#include "hybrid.cu"

#include <torch/library.h>

namespace kb14 {
namespace hybrid_cuda {

constexpr int kWarpStatsThreads = 256;

// One warp a row group of R rows; lane l takes k = 4 (l + 32 i) .. +3. K % 4 == 0 and 16-byte rows.
template <int R>
__global__ void __launch_bounds__(kWarpStatsThreads) warp_row_stats_kernel(StatsArgs a, int64_t M) {
  constexpr int kWarps = kWarpStatsThreads / 32;
  const int lane = threadIdx.x % 32;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * R;
  if (row0 >= M) return;
  const int rows = static_cast<int>(M - row0 < R ? M - row0 : R);
  const float4* beta = reinterpret_cast<const float4*>(a.vectors);
  const float4* omega = reinterpret_cast<const float4*>(a.vectors + a.K);
  const float4* beta1 = reinterpret_cast<const float4*>(a.vectors + 2 * a.K);
  const float4* omega1 = reinterpret_cast<const float4*>(a.vectors + 3 * a.K);
  const double2* c = reinterpret_cast<const double2*>(a.colsum);
  double s[R][kSums];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < kSums; ++i) s[r][i] = 0;
  const int64_t vecs = a.K / 4;
#pragma unroll 2
  for (int64_t v = lane; v < vecs; v += 32) {
    const float4 b4 = beta[v], o4 = omega[v], b14 = beta1[v], o14 = omega1[v];
    const double2 c01 = c[2 * v], c23 = c[2 * v + 1];
    const double ck[4] = {c01.x, c01.y, c23.x, c23.y};
    const double bk[4] = {b4.x, b4.y, b4.z, b4.w}, ok[4] = {o4.x, o4.y, o4.z, o4.w};
    const double b1k[4] = {b14.x, b14.y, b14.z, b14.w}, o1k[4] = {o14.x, o14.y, o14.z, o14.w};
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= rows) break;
      const float4 x4 = reinterpret_cast<const float4*>(a.x + (row0 + r) * a.row_stride)[v];
      const double xv[4] = {x4.x, x4.y, x4.z, x4.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const double xe = xv[e], xx = xe * xe;
        s[r][0] += xe;
        s[r][1] += xx;
        s[r][2] = fma(xe, ck[e], s[r][2]);
        s[r][3] = fma(xe, bk[e], s[r][3]);
        s[r][4] = fma(xe, ok[e], s[r][4]);
        s[r][5] = fma(xe, b1k[e], s[r][5]);
        s[r][6] = fma(xe, o1k[e], s[r][6]);
        s[r][7] = fma(xx, ok[e], s[r][7]);
        s[r][8] = fma(xx, o1k[e], s[r][8]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < kSums; ++i)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s[r][i] += __shfl_xor_sync(0xffffffffu, s[r][i], o);
  // Lane r finishes row r (every lane holds every sum after the butterfly).
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (lane == r && r < rows) stats_epilogue(a, row0 + r, s[r]);
}

// The library's kernel before 7f25fe5's batching: one to six loads a step of k, behind branches.
__global__ void __launch_bounds__(kStatsThreads) unbatched_row_stats_kernel(StatsArgs a, int64_t M) {
  constexpr int W = kStatsThreads / 32;
  __shared__ double partial[kStatsRows * kSums * W];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kStatsRows;
  const int rows = static_cast<int>(M - row0 < kStatsRows ? M - row0 : kStatsRows);
  const double* c = a.colsum;
  const float* beta = a.vectors;
  const float* omega = beta + a.K;
  const float* beta1 = omega + a.K;
  const float* omega1 = beta1 + a.K;
  double s[kStatsRows][kSums];
#pragma unroll
  for (int r = 0; r < kStatsRows; ++r)
#pragma unroll
    for (int i = 0; i < kSums; ++i) s[r][i] = 0;
#pragma unroll 4
  for (int64_t k = threadIdx.x; k < a.K; k += kStatsThreads) {
    const double ck = c[k], bk = beta[k], ok = omega[k], b1k = beta1[k], o1k = omega1[k];  // widened once
#pragma unroll
    for (int r = 0; r < kStatsRows; ++r) {
      if (r >= rows) break;
      const double v = a.x[(row0 + r) * a.row_stride + k], vv = v * v;
      s[r][0] += v;
      s[r][1] += vv;
      s[r][2] = fma(v, ck, s[r][2]);
      s[r][3] = fma(v, bk, s[r][3]);
      s[r][4] = fma(v, ok, s[r][4]);
      s[r][5] = fma(v, b1k, s[r][5]);
      s[r][6] = fma(v, o1k, s[r][6]);
      s[r][7] = fma(vv, ok, s[r][7]);
      s[r][8] = fma(vv, o1k, s[r][8]);
    }
  }
#pragma unroll
  for (int r = 0; r < kStatsRows; ++r)
#pragma unroll
    for (int i = 0; i < kSums; ++i) block_sum(s[r][i], partial, r * kSums + i);
  __syncthreads();
  if (threadIdx.x >= rows) return;
  const int64_t row = row0 + threadIdx.x;
  double t[kSums];
#pragma unroll
  for (int i = 0; i < kSums; ++i) {
    t[i] = 0;
    for (int w = 0; w < W; ++w) t[i] += partial[(threadIdx.x * kSums + i) * W + w];
  }
  stats_epilogue(a, row, t);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> row_stats_variant(const at::Tensor& x, const at::Tensor& colsum,
                                                                 const at::Tensor& vectors, const at::Tensor& scalars,
                                                                 double scale, double kappa, double tail_depth,
                                                                 double sigma_factor, double atol, double rtol,
                                                                 int64_t variant) {
  const int64_t M = x.size(0), K = x.size(1);
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.stride(1) == 1 && K % 4 == 0 && x.stride(0) % 4 == 0,
              "row_stats_variant: contiguous fp32 rows of a multiple of 4 columns");
  auto opts = x.options();
  at::Tensor approx = at::empty({M, 1}, opts);
  at::Tensor z = at::empty({2, M}, opts.dtype(at::kDouble));
  double* risk = z.mutable_data_ptr<double>() + M;
  at::Tensor counts = at::empty({2}, opts.dtype(at::kInt));  // the library's kernel zeroes the cut's counters
  StatsArgs s{x.const_data_ptr<float>(), x.stride(0), K, colsum.const_data_ptr<double>(), vectors.const_data_ptr<float>(),
              scalars.const_data_ptr<double>(), scale, kappa, tail_depth, sigma_factor, atol, rtol,
              approx.mutable_data_ptr<float>(), z.mutable_data_ptr<double>(), risk, counts.mutable_data_ptr<int32_t>()};
  auto stream = c10::cuda::getCurrentCUDAStream();
  constexpr int kWarps = kWarpStatsThreads / 32;
  switch (variant) {
    case 0:  // the library's
      row_stats_kernel<<<static_cast<unsigned>(ceil_div(M, kStatsRows)), kStatsThreads, 0, stream>>>(s, M);
      break;
    case 1:
      warp_row_stats_kernel<1><<<static_cast<unsigned>(ceil_div(M, kWarps)), kWarpStatsThreads, 0, stream>>>(s, M);
      break;
    case 2:
      warp_row_stats_kernel<2><<<static_cast<unsigned>(ceil_div(M, 2 * kWarps)), kWarpStatsThreads, 0, stream>>>(s, M);
      break;
    case 4:
      unbatched_row_stats_kernel<<<static_cast<unsigned>(ceil_div(M, kStatsRows)), kStatsThreads, 0, stream>>>(s, M);
      break;
    default: TORCH_CHECK(false, "no such variant");
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {approx, z[0], z[1]};
}

}  // namespace hybrid_cuda
}  // namespace kb14

TORCH_LIBRARY(kb14_row_stats, m) {
  m.def("row_stats_variant(Tensor x, Tensor colsum, Tensor vectors, Tensor scalars, float scale, float kappa, "
        "float tail_depth, float sigma_factor, float atol, float rtol, int variant) -> (Tensor, Tensor, Tensor)");
  m.impl("row_stats_variant", c10::DispatchKey::CUDA, &kb14::hybrid_cuda::row_stats_variant);
}
