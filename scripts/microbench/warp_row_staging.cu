// Standalone microbenchmark: how should an fp32 warp-per-row plan of long rows (128-1024 rows
// of 2049-8160 columns) bring its row on chip? It measures the library's staged kernel
// (one bulk copy per row into shared memory, 32 threads adding; `staged_bulk1`) and its
// split-lane kernel (128 threads, each with up to 64 four-byte loads in registers) against:
// the split-lane additions fed from shared memory, the row copied by many threads' 16-byte
// cp.async or by one or several bulk copies (`sls_bulk1`: the library's staged rows since
// 6726213, so `library` is that kernel where it was `staged_bulk1` in the first runs); 16-byte
// loads transposed within quads of threads; the split-lane kernel at fewer blocks per SM.
// Then 8-byte loads holding two chains, one exchange between neighbouring threads
// (`pair_u*`), and the staged row consumed piece by piece as its bulk copies land
// (`piecewise*`), and the row staged through registers (`regstage*`) and
// KB14_OUT_PER_CALL. Every case adds in the reference's order, so their outputs are compared bit for bit with the
// library's. Inductor's kernel (inexact here) joins the cases with KB14_TRITON_CUBIN and its
// companions (inductor_cubin.py writes them). Exploratory, the record of
// results/kernel_notes.md's figures on fp32 warp rows.
//
//   nvcc -O3 -arch=sm_90 --fmad=false -DKB14_TORCH_VERSION=211 -Ikernels \
//        -o warp_row_staging scripts/microbench/warp_row_staging.cu
//   ./warp_row_staging ROWS COLS turn [ROUNDS]  # each call after a read flush, in a balanced order
//   ./warp_row_staging ROWS COLS b2b [ROUNDS]   # 64 calls back to back over rotating copies (> L2)
//   ./warp_row_staging ROWS COLS graph [ROUNDS] # the same 64 calls as one CUDA graph
//   ./warp_row_staging ROWS COLS ncu            # three launches of each
// KB14_CASES=a,b,...: only those cases beside the library; KB14_READ_LAYOUTS=1 adds plain reads
// of aligned rows in five layouts (any order: timing references); KB14_COPIES, KB14_CALLS: the
// rotation and the calls per timing back to back; KB14_OUT_PER_CALL=1: each of those calls
// writes its own output rows.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.cuh"
#include "tail_kernels.cuh"

using namespace kb14;
using namespace kb14::tail;

