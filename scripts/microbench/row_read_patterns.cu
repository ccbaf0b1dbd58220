// Standalone microbenchmark: what a cold single call costs, and what moves it. Every pattern
// kernel reads one fp32 row per 512-thread block, all of a round's loads issued before any is
// used, and sums it in any order; beside them the library's own choice for the shape and its
// block-per-row lean_rows_kernel (on warp-per-row shapes not the reference's order: a timing
// reference only). Exploratory, the record of results/kernel_notes.md's figures on the
// floor and on long rows split across blocks; the library's kernels live in kernels/.
//
//   nvcc -O3 -arch=sm_90 --fmad=false -DKB14_TORCH_VERSION=211 -Ikernels \
//        -o row_read_patterns scripts/microbench/row_read_patterns.cu
//   ./row_read_patterns fp32|bf16 ROWS COLS [ROUNDS]  # in turn after a read flush: medians, paired gaps
//   ./row_read_patterns fp32|bf16 ROWS COLS ncu       # three launches of each, for ncu's cache control
// KB14_FREE_READS=1: instead of the fp32 row patterns, the floor: the same bytes read as one
// flat array in any order (grid-stride, several grids and loads in flight), an empty kernel on
// the rows' grid, and the read ceiling (a 2 GiB flat read) in the same process; with
// KB14_PREDICATED=1 also one-wave grids whose every round issues all its loads at once, and empty
// kernels of one and four blocks per SM.
// KB14_HANDOFF=1 adds rows handed on between 2-16 blocks (handoff_rows_kernel; exact, checked);
// KB14_LONG_ROWS=1 the library's lean kernel at other loads in flight and blocks per SM, and
// with rolling loads (rolling_rows_kernel);
// KB14_CLUSTER=1 rows handed on within a cluster of 2-8 blocks (cluster_rows_kernel);
// KB14_WARP_SPLIT=1 a row's logical warps spread over 2-8 blocks, which meet in a cluster or
// by tickets in global memory (warp_split_row). The
// exact cases' bits are checked against the library's, every row.
// The library's own choice for the plan (warmed and, fp32, unwarmed) is always a case; in fp32
// so are the lean kernel alone and the read patterns.
// With KB14_TRITON_CUBIN=<Inductor's compiled tail for this shape> and its companions (`source`
// the .env file inductor_cubin.py writes) that kernel joins the cases, launched by the runtime
// from the library (cudaLibraryLoadFromFile).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cooperative_groups.h>

#include "harness.cuh"
#include "tail_kernels.cuh"

using namespace kb14;
using namespace kb14::tail;
namespace cg = cooperative_groups;

