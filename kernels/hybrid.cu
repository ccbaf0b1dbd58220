// CUDA kernels of the hybrid model (modelnew.ModelNewHybrid; the arithmetic and the
// error model are described in kernels/hybrid_ops.py, which mirrors them in torch):
//
//   kb14::hybrid_rows(x, vectors, scalars, ...)  per row: the fp64 column-sum answer, the
//       margin of KernelBench's tolerance over the reference's predicted rounding error,
//       and which rows must take the reference's bits (a cut that keeps the union bound
//       of the approximate rows' failure probabilities under a budget); the rows to
//       compute, compacted, and their count, both on the device
//   kb14::rows_gemm(x, W, rows, count)           y = x @ W.T for rows[:count] in cuBLAS's
//       order at the calibrated shapes (one fp32 FMA chain per output, k ascending from
//       zero), zeros in every other row
//   kb14::gemm_order_probe(x, W, r, h, chains, tile, tree)
//       sampled outputs of x @ W.T in one order of the family the calibration tests
//
// Nothing here synchronises with the host: the row count stays on the device, so
// a forward can be captured in a CUDA graph. Compiled with --fmad=false; every FMA
// below is an explicit __fmaf_rn.

#include "cuda_common.cuh"
#include "div_sum_scale.h"

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <limits>

namespace kb14 {
namespace hybrid_cuda {

// ---------------------------------------------------------------------------
// Row statistics: one block per row, fp64 sums of x against the weight's vectors
// (hybrid_ops.WeightStatistics: colsum, beta, omega, beta_last, omega_last).
// ---------------------------------------------------------------------------
constexpr int kStatsThreads = 256;
constexpr int kSums = 9;  // sx, sxx, x.c, x.beta, x.omega, x.beta1, x.omega1, x2.omega, x2.omega1

// Indices of the per-weight scalars (hybrid_ops.SCALARS names them in this order).
enum Scalar {
  kGamma, kGammaLast, kSumBeta, kSumOmega, kSumBetaLast, kSumOmegaLast, kColsumNormSq, kPartialBoundSq, kScalarCount
};

struct StatsArgs {
  const float* x;
  int64_t row_stride, K;
  const double* vectors;  // (5, K): colsum, beta, omega, beta_last, omega_last
  const double* scalars;  // kScalarCount
  double scale;           // scaling_factor / divisor
  double kappa;           // variance of one rounding per squared operand
  double tail_depth;      // additions on each y's way through the tail, plus one
  double sigma_factor;    // safety factor on the predicted standard deviation
  double atol, rtol;
  float* approx;  // (M,) fp32: the column-sum answer, rounded once
  double* z;      // (M,) margin / sigma (-inf: must be exact)
};

__device__ __forceinline__ double block_sum(double v, double* shared, int slot) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[slot * (kStatsThreads / 32) + warp] = v;
  return v;
}

__global__ void __launch_bounds__(kStatsThreads) row_stats_kernel(StatsArgs a) {
  __shared__ double partial[kSums * (kStatsThreads / 32)];
  const int64_t row = blockIdx.x;
  const float* x = a.x + row * a.row_stride;
  const double* c = a.vectors;
  const double* beta = c + a.K;
  const double* omega = beta + a.K;
  const double* beta1 = omega + a.K;
  const double* omega1 = beta1 + a.K;
  double s[kSums] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = threadIdx.x; k < a.K; k += kStatsThreads) {
    const double v = x[k], vv = v * v;
    s[0] += v;
    s[1] += vv;
    s[2] = fma(v, c[k], s[2]);
    s[3] = fma(v, beta[k], s[3]);
    s[4] = fma(v, omega[k], s[4]);
    s[5] = fma(v, beta1[k], s[5]);
    s[6] = fma(v, omega1[k], s[6]);
    s[7] = fma(vv, omega[k], s[7]);
    s[8] = fma(vv, omega1[k], s[8]);
  }
#pragma unroll
  for (int i = 0; i < kSums; ++i) block_sum(s[i], partial, i);
  __syncthreads();
  if (threadIdx.x != 0) return;
  double t[kSums];
#pragma unroll
  for (int i = 0; i < kSums; ++i) {
    t[i] = 0;
    for (int w = 0; w < kStatsThreads / 32; ++w) t[i] += partial[i * (kStatsThreads / 32) + w];
  }
  const double* g = a.scalars;
  const double K = static_cast<double>(a.K);
  const double m = t[0] / K;
  // x = m + d: the mean's part exactly, the rest by the diagonal of the Gram matrix.
  const double gemm = m * m * g[kGamma] + 2 * m * (t[3] - m * g[kSumBeta]) + (t[7] - 2 * m * t[4] + m * m * g[kSumOmega]);
  const double ysq =
      m * m * g[kGammaLast] + 2 * m * (t[5] - m * g[kSumBetaLast]) + (t[8] - 2 * m * t[6] + m * m * g[kSumOmegaLast]);
  const double ysum = t[2];
  const double out = a.scale * ysum;
  const float out32 = __double2float_rn(out);
  a.approx[row] = out32;
  const double var = a.kappa * (a.scale * a.scale * (fmax(gemm, 0.0) + a.tail_depth * (fmax(ysq, 0.0) + ysum * ysum)) +
                                out * out);
  const double sigma = a.sigma_factor * sqrt(var);
  // The fp32 rounding of our answer, and a bound on its fp64 error (Cauchy-Schwarz on sum |x c|).
  const double mag = fabs(static_cast<double>(out32));
  const double half_ulp = mag > 0 ? ldexp(1.0, ilogb(mag) - 24) : ldexp(1.0, -150);
  const double fp64_error = fabs(a.scale) * K * ldexp(1.0, -53) * sqrt(t[1] * g[kColsumNormSq]);
  const double margin = (a.atol + a.rtol * mag) / (1 + a.rtol) - half_ulp - fp64_error;
  // |partial| <= N ||x|| max_h ||W_h||: keep every partial far inside fp32's range, else the exact path.
  const bool in_range = t[1] * g[kPartialBoundSq] < 1e72;
  double z = margin / sigma;
  if (!(margin > 0) || !in_range || !isfinite(out) || isnan(z)) z = -INFINITY;
  a.z[row] = z;
}

