// Device helpers shared by this folder's CUDA sources; no torch headers, so nvcc alone compiles them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include "device_shape.h"
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace kb14 {
// This pass's GPU architecture (900: sm_90; 0: the host pass): newer instructions go under `if constexpr`.
#ifdef __CUDA_ARCH__
constexpr int kArch = __CUDA_ARCH__;
#else
constexpr int kArch = 0;
#endif

// Elements to float, exactly, and float to 16-bit, rounded to nearest even.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T round_to(float v);
template <> __device__ __forceinline__ __half round_to<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 round_to<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// The device properties the launch plans read, queried once per device (then atomic loads a call);
// static, so each module has its own cache (an inline function's statics are shared by every module).
// No lock (<mutex> cost each unit 0.46 s): racing threads store the same values, the count of
// multiprocessors last, so that a nonzero count says the others are there.
static inline cudaError_t query_device_shape(int device, DeviceShape* shape) {
  constexpr int kMaxDevices = 64;
  struct Cached { std::atomic<int> multiprocessors, max_threads_per_multiprocessor, compute_major; };
  static Cached cache[kMaxDevices];
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  Cached& c = cache[device];
  if (const int sms = c.multiprocessors.load(std::memory_order_acquire); sms != 0) {
    *shape = {sms, c.max_threads_per_multiprocessor.load(std::memory_order_relaxed),
              c.compute_major.load(std::memory_order_relaxed)};
    return cudaSuccess;
  }
  DeviceShape d{};
  cudaError_t err = cudaDeviceGetAttribute(&d.multiprocessors, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&d.max_threads_per_multiprocessor, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&d.compute_major, cudaDevAttrComputeCapabilityMajor, device);
  if (err != cudaSuccess) return err;
  c.max_threads_per_multiprocessor.store(d.max_threads_per_multiprocessor, std::memory_order_relaxed);
  c.compute_major.store(d.compute_major, std::memory_order_relaxed);
  c.multiprocessors.store(d.multiprocessors, std::memory_order_release);
  *shape = d;
  return cudaSuccess;
}

// Loads as raw 32-bit words (16-bit element structs went to local memory); element i of one, exactly, as float.
template <int kBytes> struct RawVec;
template <> struct RawVec<16> { using type = uint4; };
template <> struct RawVec<8> { using type = uint2; };
__device__ __forceinline__ uint32_t word(const uint4& w, int i) { return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w; }
__device__ __forceinline__ uint32_t word(const uint2& w, int i) { return i == 0 ? w.x : w.y; }
__device__ __forceinline__ uint32_t word(uint32_t w, int) { return w; }
__device__ __forceinline__ uint32_t word(float w, int) { return __float_as_uint(w); }
template <typename scalar_t, typename W>
__device__ __forceinline__ float element_as_float(const W& w, int i) {
  if constexpr (sizeof(scalar_t) == 4) return __uint_as_float(word(w, i));
  const uint32_t bits = (word(w, i / 2) >> (16 * (i % 2))) & 0xffffu;
  if constexpr (std::is_same_v<scalar_t, __nv_bfloat16>) return __uint_as_float(bits << 16);
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// An L2 policy that evicts the lines it is given first: for data read once.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint32_t shared_address(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// One 16-byte vector to shared memory by cp.async (sm_80+, kernels/jit.py), landed at wait_for_block_copies().
__device__ __forceinline__ void copy_to_shared_async(uint4* dst, const uint4* src, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(shared_address(dst)), "l"(src),
               "l"(policy) : "memory");
}
__device__ __forceinline__ void wait_for_block_copies() {  // a barrier: every thread calls it
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
}

// Thread 0 sets up n one-arrival mbarriers for the copy engine (sm_90+), then a barrier: every thread calls it.
__device__ __forceinline__ void init_block_mbarriers(uint64_t* bars, int n) {
  if constexpr (kArch >= 900) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < n; ++i)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bars + i)));
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
  }
}
// Arrives on `bar`, announcing `bytes` still to land.
__device__ __forceinline__ void mbarrier_arrive_expecting(uint64_t* bar, uint32_t bytes) {
  if constexpr (kArch >= 900)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
                 : "memory");
}
// Copies `bytes` (a multiple of 16, at least 16) between 16-byte aligned addresses; they count towards `bar`.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                    uint64_t policy) {
  if constexpr (kArch >= 900)
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
        ::"r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar)), "l"(policy) : "memory");
}
// Waits until `bar` completes its phase of this parity (0: its first; a reused ring stage alternates).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  if constexpr (kArch >= 900) {
    const uint32_t address = shared_address(bar);
    for (uint32_t done = 0; !done;)
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                   : "=r"(done) : "r"(address), "r"(parity) : "memory");
  }
}
// Asks L2 for `bytes` (a multiple of 16) from p (16-byte aligned) through the copy engine, without waiting.
__device__ __forceinline__ void bulk_prefetch_to_l2(const void* p, uint32_t bytes) {
  if constexpr (kArch >= 900)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// The number of SMs (%nsmid: an upper bound on %smid + 1).
__device__ __forceinline__ unsigned sm_count() {
  unsigned n;
  asm("mov.u32 %0, %%nsmid;" : "=r"(n));
  return n;
}
// The GPU's nanosecond timer (%globaltimer) in units of 1024 ns, in 32 bits: the warming gates' clock.
__device__ __forceinline__ uint32_t warm_clock() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return static_cast<uint32_t>(t >> 10);
}

// Programmatic dependent launch: wait for the grids this one depends on (their writes visible); let the next start.
__device__ __forceinline__ void wait_for_prior_grids() {
  if constexpr (kArch >= 900) asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void allow_dependent_launch() {
  if constexpr (kArch >= 900) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// A launch, `programmatic`: as a programmatic dependent of the stream's previous kernel (sm_90+).
template <typename... KernelArgs, typename... Args>
cudaError_t launch_programmatic(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t dynamic_smem,
                                cudaStream_t stream, bool programmatic, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  const cudaLaunchConfig_t config{grid, block, dynamic_smem, stream, programmatic ? &attribute : nullptr,
                                  programmatic ? 1u : 0u};
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}
}  // namespace kb14
