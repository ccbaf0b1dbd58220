// CPU kernels of the column-sum rewrite of KernelBench L2/14, and their schemas.
//
//   sum_j (x @ W.T)[r, j] / d * s  ==  (s / d) * sum_k x[r, k] * colsum(W)[k]
//
// kb14::colsum(W)                      colsum(W)[k] = sum_j W[j, k], accumulated in fp64
//                                      and returned in fp64 (never rounded to W's dtype:
//                                      the product below reads it as fp64).
// kb14::colsum_matvec(x, c, scale)     out[r, 0] = scale * sum_k x[r, k] * c[k], with fp64
//                                      products (fused multiply-add) and fp64 accumulation,
//                                      rounded once to x's dtype.
//
// Both are deterministic: how the work is split depends on the shapes only, never on
// the number of threads, and the partial sums are combined in a fixed order.
//
// This file and colsum_autograd_cpu.cpp are the column-sum path's CPU module (kernels/jit.py
// builds it on the first call on a CPU tensor); this one registers the CPU kernels.

#include "colsum.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace kb14 {
namespace colsum_impl {

// Any supported element, exactly, as a double (half and bfloat16 through float).
template <typename scalar_t>
inline double widen(scalar_t v) {
  if constexpr (std::is_same_v<scalar_t, double>) {
    return v;
  } else {
    return static_cast<double>(static_cast<float>(v));
  }
}

}  // namespace colsum_impl

namespace colsum_impl {

// Rows of W summed by one task; the number of row blocks depends on the shape only.
constexpr int64_t kRowsPerBlock = 512;
constexpr int64_t kMaxRowBlocks = 64;
// Columns per task: 512 fp64 accumulators (4 KiB) stay in L1.
constexpr int64_t kColsPerBlock = 512;

template <typename scalar_t>
void colsum_kernel(const at::Tensor& w, at::Tensor& out) {
  const int64_t H = w.size(0), K = w.size(1);
  const int64_t rs = w.stride(0);
  const scalar_t* base = w.const_data_ptr<scalar_t>();
  double* result = out.mutable_data_ptr<double>();
  const int64_t rblocks = std::clamp<int64_t>(H / kRowsPerBlock, 1, kMaxRowBlocks);
  const int64_t rows_per = ceil_div(H, rblocks);
  const int64_t cblocks = ceil_div(K, kColsPerBlock);
  // partial[rb][k]: rows of block rb, column k. With one row block, write straight out.
  std::vector<double> partial(rblocks > 1 ? rblocks * K : 0);
  double* dst = rblocks > 1 ? partial.data() : result;

  at::parallel_for(0, rblocks * cblocks, 1, [&](int64_t begin, int64_t end) {
    double acc[kColsPerBlock];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t rb = task / cblocks, cb = task % cblocks;
      const int64_t r0 = rb * rows_per, r1 = std::min(H, r0 + rows_per);
      const int64_t c0 = cb * kColsPerBlock, n = std::min(K, c0 + kColsPerBlock) - c0;
      std::fill_n(acc, n, 0.0);
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* row = base + r * rs + c0;  // contiguous columns (checked by the caller)
        for (int64_t k = 0; k < n; ++k) acc[k] += widen(row[k]);
      }
      std::copy_n(acc, n, dst + rb * K + c0);
    }
  });
  if (rblocks > 1) {
    at::parallel_for(0, K, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        double s = 0.0;
        for (int64_t rb = 0; rb < rblocks; ++rb) s += partial[rb * K + k];
        result[k] = s;
      }
    });
  }
}

at::Tensor colsum_cpu(const at::Tensor& w_in) {
  check_colsum_inputs(w_in);
  KB14_CHECK(w_in.device().is_cpu(), "colsum_cpu: weight must be on the CPU, got ", w_in.device());
  // Rows must be contiguous runs of columns; any other layout is copied once.
  const at::Tensor w = (w_in.size(1) <= 1 || w_in.stride(1) == 1) ? w_in : w_in.contiguous();
  auto out = at::empty({w.size(1)}, w.options().dtype(at::kDouble));
  if (w.size(1) == 0) return out;
  if (w.size(0) == 0) return out.zero_();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, w.scalar_type(), "colsum_cpu",
                                  [&] { colsum_kernel<scalar_t>(w, out); });
  return out;
}

