// CUDA kernels of the column-sum rewrite (see colsum.cpp for the arithmetic):
//
//   kb14::colsum(W)                   fp64 column sums of W (hidden, input), fp64 out
//   kb14::colsum_matvec(x, c, scale)  scale * (x @ c), fp64 products and sums, x's dtype out
//
// Both read their big operand with 16-byte vector loads where the layout allows it
// (a scalar path takes any other stride or alignment), accumulate in fp64 with
// fused multiply-adds, and combine partial sums in an order fixed by the shape and
// the GPU (its SM count, and how many blocks of the built kernel fit on one SM): the
// results are deterministic. They launch on the current stream under a device guard
// and never synchronise with the host.
//
// The column-sum path's CUDA module: this file and colsum_cuda.cpp, which registers
// these two functions and their C++ autograd (no dispatcher or autograd headers here).

#include "colsum.h"
#include "colsum_device.cuh"
#include "cuda_common.cuh"

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace kb14 {

namespace colsum_cuda {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

__device__ __forceinline__ double widen(float v) { return static_cast<double>(v); }
__device__ __forceinline__ double widen(double v) { return v; }
__device__ __forceinline__ double widen(__half v) { return static_cast<double>(to_float(v)); }
__device__ __forceinline__ double widen(__nv_bfloat16 v) { return static_cast<double>(to_float(v)); }

template <typename T> __device__ __forceinline__ T narrow(double v);
template <> __device__ __forceinline__ float narrow<float>(double v) { return __double2float_rn(v); }
template <> __device__ __forceinline__ double narrow<double>(double v) { return v; }
template <> __device__ __forceinline__ __half narrow<__half>(double v) { return __double2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(double v) {
  return __double2bfloat16(v);
}

// V elements of T in one 16-byte load.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int V = 16 / sizeof(T);
  T v[V];
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Every row of the 2-D `t` starts on a 16-byte boundary and holds whole 16-byte vectors.
template <typename T>
bool rows_are_vectors(const at::Tensor& t) {
  return t.stride(1) == 1 && t.size(1) % Vec16<T>::V == 0 && aligned16(t.const_data_ptr()) &&
         (t.stride(0) * static_cast<int64_t>(sizeof(T))) % 16 == 0;
}

// ---------------------------------------------------------------------------
// Column sum. A block sums a tile of kWarp * V columns over its slice of the
// rows: warp q of the block takes rows r0 + q, r0 + q + kWarps, ..., lane l the
// V adjacent columns of one 16-byte load (V = 1 on the scalar path), so each warp
// reads whole 512-byte runs of a row. The warps' sums meet in shared memory in warp
// order; slice s writes partial[s][k], or the result when there is one slice.
// colsum_combine then adds the slices in order.
// ---------------------------------------------------------------------------
constexpr int kColsumWarps = kThreads / kWarp;

template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads) colsum_partial_kernel(const T* __restrict__ w, int64_t H, int64_t K,
                                                                  int64_t row_stride, int64_t col_stride,
                                                                  int64_t rows_per_slice, double* __restrict__ partial) {
  constexpr int V = kVector ? Vec16<T>::V : 1;
  constexpr int kTile = kWarp * V;
  constexpr int U = 4;  // rows in flight per thread
  __shared__ double warp_sums[kColsumWarps][kTile];
  const int lane = threadIdx.x % kWarp, q = threadIdx.x / kWarp;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile + lane * V;
  const int64_t slice = blockIdx.y;
  const int64_t r0 = slice * rows_per_slice;
  const int64_t r1 = min(H, r0 + rows_per_slice);
  double acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.0;
  if (k0 < K) {
    int64_t r = r0 + q;
    if constexpr (kVector) {
      // K % V == 0 and every row 16-byte aligned (checked on the host).
      const T* p = w + k0;
      for (; r + (U - 1) * kColsumWarps < r1; r += U * kColsumWarps) {
        Vec16<T> buf[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          buf[u] = *reinterpret_cast<const Vec16<T>*>(p + (r + u * kColsumWarps) * row_stride);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int i = 0; i < V; ++i) acc[i] = __dadd_rn(acc[i], widen(buf[u].v[i]));
      }
      for (; r < r1; r += kColsumWarps) {
        const Vec16<T> b = *reinterpret_cast<const Vec16<T>*>(p + r * row_stride);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = __dadd_rn(acc[i], widen(b.v[i]));
      }
    } else {
      for (; r < r1; r += kColsumWarps) acc[0] = __dadd_rn(acc[0], widen(w[r * row_stride + k0 * col_stride]));
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) warp_sums[q][lane * V + i] = acc[i];
  __syncthreads();
  for (int t = threadIdx.x; t < kTile; t += kThreads) {
    const int64_t k = static_cast<int64_t>(blockIdx.x) * kTile + t;
    if (k >= K) break;
    double s = warp_sums[0][t];
#pragma unroll
    for (int j = 1; j < kColsumWarps; ++j) s = __dadd_rn(s, warp_sums[j][t]);
    partial[slice * K + k] = s;
  }
}

__global__ void __launch_bounds__(kThreads) colsum_combine_kernel(const double* __restrict__ partial, int64_t slices,
                                                                  int64_t K, double* __restrict__ out) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (k >= K) return;
  double s = 0.0;
  for (int64_t j = 0; j < slices; ++j) s = __dadd_rn(s, partial[j * K + k]);
  out[k] = s;
}

template <typename scalar_t>
void launch_colsum(const at::Tensor& w, at::Tensor& out) {
  using T = typename CudaType<scalar_t>::type;
  constexpr int V = Vec16<T>::V;
  const int64_t H = w.size(0), K = w.size(1);
  const T* ptr = reinterpret_cast<const T*>(w.const_data_ptr<scalar_t>());
  const bool vector = rows_are_vectors<T>(w);
  const int64_t tile = kWarp * (vector ? V : 1);
  const int64_t col_blocks = ceil_div(K, tile);
  KB14_CHECK(col_blocks <= std::numeric_limits<int32_t>::max(), "colsum: weight has too many columns (", K, ")");
  // As many slices (of at least 64 rows) as fit in one wave of resident blocks: a
  // few blocks left over for a second wave would each read a whole slice alone.
  const auto kernel = vector ? colsum_partial_kernel<T, true> : colsum_partial_kernel<T, false>;
  int blocks_per_sm = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, kThreads, 0));
  const int64_t wave = int64_t(device_shape(w.get_device()).multiprocessors) * std::max(blocks_per_sm, 1);
  const int64_t slices = std::clamp<int64_t>(wave / col_blocks, 1, std::max<int64_t>(1, H / 64));
  const int64_t rows_per_slice = ceil_div(H, slices);
  const int64_t used = ceil_div(H, rows_per_slice);  // every slice non-empty
  KB14_CHECK(used <= 65535, "colsum: internal error: too many row slices");
  auto stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor partial = used > 1 ? at::empty({used, K}, out.options()) : out;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(used));
  kernel<<<grid, kThreads, 0, stream>>>(ptr, H, K, w.stride(0), w.stride(1), rows_per_slice,
                                       partial.mutable_data_ptr<double>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (used > 1) {
    colsum_combine_kernel<<<static_cast<unsigned>(ceil_div(K, kThreads)), kThreads, 0, stream>>>(
        partial.const_data_ptr<double>(), used, K, out.mutable_data_ptr<double>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

at::Tensor colsum_cuda(const at::Tensor& w) {
  check_colsum_inputs(w);
  KB14_CHECK(w.is_cuda(), "colsum_cuda: weight must be a CUDA tensor, got ", w.device());
  const c10::cuda::CUDAGuard guard(w.device());
  auto out = at::empty({w.size(1)}, w.options().dtype(at::kDouble));
  if (w.size(1) == 0) return out;
  if (w.size(0) == 0) return out.zero_();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, w.scalar_type(), "colsum_cuda",
                                  [&] { launch_colsum<scalar_t>(w, out); });
  return out;
}

// ---------------------------------------------------------------------------
// Matrix-vector product. Block (row r, split s) sums x[r, k] * c[k] over its part
// of the row: `head` scalar elements up to the first 16-byte boundary, then
// 16-byte vectors, then a scalar tail. Thread partials meet in a warp shuffle
// tree and then across warps in shared memory. With one split the block writes
// the scaled, rounded result; otherwise colsum_matvec_finish adds the splits in order.
// ---------------------------------------------------------------------------
constexpr int kMatvecThreads = 128;

template <typename T>
struct MatvecArgs {
  const T* __restrict__ x;
  const double* __restrict__ c;
  T* __restrict__ out;
  int64_t out_stride;
  double* __restrict__ partial;  // [rows][splits] when splits > 1
  int64_t K;
  int64_t row_stride;
  int64_t col_stride;
  int64_t vecs_per_split;  // vector path: 16-byte vectors per split; scalar path: elements
  int splits;
  double scale;
};

// One 128-thread block per row, eight of them resident per SM (64 registers each):
// KernelBench's 1024 rows then run in a single wave on a 132-SM GPU, each thread
// keeping kMatvecLoads 16-byte loads in flight (fewer for 2-byte types, whose
// widening needs more registers).
template <typename T>
constexpr int kMatvecLoads = sizeof(T) == 2 ? 4 : 8;
constexpr int kMatvecBlocksPerSM = 8;

template <typename T, bool kVector>
__global__ void __launch_bounds__(kMatvecThreads, kMatvecBlocksPerSM) colsum_matvec_kernel(MatvecArgs<T> a) {
  constexpr int V = Vec16<T>::V;
  const int64_t r = blockIdx.x;
  const int s = blockIdx.y;
  const T* row = a.x + r * a.row_stride;
  double acc0 = 0.0, acc1 = 0.0;  // two chains: more independent FMAs in flight
  if constexpr (kVector) {
    // Elements before the row's first 16-byte boundary, and after its last.
    const int head = static_cast<int>(((16 - reinterpret_cast<uintptr_t>(row) % 16) % 16) / sizeof(T));
    const int64_t body = a.K > head ? (a.K - head) / V : 0;
    const int64_t tail_start = head + body * V;
    if (s == 0) {
      const int64_t k = threadIdx.x;
      if (k < head && k < a.K) acc0 = __fma_rn(widen(row[k]), __ldg(a.c + k), acc0);
      const int64_t kt = tail_start + threadIdx.x;
      if (kt < a.K) acc1 = __fma_rn(widen(row[kt]), __ldg(a.c + kt), acc1);
    }
    const Vec16<T>* vrow = reinterpret_cast<const Vec16<T>*>(row + head);
    const double* cv = a.c + head;
    const int64_t v0 = s * a.vecs_per_split;
    const int64_t v1 = min(body, v0 + a.vecs_per_split);
    // kMatvecLoads<T> vectors per thread in flight; the last batch of a row is partial.
    for (int64_t vb = v0 + threadIdx.x; vb < v1; vb += kMatvecLoads<T> * kMatvecThreads) {
      Vec16<T> buf[kMatvecLoads<T>];
#pragma unroll
      for (int u = 0; u < kMatvecLoads<T>; ++u) {
        const int64_t v = vb + u * kMatvecThreads;
        if (v < v1) buf[u] = vrow[v];
      }
#pragma unroll
      for (int u = 0; u < kMatvecLoads<T>; ++u) {
        const int64_t v = vb + u * kMatvecThreads;
        if (v < v1) {
          const double* cc = cv + v * V;
#pragma unroll
          for (int i = 0; i < V; i += 2) {
            acc0 = __fma_rn(widen(buf[u].v[i]), __ldg(cc + i), acc0);
            acc1 = __fma_rn(widen(buf[u].v[i + 1]), __ldg(cc + i + 1), acc1);
          }
        }
      }
    }
  } else {
    const int64_t k0 = s * a.vecs_per_split;
    const int64_t k1 = min(a.K, k0 + a.vecs_per_split);
    for (int64_t k = k0 + threadIdx.x; k < k1; k += kMatvecThreads) {
      acc0 = __fma_rn(widen(row[k * a.col_stride]), __ldg(a.c + k), acc0);
    }
  }
  const double total = block_sum<kMatvecThreads>(__dadd_rn(acc0, acc1));
  if (threadIdx.x == 0) {
    if (a.splits == 1) {
      a.out[r * a.out_stride] = narrow<T>(__dmul_rn(a.scale, total));
    } else {
      a.partial[r * a.splits + s] = total;
    }
  }
}

// The common case, kept lean enough for 32 registers: every row starts on a
// 16-byte boundary, K % V == 0, one 256-thread block per row, in-row offsets in 32
// bits (a row of fewer than 2^31 vectors), the column sums read two at a time. Eight
// blocks fit on an SM, so KernelBench's 1024 rows run in one wave; more than two
// loads per thread in flight no longer fit the registers. 4- and 8-byte types (the
// 2-byte types' widening needs more registers; they take the general kernel). As the
// tail's lean kernel (fused_reduce_lean.cuh): x, read once, is loaded evict-first (`.cs`,
// which needs no policy register; a flush's dirty lines then stay in L2 instead of
// being written back under our reads; the tail measured it as fast as its own), and
// on sm_90 the kernel launches as a programmatic dependent that waits for the previous
// kernel before its first read.
constexpr int kAlignedLoads = 2;

template <typename T>
__global__ void __launch_bounds__(kThreads, 8) colsum_matvec_aligned_kernel(const T* __restrict__ x,
                                                                           const double* __restrict__ c,
                                                                           T* __restrict__ out, int64_t out_stride,
                                                                           int64_t row_stride, int nvec, double scale) {
  constexpr int V = Vec16<T>::V;
  const uint4* row = reinterpret_cast<const uint4*>(x + blockIdx.x * row_stride);
  const double2* c2 = reinterpret_cast<const double2*>(c);
  double acc0 = 0.0, acc1 = 0.0;
  wait_for_prior_grids();
  for (int v0 = threadIdx.x; v0 < nvec; v0 += kAlignedLoads * kThreads) {
    Vec16<T> buf[kAlignedLoads];
#pragma unroll
    for (int u = 0; u < kAlignedLoads; ++u) {
      if (v0 + u * kThreads < nvec) {
        const uint4 raw = __ldcs(row + v0 + u * kThreads);
        buf[u] = *reinterpret_cast<const Vec16<T>*>(&raw);
      }
    }
    if (v0 == threadIdx.x) allow_dependent_launch();
#pragma unroll
    for (int u = 0; u < kAlignedLoads; ++u) {
      const int v = v0 + u * kThreads;
      if (v < nvec) {
#pragma unroll
        for (int i = 0; i < V; i += 2) {
          const double2 cc = __ldg(c2 + (v * V + i) / 2);
          acc0 = __fma_rn(widen(buf[u].v[i]), cc.x, acc0);
          acc1 = __fma_rn(widen(buf[u].v[i + 1]), cc.y, acc1);
        }
      }
    }
  }
  const double total = block_sum<kThreads>(__dadd_rn(acc0, acc1));
  if (threadIdx.x == 0) out[blockIdx.x * out_stride] = narrow<T>(__dmul_rn(scale, total));
}

// Rows of more than one and at most 16 elements per thread of a 512-thread block (fp32:
// 2049-8192 columns, 16-bit: 4097-8192), every row 16-byte aligned, at any number of rows
// (none split across blocks): each thread holds the column sums of its U vectors of the
// row in registers, loaded once, and its block loops over rows b, b + gridDim.x, ...
// (grid: the blocks that fit at once, or one per row). Every row then reads only x; the
// aligned kernel above reads 8 bytes of column sums (from L1 or L2) per 4 of x. The next
// row's loads are issued before this row's block sum, whose shared slots alternate between
// rows so one barrier per row suffices. Rows are summed in the aligned kernel's pattern
// (two fp64 chains per thread, then block_sum).
//
// Few rows: one block per row beat splitting rows over several blocks and adding the
// splits in a second kernel at every count measured, 8 to 528 rows of 8192 fp32
// (matvec_variants run11, run12: at 128 rows 3.14 against 6.00 us back to back, 6.08
// against 9.33 after a read flush).
//
// kWarm (fp32): back to back, a programmatic dependent's blocks are placed while the
// previous kernel drains and wait for its end, the memory bus idle meanwhile. Block
// b < SMs asks L2 for its first row (one bulk prefetch) before the wait: a prefetch is
// safe there, as every SM's writes land in L2. Unlike the tail's (fused_reduce_lean.cuh), it
// has no gate: timed single calls measured no slower (matvec_variants run10-12, us, 1024 x
// 8192, taken in turn, minus the unwarmed kernel: -0.06 after a read flush, -0.13 under
// KernelBench's timing, -0.86 under do_bench; back to back 8.38 against 9.32). The kernel
// alone may pay for the row it then fetches again (ncu, one launch each: 11.36 against
// 10.85, run13); the tail's gate would not help here, as these persistent blocks let the
// next call launch at their start, not near their end.
constexpr int kResidentThreads = 512;
constexpr int kResidentWarps = kResidentThreads / kWarp;

template <typename T, int U, bool kWarm>
__global__ void __launch_bounds__(kResidentThreads, 2)
    colsum_matvec_resident_kernel(const T* __restrict__ x, const double* __restrict__ c, T* __restrict__ out,
                                  int64_t out_stride, int64_t row_stride, int rows, int nvec, double scale) {
  constexpr int V = Vec16<T>::V;
  __shared__ double warp_sums[2][kResidentWarps];
  const int t = threadIdx.x;
  uint4 buf[U];
  auto load_row = [&](int r) {
    const uint4* row = reinterpret_cast<const uint4*>(x + int64_t(r) * row_stride);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (t + u * kResidentThreads < nvec) buf[u] = __ldcs(row + t + u * kResidentThreads);
  };
  if constexpr (kWarm) warm_first_row_per_sm(x + int64_t(blockIdx.x) * row_stride, static_cast<uint32_t>(nvec) * 16u);
  // x and c may both be the previous kernel's output: nothing is read before the wait.
  wait_for_prior_grids();
  int r = blockIdx.x;
  load_row(r);
  const double2* c2 = reinterpret_cast<const double2*>(c);
  double2 cs[U][V / 2];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int v = t + u * kResidentThreads;
#pragma unroll
    for (int i = 0; i < V / 2; ++i) cs[u][i] = v < nvec ? __ldg(c2 + (v * V) / 2 + i) : make_double2(0.0, 0.0);
  }
  allow_dependent_launch();
  // One row: its products, the next row's loads, then its block sum in shared slots `parity`.
  auto row_step = [&](int parity) {
    double acc0 = 0.0, acc1 = 0.0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (t + u * kResidentThreads < nvec) {
#pragma unroll
        for (int i = 0; i < V; i += 2) {
          acc0 = __fma_rn(widen(element_as_float<T>(buf[u], i)), cs[u][i / 2].x, acc0);
          acc1 = __fma_rn(widen(element_as_float<T>(buf[u], i + 1)), cs[u][i / 2].y, acc1);
        }
      }
    }
    if (r + int(gridDim.x) < rows) load_row(r + gridDim.x);
    const double total = block_sum<kResidentThreads>(__dadd_rn(acc0, acc1), warp_sums[parity]);
    if (t == 0) out[r * out_stride] = narrow<T>(__dmul_rn(scale, total));
    r += gridDim.x;
  };
  while (r < rows) {
    row_step(0);
    if (r >= rows) break;
    row_step(1);
  }
}

