// The tail's general kernels: the reference's plan for every shape, in its own block shape (kernel_notes.md,
// "The general kernel"); also the element arithmetic and trees the lean kernels share. No torch headers.
#pragma once

#include "device_math.cuh"
#include "fused_reduce_order.h"
#include <cstdint>
#include <type_traits>

#ifndef KB14_TORCH_VERSION
#error "KB14_TORCH_VERSION (major * 100 + minor of the torch that is matched) must be defined"
#endif

namespace kb14::tail {
constexpr ReleaseOrder kOrder = release_order(KB14_TORCH_VERSION);
template <typename T> constexpr int kInputVec = input_vec(kOrder, sizeof(T));

// The reference's quotient of an element widened to float (16-bit: rounded to the dtype, as it is stored).
template <typename scalar_t>
__device__ __forceinline__ float quotient_of_float(float y, float inv) {
  if constexpr (sizeof(scalar_t) == 4) return __fmul_rn(y, inv);
  else return to_float(round_to<scalar_t>(__fmul_rn(y, inv)));
}

// The reference's quotient, sum and scale: fp64 in double, the rest in float (a 16-bit sum rounded, scaled, rounded).
template <typename T> struct Arith {
  using acc_t = std::conditional_t<sizeof(T) == 8, double, float>;  // also the quotient's and the scale's type
  static __device__ __forceinline__ acc_t quotient(T y, acc_t inv) {
    if constexpr (sizeof(T) == 8) return __dmul_rn(y, inv);
    else return quotient_of_float<T>(to_float(y), inv);
  }
  static __device__ __forceinline__ T store(acc_t sum, acc_t scale) {
    if constexpr (sizeof(T) == 8) return __dmul_rn(sum, scale);
    else if constexpr (sizeof(T) == 4) return __fmul_rn(sum, scale);
    else return round_to<T>(__fmul_rn(to_float(round_to<T>(sum)), scale));
  }
};
template <typename T> using acc_of = typename Arith<T>::acc_t;
template <typename T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };

template <typename scalar_t> struct Args {
  using acc_t = acc_of<scalar_t>;
  const scalar_t* __restrict__ y;
  int64_t row_stride, col_stride;
  scalar_t* __restrict__ out;
  int64_t out_stride;
  acc_t* __restrict__ partials;  // [rows][ctas] when ctas > 1
  int64_t rows, cols;
  int step, ctas;
  acc_t inv;  // 1 / divisor in acc_t, as the reference's host code computes it
  acc_t scale;
};

// The reference's shuffle tree on lanes [0, width) into lane 0 (blocks under 32 threads: among those they have).
template <typename acc_t>
__device__ __forceinline__ acc_t shuffle_tree(acc_t v, int width) {
  const unsigned threads = blockDim.x * blockDim.y;
  const unsigned mask = threads >= 32 ? 0xffffffffu : (1u << threads) - 1u;
  if (kOrder.shuffle_descending)
    for (int offset = width >> 1; offset > 0; offset >>= 1) v = v + __shfl_down_sync(mask, v, offset);
  else
    for (int offset = 1; offset < width; offset <<= 1) v = v + __shfl_down_sync(mask, v, offset);
  return v;
}

// block_x_reduce over `bx` lanes (a power of two up to 512): halving in `slot_row` down to a warp, then shuffles.
template <typename acc_t>
__device__ acc_t lane_tree(acc_t v, int bx, int lane, acc_t* slot_row) {
  if (bx > kWarp) {
    slot_row[lane] = v;
    for (int offset = bx / 2; offset >= kWarp; offset >>= 1) {
      __syncthreads();
      if (lane < offset) slot_row[lane] = v = v + slot_row[lane + offset];
    }
    __syncthreads();
    return shuffle_tree(v, kWarp);
  }
  return shuffle_tree(v, bx);
}