// Columns of x per task when a row is split (few long rows); depends on the shape only.
constexpr int64_t kMatvecChunk = 16384;
// Work below which a parallel_for runs serially (at::internal::GRAIN_SIZE).
constexpr int64_t kGrainSize = 32768;
constexpr int kLanes = 8;  // independent fp64 accumulators: ILP, and two AVX2 vectors

template <typename scalar_t>
inline double dot_chunk(const scalar_t* x, const double* c, int64_t n) {
  double lanes[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
#pragma GCC unroll 8
    for (int l = 0; l < kLanes; ++l) {
      lanes[l] = std::fma(widen(x[k + l]), c[k + l], lanes[l]);
    }
  }
  for (; k < n; ++k) lanes[0] = std::fma(widen(x[k]), c[k], lanes[0]);
  double s = 0.0;
  for (int l = 0; l < kLanes; ++l) s += lanes[l];
  return s;
}

template <typename scalar_t>
void matvec_kernel(const at::Tensor& x, const double* c, double scale, at::Tensor& out) {
  const int64_t B = x.size(0), K = x.size(1);
  const int64_t rs = x.stride(0);
  const scalar_t* base = x.const_data_ptr<scalar_t>();
  scalar_t* result = out.mutable_data_ptr<scalar_t>();
  // Split rows into column chunks only when there are few rows to share out.
  const int64_t chunks = B >= 64 ? 1 : std::max<int64_t>(1, ceil_div(K, kMatvecChunk));
  const int64_t per = ceil_div(K, chunks);
  if (chunks == 1) {
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(K, 1));
    at::parallel_for(0, B, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        result[r] = static_cast<scalar_t>(scale * dot_chunk(base + r * rs, c, K));
      }
    });
    return;
  }
  std::vector<double> partial(B * chunks);
  at::parallel_for(0, B * chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r = t / chunks, ch = t % chunks;
      const int64_t k0 = ch * per, k1 = std::min(K, k0 + per);
      partial[t] = k1 > k0 ? dot_chunk(base + r * rs + k0, c + k0, k1 - k0) : 0.0;
    }
  });
  for (int64_t r = 0; r < B; ++r) {
    double s = 0.0;
    for (int64_t ch = 0; ch < chunks; ++ch) s += partial[r * chunks + ch];
    result[r] = static_cast<scalar_t>(scale * s);
  }
}

at::Tensor colsum_matvec_cpu(const at::Tensor& x_in, const at::Tensor& c_in, double scale) {
  check_colsum_matvec_inputs(x_in, c_in);
  KB14_CHECK(x_in.device().is_cpu(), "colsum_matvec_cpu: x must be on the CPU, got ", x_in.device());
  const at::Tensor x = (x_in.size(1) <= 1 || x_in.stride(1) == 1) ? x_in : x_in.contiguous();
  const at::Tensor c = c_in.is_contiguous() ? c_in : c_in.contiguous();
  auto out = at::empty({x.size(0), 1}, x.options());
  if (x.size(0) == 0) return out;
  if (x.size(1) == 0) return out.zero_();
  const double* cp = c.const_data_ptr<double>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "colsum_matvec_cpu",
                                  [&] { matvec_kernel<scalar_t>(x, cp, scale, out); });
  return out;
}

}  // namespace colsum_impl
}  // namespace kb14

// The schemas are defined from Python (kernels/schema.py) before this library is loaded.
TORCH_LIBRARY_IMPL(kb14, CPU, m) {
  m.impl("colsum", &kb14::colsum_impl::colsum_cpu);
  m.impl("colsum_matvec", &kb14::colsum_impl::colsum_matvec_cpu);
}
