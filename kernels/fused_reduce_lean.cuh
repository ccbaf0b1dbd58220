// The tail's lean kernels: 32-lane rows of aligned unit-stride vectors (most calls), the reference's order with few
// registers, evict-first loads, griddepcontrol.wait just before y's first read: results/kernel_notes.md, "The tail".
#pragma once

#include "fused_reduce_dispatch.h"
#include "fused_reduce_general.cuh"
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kb14::tail {
// The lean kernels' arguments: rows and columns in 32 bits (the lean path takes fewer than 2^31 elements).
template <typename scalar_t> struct LeanArgs {
  static_assert(sizeof(scalar_t) < 8, "fp64 rows take the general kernels; the lean ones work in float");
  const scalar_t* __restrict__ y;
  int64_t row_stride;  // elements; row_stride - cols is a multiple of the vector width
  scalar_t* __restrict__ out;
  int64_t out_stride;
  int rows, cols;
  float inv, scale;
  uint32_t launch_serial;  // a warmed launch's own number (warm_behind_warmed_launch)
  // Gathered launches (the hybrid's exact rows): block b takes row gathered[b] while b < *gathered_count.
  const int32_t* gathered = nullptr;
  const int32_t* gathered_count = nullptr;
};

// A word's two 16-bit quotients, one packed multiply by inv in the type: the reference's if packed_quotient_exact.
template <typename scalar_t>
__device__ __forceinline__ float2 packed_quotient_pair(uint32_t packed, float inv) {
  using Pair = std::conditional_t<std::is_same_v<scalar_t, __half>, __half2, __nv_bfloat162>;
  Pair y;
  memcpy(&y, &packed, sizeof(y));
  if constexpr (std::is_same_v<scalar_t, __half>) return __half22float2(__hmul2_rn(y, __float2half2_rn(inv)));
  else return __bfloat1622float2(__hmul2_rn(y, __float2bfloat162_rn(inv)));
}

// One element read alone (a row's head or tail), apart from its quotient: a block row waits for it once.
template <typename scalar_t>
__device__ __forceinline__ scalar_t lean_element_load(const scalar_t* p) {
  if constexpr (sizeof(scalar_t) == 4) return __ldg(p);
  else return *p;
}

// Lean rows' vectors load .nc, L1 no-allocate, L2 evict-first; split lanes' words .cs (a policy each spilled).
__device__ __forceinline__ void lean_load_one(uint4& r, const uint4* p, uint64_t policy) {
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(policy));
}
__device__ __forceinline__ void lean_load_one(uint2& r, const uint2* p, uint64_t policy) {
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(r.x), "=r"(r.y) : "l"(p), "l"(policy));
}
template <typename W> __device__ __forceinline__ void lean_load_one(W& r, const W* p, uint64_t) { r = __ldcs(p); }

template <int U, int kStep, bool kInBounds = false, typename W>
__device__ __forceinline__ void lean_load(W (&buf)[U], const W* row, int k, int nvec, uint64_t policy) {
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (kInBounds || k + u * kStep < nvec) lean_load_one(buf[u], row + (k + u * kStep), policy);
}

// Row r's whole vectors: the reference's fresh quotient row starts (r * cols) mod V past a vector boundary.
template <int V, bool kShifted> struct LeanRow {
  int shift = 0, base = 0;  // the head: elements before base
  int nvec;                 // whole vectors from base; the tail after them
  __device__ __forceinline__ LeanRow(int r, int cols) {
    if constexpr (kShifted) {
      shift = static_cast<int>((int64_t(r) * cols) % V);
      base = shift > 0 ? V - shift : 0;
    }
    nvec = (cols - base) / V;
  }
};

// Adds the quotients of one vector (or split-lane word) to V accumulators, element i to acc[i].
template <typename scalar_t, int V, bool kPackedMul, typename W>
__device__ __forceinline__ void lean_add_vector(float (&acc)[V], const W& w, float inv) {
  if constexpr (kPackedMul) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      const float2 q = packed_quotient_pair<scalar_t>(word(w, i / 2), inv);
      acc[i] = acc[i] + q.x;
      acc[i + 1] = acc[i + 1] + q.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = acc[i] + quotient_of_float<scalar_t>(element_as_float<scalar_t>(w, i), inv);
  }
}

