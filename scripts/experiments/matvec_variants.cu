// The column-sum path's aligned matrix-vector product (kernels/colsum.cu,
// colsum_matvec_aligned_kernel) in several shapes and with probes that drop part of
// its work, behind a C ABI, so that scripts/experiments/matvec_variants.py can time them against
// the library, torch.mv and Inductor in one process. fp32 x, fp64 column sums.
//   nvcc -O3 -arch=sm_90 -shared -Xcompiler -fPIC -Ikernels -o matvec_variants.so scripts/experiments/matvec_variants.cu
#include "../bulk_copy.cuh"
#include "colsum_device.cuh"

#include <algorithm>
#include <cstdint>

using namespace kb14;

namespace {

enum Mode : int {
  kExact = 0,      // the library's arithmetic: fp64 products of widened x and fp64 c, fp64 sums
  kNoColsum = 1,   // probe: fp64 sum of widened x, c never read
  kFloatOnly = 2,  // probe: fp32 products and sums with an fp32 copy of c, no widening
};

// Thread t's column sums of its vectors t + u * kThreads (u < U), zeros past nvec: each
// vector's elements 0-1 in lo[u], 2-3 in hi[u].
template <int kThreads, int U>
__device__ __forceinline__ void load_thread_sums(const double* c, int t, int nvec, double2 (&lo)[U], double2 (&hi)[U]) {
  const double2* c2 = reinterpret_cast<const double2*>(c);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int v = t + u * kThreads;
    lo[u] = hi[u] = make_double2(0.0, 0.0);
    if (v < nvec) lo[u] = __ldg(c2 + 2 * v), hi[u] = __ldg(c2 + 2 * v + 1);
  }
}

// One vector of x times its column sums, added to the two fp64 chains as the library adds
// them: even elements to acc0, odd to acc1.
__device__ __forceinline__ void add_products(double& acc0, double& acc1, const uint4& x, const double2& lo,
                                             const double2& hi) {
  acc0 = __fma_rn(double(__uint_as_float(x.x)), lo.x, acc0);
  acc1 = __fma_rn(double(__uint_as_float(x.y)), lo.y, acc1);
  acc0 = __fma_rn(double(__uint_as_float(x.z)), hi.x, acc0);
  acc1 = __fma_rn(double(__uint_as_float(x.w)), hi.y, acc1);
}

