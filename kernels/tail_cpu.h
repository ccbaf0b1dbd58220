// The CPU kernel of kb14::div_sum_scale, as templates with no torch headers: tail_cpu.cpp
// instantiates them for float and double (and holds the entry point ctypes calls,
// kernels/tail_cpu.py), tail_cpu_16bit.cpp for half and bfloat16 (with c10's exact
// conversions); the two units compile in parallel.
//
// Bit-exactness comes from performing the same floating-point operations, on the
// same operands, in the same order as the reference:
//   y / divisor      ATen's CPU true-divide: a / float(divisor) in the tensor's type
//                    (reduced floats: float(a) / float(divisor), rounded back)
//   torch.sum(., 1)  ATen's CPU cascade sum (aten/src/ATen/native/cpu/SumKernel.cpp):
//                    vectorised accumulators, 4-way ILP, a 4-level cascade, a
//                    scalar tail, then the lanes in order; one row split across
//                    threads in two passes when there is a single output
//   * scale          ATen's CPU multiply: out * float(scale) in the tensor's type
// Each element is divided as it is loaded (rows shorter than one vector: a block of at
// most 2,048 quotients at a time, in L1), so y is read once and the quotient never stored.

#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace kb14 {
// One call: y (rows x cols, element strides), out (rows x 1, element stride).
struct Rows {
  const void* y;
  void* out;
  int64_t rows, cols, row_stride, col_stride, out_stride;
  double divisor, scale;
  int threads;  // torch.get_num_threads(): the split of a single row depends on it
};

// Internal to each unit that includes it, as one whole unit was: the optimiser may inline and drop all of it.
namespace {
// at::internal::GRAIN_SIZE: the work below which ATen's parallel_for runs serially.
constexpr int64_t kGrainSize = 32768;

inline int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// at::parallel_for's split (ATen/ParallelOpenMP.h) over `threads` OpenMP threads:
// serial below the grain, inside a parallel region or on one thread; else at most
// ceil(n / grain) threads, thread t taking the t-th chunk of ceil(n / used) indices.
// The results never depend on the split: each row is summed by one thread, and the
// one-row path indexes its slots by chunk.
template <typename F>
void parallel_for(int64_t n, int64_t grain, int threads, const F& f) {
  if (n <= 0) return;
  if (n <= grain || n == 1 || threads <= 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int64_t used = omp_get_num_threads();
    if (grain > 0) used = std::min(used, div_up(n, grain));
    const int64_t tid = omp_get_thread_num();
    const int64_t chunk = div_up(n, used);
    const int64_t first = tid * chunk;
    if (first < n) f(first, std::min(n, first + chunk));
  }
}

// The sum's accumulation type: float for half and bfloat16 (tail_cpu_16bit.cpp specialises it).
template <typename T> struct AccType { using type = T; };

template <typename T>
constexpr bool is_reduced_float = !std::is_same_v<typename AccType<T>::type, T>;

// The reference's CPU quotient, rounded to the tensor's dtype, then loaded as the
// accumulation type (SumKernel's CastLoadPolicy).
template <typename scalar_t>
struct CpuQuotient {
  using acc_t = typename AccType<scalar_t>::type;
  using div_t = std::conditional_t<is_reduced_float<scalar_t>, float, scalar_t>;
  div_t divisor;
  explicit CpuQuotient(double d) : divisor(static_cast<div_t>(d)) {}
  inline acc_t operator()(scalar_t a) const {
    if constexpr (is_reduced_float<scalar_t>) {
      return static_cast<float>(static_cast<scalar_t>(static_cast<float>(a) / divisor));
    } else {
      return a / divisor;
    }
  }
};

// Reads already-rounded values (the two-pass buffer).
template <typename scalar_t>
struct CpuCast {
  using acc_t = typename AccType<scalar_t>::type;
  inline acc_t operator()(scalar_t a) const { return static_cast<acc_t>(a); }
};

inline int64_t ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  return 64 - __builtin_clzll(static_cast<uint64_t>(x) - 1);
}

// One row's quotients, element i as acc_t.
template <typename scalar_t, bool kContiguous>
struct RowQuotients {
  const scalar_t* row;
  int64_t col_stride;
  const CpuQuotient<scalar_t>& quotient;
  inline auto operator()(int64_t i) const { return quotient(row[kContiguous ? i : i * col_stride]); }
};

// SumKernel's cascade carries a level after 2^level_power groups of four vectors, level_power at least 4:
// rows of fewer groups (and at least one vector) sum in level 0 alone.
constexpr int64_t kMinLevelPower = 4;
inline bool below_first_level(int64_t n, int L) { return n >= L && n / L / 4 < (int64_t(1) << kMinLevelPower); }

