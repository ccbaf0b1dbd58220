// The tail's kernels without torch, behind a C ABI, so that scripts/tail_variants.py can
// time physical mappings against each other and against Inductor in one process
// without building the library. The library's own launcher (kernels/fused_reduce*.cu, its
// dispatch and switch) is compiled in; the variants below change a configuration the
// dispatch returned, or launch kernels of their own. Build (KB14_TORCH_VERSION as for the library):
//   nvcc -O3 --fmad=false -arch=sm_90 -shared -Xcompiler -fPIC -DKB14_TORCH_VERSION=211 \
//        -Ikernels -o tail_variants.so scripts/tail_variants.cu
#include "bulk_copy.cuh"
#include "fused_reduce.cu"
#include "fused_reduce_bf16.cu"
#include "fused_reduce_double.cu"
#include "fused_reduce_half.cu"

using namespace kb14;
using namespace kb14::tail;

namespace kb14 {
namespace {

__global__ void empty_kernel() {}

template <typename T>
LeanArgs<T> lean_args(const Args<T>& g) {
  return LeanArgs<T>{g.y, g.row_stride, g.out, g.out_stride, static_cast<int>(g.rows), static_cast<int>(g.cols),
                     g.inv, g.scale, 0};
}

// The flags of a lean launch as the dispatch sets them, programmatic.
template <typename T>
Config lean_config(const LeanArgs<T>& a) {
  constexpr int V = kInputVec<T>;
  Config c;
  c.packed = sizeof(T) == 2 && packed_quotient_exact(a.inv, std::is_same_v<T, __half>);
  c.shifted = a.cols % V != 0;
  c.programmatic = true;
  return c;
}

template <typename T, typename Launch>
int with_packed_mul(const LeanArgs<T>& a, Launch&& launch) {
  if (lean_config(a).packed) {
    if constexpr (sizeof(T) == 2) return launch(std::true_type{});
  }
  return launch(std::false_type{});
}

// Sums y's words in any order, U loads in flight per thread over a grid-stride loop.
template <int U, bool kEvictFirst>
__global__ void __launch_bounds__(kLeanBlock) unordered_read_kernel(const uint4* __restrict__ y, int64_t n16,
                                                                    float* __restrict__ sink) {
  const uint64_t policy = kEvictFirst ? evict_first_policy() : 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  float acc = 0.0f;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n16; i += U * stride) {
    uint4 b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if constexpr (kEvictFirst) {
        lean_load_one(b[u], y + i + u * stride, policy);
      } else {
        b[u] = __ldg(y + i + u * stride);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += __uint_as_float(b[u].x) + __uint_as_float(b[u].y) + __uint_as_float(b[u].z) + __uint_as_float(b[u].w);
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldg(y + i);
    acc += __uint_as_float(v.x) + __uint_as_float(v.y) + __uint_as_float(v.z) + __uint_as_float(v.w);
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) sink[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = acc;
}

// The lean kernel's order, with the row fetched by the bulk-copy engine: thread 0
// asks for the row in chunks of 512 vectors (one per thread), each completing on its
// own mbarrier; thread t then adds vector t of each chunk, as the lean kernel does.
// Only rows of exactly kChunks * 512 aligned float4 vectors (8192 floats for 4).
template <int kChunks>
__global__ void __launch_bounds__(kLeanBlock, kLeanBlocksPerSm) bulk_rows_kernel(LeanArgs<float> a) {
  extern __shared__ __align__(128) uint4 row_copy[];
  __shared__ __align__(8) uint64_t arrived[kChunks];
  __shared__ float warp_totals[kLeanWarps];
  constexpr uint32_t kChunkBytes = kLeanBlock * sizeof(uint4);
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int r = blockIdx.x;
  init_block_mbarriers(arrived, kChunks);
  wait_for_prior_grids();
  if (tid == 0) {
    const uint64_t policy = evict_first_policy();
    const char* src = reinterpret_cast<const char*>(a.y + int64_t(r) * a.row_stride);
    for (int c = 0; c < kChunks; ++c) {
      mbarrier_arrive_expecting(&arrived[c], kChunkBytes);
      bulk_copy_to_shared(row_copy + c * kLeanBlock, src + c * kChunkBytes, kChunkBytes, &arrived[c], policy);
    }
  }
  allow_dependent_launch();
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    mbarrier_wait(&arrived[c], 0);
    const uint4 v = row_copy[c * kLeanBlock + tid];
    acc[0] = acc[0] + __fmul_rn(__uint_as_float(v.x), a.inv);
    acc[1] = acc[1] + __fmul_rn(__uint_as_float(v.y), a.inv);
    acc[2] = acc[2] + __fmul_rn(__uint_as_float(v.z), a.inv);
    acc[3] = acc[3] + __fmul_rn(__uint_as_float(v.w), a.inv);
  }
  const float w = shuffle_tree(leaf_sum(acc), kWarp);
  if (lane == 0) warp_totals[warp] = w;
  __syncthreads();
  if (warp == 0) {
    const float total = warp_tree(lane < kLeanWarps ? warp_totals[lane] : 0.0f, kLeanWarps);
    if (lane == 0) a.out[r * a.out_stride] = __fmul_rn(total, a.scale);
  }
}

// Asks L2 for the 128-byte line holding p (no register written; a hint).
__device__ __forceinline__ void prefetch_line_to_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// The library's loop-free block-row kernel (rows of exactly U vectors per thread; the same
// loads, additions and trees, lanes before warps), where the blocks of the first
// `warm_rows` rows ask L2 for a row before griddepcontrol.wait: back to back those blocks
// are placed while the kernel before drains, and their fetches fill the bus's idle time
// between the two kernels' reads. Warming every row (or every first-wave row) was
// slower; this warms about one or two rows per SM, the bytes one or two microseconds of
// reading move. kBulk: one bulk prefetch of the row by thread 0, else each thread its own
// lines; kEvictFirst: the bulk prefetch marked evict-first. `ahead`: which row block b
// warms, b + ahead (0: its own; a row of a later wave is read long after the fetch, so a
// single call does not fetch it twice).
template <typename T, int U, bool kPackedMul, bool kBulk, bool kEvictFirst = false>
__global__ void __launch_bounds__(kLeanBlock, kLeanBlocksPerSm)
    warmed_exact_rows_kernel(LeanArgs<T> a, int warm_rows, int ahead) {
  constexpr int V = 16 / sizeof(T);
  __shared__ float warp_totals[kLeanWarps];
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int r = blockIdx.x;
  const uint4* row = reinterpret_cast<const uint4*>(a.y + int64_t(r) * a.row_stride);
  const uint64_t policy = evict_first_policy();
  if (r < warm_rows && r + ahead < a.rows) {
    const uint4* warmed = reinterpret_cast<const uint4*>(a.y + int64_t(r + ahead) * a.row_stride);
    if constexpr (kBulk) {
      if (tid == 0) bulk_prefetch_to_l2(warmed, U * kLeanBlock * 16, kEvictFirst ? policy : 0);
    } else {
      // A warp's 16-byte vectors u cover four lines; one lane in eight asks for each.
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (lane % 8 == 0) prefetch_line_to_l2(warmed + tid + u * kLeanBlock);
    }
  }
  wait_for_prior_grids();
  uint4 buf[U];
  lean_load<U, kLeanBlock, true>(buf, row, tid, U * kLeanBlock, policy);
  allow_dependent_launch();
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int u = 0; u < U; ++u) lean_add_vector<T, V, kPackedMul>(acc, buf[u], a.inv);
  const float w = shuffle_tree(leaf_sum(acc), kWarp);
  if (lane == 0) warp_totals[warp] = w;
  __syncthreads();
  if (warp == 0) {
    const float total = warp_tree(lane < kLeanWarps ? warp_totals[lane] : 0.0f, kLeanWarps);
    if (lane == 0) a.out[r * a.out_stride] = Arith<T>::store(total, a.scale);
  }
}

template <typename T, int U, bool kBulk, bool kEvictFirst>
int launch_warmed_u(const LeanArgs<T>& a, int warm_rows, int ahead, cudaStream_t stream) {
  return with_packed_mul(a, [&](auto packed) {
    return launch_programmatic(warmed_exact_rows_kernel<T, U, decltype(packed)::value, kBulk, kEvictFirst>,
                               dim3(static_cast<unsigned>(a.rows)), dim3(kLeanBlock), 0, stream, true, a, warm_rows,
                               ahead);
  });
}

// Calls launch(std::integral_constant<int, U>{}) for block-row plans whose rows are exactly
// U aligned 16-byte vectors per thread, U one of kUs (lanes-before-warps order, torch 2.10+);
// -1 for any other plan.
template <typename T, int... kUs, typename Launch>
int with_exact_row_vectors(const Plan& p, const LeanArgs<T>& a, Launch&& launch) {
  constexpr int V = 16 / sizeof(T);
  if (!p.split_y || !kOrder.lanes_before_warps || a.cols % (V * kLeanBlock) != 0 || a.row_stride % V != 0) return -1;
  const int u = a.cols / (V * kLeanBlock);
  int result = -1;
  ((u == kUs ? (result = launch(std::integral_constant<int, kUs>{}), true) : false) || ...);
  return result;
}

// Rows of 512, 1024 or 2048 aligned vectors (fp32 rows of 2048-8192 on a block-row plan).
template <typename T, bool kBulk, bool kEvictFirst = false>
int launch_warmed(const Plan& p, const LeanArgs<T>& a, int warm_rows, int ahead, cudaStream_t stream) {
  return with_exact_row_vectors<T, 1, 2, 4>(p, a, [&](auto u) {
    return launch_warmed_u<T, decltype(u)::value, kBulk, kEvictFirst>(a, warm_rows, ahead, stream);
  });
}

// Shared memory a ring block may use, by blocks per SM (of the 227 KB an SM offers).
template <int kMinBlocks>
constexpr int kRingBytes = kMinBlocks == 1 ? 192 << 10 : kMinBlocks == 2 ? 96 << 10 : kMinBlocks == 3 ? 64 << 10
                                                                                 : 48 << 10;

// The loop-free block-row kernel's order (thread t adds vectors t, t + 512, ... of its row,
// then the lanes' tree, then the warps'), but persistent: kMinBlocks blocks per SM, block b
// takes rows b, b + grid, ..., and thread 0 keeps a ring of kStages whole rows in flight,
// each fetched by one bulk copy completing on its stage's mbarrier. A stage is refilled
// right after the barrier at which every thread has read it, so the bytes in flight per SM
// are bounded by shared memory, not by registers, and never drop between a block's rows.
// Rows of exactly U * 512 aligned 16-byte vectors, lanes-before-warps order (torch 2.10+).
template <typename T, int U, int kMinBlocks, bool kPackedMul>
__global__ void __launch_bounds__(kLeanBlock, kMinBlocks) ring_rows_kernel(LeanArgs<T> a) {
  constexpr int V = 16 / sizeof(T);
  constexpr int kRowVectors = U * kLeanBlock;
  constexpr uint32_t kRowBytes = kRowVectors * 16;
  constexpr int kStages = kRingBytes<kMinBlocks> / kRowBytes;
  static_assert(kStages >= 1, "a ring holds at least one row");
  extern __shared__ __align__(128) uint4 ring[];
  __shared__ __align__(8) uint64_t landed[kStages];
  __shared__ float warp_totals[2][kLeanWarps];
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int grid = gridDim.x;
  init_block_mbarriers(landed, kStages);
  wait_for_prior_grids();
  const uint64_t policy = evict_first_policy();
  auto fetch = [&](int i) {  // this block's i-th row into stage i % kStages
    const int r = blockIdx.x + i * grid;
    if (r >= a.rows) return;
    uint64_t* bar = &landed[i % kStages];
    mbarrier_arrive_expecting(bar, kRowBytes);
    bulk_copy_to_shared(ring + (i % kStages) * kRowVectors, a.y + int64_t(r) * a.row_stride, kRowBytes, bar, policy);
  };
  if (tid == 0)
    for (int i = 0; i < kStages; ++i) fetch(i);
  allow_dependent_launch();
  for (int i = 0;; ++i) {
    const int r = blockIdx.x + i * grid;
    if (r >= a.rows) break;
    const int s = i % kStages;
    mbarrier_wait(&landed[s], (i / kStages) & 1);
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
    const uint4* row = ring + s * kRowVectors;
#pragma unroll
    for (int u = 0; u < U; ++u) lean_add_vector<T, V, kPackedMul>(acc, row[tid + u * kLeanBlock], a.inv);
    const float w = shuffle_tree(leaf_sum(acc), kWarp);
    if (lane == 0) warp_totals[i & 1][warp] = w;
    __syncthreads();  // every thread has read stage s and posted its warp's total
    if (tid == 0) {
      fence_proxy_async_shared();
      fetch(i + kStages);
    }
    if (warp == 0) {
      const float total = warp_tree(lane < kLeanWarps ? warp_totals[i & 1][lane] : 0.0f, kLeanWarps);
      if (lane == 0) a.out[r * a.out_stride] = Arith<T>::store(total, a.scale);
    }
  }
}

template <typename T, int U, int kMinBlocks>
int launch_ring_rows_u(const LeanArgs<T>& a, const DeviceShape& prop, cudaStream_t stream) {
  constexpr int kStages = kRingBytes<kMinBlocks> / (U * kLeanBlock * 16);
  if constexpr (kStages < 1) {
    return -1;
  } else {
    const int smem = kStages * U * kLeanBlock * 16;
    const unsigned grid = static_cast<unsigned>(std::min(a.rows, prop.multiprocessors * kMinBlocks));
    return with_packed_mul(a, [&](auto packed) {
      const auto kernel = ring_rows_kernel<T, U, kMinBlocks, decltype(packed)::value>;
      static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (attr != cudaSuccess) return attr;
      return launch_programmatic(kernel, dim3(grid), dim3(kLeanBlock), smem, stream, true, a);
    });
  }
}

template <typename T, int kMinBlocks>
int launch_ring_rows(const Plan& p, const LeanArgs<T>& a, const DeviceShape& prop, cudaStream_t stream) {
  return with_exact_row_vectors<T, 1, 2, 4, 8>(p, a, [&](auto u) {
    return launch_ring_rows_u<T, decltype(u)::value, kMinBlocks>(a, prop, stream);
  });
}

// The loop-free block-row kernel's order on kRows rows per block: each thread issues its
// U loads of every row at once, then adds row by row; each row's lanes meet in shuffle_tree,
// and warp i finishes row i's tree over the warps. A block then lives kRows times as
// long against the same tree and barrier at its end: at bf16 16384 x 8192 the one-row
// kernel kept 82% of warps active against Inductor's 90% (run71). Rows of exactly U * 512
// aligned 16-byte vectors, lanes-before-warps order (torch 2.10+); launched for 16-bit rows of
// 8192 (U = 2) only, where no count of rows per block spills.
template <typename T, int U, int kRows, int kMinBlocks, bool kPackedMul>
__global__ void __launch_bounds__(kLeanBlock, kMinBlocks) multi_row_kernel(LeanArgs<T> a) {
  constexpr int V = 16 / sizeof(T);
  static_assert(kRows <= kLeanWarps, "one warp finishes each row");
  __shared__ float warp_totals[kRows][kLeanWarps];
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const int first = blockIdx.x * kRows;
  const int rows = min(kRows, a.rows - first);
  const uint64_t policy = evict_first_policy();
  wait_for_prior_grids();
  uint4 buf[kRows][U];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    if (j < rows) {
      const uint4* row = reinterpret_cast<const uint4*>(a.y + int64_t(first + j) * a.row_stride);
      lean_load<U, kLeanBlock, true>(buf[j], row, tid, U * kLeanBlock, policy);
    }
  }
  allow_dependent_launch();
  float leaf[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
    if (j < rows) {
#pragma unroll
      for (int u = 0; u < U; ++u) lean_add_vector<T, V, kPackedMul>(acc, buf[j][u], a.inv);
    }
    leaf[j] = leaf_sum(acc);
  }
#pragma unroll
  for (int j = 0; j < kRows; ++j) leaf[j] = shuffle_tree(leaf[j], kWarp);
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < kRows; ++j) warp_totals[j][warp] = leaf[j];
  }
  __syncthreads();
  if (warp < rows) {
    const float total = warp_tree(lane < kLeanWarps ? warp_totals[warp][lane] : 0.0f, kLeanWarps);
    if (lane == 0) a.out[(first + warp) * a.out_stride] = Arith<T>::store(total, a.scale);
  }
}

