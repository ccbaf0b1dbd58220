// What the standalone microbenchmarks of this folder share: error checks, the read flush
// before each timed call, cases timed in turn in a balanced order and the per-round gap
// summary, the library's own launch and its kernel arguments for KernelBench's tail, and
// Inductor's compiled tail loaded from its Triton cache's cubin. No torch.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "tail_kernels.cuh"

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t err_ = (x);                                                          \
    if (err_ != cudaSuccess) {                                                       \
      std::printf("CUDA error %s at line %d\n", cudaGetErrorString(err_), __LINE__); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

namespace microbench {

// Keeps the GPU busy while the host queues what follows, so the timed calls are GPU work.
__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void read_flush_kernel(const uint4* p, size_t n, int* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = int(acc);
}

// A 256 MB read: evicts L2 without leaving dirty lines to write back during the next call.
struct ReadFlush {
  static constexpr size_t kWords = (size_t(256) << 20) / 16;
  uint4* buf = nullptr;
  int* sink = nullptr;
  int sms = 0;
  ReadFlush() {
    CK(cudaMalloc(&buf, kWords * 16));
    CK(cudaMemset(buf, 1, kWords * 16));
    CK(cudaMalloc(&sink, 4));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  }
  void operator()(cudaStream_t stream) const { read_flush_kernel<<<sms * 8, 512, 0, stream>>>(buf, kWords, sink); }
};

// Round r's case in place j of k: rotated, reversed on odd rounds, so that each case takes
// each place, and follows each other, about equally often (rounds below 0: warm-up).
inline int case_in_place(int r, int j, int k) {
  const int pos = r >= 0 && r % 2 ? k - 1 - j : j;
  return ((r < 0 ? 0 : r / 2) + pos) % k;
}

// Times k cases in turn: each round calls every case once, in case_in_place's order (after
// `warmup` rounds not kept), each behind a spin of spin_cycles (so the host has queued it
// before the GPU gets there) and, given `flush`, a read flush; call(c) enqueues case c's
// calls_per_case calls on `stream`. Microseconds per call, [case][round].
template <typename Call>
std::vector<std::vector<float>> time_in_turn(int k, int rounds, int warmup, cudaStream_t stream,
                                             long long spin_cycles, const ReadFlush* flush, int calls_per_case,
                                             Call&& call) {
  std::vector<std::vector<float>> times(k);
  std::vector<cudaEvent_t> ev(2 * k);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int r = -warmup; r < rounds; ++r) {
    for (int j = 0; j < k; ++j) {
      const int c = case_in_place(r, j, k);
      spin<<<1, 1, 0, stream>>>(spin_cycles);
      if (flush) (*flush)(stream);
      CK(cudaEventRecord(ev[2 * c], stream));
      call(c);
      CK(cudaEventRecord(ev[2 * c + 1], stream));
    }
    CK(cudaStreamSynchronize(stream));
    if (r < 0) continue;
    for (int c = 0; c < k; ++c) {
      float ms;
      CK(cudaEventElapsedTime(&ms, ev[2 * c], ev[2 * c + 1]));
      times[c].push_back(ms * 1000.0f / calls_per_case);
    }
  }
  CK(cudaGetLastError());
  for (auto& e : ev) CK(cudaEventDestroy(e));
  return times;
}

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One line per case: its median time, and the median, q25 and q75 of its per-round gap to
// case 0.
inline void print_gaps(const std::vector<std::string>& names, const std::vector<std::vector<float>>& times) {
  const size_t rounds = times[0].size();
  for (size_t c = 0; c < names.size(); ++c) {
    std::vector<float> gap(rounds);
    for (size_t r = 0; r < rounds; ++r) gap[r] = times[c][r] - times[0][r];
    std::sort(gap.begin(), gap.end());
    std::printf("  %-20s median %7.3f  gap %+6.3f  [q25 %+6.3f, q75 %+6.3f]\n", names[c].c_str(), median(times[c]),
                gap[rounds / 2], gap[rounds / 4], gap[3 * rounds / 4]);
  }
}

// The library's lean-kernel arguments for a tail of T with KernelBench's constants (divide
// by 2, scale by 1.5), rows row_stride elements apart, one output per row.
template <typename T = float>
kb14::tail::LeanArgs<T> tail_args(const void* y, int64_t row_stride, int rows, int cols, void* out) {
  kb14::tail::LeanArgs<T> a{};
  a.y = static_cast<const T*>(y);
  a.row_stride = row_stride;
  a.out = static_cast<T*>(out);
  a.out_stride = 1;
  a.rows = rows;
  a.cols = cols;
  a.inv = 0.5f;
  a.scale = 1.5f;
  return a;
}

// The library's own choice for the tail of KernelBench's constants on rows `row_stride`
// elements apart, launched as kb14::div_sum_scale launches it (launch_planned), with `opt`.
template <typename T>
void launch_library_choice(const void* y, int64_t row_stride, int rows, int cols, void* out, cudaStream_t stream,
                           const kb14::tail::LeanOptions& opt = kb14::tail::LeanOptions{}) {
  using namespace kb14::tail;
  kb14::DeviceShape prop;
  CK(kb14::query_device_shape(0, &prop));  // cached after the first call
  static typename Arith<T>::acc_t* partials = [] {  // the split plans' accumulators (64 MB: ample here)
    typename Arith<T>::acc_t* p = nullptr;
    CK(cudaMalloc(&p, size_t(64) << 20));
    return p;
  }();
  const Plan p = plan_reference_sum(rows, cols, kInputVec<T>, prop);
  const Args<T> a = planned_args<T>(p, static_cast<const T*>(y), row_stride, 1, static_cast<T*>(out), 1, 2.0, 1.5,
                                    partials);
  CK(launch_planned(p, a, prop, stream, false, opt));
}

// Inductor's tail as Triton compiled it, from KB14_TRITON_CUBIN (and KB14_TRITON_SMEM, its
// dynamic shared memory; KB14_TRITON_THREADS, its block; KB14_TRITON_XBLOCK, its rows per
// program; KB14_TRITON_NAME, its name where not triton_red_fused_div_mul_sum_0; all written
// by inductor_cubin.py), launched by the runtime from the library (its parameters: output,
// input, xnumel, r0_numel and two scratch pointers).
struct InductorTail {
  cudaKernel_t kernel = nullptr;
  unsigned smem = 0, threads = 512, rows_per_block = 1;
  bool load_from_env() {
    const char* cubin = std::getenv("KB14_TRITON_CUBIN");
    if (!cubin) return false;
    cudaLibrary_t library;
    CK(cudaLibraryLoadFromFile(&library, cubin, nullptr, nullptr, 0, nullptr, nullptr, 0));
    const char* name = std::getenv("KB14_TRITON_NAME");  // a persistent reduction: triton_per_...
    CK(cudaLibraryGetKernel(&kernel, library, name ? name : "triton_red_fused_div_mul_sum_0"));
    if (const char* s = std::getenv("KB14_TRITON_SMEM")) smem = unsigned(std::atoi(s));
    if (const char* t = std::getenv("KB14_TRITON_THREADS")) threads = unsigned(std::atoi(t));
    if (const char* x = std::getenv("KB14_TRITON_XBLOCK")) rows_per_block = unsigned(std::atoi(x));
    return true;
  }
  void launch(const void* y, int rows, int cols, void* out, cudaStream_t stream) const {
    void *o = out, *i = const_cast<void*>(y), *none = nullptr;
    unsigned xnumel = rows, rnumel = cols;
    void* params[] = {&o, &i, &xnumel, &rnumel, &none, &none};
    const dim3 grid((rows + rows_per_block - 1) / rows_per_block);
    CK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, dim3(threads), params, smem, stream));
  }
};

}  // namespace microbench
