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
// below is an explicit __fmaf_rn. No torch headers (the ops: hybrid_cuda.cpp).

#include "fused_reduce_lean.cuh"
#include "hybrid_launch.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace kb14 {
namespace hybrid_cuda {

// ---------------------------------------------------------------------------
// Row statistics: kStatsRows rows a block, fp64 sums of x against the weight's vectors
// (hybrid_ops.WeightStatistics: colsum, beta, omega, beta_last, omega_last).
// ---------------------------------------------------------------------------
constexpr int kStatsThreads = 256;
constexpr int kSums = 9;  // sx, sxx, x.c, x.beta, x.omega, x.beta1, x.omega1, x2.omega, x2.omega1

__device__ __forceinline__ void block_sum(double v, double* shared, int slot) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[slot * (kStatsThreads / 32) + warp] = v;
}

// One row's nine sums to its column-sum answer, z (margin over sigma) and risk.
__device__ __forceinline__ void stats_epilogue(const StatsArgs& a, int64_t row, const double* t) {
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
  a.risk[row] = erfc(z * M_SQRT1_2);  // P(|N(0,1)| > z); 2 for z = -inf
}

constexpr int kStatsRows = 4;   // rows per block: each vector element read once serves them all
constexpr int kStatsBatch = 4;  // steps of k whose loads are issued before their arithmetic

// Each thread adds k = tid, tid + 256, ... of its block's rows. The loads of kStatsBatch steps
// (x of the rows, the vectors) go first, unconditionally (rows past M read the last row, unused):
// one load latency per batch, not per step (46 -> 22 us, row_stats.py).
__global__ void __launch_bounds__(kStatsThreads, 2) row_stats_kernel(StatsArgs a, int64_t M) {
  constexpr int W = kStatsThreads / 32, R = kStatsRows, T = kStatsThreads, U = kStatsBatch;
  __shared__ double partial[R * kSums * W];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const int rows = static_cast<int>(M - row0 < R ? M - row0 : R);
  if (blockIdx.x == 0 && threadIdx.x < 2) a.counts[threadIdx.x] = 0;
  const float* xr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) xr[r] = a.x + (row0 + (r < rows ? r : rows - 1)) * a.row_stride;
  const float* beta = a.vectors;
  const float* omega = beta + a.K;
  const float* beta1 = omega + a.K;
  const float* omega1 = beta1 + a.K;
  double s[R][kSums];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < kSums; ++i) s[r][i] = 0;
  const auto add = [&](const float (&xv)[R], double ck, double bk, double ok, double b1k, double o1k) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const double v = xv[r], vv = v * v;
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
  };
  int64_t k = threadIdx.x;
  for (; k + (U - 1) * T < a.K; k += U * T) {
    float xv[U][R], bk[U], ok[U], b1k[U], o1k[U];
    double ck[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t ku = k + u * T;
#pragma unroll
      for (int r = 0; r < R; ++r) xv[u][r] = __ldg(xr[r] + ku);
      ck[u] = __ldg(a.colsum + ku);
      bk[u] = __ldg(beta + ku);
      ok[u] = __ldg(omega + ku);
      b1k[u] = __ldg(beta1 + ku);
      o1k[u] = __ldg(omega1 + ku);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) add(xv[u], ck[u], bk[u], ok[u], b1k[u], o1k[u]);
  }
  for (; k < a.K; k += T) {
    float xv[R];
#pragma unroll
    for (int r = 0; r < R; ++r) xv[r] = xr[r][k];
    add(xv, a.colsum[k], beta[k], omega[k], beta1[k], omega1[k]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < kSums; ++i) block_sum(s[r][i], partial, r * kSums + i);
  __syncthreads();
  if (threadIdx.x >= rows) return;
  double t[kSums];
#pragma unroll
  for (int i = 0; i < kSums; ++i) {
    t[i] = 0;
    for (int w = 0; w < W; ++w) t[i] += partial[(threadIdx.x * kSums + i) * W + w];
  }
  stats_epilogue(a, row0 + threadIdx.x, t);
}