// Block b owns rows b * R .. b * R + R - 1; thread t reads vectors t, t + kThreads, ... of
// each, U per row in flight, and each column-sum value it loads serves all R rows.
template <int kThreads, int kBlocksPerSm, int R, int U, int kMode>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    matvec_kernel(const float* __restrict__ x, const double* __restrict__ c, const float* __restrict__ c32,
                  float* __restrict__ out, int64_t row_stride, int nvec, double scale) {
  const uint4* rows = reinterpret_cast<const uint4*>(x + int64_t(blockIdx.x) * R * row_stride);
  const int64_t vec_stride = row_stride / 4;
  const double2* c2 = reinterpret_cast<const double2*>(c);
  const float4* c4 = reinterpret_cast<const float4*>(c32);
  double acc0[R], acc1[R];
  float f0[R], f1[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = 0.0, f0[r] = f1[r] = 0.0f;
  wait_for_prior_grids();
  for (int v0 = threadIdx.x; v0 < nvec; v0 += U * kThreads) {
    uint4 buf[R][U];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (v0 + u * kThreads < nvec) buf[r][u] = __ldcs(rows + r * vec_stride + v0 + u * kThreads);
    if (v0 == threadIdx.x) allow_dependent_launch();
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * kThreads;
      if (v < nvec) {
        if constexpr (kMode == kExact) {
          const double2 ca = __ldg(c2 + 2 * v), cb = __ldg(c2 + 2 * v + 1);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            add_products(acc0[r], acc1[r], buf[r][u], ca, cb);
          }
        } else if constexpr (kMode == kNoColsum) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            acc0[r] = __dadd_rn(acc0[r], double(__uint_as_float(buf[r][u].x)));
            acc1[r] = __dadd_rn(acc1[r], double(__uint_as_float(buf[r][u].y)));
            acc0[r] = __dadd_rn(acc0[r], double(__uint_as_float(buf[r][u].z)));
            acc1[r] = __dadd_rn(acc1[r], double(__uint_as_float(buf[r][u].w)));
          }
        } else {
          const float4 cf = __ldg(c4 + v);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            f0[r] = __fmaf_rn(__uint_as_float(buf[r][u].x), cf.x, f0[r]);
            f1[r] = __fmaf_rn(__uint_as_float(buf[r][u].y), cf.y, f1[r]);
            f0[r] = __fmaf_rn(__uint_as_float(buf[r][u].z), cf.z, f0[r]);
            f1[r] = __fmaf_rn(__uint_as_float(buf[r][u].w), cf.w, f1[r]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if constexpr (kMode == kFloatOnly) acc0[r] = double(f0[r]) + double(f1[r]);
    const double total = block_sum<kThreads>(__dadd_rn(acc0[r], acc1[r]));
    if (threadIdx.x == 0) out[int64_t(blockIdx.x) * R + r] = __double2float_rn(__dmul_rn(scale, total));
    if (R > 1) __syncthreads();  // before block_sum's shared slots serve the next row
  }
}

template <int kThreads, int kBlocksPerSm, int R, int U, int kMode>
int launch(const float* x, long long rows, long long row_stride, int nvec, const double* c, const float* c32,
           float* out, double scale, bool programmatic, cudaStream_t s) {
  if (rows % R) return -2;
  return static_cast<int>(launch_programmatic(matvec_kernel<kThreads, kBlocksPerSm, R, U, kMode>,
                                              dim3(static_cast<unsigned>(rows / R)), dim3(kThreads), 0, s,
                                              programmatic, x, c, c32, out, static_cast<int64_t>(row_stride), nvec,
                                              scale));
}

// The column sums held in registers: thread t owns vectors t + u * kThreads (u < U) of
// every row (nvec <= U * kThreads), loads their column sums once, and its block loops
// over rows b, b + gridDim.x, ...; the next row's loads are issued before the current
// row's block sum. kRowsAhead rows of loads in flight per thread (1, 2 or 4: with four, one
// 512-thread block per SM keeps 128 KB of x in flight, as the tail's kernel does). The block
// sum's shared slots alternate between rows, so one barrier per row suffices.
// kSharedSums: the column sums in shared memory instead (copied in after the x loads are
// issued), which frees 32 registers per thread for more blocks per SM or rows in flight;
// vector v's four sums as two double2 arrays (elements 0-1, then 2-3) so that a warp's
// 16-byte reads do not conflict. ptxas (CUDA 13.0, sm_90) for those: 512 x 3 with U = 4 takes
// 40 registers and 1024 x 2 with U = 2 takes 32, each with 16 bytes of spills; 512 x 2 with
// two rows ahead 64, none. Slower (results/kernel_notes.md, the column-sum path).
//
// kWarm (the tail's warming, kernels/fused_reduce_lean.cuh): block b < SMs asks L2 for its first
// row (one bulk prefetch) before the wait; kWarmAlways always, kWarmGated only where the
// record left by the previous warmed launch's last block (its serial number and time, just
// before its trigger) is another launch's and under kMatvecWarmWindow units of 1024 ns old;
// kWarmEveryBlock: every block, always.
enum Warm : int { kWarmNone = 0, kWarmAlways = 1, kWarmGated = 2, kWarmEveryBlock = 3 };
constexpr uint32_t kMatvecWarmWindow = 16;
__device__ uint64_t matvec_warmed_trigger;

template <int kThreads, int kBlocksPerSm, int U, int kRowsAhead, bool kSharedSums = false, int kWarm = kWarmNone>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    resident_kernel(const float* __restrict__ x, const double* __restrict__ c, float* __restrict__ out,
                    int64_t row_stride, int rows, int nvec, double scale, uint32_t serial) {
  extern __shared__ double2 shared_sums[];  // kSharedSums: nvec sums of elements 0-1, then nvec of 2-3
  __shared__ double warp_sums[2][kThreads / 32];
  const int t = threadIdx.x;
  uint4 buf[kRowsAhead][U];
  auto load_row = [&](uint4 (&b)[U], int r) {
    const uint4* row = reinterpret_cast<const uint4*>(x + int64_t(r) * row_stride);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (t + u * kThreads < nvec) b[u] = __ldcs(row + t + u * kThreads);
  };
  if constexpr (kWarm != kWarmNone) {
    if (t == 0 && (kWarm == kWarmEveryBlock || blockIdx.x < sm_count())) {
      bool warm = true;
      if constexpr (kWarm == kWarmGated) {
        const uint64_t last = *static_cast<volatile uint64_t*>(&matvec_warmed_trigger);
        warm = static_cast<uint32_t>(last >> 32) != serial &&
               warm_clock() - static_cast<uint32_t>(last) < kMatvecWarmWindow;
      }
      if (warm) bulk_prefetch_to_l2(x + int64_t(blockIdx.x) * row_stride, static_cast<uint32_t>(nvec) * 16u);
    }
  }
  wait_for_prior_grids();  // before any read: x and c may be the previous kernel's output
  int r = blockIdx.x;
#pragma unroll
  for (int a = 0; a < kRowsAhead; ++a)
    if (r + a * int(gridDim.x) < rows) load_row(buf[a], r + a * gridDim.x);
  double2 ca[U], cb[U];
  if constexpr (kSharedSums) {
    const double2* c2 = reinterpret_cast<const double2*>(c);
    for (int v = t; v < nvec; v += kThreads)
      shared_sums[v] = __ldg(c2 + 2 * v), shared_sums[nvec + v] = __ldg(c2 + 2 * v + 1);
    __syncthreads();
  } else {
    load_thread_sums<kThreads>(c, t, nvec, ca, cb);
  }
  if constexpr (kWarm == kWarmGated) {
    if (t == 0 && blockIdx.x == gridDim.x - 1)
      *static_cast<volatile uint64_t*>(&matvec_warmed_trigger) = uint64_t(serial) << 32 | warm_clock();
  }
  allow_dependent_launch();
  // One row: its products from `cur`, the loads of the row kRowsAhead ahead into `cur`,
  // then the block sum (shared slots `parity`).
  auto row_step = [&](uint4 (&cur)[U], int parity) {
    double acc0 = 0.0, acc1 = 0.0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = t + u * kThreads;
      if (v < nvec) {
        const double2 lo = kSharedSums ? shared_sums[v] : ca[u], hi = kSharedSums ? shared_sums[nvec + v] : cb[u];
        add_products(acc0, acc1, cur[u], lo, hi);
      }
    }
    const int ahead = r + kRowsAhead * int(gridDim.x);
    if (ahead < rows) load_row(cur, ahead);
    const double total = block_sum<kThreads>(__dadd_rn(acc0, acc1), warp_sums[parity]);
    if (t == 0) out[r] = __double2float_rn(__dmul_rn(scale, total));
    r += gridDim.x;
  };
  if constexpr (kRowsAhead <= 2) {
    while (r < rows) {
      row_step(buf[0], 0);
      if (r >= rows) break;
      row_step(buf[kRowsAhead - 1], 1);
    }
  } else {  // buffers taken in turn; rows alternate the shared slots (kRowsAhead even)
    static_assert(kRowsAhead % 2 == 0, "an odd ring of buffers would give two rows in a row one parity");
    while (r < rows) {
#pragma unroll
      for (int a = 0; a < kRowsAhead; ++a) {
        if (r >= rows) break;
        row_step(buf[a], a & 1);
      }
    }
  }
}