namespace {

cudaStream_t g_stream = nullptr;  // every launch's stream (a non-default one, so graphs can capture it)

enum class Copy { kThreads, kBulkPieces, kRegisters };

// Lane l's edges on a row that starts mid-vector, as split_lane_rows_kernel reads them: its
// head element, added first, and its tail element, added last, both into the lane's
// accumulator 0 on the thread that holds it (`holder`), read at once so they fly with the
// row's loads. (The library's kernel writes them out: a helper there changed its code.)
struct LaneEdges {
  float first = 0.0f;  // the accumulator's start: 0 + the head, or 0
  bool has_tail = false;
  float tail = 0.0f;
  __device__ __forceinline__ float last(float acc) const { return has_tail ? acc + tail : acc; }
};

template <bool kShifted>
__device__ __forceinline__ LaneEdges lane_edges(const LeanRow<kLaneAccumulators, kShifted>& geo, bool holder, int lane,
                                                const float* row_start, const LeanArgs<float>& a) {
  LaneEdges e;
  const bool has_head = holder && geo.shift > 0 && lane >= geo.shift && lane < kLaneAccumulators;
  e.has_tail = holder && lane < (a.cols - geo.base) % kLaneAccumulators;
  if (has_head) e.first = 0.0f + lean_element_quotient(row_start + (lane - geo.shift), a.inv);
  if (e.has_tail) e.tail = lean_element_quotient(row_start + geo.base + geo.nvec * kLaneAccumulators + lane, a.inv);
  return e;
}

// split_lane_rows_kernel's additions, fed from shared memory: the row's whole vectors are
// copied in first, by every thread's 16-byte cp.async (kThreads), by kPieces bulk copies
// (kBulkPieces), or through registers (kRegisters: thread t loads vectors t, t + kThreads,
// ..., all kLoads in flight, the layout of Inductor's reads and of the fastest plain read,
// `read_512x16B`, and writes them to shared memory in the row's order: the transpose with no
// copy engine and no asynchronous copy; kLoads at least the row's vectors / kThreads); then
// threads 0-127 each add elements t, t + 128, ... as the split-lane kernel does from its
// registers, and combine the same way.
template <int kThreads, Copy kCopy, int kPieces, bool kShifted, int kLoads = 1>
__global__ void __launch_bounds__(kThreads) split_lane_staged_kernel(LeanArgs<float> a) {
  static_assert(kThreads % kSplitLaneThreads == 0 && kPieces <= kThreads, "threads 0-127 add");
  extern __shared__ __align__(128) uint4 staged[];
  __shared__ float lane_leaves[kWarp];
  __shared__ uint64_t landed;
  const int t = threadIdx.x;
  const int r = blockIdx.x;
  const LeanRow<kLaneAccumulators, kShifted> geo(r, a.cols);
  const float* row_start = a.y + r * a.row_stride;
  const float* row = row_start + geo.base;
  const uint4* src = reinterpret_cast<const uint4*>(row);
  const int n = geo.nvec * kLaneAccumulators;
  const uint64_t policy = evict_first_policy();
  uint4 buf[kCopy == Copy::kRegisters ? kLoads : 1];
  if constexpr (kCopy == Copy::kBulkPieces) {
    if (t == 0) {
      mbarrier_init(&landed, kPieces);
      fence_mbarrier_init();
    }
    __syncthreads();
  }
  wait_for_prior_grids();
  if constexpr (kCopy == Copy::kThreads) {
    for (int k = t; k < geo.nvec; k += kThreads) copy_to_shared_async(staged + k, src + k, policy);
  } else if constexpr (kCopy == Copy::kRegisters) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (t + u * kThreads < geo.nvec) lean_load_one<kLeanLoad>(buf[u], src + t + u * kThreads, policy);
  } else if (t < kPieces) {
    const int per = (geo.nvec + kPieces - 1) / kPieces;
    const int first = min(t * per, geo.nvec), last = min(first + per, geo.nvec);
    mbarrier_arrive_expecting(&landed, uint32_t(last - first) * 16u);
    if (last > first) bulk_copy_to_shared(staged + first, src + first, uint32_t(last - first) * 16u, &landed, policy);
  }
  const int lane = t / kLaneAccumulators;
  const LaneEdges edges =
      lane_edges(geo, kShifted && t < kSplitLaneThreads && t % kLaneAccumulators == 0, lane, row_start, a);
  allow_dependent_launch();
  if constexpr (kCopy == Copy::kThreads) {
    wait_for_own_copies();
    __syncthreads();
  } else if constexpr (kCopy == Copy::kRegisters) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (t + u * kThreads < geo.nvec) staged[t + u * kThreads] = buf[u];
    __syncthreads();
  } else {
    mbarrier_wait(&landed);
  }
  if (t < kSplitLaneThreads) {
    const float* f = reinterpret_cast<const float*>(staged);
    float acc = edges.first;
#pragma unroll 8
    for (int k = t; k < n; k += kSplitLaneThreads) acc = acc + quotient_of_float<float>(f[k], a.inv);
    acc = edges.last(acc);
    // split_lane_store's gather, written out here: its barrier wants every thread, and threads
    // past the first 128 (kThreads of 256 or 512) hold no chain.
    float lane_acc[kLaneAccumulators];
#pragma unroll
    for (int i = 0; i < kLaneAccumulators; ++i) lane_acc[i] = i == 0 ? acc : __shfl_down_sync(0xffffffffu, acc, i);
    if (t % kLaneAccumulators == 0) lane_leaves[lane] = lean_leaf(lane_acc);
  }
  __syncthreads();
  if (t < kWarp) {
    const float total = shuffle_tree(lane_leaves[t], kWarp);
    if (t == 0) a.out[r * a.out_stride] = Arith<float>::store(total, a.scale);
  }
}