// ---------------------------------------------------------------------------
// The cut: the approximate rows are those with z >= t for the smallest t whose union
// bound sum_{z_i >= t} P(|N(0,1)| > z_i) stays within the budget; the rest are
// compacted into rows[0:count] (ascending), followed by the approximate rows.
// One block: M is a batch size, and the block makes the order deterministic.
// ---------------------------------------------------------------------------
constexpr int kSelectThreads = 1024;

__device__ double block_reduce_sum(double v, double* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double total = 0;
  if (threadIdx.x < 32) {
    total = threadIdx.x < kSelectThreads / 32 ? shared[threadIdx.x] : 0.0;
    for (int o = 16; o > 0; o >>= 1) total += __shfl_down_sync(0xffffffffu, total, o);
    if (threadIdx.x == 0) shared[0] = total;
  }
  __syncthreads();
  return shared[0];
}

__global__ void __launch_bounds__(kSelectThreads)
    select_rows_kernel(const double* __restrict__ z, int64_t M, double budget, bool* __restrict__ exact,
                       int32_t* __restrict__ rows, int32_t* __restrict__ count) {
  __shared__ double shared[kSelectThreads / 32];
  __shared__ int32_t scan[kSelectThreads];
  // Bisection on t: the risk above t only falls as t grows; 60 halvings of [0, 64].
  double lo = 0.0, hi = 64.0;
  for (int it = 0; it < 60; ++it) {
    const double t = 0.5 * (lo + hi);
    double risk = 0;
    for (int64_t i = threadIdx.x; i < M; i += kSelectThreads) {
      const double zi = z[i];
      if (zi >= t) risk += erfc(zi * M_SQRT1_2);
    }
    if (block_reduce_sum(risk, shared) <= budget) hi = t; else lo = t;
  }
  const double cut = hi;
  // Compaction, exact rows first, in chunks of one row per thread.
  int32_t base_exact = 0;
  for (int64_t start = 0; start < M; start += kSelectThreads) {
    const int64_t i = start + threadIdx.x;
    const int32_t mine = (i < M && !(z[i] >= cut)) ? 1 : 0;
    __syncthreads();
    scan[threadIdx.x] = mine;
    __syncthreads();
    for (int o = 1; o < kSelectThreads; o <<= 1) {
      const int32_t v = threadIdx.x >= o ? scan[threadIdx.x - o] : 0;
      __syncthreads();
      scan[threadIdx.x] += v;
      __syncthreads();
    }
    if (i < M) {
      exact[i] = mine != 0;
      if (mine) rows[base_exact + scan[threadIdx.x] - 1] = static_cast<int32_t>(i);
    }
    base_exact += scan[kSelectThreads - 1];
  }
  __syncthreads();
  int32_t base_approx = base_exact;
  for (int64_t start = 0; start < M; start += kSelectThreads) {
    const int64_t i = start + threadIdx.x;
    const int32_t mine = (i < M && z[i] >= cut) ? 1 : 0;
    __syncthreads();
    scan[threadIdx.x] = mine;
    __syncthreads();
    for (int o = 1; o < kSelectThreads; o <<= 1) {
      const int32_t v = threadIdx.x >= o ? scan[threadIdx.x - o] : 0;
      __syncthreads();
      scan[threadIdx.x] += v;
      __syncthreads();
    }
    if (mine) rows[base_approx + scan[threadIdx.x] - 1] = static_cast<int32_t>(i);
    base_approx += scan[kSelectThreads - 1];
  }
  if (threadIdx.x == 0) count[0] = base_exact;
}

