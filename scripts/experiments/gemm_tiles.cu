// Variants of kernels/hybrid.cu's rows_gemm, for scripts/experiments/gemm_tiles.py: the library's
// kernel template at other tiles and per-thread accumulators (TM x TN), beside the library's own
// three, a K-major cp.async kernel of its own, the one-row tile with wider slabs (and more warps),
// the library's swizzled tile before the staged one (a frozen copy), cuBLAS's transposed layout, and
// the library's staged tile at other slab widths. Removed variants (the first generalisation, 1-4,
// after f1e91db; the experiment's own copy of the template, 6 and 24, after 6619d64; a serpentine
// whole-slab copy, 39-40, never timed, after 4209bc2; the transposed and line-copy tiles that lost,
// 39-41 and 43-46, after 7974810): their figures are rows of results/measurements.csv.
#include "hybrid.cu"

#include <torch/library.h>

namespace kb14 {
namespace hybrid_cuda {

// 16 bytes from global to shared memory through cp.async, or 16 zeros where !valid (src not read);
// copies are committed as a group and waited for while at most N younger groups are in flight.
__device__ __forceinline__ void copy16_async(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait_for_copies() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }


// Tiles narrower in columns, up to 256 rows tall, at other accumulator shapes: the library's
// rows_gemm_kernel at other TileConfigs. A full grid (row tiles in y, the computing ones first)
// or one row tile whose blocks also zero the rows not gathered (counts up to BM).
template <int BM, int BN, int BK, int TM, int TN, int kMinBlocks>
void launch_narrow(const GemmArgs& a, cudaStream_t stream) {
  launch_rows_gemm<TileConfig<BM, BN, BK, TM, TN, kMinBlocks, false>>(a, true, stream);
}

template <class C>
void launch_one_row_tile(const GemmArgs& a, cudaStream_t stream) {
  GemmArgs b = a;
  b.max_count = C::BM;
  launch_rows_gemm<C>(b, true, stream);
}

template <int BM, int BN, int BK, int TM, int TN>
void launch_narrow_fused(const GemmArgs& a, cudaStream_t stream) {
  launch_one_row_tile<TileConfig<BM, BN, BK, TM, TN, 1, true>>(a, stream);
}

// The variants below load without bounds checks: every slab whole, 16-byte rows, a slab count
// that fits an int.
void check_whole_slabs(const GemmArgs& a, int BK, int BN, const char* variants) {
  TORCH_CHECK(a.K % BK == 0 && a.K < (int64_t(1) << 31) && a.N % BN == 0 && a.x_stride % 4 == 0 && a.w_stride % 4 == 0 &&
                  reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && reinterpret_cast<uintptr_t>(a.w) % 16 == 0,
              variants, " variants: K a multiple of ", BK, " below 2^31, N of ", BN, ", 16-byte rows");
}

// A one-row-tile kernel (counts up to BM) over N / BN blocks in smem_bytes of dynamic shared memory.
void launch_one_row_tile_kernel(void (*kernel)(GemmArgs), int BM, int BN, int threads, int smem_bytes,
                                const GemmArgs& a, cudaStream_t stream) {
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  GemmArgs b = a;
  b.max_count = BM;
  kernel<<<static_cast<unsigned>(a.N / BN), threads, smem_bytes, stream>>>(b);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// K-major tiles through cp.async: each slab of a gathered row is copied as it lies in memory
// (16-byte chunks, no transposition through registers, slots past the count zero-filled by
// the copy), kStages slabs in flight. A thread owns TM rows and TN columns interleaved
// (row i*RG + tr, column j*CG + tc) and reads them two k at a time (8-byte shared loads);
// a shared row of BK + 4 floats puts the 8 columns or 2 rows a half-warp reads on distinct
// banks. One row tile (counts up to BM); its blocks also zero the rows not gathered.
template <int BM, int BN, int BK, int TM, int TN, int kStages>
struct KMajorTile {
  static constexpr int RG = BM / TM, CG = BN / TN, kThreads = RG * CG;
  static constexpr int kStride = BK + 4;
  static constexpr int kChunksPerRow = BK / 4;
  static constexpr int kAChunks = BM * kChunksPerRow / kThreads, kBChunks = BN * kChunksPerRow / kThreads;
  static constexpr int kStageFloats = (BM + BN) * kStride;
  static constexpr int kSmemBytes = kStages * kStageFloats * static_cast<int>(sizeof(float));
  static_assert(BM * kChunksPerRow % kThreads == 0 && BN * kChunksPerRow % kThreads == 0, "chunks must divide among threads");
  static_assert(BK % 4 == 0 && kStages >= 2 && TN % 2 == 0, "whole chunks, at least double buffering");
};

template <int BM, int BN, int BK, int TM, int TN, int kStages>
__global__ void __launch_bounds__(KMajorTile<BM, BN, BK, TM, TN, kStages>::kThreads, 1)
    kmajor_rows_gemm_kernel(GemmArgs a) {
  using Tile = KMajorTile<BM, BN, BK, TM, TN, kStages>;
  constexpr int T = Tile::kThreads, RG = Tile::RG, CG = Tile::CG, S = Tile::kStride, CPR = Tile::kChunksPerRow;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  int64_t count;
  if (!launch_takes_count(a, count)) return;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * BN;
  using Zero = ZeroPass<BN, T>;
  const int64_t zero_passes = Zero::passes(a, count);
  if (count == 0) {
    for (int64_t p = 0; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
    return;
  }
  // What this thread copies each slab: chunk (row, 4c .. 4c+3) of the A and B slabs.
  const float* a_src[Tile::kAChunks];
  bool a_ok[Tile::kAChunks];
  int a_dst[Tile::kAChunks];
#pragma unroll
  for (int i = 0; i < Tile::kAChunks; ++i) {
    const int idx = tid + i * T, row = idx / CPR, c = idx % CPR;
    const int64_t r = row < count ? a.rows[row] : -1;
    a_ok[i] = r >= 0 && r < a.M;
    a_src[i] = a.x + (a_ok[i] ? r * a.x_stride : 0) + 4 * c;
    a_dst[i] = row * S + 4 * c;
  }
  const float* b_src[Tile::kBChunks];
  bool b_ok[Tile::kBChunks];
  int b_dst[Tile::kBChunks];
#pragma unroll
  for (int i = 0; i < Tile::kBChunks; ++i) {
    const int idx = tid + i * T, col = idx / CPR, c = idx % CPR;
    b_ok[i] = h0 + col < a.N;
    b_src[i] = a.w + (b_ok[i] ? (h0 + col) * a.w_stride : 0) + 4 * c;
    b_dst[i] = BM * S + col * S + 4 * c;
  }
  const int64_t slabs = a.K / BK;  // the launcher requires K % BK == 0
  auto copy_slab = [&](int64_t s) {
    float* stage = smem + (s % kStages) * Tile::kStageFloats;
    const int64_t k0 = s * BK;
#pragma unroll
    for (int i = 0; i < Tile::kAChunks; ++i) copy16_async(stage + a_dst[i], a_src[i] + (a_ok[i] ? k0 : 0), a_ok[i]);
#pragma unroll
    for (int i = 0; i < Tile::kBChunks; ++i) copy16_async(stage + b_dst[i], b_src[i] + (b_ok[i] ? k0 : 0), b_ok[i]);
  };
  const int tr = tid / CG, tc = tid % CG;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < slabs) copy_slab(s);
    commit_copies();
  }
  for (int64_t s = 0; s < slabs; ++s) {
    wait_for_copies<kStages - 2>();
    __syncthreads();  // slab s is in; every thread is done with the stage the next copy refills
    if (s + kStages - 1 < slabs) copy_slab(s + kStages - 1);
    commit_copies();
    if (s < zero_passes) Zero::store(a, count, h0, s, tid);
    const float* As = smem + (s % kStages) * Tile::kStageFloats;
    const float* Bs = As + BM * S;
#pragma unroll
    for (int k = 0; k < BK; k += 2) {
      float2 av[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) av[i] = *reinterpret_cast<const float2*>(As + (i * RG + tr) * S + k);
#pragma unroll
      for (int j = 0; j < TN; ++j) bv[j] = *reinterpret_cast<const float2*>(Bs + (j * CG + tc) * S + k);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = __fmaf_rn(av[i].x, bv[j].x, acc[i][j]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = __fmaf_rn(av[i].y, bv[j].y, acc[i][j]);
    }
  }
  wait_for_copies<0>();
  for (int64_t p = slabs; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t slot = i * RG + tr;
    if (slot >= a.M) continue;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) continue;
    float* dst = a.y + r * a.N;
    const bool computed = slot < count;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t h = h0 + j * CG + tc;
      if (h < a.N) dst[h] = computed ? acc[i][j] : 0.f;
    }
  }
}

template <int BM, int BN, int BK, int TM, int TN, int kStages>
void launch_kmajor(const GemmArgs& a, cudaStream_t stream) {
  using Tile = KMajorTile<BM, BN, BK, TM, TN, kStages>;
  check_whole_slabs(a, BK, BN, "kmajor");
  launch_one_row_tile_kernel(kmajor_rows_gemm_kernel<BM, BN, BK, TM, TN, kStages>, BM, BN, Tile::kThreads,
                             Tile::kSmemBytes, a, stream);
}

// The library's one-row tile (register-staged, k-major shared rows, 12x4 on 8 warps, zeroing
// between slabs) with wider slabs in dynamic shared memory and loads without per-slab bounds
// checks (K % BK == 0): its sm_90 loop at BK 16 is 979 instructions for 768 FFMA; wider slabs
// spread the loads' addressing, the zero pass and the barrier over more FFMA.
template <int BM, int BN, int BK, int TM, int TN, bool kSkewed = false>
struct WideSlabTile {
  static constexpr int RG = BM / TM, CG = BN / TN, kThreads = RG * CG;
  static constexpr int SA = BM + 4, SB = BN + 4;  // shared row lengths (floats): transposed stores spread over banks
  static constexpr int kAVecs = BM * BK / 4, kBVecs = BN * BK / 4;  // float4s a slab
  static constexpr int kALoads = (kAVecs + kThreads - 1) / kThreads, kBLoads = (kBVecs + kThreads - 1) / kThreads;
  // kSkewed: 8 floats more for a k-row from k = 8 on (mod 16), so that a warp's transposed stores
  // cover 32 banks (k-rows 4 mod 32 floats apart put k and k + 8 on one bank).
  static constexpr int kSkew = kSkewed ? 8 : 0, kAFloats = BK * SA + kSkew, kBufFloats = kAFloats + BK * SB + kSkew;
  static constexpr int kSmemBytes = 2 * kBufFloats * static_cast<int>(sizeof(float));
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "whole vectors");
  __device__ static int skew(int k) { return k & kSkew; }
};