// Launches the resident kernel with U vectors per thread over a grid of the blocks that
// fit at once (the occupancy query runs once per kernel).
template <typename T, int U>
cudaError_t launch_resident(const MatvecArgs<T>& a, int rows, int nvec, const DeviceShape& gpu, cudaStream_t stream) {
  constexpr auto kernel = colsum_matvec_resident_kernel<T, U, sizeof(T) == 4>;
  static const int blocks_per_sm = [] {
    int n = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kResidentThreads, 0));
    return std::max(n, 1);
  }();
  const int grid = static_cast<int>(std::min<int64_t>(rows, int64_t(gpu.multiprocessors) * blocks_per_sm));
  return launch_programmatic(kernel, dim3(grid), dim3(kResidentThreads), 0, stream,
                             gpu.compute_major >= 9, a.x, a.c, a.out, a.out_stride, a.row_stride, rows, nvec, a.scale);
}

// The resident kernel for rows of nvec vectors, where one applies: more than one and at
// most 16 elements per thread (32 registers of column sums), U = 2 or 4 vectors per thread.
// Returns whether it launched.
template <typename T>
bool try_launch_resident(const MatvecArgs<T>& a, int rows, int64_t nvec, const DeviceShape& gpu,
                         cudaStream_t stream) {
  constexpr int kMaxU = 16 / Vec16<T>::V;
  if (nvec <= kResidentThreads || nvec > kMaxU * kResidentThreads) return false;
  const int n = static_cast<int>(nvec);
  if constexpr (kMaxU >= 4) {
    if (n > 2 * kResidentThreads) {
      C10_CUDA_CHECK((launch_resident<T, 4>(a, rows, n, gpu, stream)));
      return true;
    }
  }
  C10_CUDA_CHECK((launch_resident<T, 2>(a, rows, n, gpu, stream)));
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) colsum_matvec_finish_kernel(const double* __restrict__ partial, int64_t rows,
                                                                       int splits, double scale, T* __restrict__ out,
                                                                       int64_t out_stride) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (r >= rows) return;
  double s = 0.0;
  for (int j = 0; j < splits; ++j) s = __dadd_rn(s, partial[r * splits + j]);
  out[r * out_stride] = narrow<T>(__dmul_rn(scale, s));
}