// ---------------------------------------------------------------------------
// The cut: row i keeps the column-sum answer when the risks of the rows at least as safe
// (z_j >= z_i, i itself included) add up to at most the budget; so the kept rows' summed
// risk, a union bound on any of them failing, is within the budget. One warp a row sums
// over every row (M is a batch size) in a fixed order, from z and risk staged in shared
// memory by the block (each lane read them from L2 at f61892a); the last block to finish files
// the rows: rows[0:count] to compute (ascending), the kept rows from the end (descending).
// (A compaction kernel of its own cost 3.4 us and a launch.)
// ---------------------------------------------------------------------------
constexpr int kCutThreads = 256;

// Block-wide, deterministic: exact rows to rows[0, n) ascending, the others to rows[M - 1], rows[M - 2], ...
// Four flags a thread (one 4-byte load, past L1: other blocks wrote them), a scan of the counts a chunk.
__device__ void file_rows(const bool* exact, int64_t M, int32_t* rows, int32_t* count) {
  constexpr int W = kCutThreads / 32, kChunk = 4 * kCutThreads;
  __shared__ int32_t warp_exact[W];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned char* flags = reinterpret_cast<const unsigned char*>(exact);
  int64_t n_exact = 0;  // exact rows before this chunk
  for (int64_t start = 0; start < M; start += kChunk) {
    const int64_t i0 = start + 4 * threadIdx.x;  // a multiple of 4: the tensor's storage is aligned
    uint32_t f = 0;                               // byte e: row i0 + e is exact
    if (i0 + 3 < M) {
      f = __ldcg(reinterpret_cast<const unsigned int*>(flags + i0));
    } else {
      for (int e = 0; e < 4; ++e)
        if (i0 + e < M) f |= uint32_t(__ldcg(flags + i0 + e) != 0) << (8 * e);
    }
    const int mine = __popc(f & 0x01010101u);
    int incl = mine;  // this thread's and the lower lanes' exact rows
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    if (lane == 31) warp_exact[warp] = incl;
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < W; ++w) {
      before += w < warp ? warp_exact[w] : 0;
      total += warp_exact[w];
    }
    int64_t exact_before = n_exact + before + incl - mine;  // exact rows before row i0
    for (int e = 0; e < 4; ++e) {
      const int64_t i = i0 + e;
      if (i >= M) break;
      if ((f >> (8 * e)) & 1u) rows[exact_before++] = static_cast<int32_t>(i);
      else rows[M - 1 - (i - exact_before)] = static_cast<int32_t>(i);  // kept rows before i: i - exact_before
    }
    n_exact += total;
    __syncthreads();  // warp_exact is rewritten by the next chunk
  }
  if (threadIdx.x == 0) *count = static_cast<int32_t>(n_exact);
}

constexpr int kCutStage = 1024;  // rows of z and risk a block stages in shared memory at a time (16 KB)