// kSerpentine: each row of a thread's accumulators in the other direction from the last, so that
// the FFMA after a row's end reads the same B register (operand reuse; the chains' orders unchanged).
// kPaired: lane bit 0 picks the row group and bit 1 the column group, so that every LDS.128 has lane
// pairs of one address (A: lanes l, l^2; B: l, l^1) and returns in 2 wavefronts instead of B's 4.
// kSkewed: the stores' bank skew (WideSlabTile::skew). Shared-memory model, cycles a k on an SM:
// 80 + 16 plain, 64 + 8 with both, against 96 of FFMA issue.
template <int BM, int BN, int BK, int TM, int TN, bool kSerpentine = false, bool kPaired = false, bool kSkewed = false>
__global__ void __launch_bounds__(WideSlabTile<BM, BN, BK, TM, TN, kSkewed>::kThreads, 1)
    wide_slab_rows_gemm_kernel(GemmArgs a) {
  using Tile = WideSlabTile<BM, BN, BK, TM, TN, kSkewed>;
  using Zero = ZeroPass<BN, Tile::kThreads>;
  constexpr int T = Tile::kThreads, RG = Tile::RG, CG = Tile::CG, SA = Tile::SA, SB = Tile::SB;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  int64_t count;
  if (!launch_takes_count(a, count)) return;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t zero_passes = Zero::passes(a, count);
  if (count == 0) {
    for (int64_t p = 0; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
    return;
  }
  // What this thread loads: element (row, k4 .. k4+3) of the A and B slabs (rows past the count: zeros).
  const float4* a_src[Tile::kALoads];
  bool a_ok[Tile::kALoads];
  int a_row[Tile::kALoads], a_k[Tile::kALoads];
#pragma unroll
  for (int i = 0; i < Tile::kALoads; ++i) {
    // A partial last round repeats a load; whole rounds skip the min (the compiler cannot know tid < T).
    const int idx = (i + 1) * T <= Tile::kAVecs ? tid + i * T : min(tid + i * T, Tile::kAVecs - 1);
    a_row[i] = idx / (BK / 4);
    a_k[i] = idx % (BK / 4) * 4;
    const int64_t r = a_row[i] < count ? a.rows[a_row[i]] : -1;
    a_ok[i] = r >= 0 && r < a.M;
    a_src[i] = reinterpret_cast<const float4*>(a.x + (a_ok[i] ? r * a.x_stride : 0) + a_k[i]);
  }
  const float4* b_src[Tile::kBLoads];
  int b_row[Tile::kBLoads], b_k[Tile::kBLoads];
#pragma unroll
  for (int i = 0; i < Tile::kBLoads; ++i) {
    const int idx = (i + 1) * T <= Tile::kBVecs ? tid + i * T : min(tid + i * T, Tile::kBVecs - 1);
    b_row[i] = idx / (BK / 4);
    b_k[i] = idx % (BK / 4) * 4;
    b_src[i] = reinterpret_cast<const float4*>(a.w + (h0 + b_row[i]) * a.w_stride + b_k[i]);  // N % BN == 0
  }
  float4 a_reg[Tile::kALoads], b_reg[Tile::kBLoads];
  auto load_slab = [&](int64_t s) {
#pragma unroll
    for (int i = 0; i < Tile::kALoads; ++i) a_reg[i] = a_ok[i] ? a_src[i][s * (BK / 4)] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < Tile::kBLoads; ++i) b_reg[i] = b_src[i][s * (BK / 4)];
  };
  auto at = [](int k, int S) { return k * S + Tile::skew(k); };  // a k-row's first float
  auto store_slab = [&](int buf) {
    float* As = smem + buf * Tile::kBufFloats;
    float* Bs = As + Tile::kAFloats;
#pragma unroll
    for (int i = 0; i < Tile::kALoads; ++i) {
      As[at(a_k[i] + 0, SA) + a_row[i]] = a_reg[i].x;
      As[at(a_k[i] + 1, SA) + a_row[i]] = a_reg[i].y;
      As[at(a_k[i] + 2, SA) + a_row[i]] = a_reg[i].z;
      As[at(a_k[i] + 3, SA) + a_row[i]] = a_reg[i].w;
    }
#pragma unroll
    for (int i = 0; i < Tile::kBLoads; ++i) {
      Bs[at(b_k[i] + 0, SB) + b_row[i]] = b_reg[i].x;
      Bs[at(b_k[i] + 1, SB) + b_row[i]] = b_reg[i].y;
      Bs[at(b_k[i] + 2, SB) + b_row[i]] = b_reg[i].z;
      Bs[at(b_k[i] + 3, SB) + b_row[i]] = b_reg[i].w;
    }
  };
  static_assert(!kPaired || (RG % 4 == 0 && CG % 8 == 0 && (RG / 4) * (CG / 8) * 32 == T), "paired lanes: 4x8 a warp");
  const int lane = tid & 31, warp = tid >> 5;
  const int tr = kPaired ? ((lane & 1) | ((lane >> 4) & 1) << 1 | (warp % (RG / 4)) << 2) : tid / CG;
  const int tc = kPaired ? (((lane >> 1) & 7) | (warp / (RG / 4)) << 3) : tid % CG;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  const int64_t slabs = a.K / BK;  // the launcher requires K % BK == 0
  load_slab(0);
  store_slab(0);
  __syncthreads();
  for (int64_t s = 0; s < slabs; ++s) {
    const int buf = static_cast<int>(s & 1);
    if (s + 1 < slabs) load_slab(s + 1);
    if (s < zero_passes) Zero::store(a, count, h0, s, tid);
    const float* As = smem + buf * Tile::kBufFloats;
    const float* Bs = As + Tile::kAFloats;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float av[TM], bv[TN];
#pragma unroll
      for (int q = 0; q < TM / 4; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(As + at(k, SA) + q * 4 * RG + tr * 4);
        av[4 * q] = v.x, av[4 * q + 1] = v.y, av[4 * q + 2] = v.z, av[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int p = 0; p < TN / 4; ++p) {
        const float4 v = *reinterpret_cast<const float4*>(Bs + at(k, SB) + p * 4 * CG + tc * 4);
        bv[4 * p] = v.x, bv[4 * p + 1] = v.y, bv[4 * p + 2] = v.z, bv[4 * p + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) {
          const int j = kSerpentine && (i & 1) ? TN - 1 - jj : jj;
          acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
        }
    }
    if (s + 1 < slabs) store_slab(buf ^ 1);
    __syncthreads();
  }
  for (int64_t p = slabs; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t slot = (i / 4) * 4 * RG + tr * 4 + i % 4;
    if (slot >= a.M) continue;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) continue;
    float* dst = a.y + r * a.N;
    const bool computed = slot < count;
#pragma unroll
    for (int j = 0; j < TN; ++j) dst[h0 + (j / 4) * 4 * CG + tc * 4 + j % 4] = computed ? acc[i][j] : 0.f;
  }
}

