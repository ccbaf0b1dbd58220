// The tail's kernels, `torch.sum(y / d, 1, keepdim=True) * s` in one pass over y with
// the reference's bits, and their launch plans. No torch headers: fused_reduce.cu is
// the op around them (checks, allocation, stream), and scripts/ can build these alone.
//
// The reference runs three kernels: the true-divide (a multiply by the reciprocal
// 1/d computed on the host, since d is a CPU scalar), ATen's reduction
// (Reduce.cuh), and the multiply by s. Its sum's order is fixed by the launch
// configuration Reduce.cuh picks for the shape and the GPU: which elements each
// *logical* thread (lane x, warp y, block c) accumulates into its per-thread
// accumulators, then the tree across lanes, across warps and across blocks.
// `plan_reference_sum` recomputes that configuration; the device code performs
// those additions in that order. How the work is laid out on the chip is ours.
#pragma once

#include "device_math.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#ifndef KB14_TORCH_VERSION
#error "KB14_TORCH_VERSION (major * 100 + minor of the torch that is matched) must be defined"
#endif

namespace kb14 {
namespace tail {

// ---------------------------------------------------------------------------
// What changed in Reduce.cuh / ReduceSumProdKernel.cu between releases.
// ---------------------------------------------------------------------------
struct ReleaseOrder {
  // ReduceOp::run reduces across lanes (block_x_reduce) before warps
  // (block_y_reduce); before 2.10 it was warps first.
  bool lanes_before_warps;
  // block_x_reduce's shuffle offsets: dim_x/2 down to 1 (2.10+) or 1 up to dim_x/2.
  bool shuffle_descending;
  // "vectorize along input" when the row has >= 128 elements (2.10+) or > 128.
  bool vectorize_from_128_inclusive;
  // input_vec_size for 2-byte types: 8 where sum_functor asks for it, else vt0 = 4.
  bool wide_vectors_for_16bit;
  // div_true_kernel_cuda's reciprocal of a CPU-scalar divisor: 1 / divisor in double,
  // rounded once to the op math type (2.10+: pytorch#169507), or op_t(1) / op_t(divisor).
  bool reciprocal_in_double;
};

constexpr ReleaseOrder kOrder{
    /*lanes_before_warps=*/KB14_TORCH_VERSION >= 210,
    /*shuffle_descending=*/KB14_TORCH_VERSION >= 210,
    /*vectorize_from_128_inclusive=*/KB14_TORCH_VERSION >= 210,
    /*wide_vectors_for_16bit=*/KB14_TORCH_VERSION >= 210,
    /*reciprocal_in_double=*/KB14_TORCH_VERSION >= 210,
};

// input_vec_size (and the alignment unit) of the vectorised path for a type.
template <typename T>
constexpr int kInputVec = (sizeof(T) == 2 && kOrder.wide_vectors_for_16bit) ? 8 : 4;

constexpr int kWarp = 32;
constexpr int kMaxThreads = 512;  // Reduce.cuh's MAX_NUM_THREADS for real types
constexpr int kVt0 = 4;           // accumulators per thread on the non-vectorised path

// ---------------------------------------------------------------------------
// Element arithmetic: the reference's quotient, sum accumulation and scale.
// ---------------------------------------------------------------------------
template <typename T> struct Arith;

template <> struct Arith<float> {
  using acc_t = float;
  using op_t = float;
  static __device__ __forceinline__ float quotient(float y, float inv) { return __fmul_rn(y, inv); }
  static __device__ __forceinline__ float store(float sum, float scale) { return __fmul_rn(sum, scale); }
};

template <> struct Arith<double> {
  using acc_t = double;
  using op_t = double;
  static __device__ __forceinline__ double quotient(double y, double inv) { return __dmul_rn(y, inv); }
  static __device__ __forceinline__ double store(double sum, double scale) { return __dmul_rn(sum, scale); }
};

// Half and bfloat16: the quotient is rounded to the tensor dtype (the reference
// stores it), summed in float, the sum rounded to the dtype, scaled in float and
// rounded again.
template <typename T> struct Arith16 {
  using acc_t = float;
  using op_t = float;
  static __device__ __forceinline__ float quotient(T y, float inv) {
    return to_float(round_to<T>(__fmul_rn(to_float(y), inv)));
  }
  static __device__ __forceinline__ T store(float sum, float scale) {
    return round_to<T>(__fmul_rn(to_float(round_to<T>(sum)), scale));
  }
};
template <> struct Arith<__half> : Arith16<__half> {};
template <> struct Arith<__nv_bfloat16> : Arith16<__nv_bfloat16> {};

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// ---------------------------------------------------------------------------
// The reference's launch configuration (Reduce.cuh: setReduceConfig).
// ---------------------------------------------------------------------------
struct Plan {
  int64_t rows = 0;
  int64_t cols = 0;
  bool vectorized = false;
  int bx = 1;             // block_width
  int by = 1;             // block_height
  bool split_y = false;   // the row is split across warps (else each warp owns a row)
  int ctas = 1;           // blocks per row (global reduction when > 1)
  int step = 1;           // logical threads per row (config.step_input)
};

inline int last_pow2(int n) {
  n |= (n >> 1);
  n |= (n >> 2);
  n |= (n >> 4);
  n |= (n >> 8);
  n |= (n >> 16);
  return std::max(1, n - (n >> 1));
}

inline Plan plan_reference_sum(int64_t rows, int64_t cols, int input_vec_size, const DeviceShape& prop) {
  Plan p;
  p.rows = rows;
  p.cols = cols;
  int64_t dim0 = cols, dim1 = rows;
  p.vectorized = kOrder.vectorize_from_128_inclusive ? dim0 >= 128 : dim0 > 128;
  if (p.vectorized) dim0 /= input_vec_size;

  const int dim0_pow2 = dim0 < kMaxThreads ? last_pow2(static_cast<int>(dim0)) : kMaxThreads;
  const int dim1_pow2 = dim1 < kMaxThreads ? last_pow2(static_cast<int>(dim1)) : kMaxThreads;
  p.bx = std::min(dim0_pow2, kWarp);
  p.by = std::min(dim1_pow2, kMaxThreads / p.bx);
  p.bx = std::min(dim0_pow2, kMaxThreads / p.by);

  int64_t step_input = p.bx;
  int64_t step_output = 1;
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

// ---------------------------------------------------------------------------
// Device code.
// ---------------------------------------------------------------------------
template <typename scalar_t>
struct Args {
  using acc_t = typename Arith<scalar_t>::acc_t;
  using op_t = typename Arith<scalar_t>::op_t;
  const scalar_t* __restrict__ y;
  int64_t row_stride;
  int64_t col_stride;
  scalar_t* __restrict__ out;
  int64_t out_stride;
  acc_t* __restrict__ partials;  // [rows][ctas] when ctas > 1
  int64_t rows;
  int64_t cols;
  int step;
  int ctas;
  op_t inv;        // 1 / divisor in the op math type, as the reference's host code computes it
  op_t scale;
};

// The reference's warp shuffle tree, on lanes [0, width); the result is in lane 0.
// Blocks of fewer than 32 threads (tiny rows) shuffle among the threads they have.
__device__ __forceinline__ unsigned block_warp_mask() {
  const unsigned n = blockDim.x * blockDim.y;
  return n >= 32 ? 0xffffffffu : (1u << n) - 1u;
}

template <typename acc_t>
__device__ __forceinline__ acc_t shuffle_tree(acc_t v, int width) {
  const unsigned mask = block_warp_mask();
  if (kOrder.shuffle_descending) {
    for (int offset = width >> 1; offset > 0; offset >>= 1) v = v + __shfl_down_sync(mask, v, offset);
  } else {
    for (int offset = 1; offset < width; offset <<= 1) v = v + __shfl_down_sync(mask, v, offset);
  }
  return v;
}

// block_x_reduce for a logical block `bx` lanes wide (any power of two up to 512):
// shared-memory halving down to one warp, then the shuffle tree. `slot` holds
// this thread's value at index lane; returns the row of lanes' total in lane 0.
template <typename acc_t>
__device__ acc_t lane_tree(acc_t v, int bx, int lane, acc_t* slot_row) {
  if (bx > kWarp) {
    slot_row[lane] = v;
    for (int offset = bx / 2; offset >= kWarp; offset >>= 1) {
      __syncthreads();
      if (lane < offset) {
        v = v + slot_row[lane + offset];
        slot_row[lane] = v;
      }
    }
    __syncthreads();
    return shuffle_tree(v, kWarp);
  }
  return shuffle_tree(v, bx);
}

// block_y_reduce: halving over the warps' totals W[0..n), in place; result in W[0].
// Run by one warp, lane i owning W[i] (n <= 32 always: see plan_reference_sum).
template <typename acc_t>
__device__ __forceinline__ acc_t warp_tree(acc_t v, int n) {
  for (int offset = n >> 1; offset > 0; offset >>= 1) v = v + __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

template <typename scalar_t>
__device__ __forceinline__ typename Args<scalar_t>::acc_t element(const scalar_t* row, int64_t col_stride,
                                                                  int64_t e, typename Args<scalar_t>::op_t inv) {
  return Arith<scalar_t>::quotient(row[e * col_stride], inv);
}

// The leaf of logical thread t on the vectorised path (input_vectorized_thread_reduce_impl).
// All of a batch's U loads are issued before any is consumed; each accumulator receives
// its elements in the reference's order. In-row offsets fit in 32 bits: the fused path
// only takes tensors of fewer than 2^31 bytes.
template <typename scalar_t, int V, int U, bool kVectorLoads>
__device__ __forceinline__ typename Args<scalar_t>::acc_t vectorized_leaf(const Args<scalar_t>& a,
                                                                          const scalar_t* row, int shift, int t,
                                                                          int lane, bool owns_edges) {
  using acc_t = typename Args<scalar_t>::acc_t;
  const int cols = static_cast<int>(a.cols);
  int end = cols, base = 0;
  acc_t acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = acc_t(0);
  if (shift > 0) {
    if (owns_edges && lane >= shift && lane < V) acc[0] = acc_t(0) + element(row, a.col_stride, lane - shift, a.inv);
    end = cols + shift - V;
    base = V - shift;
  }
  const int nvec = end / V;
  const int step = a.step;
  const scalar_t* vbase = row + base * a.col_stride;

  for (int k0 = 0; t + k0 * step < nvec; k0 += U) {
    Vec<scalar_t, V> buf[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int idx = t + (k0 + u) * step;
      if (idx < nvec) {
        if constexpr (kVectorLoads) {
          buf[u] = reinterpret_cast<const Vec<scalar_t, V>*>(vbase)[idx];
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) buf[u].v[i] = vbase[int64_t(idx * V + i) * a.col_stride];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (t + (k0 + u) * step < nvec) {
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = acc[i] + Arith<scalar_t>::quotient(buf[u].v[i], a.inv);
      }
    }
  }
  if (owns_edges) {
    const int e = end - end % V + lane;
    if (e < end) acc[0] = acc[0] + element(vbase, a.col_stride, e, a.inv);
  }
  acc_t v = acc[0];
#pragma unroll
  for (int i = 1; i < V; ++i) v = v + acc[i];
  return v;
}

// The leaf of logical thread t on the scalar path (thread_reduce_impl, vt0 accumulators):
// its m-th element, t + m * step, goes to accumulator m % vt0.
template <typename scalar_t>
__device__ typename Args<scalar_t>::acc_t scalar_leaf(const Args<scalar_t>& a, const scalar_t* row, int t) {
  using acc_t = typename Args<scalar_t>::acc_t;
  acc_t acc[kVt0] = {acc_t(0), acc_t(0), acc_t(0), acc_t(0)};
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

// The leaf of logical thread t, by the path the reference takes for this row.
template <typename scalar_t, int V, int U>
__device__ __forceinline__ typename Args<scalar_t>::acc_t row_leaf(const Args<scalar_t>& a, bool vectorized,
                                                                   const scalar_t* row, int64_t r, int t, int lane,
                                                                   bool owns_edges) {
  if (!vectorized) return scalar_leaf<scalar_t>(a, row, t);
  // The reference's quotient is a fresh, aligned tensor: row r starts r * cols
  // elements in, so its misalignment is (r * cols) mod V.
  const int shift = static_cast<int>((r * a.cols) % V);
  const int base = shift > 0 ? V - shift : 0;
  const bool aligned = a.col_stride == 1 && reinterpret_cast<uintptr_t>(row + base) % (sizeof(scalar_t) * V) == 0;
  return aligned ? vectorized_leaf<scalar_t, V, U, true>(a, row, shift, t, lane, owns_edges)
                 : vectorized_leaf<scalar_t, V, U, false>(a, row, shift, t, lane, owns_edges);
}

// Rows split across warps (and possibly blocks): one physical block per (row, c), one
// physical thread per logical thread, as the reference launches it. 40 registers fit
// three 512-thread blocks per SM (double needs more and keeps two).
template <typename scalar_t, int V, int U>
__global__ void __launch_bounds__(kMaxThreads, sizeof(scalar_t) < 8 ? 3 : 1) split_row_kernel(Args<scalar_t> a,
                                                                                             bool vectorized) {
  using acc_t = typename Args<scalar_t>::acc_t;
  __shared__ acc_t smem[kMaxThreads];
  __shared__ acc_t warp_totals[kWarp];
  const int bx = blockDim.x, by = blockDim.y;
  const int x = threadIdx.x, y = threadIdx.y;
  const int64_t r = blockIdx.x;
  const int c = blockIdx.y;
  const scalar_t* row = a.y + r * a.row_stride;
  const int t = x + bx * y + bx * by * c;
  wait_for_prior_grids();
  const acc_t leaf = row_leaf<scalar_t, V, U>(a, vectorized, row, r, t, x, y == 0 && c == 0);
  allow_dependent_launch();

  acc_t total;
  if constexpr (kOrder.lanes_before_warps) {
    const acc_t w = lane_tree(leaf, bx, x, smem + y * bx);
    if (x == 0) warp_totals[y] = w;
    __syncthreads();
    if (y != 0 || x >= kWarp) return;
    total = warp_tree(x < by ? warp_totals[x] : acc_t(0), by);
  } else {
    // Warps first: for each lane, the halving tree over the warps, then the lanes.
    smem[y * bx + x] = leaf;
    __syncthreads();
    // One warp walks the lanes (a row of the block may span several warps: each lane
    // must be folded exactly once, and __syncwarp orders only one warp's accesses).
    if (y != 0 || x >= kWarp) return;
    for (int lane = x; lane < bx; lane += kWarp) {
      for (int offset = by >> 1; offset > 0; offset >>= 1)
        for (int w = 0; w < offset; ++w) smem[w * bx + lane] = smem[w * bx + lane] + smem[(w + offset) * bx + lane];
    }
    __syncwarp();
    if (bx > kWarp) {
      for (int offset = bx / 2; offset >= kWarp; offset >>= 1) {
        for (int lane = x; lane < offset; lane += kWarp) smem[lane] = smem[lane] + smem[lane + offset];
        __syncwarp();
      }
    }
    total = shuffle_tree(x < bx ? smem[x] : acc_t(0), bx < kWarp ? bx : kWarp);
  }
  if (x != 0) return;
  if (a.ctas > 1) {
    a.partials[r * a.ctas + c] = total;
  } else {
    a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
  }
}

// The reference's global_reduce, run once per row after all of its blocks: logical
// thread (x, y) of the last block starts from 0 and adds the staged block totals
// x + bx * y, then + bx * by, ...; then the warp tree, then the lane tree.
template <typename scalar_t>
__global__ void __launch_bounds__(kMaxThreads) combine_blocks_kernel(Args<scalar_t> a) {
  using acc_t = typename Args<scalar_t>::acc_t;
  __shared__ acc_t smem[kMaxThreads];
  const int bx = blockDim.x, by = blockDim.y;
  const int x = threadIdx.x, y = threadIdx.y;
  const int64_t r = blockIdx.x;
  const acc_t* staged = a.partials + r * a.ctas;
  acc_t v = acc_t(0);
  wait_for_prior_grids();
  for (int o = x + bx * y; o < a.ctas; o += bx * by) v = v + staged[o];
  allow_dependent_launch();
  smem[y * bx + x] = v;
  for (int offset = by >> 1; offset > 0; offset >>= 1) {
    __syncthreads();
    if (y < offset) {
      v = v + smem[(y + offset) * bx + x];
      smem[y * bx + x] = v;
    }
  }
  __syncthreads();
  // block_x_reduce on the warps' row (row 0), possibly wider than a warp.
  for (int offset = bx / 2; offset >= kWarp; offset >>= 1) {
    if (y == 0 && x < offset) {
      v = v + smem[x + offset];
      smem[x] = v;
    }
    __syncthreads();
  }
  if (y != 0) return;
  if (x >= kWarp) return;
  const acc_t total = shuffle_tree(v, bx < kWarp ? bx : kWarp);
  if (x == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
}

// Rows owned by one warp each (the reference's output split across warps); the
// "warp" is bx lanes wide and may span several hardware warps when rows are few.
template <typename scalar_t, int V, int U>
__global__ void __launch_bounds__(kMaxThreads) warp_row_kernel(Args<scalar_t> a, bool vectorized) {
  using acc_t = typename Args<scalar_t>::acc_t;
  __shared__ acc_t lanes_smem[kMaxThreads];
  const int bx = blockDim.x;
  const int x = threadIdx.x;
  const int64_t r = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool live = r < a.rows;
  const scalar_t* row = a.y + (live ? r : 0) * a.row_stride;
  wait_for_prior_grids();
  const acc_t leaf = live ? row_leaf<scalar_t, V, U>(a, vectorized, row, r, x, x, true) : acc_t(0);
  allow_dependent_launch();
  const acc_t total = lane_tree(leaf, bx, x, lanes_smem + threadIdx.y * bx);
  if (live && x == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
}

// ---------------------------------------------------------------------------
// The lean path: the shapes KernelBench and most users meet. The reference's lanes
// are 32 wide and a row belongs either to one 32 x 16 block (split across its warps,
// one block per row) or to one warp (16 rows per block); the columns are unit-stride
// and every row's vectors are aligned in memory as they are in the reference's
// quotient (a row may start mid-vector: its head and tail elements then go to the
// first warp's lanes, as in the reference). One physical thread per logical thread,
// as the reference launches it, but:
//   * at most 32 registers, so four 512-thread blocks fit on an SM (full occupancy);
//   * streaming loads that L2 evicts first (the input is read once): reading y
//     then evicts y's own lines rather than others' dirty ones, whose write-back
//     would share the memory bus with our reads;
//   * on sm_90 it is launched as a programmatic dependent: its blocks are placed
//     while the kernel before it drains, and wait (griddepcontrol.wait) for that
//     kernel's completion and writes before reading y. It lets its own dependents
//     launch once its loads are issued; they wait the same way, so the order of
//     every read and write in the stream is unchanged.
// ---------------------------------------------------------------------------
constexpr int kLeanBlock = 512;      // the reference's 32 x 16 block
constexpr int kLeanWarps = kLeanBlock / kWarp;
constexpr int kLeanBlocksPerSm = 4;  // 2048 threads: a full SM

template <typename scalar_t>
struct LeanArgs {
  using op_t = typename Arith<scalar_t>::op_t;
  const scalar_t* __restrict__ y;
  int64_t row_stride;  // elements; row_stride - cols is a multiple of the vector width
  scalar_t* __restrict__ out;
  int64_t out_stride;
  int rows;
  int cols;
  op_t inv;
  op_t scale;
  uint32_t launch_serial;  // a warmed launch's own number (warm_behind_warmed_launch)
};

// The lean path holds its loads as raw 32-bit words (RawVec, device_math.cuh: no
// local-memory copies of 16-bit element structs) and decodes each element from them.

// The reference's quotient of an element already widened to float.
template <typename scalar_t>
__device__ __forceinline__ float quotient_of_float(float y, float inv) {
  if constexpr (sizeof(scalar_t) == 4) {
    return __fmul_rn(y, inv);
  } else {
    return to_float(round_to<scalar_t>(__fmul_rn(y, inv)));
  }
}

// The reference's quotients of the two 16-bit elements packed in one word, widened back
// to float, when 1 / divisor is a power of two for which packed_quotient_exact holds: one
// packed multiply instead of two float multiplies and two roundings to 16 bits. The same
// bits: the reference rounds y * inv to float, then to 16 bits, but for such an inv the
// float product is exact (an exponent shift of y within float's range), so only the
// rounding to 16 bits acts, and the packed multiply (mul.rn.{f16,bf16}x2, subnormals kept)
// rounds once, the same way.
template <typename scalar_t>
__device__ __forceinline__ float2 packed_quotient_pair(uint32_t packed, uint32_t inv_pair) {
  if constexpr (std::is_same_v<scalar_t, __half>) {
    __half2 y, inv;
    memcpy(&y, &packed, sizeof(y));
    memcpy(&inv, &inv_pair, sizeof(inv));
    return __half22float2(__hmul2_rn(y, inv));
  } else {
    __nv_bfloat162 y, inv;
    memcpy(&y, &packed, sizeof(y));
    memcpy(&inv, &inv_pair, sizeof(inv));
    return __bfloat1622float2(__hmul2_rn(y, inv));
  }
}

template <typename scalar_t>
__device__ __forceinline__ uint32_t round_to_bits(float v) {
  const scalar_t rounded = round_to<scalar_t>(v);
  uint16_t bits;
  memcpy(&bits, &rounded, sizeof(bits));
  return bits;
}

// Whether packed_quotient_pair reproduces the reference for this 1 / divisor: a power of
// two 2^k that the type holds as a normal number, with y * 2^k exact in float for every
// finite y of the type. Half: -14 <= k <= 15 (half's normal exponents; y * 2^k stays
// within float's). Bfloat16: -16 <= k <= 127 (its smallest step, 2^-133, times 2^k must
// not fall below float's, 2^-149; a product past float's largest is infinite both ways).
template <typename scalar_t>
inline bool packed_quotient_exact(float inv) {
  constexpr bool kHalf = std::is_same_v<scalar_t, __half>;
  constexpr int kLowest = kHalf ? -14 : -16, kHighest = kHalf ? 15 : 127;
  int exponent = 0;
  const float mantissa = std::frexp(std::fabs(inv), &exponent);  // inv = mantissa * 2^exponent
  return mantissa == 0.5f && exponent - 1 >= kLowest && exponent - 1 <= kHighest;
}

// One element read alone (a row's head or tail), and its quotient: apart, so that a block row
// issues its edge loads with its vectors and waits for them once.
template <typename scalar_t>
__device__ __forceinline__ scalar_t lean_element_load(const scalar_t* p) {
  if constexpr (sizeof(scalar_t) == 4) {
    return __ldg(p);
  } else {
    return *p;
  }
}

template <typename scalar_t>
__device__ __forceinline__ float lean_element_quotient_of(scalar_t v, float inv) {
  if constexpr (sizeof(scalar_t) == 4) {
    return quotient_of_float<scalar_t>(v, inv);
  } else {
    return quotient_of_float<scalar_t>(to_float(v), inv);
  }
}

template <typename scalar_t>
__device__ __forceinline__ float lean_element_quotient(const scalar_t* p, float inv) {
  return lean_element_quotient_of<scalar_t>(lean_element_load(p), inv);
}

// How the lean kernel reads y. Each is a hint to the caches; the bits are the same.
enum class LeanLoad {
  kCached,          // ld.global.nc: the read-only path, default caching
  kStreamingNc,     // ld.global.nc, not allocated in L1, first out of L2
  kEvictFirst,      // ld.global, first out of L1 and of L2 (what Triton emits for evict_first)
  kStreaming,       // ld.global, not allocated in L1, first out of L2
  kCacheStreaming,  // ld.global.cs
  kStreamingNc128,  // kStreamingNc asking L2 to fetch the whole 128-byte line
  kStreamingNc256,  // kStreamingNc asking L2 to fetch 256 bytes around each load
};

#define KB14_LEAN_LOAD(KIND, QUALIFIERS)                                                              \
  __device__ __forceinline__ void lean_load_vec(std::integral_constant<LeanLoad, LeanLoad::KIND>, uint4& r, \
                                                const void* p, uint64_t policy) {                    \
    asm("ld.global" QUALIFIERS ".v4.u32 {%0, %1, %2, %3}, [%4], %5;"                         \
          : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)                                                \
          : "l"(p), "l"(policy));                                                                     \
  }                                                                                                   \
  __device__ __forceinline__ void lean_load_vec(std::integral_constant<LeanLoad, LeanLoad::KIND>, uint2& r, \
                                                const void* p, uint64_t policy) {                    \
    asm("ld.global" QUALIFIERS ".v2.u32 {%0, %1}, [%2], %3;" : "=r"(r.x), "=r"(r.y) : "l"(p), "l"(policy)); \
  }
KB14_LEAN_LOAD(kStreamingNc, ".nc.L1::no_allocate.L2::cache_hint")
KB14_LEAN_LOAD(kEvictFirst, ".L1::evict_first.L2::cache_hint")
KB14_LEAN_LOAD(kStreaming, ".L1::no_allocate.L2::cache_hint")
KB14_LEAN_LOAD(kStreamingNc128, ".nc.L1::no_allocate.L2::cache_hint.L2::128B")
KB14_LEAN_LOAD(kStreamingNc256, ".nc.L1::no_allocate.L2::cache_hint.L2::256B")
#undef KB14_LEAN_LOAD

template <LeanLoad kLoad, typename W>
__device__ __forceinline__ void lean_load_one(W& r, const W* p, uint64_t policy) {
  if constexpr (kLoad == LeanLoad::kCached) {
    r = __ldg(p);
  } else if constexpr (kLoad == LeanLoad::kCacheStreaming) {
    r = __ldcs(p);
  } else {
    lean_load_vec(std::integral_constant<LeanLoad, kLoad>{}, r, p, policy);
  }
}

template <LeanLoad kLoad>
constexpr bool kLoadHasPolicy = kLoad == LeanLoad::kStreamingNc || kLoad == LeanLoad::kEvictFirst ||
                                kLoad == LeanLoad::kStreaming || kLoad == LeanLoad::kStreamingNc128 ||
                                kLoad == LeanLoad::kStreamingNc256;

template <int U, int kStep, LeanLoad kLoad, bool kInBounds = false, typename W>
__device__ __forceinline__ void lean_load(W (&buf)[U], const W* row, int k, int nvec, uint64_t policy) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int idx = k + u * kStep;
    if (kInBounds || idx < nvec) lean_load_one<kLoad>(buf[u], row + idx, policy);
  }
}

// Where row r's aligned vectors start and how many there are. The reference's quotient
// is a fresh tensor: its row r starts (r * cols) mod V elements past a vector boundary;
// the V - shift elements before the next boundary are the row's head, the elements
// after its last whole vector its tail.
template <int V, bool kShifted>
struct LeanRow {
  int shift = 0;
  int base = 0;
  int nvec;  // whole vectors from base
  __device__ __forceinline__ LeanRow(int r, int cols) {
    if constexpr (kShifted) {
      shift = static_cast<int>((int64_t(r) * cols) % V);
      base = shift > 0 ? V - shift : 0;
    }
    nvec = (cols - base) / V;
  }
};

// A logical thread's leaf: its V accumulators added in order.
template <int V>
__device__ __forceinline__ float lean_leaf(const float (&acc)[V]) {
  float leaf = acc[0];
#pragma unroll
  for (int i = 1; i < V; ++i) leaf = leaf + acc[i];
  return leaf;
}

// Adds one vector's quotients to a logical thread's V accumulators, element i to acc[i].
// kPackedMul: two 16-bit quotients per multiply (inv_pair holds 1 / divisor twice; exact
// there: packed_quotient_exact).
template <typename scalar_t, int V, bool kPackedMul, typename W>
__device__ __forceinline__ void lean_add_vector(float (&acc)[V], const W& w, float inv, uint32_t inv_pair) {
  if constexpr (kPackedMul) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      const float2 q = packed_quotient_pair<scalar_t>(word(w, i / 2), inv_pair);
      acc[i] = acc[i] + q.x;
      acc[i + 1] = acc[i + 1] + q.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = acc[i] + quotient_of_float<scalar_t>(element_as_float<scalar_t>(w, i), inv);
  }
}

// inv twice in the type's 16 bits, for the packed multiply.
template <typename scalar_t, bool kPackedMul>
__device__ __forceinline__ uint32_t lean_inv_pair(float inv) {
  if constexpr (kPackedMul) {
    const uint32_t bits = round_to_bits<scalar_t>(inv);
    return bits | (bits << 16);
  }
  return 0;
}

// Warming L2 behind a draining kernel. Back to back, a programmatic dependent's blocks are
// placed while the kernel before it drains and then wait (griddepcontrol.wait) for its end;
// the memory bus idles between the two kernels' reads, about 1 us per call at 1024 x 8192
// fp32. There, each of the first kWarmRowsPerSm * SMs blocks asks L2 for its own row (one
// bulk prefetch) before it waits: a prefetch is safe before the wait, as every SM's writes
// land in L2. In a single call the same prefetch fetches a row its loads then ask for again
// at once (0.6-1.1 us more at 1024 x 8192, tail_variants run54-56), so a block warms only
// where the kernel before it is another warmed launch whose last block let dependents
// launch less than kWarmWindowUnits ago: that launch records its serial number and the
// time (%globaltimer in units of 1024 ns) in warmed_trigger just before its last block's
// trigger (blocks are placed in order, so the last block triggers last). Read before the
// wait, the record is a hint only: no result depends on it. Measured (run57, us, without /
// with): back to back 1024 x 8192 8.70 / 8.08, 4096 x 8192 30.48 / 29.83, 16384 x 8192
// 117.84 / 117.02; single calls taken in turn at 1024 x 8192 no slower (read flush 12.58 /
// 12.48, KernelBench's 13.17 / 13.06, do_bench 13.79 / 13.73). 16-bit rows of 8192 gained
// 0.1-0.25 us back to back and lost up to 0.5 in single calls (run56): not warmed.
// Only plans of more rows than one wave of blocks warm (warm_rows_pay): there the first
// blocks' read of the record (a DRAM latency after a flush evicted it) overlaps the later
// blocks' work; at 128 rows it cost single calls 0.3-0.8 us (run57, read flush 6.14 against
// 5.54), for 0.1 us back to back.
constexpr int kWarmRowsPerSm = 1;
constexpr uint32_t kWarmWindowUnits = 16;
static __device__ uint64_t warmed_trigger;

inline bool warm_rows_pay(int rows, int sms) { return rows > kLeanBlocksPerSm * sms; }

template <typename scalar_t>
__device__ __forceinline__ void warm_behind_warmed_launch(const LeanArgs<scalar_t>& a, int r, const void* row,
                                                          uint32_t bytes) {
  if (threadIdx.x != 0 || r >= kWarmRowsPerSm * sm_count()) return;
  const uint64_t last = *static_cast<volatile uint64_t*>(&warmed_trigger);
  const bool other_launch = static_cast<uint32_t>(last >> 32) != a.launch_serial;
  if (other_launch && warm_clock() - static_cast<uint32_t>(last) < kWarmWindowUnits) bulk_prefetch_to_l2(row, bytes);
}

template <typename scalar_t>
__device__ __forceinline__ void record_warmed_trigger(const LeanArgs<scalar_t>& a, int r) {
  if (threadIdx.x == 0 && r == a.rows - 1)
    *static_cast<volatile uint64_t*>(&warmed_trigger) = uint64_t(a.launch_serial) << 32 | warm_clock();
}

// The end of a block row: the 512 logical threads' leaves meet in the reference's block tree
// (kOrder: each warp's lanes first, or the warps first) and thread 0 stores the row's result.
// smem: kLeanWarps floats where lanes go first, else kLeanBlock. Every thread of the block calls
// it (a barrier).
constexpr int kLeanRowTreeFloats = kOrder.lanes_before_warps ? kLeanWarps : kLeanBlock;

template <typename scalar_t>
__device__ __forceinline__ void lean_block_row_store(float leaf, float* smem, int lane, int warp,
                                                     const LeanArgs<scalar_t>& a, int r) {
  if constexpr (kOrder.lanes_before_warps) {
    const float w = shuffle_tree(leaf, kWarp);
    if (lane == 0) smem[warp] = w;
    __syncthreads();
    if (warp == 0) {
      const float total = warp_tree(lane < kLeanWarps ? smem[lane] : 0.0f, kLeanWarps);
      if (lane == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
    }
  } else {
    // Warps first: for each lane, the halving tree over the 16 warps, then the lanes.
    smem[warp * kWarp + lane] = leaf;
    __syncthreads();
    if (warp == 0) {
      for (int offset = kLeanWarps / 2; offset > 0; offset >>= 1)
        for (int w = 0; w < offset; ++w)
          smem[w * kWarp + lane] = smem[w * kWarp + lane] + smem[(w + offset) * kWarp + lane];
      const float total = shuffle_tree(smem[lane], kWarp);
      if (lane == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
    }
  }
}

// kWarpRows: the reference gives each row one warp (16 rows per 512-thread block)
// instead of one whole block. kShifted: rows may start mid-vector. kExactRows: every row
// holds exactly U vectors per logical thread (fp32 rows of 8192), so no load needs a
// bounds check and there is no loop, as in a kernel compiled for one row length
// (Triton's); the same additions in the same order, 26 registers instead of 32.
// kBlock, kMinBlocks: the physical block and the blocks per SM its registers allow; a
// row-per-block plan keeps the reference's 512 threads. kWarm: loop-free block rows warm
// L2 behind another warmed launch (warm_behind_warmed_launch).
template <typename scalar_t, int V, int U, LeanLoad kLoad, bool kPdl, bool kWarpRows, bool kShifted,
          bool kPackedMul = false, bool kExactRows = false, int kBlock = kLeanBlock,
          int kMinBlocks = kLeanBlocksPerSm, bool kWarm = false>
__global__ void __launch_bounds__(kBlock, kMinBlocks) lean_rows_kernel(LeanArgs<scalar_t> a) {
  static_assert(kWarpRows || kBlock == kLeanBlock, "a row per block needs the reference's block");
  static_assert(!kWarm || (kPdl && kExactRows && !kWarpRows && !kShifted), "warming is for loop-free block rows");
  using W = typename RawVec<sizeof(scalar_t) * V>::type;
  constexpr int kStep = kWarpRows ? kWarp : kLeanBlock;  // logical threads per row
  __shared__ float smem[kWarpRows ? 1 : kLeanRowTreeFloats];
  const int tid = threadIdx.x;
  const int lane = tid % kWarp, warp = tid / kWarp;
  const int t = kWarpRows ? lane : tid;  // logical thread within the row
  // The lean path only takes tensors of fewer than 2^31 elements.
  const int r = kWarpRows ? blockIdx.x * (kBlock / kWarp) + warp : blockIdx.x;
  if (kWarpRows && r >= a.rows) return;
  const LeanRow<V, kShifted> geo(r, a.cols);
  const scalar_t* row_start = a.y + r * a.row_stride;
  const W* row = reinterpret_cast<const W*>(row_start + geo.base);
  const uint64_t policy = kLoadHasPolicy<kLoad> ? evict_first_policy() : 0;
  W buf[U];
  if constexpr (kWarm) warm_behind_warmed_launch(a, r, row, static_cast<uint32_t>(U * kLeanBlock * sizeof(W)));
  if constexpr (kPdl) wait_for_prior_grids();
  lean_load<U, kStep, kLoad, kExactRows>(buf, row, t, geo.nvec, policy);
  // The row's head and tail belong to the first warp's lanes (the reference's
  // should_reduce_tail); the head is added first, the tail after the vectors. A block row
  // reads both while the vectors fly, and takes their quotients only once all three are
  // asked for: read after the vectors, the tail kept the first warp, and so the whole block,
  // one more memory latency (results/kernel_notes.md); its quotient taken at
  // once held the head's load back by another (fixed in bf8b046). Warp rows read the tail after
  // the vectors (early, it spilled the wide kernel).
  const bool owns_edges = kShifted && (kWarpRows || warp == 0);
  const auto owns_head = [&] { return owns_edges && geo.shift > 0 && lane >= geo.shift && lane < V; };
  const auto owns_tail = [&] { return owns_edges && lane < (a.cols - geo.base) % V; };
  const auto head_element = [&] { return row_start + (lane - geo.shift); };
  const auto tail_element = [&] { return row_start + geo.base + geo.nvec * V + lane; };
  scalar_t early_tail{}, early_head{};
  if constexpr (!kWarpRows) {
    if (owns_tail()) early_tail = lean_element_load(tail_element());
    if (owns_head()) early_head = lean_element_load(head_element());
  }
  if constexpr (kWarm) record_warmed_trigger(a, r);
  if constexpr (kPdl) allow_dependent_launch();

  const uint32_t inv_pair = lean_inv_pair<scalar_t, kPackedMul>(a.inv);
  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.0f;
  if (owns_head())
    acc[0] = 0.0f + lean_element_quotient_of<scalar_t>(kWarpRows ? lean_element_load(head_element()) : early_head,
                                                       a.inv);
#pragma unroll 1
  for (int k = t;;) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (kExactRows || k + u * kStep < geo.nvec) lean_add_vector<scalar_t, V, kPackedMul>(acc, buf[u], a.inv, inv_pair);
    }
    if constexpr (kExactRows) break;
    k += U * kStep;
    if (k >= geo.nvec) break;
    lean_load<U, kStep, kLoad>(buf, row, k, geo.nvec, policy);
  }
  if (owns_tail())
    acc[0] = acc[0] + lean_element_quotient_of<scalar_t>(kWarpRows ? lean_element_load(tail_element()) : early_tail,
                                                         a.inv);
  const float leaf = lean_leaf(acc);

  if constexpr (kWarpRows) {
    const float total = shuffle_tree(leaf, kWarp);
    if (lane == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
  } else {
    lean_block_row_store(leaf, smem, lane, warp, a, r);
  }
}

// A warp-per-row plan with few rows, staged: one row per 32-thread block. The row's
// whole vectors are first copied into shared memory at once (the whole row in flight,
// nothing held in registers; on sm_90 one bulk copy unless kBulkCopy is false:
// warp_staged_copy), then each lane adds its own in the reference's order from there,
// exactly as lean_rows_kernel's warp rows do. The library's fp32 staged rows take
// split_lane_rows_kernel's staged form instead (the same copy, 128 threads
// adding); this one stays for comparisons (scripts/tail_variants.cu, variants 38 and 44).
template <typename scalar_t, int V, bool kPdl, bool kShifted, bool kPackedMul, bool kBulkCopy = true>
__global__ void __launch_bounds__(kWarp) staged_warp_rows_kernel(LeanArgs<scalar_t> a) {
  using W = typename RawVec<sizeof(scalar_t) * V>::type;
  // The bulk copy writes whole 128-byte lines of shared memory when its destination is
  // aligned to them.
  extern __shared__ __align__(128) uint4 staged_raw[];
  __shared__ uint64_t landed;
  W* staged = reinterpret_cast<W*>(staged_raw);
  const int lane = threadIdx.x;
  const int r = blockIdx.x;
  const LeanRow<V, kShifted> geo(r, a.cols);
  const scalar_t* row_start = a.y + r * a.row_stride;
  const W* row = reinterpret_cast<const W*>(row_start + geo.base);
  const uint64_t policy = evict_first_policy();
  warp_staged_copy_init<kBulkCopy>(&landed, lane);
  if constexpr (kPdl) wait_for_prior_grids();
  warp_staged_copy<kBulkCopy>(staged, row, geo.nvec, lane, &landed, policy);
  // The row's head and tail elements (rows that start mid-vector) are read while the
  // copy flies; they are added first and last, as in lean_rows_kernel.
  const bool has_head = kShifted && geo.shift > 0 && lane >= geo.shift && lane < V;
  const bool has_tail = kShifted && lane < (a.cols - geo.base) % V;
  const float head = has_head ? lean_element_quotient(row_start + (lane - geo.shift), a.inv) : 0.0f;
  const float tail = has_tail ? lean_element_quotient(row_start + geo.base + geo.nvec * V + lane, a.inv) : 0.0f;
  if constexpr (kPdl) allow_dependent_launch();
  warp_staged_copy_wait<kBulkCopy>(&landed);

  const uint32_t inv_pair = lean_inv_pair<scalar_t, kPackedMul>(a.inv);
  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.0f;
  if (has_head) acc[0] = 0.0f + head;
#pragma unroll 4
  for (int k = lane; k < geo.nvec; k += kWarp) lean_add_vector<scalar_t, V, kPackedMul>(acc, staged[k], a.inv, inv_pair);
  if (has_tail) acc[0] = acc[0] + tail;
  const float total = shuffle_tree(lean_leaf(acc), kWarp);
  if (lane == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
}

// A warp-per-row plan spread over 128 threads, four a lane. Each of the reference's 32 lanes
// keeps one independent accumulator per element of its 16-byte vectors (lean_add_vector): four
// in fp32, eight in 16-bit types, so a row holds 128 or 256 chains of additions, not 32. Thread
// t reads 4-byte words t, t + 128, ... of the row's whole vectors (from base, its first whole
// vector), U of them in flight: word t of each step is lane t / 4's, and holds its accumulator
// t % 4 (fp32) or its accumulators 2 (t % 4) and 2 (t % 4) + 1 (two 16-bit elements), in that
// lane's order. kShifted: rows may start mid-vector; lane l's head element (l - shift, for
// shift <= l < V) goes first and its tail element last into its accumulator 0, on thread 4 l,
// as in lean_rows_kernel. A lane's accumulators then meet on thread 4 l in lean_leaf's order
// and the 32 lane leaves go through the reference's shuffle tree in the first warp. Four
// times the threads and loads in flight per row of the warp-per-row kernels, without staging
// the row. Its loads are .cs (evict-first without a policy register): with the policy each of
// the U loads kept its own 64-bit address and the kernel spilled.
constexpr int kLaneAccumulators = kInputVec<float>;  // an fp32 lane's accumulators: one per vector element
constexpr int kSplitLaneThreads = kWarp * kLaneAccumulators;
constexpr int kSplitLaneThreadsPerLane = kSplitLaneThreads / kWarp;
constexpr LeanLoad kSplitLaneLoad = LeanLoad::kCacheStreaming;

// What a split-lane thread loads (a 4-byte word: one fp32 element or two 16-bit ones) and the
// accumulators it keeps, one per element of its word.
template <typename scalar_t>
using SplitLaneWord = std::conditional_t<sizeof(scalar_t) == 4, float, uint32_t>;
template <typename scalar_t>
constexpr int kSplitLaneThreadAccumulators = kInputVec<scalar_t> / kSplitLaneThreadsPerLane;

// Adds one word's quotients to its thread's accumulators, element i to acc[i] (kPackedMul: as
// lean_add_vector).
template <typename scalar_t, bool kPackedMul>
__device__ __forceinline__ void split_lane_add(float (&acc)[kSplitLaneThreadAccumulators<scalar_t>],
                                               const SplitLaneWord<scalar_t>& w, float inv, uint32_t inv_pair) {
  if constexpr (sizeof(scalar_t) == 4) {
    acc[0] = acc[0] + quotient_of_float<scalar_t>(w, inv);
  } else if constexpr (kPackedMul) {
    const float2 q = packed_quotient_pair<scalar_t>(w, inv_pair);
    acc[0] = acc[0] + q.x;
    acc[1] = acc[1] + q.y;
  } else {
    acc[0] = acc[0] + quotient_of_float<scalar_t>(element_as_float<scalar_t>(w, 0), inv);
    acc[1] = acc[1] + quotient_of_float<scalar_t>(element_as_float<scalar_t>(w, 1), inv);
  }
}

// The end of a row whose lane l keeps its accumulators on threads 4 l .. 4 l + 3 (acc: thread
// t's): they meet in lean_leaf's order on thread 4 l, and the 32 lane leaves go through the
// reference's shuffle tree in the first warp, which stores the row's result. Every thread of
// the block calls it (a barrier).
template <typename scalar_t, int kAcc>
__device__ __forceinline__ void split_lane_store(const float (&acc)[kAcc], int t, int lane,
                                                 float (&lane_leaves)[kWarp], const LeanArgs<scalar_t>& a, int r) {
  float lane_acc[kSplitLaneThreadsPerLane * kAcc];
#pragma unroll
  for (int q = 0; q < kSplitLaneThreadsPerLane; ++q) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) lane_acc[q * kAcc + i] = q == 0 ? acc[i] : __shfl_down_sync(0xffffffffu, acc[i], q);
  }
  if (t % kSplitLaneThreadsPerLane == 0) lane_leaves[lane] = lean_leaf(lane_acc);
  __syncthreads();
  if (t < kWarp) {
    const float total = shuffle_tree(lane_leaves[t], kWarp);
    if (t == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
  }
}

// The same for fp32's single accumulator per thread.
__device__ __forceinline__ void split_lane_store(float acc, int t, int lane, float (&lane_leaves)[kWarp],
                                                 const LeanArgs<float>& a, int r) {
  const float one[1] = {acc};
  split_lane_store(one, t, lane, lane_leaves, a, r);
}

// kStaged: the row's whole vectors are first copied into shared memory (one bulk copy
// on sm_90, the staged kernel's; before, each thread copies vectors t, t + 128, ...), and each
// thread adds its elements from there: the staged kernel's copy with 128 threads adding
// instead of 32 (U unused). Against staged_warp_rows_kernel (results/kernel_notes.md),
// back to back 0.08-0.24 us faster at 512-1024 rows of 4096-5001 columns and
// 0.17-0.22 at 16 x 7000 and 64 x 8000, within 0.05 at 1024 x 2049-3001 and 100-256 x 3000;
// single calls after a read flush 0.06-0.22 faster at four of five shapes, a tie at 1024 x 3000.
// The library stages fp32 rows only: 16-bit rows staged were slower than unstaged (run91).
// kPackedMul: 16-bit quotients two per multiply (lean_add_vector's).
template <int U, int kMinBlocks, bool kPdl, bool kShifted = false, bool kStaged = false, typename scalar_t = float,
          bool kPackedMul = false>
__global__ void __launch_bounds__(kSplitLaneThreads, kMinBlocks) split_lane_rows_kernel(LeanArgs<scalar_t> a) {
  constexpr int V = kInputVec<scalar_t>;
  constexpr int kAcc = kSplitLaneThreadAccumulators<scalar_t>;
  using Word = SplitLaneWord<scalar_t>;
  extern __shared__ __align__(128) uint4 split_lane_staged[];
  __shared__ float lane_leaves[kWarp];
  __shared__ uint64_t landed;
  constexpr bool kBulk = kStaged && kHasBulkCopy;
  const int t = threadIdx.x;
  const int r = blockIdx.x;
  const LeanRow<V, kShifted> geo(r, a.cols);
  const scalar_t* row_start = a.y + r * a.row_stride;
  const scalar_t* row = row_start + geo.base;
  const Word* words = reinterpret_cast<const Word*>(row);
  const int n = geo.nvec * kSplitLaneThreadsPerLane;  // the words of whole vectors, from base
  const uint64_t policy = kStaged || kLoadHasPolicy<kSplitLaneLoad> ? evict_first_policy() : 0;
  Word buf[kStaged ? 1 : U];
  if constexpr (kBulk) {
    if (t == 0) {
      mbarrier_init(&landed, 1);
      fence_mbarrier_init();
    }
    __syncthreads();
  }
  if constexpr (kPdl) wait_for_prior_grids();
  if constexpr (kStaged) {
    const uint4* vectors = reinterpret_cast<const uint4*>(row);
    if constexpr (kBulk) {
      if (t == 0) {
        const uint32_t bytes = static_cast<uint32_t>(geo.nvec) * sizeof(uint4);
        mbarrier_arrive_expecting(&landed, bytes);
        if (bytes > 0) bulk_copy_to_shared(split_lane_staged, vectors, bytes, &landed, policy);
      }
    } else {
      for (int k = t; k < geo.nvec; k += kSplitLaneThreads)
        copy_to_shared_async(split_lane_staged + k, vectors + k, policy);
    }
  } else {
    lean_load<U, kSplitLaneThreads, kSplitLaneLoad>(buf, words, t, n, policy);
  }
  // Lane t / 4's edges, on its accumulator 0 (thread 4 l), read while the row's loads fly.
  const int lane = t / kSplitLaneThreadsPerLane;
  const bool edge_thread = kShifted && t % kSplitLaneThreadsPerLane == 0;
  const bool has_head = edge_thread && geo.shift > 0 && lane >= geo.shift && lane < V;
  const bool has_tail = edge_thread && lane < (a.cols - geo.base) % V;
  const float head = has_head ? lean_element_quotient(row_start + (lane - geo.shift), a.inv) : 0.0f;
  const float tail = has_tail ? lean_element_quotient(row + geo.nvec * V + lane, a.inv) : 0.0f;
  if constexpr (kPdl) allow_dependent_launch();
  const uint32_t inv_pair = lean_inv_pair<scalar_t, kPackedMul>(a.inv);
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  if (has_head) acc[0] = 0.0f + head;
  if constexpr (kStaged) {
    if constexpr (kBulk) {
      mbarrier_wait(&landed);
    } else {
      wait_for_own_copies();
      __syncthreads();
    }
    const Word* staged = reinterpret_cast<const Word*>(split_lane_staged);
#pragma unroll 8
    for (int k = t; k < n; k += kSplitLaneThreads)
      split_lane_add<scalar_t, kPackedMul>(acc, staged[k], a.inv, inv_pair);
  } else {
#pragma unroll 1
    for (int k = t;;) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u * kSplitLaneThreads < n) split_lane_add<scalar_t, kPackedMul>(acc, buf[u], a.inv, inv_pair);
      }
      k += U * kSplitLaneThreads;
      if (k >= n) break;
      lean_load<U, kSplitLaneThreads, kSplitLaneLoad>(buf, words, k, n, policy);
    }
  }
  if (has_tail) acc[0] = acc[0] + tail;
  split_lane_store(acc, t, lane, lane_leaves, a, r);
}

// ---------------------------------------------------------------------------
// Launchers. They return the launch's error; the caller turns it into an exception.
// ---------------------------------------------------------------------------

// The general kernels, one logical thread per physical thread (the reference's own block
// shape: 2, 4, 8 or 16 logical threads per physical thread measured slower, kernel_notes.md).
// `programmatic`: each kernel launched as a programmatic dependent of the one before
// (they wait for it before touching memory, as the lean kernel does).
template <typename scalar_t, int V>
cudaError_t launch_general(const Plan& p, const Args<scalar_t>& a, cudaStream_t stream, bool programmatic) {
  constexpr int U = V == 8 ? 2 : 4;  // vectors each logical thread keeps in flight (32-64 bytes)
  const dim3 block(p.bx, p.by);
  if (!p.split_y) {
    const dim3 grid(static_cast<unsigned>(ceil_div(p.rows, p.by)));
    return launch_programmatic(warp_row_kernel<scalar_t, V, U>, grid, block, 0, stream, programmatic, a,
                               p.vectorized);
  }
  const dim3 grid(static_cast<unsigned>(p.rows), p.ctas);
  const cudaError_t err =
      launch_programmatic(split_row_kernel<scalar_t, V, U>, grid, block, 0, stream, programmatic, a, p.vectorized);
  if (err != cudaSuccess || p.ctas == 1) return err;
  return launch_programmatic(combine_blocks_kernel<scalar_t>, dim3(static_cast<unsigned>(p.rows)), block, 0, stream,
                             programmatic, a);
}

// Whether the lean path reproduces the plan: 32 lanes per row, a row per 32 x 16
// block (split across its warps, in one block) or per warp, unit-stride columns, and
// each row's vectors aligned in memory as in the reference's quotient (row r of y is
// as far past a vector boundary as row r of a fresh tensor of this shape).
template <typename scalar_t, int V>
bool lean_path_applies(const Plan& p, const Args<scalar_t>& a) {
  static_assert(sizeof(scalar_t) < 8, "the lean path is for float, half and bfloat16");
  return p.vectorized && p.bx == kWarp && p.ctas == 1 && (!p.split_y || p.by == kLeanWarps) &&
         a.col_stride == 1 && (a.row_stride - a.cols) % V == 0 &&
         reinterpret_cast<uintptr_t>(a.y) % (sizeof(scalar_t) * V) == 0 && a.rows * a.row_stride <= INT32_MAX;
}

// The library's choice of load (measured: results/kernel_notes.md); others for comparisons.
constexpr LeanLoad kLeanLoad = LeanLoad::kStreamingNc;

// The most rows of the fp32 staged and split-lane plans (staged_warp_rows_pay says why).
constexpr int kStagedMaxRows = 1536;

struct LeanOptions {
  bool programmatic_launch = true;  // honoured on sm_90 and newer
  bool exact_rows = true;           // the loop-free kernel where it applies (launch_lean_shape)
  bool deep_warp_rows = true;       // 16 vectors per lane on warp-per-row plans with few rows
  bool staged_warp_rows = true;     // fp32 warp-per-row plans with few long rows, staged: split_lane_rows_kernel
  bool five_vector_rows = true;     // fp32 block-per-row plans of five vectors per thread in one round
  bool deep_block_rows = true;      // 8 vectors in flight per thread on long 16-bit block-per-row plans
  bool wide_warp_rows = true;       // 8 vectors per lane on fp32 warp-per-row plans with many rows
  bool split_lane_rows = true;      // fp32 warp-per-row plans of 128-1536 long rows: split_lane_rows_kernel
  bool split_lane_16bit_rows = true;  // 16-bit warp-per-row plans of the deep kernel's rows: split_lane_rows_kernel
  int staged_max_rows = kStagedMaxRows;  // the staged and split-lane fp32 plans' most rows
  bool warm_rows = true;            // fp32 rows of one chunk warm L2 behind another warmed launch
};

// The lean kernels a build instantiates. The library's CUDA module is built for one GPU
// architecture, and kernels/jit.py says which launch that GPU takes: KB14_PROGRAMMATIC_LAUNCH=1
// on sm_90 and newer (programmatic launches only), 0 below; each halves the lean kernels
// to compile. Left undefined (comparison builds), both are compiled and chosen per call.
#if defined(KB14_PROGRAMMATIC_LAUNCH)
constexpr int kProgrammaticBuild = KB14_PROGRAMMATIC_LAUNCH;
#else
constexpr int kProgrammaticBuild = -1;
#endif

// Whether a call's kernels launch as programmatic dependents: as the build says, else
// where asked and the GPU has it.
inline bool launch_is_programmatic(bool wanted, const DeviceShape& prop) {
  if constexpr (kProgrammaticBuild >= 0) return kProgrammaticBuild == 1;
  return wanted && prop.compute_major >= 9;
}

// Calls launch(std::bool_constant<kPackedMul>{}): with the packed 16-bit multiply where it
// is exact for this divisor (packed_quotient_exact), else the scalar one.
template <typename scalar_t, typename Launch>
cudaError_t with_packed_mul(const LeanArgs<scalar_t>& a, Launch&& launch) {
  if constexpr (sizeof(scalar_t) == 2) {
    if (packed_quotient_exact<scalar_t>(a.inv)) return launch(std::true_type{});
  }
  return launch(std::false_type{});
}

// Calls launch(packed, shifted), two std::bool_constant: the packed multiply as
// with_packed_mul chooses it, and whether rows may start mid-vector (the reference's
// quotient: any column count that is not a multiple of V). kAlignedRows: the caller's rows
// are whole vectors (rows of one chunk), so only the aligned kernel is built.
template <typename scalar_t, int V, bool kAlignedRows = false, typename Launch>
cudaError_t with_lean_flags(const LeanArgs<scalar_t>& a, Launch&& launch) {
  return with_packed_mul(a, [&](auto packed) {
    if constexpr (!kAlignedRows) {
      if (a.cols % V != 0) return launch(packed, std::true_type{});
    }
    return launch(packed, std::false_type{});
  });
}

// One block per row, or (kWarpRows) one warp per row in kBlock-thread blocks.
template <typename scalar_t, int V, int U, LeanLoad kLoad, bool kPdl, bool kWarpRows, bool kExactRows = false,
          int kBlock = kLeanBlock, int kMinBlocks = kLeanBlocksPerSm, bool kWarm = false>
cudaError_t launch_lean_variant(const LeanArgs<scalar_t>& a, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(kWarpRows ? ceil_div(a.rows, kBlock / kWarp) : a.rows);
  return with_lean_flags<scalar_t, V, kExactRows>(a, [&](auto packed, auto shifted) {
    return launch_programmatic(lean_rows_kernel<scalar_t, V, U, kLoad, kPdl, kWarpRows, decltype(shifted)::value,
                                                decltype(packed)::value, kExactRows, kBlock, kMinBlocks, kWarm>,
                               dim3(grid), dim3(kBlock), 0, stream, kPdl, a);
  });
}

// Vectors in flight per thread, as many as 32 registers hold without spilling beside
// the rest: 64 bytes (fp32) or 32 (16-bit) when a block owns the row; 32 bytes when a
// warp owns it (each warp then keeps its own row address; three fp32 vectors spill).
template <int V> constexpr int kLeanRowU = V == 8 ? 2 : 4;
constexpr int kLeanWarpRowU = 2;

// Whether a block-per-row plan's rows hold exactly kLeanRowU vectors per thread: the rows
// of the loop-free kernel (kExactRows).
template <int V>
bool lean_rows_are_one_chunk(int cols) {
  return cols == kLeanRowU<V> * V * kLeanBlock;
}

// The staged kernel holds a row's whole vectors in shared memory: rows of up to 48 KiB
// (every warp-per-row plan's rows are shorter).
constexpr size_t kStagedRowBytes = 48 * 1024;

template <typename scalar_t, int V>
size_t staged_row_bytes(int cols) {
  return size_t(cols / V) * sizeof(typename RawVec<sizeof(scalar_t) * V>::type);
}

template <typename scalar_t, int V, bool kPdl, bool kBulkCopy = true>
cudaError_t launch_staged_warp_rows(const LeanArgs<scalar_t>& a, cudaStream_t stream) {
  return with_lean_flags<scalar_t, V>(a, [&](auto packed, auto shifted) {
    return launch_programmatic(staged_warp_rows_kernel<scalar_t, V, kPdl, decltype(shifted)::value,
                                                       decltype(packed)::value, kBulkCopy>,
                               dim3(static_cast<unsigned>(a.rows)), dim3(kWarp), staged_row_bytes<scalar_t, V>(a.cols),
                               stream, kPdl, a);
  });
}

// The launch bounds' 128-thread blocks per SM for U split-lane loads, as measured: 32 at 8
// (56 registers), 48 at 5 (72, so 7 run), 64 at 4 (89, so 5 run); asking 6 or 8 of the wider
// two was slower (run39).
template <int U>
constexpr int kSplitLaneMinBlocks = U <= 32 ? 8 : U <= 48 ? 5 : 4;

// split_lane_rows_kernel with U loads in flight per thread (kMinBlocks: registers for that
// many 128-thread blocks per SM), or with the row staged in shared memory (kStaged).
template <int U, bool kPdl, int kMinBlocks = kSplitLaneMinBlocks<U>, bool kStaged = false, typename scalar_t>
cudaError_t launch_split_lane_rows(const LeanArgs<scalar_t>& a, cudaStream_t stream) {
  constexpr int V = kInputVec<scalar_t>;
  const size_t smem = kStaged ? staged_row_bytes<scalar_t, V>(a.cols) : 0;
  return with_lean_flags<scalar_t, V>(a, [&](auto packed, auto shifted) {
    return launch_programmatic(split_lane_rows_kernel<U, kMinBlocks, kPdl, decltype(shifted)::value, kStaged, scalar_t,
                                                      decltype(packed)::value>,
                               dim3(static_cast<unsigned>(a.rows)), dim3(kSplitLaneThreads), smem, stream, kPdl, a);
  });
}

template <bool kPdl, typename scalar_t>
cudaError_t launch_staged_split_lane_rows(const LeanArgs<scalar_t>& a, cudaStream_t stream) {
  return launch_split_lane_rows<1, kPdl, 1, true>(a, stream);
}

// A warp-per-row plan has one warp per row, so when rows are few only loads in flight
// per lane can cover the memory latency: up to 4096 rows of at least 4 vectors per lane,
// each lane keeps 16 in flight (128 registers, 128-thread blocks). Measured 1.3-3x faster
// at 128-4096 rows; with more rows the 2-vector kernel at full occupancy was as fast or
// faster (results/kernel_notes.md), and in fp32 the wide kernel below faster still.
constexpr int kDeepWarpRowU = 16;
constexpr int kDeepWarpRowBlock = 128;
constexpr int kDeepWarpRowBlocksPerSm = 4;

// Whether each lane of a warp-per-row plan adds at least 4 vectors: below that the deep and
// wide kernels keep no more in flight than the 2-vector kernel.
template <int V>
bool warp_rows_hold_four_vectors(int cols) {
  return cols >= 4 * kWarp * V;
}

constexpr int kDeepWarpRowMaxRows = 4096;

template <int V>
bool deep_warp_rows_pay(int rows, int cols) {
  return rows <= kDeepWarpRowMaxRows && warp_rows_hold_four_vectors<V>(cols);
}

// 16-bit rows where the deep kernel would go take split_lane_rows_kernel instead (two of a
// lane's eight accumulators a thread, 4-byte loads, 128 threads a row): 16 loads in flight
// where a thread's share of the row passes 8 words (rows of more than 2048 columns), else 8.
// Measured (results/kernel_notes.md; bits equal), us, deep kernel / this, back
// to back (tail_variants run90): bf16 1024 x 7000 5.95 / 5.27 (Inductor's inexact tail
// 5.37), 1024 x 4096 3.93 / 3.59, 512 x 4096 2.96 / 2.63, 4096 x 4096 9.51 / 8.86, 1024 x
// 1024 2.20 / 2.12, 129 x 1031 2.07 / 1.58, fp16 2048 x 2048 3.76 / 3.50; single calls in
// turn 0.48-0.88 faster after a read flush and 0.61-0.86 under KernelBench's timing
// (1024 x 7000, 1024 x 4096, 4096 x 4096). With 8 loads past 2048 columns it was slower
// (1024 x 7000: 6.42), with 16 at or below (2048 x 2048: 4.00, 1024 x 1024: 2.56). With more
// rows than the deep kernel takes, the two-vector warp rows stay faster (16384 x 2048: 16.53
// against 20.54, 8192 x 1024: 5.24 against 10.59). Two threads a lane (8-byte loads, four
// accumulators each) were no faster, and 32 loads in flight spilled (run89).
constexpr int kSplitLane16BitWideShare = 8;  // words a thread beyond which 16 loads fly

template <int V>
int split_lane_16bit_loads(int rows, int cols) {
  if (!deep_warp_rows_pay<V>(rows, cols)) return 0;
  const int64_t words_per_thread = ceil_div(int64_t(cols), int64_t(2) * kSplitLaneThreads);  // two elements a word
  return words_per_thread > kSplitLane16BitWideShare ? 16 : 8;
}

// Up to max_rows rows (LeanOptions::staged_max_rows) of more vectors per lane than the deep
// kernel keeps in flight (fp32: over 2048 columns), its lanes would wait on memory twice or
// more: there the staged kernel puts the whole row in flight at once (in
// split_lane_rows_kernel's staged form; the figures below are staged_warp_rows_kernel's).
// Measured back to back with the bulk copy (results/kernel_notes.md), us, against per-lane
// copies: 128 x 6000 2.75 -> 2.63, 512 x 8000 7.42 -> 5.84, 1024 x 4096 6.61 -> 5.55; against
// the deep kernel: 1024 x 3000 4.95 -> 4.63. Slower in 16-bit types (1024 x 7000 bf16: 5.94 ->
// 6.40, and 5.83 against the 16-bit split lanes' 5.27 in run91), so launch_lean_shape takes it
// for fp32 only. Up to 1024 rows at first; past them the deep kernel left the SMs short
// of rows in flight up to 1536 (tail_variants run92, back to back: 1025 x 4096 6.02 against the
// staged kernel's 5.38, 1536 x 6000 11.64 against 64 split-lane loads' 9.91), and from 2048 rows
// it ties or wins (2048 x 4096 9.06 against 8.93 staged, 2048 x 3000 7.12 against 7.43, 4096 x
// 4096 16.22 against 16.14, 3000 x 8000 22.55 against 22.48). The 1536-row limit, checked
// (run93, back to back, 1024 / 1536): 1100 x 2500 5.44 / 4.39, 1200 x 5000 9.67 / 7.10, 1280 x
// 8000 14.17 / 10.79, 1300 x 4097 8.38 / 7.33, 1536 x 3000 6.73 / 6.30; single calls mixed
// (after a read flush in turn 1025 x 4096 0.67 faster, 1536 x 6000 0.26 slower; 1300 x 4097
// 0.64 slower in a plain read-flush median).
template <typename scalar_t, int V>
bool staged_warp_rows_pay(int rows, int cols, int max_rows) {
  return rows <= max_rows && cols > kDeepWarpRowU * kWarp * V && staged_row_bytes<scalar_t, V>(cols) <= kStagedRowBytes;
}

// Of the staged kernel's rows (128 rows or more), those longer than one round of 32 loads per
// thread (4096 columns) take split_lane_rows_kernel, with as many loads in flight per thread
// as split_lane_loads says (0: the staged kernel), and so do rows that start mid-vector with a
// share of 25-32 values per thread: the staged kernel copies such rows more slowly than aligned
// ones (1000 x 4095 6.08 us back to back, 1024 x 4096 5.55), and 32 loads won there under every
// method (1000 and 1024 x 4095: 5.48 and 5.54 back to back against 6.08 and 6.05, 0.16-0.19
// faster after a read flush in turn, 0.18-0.22 under KernelBench's timing; runs 78-81). At
// shares of 24 or less the staged kernel won or tied (1024 x 2049: 3.81 against 3.94 back to
// back, 0.42 faster after a read flush; 1024 x 3001 mixed), and at longer shifted rows the
// rule below picked the faster kernel at all five measured (700 x 4099, 512 x 5001: staged;
// 1024 x 5001, 640 x 6001, 256 x 8001: split). The aligned rows were measured back to back at
// 44 shapes (results/kernel_notes.md; where
// the staged kernel wins back to back, 48 loads were 0.2-0.5 us faster under KernelBench's
// timing, run46); us, staged / 32 / 48 / 64 loads:
//   * up to 256 rows, the whole row in one round: 48 loads up to a 48-value share per
//     thread, 64 beyond (128 x 6000 2.63 / 2.88 / 2.34 / 2.45, 256 x 8000
//     3.91 / 3.93 / 4.16 / 3.75);
//   * 257-576 rows, two rounds of 32 where the share passes 48 values (384 x 8000
//     4.72 / 4.51 / 4.88 / 5.13, 576 x 8000 6.21 / 5.62 / 7.57 / 6.22), else 48 up to 384 rows
//     (320 x 6000 3.62 / 3.78 / 3.47 / 3.98) and the staged kernel beyond (480 x 5500
//     4.32 / 4.51 / 4.73 / 4.72, 512 x 5000 4.15 / 4.61 / 4.66 / 4.57);
//   * 577-1024 rows (up to kStagedMaxRows), one round: 64 loads above a
//     40-value share (620 x 8000 6.56 / 7.27 / 7.64 / 6.29, 768 x 6000 6.38 / 7.41 / 6.33 /
//     6.17); up to it 48 above 768 rows (1024 x 5000 6.90 / 7.37 / 6.48 / 6.70), else the
//     staged kernel (700 x 4100 4.45 / 5.18 / 4.73 / 5.22).
// Why the middle rows differ was not found (every variant keeps all their rows resident).
constexpr int kSplitLaneMinRows = 128;
constexpr int kShiftedSplitLaneMinShare = 24;

template <typename scalar_t, int V>
int split_lane_loads(int rows, int cols, int max_rows) {
  if (!staged_warp_rows_pay<scalar_t, V>(rows, cols, max_rows) || rows < kSplitLaneMinRows) return 0;
  const int64_t share = ceil_div(cols, kSplitLaneThreads);
  if (share <= 32) return cols % V != 0 && share > kShiftedSplitLaneMinShare ? 32 : 0;
  if (rows <= 256) return share <= 48 ? 48 : 64;
  if (rows <= 576) return share > 48 ? 32 : rows <= 384 ? 48 : 0;
  if (share > 40) return 64;
  return rows > 768 ? 48 : 0;
}

// A block-per-row plan whose threads hold five vectors each (fp32: 8196..10243 columns)
// would wait on memory twice with kLeanRowU in flight, the second time for at most one
// vector; five in flight (40 registers, 3 blocks per SM) fetch the row in one round.
// Measured 6-9% faster at 1024 x 9000..10240 and 2048 x 10007 back to back; fp32 only
// (five 16-bit vectors spill at 40 registers, and four gave bf16 nothing).
constexpr int kFiveVectorRowU = 5;
constexpr int kFiveVectorRowBlocksPerSm = 3;

// The vectors each thread of a block-per-row plan adds, at most (the first threads take one
// more where the row's vectors do not divide evenly).
template <int V>
int64_t block_row_vectors_per_thread(int cols) {
  return ceil_div(cols / V, kLeanBlock);
}

template <int V>
bool lean_rows_hold_five_vectors(int cols) {
  return block_row_vectors_per_thread<V>(cols) == kFiveVectorRowU;
}

// 16-bit block-per-row rows of at least eight vectors per thread (32768 columns and up)
// that are not one chunk: with kLeanRowU (two) in flight at four blocks per SM each thread
// waits on memory four or more times per row; eight in flight at two blocks per SM (64
// registers, no spills) keep twice the bytes in flight per SM in a quarter of the rounds.
// They pay where each thread's last round holds at least six of its eight; a shorter last
// round lost more than the full rounds won (why was not profiled).
// Back to back, bf16 and 1024 rows unless named, us, two / eight (results/kernel_notes.md,
// runs 45-51), by vectors per thread: 16 (65536 columns) 31.00 / 30.80, 128 x 65536
// 6.80 / 5.67, 4096 x 65536 117.00 / 116.39; 15 (61440) 29.42 / 29.17; 24 (98304)
// 45.51 / 45.39; 8, 14 and 32 a tie (fp16 too); 9 (36864) 18.60 / 21.13, 10 (40960)
// 20.30 / 22.17, 12 (49152) 23.88 / 24.40, 20 (81920) 38.25 / 38.47. Where the rows are no
// more than the SMs, each row's block has an SM to itself under either kernel, and eight in
// flight won at every length of eight or more vectors per thread (run51: 32 x 36864
// 3.83 / 3.18, 32 x 81920 6.74 / 4.63, 128 x 36864 4.65 / 4.51, 128 x 49152 5.57 / 4.92);
// from 200 rows on a short last round lost again (200 x 36864 5.49 / 6.12). fp32 gained
// nothing (1024 x 32768, 65536).
constexpr int kDeepBlockRowU = 8;
constexpr int kDeepBlockRowBlocksPerSm = 2;
constexpr int kDeepBlockRowMinLastRound = 6;

template <int V>
bool deep_block_rows_pay(int rows, int cols, int sms) {
  const int64_t per_thread = block_row_vectors_per_thread<V>(cols);
  const int64_t last_round = per_thread % kDeepBlockRowU;
  return per_thread >= kDeepBlockRowU &&
         (rows <= sms || last_round == 0 || last_round >= kDeepBlockRowMinLastRound);
}

// Warp-per-row plans with more rows than the deep kernel takes, of at least 4 vectors per
// lane: 2 vectors in flight per lane leave each lane waiting on memory two or more times in
// turn. In fp32, 8 per lane (64 registers, no spills; 256-thread blocks, 4 per SM) were
// faster back to back at 8192 x 600..8000 and 16384 x 1024 (8192 x 1024: 9.02 -> 8.74 us,
// 6000 x 8000: 54.5 -> 43.4), and in single calls at 8192 x 600..2048 and 16384 x 1024
// (results/kernel_notes.md); 16-bit types spill at 64 registers and were slower.
constexpr int kWideWarpRowU = 8;
constexpr int kWideWarpRowBlock = 256;
constexpr int kWideWarpRowBlocksPerSm = 4;

template <int V>
bool wide_warp_rows_pay(int rows, int cols) {
  return rows > kDeepWarpRowMaxRows && warp_rows_hold_four_vectors<V>(cols);
}

// A number for each warmed launch of this process (LeanArgs::launch_serial).
inline uint32_t next_launch_serial() {
  static std::atomic<uint32_t> serial{0};
  return serial.fetch_add(1, std::memory_order_relaxed) + 1;
}

// Rows of one chunk (8192 columns) take the loop-free kernel: measured faster there in every
// type (results/kernel_notes.md).
template <typename scalar_t, int V, LeanLoad kLoad, bool kPdl>
cudaError_t launch_lean_shape(const LeanArgs<scalar_t>& a, bool warp_rows, const DeviceShape& prop, const LeanOptions& opt,
                              cudaStream_t stream) {
  constexpr int U = kLeanRowU<V>;
  if (!warp_rows) {
    if (opt.exact_rows && lean_rows_are_one_chunk<V>(a.cols)) {
      if constexpr (sizeof(scalar_t) == 4 && kPdl) {
        if (opt.warm_rows && warm_rows_pay(a.rows, prop.multiprocessors)) {
          LeanArgs<scalar_t> warmed = a;
          warmed.launch_serial = next_launch_serial();
          return launch_lean_variant<scalar_t, V, U, kLoad, kPdl, false, true, kLeanBlock, kLeanBlocksPerSm, true>(
              warmed, stream);
        }
      }
      return launch_lean_variant<scalar_t, V, U, kLoad, kPdl, false, true>(a, stream);
    }
    if constexpr (sizeof(scalar_t) == 4) {
      if (opt.five_vector_rows && lean_rows_hold_five_vectors<V>(a.cols))
        return launch_lean_variant<scalar_t, V, kFiveVectorRowU, kLoad, kPdl, false, false, kLeanBlock,
                                   kFiveVectorRowBlocksPerSm>(a, stream);
    }
    if constexpr (sizeof(scalar_t) == 2) {
      if (opt.deep_block_rows && deep_block_rows_pay<V>(a.rows, a.cols, prop.multiprocessors))
        return launch_lean_variant<scalar_t, V, kDeepBlockRowU, kLoad, kPdl, false, false, kLeanBlock,
                                   kDeepBlockRowBlocksPerSm>(a, stream);
    }
    return launch_lean_variant<scalar_t, V, U, kLoad, kPdl, false>(a, stream);
  }
  if constexpr (std::is_same_v<scalar_t, float>) {  // the split, staged and wide kernels: measured in fp32 only
    switch (opt.split_lane_rows ? split_lane_loads<scalar_t, V>(a.rows, a.cols, opt.staged_max_rows) : 0) {
      case 32: return launch_split_lane_rows<32, kPdl>(a, stream);
      case 48: return launch_split_lane_rows<48, kPdl>(a, stream);
      case 64: return launch_split_lane_rows<64, kPdl>(a, stream);
      default: break;
    }
    if (opt.staged_warp_rows && staged_warp_rows_pay<scalar_t, V>(a.rows, a.cols, opt.staged_max_rows))
      return launch_staged_split_lane_rows<kPdl>(a, stream);
    if (opt.wide_warp_rows && wide_warp_rows_pay<V>(a.rows, a.cols))
      return launch_lean_variant<scalar_t, V, kWideWarpRowU, kLoad, kPdl, true, false, kWideWarpRowBlock,
                                 kWideWarpRowBlocksPerSm>(a, stream);
  }
  if constexpr (sizeof(scalar_t) == 2) {
    switch (opt.split_lane_16bit_rows ? split_lane_16bit_loads<V>(a.rows, a.cols) : 0) {
      case 8: return launch_split_lane_rows<8, kPdl>(a, stream);
      case 16: return launch_split_lane_rows<16, kPdl>(a, stream);
      default: break;
    }
  }
  if (opt.deep_warp_rows && deep_warp_rows_pay<V>(a.rows, a.cols))
    return launch_lean_variant<scalar_t, V, kDeepWarpRowU, kLoad, kPdl, true, false, kDeepWarpRowBlock,
                               kDeepWarpRowBlocksPerSm>(a, stream);
  return launch_lean_variant<scalar_t, V, kLeanWarpRowU, kLoad, kPdl, true>(a, stream);
}

// The lean kernel's arguments for a call the lean path takes (lean_path_applies).
template <typename scalar_t>
LeanArgs<scalar_t> lean_args(const Args<scalar_t>& g) {
  LeanArgs<scalar_t> a;
  a.y = g.y;
  a.row_stride = g.row_stride;
  a.out = g.out;
  a.out_stride = g.out_stride;
  a.rows = static_cast<int>(g.rows);
  a.cols = static_cast<int>(g.cols);
  a.inv = g.inv;
  a.scale = g.scale;
  a.launch_serial = 0;  // set where the launch warms (launch_lean_shape)
  return a;
}

template <typename scalar_t, int V, LeanLoad kLoad = kLeanLoad>
cudaError_t launch_lean(const Plan& p, const Args<scalar_t>& g, const DeviceShape& prop, const LeanOptions& opt,
                        cudaStream_t stream) {
  const LeanArgs<scalar_t> a = lean_args(g);
  const bool warp_rows = !p.split_y;
  if constexpr (kProgrammaticBuild == 1) {
    return launch_lean_shape<scalar_t, V, kLoad, true>(a, warp_rows, prop, opt, stream);
  } else if constexpr (kProgrammaticBuild == 0) {
    return launch_lean_shape<scalar_t, V, kLoad, false>(a, warp_rows, prop, opt, stream);
  } else {
    return launch_is_programmatic(opt.programmatic_launch, prop)
               ? launch_lean_shape<scalar_t, V, kLoad, true>(a, warp_rows, prop, opt, stream)
               : launch_lean_shape<scalar_t, V, kLoad, false>(a, warp_rows, prop, opt, stream);
  }
}

// The kernels' arguments for a planned call (strides in elements; `partials` holds
// rows * ctas accumulators when the plan splits rows across blocks, else may be null).
template <typename scalar_t>
Args<scalar_t> planned_args(const Plan& p, const scalar_t* y, int64_t row_stride, int64_t col_stride,
                            scalar_t* out, int64_t out_stride, double divisor, double scale,
                            typename Arith<scalar_t>::acc_t* partials) {
  using op_t = typename Arith<scalar_t>::op_t;
  Args<scalar_t> a;
  a.y = y;
  a.row_stride = row_stride;
  a.col_stride = p.cols == 1 ? 1 : col_stride;
  a.out = out;
  a.out_stride = out_stride;
  a.partials = partials;
  a.rows = p.rows;
  a.cols = p.cols;
  a.step = p.step;
  a.ctas = p.ctas;
  // The reference's reciprocal, taken on the host (kOrder.reciprocal_in_double).
  a.inv = kOrder.reciprocal_in_double ? static_cast<op_t>(1.0 / divisor) : op_t(1) / static_cast<op_t>(divisor);
  a.scale = static_cast<op_t>(scale);
  return a;
}

// What the library launches for a planned call: the lean kernel where it reproduces the
// plan (float, half, bfloat16), else the general kernels. `general_only` is the
// comparison switch (fused_reduce.cu's environment); `opt`, the lean kernels' options
// (comparisons turn one off).
template <typename scalar_t>
cudaError_t launch_planned(const Plan& p, const Args<scalar_t>& a, const DeviceShape& prop, cudaStream_t stream,
                           bool general_only = false, const LeanOptions& opt = LeanOptions{}) {
  constexpr int V = kInputVec<scalar_t>;
  if constexpr (sizeof(scalar_t) < 8) {
    if (!general_only && lean_path_applies<scalar_t, V>(p, a)) {
      return launch_lean<scalar_t, V>(p, a, prop, opt, stream);
    }
  }
  return launch_general<scalar_t, V>(p, a, stream, launch_is_programmatic(true, prop));
}

}  // namespace tail
}  // namespace kb14
