// What launch plans read off the GPU, and their rounding-up division: plain C++ (tested on the CPU).
#pragma once
#include <cstdint>

namespace kb14 {
struct DeviceShape { int multiprocessors, max_threads_per_multiprocessor, compute_major; };

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace kb14