// One block per row, as the tail's loop-free kernel (kernels/fused_reduce_lean.cuh): thread t
// loads its four vectors of the row (rows of exactly 4 * 512 vectors), then multiplies each
// by its four column sums read from L1 (the 64 KB of fp64 sums serve every block of an SM)
// in the resident kernel's order: the library's bits. With no column sums held in
// registers, kBlocksPerSm = 4 (32 registers) or 3 fit per SM: 128 or 96 KB of x in flight,
// against the resident kernel's 64 KB. kWarm: block b < SMs asks L2 for its row before the
// wait, always (the resident kernel's warming).
// kSumsInL1: x is loaded past L1 (evict-first in L2, as the tail's lean kernel loads y), so
// that only the sums live there, and each thread asks L1 for its sums' lines (prefetch, no
// registers held) while its x loads are in flight.
template <int kBlocksPerSm, bool kWarm = false, bool kSumsInL1 = false, bool kPrefetchSums = false>
__global__ void __launch_bounds__(512, kBlocksPerSm)
    row_block_kernel(const float* __restrict__ x, const double* __restrict__ c, float* __restrict__ out,
                     int64_t row_stride, double scale) {
  constexpr int U = 4, kThreads = 512;
  const int t = threadIdx.x;
  if constexpr (kWarm) warm_first_row_per_sm(x + int64_t(blockIdx.x) * row_stride, U * kThreads * 16u);
  const uint4* row = reinterpret_cast<const uint4*>(x + int64_t(blockIdx.x) * row_stride) + t;
  wait_for_prior_grids();
  uint4 buf[U];
  if constexpr (kSumsInL1) {
    const uint64_t policy = evict_first_policy();
#pragma unroll
    for (int u = 0; u < U; ++u)
      asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(buf[u].x), "=r"(buf[u].y), "=r"(buf[u].z), "=r"(buf[u].w)
                   : "l"(row + u * kThreads), "l"(policy));
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u) buf[u] = __ldcs(row + u * kThreads);
  }
  allow_dependent_launch();
  const double2* c2 = reinterpret_cast<const double2*>(c) + 2 * t;
  if constexpr (kPrefetchSums) {
#pragma unroll
    for (int u = 0; u < U; ++u) asm volatile("prefetch.global.L1 [%0];" ::"l"(c2 + 2 * u * kThreads));
  }
  double acc0 = 0.0, acc1 = 0.0;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    add_products(acc0, acc1, buf[u], __ldg(c2 + 2 * u * kThreads), __ldg(c2 + 2 * u * kThreads + 1));
  }
  const double total = block_sum<kThreads>(__dadd_rn(acc0, acc1));
  if (t == 0) out[blockIdx.x] = __double2float_rn(__dmul_rn(scale, total));
}