// A vector's quotients in registers (GCC's vector types; 16-bit types: tail_cpu_16bit.cpp, with F16C and
// AVX2): `lanes(p, d)`, SumKernel's W accumulator lanes of the L elements at p (16-bit: element l plus
// element 8 + l), and `quotients(p, d, out)`, the L quotients themselves. kAdd: whether add() beats the
// compiler's loop on long rows. kColumns: `columns(...)`, single columns eight rows at a time.
template <typename scalar_t> struct SimdQuotients {
  static constexpr bool kAvailable = false, kAdd = false, kColumns = false;
};
template <typename T>
struct SimdOf32Bytes {
  static constexpr bool kAvailable = true, kAdd = false, kColumns = false;
  typedef T V __attribute__((vector_size(32)));
  static_assert(sizeof(V) == 32, "a vector of 32 bytes");
  static V zero() { return V{}; }
  static V add(V a, V b) { return a + b; }
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static void store(T* p, V v) { std::memcpy(p, &v, sizeof(v)); }
  static V broadcast(T d) { return V{} + d; }
  static V lanes(const T* p, V d) { return load(p) / d; }
  static void quotients(const T* p, V d, T* out) { store(out, lanes(p, d)); }
};
template <> struct SimdQuotients<float> : SimdOf32Bytes<float> {};
template <> struct SimdQuotients<double> : SimdOf32Bytes<double> {};

// Rows by whole vectors at once; none by default. kAdd: add(acc, elem, v), a vector's lanes into acc.
// kShortRows: pair_sums(rows, n, totals), RowCascade::sum of two contiguous rows below the first level,
// each in its own registers; block_quotients for rows shorter than a vector.
template <typename Elem, int W, int L>
struct VectorLanes {
  static constexpr bool kAdd = false, kShortRows = false;
};
template <typename scalar_t, int W, int L>
struct VectorLanes<RowQuotients<scalar_t, true>, W, L> {
  using S = SimdQuotients<scalar_t>;
  using acc_t = typename AccType<scalar_t>::type;
  using Row = RowQuotients<scalar_t, true>;
  // SumKernel's 32-byte vector only (the scalar path's cascade is RowCascade<acc_t, 1, 1>).
  static constexpr bool kVector = L * sizeof(scalar_t) == 32 && W * sizeof(acc_t) == 32;
  static constexpr bool kAdd = kVector && S::kAdd, kShortRows = kVector && S::kAvailable;

  static inline void add(acc_t (&acc)[W], const Row& e, int64_t v) {
    S::store(acc, S::add(S::load(acc), S::lanes(e.row + v * L, S::broadcast(e.quotient.divisor))));
  }
  // The quotients of p[0, n) by vectors, as far as whole vectors go; returns how many.
  static inline int64_t block_quotients(const scalar_t* p, int64_t n, const CpuQuotient<scalar_t>& quotient,
                                        acc_t* q) {
    const auto d = S::broadcast(quotient.divisor);
    int64_t i = 0;
    for (; i + L <= n; i += L) S::quotients(p + i, d, q + i);
    return i;
  }
  // RowCascade::sum's operations for two rows below the first level (vector_row_sum, multi_row_sum's
  // level 0), row by row: four accumulators from +0, one per vector of a group, the leftover vectors into the
  // first, the four in order; then the scalar tail (its quotients from the row's last L elements) and the
  // lanes. The two rows' operations interleave, each one's chain of additions hiding the other's (bf16
  // 8192 x 100: 1.3x faster than the generic cascade; two rows at once 0.73-0.79x the time of one at 36
  // columns, four no faster).
  static inline void pair_sums(const Row (&e)[2], int64_t n, acc_t (&totals)[2]) {
    constexpr int R = 2;
    const auto d = S::broadcast(e[0].quotient.divisor);
    const int64_t vectors = n / L, groups = vectors / 4;
    typename S::V acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k) acc[r][k] = S::zero();
    for (int64_t i = 0; i < groups; ++i)
      for (int r = 0; r < R; ++r)
        for (int k = 0; k < 4; ++k) acc[r][k] = S::add(acc[r][k], S::lanes(e[r].row + (4 * i + k) * L, d));
    for (int64_t v = groups * 4; v < vectors; ++v)
      for (int r = 0; r < R; ++r) acc[r][0] = S::add(acc[r][0], S::lanes(e[r].row + v * L, d));
    alignas(32) acc_t lane[R][W], last[R][L];
    for (int r = 0; r < R; ++r) {
      S::store(lane[r], S::add(S::add(S::add(acc[r][0], acc[r][1]), acc[r][2]), acc[r][3]));
      totals[r] = 0;
    }
    if (vectors * L < n) {
      for (int r = 0; r < R; ++r) S::quotients(e[r].row + n - L, d, last[r]);
      for (int64_t i = vectors * L; i < n; ++i)
        for (int r = 0; r < R; ++r) totals[r] += last[r][i - (n - L)];
    }
    for (int l = 0; l < W; ++l)
      for (int r = 0; r < R; ++r) totals[r] += lane[r][l];
  }
};