// The staged row consumed piece by piece: thread 0 asks the copy engine for the row's whole
// vectors in kPieces bulk copies, in order, each landing on its own mbarrier. A piece spans
// whole steps (32 vectors: one element of every chain), so thread t adds its chain's elements
// of a piece as soon as that piece has landed, while the later ones fly: only the last piece's
// additions wait for the whole row (in split_lane_staged_kernel all of them do).
template <int kPieces, bool kShifted>
__global__ void __launch_bounds__(kSplitLaneThreads) split_lane_piecewise_kernel(LeanArgs<float> a) {
  extern __shared__ __align__(128) uint4 staged[];
  __shared__ float lane_leaves[kWarp];
  __shared__ uint64_t landed[kPieces];
  const int t = threadIdx.x;
  const int r = blockIdx.x;
  const LeanRow<kLaneAccumulators, kShifted> geo(r, a.cols);
  const float* row_start = a.y + r * a.row_stride;
  const float* row = row_start + geo.base;
  const uint4* src = reinterpret_cast<const uint4*>(row);
  const int n = geo.nvec * kLaneAccumulators;
  const int steps = (geo.nvec + kWarp - 1) / kWarp;
  const int piece_vectors = (steps + kPieces - 1) / kPieces * kWarp;
  if (t == 0) {
#pragma unroll
    for (int p = 0; p < kPieces; ++p) mbarrier_init(&landed[p], 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  wait_for_prior_grids();
  if (t == 0) {
    const uint64_t policy = evict_first_policy();
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int first = min(p * piece_vectors, geo.nvec), last = min(first + piece_vectors, geo.nvec);
      const uint32_t bytes = uint32_t(last - first) * 16u;
      mbarrier_arrive_expecting(&landed[p], bytes);
      if (bytes > 0) bulk_copy_to_shared(staged + first, src + first, bytes, &landed[p], policy);
    }
  }
  const int lane = t / kLaneAccumulators;
  const LaneEdges edges = lane_edges(geo, kShifted && t % kLaneAccumulators == 0, lane, row_start, a);
  allow_dependent_launch();
  const float* f = reinterpret_cast<const float*>(staged);
  float acc = edges.first;
#pragma unroll 1
  for (int p = 0; p < kPieces; ++p) {
    mbarrier_wait(&landed[p]);
    const int end = min(n, (p + 1) * piece_vectors * kLaneAccumulators);
#pragma unroll 4
    for (int k = t + p * piece_vectors * kLaneAccumulators; k < end; k += kSplitLaneThreads)
      acc = acc + quotient_of_float<float>(f[k], a.inv);
  }
  acc = edges.last(acc);
  split_lane_store(acc, t, lane, lane_leaves, a, r);
}

// split_lane_rows_kernel's chains, read by 16-byte loads: thread 4 l + q loads lane l's vector
// of step 4 s + q (the reference's lane l adds vectors l, l + 32, ... in steps 0, 1, ...), so
// each quad of threads holds four consecutive steps of one lane; a 4 x 4 transpose within the
// quad (two butterfly stages of shuffles) leaves thread 4 l + q with accumulator q's elements
// of those four steps, in order. U vectors in flight per thread.
template <int U, int kMinBlocks, bool kShifted, LeanLoad kLoad = kLeanLoad>
__global__ void __launch_bounds__(kSplitLaneThreads, kMinBlocks) quad_lane_rows_kernel(LeanArgs<float> a) {
  __shared__ float lane_leaves[kWarp];
  const int t = threadIdx.x;
  const int r = blockIdx.x;
  const int lane = t / 4, q = t % 4;
  const LeanRow<4, kShifted> geo(r, a.cols);
  const float* row_start = a.y + r * a.row_stride;
  const uint4* row = reinterpret_cast<const uint4*>(row_start + geo.base);
  const uint64_t policy = kLoadHasPolicy<kLoad> ? evict_first_policy() : 0;
  uint4 buf[U];
  const auto load_round = [&](int s0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int k = lane + kWarp * (4 * (s0 + u) + q);
      if (k < geo.nvec) lean_load_one<kLoad>(buf[u], row + k, policy);
      else buf[u] = make_uint4(0, 0, 0, 0);
    }
  };
  wait_for_prior_grids();
  load_round(0);
  const LaneEdges edges = lane_edges(geo, kShifted && q == 0, lane, row_start, a);
  allow_dependent_launch();
  float acc = edges.first;
#pragma unroll 1
  for (int s0 = 0;;) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float x[4] = {quotient_of_float<float>(__uint_as_float(buf[u].x), a.inv),
                    quotient_of_float<float>(__uint_as_float(buf[u].y), a.inv),
                    quotient_of_float<float>(__uint_as_float(buf[u].z), a.inv),
                    quotient_of_float<float>(__uint_as_float(buf[u].w), a.inv)};
      // Stage m: the positions c whose bit m differs from q's take the partner's element c ^ m.
#pragma unroll
      for (int m = 2; m > 0; m >>= 1) {
        const bool upper = (q & m) != 0;
        const int lo = 0, hi = 3 - m;  // the two positions with bit m clear
        const float send0 = upper ? x[lo] : x[lo + m];
        const float send1 = upper ? x[hi] : x[hi + m];
        const float got0 = __shfl_xor_sync(0xffffffffu, send0, m);
        const float got1 = __shfl_xor_sync(0xffffffffu, send1, m);
        if (upper) {
          x[lo] = got0;
          x[hi] = got1;
        } else {
          x[lo + m] = got0;
          x[hi + m] = got1;
        }
      }
      const int j0 = 4 * (s0 + u);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        if (lane + kWarp * (j0 + jj) < geo.nvec) acc = acc + x[jj];
      }
    }
    s0 += U;
    if (kWarp * 4 * s0 >= geo.nvec) break;  // no lane has a step left (the same for the whole block)
    load_round(s0);
  }
  acc = edges.last(acc);
  split_lane_store(acc, t, lane, lane_leaves, a, r);
}