template <int kBlocksPerSm, bool kWarm = false, bool kSumsInL1 = false, bool kPrefetchSums = false>
int launch_row_block(const float* x, long long rows, long long row_stride, int nvec, const double* c, float* out,
                     double scale, bool programmatic, cudaStream_t s) {
  if (nvec != 4 * 512) return -2;
  return static_cast<int>(launch_programmatic(row_block_kernel<kBlocksPerSm, kWarm, kSumsInL1, kPrefetchSums>, dim3(static_cast<unsigned>(rows)),
                                              dim3(512), 0, s, programmatic, x, c, out,
                                              static_cast<int64_t>(row_stride), scale));
}

// The grid of the persistent kernels: blocks_per_sm blocks on every SM of the current
// device, at most one per row (blocks_per_sm 0: one block per row).
long long persistent_grid(long long rows, int blocks_per_sm) {
  if (blocks_per_sm <= 0) return rows;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return std::min<long long>(rows, (long long)sms * blocks_per_sm);
}

template <int kThreads, int kBlocksPerSm, int U, int kRowsAhead, bool kSharedSums = false, int kWarm = kWarmNone>
int launch_resident(const float* x, long long rows, long long row_stride, int nvec, const double* c, float* out,
                    double scale, bool programmatic, int blocks_per_sm, cudaStream_t s) {
  if (nvec > U * kThreads) return -2;
  static uint32_t serial = 0;
  const auto kernel = resident_kernel<kThreads, kBlocksPerSm, U, kRowsAhead, kSharedSums, kWarm>;
  const int shared_bytes = kSharedSums ? 2 * nvec * static_cast<int>(sizeof(double2)) : 0;
  if (kSharedSums) {
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes))
      return static_cast<int>(e);
  }
  const long long grid = persistent_grid(rows, blocks_per_sm);
  return static_cast<int>(launch_programmatic(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), shared_bytes,
                                              s, programmatic, x, c, out, static_cast<int64_t>(row_stride),
                                              static_cast<int>(rows), nvec, scale, ++serial));
}