namespace {

// Load flavours: the library's (LeanLoad::kStreamingNc: .nc, not allocated in L1,
// evict-first policy in L2) and Triton's evict_first (LeanLoad::kEvictFirst: allocated in L1
// as evict-first, the same L2 policy). 16- and 8-byte words load as the library loads them
// (lean_load_one); 4-byte ones, which the library never loads that way, here.
template <LeanLoad kLoad, typename W>
__device__ __forceinline__ void load(W& r, const void* p, uint64_t pol) {
  lean_load_one<kLoad>(r, static_cast<const W*>(p), pol);
}
template <LeanLoad kLoad>
__device__ __forceinline__ void load(uint32_t& r, const void* p, uint64_t pol) {
  static_assert(kLoad == LeanLoad::kStreamingNc || kLoad == LeanLoad::kEvictFirst, "a flavour measured here");
  if constexpr (kLoad == LeanLoad::kStreamingNc)
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "l"(pol));
  else
    asm volatile("ld.global.L1::evict_first.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "l"(pol));
}

__device__ __forceinline__ float words_sum(const uint4& w) {
  return __uint_as_float(w.x) + __uint_as_float(w.y) + __uint_as_float(w.z) + __uint_as_float(w.w);
}
__device__ __forceinline__ float words_sum(const uint2& w) { return __uint_as_float(w.x) + __uint_as_float(w.y); }
__device__ __forceinline__ float words_sum(uint32_t w) { return __uint_as_float(w); }

template <int kBytes> struct Word { using type = typename RawVec<kBytes>::type; };  // the library's words
template <> struct Word<4> { using type = uint32_t; };

// The 512 threads' values summed in any order, thread 0 writing the block's row total.
__device__ __forceinline__ void store_block_sum(float v, float (&warp_sums)[16], float* out) {
  const int t = threadIdx.x;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (t % 32 == 0) warp_sums[t / 32] = v;
  __syncthreads();
  if (t < 32) {
    float s = t < 16 ? warp_sums[t] : 0.0f;
    for (int o = 8; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (t == 0) out[blockIdx.x] = s;
  }
}

// One row per block: kBytes-wide loads from the first kBytes-aligned element (the elements
// before it and after the last whole word read one by one by the first threads), thread t
// taking words t, t + 512, ..., U of them in flight, then the next U once those are added
// (a loop that is not unrolled, as Triton's reduction loop with one stage). kInterleaved: thread t takes words
// U * t .. U * t + U - 1 of each U * 512 words instead (a thread's loads adjacent).
template <int kBytes, int U, LeanLoad kHint, bool kInterleaved = false>
__global__ void __launch_bounds__(512, 4) row_read(const float* y, int64_t row_stride, int cols, float* out) {
  using W = typename Word<kBytes>::type;
  constexpr int kPer = kBytes / 4;
  __shared__ float warp_sums[16];
  const int t = threadIdx.x;
  const float* row = y + int64_t(blockIdx.x) * row_stride;
  const int head = int((kBytes - reinterpret_cast<uintptr_t>(row) % kBytes) % kBytes) / 4;
  const int nw = (cols - head) / kPer;
  const W* words = reinterpret_cast<const W*>(row + head);
  const uint64_t pol = evict_first_policy();
  float acc = 0.0f;
  if (t < head) acc = row[t];
  const int tail = cols - head - nw * kPer;
  if (t < tail) acc += row[head + nw * kPer + t];
#pragma unroll 1
  for (int base = 0; base < nw; base += U * 512) {
    W buf[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = base + (kInterleaved ? U * t + u : t + u * 512);
      if (i < nw) load<kHint>(buf[u], words + i, pol);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = base + (kInterleaved ? U * t + u : t + u * 512);
      if (i < nw) acc += words_sum(buf[u]);
    }
  }
  store_block_sum(acc, warp_sums, out);
}

// Triton's pattern for rows it cannot prove aligned (Inductor at 1000 x 8191): one loop-free
// round of U 4-byte loads per thread, element t + 512 u of the row, into four accumulators.
template <int U>
__global__ void __launch_bounds__(512, 4) row_read_scalar(const float* y, int64_t row_stride, int cols, float* out) {
  __shared__ float warp_sums[16];
  const int t = threadIdx.x;
  const float* row = y + int64_t(blockIdx.x) * row_stride;
  const uint64_t pol = evict_first_policy();
  uint32_t buf[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    buf[u] = 0;
    if (t + 512 * u < cols) load<LeanLoad::kEvictFirst>(buf[u], row + t + 512 * u, pol);
  }
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u % 4] += __uint_as_float(buf[u]);
  store_block_sum((acc[0] + acc[1]) + (acc[2] + acc[3]), warp_sums, out);
}

template <int U>
void launch_scalar(const void* y, int64_t stride, int rows, int cols, void* out) {
  row_read_scalar<U><<<rows, 512>>>(static_cast<const float*>(y), stride, cols, static_cast<float*>(out));
}

// Free reads (KB14_FREE_READS=1): the matrix's bytes read as one flat array in any order
// and summed as fp32 words into one partial per block, no rows, no order: what any kernel,
// exact or not, pays to read these bytes in a single call. Grid-stride: thread i of the grid
// takes 16-byte words i, i + s, ... (s: the grid's threads), U of them in flight.
float* g_block_sums = nullptr;  // the free reads' per-block partials (kMaxFreeBlocks)
constexpr int kMaxFreeBlocks = 1 << 16;

// kPredicated: every round issues its U loads at once, those past n reading the last word again
// and adding nothing (a load for every u: one skipped by a branch let the compiler interleave
// loads and additions). Without
// it a thread past the last whole round reads its remaining words one at a time, a memory
// latency each: on the fixed grids (kBlocksPerSm > 0) whose U does not divide a thread's
// share, that is most of the read (1024 x 8192 fp32 on 4 x 132 blocks of 512, U 8: 7.76 words
// a thread, no whole round for three in four threads). The first fixed grids measured were of that kind.
// kMinBlocks: the blocks per SM the grid keeps resident; without it ptxas held these kernels at
// 32 registers and so at most 4 of a round's 16-byte loads in flight, whatever U (the
// predicated kernels ask for it).
template <int kThreads, int U, bool kPredicated = false, int kMinBlocks = 0>
__global__ void __launch_bounds__(kThreads, kMinBlocks) flat_read(const uint4* p, int64_t n, float* out) {
  __shared__ float warp_sums[kThreads / 32];
  const uint64_t pol = evict_first_policy();
  const int64_t s = int64_t(gridDim.x) * kThreads;
  int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  float acc = 0.0f;
  for (; kPredicated ? i < n : i + (U - 1) * s < n; i += U * s) {
    uint4 b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = i + u * s;
      lean_load_one<kLeanLoad>(b[u], p + (kPredicated && j >= n ? n - 1 : j), pol);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (!kPredicated || i + u * s < n) acc += words_sum(b[u]);
  }
  for (; i < n; i += s) acc += words_sum(p[i]);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    out[blockIdx.x] = total;
  }
}

__global__ void empty_kernel() {}

size_t g_bytes = 0;  // the matrix's bytes (set in main)

// A flat read of `bytes` at y: kBlocksPerSm blocks of kThreads per SM, or (0) as many blocks
// as give every thread exactly U words.
template <int kThreads, int U, int kBlocksPerSm, bool kPredicated = false>
void flat_read_bytes(const void* y, size_t bytes) {
  DeviceShape prop;
  CK(query_device_shape(0, &prop));  // cached after the first call
  const int64_t n = int64_t(bytes / 16);
  const int64_t per_block = int64_t(kThreads) * U;
  const int64_t blocks =
      kBlocksPerSm > 0 ? int64_t(kBlocksPerSm) * prop.multiprocessors : (n + per_block - 1) / per_block;
  if (blocks > kMaxFreeBlocks) std::exit(5);
  flat_read<kThreads, U, kPredicated, kPredicated ? kBlocksPerSm : 0><<<unsigned(blocks), kThreads>>>(static_cast<const uint4*>(y), n, g_block_sums);
}

// The same as a case: the matrix's bytes.
template <int kThreads, int U, int kBlocksPerSm, bool kPredicated = false>
void launch_flat(const void* y, int64_t, int, int, void*) {
  flat_read_bytes<kThreads, U, kBlocksPerSm, kPredicated>(y, g_bytes);
}

void launch_empty(const void*, int64_t, int rows, int, void*) { empty_kernel<<<rows, 512>>>(); }

// An empty kernel of kBlocksPerSm blocks of 512 per SM: what of the empty row grid's cost is
// its number of blocks.
template <int kBlocksPerSm>
void launch_empty_per_sm(const void*, int64_t, int, int, void*) {
  DeviceShape prop;
  CK(query_device_shape(0, &prop));
  empty_kernel<<<kBlocksPerSm * prop.multiprocessors, 512>>>();
}