// L2 warming, a hint only: the first SMs' blocks prefetch their row before the wait, only behind another warmed
// launch that triggered within kWarmWindowUnits x 1024 ns (alone it costs more): kernel_notes.md, "L2 warming".
constexpr int kWarmRowsPerSm = 1;
constexpr uint32_t kWarmWindowUnits = 16;
static __device__ uint64_t warmed_trigger;  // the last warmed launch's serial and trigger time
__device__ __forceinline__ void warm_behind_warmed_launch(uint32_t serial, int r, const void* row, uint32_t bytes) {
  if (threadIdx.x != 0 || r >= kWarmRowsPerSm * sm_count()) return;
  const uint64_t last = *static_cast<volatile uint64_t*>(&warmed_trigger);
  const bool other_launch = static_cast<uint32_t>(last >> 32) != serial;
  if (other_launch && warm_clock() - static_cast<uint32_t>(last) < kWarmWindowUnits) bulk_prefetch_to_l2(row, bytes);
}
__device__ __forceinline__ void record_warmed_trigger(uint32_t serial, bool last_row) {
  if (threadIdx.x == 0 && last_row)
    *static_cast<volatile uint64_t*>(&warmed_trigger) = uint64_t(serial) << 32 | warm_clock();
}

// A row per warp (kWarpRows) or per 512-thread block. kExactRows: exactly U vectors a thread, loop-free (fewer
// registers). kMinBlocks: the blocks per SM its registers allow. kGathered: block rows of a.gathered only.
template <typename scalar_t, int V, int U, bool kWarpRows, bool kShifted, bool kPackedMul = false,
          bool kExactRows = false, int kBlock = kLeanBlock, int kMinBlocks = kLeanBlocksPerSm, bool kWarm = false,
          bool kGathered = false>