// The resident kernel's arithmetic (column sums of U = 4 vectors per thread in registers,
// two fp64 chains, block_sum: the library's bits) with the rows fetched by the bulk-copy
// engine: kBlocksPerSm persistent 512-thread blocks per SM, block b taking rows b, b + grid,
// ..., thread 0 keeping a ring of whole rows in flight (192 KB of shared memory per SM), each
// stage refilled once every thread has read it (the block sum's barrier). Rows of exactly
// 2048 aligned float4 vectors (8192 columns).
constexpr int kRingRowVectors = 2048;
constexpr uint32_t kRingRowBytes = kRingRowVectors * 16;
template <int kBlocksPerSm>
constexpr int kRingStages = (192 << 10) / kBlocksPerSm / kRingRowBytes;

template <int kBlocksPerSm>
__global__ void __launch_bounds__(512, kBlocksPerSm)
    ring_matvec_kernel(const float* __restrict__ x, const double* __restrict__ c, float* __restrict__ out,
                       int64_t row_stride, int rows, double scale) {
  constexpr int kThreads = 512, U = kRingRowVectors / kThreads, kRowVectors = kRingRowVectors;
  constexpr uint32_t kRowBytes = kRingRowBytes;
  constexpr int kStages = kRingStages<kBlocksPerSm>;
  extern __shared__ __align__(128) uint4 ring[];
  __shared__ __align__(8) uint64_t landed[kStages];
  __shared__ double warp_sums[2][kThreads / 32];
  const int t = threadIdx.x;
  const int grid = gridDim.x;
  init_block_mbarriers(landed, kStages);
  wait_for_prior_grids();  // before any read: x and c may be the previous kernel's output
  const uint64_t policy = evict_first_policy();
  auto fetch = [&](int i) {
    const int r = blockIdx.x + i * grid;
    if (r >= rows) return;
    uint64_t* bar = &landed[i % kStages];
    mbarrier_arrive_expecting(bar, kRowBytes);
    bulk_copy_to_shared(ring + (i % kStages) * kRowVectors, x + int64_t(r) * row_stride, kRowBytes, bar, policy);
  };
  if (t == 0)
    for (int i = 0; i < kStages; ++i) fetch(i);
  const double2* c2 = reinterpret_cast<const double2*>(c);
  double2 ca[U], cb[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int v = t + u * kThreads;
    ca[u] = __ldg(c2 + 2 * v), cb[u] = __ldg(c2 + 2 * v + 1);
  }
  allow_dependent_launch();
  for (int i = 0;; ++i) {
    const int r = blockIdx.x + i * grid;
    if (r >= rows) break;
    const int s = i % kStages;
    mbarrier_wait(&landed[s], (i / kStages) & 1);
    const uint4* row = ring + s * kRowVectors;
    double acc0 = 0.0, acc1 = 0.0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint4 v = row[t + u * kThreads];
      add_products(acc0, acc1, v, ca[u], cb[u]);
    }
    const double total = block_sum<kThreads>(__dadd_rn(acc0, acc1), warp_sums[i & 1]);
    if (t == 0) {
      fence_proxy_async_shared();
      fetch(i + kStages);
      out[r] = __double2float_rn(__dmul_rn(scale, total));
    }
  }
}