// ---------------------------------------------------------------------------
// The exact rows' GEMM. A block computes a BM x BN tile of y for BM gathered rows
// (slots rows[bx*BM ...]) and BN columns of W. k runs in slabs of BK through kStages
// shared buffers filled by cp.async (16-byte pieces of 4 consecutive k, kept in that
// form: As[kq][row] holds x[row, 4kq .. 4kq+3]), so that a block with few rows still
// has several slabs in flight. Thread (tr, tc) holds 8 x 8 accumulators, rows tr + i*BM/8
// and columns tc + j*BN/8 (16-byte shared loads that fall on distinct banks). Every
// accumulator is one chain acc = fma(x[r,k], w[h,k], acc) over k = 0, 1, ..., K-1 from
// acc = 0: cuBLAS's order at the calibrated shapes. Blocks past the last gathered row
// write zeros to the rows not gathered.
// ---------------------------------------------------------------------------
template <int BM, int BN, int BK, int kStages>
struct GemmTile {
  static constexpr int kThreads = (BM / 8) * (BN / 8);
  static constexpr int KQ = BK / 4;                       // 16-byte pieces per row per slab
  static constexpr int kAPieces = BM * KQ / kThreads;     // per thread per slab
  static constexpr int kBPieces = BN * KQ / kThreads;
  static constexpr int kSmemBytes = kStages * KQ * (BM + BN) * 16;
  static_assert(BM * KQ % kThreads == 0 && BN * KQ % kThreads == 0, "pieces must divide among threads");
  static_assert(BK % 4 == 0 && kStages >= 2, "slabs of whole pieces, two buffers at least");
};

struct GemmArgs {
  const float* x;
  const float* w;
  float* y;
  const int32_t* rows;
  const int32_t* count;
  int64_t M, N, K, x_stride, w_stride;
};