template <typename T, int kRows, int kMinBlocks>
int launch_multi_row(const Plan& p, const LeanArgs<T>& a, cudaStream_t stream) {
  if constexpr (sizeof(T) != 2) {
    return -1;
  } else {
    return with_exact_row_vectors<T, 2>(p, a, [&](auto u) {
      return with_packed_mul(a, [&](auto packed) {
        return launch_programmatic(multi_row_kernel<T, decltype(u)::value, kRows, kMinBlocks, decltype(packed)::value>,
                                   dim3(static_cast<unsigned>(ceil_div(a.rows, kRows))), dim3(kLeanBlock), 0, stream,
                                   true, a);
      });
    });
  }
}

// The lean kernel with U vectors in flight per logical thread, a block per row or (kWarpRows)
// a warp per row in kBlock-thread blocks (registers for kMinBlocks blocks per SM), the library's
// loads, programmatic launch; -1 where the plan maps rows the other way. The same additions
// in the same order as the library's choice. kExactRows: rows of exactly U vectors per thread.
template <typename T, int V, int U, bool kWarpRows, bool kExactRows = false, int kBlock = kLeanBlock,
          int kMinBlocks = kLeanBlocksPerSm>
int launch_lean_mapping(const Plan& p, const Args<T>& g, cudaStream_t stream) {
  if (p.split_y == kWarpRows) return -1;
  const LeanArgs<T> a = lean_args(g);
  return launch_lean_rows<T, U, kWarpRows, kExactRows, kBlock, kMinBlocks>(lean_config(a), a, stream);
}