// Rows handed on (KB14_HANDOFF=1): the reference's long block rows split into kPieces blocks
// per row. Logical thread t of a row adds its vectors t, t + 512, ... (S * kPieces of them) in
// order into V accumulators; block (r, p) loads steps p * S .. p * S + S - 1 of every logical
// thread (all in flight), waits for piece p - 1's accumulators, adds its steps in order and
// hands the accumulators on through global memory; the last piece ends the row as
// lean_rows_kernel ends a block row (lean_block_row_store). The same additions in the same
// order as the library's kernel, in blocks of 1 / kPieces of the row: free reads in small
// blocks were faster in single calls than in a row's worth per block. Blocks take
// (row, piece) from a ticket in the order they start, so a piece's predecessor has always
// started (the wait ends); the hand-over flags carry the launch's tag, so they need no reset.
// Aligned rows of exactly S * kPieces vectors per thread only.
struct Handoff {
  float* acc = nullptr;        // rows x V x 512 accumulators
  unsigned* flags = nullptr;   // per row: tag * kPieces + the next piece allowed to go on
  unsigned* tickets = nullptr; // two counters, taken by launch parity; the last ticket resets its own
  unsigned tag = 0;
};
Handoff g_handoff;

// kPieceMajor: ticket k takes piece k / rows of row k % rows, so a piece starts about a wave of
// blocks after its predecessor (which has then finished: no wait), instead of right after it.
template <typename scalar_t, int V, int S, int kPieces, bool kPacked, int kMinBlocks, bool kPieceMajor>
__global__ void __launch_bounds__(kLeanBlock, kMinBlocks) handoff_rows_kernel(LeanArgs<scalar_t> a, Handoff h) {
  using W = typename RawVec<sizeof(scalar_t) * V>::type;
  __shared__ unsigned ticket;
  __shared__ float smem[kLeanRowTreeFloats];
  const int t = threadIdx.x, lane = t % kWarp, warp = t / kWarp;
  unsigned* counter = h.tickets + (h.tag & 1u);
  if (t == 0) ticket = atomicAdd(counter, 1u);
  __syncthreads();
  const unsigned k = ticket;
  const int r = kPieceMajor ? int(k % unsigned(a.rows)) : int(k / kPieces);
  const int p = kPieceMajor ? int(k / unsigned(a.rows)) : int(k % kPieces);
  if (t == 0 && k == unsigned(a.rows) * kPieces - 1) *counter = 0;  // every ticket is taken
  const W* row = reinterpret_cast<const W*>(a.y + int64_t(r) * a.row_stride);
  const uint64_t policy = evict_first_policy();
  W buf[S];
#pragma unroll
  for (int u = 0; u < S; ++u) lean_load_one<kLeanLoad>(buf[u], row + t + (p * S + u) * kLeanBlock, policy);
  float acc[V];
  float* hand = h.acc + int64_t(r) * V * kLeanBlock + t;
  if (p == 0) {
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = 0.0f;
  } else {
    if (t == 0) {
      const unsigned want = h.tag * kPieces + unsigned(p);
      unsigned seen;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(h.flags + r) : "memory");
      } while (seen != want);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = __ldcg(hand + i * kLeanBlock);
  }
  const uint32_t inv_pair = lean_inv_pair<scalar_t, kPacked>(a.inv);
#pragma unroll
  for (int u = 0; u < S; ++u) lean_add_vector<scalar_t, V, kPacked>(acc, buf[u], a.inv, inv_pair);
  if (p < kPieces - 1) {
#pragma unroll
    for (int i = 0; i < V; ++i) __stcg(hand + i * kLeanBlock, acc[i]);
    __syncthreads();
    if (t == 0) {
      __threadfence();
      const unsigned next = h.tag * kPieces + unsigned(p + 1);
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(h.flags + r), "r"(next) : "memory");
    }
    return;
  }
  lean_block_row_store(lean_leaf(acc), smem, lane, warp, a, r);
}

// Rows handed on within a cluster (KB14_CLUSTER=1): the same split as handoff_rows_kernel, C
// blocks per row launched as one cluster, so the accumulators go from block to block through
// distributed shared memory instead of L2: block k of the cluster loads steps k S .. k S + S - 1
// of every logical thread, adds them once block k - 1's accumulators have landed in its shared
// memory (cluster barriers), and passes them on; the last block ends the row.
template <typename scalar_t, int V, int S, int C, bool kPacked, int kMinBlocks>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(kLeanBlock, kMinBlocks)
    cluster_rows_kernel(LeanArgs<scalar_t> a) {
  using W = typename RawVec<sizeof(scalar_t) * V>::type;
  __shared__ float handed[V * kLeanBlock];
  __shared__ float smem[kLeanRowTreeFloats];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int r = int(blockIdx.x) / C;
  const int t = threadIdx.x, lane = t % kWarp, warp = t / kWarp;
  const W* row = reinterpret_cast<const W*>(a.y + int64_t(r) * a.row_stride);
  const uint64_t policy = evict_first_policy();
  W buf[S];
#pragma unroll
  for (int u = 0; u < S; ++u) lean_load_one<kLeanLoad>(buf[u], row + t + (rank * S + u) * kLeanBlock, policy);
  cluster.sync();  // every block of the cluster runs: its shared memory may be written
  const uint32_t inv_pair = lean_inv_pair<scalar_t, kPacked>(a.inv);
  float acc[V];
  const auto add_own = [&] {
#pragma unroll
    for (int u = 0; u < S; ++u) lean_add_vector<scalar_t, V, kPacked>(acc, buf[u], a.inv, inv_pair);
  };
  // Stage k: block k adds its steps and passes the accumulators to block k + 1; every block
  // meets every barrier.
#pragma unroll 1
  for (int k = 0; k < C - 1; ++k) {
    if (rank == k) {
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] = k == 0 ? 0.0f : handed[i * kLeanBlock + t];
      add_own();
      float* next = cluster.map_shared_rank(handed, k + 1);
#pragma unroll
      for (int i = 0; i < V; ++i) next[i * kLeanBlock + t] = acc[i];
    }
    cluster.sync();
  }
  if (rank != C - 1) return;
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = handed[i * kLeanBlock + t];
  add_own();
  lean_block_row_store(lean_leaf(acc), smem, lane, warp, a, r);
}