__device__ __forceinline__ void cp_async16(float4* dst, const float* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Four consecutive k of one row (zeros past K or for a row not gathered).
template <bool kVector>
__device__ __forceinline__ void copy_piece(float4* dst, const float* row, int64_t k, int64_t K, bool valid) {
  if constexpr (kVector) {
    cp_async16(dst, valid ? row + k : row, valid && k < K);  // K % 4 == 0, rows 16-byte aligned
  } else {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (valid) {
      v.x = k < K ? row[k] : 0.f;
      v.y = k + 1 < K ? row[k + 1] : 0.f;
      v.z = k + 2 < K ? row[k + 2] : 0.f;
      v.w = k + 3 < K ? row[k + 3] : 0.f;
    }
    *dst = v;
  }
}

__device__ __forceinline__ float lane(const float4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

template <int BM, int BN, int BK, int kStages, int kMinBlocks, bool kVector>
__global__ void __launch_bounds__(GemmTile<BM, BN, BK, kStages>::kThreads, kMinBlocks) rows_gemm_kernel(GemmArgs a) {
  using Tile = GemmTile<BM, BN, BK, kStages>;
  constexpr int T = Tile::kThreads, KQ = Tile::KQ;
  extern __shared__ float4 smem[];
  float4* As = smem;                        // [stage][KQ][BM]
  float4* Bs = smem + kStages * KQ * BM;    // [stage][KQ][BN]
  const int tid = threadIdx.x;
  // rows is a permutation of 0..M-1 (hybrid_rows'); an index outside it is skipped, never followed.
  const int64_t count = min(max(static_cast<int64_t>(*a.count), int64_t(0)), a.M);
  const int64_t slot0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * BN;
  if (slot0 >= count) {
    // No gathered row here: zero this tile of the rows that are not computed.
    for (int i = tid; i < BM * BN; i += T) {
      const int64_t slot = slot0 + i / BN, h = h0 + i % BN;
      if (slot >= a.M || h >= a.N) continue;
      const int64_t r = a.rows[slot];
      if (r >= 0 && r < a.M) a.y[r * a.N + h] = 0.f;
    }
    return;
  }
  // This thread's pieces of each slab: piece p = tid + i*T is (row p / KQ, k-piece p % KQ).
  const float* a_row[Tile::kAPieces];
  bool a_ok[Tile::kAPieces];
#pragma unroll
  for (int i = 0; i < Tile::kAPieces; ++i) {
    const int64_t slot = slot0 + (tid + i * T) / KQ;
    const int64_t r = slot < count ? a.rows[slot] : -1;
    a_ok[i] = r >= 0 && r < a.M;
    a_row[i] = a.x + (a_ok[i] ? r * a.x_stride : 0);
  }
  const float* b_row[Tile::kBPieces];
  bool b_ok[Tile::kBPieces];
#pragma unroll
  for (int i = 0; i < Tile::kBPieces; ++i) {
    const int64_t h = h0 + (tid + i * T) / KQ;
    b_ok[i] = h < a.N;
    b_row[i] = a.w + (b_ok[i] ? h * a.w_stride : 0);
  }
  const int64_t slabs = (a.K + BK - 1) / BK;
  auto issue = [&](int64_t s) {
    if (s < slabs) {
      const int stage = static_cast<int>(s % kStages);
      const int64_t k0 = s * BK;
#pragma unroll
      for (int i = 0; i < Tile::kAPieces; ++i) {
        const int p = tid + i * T;
        copy_piece<kVector>(&As[(stage * KQ + p % KQ) * BM + p / KQ], a_row[i], k0 + p % KQ * 4, a.K, a_ok[i]);
      }
#pragma unroll
      for (int i = 0; i < Tile::kBPieces; ++i) {
        const int p = tid + i * T;
        copy_piece<kVector>(&Bs[(stage * KQ + p % KQ) * BN + p / KQ], b_row[i], k0 + p % KQ * 4, a.K, b_ok[i]);
      }
    }
    if constexpr (kVector) cp_async_commit();  // every call commits a group, empty or not: the waits count them
  };

  const int tr = tid / (BN / 8), tc = tid % (BN / 8);
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  for (int64_t s = 0; s < slabs; ++s) {
    if constexpr (kVector) cp_async_wait<kStages - 2>();
    __syncthreads();  // slab s is in; every thread is done with the stage the next issue refills
    issue(s + kStages - 1);
    const int stage = static_cast<int>(s % kStages);
#pragma unroll
    for (int kq = 0; kq < KQ; ++kq) {
      const float4* a_p = &As[(stage * KQ + kq) * BM + tr];
      const float4* b_p = &Bs[(stage * KQ + kq) * BN + tc];
      float4 av[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) av[i] = a_p[i * (BM / 8)];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float4 bv = b_p[j * (BN / 8)];
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[i][j] = __fmaf_rn(lane(av[i], kk), lane(bv, kk), acc[i][j]);
      }
    }
  }
  if constexpr (kVector) cp_async_wait<0>();
  // Rows past the count in this tile are not gathered: they get zeros.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t slot = slot0 + tr + i * (BM / 8);
    if (slot >= a.M) continue;
    const bool computed = slot < count;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) continue;
    float* dst = a.y + r * a.N;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t h = h0 + tc + j * (BN / 8);
      if (h < a.N) dst[h] = computed ? acc[i][j] : 0.f;
    }
  }
}