template <typename T>
int run(int variant, const void* y, long long rows, long long cols, long long row_stride, void* out,
        long long out_stride, double divisor, double scale, const DeviceShape& prop, int grid_cap,
        void* partials, cudaStream_t stream) {
  constexpr int V = kInputVec<T>;
  constexpr TailDtype kDtype = sizeof(T) == 4 ? TailDtype::kFloat
                               : std::is_same_v<T, __half> ? TailDtype::kHalf : TailDtype::kBFloat16;
  const Config lib = dispatch({kDtype, rows, cols, row_stride, 1, reinterpret_cast<uintptr_t>(y), divisor, prop,
                               KB14_TORCH_VERSION, true});
  const Plan& p = lib.plan;
  const Args<T> a = planned_args(p, static_cast<const T*>(y), row_stride, 1, static_cast<T*>(out), out_stride, divisor,
                                 scale, static_cast<typename Arith<T>::acc_t*>(partials));
  if (variant == 0 || variant == 30) return launch_general<T, V>(p, a, stream, variant == 30);
  if (variant == 6) return launch_leaf(lib, a, stream);  // what the library launches
  if (variant == 49) {  // the library's kernels launched plainly (pdl=False)
    Config plain = lib;
    plain.programmatic = false;
    return launch_leaf(plain, a, stream);
  }
  if (variant == 9) {
    empty_kernel<<<static_cast<unsigned>(rows), kLeanBlock, 0, stream>>>();
    return cudaGetLastError();
  }
  if (variant == 10 || variant == 13) {
    const int64_t n16 = rows * cols * int64_t(sizeof(T)) / 16;
    // By default every thread gets one whole round of 4 words. On a fixed grid whose round does
    // not divide a thread's share, the loop's remainder reads one word at a time, a memory latency
    // each: 8 blocks per SM with 8 loads (the default before d561bcf) left every thread of
    // 1024 x 8192 fp32 (3.9 words each) no whole round, 10.75 us in ncu against 9.89 for
    // Inductor's kernel (results/kernel_notes.md, the floor).
    constexpr int kLoads = 4, kRound = kLoads * kLeanBlock;
    const unsigned grid = grid_cap > 0 ? grid_cap : static_cast<unsigned>((n16 + kRound - 1) / kRound);
    const auto* y16 = static_cast<const uint4*>(y);
    auto* sink = static_cast<float*>(partials);
    if (variant == 10) {
      unordered_read_kernel<kLoads, false><<<grid, kLeanBlock, 0, stream>>>(y16, n16, sink);
    } else {
      unordered_read_kernel<kLoads, true><<<grid, kLeanBlock, 0, stream>>>(y16, n16, sink);
    }
    return cudaGetLastError();
  }
  if (variant == 14) {
    if constexpr (std::is_same_v<T, float>) {
      if (cols != 4 * 4 * kLeanBlock || row_stride != cols || !kOrder.lanes_before_warps) return -1;
      return launch_programmatic(bulk_rows_kernel<4>, dim3(static_cast<unsigned>(rows)), dim3(kLeanBlock),
                                 4 * kLeanBlock * sizeof(uint4), stream, true, lean_args(a));
    }
    return -1;
  }
  if (lib.leaf == Leaf::kGeneral) return -1;
  if (variant >= 68 && variant <= 80) {  // the loop-free block rows, the first rows warming a row in L2
    const LeanArgs<T> la = lean_args(a);
    const int sms = prop.multiprocessors;
    const int wave = sms * kLeanBlocksPerSm;  // the blocks resident at once
    switch (variant) {
      case 68: return launch_warmed<T, false>(p, la, sms, 0, stream);
      case 69: return launch_warmed<T, false>(p, la, 2 * sms, 0, stream);
      case 70: return launch_warmed<T, false>(p, la, sms / 2, 0, stream);
      case 71: return launch_warmed<T, true>(p, la, sms, 0, stream);
      case 73: return launch_warmed<T, true>(p, la, 2 * sms, 0, stream);
      case 74: return launch_warmed<T, true, true>(p, la, sms, 0, stream);
      case 75: return launch_warmed<T, true, true>(p, la, 2 * sms, 0, stream);
      case 78: return launch_warmed<T, true>(p, la, 2 * sms, wave, stream);
      case 79: return launch_warmed<T, true, true>(p, la, 2 * sms, wave, stream);
      case 80: return launch_warmed<T, true>(p, la, sms, wave, stream);
      case 72: return launch_warmed<T, false>(p, la, 0, 0, stream);  // none warmed (the control)
      default: return -1;
    }
  }
  if (variant >= 82 && variant <= 84) {  // kRows rows per block: 2 at 4 or 3 blocks per SM, 4 at 2
    const LeanArgs<T> la = lean_args(a);
    switch (variant) {
      case 82: return launch_multi_row<T, 2, 4>(p, la, stream);
      case 83: return launch_multi_row<T, 2, 3>(p, la, stream);
      default: return launch_multi_row<T, 4, 2>(p, la, stream);
    }
  }
  if (variant >= 64 && variant <= 67) {  // ring rows, 1-4 blocks per SM
    const LeanArgs<T> la = lean_args(a);
    switch (variant) {
      case 64: return launch_ring_rows<T, 1>(p, la, prop, stream);
      case 65: return launch_ring_rows<T, 2>(p, la, prop, stream);
      case 66: return launch_ring_rows<T, 3>(p, la, prop, stream);
      default: return launch_ring_rows<T, 4>(p, la, prop, stream);
    }
  }
  if (variant == 25) {
    if (a.cols != lean_row_loads(V) * V * kLeanBlock) return -1;
    return launch_lean_mapping<T, V, lean_row_loads(V), false, true>(p, a, stream);
  }
  // Block-per-row rows (looped) with U = 4, 4 or 8 vectors in flight per thread, registers
  // for 3, 2 or 2 blocks per SM, on every block-row plan; 62 is the library's deep block-row
  // kernel, which it takes only on long 16-bit rows (deep_block_rows_pay).
  if (variant == 60) return launch_lean_mapping<T, V, 4, false, false, kLeanBlock, 3>(p, a, stream);
  if (variant == 61) return launch_lean_mapping<T, V, 4, false, false, kLeanBlock, 2>(p, a, stream);
  if (variant == 62)
    return launch_lean_mapping<T, V, kDeepBlockRowLoads, false, false, kLeanBlock, kDeepBlockRowBlocksPerSm>(p, a, stream);
  if (variant == 27) {  // fp32 only: 16-bit types spill at 32 registers
    if constexpr (sizeof(T) == 4) return launch_lean_mapping<T, V, 3, true>(p, a, stream);
    return -1;
  }
  if (variant == 33) return launch_lean_mapping<T, V, 8, true, false, 128, 4>(p, a, stream);
  if (variant == 35) return launch_lean_mapping<T, V, 16, true, false, 128, 4>(p, a, stream);
  // 1 or 2 vectors in flight per thread, for calls queued after a write flush, where the
  // library's kernel paid about 1 us more than after a synchronised one (kernel_notes.md).
  if (variant == 46) return launch_lean_mapping<T, V, 1, false>(p, a, stream);
  if (variant == 47) return launch_lean_mapping<T, V, 2, false>(p, a, stream);
  if (variant >= 50 && variant <= 55) {  // split lanes on any fp32 warp-per-row plan
    if constexpr (std::is_same_v<T, float>) {
      const LeanArgs<T> la = lean_args(a);
      if (p.split_y) return -1;
      switch (variant) {
        case 50: return launch_split_lanes<32>(lean_config(la), la, stream);
        case 51: return launch_split_lanes<16, 12>(lean_config(la), la, stream);
        case 52: return launch_split_lanes<64>(lean_config(la), la, stream);
        case 53: return launch_split_lanes<48>(lean_config(la), la, stream);
        case 54: return launch_split_lanes<64, 6>(lean_config(la), la, stream);
        default: return launch_split_lanes<48, 8>(lean_config(la), la, stream);  // 55
      }
    }
    return -1;
  }
  if (variant == 85) {  // split_lane_rows_kernel staged (the library's fp32 staged rows since 6726213)
    const LeanArgs<T> la = lean_args(a);
    if (p.split_y || int64_t(la.cols / V) * 16 > kStagedRowBytes) return -1;
    if constexpr (std::is_same_v<T, float>) return launch_split_lanes<1, 1, true>(lean_config(la), la, stream);
    return -1;
  }
  if (variant == 86 || variant == 87) {  // split_lane_rows_kernel on 16-bit warp-per-row plans, 8 or 16 loads
    if constexpr (sizeof(T) == 2 && V * sizeof(T) == 16) {  // 16-byte vectors only, as the library (84225c2)
      const LeanArgs<T> la = lean_args(a);
      if (p.split_y) return -1;
      return variant == 86 ? launch_split_lanes<8>(lean_config(la), la, stream)
                           : launch_split_lanes<16>(lean_config(la), la, stream);
    }
    return -1;
  }
  // The library with one of its leaves replaced by what served there before it.
  Config c = lib;
  const bool fp32 = std::is_same_v<T, float>, warp_rows = !p.split_y;
  switch (variant) {
    case 26: if (c.leaf == Leaf::kBlockRowsOneChunk || c.leaf == Leaf::kBlockRowsWarm) c.leaf = Leaf::kBlockRows; break;
    case 37: if (fp32 && warp_rows) c.leaf = Leaf::kWarpRows; break;
    case 39: if (c.leaf == Leaf::kBlockRowsFive) c.leaf = Leaf::kBlockRows; break;
    case 45: if (c.leaf == Leaf::kWarpRowsWide) c.leaf = Leaf::kWarpRows; break;
    case 63: if (c.leaf == Leaf::kBlockRowsDeep) c.leaf = Leaf::kBlockRows; break;
    case 81: if (c.leaf == Leaf::kBlockRowsWarm) c.leaf = Leaf::kBlockRowsOneChunk; break;
    case 92:  // 16-bit split lanes' rows on the deep warp-row kernel
      if constexpr (sizeof(T) == 2) {
        if (c.leaf == Leaf::kSplitLanes)
          return launch_lean_rows<T, kDeepWarpRowLoads, true, false, kDeepWarpRowBlock>(c, lean_args(a), stream);
      }
      break;
    case 93:  // fp32 staged and split-lane plans up to 1024 rows; the deep kernel beyond
      if (rows > 1024 && (c.leaf == Leaf::kSplitLanes || c.leaf == Leaf::kSplitLanesStaged)) c.leaf = Leaf::kWarpRowsDeep;
      break;
    default: return -2;
  }
  return launch_leaf(c, a, stream);
}

}  // namespace
}  // namespace kb14