template <typename scalar_t, int S, int C, int kMinBlocks>
void launch_cluster_rows(const void* y, int64_t stride, int rows, int cols, void* out) {
  constexpr int V = kInputVec<scalar_t>;
  if (cols != V * kLeanBlock * S * C) std::exit(7);
  const LeanArgs<scalar_t> a = microbench::tail_args<scalar_t>(y, stride, rows, cols, out);
  CK(with_packed_mul(a, [&](auto packed) {
    cluster_rows_kernel<scalar_t, V, S, C, decltype(packed)::value, kMinBlocks><<<rows * C, kLeanBlock>>>(a);
    return cudaGetLastError();
  }));
}

// A logical thread's leaf on a block row of whole vectors (the lean kernel's additions without
// edges): vectors t, t + 512, ... added in order into its V accumulators, U loads in flight.
// kRolling: each buffer is refilled as soon as its vector has been added, instead of all U once
// the round's last has been (rolling_rows_kernel).
template <typename scalar_t, int V, int U, bool kPacked, bool kRolling, typename W>
__device__ __forceinline__ float block_row_leaf(const LeanArgs<scalar_t>& a, const W* row, int t, int nvec,
                                                uint64_t policy) {
  W buf[U];
  lean_load<U, kLeanBlock, kLeanLoad>(buf, row, t, nvec, policy);
  const uint32_t inv_pair = lean_inv_pair<scalar_t, kPacked>(a.inv);
  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.0f;
  if constexpr (kRolling) {
#pragma unroll 1
    for (int k = t; k < nvec; k += U * kLeanBlock) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int idx = k + u * kLeanBlock;
        if (idx < nvec) {
          lean_add_vector<scalar_t, V, kPacked>(acc, buf[u], a.inv, inv_pair);
          if (idx + U * kLeanBlock < nvec) lean_load_one<kLeanLoad>(buf[u], row + idx + U * kLeanBlock, policy);
        }
      }
    }
  } else {
#pragma unroll 1
    for (int k = t;;) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (k + u * kLeanBlock < nvec) lean_add_vector<scalar_t, V, kPacked>(acc, buf[u], a.inv, inv_pair);
      k += U * kLeanBlock;
      if (k >= nvec) break;
      lean_load<U, kLeanBlock, kLeanLoad>(buf, row, k, nvec, policy);
    }
  }
  return lean_leaf(acc);
}

// Rows split by warps (KB14_WARP_SPLIT=1): no chain crosses a block. The reference's 16 logical
// warps of a row go to C blocks of 512 / C threads, block p holding logical warps p, p + C,
// p + 2 C, ...: exactly the warps whose totals the reference's halving tree over the warps
// (offsets 8, 4, 2, 1) meets before any other. So block p adds its warps' chains whole, folds
// its own warps' totals through the tree's first levels (a halving tree over 16 / C values)
// and hands on one float; the tree over the C floats ends the row. kCluster: the C blocks form
// a cluster and the floats meet in the first block's shared memory; else they go through
// global memory, and the row's last block to take a ticket ends it (and resets the ticket).
// Rows of whole vectors only (no head or tail).
struct WarpSplitScratch {
  float* part_totals = nullptr;  // rows * 8
  unsigned* tickets = nullptr;   // rows, zero between launches
} g_warp_split;

template <typename scalar_t, int V, int U, int C, bool kPacked, int kMinBlocks, bool kCluster>
__device__ __forceinline__ void warp_split_row(const LeanArgs<scalar_t>& a, const WarpSplitScratch& scratch) {
  static_assert(kOrder.lanes_before_warps, "the tree over warps ends the row (torch 2.10 and newer)");
  using W = typename RawVec<sizeof(scalar_t) * V>::type;
  constexpr int kWarps = kLeanWarps / C;
  __shared__ float warp_totals[kWarps];
  __shared__ float part_totals[C];
  const int part = int(blockIdx.x) % C;  // the cluster rank where kCluster
  const int r = int(blockIdx.x) / C;
  const int lane = threadIdx.x % kWarp, local_warp = threadIdx.x / kWarp;
  const int t = (local_warp * C + part) * kWarp + lane;  // the logical thread
  const W* row = reinterpret_cast<const W*>(a.y + int64_t(r) * a.row_stride);
  const int nvec = a.cols / V;
  const uint64_t policy = evict_first_policy();
  if constexpr (kCluster) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  const float w = shuffle_tree(block_row_leaf<scalar_t, V, U, kPacked, false>(a, row, t, nvec, policy), kWarp);
  if (lane == 0) warp_totals[local_warp] = w;
  __syncthreads();
  float part_total = 0.0f;
  if (local_warp == 0) part_total = warp_tree(lane < kWarps ? warp_totals[lane] : 0.0f, kWarps);
  float total_in = 0.0f;
  if constexpr (kCluster) {
    // Every block of the cluster has started (its shared memory exists) once the first phase ends.
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
    if (threadIdx.x == 0) *cg::this_cluster().map_shared_rank(&part_totals[part], 0) = part_total;
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    if (part != 0) return;
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (local_warp != 0) return;
    total_in = lane < C ? part_totals[lane] : 0.0f;
  } else {
    if (local_warp != 0) return;
    unsigned ticket = 0;
    if (lane == 0) {
      scratch.part_totals[r * C + part] = part_total;
      __threadfence();
      ticket = atomicAdd(&scratch.tickets[r], 1u);
    }
    if (__shfl_sync(0xffffffffu, ticket, 0) != C - 1) return;
    __threadfence();
    if (lane < C) total_in = *static_cast<volatile float*>(&scratch.part_totals[r * C + lane]);
    if (lane == 0) scratch.tickets[r] = 0;
  }
  const float total = warp_tree(total_in, C);
  if (lane == 0) a.out[r * a.out_stride] = Arith<scalar_t>::store(total, a.scale);
}

