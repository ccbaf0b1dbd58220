// Between the hybrid ops' torch glue (hybrid_cuda.cpp, host compiler, torch headers) and their
// kernels' launchers (hybrid.cu, nvcc, no torch headers), so that the two compile in parallel.
#pragma once

#include "fused_reduce_dispatch.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace kb14 {
namespace hybrid_cuda {
// Indices of the per-weight scalars (hybrid_ops.SCALARS names them in this order).
enum Scalar {
  kGamma, kGammaLast, kSumBeta, kSumOmega, kSumBetaLast, kSumOmegaLast, kColsumNormSq, kPartialBoundSq, kScalarCount
};

struct StatsArgs {
  const float* x;
  int64_t row_stride, K;
  const double* colsum;   // (K,) fp64: the answer's own dot product
  const float* vectors;   // (4, K): beta, omega, beta_last, omega_last (the error model: fp32 is plenty)
  const double* scalars;  // kScalarCount
  double scale;           // scaling_factor / divisor
  double kappa;           // variance of one rounding per squared operand
  double tail_depth;      // additions on each y's way through the tail, plus one
  double sigma_factor;    // safety factor on the predicted standard deviation
  double atol, rtol;
  float* approx;  // (M,) fp32: the column-sum answer, rounded once
  double* z;      // (M,) margin / sigma (-inf: must be exact)
  double* risk;   // (M,) P(|N(0,1)| > z)
  int32_t* counts;  // (2,) the cut's: rows to compute, blocks done (zeroed here)
};

// kb14::hybrid_rows: each row's statistics (approx, z, risk), then the cut (exact, rows, counts).
cudaError_t launch_hybrid_rows(const StatsArgs& s, int64_t M, double budget, bool* exact, int32_t* rows,
                               cudaStream_t stream);

struct GemmArgs {
  const float* x;
  const float* w;
  float* y;
  const int32_t* rows;
  const int32_t* count;
  int64_t M, N, K, x_stride, w_stride;
  int64_t min_count, max_count;  // this launch runs only for a row count in [min_count, max_count]
  bool zero_others;                // zeros in the rows not gathered (hybrid_forward's gathered tail reads none)
};

// kb14::rows_gemm into a.y (M x N, fresh, contiguous): its two tiles, each for its range of row counts
// (a.min_count and a.max_count are the launcher's to set). Rows of x and w with unit column stride.
cudaError_t launch_rows_gemm(GemmArgs a, int device, cudaStream_t stream);

// The whole (M, N) shape's tail plan for y, where it is a lean block row (KernelBench's shape): *gathered
// says whether the exact rows' tail can run that plan's kernel on the gathered rows alone.
cudaError_t gathered_tail_plan(int64_t M, int64_t N, int64_t row_stride, const float* y, double divisor,
                               int device, tail::Config* plan, bool* gathered);
// That kernel on rows[:count] of y, each output written over out's row (the column-sum answer).
cudaError_t launch_gathered_tail(const tail::Config& plan, const float* y, int64_t M, int64_t N, int64_t row_stride,
                                 float* out, int64_t out_stride, double divisor, double scaling_factor,
                                 const int32_t* rows, const int32_t* count, cudaStream_t stream);

constexpr int kMaxChains = 16;  // kb14::gemm_order_probe's chains at most
// kb14::gemm_order_probe: out[i] = x[r[i]] . w[h[i]] in the order (chains, tile, tree).
cudaError_t launch_gemm_order_probe(const float* x, const float* w, int64_t K, int64_t x_stride, int64_t w_stride,
                                    const int64_t* r, const int64_t* h, int64_t samples, int chains, int64_t tile,
                                    bool tree, float* out, cudaStream_t stream);
}  // namespace hybrid_cuda
}  // namespace kb14