template <int BM, int BN, int BK, int TM, int TN, bool kSerpentine = false, bool kPaired = false, bool kSkewed = false>
void launch_wide_slab(const GemmArgs& a, cudaStream_t stream) {
  using Tile = WideSlabTile<BM, BN, BK, TM, TN, kSkewed>;
  check_whole_slabs(a, BK, BN, "wide-slab");
  launch_one_row_tile_kernel(wide_slab_rows_gemm_kernel<BM, BN, BK, TM, TN, kSerpentine, kPaired, kSkewed>, BM, BN,
                             Tile::kThreads, Tile::kSmemBytes, a, stream);
}

// The library's one-row tile from 221e746 to its staged successor (a frozen copy): 12x4 on 8
// warps, fed by cp.async (no trip through registers, no stores) in kStages
// slabs of 32 k, for shared memory's 128 bytes a cycle: a warp's lanes in 4 row x 8 column groups
// (lane bit 0 the row, bit 1 the column), so that every LDS.128 has lane pairs of one address (2
// wavefronts, not 4); each 16-byte chunk of a 128-byte shared row at chunk ^ (row & 7), so that the
// 4 rows or 8 columns a warp reads fall on distinct banks. A thread's rows i*RG + tr, columns
// j*CG + tc. Timings in results/kernel_notes.md.
template <int BM, int BN, int TM, int TN, int kStages>
struct SwizzledTile {
  static constexpr int BK = 32, RG = BM / TM, CG = BN / TN, kThreads = RG * CG;
  static constexpr int kAChunks = BM * 8 / kThreads, kBChunks = BN * 8 / kThreads;
  static constexpr int kStageFloats = (BM + BN) * BK;
  static constexpr int kSmemBytes = kStages * kStageFloats * static_cast<int>(sizeof(float));
  static_assert(BM * 8 % kThreads == 0 && BN * 8 % kThreads == 0, "chunks must divide among threads");
  static_assert(RG % 8 == 0 && CG % 8 == 0 && (RG / 4) * (CG / 8) * 32 == kThreads, "a warp: 4 row x 8 column groups");
  static_assert(TN % 4 == 0 && kStages >= 2, "whole vectors, at least double buffering");
  __device__ static int chunk_at(int row, int c) { return row * BK + ((c ^ (row & 7)) << 2); }
};