template <typename scalar_t, int V, int U, int C, bool kPacked, int kMinBlocks>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(kLeanBlock / C, kMinBlocks)
    warp_split_cluster_kernel(LeanArgs<scalar_t> a) {
  warp_split_row<scalar_t, V, U, C, kPacked, kMinBlocks, true>(a, {});
}

template <typename scalar_t, int V, int U, int C, bool kPacked, int kMinBlocks>
__global__ void __launch_bounds__(kLeanBlock / C, kMinBlocks)
    warp_split_ticket_kernel(LeanArgs<scalar_t> a, WarpSplitScratch scratch) {
  warp_split_row<scalar_t, V, U, C, kPacked, kMinBlocks, false>(a, scratch);
}

template <typename scalar_t, int U, int C, int kMinBlocks, bool kCluster>
void launch_warp_split(const void* y, int64_t stride, int rows, int cols, void* out) {
  constexpr int V = kInputVec<scalar_t>;
  if (cols % V != 0) std::exit(8);
  const LeanArgs<scalar_t> a = microbench::tail_args<scalar_t>(y, stride, rows, cols, out);
  CK(with_packed_mul(a, [&](auto packed) {
    constexpr bool kPacked = decltype(packed)::value;
    if constexpr (kCluster)
      warp_split_cluster_kernel<scalar_t, V, U, C, kPacked, kMinBlocks><<<rows * C, kLeanBlock / C>>>(a);
    else
      warp_split_ticket_kernel<scalar_t, V, U, C, kPacked, kMinBlocks><<<rows * C, kLeanBlock / C>>>(a, g_warp_split);
    return cudaGetLastError();
  }));
}

template <typename scalar_t, int S, int kPieces, int kMinBlocks, bool kPieceMajor = false>
void launch_handoff(const void* y, int64_t stride, int rows, int cols, void* out) {
  constexpr int V = kInputVec<scalar_t>;
  if (cols != V * kLeanBlock * S * kPieces) std::exit(6);
  const LeanArgs<scalar_t> a = microbench::tail_args<scalar_t>(y, stride, rows, cols, out);
  ++g_handoff.tag;
  CK(with_packed_mul(a, [&](auto packed) {
    handoff_rows_kernel<scalar_t, V, S, kPieces, decltype(packed)::value, kMinBlocks, kPieceMajor>
        <<<rows * kPieces, kLeanBlock>>>(a, g_handoff);
    return cudaGetLastError();
  }));
}

// What a case returns: the library's bits (checked against the library's choice, every row),
// row sums in some other order (row 0 printed), or no row sums (the free reads).
enum class Output { kExact, kRowSums, kNone };

struct Case {
  std::string name;
  void (*launch)(const void*, int64_t, int, int, void*);
  Output output = Output::kRowSums;
};

template <int kBytes, int U, LeanLoad kHint, bool kInterleaved = false>
void launch_pattern(const void* y, int64_t stride, int rows, int cols, void* out) {
  row_read<kBytes, U, kHint, kInterleaved><<<rows, 512>>>(static_cast<const float*>(y), stride, cols,
                                                           static_cast<float*>(out));
}

// The library's lean kernel for these rows, unwarmed, launched plainly (its wait returns at
// once) or, kProgrammatic, as the library launches it.
template <bool kShifted, bool kExact, bool kProgrammatic = false>
void launch_library(const void* y, int64_t stride, int rows, int cols, void* out) {
  const LeanArgs<float> a = microbench::tail_args(y, stride, rows, cols, out);
  CK(launch_programmatic(lean_rows_kernel<float, 4, 4, kLeanLoad, true, false, kShifted, false, kExact>,
                         dim3(rows), dim3(kLeanBlock), 0, nullptr, kProgrammatic, a));
}

// The library's own choice for the plan, with (kWarm) or without the warming of rows behind a
// warmed launch.
template <typename T, bool kWarm>
void launch_library_planned(const void* y, int64_t stride, int rows, int cols, void* out) {
  LeanOptions opt;
  opt.warm_rows = kWarm;
  microbench::launch_library_choice<T>(y, stride, rows, cols, out, nullptr, opt);
}

// Long block rows (KB14_LONG_ROWS=1): the library's lean kernel for rows longer than one
// round at other loads in flight and blocks per SM than its plan takes (the same additions).
template <typename T, int U, int kMinBlocks>
void launch_lean_long(const void* y, int64_t stride, int rows, int cols, void* out) {
  const LeanArgs<T> a = microbench::tail_args<T>(y, stride, rows, cols, out);
  CK((launch_lean_variant<T, kInputVec<T>, U, kLeanLoad, true, false, false, kLeanBlock, kMinBlocks>(a, nullptr)));
}

// Long block rows with rolling loads (KB14_LONG_ROWS=1, `roll_*`): the lean kernel's block rows,
// each thread keeping U loads in flight without the gap at the end of a round (block_row_leaf's
// kRolling). Rows of whole vectors only.
template <typename scalar_t, int V, int U, bool kPacked, int kMinBlocks>
__global__ void __launch_bounds__(kLeanBlock, kMinBlocks) rolling_rows_kernel(LeanArgs<scalar_t> a) {
  using W = typename RawVec<sizeof(scalar_t) * V>::type;
  __shared__ float smem[kLeanRowTreeFloats];
  const int t = threadIdx.x, lane = t % kWarp, warp = t / kWarp;
  const int r = blockIdx.x;
  const W* row = reinterpret_cast<const W*>(a.y + int64_t(r) * a.row_stride);
  const float leaf = block_row_leaf<scalar_t, V, U, kPacked, true>(a, row, t, a.cols / V, evict_first_policy());
  lean_block_row_store(leaf, smem, lane, warp, a, r);
}