// block_y_reduce: halving over the warps' totals, lane i holding warp i's (n <= 32: plan_reference_sum).
template <typename acc_t>
__device__ __forceinline__ acc_t warp_tree(acc_t v, int n) {
  for (int offset = n >> 1; offset > 0; offset >>= 1) v = v + __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// The reference's tree over a block's leaves (thread (x, y) of bx lanes x by warps): lanes first from 2.10, warps
// first before. A barrier; true on thread (0, 0), with the total. slots: bx * by accumulators, totals: by.
template <typename acc_t>
__device__ __forceinline__ bool block_tree(acc_t leaf, int bx, int by, int x, int y, acc_t* slots, acc_t* totals,
                                           acc_t& total) {
  if constexpr (kOrder.lanes_before_warps) {
    const acc_t w = lane_tree(leaf, bx, x, slots + y * bx);
    if (x == 0) totals[y] = w;
    __syncthreads();
    if (y != 0 || x >= kWarp) return false;
    total = warp_tree(x < by ? totals[x] : acc_t(0), by);
  } else {
    // Warps first, then the lanes; by one warp, as __syncwarp orders only one warp's accesses.
    slots[y * bx + x] = leaf;
    __syncthreads();
    if (y != 0 || x >= kWarp) return false;
    for (int lane = x, first = 0; first < bx; first += kWarp, lane += kWarp)  // trips from bx alone: one pass at 32
      for (int offset = by >> 1; offset > 0 && lane < bx; offset >>= 1)
        for (int w = 0; w < offset; ++w) slots[w * bx + lane] = slots[w * bx + lane] + slots[(w + offset) * bx + lane];
    if (bx > kWarp) {  // a lane reads other lanes' slots only here
      __syncwarp();
      for (int offset = bx / 2; offset >= kWarp; offset >>= 1) {
        for (int lane = x; lane < offset; lane += kWarp) slots[lane] = slots[lane] + slots[lane + offset];
        __syncwarp();
      }
    }
    total = shuffle_tree(x < bx ? slots[x] : acc_t(0), bx < kWarp ? bx : kWarp);
  }
  return x == 0;
}

// A logical thread's leaf: its V accumulators added in order.
template <typename acc_t, int V>
__device__ __forceinline__ acc_t leaf_sum(const acc_t (&acc)[V]) {
  acc_t leaf = acc[0];
#pragma unroll
  for (int i = 1; i < V; ++i) leaf = leaf + acc[i];
  return leaf;
}

template <typename scalar_t>
__device__ __forceinline__ auto element(const scalar_t* row, int64_t col_stride, int64_t e, acc_of<scalar_t> inv) {
  return Arith<scalar_t>::quotient(row[e * col_stride], inv);
}

// Thread t's vectorised leaf (input_vectorized_thread_reduce_impl), U loads in flight; offsets in 32 bits (< 2^31 B).
template <typename scalar_t, int V, int U, bool kVectorLoads>
__device__ __forceinline__ acc_of<scalar_t> vectorized_leaf(const Args<scalar_t>& a, const scalar_t* row, int shift,
                                                            int t, int lane, bool owns_edges) {
  using acc_t = acc_of<scalar_t>;
  const int cols = static_cast<int>(a.cols);
  int end = cols, base = 0;
  acc_t acc[V] = {};
  if (shift > 0) {
    if (owns_edges && lane >= shift && lane < V) acc[0] = acc_t(0) + element(row, a.col_stride, lane - shift, a.inv);
    end = cols + shift - V;
    base = V - shift;
  }
  const int nvec = end / V, step = a.step;
  const scalar_t* vbase = row + base * a.col_stride;
  for (int k0 = 0; t + k0 * step < nvec; k0 += U) {
    Vec<scalar_t, V> buf[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int idx = t + (k0 + u) * step;
      if (idx >= nvec) continue;
      if constexpr (kVectorLoads) buf[u] = reinterpret_cast<const Vec<scalar_t, V>*>(vbase)[idx];
      else
#pragma unroll
        for (int i = 0; i < V; ++i) buf[u].v[i] = vbase[int64_t(idx * V + i) * a.col_stride];
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (t + (k0 + u) * step < nvec)
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = acc[i] + Arith<scalar_t>::quotient(buf[u].v[i], a.inv);
  }
  if (owns_edges) {
    const int e = end - end % V + lane;
    if (e < end) acc[0] = acc[0] + element(vbase, a.col_stride, e, a.inv);
  }
  return leaf_sum(acc);
}

// Logical thread t's leaf on the scalar path (thread_reduce_impl): its m-th element to accumulator m % vt0.
template <typename scalar_t>
__device__ acc_of<scalar_t> scalar_leaf(const Args<scalar_t>& a, const scalar_t* row, int t) {
  using acc_t = acc_of<scalar_t>;
  acc_t acc[kVt0] = {};
  int64_t e = t;
  for (int m = 0; e < a.cols; ++m, e += a.step) {
    const acc_t v = element(row, a.col_stride, e, a.inv);
    switch (m & 3) {
      case 0: acc[0] = acc[0] + v; break;
      case 1: acc[1] = acc[1] + v; break;
      case 2: acc[2] = acc[2] + v; break;
      default: acc[3] = acc[3] + v; break;
    }
  }
  return ((acc[0] + acc[1]) + acc[2]) + acc[3];
}

template <typename scalar_t, int V, int U>
__device__ __forceinline__ acc_of<scalar_t> row_leaf(const Args<scalar_t>& a, bool vectorized, const scalar_t* row,
                                                     int64_t r, int t, int lane, bool owns_edges) {
  if (!vectorized) return scalar_leaf<scalar_t>(a, row, t);
  // The reference's quotient is a fresh, aligned tensor: row r is misaligned by (r * cols) mod V.
  const int shift = static_cast<int>((r * a.cols) % V);
  const int base = shift > 0 ? V - shift : 0;
  const bool aligned = a.col_stride == 1 && reinterpret_cast<uintptr_t>(row + base) % (sizeof(scalar_t) * V) == 0;
  return aligned ? vectorized_leaf<scalar_t, V, U, true>(a, row, shift, t, lane, owns_edges)
                 : vectorized_leaf<scalar_t, V, U, false>(a, row, shift, t, lane, owns_edges);
}

// Rows split across warps (and blocks): a block per (row, c). 40 registers fit three blocks an SM (not fp64).
template <typename scalar_t, int V, int U>
__global__ void __launch_bounds__(kMaxThreads, sizeof(scalar_t) < 8 ? 3 : 1) split_row_kernel(Args<scalar_t> a,
                                                                                             bool vectorized) {
  using acc_t = acc_of<scalar_t>;
  __shared__ acc_t smem[kMaxThreads];
  __shared__ acc_t warp_totals[kWarp];
  const int bx = blockDim.x, by = blockDim.y, x = threadIdx.x, y = threadIdx.y, c = blockIdx.y;
  const int64_t r = blockIdx.x;
  const scalar_t* row = a.y + r * a.row_stride;
  const int t = x + bx * y + bx * by * c;
  wait_for_prior_grids();
  const acc_t leaf = row_leaf<scalar_t, V, U>(a, vectorized, row, r, t, x, y == 0 && c == 0);
  allow_dependent_launch();
  acc_t total;
  if (!block_tree(leaf, bx, by, x, y, smem, warp_totals, total)) return;
  if (a.ctas > 1) a.partials[r * a.ctas + c] = total;
  else a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
}

// The reference's global_reduce: thread (x, y) adds block totals x + bx * y, + bx * by, ...; the warp tree, the lanes'.
template <typename scalar_t>
__global__ void __launch_bounds__(kMaxThreads) combine_blocks_kernel(Args<scalar_t> a) {
  using acc_t = acc_of<scalar_t>;
  __shared__ acc_t smem[kMaxThreads];
  const int bx = blockDim.x, by = blockDim.y, x = threadIdx.x, y = threadIdx.y;
  const int64_t r = blockIdx.x;
  const acc_t* staged = a.partials + r * a.ctas;
  acc_t v = acc_t(0);
  wait_for_prior_grids();
  for (int o = x + bx * y; o < a.ctas; o += bx * by) v = v + staged[o];
  allow_dependent_launch();
  smem[y * bx + x] = v;
  for (int offset = by >> 1; offset > 0; offset >>= 1) {
    __syncthreads();
    if (y < offset) smem[y * bx + x] = v = v + smem[(y + offset) * bx + x];
  }
  __syncthreads();
  // block_x_reduce on row 0, possibly wider than a warp.
  for (int offset = bx / 2; offset >= kWarp; offset >>= 1) {
    if (y == 0 && x < offset) smem[x] = v = v + smem[x + offset];
    __syncthreads();
  }
  if (y != 0) return;
  if (x >= kWarp) return;
  const acc_t total = shuffle_tree(v, bx < kWarp ? bx : kWarp);
  if (x == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
}

// A row per logical warp, bx lanes wide (several hardware warps when rows are few).
template <typename scalar_t, int V, int U>
__global__ void __launch_bounds__(kMaxThreads) warp_row_kernel(Args<scalar_t> a, bool vectorized) {
  using acc_t = acc_of<scalar_t>;
  __shared__ acc_t lanes_smem[kMaxThreads];
  const int bx = blockDim.x, x = threadIdx.x;
  const int64_t r = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool live = r < a.rows;
  const scalar_t* row = a.y + (live ? r : 0) * a.row_stride;
  wait_for_prior_grids();
  const acc_t leaf = live ? row_leaf<scalar_t, V, U>(a, vectorized, row, r, x, x, true) : acc_t(0);
  allow_dependent_launch();
  const acc_t total = lane_tree(leaf, bx, x, lanes_smem + threadIdx.y * bx);
  if (live && x == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
}

// The general kernels launched (`programmatic`: as programmatic dependents, waiting before any read).
template <typename scalar_t, int V>
cudaError_t launch_general(const Plan& p, const Args<scalar_t>& a, cudaStream_t stream, bool programmatic) {
  constexpr int U = V == 8 ? 2 : 4;  // vectors each logical thread keeps in flight (32-64 bytes)
  const dim3 block(p.bx, p.by);
  if (!p.split_y) {
    const dim3 grid(static_cast<unsigned>(ceil_div(p.rows, p.by)));
    return launch_programmatic(warp_row_kernel<scalar_t, V, U>, grid, block, 0, stream, programmatic, a, p.vectorized);
  }
  const dim3 grid(static_cast<unsigned>(p.rows), p.ctas);
  const cudaError_t err =
      launch_programmatic(split_row_kernel<scalar_t, V, U>, grid, block, 0, stream, programmatic, a, p.vectorized);
  if (err != cudaSuccess || p.ctas == 1) return err;
  return launch_programmatic(combine_blocks_kernel<scalar_t>, dim3(static_cast<unsigned>(p.rows)), block, 0, stream,
                             programmatic, a);
}

// The kernels' arguments for a planned call (strides in elements; `partials`: rows * ctas when ctas > 1).
template <typename scalar_t>
Args<scalar_t> planned_args(const Plan& p, const scalar_t* y, int64_t row_stride, int64_t col_stride, scalar_t* out,
                            int64_t out_stride, double divisor, double scale, acc_of<scalar_t>* partials) {
  using acc_t = acc_of<scalar_t>;
  return {y, row_stride, p.cols == 1 ? 1 : col_stride, out, out_stride, partials, p.rows, p.cols, p.step, p.ctas,
          reciprocal<acc_t>(kOrder, divisor), static_cast<acc_t>(scale)};
}
}  // namespace kb14::tail
