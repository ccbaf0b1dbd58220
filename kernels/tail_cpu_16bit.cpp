// kb14::div_sum_scale's CPU kernels for float16 and bfloat16 (tail_cpu.h), a unit of their own so
// that they compile beside tail_cpu.cpp's (the first CPU call waits for the longer of the two).

#include "tail_cpu.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace kb14 {
namespace {
template <> struct AccType<c10::Half> { using type = float; };
template <> struct AccType<c10::BFloat16> { using type = float; };

// Eight quotients at once, widened to float, rounded as the reference rounds them (c10's conversions:
// nearest even; bfloat16's NaN 0x7FC0). c10's scalar conversions keep the element loop scalar (half:
// 5.6-6.6x the reference's time).
#if defined(__F16C__) && defined(__AVX__)
inline __m256 quotients8(__m128i halves, __m256 divisor) {
  const __m256 q = _mm256_div_ps(_mm256_cvtph_ps(halves), divisor);
  return _mm256_cvtph_ps(_mm256_cvtps_ph(q, _MM_FROUND_TO_NEAREST_INT));
}
inline __m256 quotients8(const c10::Half* p, __m256 divisor) {
  return quotients8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), divisor);
}
#endif
#if defined(__AVX2__)
inline __m256 quotients8(const c10::BFloat16* p, __m256 divisor) {
  // In GCC's vector types, so that the NaN select is a masked move where AVX-512 has one (blendv: 1.13x
  // slower).
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

#if defined(__AVX__)
// SimdQuotients (tail_cpu.h) for a 16-bit vector: sixteen elements, eight lanes.
template <typename scalar_t, bool kAddLongRows>
struct Simd16 : SimdOf32Bytes<float> {
  static constexpr bool kAdd = kAddLongRows;
  static V q8(const scalar_t* p, V d) {
    return reinterpret_cast<V>(quotients8(p, reinterpret_cast<__m256>(d)));
  }
  static V lanes(const scalar_t* p, V d) { return q8(p, d) + q8(p + 8, d); }
  static void quotients(const scalar_t* p, V d, float* out) {
    store(out, q8(p, d));
    store(out + 8, q8(p + 8, d));
  }
};
#endif
#if defined(__F16C__) && defined(__AVX__)
template <> struct SimdQuotients<c10::Half> : Simd16<c10::Half, true> {
  // Single columns' elementwise loop (tail_cpu.h) on rows [begin, end), eight at a time, as far as whole
  // eights go; returns the first row left. c10's scalar conversions there: 1.4-1.5x the reference's time.
  static constexpr bool kColumns = true;
  static int64_t columns(const c10::Half* y, int64_t y_stride, c10::Half* out, int64_t out_stride, int64_t begin,
                         int64_t end, const CpuQuotient<c10::Half>& quotient, double scale) {
    const __m256 d = _mm256_set1_ps(quotient.divisor), s = _mm256_set1_ps(static_cast<float>(scale));
    const __m256 zero = _mm256_setzero_ps();
    const bool packed = y_stride == 1 && out_stride == 1;  // vector loads and stores (else element by element)
    int64_t r = begin;
    for (; r + 8 <= end; r += 8) {
      const auto at = [&](int i) { return static_cast<short>(y[(r + i) * y_stride].x); };
      const __m128i halves = packed ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + r))
                                    : _mm_setr_epi16(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
      // The row's sum (+0 plus the quotient), then its store into the zeroed output (+0 again), rounded.
      const __m128i sum = _mm256_cvtps_ph(_mm256_add_ps(zero, _mm256_add_ps(zero, quotients8(halves, d))),
                                          _MM_FROUND_TO_NEAREST_INT);
      const __m128i result = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_cvtph_ps(sum), s), _MM_FROUND_TO_NEAREST_INT);
      if (packed) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + r), result);
      } else {
        alignas(16) uint16_t bits[8];
        _mm_store_si128(reinterpret_cast<__m128i*>(bits), result);
        for (int i = 0; i < 8; ++i) out[(r + i) * out_stride].x = bits[i];
      }
    }
    return r;
  }
};
#endif
#if defined(__AVX2__)
// bfloat16's long rows keep the compiler's loop, which beats add() by 1.13x at 1024 x 8192.
template <> struct SimdQuotients<c10::BFloat16> : Simd16<c10::BFloat16, false> {};
#endif
}  // namespace

int div_sum_scale_16bit(int dtype, const Rows& a) {
  switch (dtype) {
    case 2: return dispatch_layout<c10::Half>(a);
    case 3: return dispatch_layout<c10::BFloat16>(a);
    default: return -1;
  }
}
}  // namespace kb14