template <int BM, int BN, int TM, int TN, int kStages>
__global__ void __launch_bounds__(SwizzledTile<BM, BN, TM, TN, kStages>::kThreads, 1)
    swizzled_rows_gemm_kernel(GemmArgs a) {
  using Tile = SwizzledTile<BM, BN, TM, TN, kStages>;
  constexpr int T = Tile::kThreads, RG = Tile::RG, CG = Tile::CG, BK = Tile::BK;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  int64_t count;
  if (!launch_takes_count(a, count)) return;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * BN;
  using Zero = ZeroPass<BN, T>;
  const int64_t zero_passes = Zero::passes(a, count);
  if (count == 0) {
    for (int64_t p = 0; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
    return;
  }
  const float* a_src[Tile::kAChunks];
  bool a_ok[Tile::kAChunks];
  int a_dst[Tile::kAChunks];
#pragma unroll
  for (int i = 0; i < Tile::kAChunks; ++i) {
    const int idx = tid + i * T, row = idx / 8, c = idx % 8;
    const int64_t r = row < count ? a.rows[row] : -1;
    a_ok[i] = r >= 0 && r < a.M;
    a_src[i] = a.x + (a_ok[i] ? r * a.x_stride : 0) + 4 * c;
    a_dst[i] = Tile::chunk_at(row, c);
  }
  const float* b_src[Tile::kBChunks];
  int b_dst[Tile::kBChunks];
#pragma unroll
  for (int i = 0; i < Tile::kBChunks; ++i) {
    const int idx = tid + i * T, col = idx / 8, c = idx % 8;
    b_src[i] = a.w + (h0 + col) * a.w_stride + 4 * c;
    b_dst[i] = BM * BK + Tile::chunk_at(col, c);
  }
  const int64_t slabs = a.K / BK;
  auto copy_slab = [&](int64_t s) {
    float* stage = smem + (s % kStages) * Tile::kStageFloats;
    const int64_t k0 = s * BK;
#pragma unroll
    for (int i = 0; i < Tile::kAChunks; ++i) copy16_async(stage + a_dst[i], a_src[i] + (a_ok[i] ? k0 : 0), a_ok[i]);
#pragma unroll
    for (int i = 0; i < Tile::kBChunks; ++i) copy16_async(stage + b_dst[i], b_src[i] + k0, true);
  };
  const int lane = tid & 31, warp = tid >> 5;
  const int tr = (lane & 1) | ((lane >> 4) & 1) << 1 | (warp % (RG / 4)) << 2;
  const int tc = ((lane >> 1) & 7) | (warp / (RG / 4)) << 3;
  const int a_key = tr & 7, b_key = tc & 7;  // rows i*RG + tr and columns j*CG + tc share them
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < slabs) copy_slab(s);
    commit_copies();
  }
  for (int64_t s = 0; s < slabs; ++s) {
    wait_for_copies<kStages - 2>();
    __syncthreads();  // slab s is in; every thread is done with the stage the next copy refills
    if (s + kStages - 1 < slabs) copy_slab(s + kStages - 1);
    commit_copies();
    if (s < zero_passes) Zero::store(a, count, h0, s, tid);
    const float* As = smem + (s % kStages) * Tile::kStageFloats + tr * BK;
    const float* Bs = smem + (s % kStages) * Tile::kStageFloats + BM * BK + tc * BK;
#pragma unroll
    for (int c = 0; c < BK / 4; ++c) {
      float4 av[TM], bv[TN];
      const int ao = (c ^ a_key) << 2, bo = (c ^ b_key) << 2;
#pragma unroll
      for (int i = 0; i < TM; ++i) av[i] = *reinterpret_cast<const float4*>(As + i * RG * BK + ao);
#pragma unroll
      for (int j = 0; j < TN; ++j) bv[j] = *reinterpret_cast<const float4*>(Bs + j * CG * BK + bo);
      auto fma_k = [&](auto pick) {  // one k of every accumulator
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = __fmaf_rn(pick(av[i]), pick(bv[j]), acc[i][j]);
      };
      fma_k([](const float4& v) { return v.x; });
      fma_k([](const float4& v) { return v.y; });
      fma_k([](const float4& v) { return v.z; });
      fma_k([](const float4& v) { return v.w; });
    }
  }
  wait_for_copies<0>();
  for (int64_t p = slabs; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t slot = i * RG + tr;
    if (slot >= a.M) continue;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) continue;
    float* dst = a.y + r * a.N;
    const bool computed = slot < count;
