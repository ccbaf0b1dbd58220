// kb14::div_sum_scale's CPU kernels for float16 and bfloat16 (tail_cpu.h), a unit of their own so
// that they compile beside tail_cpu.cpp's (the first CPU call waits for the longer of the two).

#include "tail_cpu.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <immintrin.h>

namespace kb14 {
namespace {
template <> struct AccType<c10::Half> { using type = float; };
template <> struct AccType<c10::BFloat16> { using type = float; };

// Eight quotients at once, widened to float, rounded as the reference rounds them (c10's conversions:
// nearest even; bfloat16's NaN 0x7FC0). c10's scalar conversions keep the element loop scalar (half:
// 5.6-6.6x the reference's time).
template <typename scalar_t> constexpr bool kVectorQuotients = false;
#if defined(__F16C__) && defined(__AVX__)
template <> constexpr bool kVectorQuotients<c10::Half> = true;
inline __m256 quotients(const c10::Half* p, __m256 divisor) {
  const __m256 q = _mm256_div_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), divisor);
  return _mm256_cvtph_ps(_mm256_cvtps_ph(q, _MM_FROUND_TO_NEAREST_INT));
}
#endif
#if defined(__AVX2__)
template <> constexpr bool kVectorQuotients<c10::BFloat16> = true;
inline __m256 quotients(const c10::BFloat16* p, __m256 divisor) {
  // In GCC's vector types, so that the NaN select is a masked move where AVX-512 has one (blendv: 1.13x slower).
  using u16x8 = uint16_t __attribute__((vector_size(16)));
  using u32x8 = uint32_t __attribute__((vector_size(32)));
  u16x8 raw;
  std::memcpy(&raw, p, sizeof(raw));
  const __m256 q = reinterpret_cast<__m256>(__builtin_convertvector(raw, u32x8) << 16) / divisor;
  const u32x8 bits = reinterpret_cast<u32x8>(q);
  const u32x8 rounded = (bits + ((bits >> 16) & 1) + 0x7FFF) & 0xFFFF0000u;
  return reinterpret_cast<__m256>(q == q ? rounded : u32x8{} + 0x7FC00000u);
}
#endif

template <typename scalar_t>
struct VectorLanes<RowQuotients<scalar_t, true>, 8, 16> {
  // bfloat16's long rows keep the compiler's loop, which beats add() by 1.13x at 1024 x 8192.
  static constexpr bool kAdd = kVectorQuotients<scalar_t> && std::is_same_v<scalar_t, c10::Half>;
  static constexpr bool kShortRows = kVectorQuotients<scalar_t>;
  using Row = RowQuotients<scalar_t, true>;
  // Vector v's lanes: element l plus element 8 + l (SumKernel's load of two halves).
  static inline __m256 lanes(const Row& e, int64_t v, __m256 divisor) {
    const scalar_t* p = e.row + v * 16;
    return _mm256_add_ps(quotients(p, divisor), quotients(p + 8, divisor));
  }
  // The quotients of p[0, n) by eight, as far as whole vectors go; returns how many.
  static inline int64_t block_quotients(const scalar_t* p, int64_t n, const CpuQuotient<scalar_t>& quotient,
                                        float* q) {
    const __m256 divisor = _mm256_set1_ps(quotient.divisor);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(q + i, quotients(p + i, divisor));
    return i;
  }
  static inline void add(float (&acc)[8], const Row& e, int64_t v) {
    const __m256 lanes_v = lanes(e, v, _mm256_set1_ps(e.quotient.divisor));
    _mm256_storeu_ps(acc, _mm256_add_ps(_mm256_loadu_ps(acc), lanes_v));
  }
  // RowCascade::sum's operations for R rows below the first level (vector_row_sum, multi_row_sum's level 0),
  // row by row: four accumulators from +0, one per vector of a group, the leftover vectors into the first,
  // the four in order; then the scalar tail and the lanes (1.3x faster at 8192 x 100 bfloat16).
  template <int R>
  static inline void short_row_sums(const Row* e, int64_t n, float* totals) {
    const __m256 divisor = _mm256_set1_ps(e[0].quotient.divisor);
    const int64_t vectors = n / 16, groups = vectors / 4;
    __m256 acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k) acc[r][k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < groups; ++i)
      for (int r = 0; r < R; ++r)
        for (int k = 0; k < 4; ++k) acc[r][k] = _mm256_add_ps(acc[r][k], lanes(e[r], 4 * i + k, divisor));
    for (int64_t v = groups * 4; v < vectors; ++v)
      for (int r = 0; r < R; ++r) acc[r][0] = _mm256_add_ps(acc[r][0], lanes(e[r], v, divisor));
    alignas(32) float lane[R][8], last[R][16];
    for (int r = 0; r < R; ++r) {
      _mm256_store_ps(lane[r], _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), acc[r][2]), acc[r][3]));
      // The scalar tail's quotients from the row's last 16 elements (n >= 16), by vector too.
      _mm256_store_ps(last[r], quotients(e[r].row + n - 16, divisor));
      _mm256_store_ps(last[r] + 8, quotients(e[r].row + n - 8, divisor));
      totals[r] = 0;
    }
    for (int64_t i = vectors * 16; i < n; ++i)
      for (int r = 0; r < R; ++r) totals[r] += last[r][i - (n - 16)];
    for (int l = 0; l < 8; ++l)
      for (int r = 0; r < R; ++r) totals[r] += lane[r][l];
  }
};
}  // namespace

int div_sum_scale_16bit(int dtype, const Rows& a) {
  switch (dtype) {
    case 2: return dispatch_layout<c10::Half>(a);
    case 3: return dispatch_layout<c10::BFloat16>(a);
    default: return -1;
  }
}
}  // namespace kb14