template <typename T, int U, int kMinBlocks>
void launch_rolling(const void* y, int64_t stride, int rows, int cols, void* out) {
  constexpr int V = kInputVec<T>;
  if (cols % V != 0) std::exit(9);
  const LeanArgs<T> a = microbench::tail_args<T>(y, stride, rows, cols, out);
  CK(with_packed_mul(a, [&](auto packed) {
    rolling_rows_kernel<T, V, U, decltype(packed)::value, kMinBlocks><<<rows, kLeanBlock>>>(a);
    return cudaGetLastError();
  }));
}

// Inductor's kernel (KB14_TRITON_CUBIN), one row per 512-thread block.
microbench::InductorTail g_inductor;

void launch_triton(const void* y, int64_t, int rows, int cols, void* out) { g_inductor.launch(y, rows, cols, out, nullptr); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::printf("usage: %s fp32|bf16 ROWS COLS [ROUNDS|ncu]\n", argv[0]);
    return 2;
  }
  const bool bf16 = std::strcmp(argv[1], "bf16") == 0;
  const int rows = std::atoi(argv[2]), cols = std::atoi(argv[3]);
  const bool ncu = argc > 4 && std::strcmp(argv[4], "ncu") == 0;
  const int rounds = argc > 4 && !ncu ? std::atoi(argv[4]) : 400;
  const bool aligned = cols % 4 == 0;
  std::vector<Case> cases;
  if (bf16) {
    cases.push_back({"library", launch_library_planned<__nv_bfloat16, true>, Output::kExact});
  } else {
    cases.push_back({"library", launch_library_planned<float, true>, Output::kExact});
    cases.push_back({"library_unwarmed", launch_library_planned<float, false>, Output::kExact});
  }
  CK(cudaFree(nullptr));
  if (g_inductor.load_from_env()) cases.push_back({"inductor", launch_triton});
  const bool free_reads = std::getenv("KB14_FREE_READS") != nullptr;
  if (!bf16 && !free_reads) {
    if (aligned && cols == 8192) {
      cases.push_back({"library_exact", launch_library<false, true>, Output::kExact});
      cases.push_back({"library_exact_pdl", launch_library<false, true, true>, Output::kExact});
    } else {  // the reference's order on block-row plans
      cases.push_back({"library_lean", aligned ? launch_library<false, false> : launch_library<true, false>,
                       Output::kExact});
      cases.push_back({"library_lean_pdl",
                       aligned ? launch_library<false, false, true> : launch_library<true, false, true>,
                       Output::kExact});
    }
    cases.push_back({"b16x4_nc", launch_pattern<16, 4, LeanLoad::kStreamingNc>});
    cases.push_back({"b16x4_l1ef", launch_pattern<16, 4, LeanLoad::kEvictFirst>});
    cases.push_back({"b16x2_nc", launch_pattern<16, 2, LeanLoad::kStreamingNc>});
    cases.push_back({"b16x2_l1ef", launch_pattern<16, 2, LeanLoad::kEvictFirst>});
    cases.push_back({"b16x1_nc", launch_pattern<16, 1, LeanLoad::kStreamingNc>});
    cases.push_back({"b8x8_nc", launch_pattern<8, 8, LeanLoad::kStreamingNc>});
    cases.push_back({"b8x4_nc", launch_pattern<8, 4, LeanLoad::kStreamingNc>});
    cases.push_back({"b8x4_l1ef", launch_pattern<8, 4, LeanLoad::kEvictFirst>});
    cases.push_back({"b8x2_l1ef", launch_pattern<8, 2, LeanLoad::kEvictFirst>});
    cases.push_back({"b4x16_l1ef", launch_pattern<4, 16, LeanLoad::kEvictFirst>});
    cases.push_back({"b4x8_l1ef", launch_pattern<4, 8, LeanLoad::kEvictFirst>});
    cases.push_back({"scalar16_loop_free", launch_scalar<16>});
    cases.push_back({"b4x4_l1ef", launch_pattern<4, 4, LeanLoad::kEvictFirst>});
  }

  if (free_reads) {  // instead of the fp32 patterns above: the floor
    cases.push_back({"empty_rows_x512", launch_empty, Output::kNone});
    cases.push_back({"flat512_u4_exact", launch_flat<512, 4, 0>, Output::kNone});
    cases.push_back({"flat512_u2_exact", launch_flat<512, 2, 0>, Output::kNone});
    cases.push_back({"flat512_u8_exact", launch_flat<512, 8, 0>, Output::kNone});
    cases.push_back({"flat512_u4_sm4", launch_flat<512, 4, 4>, Output::kNone});
    cases.push_back({"flat512_u8_sm4", launch_flat<512, 8, 4>, Output::kNone});
    cases.push_back({"flat512_u4_sm8", launch_flat<512, 4, 8>, Output::kNone});
    cases.push_back({"flat512_u8_sm2", launch_flat<512, 8, 2>, Output::kNone});
    cases.push_back({"flat512_u4_sm2", launch_flat<512, 4, 2>, Output::kNone});
    cases.push_back({"flat256_u4_exact", launch_flat<256, 4, 0>, Output::kNone});
    cases.push_back({"flat1024_u4_exact", launch_flat<1024, 4, 0>, Output::kNone});
    cases.push_back({"flat1024_u8_sm2", launch_flat<1024, 8, 2>, Output::kNone});
    cases.push_back({"flat128_u8_sm16", launch_flat<128, 8, 16>, Output::kNone});
    if (std::getenv("KB14_PREDICATED")) {  // one-wave grids, every round's loads at once
      cases.push_back({"empty_1_per_sm", launch_empty_per_sm<1>, Output::kNone});
      cases.push_back({"empty_4_per_sm", launch_empty_per_sm<4>, Output::kNone});
      cases.push_back({"pflat512_u4_sm4", launch_flat<512, 4, 4, true>, Output::kNone});
      cases.push_back({"pflat512_u8_sm2", launch_flat<512, 8, 2, true>, Output::kNone});
      cases.push_back({"pflat1024_u8_sm1", launch_flat<1024, 8, 1, true>, Output::kNone});
      cases.push_back({"pflat256_u16_sm2", launch_flat<256, 16, 2, true>, Output::kNone});
      cases.push_back({"pflat512_u2_sm4", launch_flat<512, 2, 4, true>, Output::kNone});
      cases.push_back({"pflat512_u4_sm3", launch_flat<512, 4, 3, true>, Output::kNone});
    }
    if (!bf16) cases.push_back({"b16x4_nc", launch_pattern<16, 4, LeanLoad::kStreamingNc>});
  }

  if (std::getenv("KB14_LONG_ROWS")) {  // exact: their bits are checked against the library's
    if (bf16) {
      cases.push_back({"long_u2_4pb", launch_lean_long<__nv_bfloat16, 2, 4>, Output::kExact});
      cases.push_back({"long_u4_3pb", launch_lean_long<__nv_bfloat16, 4, 3>, Output::kExact});
      cases.push_back({"long_u8_2pb", launch_lean_long<__nv_bfloat16, 8, 2>, Output::kExact});
      cases.push_back({"long_u16_1pb", launch_lean_long<__nv_bfloat16, 16, 1>, Output::kExact});
      cases.push_back({"roll_u8_2pb", launch_rolling<__nv_bfloat16, 8, 2>, Output::kExact});
      cases.push_back({"roll_u4_3pb", launch_rolling<__nv_bfloat16, 4, 3>, Output::kExact});
      cases.push_back({"roll_u2_4pb", launch_rolling<__nv_bfloat16, 2, 4>, Output::kExact});
    } else {
      cases.push_back({"long_u2_4pb", launch_lean_long<float, 2, 4>, Output::kExact});
      cases.push_back({"long_u4_4pb", launch_lean_long<float, 4, 4>, Output::kExact});
      cases.push_back({"long_u8_2pb", launch_lean_long<float, 8, 2>, Output::kExact});
      cases.push_back({"long_u16_1pb", launch_lean_long<float, 16, 1>, Output::kExact});
      cases.push_back({"roll_u4_3pb", launch_rolling<float, 4, 3>, Output::kExact});
      cases.push_back({"roll_u8_2pb", launch_rolling<float, 8, 2>, Output::kExact});
      cases.push_back({"roll_u2_4pb", launch_rolling<float, 2, 4>, Output::kExact});
    }
  }
  if (std::getenv("KB14_CLUSTER")) {  // exact: their bits are checked against the library's
    if (bf16) {
      cases.push_back({"cluster2", launch_cluster_rows<__nv_bfloat16, 8, 2, 2>, Output::kExact});
      cases.push_back({"cluster4", launch_cluster_rows<__nv_bfloat16, 4, 4, 2>, Output::kExact});
    } else {
      cases.push_back({"cluster4", launch_cluster_rows<float, 8, 4, 2>, Output::kExact});
      cases.push_back({"cluster8", launch_cluster_rows<float, 4, 8, 3>, Output::kExact});
    }
  }
  if (std::getenv("KB14_WARP_SPLIT")) {  // exact: their bits are checked against the library's
    if (bf16) {
      cases.push_back({"wsplit2_u8_4pb", launch_warp_split<__nv_bfloat16, 8, 2, 4, true>, Output::kExact});
      cases.push_back({"wsplit4_u8_8pb", launch_warp_split<__nv_bfloat16, 8, 4, 8, true>, Output::kExact});
      cases.push_back({"ticket2_u8_4pb", launch_warp_split<__nv_bfloat16, 8, 2, 4, false>, Output::kExact});
      cases.push_back({"ticket4_u8_8pb", launch_warp_split<__nv_bfloat16, 8, 4, 8, false>, Output::kExact});
      cases.push_back({"ticket2_u4_6pb", launch_warp_split<__nv_bfloat16, 4, 2, 6, false>, Output::kExact});
      cases.push_back({"ticket8_u8_16pb", launch_warp_split<__nv_bfloat16, 8, 8, 16, false>, Output::kExact});
    } else {
      cases.push_back({"wsplit2_u4_8pb", launch_warp_split<float, 4, 2, 8, true>, Output::kExact});
      cases.push_back({"ticket2_u4_8pb", launch_warp_split<float, 4, 2, 8, false>, Output::kExact});
      cases.push_back({"ticket4_u4_16pb", launch_warp_split<float, 4, 4, 16, false>, Output::kExact});
      cases.push_back({"ticket2_u8_4pb", launch_warp_split<float, 8, 2, 4, false>, Output::kExact});
      cases.push_back({"ticket4_u2_16pb", launch_warp_split<float, 2, 4, 16, false>, Output::kExact});
    }
  }
  if (std::getenv("KB14_HANDOFF")) {  // exact: their bits are checked against the library's
    if (bf16) {
      cases.push_back({"handoff2", launch_handoff<__nv_bfloat16, 8, 2, 2>, Output::kExact});
      cases.push_back({"handoff2_pm", launch_handoff<__nv_bfloat16, 8, 2, 2, true>, Output::kExact});
      cases.push_back({"handoff4_pm", launch_handoff<__nv_bfloat16, 4, 4, 3, true>, Output::kExact});
      cases.push_back({"handoff8_pm", launch_handoff<__nv_bfloat16, 2, 8, 4, true>, Output::kExact});
    } else {
      cases.push_back({"handoff4", launch_handoff<float, 8, 4, 2>, Output::kExact});
      cases.push_back({"handoff2_pm", launch_handoff<float, 16, 2, 1, true>, Output::kExact});
      cases.push_back({"handoff4_pm", launch_handoff<float, 8, 4, 2, true>, Output::kExact});
      cases.push_back({"handoff8_pm", launch_handoff<float, 4, 8, 3, true>, Output::kExact});
    }
  }

  void *y, *out;
  const size_t n = size_t(rows) * cols, elem = bf16 ? 2 : 4;
  CK(cudaMalloc(&y, n * elem + 256));
  CK(cudaMalloc(&out, size_t(rows) * elem));
  CK(cudaMalloc(&g_block_sums, kMaxFreeBlocks * sizeof(float)));
  CK(cudaMalloc(&g_handoff.acc, size_t(rows) * 8 * kLeanBlock * sizeof(float)));
  CK(cudaMalloc(&g_handoff.flags, size_t(rows) * sizeof(unsigned)));
  CK(cudaMemset(g_handoff.flags, 0, size_t(rows) * sizeof(unsigned)));
  CK(cudaMalloc(&g_warp_split.part_totals, size_t(rows) * 8 * sizeof(float)));
  CK(cudaMalloc(&g_warp_split.tickets, size_t(rows) * sizeof(unsigned)));
  CK(cudaMemset(g_warp_split.tickets, 0, size_t(rows) * sizeof(unsigned)));
  CK(cudaMalloc(&g_handoff.tickets, 2 * sizeof(unsigned)));
  CK(cudaMemset(g_handoff.tickets, 0, 2 * sizeof(unsigned)));
  g_bytes = n * elem;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = float((i * 2654435761u) % 1000) / 1000.0f;
  if (bf16) {
    std::vector<__nv_bfloat16> h16(n);
    for (size_t i = 0; i < n; ++i) h16[i] = __float2bfloat16(host[i]);
    CK(cudaMemcpy(y, h16.data(), n * 2, cudaMemcpyHostToDevice));
  } else {
    CK(cudaMemcpy(y, host.data(), n * 4, cudaMemcpyHostToDevice));
  }
  const microbench::ReadFlush flush;

  if (ncu) {
    for (const Case& c : cases)
      for (int i = 0; i < 3; ++i) c.launch(y, cols, rows, cols, out);
    CK(cudaDeviceSynchronize());
    for (const Case& c : cases) std::printf("%s\n", c.name.c_str());
    return 0;
  }

  // The exact cases' bits, every row, against the library's.
  {
    std::vector<char> want(size_t(rows) * elem), got(size_t(rows) * elem);
    cases[0].launch(y, cols, rows, cols, out);
    CK(cudaMemcpy(want.data(), out, want.size(), cudaMemcpyDeviceToHost));
    for (size_t ci = 1; ci < cases.size(); ++ci) {
      const Case& c = cases[ci];
      if (c.output != Output::kExact) continue;
      for (int rep = 0; rep < 3; ++rep) {  // the tickets and flags over several launches
        CK(cudaMemset(out, 0xff, got.size()));
        c.launch(y, cols, rows, cols, out);
        CK(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost));
        int differ = 0;
        for (int i = 0; i < rows; ++i) differ += std::memcmp(&got[i * elem], &want[i * elem], elem) != 0;
        if (rep == 2) std::printf("bits, %s against %s: %s\n", c.name.c_str(), cases[0].name.c_str(),
                                  differ ? (std::to_string(differ) + " rows differ (WRONG)").c_str() : "equal");
      }
    }
  }
  const int k = int(cases.size());
  const auto times = microbench::time_in_turn(k, rounds, 5, nullptr, 1 << 18, &flush, 1,
                                              [&](int c) { cases[c].launch(y, cols, rows, cols, out); });
  // Every case sums the same row; their results agree to rounding (the patterns add in any order).
  std::printf("row 0 sums:");
  for (const Case& c : cases) {
    if (c.output == Output::kNone) continue;
    c.launch(y, cols, rows, cols, out);
    float v;
    if (bf16) {
      __nv_bfloat16 b;
      CK(cudaMemcpy(&b, out, 2, cudaMemcpyDeviceToHost));
      v = __bfloat162float(b);
    } else {
      CK(cudaMemcpy(&v, out, 4, cudaMemcpyDeviceToHost));
    }
    std::printf(" %s %.6g", c.name.c_str(), v);
  }
  std::printf("\n");
  std::printf("%d x %d %s, %d rounds in turn after a 256 MB read flush, us (gap: median of case - %s, "
              "per round)\n", rows, cols, argv[1], rounds, cases[0].name.c_str());
  std::vector<std::string> names;
  for (const Case& c : cases) names.push_back(c.name);
  microbench::print_gaps(names, times);
  if (free_reads) {
    // The read ceiling in the same process: a 2 GiB flat read, 20 calls after a read flush.
    const size_t big = size_t(2) << 30;
    void* huge;
    CK(cudaMalloc(&huge, big));
    CK(cudaMemset(huge, 0, big));
    const auto ceiling = microbench::time_in_turn(1, 20, 2, nullptr, 1 << 18, &flush, 1,
                                                  [&](int) { flat_read_bytes<512, 8, 4>(huge, big); });
    const float ceiling_us = microbench::median(ceiling[0]);
    const double gbps = double(big) / (ceiling_us * 1e3);
    std::printf("read ceiling (2 GiB flat read, median of 20): %.1f us, %.0f GB/s\n", ceiling_us, gbps);
    std::printf("%zu bytes; at the ceiling %.2f us\n", g_bytes, double(g_bytes) / (gbps * 1e3));
    for (size_t c = 0; c < cases.size(); ++c) {
      const double case_gbps = double(g_bytes) / (microbench::median(times[c]) * 1e3);
      std::printf("  %-20s %6.0f GB/s  %5.1f%% of the ceiling\n", names[c].c_str(), case_gbps,
                  100.0 * case_gbps / gbps);
    }
  }
  return 0;
}