__global__ void __launch_bounds__(kCutThreads)
    cut_kernel(const double* __restrict__ z, const double* __restrict__ risk, int64_t M, double budget,
               bool* __restrict__ exact, int32_t* __restrict__ rows, int32_t* __restrict__ counts) {
  __shared__ double z_stage[kCutStage], risk_stage[kCutStage];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (kCutThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const double zi = i < M ? z[i] : 0.0;
  double above = 0;  // lane's sum over j = lane, lane + 32, ... (stages are whole multiples of 32)
  for (int64_t start = 0; start < M; start += kCutStage) {
    const int n = static_cast<int>(M - start < kCutStage ? M - start : kCutStage);
    __syncthreads();  // the previous stage is read
    for (int j = threadIdx.x; j < n; j += kCutThreads) z_stage[j] = z[start + j], risk_stage[j] = risk[start + j];
    __syncthreads();
    if (i < M)
      for (int j = lane; j < n; j += 32) above += z_stage[j] >= zi ? risk_stage[j] : 0.0;
  }
  if (i < M) {
    for (int o = 16; o > 0; o >>= 1) above += __shfl_down_sync(0xffffffffu, above, o);
    if (lane == 0) exact[i] = !(zi > -INFINITY && above <= budget);
  }
  __shared__ bool last;
  __threadfence();  // this block's flags are visible before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&counts[1], 1) == static_cast<int32_t>(gridDim.x) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  file_rows(exact, M, rows, &counts[0]);
}

// ---------------------------------------------------------------------------
// The exact rows' GEMM. A block computes a BM x BN tile of y for BM gathered rows
// (slots rows[by*BM ...]) and BN columns of W, k in slabs of BK through two shared
// buffers (the next slab's global loads in flight during this slab's FMAs). Each
// thread holds TM x TN accumulators, as TM/4 row groups and TN/4 column groups of 4,
// spread evenly over the tile (BM / (TM / 4) rows apart): 16-byte shared loads, no bank
// conflicts. Every accumulator is one chain acc = fma(x[r,k], w[h,k], acc) over
// k = 0, 1, ..., K-1 from acc = 0: cuBLAS's order at the calibrated shapes.
// Two tiles are launched, each running only when the row count (on the device) is in
// its range; both write zeros to the rows not gathered (kb14::rows_gemm's contract), unless
// zero_others is off (hybrid_forward, whose gathered tail reads no other row).
// ---------------------------------------------------------------------------
template <int BM, int BN, int BK, int TM, int TN>
struct GemmTile {
  static constexpr int RG = BM / TM, CG = BN / TN;  // thread rows and columns
  static constexpr int kThreads = RG * CG;
  static constexpr int kPad = 4;  // shared rows BM+4, BN+4 floats: the transposed stores spread over banks
  static constexpr int kALoads = BM * BK / 4 / kThreads;  // 4-element loads per thread per slab
  static constexpr int kBLoads = BN * BK / 4 / kThreads;
  static_assert(BM * BK / 4 % kThreads == 0 && BN * BK / 4 % kThreads == 0, "loads must divide among threads");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "whole vectors");
};

template <bool kVector>
__device__ __forceinline__ float4 load4(const float* p, int64_t k, int64_t K, bool valid) {
  if (!valid) return make_float4(0.f, 0.f, 0.f, 0.f);
  if constexpr (kVector) {
    return *reinterpret_cast<const float4*>(p + k);  // K % 4 == 0, rows 16-byte aligned
  } else {
    float4 v;
    v.x = k < K ? p[k] : 0.f;
    v.y = k + 1 < K ? p[k + 1] : 0.f;
    v.z = k + 2 < K ? p[k + 2] : 0.f;
    v.w = k + 3 < K ? p[k + 3] : 0.f;
    return v;
  }
}

// Whether this launch computes the row count (hybrid_rows' count, clamped to [0, M], in
// [min_count, max_count]; else another tile's launch has it), and the count.
__device__ __forceinline__ bool launch_takes_count(const GemmArgs& a, int64_t& count) {
  count = min(max(static_cast<int64_t>(*a.count), int64_t(0)), a.M);
  return count >= a.min_count && count <= a.max_count;
}

// Zeros for the rows not gathered, BN columns from h0, kRows slots a round (a 4-column store a
// thread). The one-row-tile launch spreads its passes over the k loop, behind the FMAs.
template <int BN, int T>
struct ZeroPass {
  static constexpr int kVecs = BN / 4, kRows = T / kVecs;
  static_assert(T % kVecs == 0, "whole rows a round");
  __device__ static int64_t passes(const GemmArgs& a, int64_t count) {
    return a.zero_others ? (a.M - count + kRows - 1) / kRows : 0;
  }
  __device__ static void store(const GemmArgs& a, int64_t count, int64_t h0, int64_t step, int tid) {
    const int64_t slot = count + step * kRows + tid / kVecs, h = h0 + (tid % kVecs) * 4;
    if (slot >= a.M || h >= a.N) return;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) return;
    float* dst = a.y + r * a.N + h;
    if (a.N % 4 == 0) {
      *reinterpret_cast<float4*>(dst) = make_float4(0.f, 0.f, 0.f, 0.f);  // y is fresh: 16-byte aligned rows
    } else {
      for (int j = 0; j < 4 && h + j < a.N; ++j) dst[j] = 0.f;
    }
  }
};