// variant: 0 the general kernels, plain launches (30: as programmatic dependents); 6 the library
// (kernels/fused_reduce*.cu: its dispatch and switch) for any shape and GPU size, programmatic; 49
// the same launched plainly (pdl=False); 9 an empty kernel on the lean grid; 10 and 13 unordered
// reads of y (any order of additions: what reading the bytes costs) over grid_cap blocks (default:
// one round of 4 loads per thread), plain or evict-first loads; 14 the lean order with each row
// fetched by the bulk-copy engine (fp32 rows of 8192); 25 the loop-free block rows on rows of one
// chunk; 27, 33, 35 warp rows with 3 vectors per lane (fp32), or 8 or 16 in 128-thread blocks;
// 46, 47, 60-62 block rows with 1, 2, 4 (3 or 2 blocks per SM) or 8 vectors in flight; 50-55 split
// lanes on every fp32 warp-row plan with 32, 16, 64, 48 loads (54, 55: 6 and 8 blocks per SM);
// 64-67 persistent block rows fed by bulk copies into a ring (1-4 blocks per SM); 68-80 the
// loop-free block rows warming L2 in the ways tried before the gate; 82-84 two or four 16-bit rows
// of 8192 per block; 85 the staged split lanes on any warp-row plan; 86, 87 16-bit split lanes with
// 8 or 16 loads. The library with one leaf replaced by what served there before it: 26 looped rows
// for rows of one chunk; 37 two vectors per lane on every fp32 warp-row plan; 39 no five-vector
// block rows; 45 no wide warp rows; 63 no deep 16-bit block rows; 81 no warming; 92 the deep warp
// rows for the 16-bit split lanes; 93 fp32 staged and split-lane plans up to 1024 rows only.
// Figures and the variants removed since (load flavours, the staged warp-row kernel, the launch
// attribute without the wait: at 39a345c): results/kernel_notes.md.
// dtype: 0 float32, 1 float16, 2 bfloat16. Returns a cudaError_t, or -1 where the
// variant does not apply to the shape.
extern "C" int kb14x_tail(int variant, int dtype, const void* y, long long rows, long long cols,
                          long long row_stride, void* out, long long out_stride, double divisor, double scale,
                          int sms, int threads_per_sm, int cc_major, int grid_cap, void* partials,
                          void* stream) {
  const DeviceShape prop{sms, threads_per_sm, cc_major};
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case 0: return run<float>(variant, y, rows, cols, row_stride, out, out_stride, divisor, scale, prop, grid_cap, partials, s);
    case 1: return run<__half>(variant, y, rows, cols, row_stride, out, out_stride, divisor, scale, prop, grid_cap, partials, s);
    case 2: return run<__nv_bfloat16>(variant, y, rows, cols, row_stride, out, out_stride, divisor, scale, prop, grid_cap, partials, s);
    default: return -2;
  }
}