template <int kBlocksPerSm>
int launch_ring(const float* x, long long rows, long long row_stride, int nvec, const double* c, float* out,
                double scale, bool programmatic, cudaStream_t s) {
  if (nvec != kRingRowVectors || row_stride % 4 != 0) return -2;
  const auto kernel = ring_matvec_kernel<kBlocksPerSm>;
  const int smem = kRingStages<kBlocksPerSm> * kRingRowBytes;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (attr != cudaSuccess) return static_cast<int>(attr);
  const long long grid = persistent_grid(rows, kBlocksPerSm);
  return static_cast<int>(launch_programmatic(kernel, dim3(static_cast<unsigned>(grid)), dim3(512), smem, s,
                                              programmatic, x, c, out, static_cast<int64_t>(row_stride),
                                              static_cast<int>(rows), scale));
}

// The resident kernel's arithmetic (U = 4 vectors per thread, column sums in registers,
// two fp64 chains, block_sum: the library's bits) with each row staged in shared memory by
// every thread's own cp.async copies of exactly the vectors it later reads: kStages rows in
// flight per block (32 KB each) without registers, so that the bytes in flight per SM are
// no longer held to the 64 KB that registers allowed the resident kernel. A thread reads
// only its own slots, so a stage needs no barrier before reuse; its copies of the next row
// into a stage are issued after the values read from it were used. kWarm: block b < SMs
// asks L2 for its first row (a bulk prefetch) before the wait, with no gate: what warming
// could give back to back.
__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wait_for_copies_but() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

template <int kStages, int kBlocksPerSm, bool kWarm>
__global__ void __launch_bounds__(512, kBlocksPerSm)
    staged_matvec_kernel(const float* __restrict__ x, const double* __restrict__ c, float* __restrict__ out,
                         int64_t row_stride, int rows, int nvec, double scale) {
  constexpr int kThreads = 512, U = 4;
  extern __shared__ __align__(16) uint4 stages[];  // [kStages][U][kThreads]
  __shared__ double warp_sums[2][kThreads / 32];
  const int t = threadIdx.x;
  const int grid = gridDim.x;
  if constexpr (kWarm) warm_first_row_per_sm(x + int64_t(blockIdx.x) * row_stride, static_cast<uint32_t>(nvec) * 16u);
  const uint64_t policy = evict_first_policy();
  // Row blockIdx.x + i * grid into stage i % kStages; a group per row, empty past the end.
  auto fetch = [&](int i) {
    const int r = blockIdx.x + i * grid;
    if (r < rows) {
      const uint4* row = reinterpret_cast<const uint4*>(x + int64_t(r) * row_stride);
      uint4* stage = stages + (i % kStages) * U * kThreads;
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (t + u * kThreads < nvec) copy_to_shared_async(stage + u * kThreads + t, row + t + u * kThreads, policy);
    }
    commit_copies();
  };
  wait_for_prior_grids();  // before any read: x and c may be the previous kernel's output
#pragma unroll
  for (int i = 0; i < kStages; ++i) fetch(i);
  double2 ca[U], cb[U];
  load_thread_sums<kThreads>(c, t, nvec, ca, cb);
  allow_dependent_launch();
  for (int i = 0;; ++i) {
    const int r = blockIdx.x + i * grid;
    if (r >= rows) break;
    wait_for_copies_but<kStages - 1>();
    const uint4* stage = stages + (i % kStages) * U * kThreads;
    double acc0 = 0.0, acc1 = 0.0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (t + u * kThreads < nvec) {
        const uint4 v = stage[u * kThreads + t];
        add_products(acc0, acc1, v, ca[u], cb[u]);
      }
    }
    fetch(i + kStages);
    const double total = block_sum<kThreads>(__dadd_rn(acc0, acc1), warp_sums[i & 1]);
    if (t == 0) out[r] = __double2float_rn(__dmul_rn(scale, total));
  }
}

template <int kStages, int kBlocksPerSm, bool kWarm = false>
int launch_staged(const float* x, long long rows, long long row_stride, int nvec, const double* c, float* out,
                  double scale, bool programmatic, cudaStream_t s) {
  if (nvec > 4 * 512 || row_stride % 4 != 0) return -2;
  const auto kernel = staged_matvec_kernel<kStages, kBlocksPerSm, kWarm>;
  const int smem = kStages * 4 * 512 * static_cast<int>(sizeof(uint4));
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (attr != cudaSuccess) return static_cast<int>(attr);
  const long long grid = persistent_grid(rows, kBlocksPerSm);
  return static_cast<int>(launch_programmatic(kernel, dim3(static_cast<unsigned>(grid)), dim3(512), smem, s,
                                              programmatic, x, c, out, static_cast<int64_t>(row_stride),
                                              static_cast<int>(rows), nvec, scale));
}

}  // namespace