// The tile of slots slot0.. and columns h0.. . kOneRowTile: a grid of one row tile (counts up to BM)
// whose blocks also zero every other row.
template <int BM, int BN, int BK, int TM, int TN, bool kVector, bool kOneRowTile>
__device__ __forceinline__ void rows_gemm_tile(const GemmArgs& a, int64_t count, int64_t slot0, int64_t h0,
                                               float (&As)[2][BK][BM + GemmTile<BM, BN, BK, TM, TN>::kPad],
                                               float (&Bs)[2][BK][BN + GemmTile<BM, BN, BK, TM, TN>::kPad]) {
  using Tile = GemmTile<BM, BN, BK, TM, TN>;
  using Zero = ZeroPass<BN, Tile::kThreads>;
  constexpr int T = Tile::kThreads, RG = Tile::RG, CG = Tile::CG;
  const int tid = threadIdx.x;
  // rows is a permutation of 0..M-1 (hybrid_rows'); an index outside it is skipped, never followed.
  if (slot0 >= count) {
    if constexpr (kOneRowTile) {  // no row gathered
      for (int64_t p = 0; p < Zero::passes(a, count); ++p) Zero::store(a, count, h0, p, tid);
      return;
    }
    // No gathered row here: zero this tile of the rows that are not computed.
    if (!a.zero_others) return;
    for (int i = tid; i < BM * BN; i += T) {
      const int64_t slot = slot0 + i / BN, h = h0 + i % BN;
      if (slot >= a.M || h >= a.N) continue;
      const int64_t r = a.rows[slot];
      if (r >= 0 && r < a.M) a.y[r * a.N + h] = 0.f;
    }
    return;
  }
  // What this thread loads: element (row, k4 .. k4+3) of the A and B slabs.
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
    for (int i = 0; i < Tile::kALoads; ++i) a_reg[i] = load4<kVector>(a_src[i], k0 + a_k[i], a.K, a_ok[i] && k0 + a_k[i] < a.K);
#pragma unroll
    for (int i = 0; i < Tile::kBLoads; ++i) b_reg[i] = load4<kVector>(b_src[i], k0 + b_k[i], a.K, b_ok[i] && k0 + b_k[i] < a.K);
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

  const int64_t zero_passes = kOneRowTile ? Zero::passes(a, count) : 0;
  const int64_t slabs = (a.K + BK - 1) / BK;
  load_slab(0);
  store_slab(0);
  __syncthreads();
  for (int64_t s = 0; s < slabs; ++s) {
    const int buf = static_cast<int>(s & 1);
    if (s + 1 < slabs) load_slab((s + 1) * BK);
    if constexpr (kOneRowTile) {
      if (s < zero_passes) Zero::store(a, count, h0, s, tid);
    }
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
  if constexpr (kOneRowTile) {
    for (int64_t p = slabs; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
  }
  // Rows past the count in this tile are not gathered: they get zeros.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t slot = slot0 + ((i / 4) * 4 * RG + tr * 4 + i % 4);
    if (slot >= a.M) continue;
    const bool computed = slot < count;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) continue;
    float* dst = a.y + r * a.N;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t h = h0 + ((j / 4) * 4 * CG + tc * 4 + j % 4);
      if (h < a.N) dst[h] = computed ? acc[i][j] : 0.f;
    }
  }
}

// A block computes its tile (one row tile), or every gridDim.x-th tile in row-tile order (a grid of
// at most a block an SM: its launch costs one wave when the count is another tile's; 512 blocks
// cost 2.6 us at f61892a, 132 1.5 at 33c6c2a).
template <int BM, int BN, int BK, int TM, int TN, int kMinBlocks, bool kVector, bool kOneRowTile>
__global__ void __launch_bounds__(GemmTile<BM, BN, BK, TM, TN>::kThreads, kMinBlocks) rows_gemm_kernel(GemmArgs a) {
  constexpr int P = GemmTile<BM, BN, BK, TM, TN>::kPad;
  __shared__ __align__(16) float As[2][BK][BM + P];
  __shared__ __align__(16) float Bs[2][BK][BN + P];
  int64_t count;
  if (!launch_takes_count(a, count)) return;
  if constexpr (kOneRowTile) {
    rows_gemm_tile<BM, BN, BK, TM, TN, kVector, true>(a, count, 0, static_cast<int64_t>(blockIdx.x) * BN, As, Bs);
  } else {
    const int64_t tiles_x = (a.N + BN - 1) / BN, tiles = tiles_x * ((a.M + BM - 1) / BM);
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
      rows_gemm_tile<BM, BN, BK, TM, TN, kVector, false>(a, count, t / tiles_x * BM, t % tiles_x * BN, As, Bs);
      __syncthreads();  // the next tile's first stores wait for this one's last reads
    }
  }
}