// split_lane_rows_kernel's chains, read by 8-byte loads: thread 2 p + h (p = 0..63) loads
// word p + 64 s (elements 2 p and 2 p + 1 of step s: chains 2 p and 2 p + 1) for the steps s of
// parity h, so the pair holds both chains at steps 2 j and 2 j + 1; one exchange with the
// partner (lane ^ 1) leaves thread 2 p + h with chain 2 p + h at both steps, in order, which is
// the split-lane kernel's thread t holding chain t. Word p + 64 s is lane p / 2's vector of
// step s, so a word exists exactly where the reference's vector does. U step pairs in flight.
template <int U, int kMinBlocks, bool kShifted, LeanLoad kLoad = LeanLoad::kCacheStreaming>
__global__ void __launch_bounds__(kSplitLaneThreads, kMinBlocks) pair_lane_rows_kernel(LeanArgs<float> a) {
  __shared__ float lane_leaves[kWarp];
  const int t = threadIdx.x;
  const int r = blockIdx.x;
  const int p = t / 2, h = t % 2, lane = t / 4;
  const LeanRow<4, kShifted> geo(r, a.cols);
  const float* row_start = a.y + r * a.row_stride;
  const uint2* row = reinterpret_cast<const uint2*>(row_start + geo.base);
  const int nwords = 2 * geo.nvec;
  const uint64_t policy = kLoadHasPolicy<kLoad> ? evict_first_policy() : 0;
  uint2 buf[U];
  const auto load_round = [&](int j0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int w = p + 64 * (2 * (j0 + u) + h);
      if (w < nwords) lean_load_one<kLoad>(buf[u], row + w, policy);
      else buf[u] = make_uint2(0, 0);
    }
  };
  wait_for_prior_grids();
  load_round(0);
  const LaneEdges edges = lane_edges(geo, kShifted && t % 4 == 0, lane, row_start, a);
  allow_dependent_launch();
  float acc = edges.first;
  const int steps = (geo.nvec + kWarp - 1) / kWarp;  // the same for the whole block
#pragma unroll 1
  for (int j0 = 0;;) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const float x = __uint_as_float(buf[u].x), y = __uint_as_float(buf[u].y);
      const float got = __shfl_xor_sync(0xffffffffu, h ? x : y, 1);
      const int s = 2 * (j0 + u);
      if (lane + kWarp * s < geo.nvec) acc = acc + quotient_of_float<float>(h ? got : x, a.inv);
      if (lane + kWarp * (s + 1) < geo.nvec) acc = acc + quotient_of_float<float>(h ? y : got, a.inv);
    }
    j0 += U;
    if (2 * j0 >= steps) break;
    load_round(j0);
  }
  acc = edges.last(acc);
  split_lane_store(acc, t, lane, lane_leaves, a, r);
}

LeanArgs<float> args_for(const void* y, int rows, int cols, void* out) {
  return microbench::tail_args(y, cols, rows, cols, out);
}

