// The reference's order for `torch.sum(y / d, 1, keepdim=True) * s` in plain C++: ATen's Reduce.cuh adds in an order
// fixed by the launch configuration it picks for the shape and GPU, which plan_reference_sum recomputes.
#pragma once

#include "device_shape.h"
#include <algorithm>
#include <cstdint>

namespace kb14::tail {
// What changed in Reduce.cuh / ReduceSumProdKernel.cu between releases (2.10 is the line).
struct ReleaseOrder {
  bool lanes_before_warps;            // block_x_reduce before block_y_reduce (before 2.10: warps first)
  bool shuffle_descending;            // shuffle offsets dim_x/2 down to 1 (before 2.10: 1 up)
  bool vectorize_from_128_inclusive;  // "vectorize along input" from 128 elements (before 2.10: above 128)
  bool wide_vectors_for_16bit;        // input_vec_size 8 for 2-byte types (before 2.10: 4)
  bool reciprocal_in_double;          // 1 / divisor in double, rounded once (pytorch#169507)
};

constexpr ReleaseOrder release_order(int version) { const bool v = version >= 210; return {v, v, v, v, v}; }

// input_vec_size (and the alignment unit) of the vectorised path for elements of `bytes`.
constexpr int input_vec(const ReleaseOrder& o, int bytes) { return bytes == 2 && o.wide_vectors_for_16bit ? 8 : 4; }

// The reference's reciprocal of a CPU-scalar divisor in the op math type.
template <typename op_t>
op_t reciprocal(const ReleaseOrder& order, double divisor) {
  return order.reciprocal_in_double ? static_cast<op_t>(1.0 / divisor) : op_t(1) / static_cast<op_t>(divisor);
}

constexpr int kWarp = 32;
constexpr int kMaxThreads = 512;  // Reduce.cuh's MAX_NUM_THREADS for real types
constexpr int kVt0 = 4;           // accumulators per thread on the non-vectorised path

// The reference's launch configuration (Reduce.cuh: setReduceConfig).
struct Plan {
  int64_t rows = 0, cols = 0;
  bool vectorized = false;
  int bx = 1;             // block_width
  int by = 1;             // block_height
  bool split_y = false;   // the row is split across warps (else each warp owns a row)
  int ctas = 1;           // blocks per row (global reduction when > 1)
  int step = 1;           // logical threads per row (config.step_input)
};

inline int last_pow2(int n) {
  for (int shift = 1; shift <= 16; shift *= 2) n |= n >> shift;
  return std::max(1, n - (n >> 1));
}

inline Plan plan_reference_sum(int64_t rows, int64_t cols, int input_vec_size, const DeviceShape& prop,
                               const ReleaseOrder& order) {
  Plan p{rows, cols};
  int64_t dim0 = cols, dim1 = rows;
  p.vectorized = order.vectorize_from_128_inclusive ? dim0 >= 128 : dim0 > 128;
  if (p.vectorized) dim0 /= input_vec_size;

  const int dim0_pow2 = dim0 < kMaxThreads ? last_pow2(static_cast<int>(dim0)) : kMaxThreads;
  const int dim1_pow2 = dim1 < kMaxThreads ? last_pow2(static_cast<int>(dim1)) : kMaxThreads;
  p.bx = std::min(dim0_pow2, kWarp);
  p.by = std::min(dim1_pow2, kMaxThreads / p.bx);
  p.bx = std::min(dim0_pow2, kMaxThreads / p.by);

  int64_t step_input = p.bx, step_output = 1;
  const auto values_per_thread = [&] { return ceil_div(cols, step_input); };
  const int64_t warp_split_threshold = std::min<int64_t>(p.by * 16, 256);
  if (values_per_thread() >= warp_split_threshold) {
    p.split_y = true;
    step_input *= p.by;
  } else {
    step_output = p.by;
  }

  const int blocks_per_sm = prop.max_threads_per_multiprocessor / (p.bx * p.by);
  const int64_t target_grid_size = int64_t(prop.multiprocessors) * blocks_per_sm;
  const int64_t grid = ceil_div(rows, step_output);
  if (p.split_y && values_per_thread() >= 256 && grid <= target_grid_size) {
    const int64_t c1 = ceil_div(target_grid_size, grid);
    const int64_t c2 = ceil_div(values_per_thread(), 16);
    const int64_t c3 = ceil_div(values_per_thread(), 256);
    p.ctas = static_cast<int>(std::max(std::min(c1, c2), c3));
    if (p.ctas > 1) step_input *= p.ctas;
  }
  p.step = static_cast<int>(step_input);
  return p;
}
}  // namespace kb14::tail