// The one-row tile where every slab is whole (K % 32 == 0, N % BN == 0, 16-byte rows): 12x4 on
// 8 warps, each slab stored transposed, one shared row per k, so that an LDS.128 gives 4 rows (or
// columns) at one k in registers of alternating banks (a float4 of 4 k put every operand of a k in
// one bank: dispatch stalls). Fed through registers: the next slab's 16-byte loads are stored as 4
// floats into the other of two buffers at k = 4 of this slab, and the slab after it is loaded right
// behind (a warp waiting on its loads then waits where the others issue, not at the barrier); shared
// row k 4 ((k / 4) % 8) floats late so that a warp's stores fall on 32 banks. The next slab's
// barrier and first fragments come inside this slab's last k. A thread's rows q*4*RG + tr*4 + 0..3
// (lanes paired: 2-wavefront loads), columns tc*4 + 0..3; FFMAs in 2x2 blocks. Timings in
// results/kernel_notes.md.
template <int BM, int BN, int TM, int TN>
struct WholeSlabTile {
  static constexpr int BK = 32, RG = BM / TM, CG = BN / TN, kThreads = RG * CG;
  static constexpr int kStoreAt = 4;  // the k of a slab that stores the next (gemm_tiles: 0.575 ms at 179 rows, 0.610 at k = 31)
  static constexpr int kAFloats = BK * BM + 32, kBufFloats = kAFloats + BK * BN + 32;  // + the skew
  static constexpr int kSmemBytes = 2 * kBufFloats * static_cast<int>(sizeof(float));
  static constexpr int kALoads = BM * BK / 4 / kThreads, kBLoads = BN * BK / 4 / kThreads;
  static_assert(BM * BK / 4 % kThreads == 0 && BN * BK / 4 % kThreads == 0 && BM % 32 == 0 && BN % 32 == 0,
                "whole rounds, 32-bank rows");
  static_assert(TM % 4 == 0 && TN == 4, "12x4-like tiles");
  static_assert(RG % 4 == 0 && CG % 8 == 0 && (RG / 4) * (CG / 8) * 32 == kThreads, "paired lanes: 4x8 a warp");
};