__global__ void __launch_bounds__(kBlock, kMinBlocks) lean_rows_kernel(LeanArgs<scalar_t> a) {
  static_assert(kWarpRows || kBlock == kLeanBlock, "a row per block needs the reference's block");
  static_assert(!kWarm || (kExactRows && !kWarpRows && !kShifted), "warming is for loop-free block rows");
  static_assert(!kGathered || (!kWarpRows && !kWarm), "gathered rows are block rows");
  using W = typename RawVec<sizeof(scalar_t) * V>::type;
  constexpr int kStep = kWarpRows ? kWarp : kLeanBlock;  // logical threads per row
  __shared__ float smem[kWarpRows ? 1 : kOrder.lanes_before_warps ? kLeanWarps : kLeanBlock];  // block_tree's slots
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int t = kWarpRows ? lane : tid;  // logical thread within the row
  const int slot = kWarpRows ? blockIdx.x * (kBlock / kWarp) + warp : blockIdx.x;
  if (kWarpRows && slot >= a.rows) return;
  if constexpr (kGathered) {
    wait_for_prior_grids();  // the rows and their count are the previous kernels' outputs
    if (slot >= *a.gathered_count) return;
  }
  const int r = kGathered ? a.gathered[slot] : slot;
  const LeanRow<V, kShifted> geo(r, a.cols);
  const scalar_t* row_start = a.y + r * a.row_stride;
  const W* row = reinterpret_cast<const W*>(row_start + geo.base);
  const uint64_t policy = evict_first_policy();
  W buf[U];
  if constexpr (kWarm) warm_behind_warmed_launch(a.launch_serial, r, row, U * kLeanBlock * sizeof(W));
  wait_for_prior_grids();
  lean_load<U, kStep, kExactRows>(buf, row, t, geo.nvec, policy);
  // The first warp's lanes add the head first and the tail last; a warp row loads them late (early spilled).
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
  if constexpr (kWarm) record_warmed_trigger(a.launch_serial, r == a.rows - 1);
  allow_dependent_launch();
  float acc[V] = {};
  if (owns_head())
    acc[0] = 0.0f + Arith<scalar_t>::quotient(kWarpRows ? lean_element_load(head_element()) : early_head, a.inv);
#pragma unroll 1
  for (int k = t;;) {
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (kExactRows || k + u * kStep < geo.nvec) lean_add_vector<scalar_t, V, kPackedMul>(acc, buf[u], a.inv);
    if constexpr (kExactRows) break;
    k += U * kStep;
    if (k >= geo.nvec) break;
    lean_load<U, kStep>(buf, row, k, geo.nvec, policy);
  }
  if (owns_tail())
    acc[0] = acc[0] + Arith<scalar_t>::quotient(kWarpRows ? lean_element_load(tail_element()) : early_tail, a.inv);
  const float leaf = leaf_sum(acc);
  if constexpr (kWarpRows) {
    const float total = shuffle_tree(leaf, kWarp);
    if (lane == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
  } else if (float total; block_tree(leaf, kWarp, kLeanWarps, lane, warp, smem, smem, total)) {
    a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
  }
}

// A warp row over 128 threads, four times the loads in flight: lane l's accumulators on threads 4 l .. 4 l + 3.
constexpr int kSplitLaneThreadsPerLane = kSplitLaneThreads / kWarp;
static_assert(kSplitLaneThreads == kWarp * kInputVec<float>, "an fp32 lane's accumulators, one a thread");

// Lane l's accumulators meet on thread 4 l, the 32 lane leaves in the reference's tree (a barrier).
template <typename scalar_t, int kAcc>
__device__ __forceinline__ void split_lane_store(const float (&acc)[kAcc], int t, int lane,
                                                 float (&lane_leaves)[kWarp], const LeanArgs<scalar_t>& a, int r) {
  float lane_acc[kSplitLaneThreadsPerLane * kAcc];
#pragma unroll
  for (int q = 0; q < kSplitLaneThreadsPerLane; ++q)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) lane_acc[q * kAcc + i] = q == 0 ? acc[i] : __shfl_down_sync(0xffffffffu, acc[i], q);
  if (t % kSplitLaneThreadsPerLane == 0) lane_leaves[lane] = leaf_sum(lane_acc);
  __syncthreads();
  if (t < kWarp) {
    const float total = shuffle_tree(lane_leaves[t], kWarp);
    if (t == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
  }
}

// kStaged: the row's whole vectors copied to shared memory first (sm_90: one bulk copy), U unused.
template <int U, int kMinBlocks, bool kShifted = false, bool kStaged = false, typename scalar_t = float,
          bool kPackedMul = false>
__global__ void __launch_bounds__(kSplitLaneThreads, kMinBlocks) split_lane_rows_kernel(LeanArgs<scalar_t> a) {
  constexpr int V = kInputVec<scalar_t>;
  constexpr int kAcc = V / kSplitLaneThreadsPerLane;
  using Word = std::conditional_t<kAcc == 1, float, uint32_t>;  // a thread's load: one fp32 element or two 16-bit ones
  static_assert(sizeof(scalar_t) == 4 || V * sizeof(scalar_t) == 16, "16-bit split lanes need 16-byte vectors");
  extern __shared__ __align__(128) uint4 split_lane_staged[];
  __shared__ float lane_leaves[kWarp];
  __shared__ uint64_t landed;
  constexpr bool kBulk = kStaged && kArch >= 900;
  const int t = threadIdx.x, r = blockIdx.x;
  const LeanRow<V, kShifted> geo(r, a.cols);
  const scalar_t* row_start = a.y + r * a.row_stride;
  const scalar_t* row = row_start + geo.base;
  const Word* words = reinterpret_cast<const Word*>(row);
  const int n = geo.nvec * kSplitLaneThreadsPerLane;  // the words of whole vectors, from base
  const uint64_t policy = kStaged ? evict_first_policy() : 0;
  Word buf[kStaged ? 1 : U];
  if constexpr (kBulk) init_block_mbarriers(&landed, 1);
  wait_for_prior_grids();
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
    lean_load<U, kSplitLaneThreads>(buf, words, t, n, policy);
  }
  // Lane l's edges, on thread 4 l's accumulator 0, read while the row's loads fly.
  const int lane = t / kSplitLaneThreadsPerLane;
  const bool edge_thread = kShifted && t % kSplitLaneThreadsPerLane == 0;
  const bool has_head = edge_thread && geo.shift > 0 && lane >= geo.shift && lane < V;
  const bool has_tail = edge_thread && lane < (a.cols - geo.base) % V;
  const auto quotient_at = [&](const scalar_t* p) { return Arith<scalar_t>::quotient(lean_element_load(p), a.inv); };
  const float head = has_head ? quotient_at(row_start + (lane - geo.shift)) : 0.0f;
  const float tail = has_tail ? quotient_at(row + geo.nvec * V + lane) : 0.0f;
  allow_dependent_launch();
  float acc[kAcc] = {};
  if (has_head) acc[0] = 0.0f + head;
  if constexpr (kStaged) {
    if constexpr (kBulk) mbarrier_wait(&landed, 0);
    else wait_for_block_copies();
    const Word* staged = reinterpret_cast<const Word*>(split_lane_staged);
#pragma unroll 8
    for (int k = t; k < n; k += kSplitLaneThreads)
      lean_add_vector<scalar_t, kAcc, kPackedMul>(acc, staged[k], a.inv);
  } else {
#pragma unroll 1
    for (int k = t;;) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (k + u * kSplitLaneThreads < n) lean_add_vector<scalar_t, kAcc, kPackedMul>(acc, buf[u], a.inv);
      k += U * kSplitLaneThreads;
      if (k >= n) break;
      lean_load<U, kSplitLaneThreads>(buf, words, k, n, policy);
    }
  }
  if (has_tail) acc[0] = acc[0] + tail;
  split_lane_store(acc, t, lane, lane_leaves, a, r);
}
}  // namespace kb14::tail