// Launches the kernel of one tile (raising its dynamic shared memory limit once).
template <int BM, int BN, int BK, int kStages, int kMinBlocks>
void launch_rows_gemm(const GemmArgs& a, bool vector, cudaStream_t stream) {
  using Tile = GemmTile<BM, BN, BK, kStages>;
  static const bool raised = [] {
    C10_CUDA_CHECK(cudaFuncSetAttribute(rows_gemm_kernel<BM, BN, BK, kStages, kMinBlocks, true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
    C10_CUDA_CHECK(cudaFuncSetAttribute(rows_gemm_kernel<BM, BN, BK, kStages, kMinBlocks, false>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
    return true;
  }();
  (void)raised;
  const dim3 grid(static_cast<unsigned>(div_up(a.M, BM)), static_cast<unsigned>(div_up(a.N, BN)));
  if (vector) {
    rows_gemm_kernel<BM, BN, BK, kStages, kMinBlocks, true><<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(a);
  } else {
    rows_gemm_kernel<BM, BN, BK, kStages, kMinBlocks, false><<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(a);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------
// The calibration's probe: sampled outputs of x @ W.T in one order of the family
// "S chains over k-tiles of width T, tile t feeding chain t mod S, the chains added
// in order or as a pairwise tree". One thread per sample: slow, and only for samples.
// ---------------------------------------------------------------------------
constexpr int kMaxChains = 16;

__global__ void gemm_order_probe_kernel(const float* __restrict__ x, const float* __restrict__ w, int64_t K,
                                        int64_t x_stride, int64_t w_stride, const int64_t* __restrict__ r,
                                        const int64_t* __restrict__ h, int64_t samples, int chains, int64_t tile,
                                        bool tree, float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= samples) return;
  const float* xr = x + r[i] * x_stride;
  const float* wh = w + h[i] * w_stride;
  float acc[kMaxChains];
  for (int c = 0; c < kMaxChains; ++c) acc[c] = 0.f;
  for (int64_t k = 0; k < K; ++k) {
    const int c = static_cast<int>((k / tile) % chains);
    acc[c] = __fmaf_rn(xr[k], wh[k], acc[c]);
  }
  if (tree) {
    for (int width = 1; width < chains; width *= 2)
      for (int c = 0; c + width < chains; c += 2 * width) acc[c] = __fadd_rn(acc[c], acc[c + width]);
  } else {
    for (int c = 1; c < chains; ++c) acc[0] = __fadd_rn(acc[0], acc[c]);
  }
  out[i] = acc[0];
}

// ---------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------
void check_fp32_cuda_matrix(const at::Tensor& t, const char* what) {
  KB14_CHECK(t.is_cuda(), what, " must be a CUDA tensor, got ", t.device());
  KB14_CHECK_VALUE(t.dim() == 2, what, " must be 2-D, got ", t.dim(), "-D with shape ", t.sizes());
  KB14_CHECK_TYPE(t.scalar_type() == at::kFloat, what, " must be float32, got ", t.scalar_type());
  KB14_CHECK(t.layout() == at::kStrided, what, " must be a dense (strided) tensor");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> hybrid_rows_cuda(
    const at::Tensor& x_in, const at::Tensor& vectors, const at::Tensor& scalars, double scale, double kappa,
    double tail_depth, double sigma_factor, double atol, double rtol, double budget) {
  check_fp32_cuda_matrix(x_in, "hybrid_rows: x");
  const int64_t M = x_in.size(0), K = x_in.size(1);
  KB14_CHECK_VALUE(vectors.dim() == 2 && vectors.size(0) == 5 && vectors.size(1) == K &&
                       vectors.scalar_type() == at::kDouble && vectors.is_contiguous(),
                   "hybrid_rows: vectors must be a contiguous float64 (5, ", K, ") tensor, got ", vectors.sizes());
  KB14_CHECK_VALUE(scalars.dim() == 1 && scalars.size(0) == kScalarCount && scalars.scalar_type() == at::kDouble &&
                       scalars.is_contiguous(),
                   "hybrid_rows: scalars must be a contiguous float64 (", int(kScalarCount), ",) tensor");
  KB14_CHECK(vectors.device() == x_in.device() && scalars.device() == x_in.device(),
             "hybrid_rows: the weight statistics must be on x's device");
  KB14_CHECK_VALUE(M <= std::numeric_limits<int32_t>::max(), "hybrid_rows: too many rows (", M, ")");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.stride(1) == 1 ? x_in : x_in.contiguous();
  auto opts = x.options();
  at::Tensor approx = at::empty({M, 1}, opts);
  at::Tensor exact = at::empty({M}, opts.dtype(at::kBool));
  at::Tensor rows = at::empty({M}, opts.dtype(at::kInt));
  at::Tensor count = at::empty({1}, opts.dtype(at::kInt));
  if (M == 0) return {approx, exact, rows, count.zero_()};
  at::Tensor z = at::empty({M}, opts.dtype(at::kDouble));
  auto stream = c10::cuda::getCurrentCUDAStream();
  StatsArgs s{x.const_data_ptr<float>(), x.stride(0), K, vectors.const_data_ptr<double>(),
              scalars.const_data_ptr<double>(), scale, kappa, tail_depth, sigma_factor, atol, rtol,
              approx.mutable_data_ptr<float>(), z.mutable_data_ptr<double>()};
  row_stats_kernel<<<static_cast<unsigned>(M), kStatsThreads, 0, stream>>>(s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  select_rows_kernel<<<1, kSelectThreads, 0, stream>>>(z.const_data_ptr<double>(), M, budget,
                                                        exact.mutable_data_ptr<bool>(),
                                                        rows.mutable_data_ptr<int32_t>(),
                                                        count.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {approx, exact, rows, count};
}

// The library's tile: BM x BN x BK, stages, blocks per SM its register cap allows
// (the tiles compared: scripts/experiments/gemm_tiles.py, results/kernel_notes.md).
constexpr int kBM = 64, kBN = 128, kBK = 8, kStages = 6, kMinBlocks = 3;

at::Tensor rows_gemm_cuda(const at::Tensor& x_in, const at::Tensor& w_in, const at::Tensor& rows,
                          const at::Tensor& count) {
  check_fp32_cuda_matrix(x_in, "rows_gemm: x");
  check_fp32_cuda_matrix(w_in, "rows_gemm: weight");
  const int64_t M = x_in.size(0), K = x_in.size(1), N = w_in.size(0);
  KB14_CHECK_VALUE(w_in.size(1) == K, "rows_gemm: x has ", K, " columns but the weight has ", w_in.size(1));
  KB14_CHECK_VALUE(rows.dim() == 1 && rows.size(0) == M && rows.scalar_type() == at::kInt,
                   "rows_gemm: rows must be an int32 vector of x's ", M, " rows, got ", rows.sizes());
  KB14_CHECK_VALUE(count.numel() == 1 && count.scalar_type() == at::kInt, "rows_gemm: count must be one int32");
  KB14_CHECK(rows.device() == x_in.device() && count.device() == x_in.device() && w_in.device() == x_in.device(),
             "rows_gemm: x, weight, rows and count must be on one device");
  KB14_CHECK_VALUE(M <= std::numeric_limits<int32_t>::max() && N <= std::numeric_limits<int32_t>::max(),
                   "rows_gemm: too many rows");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.stride(1) == 1 ? x_in : x_in.contiguous();
  const at::Tensor w = w_in.stride(1) == 1 ? w_in : w_in.contiguous();
  const at::Tensor r = rows.is_contiguous() ? rows : rows.contiguous();
  at::Tensor y = at::empty({M, N}, x.options());
  if (M == 0 || N == 0) return y;
  GemmArgs a{x.const_data_ptr<float>(), w.const_data_ptr<float>(), y.mutable_data_ptr<float>(),
             r.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(), M, N, K, x.stride(0), w.stride(0)};
  auto aligned = [](const at::Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0 && t.stride(0) % 4 == 0;
  };
  launch_rows_gemm<kBM, kBN, kBK, kStages, kMinBlocks>(a, K % 4 == 0 && aligned(x) && aligned(w),
                                                       c10::cuda::getCurrentCUDAStream());
  return y;
}

at::Tensor gemm_order_probe_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& r,
                                 const at::Tensor& h, int64_t chains, int64_t tile, bool tree) {
  check_fp32_cuda_matrix(x, "gemm_order_probe: x");
  check_fp32_cuda_matrix(w, "gemm_order_probe: weight");
  KB14_CHECK_VALUE(x.stride(1) == 1 && w.stride(1) == 1, "gemm_order_probe: rows must be contiguous");
  KB14_CHECK_VALUE(x.size(1) == w.size(1), "gemm_order_probe: x and weight differ in columns");
  KB14_CHECK_VALUE(chains >= 1 && chains <= kMaxChains && tile >= 1, "gemm_order_probe: 1 to ", kMaxChains,
                   " chains of tiles of at least one element");
  KB14_CHECK_VALUE(r.scalar_type() == at::kLong && h.scalar_type() == at::kLong && r.numel() == h.numel() &&
                       r.is_contiguous() && h.is_contiguous(),
                   "gemm_order_probe: r and h must be contiguous int64 vectors of one length");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty({r.numel()}, x.options());
  if (r.numel() == 0) return out;
  const int threads = 128;
  gemm_order_probe_kernel<<<static_cast<unsigned>(div_up(r.numel(), threads)), threads, 0,
                            c10::cuda::getCurrentCUDAStream()>>>(
      x.const_data_ptr<float>(), w.const_data_ptr<float>(), x.size(1), x.stride(0), w.stride(0),
      r.const_data_ptr<int64_t>(), h.const_data_ptr<int64_t>(), r.numel(), static_cast<int>(chains), tile, tree,
      out.mutable_data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace hybrid_cuda
}  // namespace kb14