template <int BM, int BN, int TM, int TN>
__global__ void __launch_bounds__(WholeSlabTile<BM, BN, TM, TN>::kThreads, 1) whole_slab_rows_gemm_kernel(GemmArgs a) {
  using Tile = WholeSlabTile<BM, BN, TM, TN>;
  constexpr int BK = Tile::BK, RG = Tile::RG, T = Tile::kThreads, kStoreAt = Tile::kStoreAt;
  constexpr int kAFloats = Tile::kAFloats, kBufFloats = Tile::kBufFloats, kALoads = Tile::kALoads, kBLoads = Tile::kBLoads;
  using Zero = ZeroPass<BN, T>;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int64_t count;
  if (!launch_takes_count(a, count)) return;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t zero_passes = Zero::passes(a, count);
  if (count == 0) {
    for (int64_t p = 0; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
    return;
  }
  const int k4 = (tid % 8) * 4;  // this thread's 4 k of a slab; its rows tid / 8 + 32 i
  const float* a_src[kALoads];
  bool a_ok[kALoads];
#pragma unroll
  for (int i = 0; i < kALoads; ++i) {
    const int slot = tid / 8 + i * (T / 8);
    const int64_t row = slot < count ? a.rows[slot] : -1;
    a_ok[i] = row >= 0 && row < a.M;
    a_src[i] = a.x + (a_ok[i] ? row * a.x_stride : 0) + k4;
  }
  const float* b_src[kBLoads];
#pragma unroll
  for (int i = 0; i < kBLoads; ++i) b_src[i] = a.w + (h0 + tid / 8 + i * (T / 8)) * a.w_stride + k4;
  float4 a_reg[kALoads], b_reg[kBLoads];
  auto load_slab = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i)
      a_reg[i] = a_ok[i] ? *reinterpret_cast<const float4*>(a_src[i] + k0) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) b_reg[i] = *reinterpret_cast<const float4*>(b_src[i] + k0);
  };
  constexpr auto row_at = [](int k, int S) { return k * S + 4 * ((k / 4) % 8); };  // shared row k's first float
  const int skew = 4 * (k4 / 4 % 8);
  auto store_slab = [&](float* buf) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      float* d = buf + k4 * BM + skew + tid / 8 + i * (T / 8);
      d[0] = a_reg[i].x, d[BM] = a_reg[i].y, d[2 * BM] = a_reg[i].z, d[3 * BM] = a_reg[i].w;
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      float* d = buf + kAFloats + k4 * BN + skew + tid / 8 + i * (T / 8);
      d[0] = b_reg[i].x, d[BN] = b_reg[i].y, d[2 * BN] = b_reg[i].z, d[3 * BN] = b_reg[i].w;
    }
  };
  const int tr = (lane & 1) | ((lane >> 4) & 1) << 1 | (warp % (RG / 4)) << 2;
  const int tc = ((lane >> 1) & 7) | (warp / (RG / 4)) << 3;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  auto load_fragments = [&](const float* buf, int k, float (&av)[TM], float (&bv)[TN]) {
    const float* As = buf + row_at(k, BM) + tr * 4;
    const float* Bs = buf + kAFloats + row_at(k, BN) + tc * 4;
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(As + q * 4 * RG);
      av[4 * q] = v.x, av[4 * q + 1] = v.y, av[4 * q + 2] = v.z, av[4 * q + 3] = v.w;
    }
    const float4 v = *reinterpret_cast<const float4*>(Bs);
    bv[0] = v.x, bv[1] = v.y, bv[2] = v.z, bv[3] = v.w;
  };
  auto fma_fragments = [&](const float (&av)[TM], const float (&bv)[TN]) {
#pragma unroll
    for (int ip = 0; ip < TM / 2; ++ip)
#pragma unroll
      for (int jj = 0; jj < TN / 2; ++jj) {
        const int jp = ip & 1 ? TN / 2 - 1 - jj : jj;
#pragma unroll
        for (int di = 0; di < 2; ++di)
#pragma unroll
          for (int dj = 0; dj < 2; ++dj) {
            const int i = 2 * ip + di, j = 2 * jp + dj;
            acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
          }
      }
  };
  const int slabs = static_cast<int>(a.K / BK);
  float* buf = smem;
  load_slab(0);
  store_slab(buf);
  if (slabs > 1) load_slab(BK);
  __syncthreads();
  float av[2][TM], bv[2][TN];
  load_fragments(buf, 0, av[0], bv[0]);
  for (int s = 0; s < slabs; ++s) {
    if (s < zero_passes) Zero::store(a, count, h0, s, tid);
    float* other = buf == smem ? smem + kBufFloats : smem;  // last read in slab s - 1, before its barrier
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const int cur = k & 1;
      if (k == kStoreAt && s + 1 < slabs) {
        store_slab(other);
        if (s + 2 < slabs) load_slab(static_cast<int64_t>(s + 2) * BK);
      }
      if (k + 1 < BK) {
        load_fragments(buf, k + 1, av[cur ^ 1], bv[cur ^ 1]);
      } else {
        __syncthreads();
        buf = other;
        if (s + 1 < slabs) load_fragments(buf, 0, av[cur ^ 1], bv[cur ^ 1]);
      }
      fma_fragments(av[cur], bv[cur]);
    }
  }
  for (int64_t p = slabs; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int slot = (i / 4) * 4 * RG + tr * 4 + i % 4;
    if (slot >= a.M) continue;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) continue;
    const float4 v = slot < count ? make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]) : make_float4(0.f, 0.f, 0.f, 0.f);
    *reinterpret_cast<float4*>(a.y + r * a.N + h0 + tc * 4) = v;
  }
}


// A tile of the launch plan: BM x BN x BK, TM x TN accumulators a thread, blocks an SM its
// register cap allows, and whether its grid is one row tile.
template <int BM_, int BN_, int BK_, int TM_, int TN_, int kMinBlocks_, bool kOneRowTile_>
struct TileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_, kMinBlocks = kMinBlocks_;
  static constexpr bool kOneRowTile = kOneRowTile_;
};