// A kernel that stages each row's whole vectors in dynamic shared memory, one row per block,
// launched as a programmatic dependent; its shared-memory limit is raised on its first launch
// only (launches back to back must not wait on the host).
template <typename Kernel>
void launch_row_staged(Kernel kernel, int threads, const LeanArgs<float>& a) {
  static std::vector<const void*> raised;
  const void* k = reinterpret_cast<const void*>(kernel);
  if (std::find(raised.begin(), raised.end(), k) == raised.end()) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024));
    raised.push_back(k);
  }
  const size_t bytes = size_t(a.cols / 4) * 16;
  CK(launch_programmatic(kernel, dim3(a.rows), dim3(threads), bytes, g_stream, true, a));
}

template <int kThreads, Copy kCopy, int kPieces>
void launch_split_lane_staged(const void* y, int rows, int cols, void* out) {
  const LeanArgs<float> a = args_for(y, rows, cols, out);
  if (cols % 4) launch_row_staged(split_lane_staged_kernel<kThreads, kCopy, kPieces, true>, kThreads, a);
  else launch_row_staged(split_lane_staged_kernel<kThreads, kCopy, kPieces, false>, kThreads, a);
}

// split_lane_staged_kernel staged through registers, with as few loads per thread as hold the row.
template <int kThreads>
void launch_register_staged(const void* y, int rows, int cols, void* out) {
  const LeanArgs<float> a = args_for(y, rows, cols, out);
  const int per_thread = (cols / 4 + kThreads - 1) / kThreads;
  const auto go = [&](auto u) {
    constexpr int U = decltype(u)::value;
    if (cols % 4) launch_row_staged(split_lane_staged_kernel<kThreads, Copy::kRegisters, 1, true, U>, kThreads, a);
    else launch_row_staged(split_lane_staged_kernel<kThreads, Copy::kRegisters, 1, false, U>, kThreads, a);
  };
  if (per_thread <= 2) go(std::integral_constant<int, 2>{});
  else if (per_thread <= 4) go(std::integral_constant<int, 4>{});
  else if (per_thread <= 8) go(std::integral_constant<int, 8>{});
  else if (per_thread <= 16) go(std::integral_constant<int, 16>{});
  else std::exit(4);
}

// A pure read, in any order, of aligned rows: one row per kThreads-thread block, thread t
// taking words t, t + kThreads, ... (U of kBytes each, all in flight): which layout of the
// same bytes reads fastest, apart from any order of additions.
template <int kThreads, int kBytes, int U>
__global__ void __launch_bounds__(kThreads) row_read_layout(const float* y, int cols, float* out) {
  using W = typename std::conditional<kBytes == 16, uint4,
                                      typename std::conditional<kBytes == 8, uint2, uint32_t>::type>::type;
  __shared__ float warp_sums[kThreads / 32];
  const int t = threadIdx.x;
  const W* row = reinterpret_cast<const W*>(y + int64_t(blockIdx.x) * cols);
  const int n = cols * 4 / kBytes;
  const uint64_t policy = evict_first_policy();
  W buf[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (t + kThreads * u < n) {
      if constexpr (kBytes >= 8) lean_load_one<kLeanLoad>(buf[u], row + t + kThreads * u, policy);
      else asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(buf[u])
                        : "l"(row + t + kThreads * u), "l"(policy));
    }
  }
  float acc = 0.0f;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (t + kThreads * u < n) {
      if constexpr (kBytes == 16) acc += __uint_as_float(buf[u].x) + __uint_as_float(buf[u].y) +
                                         __uint_as_float(buf[u].z) + __uint_as_float(buf[u].w);
      else if constexpr (kBytes == 8) acc += __uint_as_float(buf[u].x) + __uint_as_float(buf[u].y);
      else acc += __uint_as_float(buf[u]);
    }
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (t % 32 == 0) warp_sums[t / 32] = acc;
  __syncthreads();
  if (t == 0) {
    float total = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    out[blockIdx.x] = total;
  }
}

template <int kThreads, int kBytes>
void launch_read_layout(const void* y, int rows, int cols, void* out) {
  const int per_thread = (cols * 4 / kBytes + kThreads - 1) / kThreads;
  const auto go = [&](auto kernel) {
    kernel<<<rows, kThreads, 0, g_stream>>>(static_cast<const float*>(y), cols, static_cast<float*>(out));
  };
  if (cols % 4) std::exit(3);  // aligned rows only
  if (per_thread <= 2) go(row_read_layout<kThreads, kBytes, 2>);
  else if (per_thread <= 4) go(row_read_layout<kThreads, kBytes, 4>);
  else if (per_thread <= 8) go(row_read_layout<kThreads, kBytes, 8>);
  else if (per_thread <= 16) go(row_read_layout<kThreads, kBytes, 16>);
  else if (per_thread <= 32) go(row_read_layout<kThreads, kBytes, 32>);
  else std::exit(4);
}

