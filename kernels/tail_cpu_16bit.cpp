// kb14::div_sum_scale's CPU kernels for float16 and bfloat16 (tail_cpu.h), a unit of their own so
// that they compile beside tail_cpu.cpp's (the first CPU call waits for the longer of the two).

#include "tail_cpu.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace kb14 {
namespace {
template <> struct AccType<c10::Half> { using type = float; };
template <> struct AccType<c10::BFloat16> { using type = float; };
}  // namespace

int div_sum_scale_16bit(int dtype, const Rows& a) {
  switch (dtype) {
    case 2: dispatch_layout<c10::Half>(a); return 0;
    case 3: dispatch_layout<c10::BFloat16>(a); return 0;
    default: return -1;
  }
}
}  // namespace kb14