#pragma unroll
    for (int j = 0; j < TN; ++j) dst[h0 + j * CG + tc] = computed ? acc[i][j] : 0.f;
  }
}

template <int kStages>
void launch_swizzled(const GemmArgs& a, cudaStream_t stream) {
  using Tile = SwizzledTile<192, 64, 12, 4, kStages>;
  check_whole_slabs(a, Tile::BK, 64, "swizzled");
  launch_one_row_tile_kernel(swizzled_rows_gemm_kernel<192, 64, 12, 4, kStages>, 192, 64, Tile::kThreads,
                             Tile::kSmemBytes, a, stream);
}

// The library's whole-slab tile (kernels/hybrid.cu), through its own launcher.
void launch_library_whole_slabs(const GemmArgs& a, cudaStream_t stream) {
  check_whole_slabs(a, 32, FewRows::BN, "whole-slab");
  GemmArgs b = a;
  b.max_count = FewRows::BM;
  launch_whole_slabs<FewRows>(b, stream);
}

// One k of a thread's accumulators from fragments of 4-row (4-column) groups at one k: 2x2 blocks,
// serpentine, so that both operands can come from the reuse caches.
template <int TM, int TN>
__device__ __forceinline__ void fma_2x2_blocks(float (&acc)[TM][TN], const float (&av)[TM], const float (&bv)[TN]) {
#pragma unroll
  for (int ip = 0; ip < TM / 2; ++ip)
#pragma unroll
    for (int jj = 0; jj < TN / 2; ++jj) {
      const int jp = ip & 1 ? TN / 2 - 1 - jj : jj;
#pragma unroll
      for (int di = 0; di < 2; ++di)
#pragma unroll
        for (int dj = 0; dj < 2; ++dj) {
          const int i = 2 * ip + di, j = 2 * jp + dj;
          acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
        }
    }
}

// Row by row, the columns of odd rows backwards (sm_90: 157 registers against 165, 338 of 1,536 FFMAs
// with two operands from the reuse cache against 257, in the staged tile).
template <int TM, int TN>
__device__ __forceinline__ void fma_row_serpentine(float (&acc)[TM][TN], const float (&av)[TM], const float (&bv)[TN]) {
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) {
      const int j = i & 1 ? TN - 1 - jj : jj;
      acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
    }
}

// A thread's outputs in 4-row (4-column) groups: rows (i / 4) * 4 * RG + tr * 4 + i % 4, columns
// h0 + p * 4 * CG + tc * 4 + 0..3; zeros in the rows past the count.
template <int TM, int TN, int RG, int CG>
__device__ __forceinline__ void store_groups(const GemmArgs& a, const float (&acc)[TM][TN], int64_t count, int64_t h0,
                                             int tr, int tc) {
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int slot = (i / 4) * 4 * RG + tr * 4 + i % 4;
    if (slot >= a.M) continue;
    const int64_t r = a.rows[slot];
    if (r < 0 || r >= a.M) continue;
    float* dst = a.y + r * a.N + h0 + tc * 4;
    const bool computed = slot < count;
#pragma unroll
    for (int p = 0; p < TN / 4; ++p) {
      const float4 v = computed ? make_float4(acc[i][4 * p], acc[i][4 * p + 1], acc[i][4 * p + 2], acc[i][4 * p + 3])
                                : make_float4(0.f, 0.f, 0.f, 0.f);
      *reinterpret_cast<float4*>(dst + p * 4 * CG) = v;
    }
  }
}

// cuBLAS's feed for an FFMA-bound tile: 4-byte cp.async that transposes each slab on its way
// into shared memory, one shared row per k (BM + 4 floats of x, BN + 4 of W: a copy's 8 k x 4 rows
// fall on 32 banks), so that an LDS.128 returns 4 rows (or columns) at one k in consecutive
// registers, which alternate register banks; FFMAs in 2x2 blocks. kStages slabs of 32 k in flight,
// the next slab's barrier, copies and first fragments inside this slab's last k; the paired lanes
// of the whole-slab tile. The same copies at a slab's start, with 16-k slabs or 12x8 on 4 warps,
// and copies of one 128-byte line each (variants 39-41, 43-46, removed after 7974810) were slower.
__device__ __forceinline__ void copy4_async(float* dst, const float* src, bool valid) {  // zeros where !valid
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(valid ? 4 : 0));
}

template <int BM, int BN, int TM, int TN, int kStages>
struct TransposedTile {
  static constexpr int BK = 32, RG = BM / TM, CG = BN / TN, kThreads = RG * CG, kWarps = kThreads / 32;
  static constexpr int SA = BM + 4, SB = BN + 4;
  static constexpr int kStageFloats = BK * (SA + SB);
  static constexpr int kSmemBytes = kStages * kStageFloats * static_cast<int>(sizeof(float));
  // A warp's copy: 4 rows x 8 k (lane / 8 the row, lane % 8 the k); a thread's copies reuse its rows.
  static constexpr int kARows = BM / 4 / kWarps, kBRows = BN / 4 / kWarps, kKBlocks = BK / 8;
  static_assert(BM / 4 % kWarps == 0 && BN / 4 % kWarps == 0 && BK % 8 == 0, "whole copy blocks a warp");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && kStages >= 3, "whole vectors, a slab ahead");
  static_assert(RG % 4 == 0 && CG % 8 == 0 && (RG / 4) * (CG / 8) * 32 == kThreads, "paired lanes: 4x8 a warp");
};