template <int U, int kMinBlocks, LeanLoad kLoad = kLeanLoad>
void launch_quad_lane(const void* y, int rows, int cols, void* out) {
  const LeanArgs<float> a = args_for(y, rows, cols, out);
  const auto go = [&](auto kernel) {
    CK(launch_programmatic(kernel, dim3(rows), dim3(kSplitLaneThreads), 0, g_stream, true, a));
  };
  if (cols % 4) go(quad_lane_rows_kernel<U, kMinBlocks, true, kLoad>);
  else go(quad_lane_rows_kernel<U, kMinBlocks, false, kLoad>);
}

template <int kPieces>
void launch_piecewise(const void* y, int rows, int cols, void* out) {
  const LeanArgs<float> a = args_for(y, rows, cols, out);
  if (cols % 4) launch_row_staged(split_lane_piecewise_kernel<kPieces, true>, kSplitLaneThreads, a);
  else launch_row_staged(split_lane_piecewise_kernel<kPieces, false>, kSplitLaneThreads, a);
}

template <int U, int kMinBlocks, LeanLoad kLoad = LeanLoad::kCacheStreaming>
void launch_pair_lane(const void* y, int rows, int cols, void* out) {
  const LeanArgs<float> a = args_for(y, rows, cols, out);
  const auto go = [&](auto kernel) {
    CK(launch_programmatic(kernel, dim3(rows), dim3(kSplitLaneThreads), 0, g_stream, true, a));
  };
  if (cols % 4) go(pair_lane_rows_kernel<U, kMinBlocks, true, kLoad>);
  else go(pair_lane_rows_kernel<U, kMinBlocks, false, kLoad>);
}

// The library's kernels, forced.
void launch_staged(const void* y, int rows, int cols, void* out) {
  CK((launch_staged_warp_rows<float, 4, true>(args_for(y, rows, cols, out), g_stream)));
}
template <int U>
void launch_split(const void* y, int rows, int cols, void* out) {
  CK((launch_split_lane_rows<U, true>(args_for(y, rows, cols, out), g_stream)));
}

// The lean kernel's warp rows: U vectors in flight per lane, kBlock-thread blocks.
template <int U, int kBlock, int kMinBlocks>
void launch_lean_warp_rows(const void* y, int rows, int cols, void* out) {
  CK((launch_lean_variant<float, 4, U, kLeanLoad, true, true, false, kBlock, kMinBlocks>(args_for(y, rows, cols, out),
                                                                                       g_stream)));
}

// The split-lane kernel with its blocks per SM capped at kBlocksPerSm by unused dynamic shared
// memory: fewer rows in flight at once, so that the rows finish, and add, in waves.
template <int U, int kBlocksPerSm>
void launch_split_capped(const void* y, int rows, int cols, void* out) {
  const LeanArgs<float> a = args_for(y, rows, cols, out);
  const int pad = (228 * 1024) / kBlocksPerSm - 1024 - 256;
  const auto go = [&](auto kernel) {
    static bool sized = false;
    if (!sized) {
      // The kernel is shared by every cap: allow the largest pad any of them asks.
      CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
      int blocks = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kSplitLaneThreads, pad));
      if (blocks != kBlocksPerSm) std::printf("split_capped<%d, %d>: %d blocks per SM\n", U, kBlocksPerSm, blocks);
    }
    sized = true;
    CK(launch_programmatic(kernel, dim3(rows), dim3(kSplitLaneThreads), size_t(pad), g_stream, true, a));
  };
  if (cols % 4) go(split_lane_rows_kernel<U, kSplitLaneMinBlocks<U>, true, true>);
  else go(split_lane_rows_kernel<U, kSplitLaneMinBlocks<U>, true, false>);
}

// The library's own choice, as kb14::div_sum_scale launches it.
void launch_library(const void* y, int rows, int cols, void* out) {
  microbench::launch_library_choice<float>(y, cols, rows, cols, out, g_stream);
}