template <class C>
cudaError_t launch_tile(const GemmArgs& a, bool vector, int device, cudaStream_t stream) {
  if (a.min_count > a.max_count) return cudaSuccess;  // no count reaches this tile
  constexpr int threads = GemmTile<C::BM, C::BN, C::BK, C::TM, C::TN>::kThreads;
  // A block a row tile, or at most a block an SM walking every tile (the computing ones first).
  DeviceShape gpu;
  if (const cudaError_t err = query_device_shape(device, &gpu); err != cudaSuccess) return err;
  const int64_t tiles = ceil_div(a.N, C::BN) * ceil_div(a.M, C::BM);
  const int64_t resident = int64_t(C::kMinBlocks) * gpu.multiprocessors;
  const unsigned grid = static_cast<unsigned>(C::kOneRowTile ? ceil_div(a.N, C::BN) : std::min(tiles, resident));
  if (vector) {
    rows_gemm_kernel<C::BM, C::BN, C::BK, C::TM, C::TN, C::kMinBlocks, true, C::kOneRowTile><<<grid, threads, 0, stream>>>(a);
  } else {
    rows_gemm_kernel<C::BM, C::BN, C::BK, C::TM, C::TN, C::kMinBlocks, false, C::kOneRowTile><<<grid, threads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

// The one-row tile C without bounds checks; the caller has checked that every slab is whole.
// static: its opt-in flags are this module's (a template's statics are otherwise one object across
// every module loaded, GNU unique symbols: an exported file's kernel went without the opt-in).
// No lock: racing threads opt in twice, harmlessly; a failed opt-in is tried again by the next call.
template <class C>
static cudaError_t launch_whole_slabs(const GemmArgs& a, int device, cudaStream_t stream) {
  static_assert(C::kOneRowTile, "one row tile");
  using Tile = WholeSlabTile<C::BM, C::BN, C::TM, C::TN>;
  auto kernel = whole_slab_rows_gemm_kernel<C::BM, C::BN, C::TM, C::TN>;
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> opted_in[kMaxDevices];  // into more than 48 KB of dynamic shared memory, per device
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (!opted_in[device].load(std::memory_order_acquire)) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes);
    if (err != cudaSuccess) return err;
    opted_in[device].store(true, std::memory_order_release);
  }
  kernel<<<static_cast<unsigned>(a.N / C::BN), Tile::kThreads, Tile::kSmemBytes, stream>>>(a);
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// The calibration's probe: sampled outputs of x @ W.T in one order of the family
// "S chains over k-tiles of width T, tile t feeding chain t mod S, the chains added
// in order or as a pairwise tree". One thread per sample: slow, and only for samples.
// ---------------------------------------------------------------------------
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
// Launchers (hybrid_launch.h); the checks, tensors and errors are the glue's (hybrid_cuda.cpp).
// ---------------------------------------------------------------------------
cudaError_t launch_hybrid_rows(const StatsArgs& s, int64_t M, double budget, bool* exact, int32_t* rows,
                               cudaStream_t stream) {
  row_stats_kernel<<<static_cast<unsigned>(ceil_div(M, kStatsRows)), kStatsThreads, 0, stream>>>(s, M);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  cut_kernel<<<static_cast<unsigned>(ceil_div(M, kCutThreads / 32)), kCutThreads, 0, stream>>>(
      s.z, s.risk, M, budget, exact, rows, s.counts);
  return cudaGetLastError();
}

// The library's two tiles and the row counts each takes: scripts/experiments/gemm_tiles.py
// measured them against the others (results/kernel_notes.md, "The hybrid"). Few rows: one
// 192 x 64 row tile, 8 warps of 12 x 4, a block an SM for 8192 columns (0.735 ms at 179 rows
// against 0.783 for 128 x 128, H200; on an H100, whole slabs transposed through registers 0.604
// against 0.672 for cp.async into swizzled rows, 0.575 stored early in a slab); more: 128 x 128
// tiles (a tile of 2 an SM was 3% faster at every row, but its empty launch cost each forward more).
using FewRows = TileConfig<192, 64, 16, 12, 4, 1, true>;
using MoreRows = TileConfig<128, 128, 16, 8, 8, 1, false>;

cudaError_t launch_rows_gemm(GemmArgs a, int device, cudaStream_t stream) {
  if (a.M == 0 || a.N == 0) return cudaSuccess;
  const auto aligned = [](const float* p, int64_t stride) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && stride % 4 == 0;
  };
  const bool vector = a.K % 4 == 0 && aligned(a.x, a.x_stride) && aligned(a.w, a.w_stride);
  a.min_count = 0;
  a.max_count = FewRows::BM;
  using FewRowsSlab = WholeSlabTile<FewRows::BM, FewRows::BN, FewRows::TM, FewRows::TN>;
  // Its prologue reads a first slab (K > 0) and its slab count is an int.
  const bool whole_slabs = vector && a.K > 0 && a.K % FewRowsSlab::BK == 0 && a.K < (int64_t(1) << 31) &&
                           a.N % FewRows::BN == 0;
  const cudaError_t err = whole_slabs ? launch_whole_slabs<FewRows>(a, device, stream)
                                      : launch_tile<FewRows>(a, vector, device, stream);
  if (err != cudaSuccess) return err;
  a.min_count = FewRows::BM + 1;
  a.max_count = a.M;
  return launch_tile<MoreRows>(a, vector, device, stream);
}