template <int BM, int BN, int TM, int TN, int kStages>
__global__ void __launch_bounds__(TransposedTile<BM, BN, TM, TN, kStages>::kThreads, 1)
    transposed_rows_gemm_kernel(GemmArgs a) {
  using Tile = TransposedTile<BM, BN, TM, TN, kStages>;
  using Zero = ZeroPass<BN, Tile::kThreads>;
  constexpr int BK = Tile::BK, RG = Tile::RG, CG = Tile::CG, SA = Tile::SA, SB = Tile::SB, W = Tile::kWarps;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int64_t count;
  if (!launch_takes_count(a, count)) return;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t zero_passes = Zero::passes(a, count);
  if (count == 0) {
    for (int64_t p = 0; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
    return;
  }
  // This thread's copies: rows (warp + r * W) * 4 + lane / 8 at k (kb * 8 + lane % 8) of each slab.
  const float* a_src[Tile::kARows];
  bool a_ok[Tile::kARows];
#pragma unroll
  for (int r = 0; r < Tile::kARows; ++r) {
    const int slot = (warp + r * W) * 4 + lane / 8;
    const int64_t row = slot < count ? a.rows[slot] : -1;
    a_ok[r] = row >= 0 && row < a.M;
    a_src[r] = a.x + (a_ok[r] ? row * a.x_stride : 0) + lane % 8;
  }
  const float* b_src[Tile::kBRows];
#pragma unroll
  for (int r = 0; r < Tile::kBRows; ++r) b_src[r] = a.w + (h0 + (warp + r * W) * 4 + lane / 8) * a.w_stride + lane % 8;
  const int a_dst = (lane % 8) * SA + warp * 4 + lane / 8, b_dst = BK * SA + (lane % 8) * SB + warp * 4 + lane / 8;
  auto copy_slab = [&](float* stage, int64_t k0) {
#pragma unroll
    for (int kb = 0; kb < Tile::kKBlocks; ++kb) {
#pragma unroll
      for (int r = 0; r < Tile::kARows; ++r)
        copy4_async(stage + a_dst + kb * 8 * SA + r * W * 4, a_src[r] + k0 + kb * 8, a_ok[r]);  // !ok: row 0, not read
#pragma unroll
      for (int r = 0; r < Tile::kBRows; ++r) copy4_async(stage + b_dst + kb * 8 * SB + r * W * 4, b_src[r] + k0 + kb * 8, true);
    }
  };
  const int tr = (lane & 1) | ((lane >> 4) & 1) << 1 | (warp % (RG / 4)) << 2;
  const int tc = ((lane >> 1) & 7) | (warp / (RG / 4)) << 3;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  const int slabs = static_cast<int>(a.K / BK);  // the launcher checks K % BK == 0 and K < 2^31
  auto load_fragments = [&](const float* stage, int k, float (&av)[TM], float (&bv)[TN]) {
    const float* As = stage + k * SA + tr * 4;
    const float* Bs = stage + BK * SA + k * SB + tc * 4;
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(As + q * 4 * RG);
      av[4 * q] = v.x, av[4 * q + 1] = v.y, av[4 * q + 2] = v.z, av[4 * q + 3] = v.w;
    }
#pragma unroll
    for (int p = 0; p < TN / 4; ++p) {
      const float4 v = *reinterpret_cast<const float4*>(Bs + p * 4 * CG);
      bv[4 * p] = v.x, bv[4 * p + 1] = v.y, bv[4 * p + 2] = v.z, bv[4 * p + 3] = v.w;
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < slabs) copy_slab(smem + s * Tile::kStageFloats, static_cast<int64_t>(s) * BK);
    commit_copies();
  }
  int read = 0, write = kStages - 1;  // stages
  {
    // The next slab's barrier, copies and first fragments during the last k of this one, so that
    // neither the barrier nor the first shared loads' latency stands between two slabs' FFMAs.
    float av[2][TM], bv[2][TN];
    wait_for_copies<kStages - 2>();
    __syncthreads();
    load_fragments(smem, 0, av[0], bv[0]);
    for (int s = 0; s < slabs; ++s) {
      if (s < zero_passes) Zero::store(a, count, h0, s, tid);
      const float* stage = smem + read * Tile::kStageFloats;
#pragma unroll
      for (int k = 0; k < BK; ++k) {
        const int cur = k & 1;
        if (k + 1 < BK) {
          load_fragments(stage, k + 1, av[cur ^ 1], bv[cur ^ 1]);
        } else {
          wait_for_copies<kStages - 3>();  // slab s + 1 is in
          __syncthreads();  // and every thread is done with slab s - 1's stage, the one refilled
          if (s + kStages - 1 < slabs) copy_slab(smem + write * Tile::kStageFloats, static_cast<int64_t>(s + kStages - 1) * BK);
          commit_copies();
          read = read + 1 == kStages ? 0 : read + 1;
          write = write + 1 == kStages ? 0 : write + 1;
          if (s + 1 < slabs) load_fragments(smem + read * Tile::kStageFloats, 0, av[cur ^ 1], bv[cur ^ 1]);
        }
        fma_2x2_blocks(acc, av[cur], bv[cur]);
      }
    }
  }
  wait_for_copies<0>();
  for (int64_t p = slabs; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
  store_groups<TM, TN, RG, CG>(a, acc, count, h0, tr, tc);
}

template <int BM, int BN, int TM, int TN, int kStages>
void launch_transposed(const GemmArgs& a, cudaStream_t stream) {
  using Tile = TransposedTile<BM, BN, TM, TN, kStages>;
  check_whole_slabs(a, Tile::BK, BN, "transposed");
  launch_one_row_tile_kernel(transposed_rows_gemm_kernel<BM, BN, TM, TN, kStages>, BM, BN, Tile::kThreads,
                             Tile::kSmemBytes, a, stream);
}

// The library's whole-slab tile (the staged one, variant 47), a frozen copy with the k of a slab at
// which the next slab's registers go to shared memory a parameter, the slab after it loaded right
// behind: at 31 (the library's until cc518c1: its loads at a slab's start, its stores before the
// barrier) or elsewhere; at 4 its sm_90 SASS was the library's since cc518c1.
template <int BM, int BN, int TM, int TN, int kStoreAt, bool kRowSerpentine>
__global__ void __launch_bounds__(BM / TM * (BN / TN), 1) staged_rows_gemm_kernel(GemmArgs a) {
  constexpr int BK = 32;
  static_assert(kStoreAt >= 0 && kStoreAt < BK, "a k of the slab");
  constexpr int RG = BM / TM, CG = BN / TN, T = RG * CG;
  constexpr int kAFloats = BK * BM + 32, kBufFloats = kAFloats + BK * BN + 32;
  constexpr int kALoads = BM * BK / 4 / T, kBLoads = BN * BK / 4 / T;
  static_assert(BM * BK / 4 % T == 0 && BN * BK / 4 % T == 0 && BM % 32 == 0 && BN % 32 == 0, "whole rounds, 32-bank rows");
  static_assert(TM % 4 == 0 && TN == 4, "12x4-like tiles");
  static_assert(RG % 4 == 0 && CG % 8 == 0 && (RG / 4) * (CG / 8) * 32 == T, "paired lanes: 4x8 a warp");
  using Zero = ZeroPass<BN, T>;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int64_t count;
  if (!launch_takes_count(a, count)) return;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t zero_passes = Zero::passes(a, count);
  if (count == 0) {
    for (int64_t p = 0; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
    return;
  }
  constexpr int V = BK / 4;  // float4s a row of a slab
  const int k4 = (tid % V) * 4;  // this thread's 4 k of a slab; its rows tid / V + (T / V) i
  const float* a_src[kALoads];
  bool a_ok[kALoads];
#pragma unroll
  for (int i = 0; i < kALoads; ++i) {
    const int slot = tid / V + i * (T / V);
    const int64_t row = slot < count ? a.rows[slot] : -1;
    a_ok[i] = row >= 0 && row < a.M;
    a_src[i] = a.x + (a_ok[i] ? row * a.x_stride : 0) + k4;
  }
  const float* b_src[kBLoads];
#pragma unroll
  for (int i = 0; i < kBLoads; ++i) b_src[i] = a.w + (h0 + tid / V + i * (T / V)) * a.w_stride + k4;
  float4 a_reg[kALoads], b_reg[kBLoads];
  auto load_slab = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i)
      a_reg[i] = a_ok[i] ? *reinterpret_cast<const float4*>(a_src[i] + k0) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) b_reg[i] = *reinterpret_cast<const float4*>(b_src[i] + k0);
  };
  constexpr auto row_at = [](int k, int S) { return k * S + 4 * ((k / 4) % 8); };  // shared row k's first float
  const int skew = 4 * (k4 / 4 % 8);
  auto store_slab = [&](float* buf) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      float* d = buf + k4 * BM + skew + tid / V + i * (T / V);
      d[0] = a_reg[i].x, d[BM] = a_reg[i].y, d[2 * BM] = a_reg[i].z, d[3 * BM] = a_reg[i].w;
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      float* d = buf + kAFloats + k4 * BN + skew + tid / V + i * (T / V);
      d[0] = b_reg[i].x, d[BN] = b_reg[i].y, d[2 * BN] = b_reg[i].z, d[3 * BN] = b_reg[i].w;
    }
  };
  const int tr = (lane & 1) | ((lane >> 4) & 1) << 1 | (warp % (RG / 4)) << 2;
  const int tc = ((lane >> 1) & 7) | (warp / (RG / 4)) << 3;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  auto load_fragments = [&](const float* buf, int k, float (&av)[TM], float (&bv)[TN]) {
    const float* As = buf + row_at(k, BM) + tr * 4;
    const float* Bs = buf + kAFloats + row_at(k, BN) + tc * 4;
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(As + q * 4 * RG);
      av[4 * q] = v.x, av[4 * q + 1] = v.y, av[4 * q + 2] = v.z, av[4 * q + 3] = v.w;
    }
    const float4 v = *reinterpret_cast<const float4*>(Bs);
    bv[0] = v.x, bv[1] = v.y, bv[2] = v.z, bv[3] = v.w;
  };
  const int slabs = static_cast<int>(a.K / BK);
  float* buf = smem;
  load_slab(0);
  store_slab(buf);
  if (slabs > 1) load_slab(BK);
  __syncthreads();
  float av[2][TM], bv[2][TN];
  load_fragments(buf, 0, av[0], bv[0]);
  for (int s = 0; s < slabs; ++s) {
    if (s < zero_passes) Zero::store(a, count, h0, s, tid);
    float* other = buf == smem ? smem + kBufFloats : smem;  // last read in slab s - 1, before its barrier
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const int cur = k & 1;
      if (k == kStoreAt && s + 1 < slabs) {
        store_slab(other);
        if (s + 2 < slabs) load_slab(static_cast<int64_t>(s + 2) * BK);
      }
      if (k + 1 < BK) {
        load_fragments(buf, k + 1, av[cur ^ 1], bv[cur ^ 1]);
      } else {
        __syncthreads();
        buf = other;
        if (s + 1 < slabs) load_fragments(buf, 0, av[cur ^ 1], bv[cur ^ 1]);
      }
      if constexpr (kRowSerpentine) {
        fma_row_serpentine(acc, av[cur], bv[cur]);
      } else {
        fma_2x2_blocks(acc, av[cur], bv[cur]);
      }
    }
  }
  for (int64_t p = slabs; p < zero_passes; ++p) Zero::store(a, count, h0, p, tid);
  store_groups<TM, TN, RG, CG>(a, acc, count, h0, tr, tc);
}