extern "C" int kb14x_matvec(int variant, const float* x, long long rows, long long row_stride, int nvec,
                            const double* c, const float* c32, float* out, double scale, int programmatic,
                            void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const bool p = programmatic != 0;
  switch (variant) {
    case 0: return launch<256, 8, 1, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 1: return launch<512, 4, 1, 4, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 2: return launch<256, 8, 1, 4, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 3: return launch<512, 4, 1, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 4: return launch<128, 16, 1, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 5: return launch<256, 4, 1, 4, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 6: return launch<1024, 2, 1, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 10: return launch<256, 8, 1, 2, kNoColsum>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 11: return launch<256, 8, 1, 2, kFloatOnly>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 12: return launch<512, 4, 1, 2, kFloatOnly>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 7: return launch<512, 4, 2, 1, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 8: return launch<256, 8, 2, 1, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 9: return launch<512, 2, 4, 1, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 13: return launch<512, 2, 2, 2, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 14: return launch<256, 4, 4, 1, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 15: return launch<1024, 1, 4, 1, kExact>(x, rows, row_stride, nvec, c, c32, out, scale, p, s);
    case 20: return launch_resident<512, 2, 4, 1>(x, rows, row_stride, nvec, c, out, scale, p, 2, s);
    case 21: return launch_resident<1024, 1, 2, 2>(x, rows, row_stride, nvec, c, out, scale, p, 1, s);
    case 22: return launch_resident<512, 2, 4, 1>(x, rows, row_stride, nvec, c, out, scale, p, 0, s);
    case 23: return launch_resident<1024, 1, 2, 1>(x, rows, row_stride, nvec, c, out, scale, p, 1, s);
    case 24: return launch_resident<512, 1, 4, 2>(x, rows, row_stride, nvec, c, out, scale, p, 1, s);
    case 25: return launch_resident<512, 3, 4, 1, true>(x, rows, row_stride, nvec, c, out, scale, p, 3, s);
    case 26: return launch_resident<512, 2, 4, 2, true>(x, rows, row_stride, nvec, c, out, scale, p, 2, s);
    case 27: return launch_resident<1024, 2, 2, 1, true>(x, rows, row_stride, nvec, c, out, scale, p, 2, s);
    case 30: return launch_ring<1>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 31: return launch_ring<2>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 45: return launch_resident<512, 2, 4, 1, false, kWarmAlways>(x, rows, row_stride, nvec, c, out, scale, p, 2, s);
    case 46: return launch_resident<512, 2, 4, 1, false, kWarmGated>(x, rows, row_stride, nvec, c, out, scale, p, 2, s);
    case 47: return launch_resident<512, 2, 4, 1, false, kWarmEveryBlock>(x, rows, row_stride, nvec, c, out, scale, p, 2,
                                                                            s);
    case 50: return launch_row_block<4>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 51: return launch_row_block<3>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 52: return launch_row_block<4, true>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 53: return launch_row_block<4, false, true>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 54: return launch_row_block<4, false, true, true>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 55: return launch_row_block<3, false, true, true>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 56: return launch_resident<512, 1, 4, 4>(x, rows, row_stride, nvec, c, out, scale, p, 1, s);
    case 57: return launch_resident<512, 1, 4, 4, false, kWarmAlways>(x, rows, row_stride, nvec, c, out, scale, p, 1,
                                                                     s);
    case 40: return launch_staged<3, 2>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 41: return launch_staged<2, 2>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 42: return launch_staged<6, 1>(x, rows, row_stride, nvec, c, out, scale, p, s);
    case 43: return launch_staged<3, 2, true>(x, rows, row_stride, nvec, c, out, scale, p, s);
    default: return -1;
  }
}