cudaError_t gathered_tail_plan(int64_t M, int64_t N, int64_t row_stride, const float* y, double divisor,
                               int device, tail::Config* plan, bool* gathered) {
  DeviceShape gpu;
  if (const cudaError_t err = query_device_shape(device, &gpu); err != cudaSuccess) return err;
  *plan = tail::dispatch({TailDtype::kFloat, M, N, row_stride, 1, reinterpret_cast<uintptr_t>(y), divisor, gpu,
                          KB14_TORCH_VERSION, false});
  *gathered = plan->leaf == tail::Leaf::kBlockRowsOneChunk || plan->leaf == tail::Leaf::kBlockRows;
  return cudaSuccess;
}

template <bool kExactRows, bool kShifted>
cudaError_t launch_gathered_rows(const tail::LeanArgs<float>& a, int64_t M, cudaStream_t stream) {
  constexpr int V = tail::kInputVec<float>;
  tail::lean_rows_kernel<float, V, tail::lean_row_loads(V), false, kShifted, false, kExactRows, tail::kLeanBlock,
                         tail::kLeanBlocksPerSm, false, true><<<static_cast<unsigned>(M), tail::kLeanBlock, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_gathered_tail(const tail::Config& plan, const float* y, int64_t M, int64_t N, int64_t row_stride,
                                 float* out, int64_t out_stride, double divisor, double scaling_factor,
                                 const int32_t* rows, const int32_t* count, cudaStream_t stream) {
  const tail::Args<float> g = tail::planned_args<float>(plan.plan, y, row_stride, 1, out, out_stride, divisor,
                                                        scaling_factor, nullptr);
  const tail::LeanArgs<float> a{g.y, g.row_stride, g.out, g.out_stride, static_cast<int>(M), static_cast<int>(N),
                                g.inv, g.scale, 0, rows, count};
  if (plan.leaf == tail::Leaf::kBlockRowsOneChunk) return launch_gathered_rows<true, false>(a, M, stream);
  if (plan.shifted) return launch_gathered_rows<false, true>(a, M, stream);
  return launch_gathered_rows<false, false>(a, M, stream);
}

cudaError_t launch_gemm_order_probe(const float* x, const float* w, int64_t K, int64_t x_stride, int64_t w_stride,
                                    const int64_t* r, const int64_t* h, int64_t samples, int chains, int64_t tile,
                                    bool tree, float* out, cudaStream_t stream) {
  if (samples == 0) return cudaSuccess;
  const int threads = 128;
  gemm_order_probe_kernel<<<static_cast<unsigned>(ceil_div(samples, threads)), threads, 0, stream>>>(
      x, w, K, x_stride, w_stride, r, h, samples, chains, tile, tree, out);
  return cudaGetLastError();
}

}  // namespace hybrid_cuda
}  // namespace kb14