template <int kStoreAt, bool kRowSerpentine = false>
void launch_staged(const GemmArgs& a, cudaStream_t stream) {
  constexpr int BM = 192, BN = 64, TM = 12, TN = 4, BK = 32;
  constexpr int kSmemBytes = 2 * (BK * BM + 32 + BK * BN + 32) * static_cast<int>(sizeof(float));
  check_whole_slabs(a, BK, BN, "staged");
  launch_one_row_tile_kernel(staged_rows_gemm_kernel<BM, BN, TM, TN, kStoreAt, kRowSerpentine>, BM, BN,
                             BM / TM * (BN / TN), kSmemBytes, a, stream);
}

at::Tensor rows_gemm_variant(const at::Tensor& x, const at::Tensor& w, const at::Tensor& rows, const at::Tensor& count,
                             int64_t variant) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  at::Tensor y = at::empty({M, N}, x.options());
  GemmArgs a{x.const_data_ptr<float>(), w.const_data_ptr<float>(), y.mutable_data_ptr<float>(),
             rows.const_data_ptr<int32_t>(), count.const_data_ptr<int32_t>(), M, N, K, x.stride(0), w.stride(0), 0, M,
             true};  // kb14::rows_gemm's contract: zeros in the rows not gathered
  auto s = c10::cuda::getCurrentCUDAStream();
  switch (variant) {
    case 0: launch_rows_gemm<MoreRows>(a, true, s); break;  // the library's tile past 192 rows
    case 5: launch_rows_gemm<TileConfig<128, 128, 8, 8, 8, 2, false>>(a, true, s); break;  // 2/SM, the library's past 3/8 to 2026-12-05
    case 7: launch_narrow<192, 64, 16, 12, 4, 1>(a, s); break;
    case 8: launch_narrow<192, 64, 16, 12, 4, 2>(a, s); break;
    case 9: launch_narrow<192, 32, 16, 12, 4, 2>(a, s); break;
    case 10: launch_narrow<256, 64, 16, 8, 8, 1>(a, s); break;
    case 11: launch_narrow<96, 64, 16, 12, 4, 2>(a, s); break;
    case 12: launch_narrow<64, 64, 16, 8, 8, 4>(a, s); break;
    case 13: launch_narrow<128, 64, 16, 8, 8, 2>(a, s); break;
    case 14: launch_narrow<96, 128, 24, 8, 8, 1>(a, s); break;   // 6 warps, 179 rows in two 96-row tiles
    case 15: launch_narrow<192, 64, 12, 8, 8, 1>(a, s); break;   // 6 warps, 179 rows in one 192-row tile
    // One warp per scheduler, 96 accumulators each: 12288 outputs an SM, balanced over its 4 schedulers.
    case 16: launch_narrow<192, 64, 16, 12, 8, 1>(a, s); break;
    case 17: launch_narrow<192, 64, 8, 12, 8, 1>(a, s); break;
    case 18: launch_narrow<96, 64, 16, 12, 8, 2>(a, s); break;   // two 2-warp blocks an SM
    // Counts up to BM in one launch of N / BN blocks that also zero the rows not gathered.
    case 19: launch_narrow_fused<192, 64, 16, 12, 8>(a, s); break;
    case 20: launch_kmajor<192, 64, 16, 12, 8, 3>(a, s); break;
    case 21: launch_kmajor<192, 64, 32, 12, 8, 3>(a, s); break;
    case 22: launch_kmajor<192, 64, 16, 12, 8, 4>(a, s); break;
    // One row tile at other accumulator shapes (BK 24 or 32 for 256 or 384 threads needs over
    // 48 KB of static shared memory); 12 x 4 on 8 warps is the library's few-rows tile.
    case 23: launch_one_row_tile<FewRows>(a, s); break;
    case 26: launch_narrow_fused<192, 64, 12, 8, 8>(a, s); break;   // 6 warps, 64 accumulators
    // The library's one-row tile with wider slabs in dynamic shared memory, loads unchecked.
    case 27: launch_wide_slab<192, 64, 16, 12, 4>(a, s); break;
    case 28: launch_wide_slab<192, 64, 32, 12, 4>(a, s); break;
    case 29: launch_wide_slab<192, 64, 64, 12, 4>(a, s); break;
    // The same 12288 outputs an SM on more warps with fewer accumulators each (latency hidden
    // by warps rather than by each warp's independent FMAs): 12 warps of 32, 24 warps of 16.
    case 30: launch_wide_slab<192, 64, 64, 8, 4>(a, s); break;
    case 31: launch_wide_slab<192, 64, 32, 4, 4>(a, s); break;
    // 27 with its accumulator rows in serpentine order.
    case 32: launch_wide_slab<192, 64, 16, 12, 4, true>(a, s); break;
    // Shared memory's 128 B a cycle: lanes paired for the loads, stores skewed, and both (+ serpentine).
    case 33: launch_wide_slab<192, 64, 16, 12, 4, false, true, false>(a, s); break;
    case 34: launch_wide_slab<192, 64, 16, 12, 4, false, false, true>(a, s); break;
    case 35: launch_wide_slab<192, 64, 16, 12, 4, false, true, true>(a, s); break;
    case 36: launch_wide_slab<192, 64, 16, 12, 4, true, true, true>(a, s); break;
    case 37: launch_swizzled<2>(a, s); break;
    case 38: launch_swizzled<3>(a, s); break;
    // cuBLAS's feed: 4-byte cp.async transposing into one shared row per k, a slab ahead, 2x2 FFMA blocks.
    case 42: launch_transposed<192, 64, 12, 4, 3>(a, s); break;
    // 42's compute fed through registers (16-byte loads, 4-float stores a slab ahead): the library's.
    case 47: launch_library_whole_slabs(a, s); break;
    // The staged tile storing the next slab at k = 31 (the library's until cc518c1), 16, 8, 2 or 0 (47: 4).
    case 51: launch_staged<31>(a, s); break;
    case 52: launch_staged<16>(a, s); break;
    case 54: launch_staged<8>(a, s); break;
    case 55: launch_staged<2>(a, s); break;
    case 56: launch_staged<0>(a, s); break;
    // 47's store point (k = 4) with its FFMAs row by row, serpentine.
    case 57: launch_staged<4, true>(a, s); break;
    default: TORCH_CHECK(false, "no such variant");
  }
  return y;
}

}  // namespace hybrid_cuda
}  // namespace kb14

TORCH_LIBRARY(kb14_gemm_tiles, m) {
  m.def("rows_gemm_variant(Tensor x, Tensor w, Tensor rows, Tensor count, int variant) -> Tensor");
  m.impl("rows_gemm_variant", c10::DispatchKey::CUDA, &kb14::hybrid_cuda::rows_gemm_variant);
}
