// kb14::div_sum_scale's CPU entry point and its float and double kernels (tail_cpu.h).

#include "tail_cpu.h"

// The entry point ctypes calls (kernels/tail_cpu.py), for a checked y with at least one
// row whose quotient the reference lays out row-major. dtype: 0 float32, 1 float64,
// 2 float16, 3 bfloat16 (contiguous rows only). Returns 0, -1 for another dtype, or -2 for
// strided 16-bit rows.
extern "C" int kb14_div_sum_scale_cpu(int dtype, const void* y, void* out, int64_t rows, int64_t cols,
                                      int64_t row_stride, int64_t col_stride, int64_t out_stride, double divisor,
                                      double scale, int threads) {
  const kb14::Rows a{y, out, rows, cols, row_stride, col_stride, out_stride, divisor, scale, threads};
  switch (dtype) {
    case 0: return kb14::dispatch_layout<float>(a);
    case 1: return kb14::dispatch_layout<double>(a);
    default: return kb14::div_sum_scale_16bit(dtype, a);
  }
}