// One row of the reference's intermediate, read through `elem(i)` (the i-th value as
// acc_t). W accumulator lanes per vector; L elements per vector load: L == 2W for
// half and bfloat16, whose vector load converts its two halves to float and adds
// them lane-wise (verified bit for bit against torch's CPU sum).
template <typename acc_t, int W, int L, typename Elem>
struct RowCascade {
  const Elem& elem;

  inline acc_t vec_lane(int64_t v, int l) const {
    if constexpr (L == W) {
      return elem(v * L + l);
    } else {
      return elem(v * L + l) + elem(v * L + W + l);
    }
  }

  // acc[l] += vec_lane(v, l) for every lane: by VectorLanes where the row has it.
  inline void add_vector(acc_t (&acc)[W], int64_t v) const {
    if constexpr (VectorLanes<Elem, W, L>::kAdd) {
      VectorLanes<Elem, W, L>::add(acc, elem, v);
    } else {
#pragma GCC unroll 32
      for (int l = 0; l < W; ++l) acc[l] += vec_lane(v, l);
    }
  }

  // multi_row_sum<vacc, 4>: four interleaved vector accumulators, each a 4-level
  // cascade. Vector index of (group i, accumulator k) = i * 4 + k.
  void multi_row_sum(int64_t groups, acc_t (&out)[4][W]) const {
    constexpr int levels = 4;
    const int64_t level_power = std::max<int64_t>(kMinLevelPower, ceil_log2(groups) / levels);
    const int64_t level_step = int64_t(1) << level_power;
    const int64_t level_mask = level_step - 1;
    const auto add_group = [&](acc_t (&level)[4][W], int64_t i) {
      for (int k = 0; k < 4; ++k) add_vector(level[k], i * 4 + k);
    };
    if (groups < level_step) {
      // No level is ever carried (short rows): level 0 is the sum. The reference's empty levels add +0,
      // which changes nothing: level 0 began at +0, so it never holds -0.
      std::fill_n(&out[0][0], 4 * W, acc_t(0));
      for (int64_t i = 0; i < groups; ++i) add_group(out, i);
      return;
    }
    acc_t acc[levels][4][W];
    std::fill_n(&acc[0][0][0], levels * 4 * W, acc_t(0));

    int64_t i = 0;
    while (i + level_step <= groups) {
      for (int64_t j = 0; j < level_step; ++j, ++i) add_group(acc[0], i);
      for (int j = 1; j < levels; ++j) {
        for (int k = 0; k < 4; ++k) {
          for (int l = 0; l < W; ++l) {
            acc[j][k][l] += acc[j - 1][k][l];
            acc[j - 1][k][l] = acc_t(0);
          }
        }
        if ((i & (level_mask << (j * level_power))) != 0) break;
      }
    }
    for (; i < groups; ++i) add_group(acc[0], i);
    for (int j = 1; j < levels; ++j)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < W; ++l) acc[0][k][l] += acc[j][k][l];
    std::memcpy(out, acc[0], sizeof(out));
  }

  // row_sum<vacc>: the 4-way ILP split, leftovers into the first accumulator,
  // then the accumulators in order.
  void vector_row_sum(int64_t vectors, acc_t (&sum)[W]) const {
    acc_t partial[4][W];
    const int64_t groups = vectors / 4;
    multi_row_sum(groups, partial);
    for (int64_t v = groups * 4; v < vectors; ++v)
      add_vector(partial[0], v);
    for (int k = 1; k < 4; ++k)
      for (int l = 0; l < W; ++l) partial[0][l] += partial[k][l];
    std::memcpy(sum, partial[0], sizeof(sum));
  }

  // Scalar row_sum<acc_t>: the same ILP and cascade on single elements
  // (SumKernel's path for rows shorter than one vector).
  acc_t scalar_row_sum(int64_t n) const {
    RowCascade<acc_t, 1, 1, Elem> scalar{elem};
    acc_t sum[1];
    scalar.vector_row_sum(n, sum);
    return sum[0];
  }

  // vectorized_inner_sum for one row, or the scalar path below one vector.
  acc_t sum(int64_t n) const {
    if (n < L) return scalar_row_sum(n);
    const int64_t vectors = n / L;
    acc_t lanes[W];
    vector_row_sum(vectors, lanes);
    acc_t total = 0;
    for (int64_t i = vectors * L; i < n; ++i) total += elem(i);
    for (int l = 0; l < W; ++l) total += lanes[l];
    return total;
  }
};