template <typename scalar_t>
void launch_matvec(const at::Tensor& x, const at::Tensor& c, double scale, at::Tensor& out) {
  using T = typename CudaType<scalar_t>::type;
  constexpr int V = Vec16<T>::V;
  const int64_t B = x.size(0), K = x.size(1);
  KB14_CHECK(B <= std::numeric_limits<int32_t>::max(), "colsum_matvec: too many rows (", B, ")");
  MatvecArgs<T> a{};
  a.x = reinterpret_cast<const T*>(x.const_data_ptr<scalar_t>());
  a.c = c.const_data_ptr<double>();
  a.out = reinterpret_cast<T*>(out.mutable_data_ptr<scalar_t>());
  a.out_stride = out.stride(0);
  a.K = K;
  a.row_stride = x.stride(0);
  a.col_stride = x.stride(1);
  a.scale = scale;
  const DeviceShape gpu = device_shape(x.get_device());
  auto stream = c10::cuda::getCurrentCUDAStream();
  // 16-byte vectors from every row and from the column sums.
  const bool aligned = rows_are_vectors<T>(x) && aligned16(a.c);
  if constexpr (sizeof(T) <= 4) {
    if (aligned && try_launch_resident<T>(a, static_cast<int>(B), K / V, gpu, stream)) return;
  }
  // Each row may start anywhere (the vector path peels a scalar head), so only unit
  // column stride is needed for 16-byte loads.
  const bool vector = x.stride(1) == 1 || K == 1;
  const int64_t units = vector ? K / V : K;  // vectors (or elements) to share out
  // Split rows only when there are too few of them to fill one wave, keeping a full
  // batch of loads per thread per split: a second kernel to add the splits costs more
  // than a partly filled wave.
  const int64_t target = int64_t(gpu.multiprocessors) * kMatvecBlocksPerSM;
  const int64_t max_splits = std::max<int64_t>(1, units / (kMatvecLoads<T> * kMatvecThreads));
  const int64_t splits = std::clamp<int64_t>(target / std::max<int64_t>(B, 1), 1, std::min<int64_t>(max_splits, 1024));
  a.vecs_per_split = ceil_div(std::max<int64_t>(units, 1), splits);
  const int64_t used = ceil_div(std::max<int64_t>(units, 1), a.vecs_per_split);
  a.splits = static_cast<int>(used);
  at::Tensor partial;
  if (used > 1) {
    partial = at::empty({B, used}, x.options().dtype(at::kDouble));
    a.partial = partial.mutable_data_ptr<double>();
  }
  if constexpr (sizeof(T) >= 4) {
    // One block per row.
    if (used == 1 && aligned && K / V <= std::numeric_limits<int32_t>::max()) {
      C10_CUDA_CHECK(launch_programmatic(colsum_matvec_aligned_kernel<T>, dim3(static_cast<unsigned>(B)),
                                         dim3(kThreads), 0, stream, gpu.compute_major >= 9, a.x, a.c, a.out, a.out_stride,
                                         a.row_stride, static_cast<int>(K / V), scale));
      return;
    }
  }
  const dim3 grid(static_cast<unsigned>(B), static_cast<unsigned>(used));
  if (vector) {
    colsum_matvec_kernel<T, true><<<grid, kMatvecThreads, 0, stream>>>(a);
  } else {
    colsum_matvec_kernel<T, false><<<grid, kMatvecThreads, 0, stream>>>(a);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (used > 1) {
    colsum_matvec_finish_kernel<T><<<static_cast<unsigned>(ceil_div(B, kThreads)), kThreads, 0, stream>>>(
        partial.const_data_ptr<double>(), B, a.splits, scale, a.out, a.out_stride);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

at::Tensor colsum_matvec_cuda(const at::Tensor& x, const at::Tensor& c_in, double scale) {
  check_colsum_matvec_inputs(x, c_in);
  KB14_CHECK(x.is_cuda(), "colsum_matvec_cuda: x must be a CUDA tensor, got ", x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor c = c_in.is_contiguous() ? c_in : c_in.contiguous();
  auto out = at::empty({x.size(0), 1}, x.options());
  if (x.size(0) == 0) return out;
  if (x.size(1) == 0) return out.zero_();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "colsum_matvec_cuda",
                                  [&] { launch_matvec<scalar_t>(x, c, scale, out); });
  return out;
}

}  // namespace colsum_cuda
}  // namespace kb14