microbench::InductorTail g_inductor;
void launch_triton(const void* y, int rows, int cols, void* out) { g_inductor.launch(y, rows, cols, out, g_stream); }

struct Case {
  std::string name;
  void (*launch)(const void*, int, int, void*);
  bool exact;  // adds in the reference's order
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::printf("usage: %s ROWS COLS turn|b2b|graph|ncu [ROUNDS]\n", argv[0]);
    return 2;
  }
  const int rows = std::atoi(argv[1]), cols = std::atoi(argv[2]);
  const std::string mode = argv[3];
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 400;
  std::vector<Case> cases = {
      {"library", launch_library, true},
      {"staged_bulk1", launch_staged, true},
      {"split32", launch_split<32>, true},
      {"split48", launch_split<48>, true},
      {"split64", launch_split<64>, true},
      {"split32_sm4", launch_split_capped<32, 4>, true},
      {"split32_sm5", launch_split_capped<32, 5>, true},
      {"split32_sm6", launch_split_capped<32, 6>, true},
      {"split48_sm4", launch_split_capped<48, 4>, true},
      {"split64_sm3", launch_split_capped<64, 3>, true},
      {"lean_warp_u2", launch_lean_warp_rows<2, kLeanBlock, kLeanBlocksPerSm>, true},
      {"lean_warp_u8", launch_lean_warp_rows<kWideWarpRowU, kWideWarpRowBlock, kWideWarpRowBlocksPerSm>, true},
      {"lean_warp_u16", launch_lean_warp_rows<kDeepWarpRowU, kDeepWarpRowBlock, kDeepWarpRowBlocksPerSm>, true},
      {"piecewise2", launch_piecewise<2>, true},
      {"piecewise4", launch_piecewise<4>, true},
      {"piecewise8", launch_piecewise<8>, true},
      {"pair_u4", launch_pair_lane<4, 8>, true},
      {"pair_u8", launch_pair_lane<8, 8>, true},
      {"pair_u16", launch_pair_lane<16, 8>, true},
      {"pair_u16_nc", launch_pair_lane<16, 8, kLeanLoad>, true},
      {"quad_u2", launch_quad_lane<2, 8>, true},
      {"quad_u4", launch_quad_lane<4, 8>, true},
      {"quad_u8", launch_quad_lane<8, 8>, true},
      {"quad_u8_cs", launch_quad_lane<8, 8, LeanLoad::kCacheStreaming>, true},
      {"quad_u12", launch_quad_lane<12, 5>, true},
      {"quad_u16", launch_quad_lane<16, 4>, true},
      {"sls_threads128", launch_split_lane_staged<128, Copy::kThreads, 1>, true},
      {"sls_threads256", launch_split_lane_staged<256, Copy::kThreads, 1>, true},
      {"sls_threads512", launch_split_lane_staged<512, Copy::kThreads, 1>, true},
      {"sls_bulk1", launch_split_lane_staged<128, Copy::kBulkPieces, 1>, true},
      {"sls_bulk4", launch_split_lane_staged<128, Copy::kBulkPieces, 4>, true},
      {"sls_bulk16", launch_split_lane_staged<128, Copy::kBulkPieces, 16>, true},
      {"regstage512", launch_register_staged<512>, true},
      {"regstage256", launch_register_staged<256>, true},
      {"regstage128", launch_register_staged<128>, true},
  };
  CK(cudaFree(nullptr));
  CK(cudaStreamCreate(&g_stream));
  if (std::getenv("KB14_READ_LAYOUTS") && cols % 4 == 0) {
    cases.push_back({"read_512x16B", launch_read_layout<512, 16>, false});
    cases.push_back({"read_256x16B", launch_read_layout<256, 16>, false});
    cases.push_back({"read_128x16B", launch_read_layout<128, 16>, false});
    cases.push_back({"read_128x8B", launch_read_layout<128, 8>, false});
    cases.push_back({"read_128x4B", launch_read_layout<128, 4>, false});
    cases.push_back({"read_32x16B", launch_read_layout<32, 16>, false});
  }
  if (g_inductor.load_from_env()) cases.push_back({"inductor", launch_triton, false});
  if (const char* keep = std::getenv("KB14_CASES")) {  // a comma-separated subset (the library stays first)
    const std::string list = std::string(",") + keep + ",";
    std::vector<Case> kept = {cases[0]};
    for (size_t c = 1; c < cases.size(); ++c)
      if (list.find("," + cases[c].name + ",") != std::string::npos) kept.push_back(cases[c]);
    cases = kept;
  }
  const int k = int(cases.size());

  // Rotating copies of y, together more than L2, for calls back to back.
  const size_t n = size_t(rows) * cols;
  int copies = std::max<int>(2, int((size_t(200) << 20) / (n * 4)) + 1);
  if (const char* e = std::getenv("KB14_COPIES")) copies = std::atoi(e);
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = float(int((i * 2654435761u) % 2001) - 1000) / 997.0f;
  std::vector<void*> ys(copies);
  for (auto& y : ys) {
    CK(cudaMalloc(&y, n * 4));
    CK(cudaMemcpy(y, host.data(), n * 4, cudaMemcpyHostToDevice));
  }
  const bool graph = mode == "graph", b2b = mode == "b2b" || graph;
  const int calls = b2b ? (std::getenv("KB14_CALLS") ? std::atoi(std::getenv("KB14_CALLS")) : 64) : 1;
  // KB14_OUT_PER_CALL=1: back to back, call i writes its own rows (as a framework's fresh
  // output would) instead of every call rewriting the same ones. The bits check writes case
  // c's rows.
  const bool out_per_call = std::getenv("KB14_OUT_PER_CALL") != nullptr;
  void* out;
  CK(cudaMalloc(&out, size_t(rows) * 4 * std::max(k, calls)));
  const auto call_out = [&](int i) { return static_cast<float*>(out) + (out_per_call ? size_t(i) * rows : 0); };

  // Bits: every exact case against the library's output.
  std::vector<std::vector<float>> got(k, std::vector<float>(rows));
  for (int c = 0; c < k; ++c) {
    cases[c].launch(ys[0], rows, cols, static_cast<float*>(out) + size_t(c) * rows);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(got[c].data(), static_cast<float*>(out) + size_t(c) * rows, rows * 4, cudaMemcpyDeviceToHost));
  }
  std::printf("%d x %d fp32; bits against the library's:", rows, cols);
  for (int c = 1; c < k; ++c) {
    int differ = 0;
    for (int i = 0; i < rows; ++i) differ += std::memcmp(&got[c][i], &got[0][i], 4) != 0;
    std::printf(" %s %s", cases[c].name.c_str(),
                differ ? (std::to_string(differ) + " rows differ" + (cases[c].exact ? " (WRONG)" : "")).c_str()
                       : "equal");
  }
  std::printf("\n");

  if (mode == "ncu") {
    for (const Case& c : cases)
      for (int i = 0; i < 3; ++i) c.launch(ys[0], rows, cols, out);
    CK(cudaStreamSynchronize(g_stream));
    for (const Case& c : cases) std::printf("%s\n", c.name.c_str());
    return 0;
  }

  const microbench::ReadFlush flush;
  // graph: each case's calls captured once and replayed (no host launches between them).
  std::vector<cudaGraphExec_t> graphs(k);
  if (graph) {
    for (int c = 0; c < k; ++c) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < calls; ++i) cases[c].launch(ys[i % copies], rows, cols, call_out(i));
      CK(cudaStreamEndCapture(g_stream, &g));
      CK(cudaGraphInstantiate(&graphs[c], g, 0));
    }
  }
  const auto enqueue = [&](int c) {
    if (graph) {
      CK(cudaGraphLaunch(graphs[c], g_stream));
      return;
    }
    for (int i = 0; i < calls; ++i) cases[c].launch(ys[i % copies], rows, cols, call_out(i));
  };
  // Back to back, the spin is long enough for the host to queue every call behind it.
  const auto times = microbench::time_in_turn(k, rounds, 3, g_stream, b2b ? 1 << 21 : 1 << 18, b2b ? nullptr : &flush,
                                              calls, enqueue);
  if (b2b)
    std::printf("%d calls back to back over %d rotating copies, %s, %d rounds, us per call (gap: median of case - "
                "library, per round)\n", calls, copies, graph ? "one CUDA graph" : "launched one by one", rounds);
  else
    std::printf("each call after a 256 MB read flush, %d rounds, us per call (gap: median of case - library, per "
                "round)\n", rounds);
  std::vector<std::string> names;
  for (const Case& c : cases) names.push_back(c.name);
  microbench::print_gaps(names, times);
  return 0;
}