// RowCascade::sum of a row shorter than one vector, from its quotients: four accumulators from +0, element
// 4 i + k to the k-th, the leftovers to the first, then the four in order (level 0 only: at most 15 elements).
template <typename acc_t>
inline acc_t sum_below_one_vector(const acc_t* q, int64_t n) {
  acc_t acc[4] = {acc_t(0), acc_t(0), acc_t(0), acc_t(0)};
  const int64_t grouped = n / 4 * 4;
  for (int64_t i = 0; i < grouped; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += q[i + k];
  for (int64_t i = grouped; i < n; ++i) acc[0] += q[i];
  return ((acc[0] + acc[1]) + acc[2]) + acc[3];
}

template <typename acc_t, int W, int L, typename Elem>
acc_t cascade_sum(const Elem& elem, int64_t n) {
  return RowCascade<acc_t, W, L, Elem>{elem}.sum(n);
}

// `*out += value` into a zero-filled output (SumKernel's CastStoreAccumulate).
template <typename scalar_t, typename acc_t>
inline scalar_t store_accumulate(acc_t value) {
  return static_cast<scalar_t>(static_cast<acc_t>(scalar_t(0)) + value);
}

// The reference's `sum * scale` (ATen's CPU mul with a scalar operand).
template <typename scalar_t>
inline scalar_t scaled(scalar_t sum, double scale) {
  if constexpr (is_reduced_float<scalar_t>) {
    return static_cast<scalar_t>(static_cast<float>(sum) * static_cast<float>(scale));
  } else {
    return sum * static_cast<scalar_t>(scale);
  }
}

template <typename scalar_t, int W, int L, bool kContiguous>
void div_sum_scale_rows(const Rows& a) {
  using acc_t = typename AccType<scalar_t>::type;
  const int64_t rows = a.rows, cols = a.cols;
  const int64_t row_stride = a.row_stride, col_stride = a.col_stride;
  const scalar_t* base = static_cast<const scalar_t*>(a.y);
  scalar_t* result = static_cast<scalar_t*>(a.out);
  const int64_t out_stride = a.out_stride;
  const double divisor = a.divisor, scale = a.scale;
  const int threads = a.threads;
  const CpuQuotient<scalar_t> quotient(divisor);

  auto row_elem = [&](const scalar_t* row) { return RowQuotients<scalar_t, kContiguous>{row, col_stride, quotient}; };

  const int64_t numel = rows * cols;
  const bool serial = numel < kGrainSize || threads <= 1 || omp_in_parallel();
  if (rows == 1 && !serial) {
    // SumKernel's two-pass reduction for a single output: the row is cut into
    // min(threads, ceil(cols / GRAIN_SIZE)) equal chunks (parallel_for's split),
    // chunk t is summed into slot t of a buffer of the output dtype, then the buffer
    // is summed. Slots are indexed by chunk, not by the thread that ran it, so the
    // result cannot depend on which OpenMP runtime schedules the work.
    const int64_t max_threads = threads;
    const int64_t used = std::min(max_threads, div_up(cols, kGrainSize));
    const int64_t chunk = div_up(cols, used);
    std::vector<scalar_t> buffer(max_threads, scalar_t(0));
    parallel_for(used, 1, threads, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t first = t * chunk, last = std::min(cols, first + chunk);
        if (first >= last) continue;
        const scalar_t* part_base = base + (kContiguous ? first : first * col_stride);
        const acc_t part = cascade_sum<acc_t, W, L>(row_elem(part_base), last - first);
        buffer[t] = store_accumulate<scalar_t>(part);
      }
    });
    const CpuCast<scalar_t> cast;
    const scalar_t* buf = buffer.data();
    const acc_t total = cascade_sum<acc_t, W, L>([buf, &cast](int64_t i) { return cast(buf[i]); },
                                                  max_threads);
    result[0] = scaled(store_accumulate<scalar_t>(total), scale);
    return;
  }

  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cols, 1));
  if constexpr (kContiguous) {  // (the dispatch takes single columns as contiguous)
    if (cols == 1) {
      // The cascade adds a row's one quotient to +0, then adds +0s (no-ops: the sum is never -0): an
      // elementwise loop (the cascade's set-up cost 2.5-4x the reference's time).
      parallel_for(rows, grain, threads, [&](int64_t begin, int64_t end) {
        int64_t r = begin;
        if constexpr (SimdQuotients<scalar_t>::kColumns)
          r = SimdQuotients<scalar_t>::columns(base, row_stride, result, out_stride, begin, end, quotient, scale);
        for (; r < end; ++r) {
          const acc_t total = acc_t(0) + quotient(base[r * row_stride]);
          result[r * out_stride] = scaled(store_accumulate<scalar_t>(total), scale);
        }
      });
      return;
    }
    if (cols < L && row_stride == cols) {
      // Packed rows shorter than one vector (SumKernel's scalar path): the quotients of a block of rows by
      // one flat loop, then each row's four accumulators from them (one quotient at a time: 1.1-1.9x the
      // reference's time).
      using Lanes = VectorLanes<RowQuotients<scalar_t, true>, W, L>;
      constexpr int64_t kBlock = 2048;
      const int64_t block_rows = kBlock / cols;
      parallel_for(rows, grain, threads, [&](int64_t begin, int64_t end) {
        acc_t q[kBlock];
        for (int64_t first = begin; first < end; first += block_rows) {
          const int64_t last = std::min(end, first + block_rows);
          const scalar_t* p = base + first * cols;
          const int64_t n = (last - first) * cols;
          int64_t i = 0;
          if constexpr (Lanes::kShortRows) i = Lanes::block_quotients(p, n, quotient, q);
          for (; i < n; ++i) q[i] = quotient(p[i]);
          for (int64_t r = first; r < last; ++r) {
            const acc_t total = sum_below_one_vector(q + (r - first) * cols, cols);
            result[r * out_stride] = scaled(store_accumulate<scalar_t>(total), scale);
          }
        }
      });
      return;
    }
  }
  const bool short_rows = below_first_level(cols, L);
  parallel_for(rows, grain, threads, [&](int64_t begin, int64_t end) {
    int64_t r = begin;
    using Lanes = VectorLanes<RowQuotients<scalar_t, kContiguous>, W, L>;
    if constexpr (Lanes::kShortRows) {
      for (; short_rows && r < end; r += 2) {
        const int64_t second = std::min(r + 1, end - 1);  // an odd last row is summed twice
        const RowQuotients<scalar_t, kContiguous> pair[2] = {row_elem(base + r * row_stride),
                                                             row_elem(base + second * row_stride)};
        acc_t totals[2];
        Lanes::pair_sums(pair, cols, totals);
        result[r * out_stride] = scaled(store_accumulate<scalar_t>(totals[0]), scale);
        result[second * out_stride] = scaled(store_accumulate<scalar_t>(totals[1]), scale);
      }
    }
    for (; r < end; ++r) {
      const acc_t total = cascade_sum<acc_t, W, L>(row_elem(base + r * row_stride), cols);
      result[r * out_stride] = scaled(store_accumulate<scalar_t>(total), scale);
    }
  });
}

// Returns 0, or kStridedReducedFloat: half and bfloat16 rows come contiguous (kernels/tail_cpu.py copies
// them; copy and vector lanes beat strided loads 2-3.7x), so their strided kernels are not built.
constexpr int kStridedReducedFloat = -2;
template <typename scalar_t>
int dispatch_layout(const Rows& a) {
  using acc_t = typename AccType<scalar_t>::type;
  // SumKernel's vectors are 32 bytes on x86 even on AVX512 CPUs (it registers no
  // AVX512 variant; verified bit for bit, tests/test_cpu_exact.py).
  constexpr int kVecBytes = 32;
  constexpr int W = kVecBytes / sizeof(acc_t);
  constexpr int L = kVecBytes / sizeof(scalar_t);
  if (a.col_stride == 1 || a.cols <= 1) {
    div_sum_scale_rows<scalar_t, W, L, true>(a);
    return 0;
  }
  if constexpr (is_reduced_float<scalar_t>) {
    return kStridedReducedFloat;
  } else {
    div_sum_scale_rows<scalar_t, W, L, false>(a);
    return 0;
  }
}

}  // namespace

// float16 (dtype 2) and bfloat16 (3): tail_cpu_16bit.cpp. Returns dispatch_layout's code, or -1 for
// another dtype.
int div_sum_scale_16bit(int dtype, const Rows& a);
}  // namespace kb14
