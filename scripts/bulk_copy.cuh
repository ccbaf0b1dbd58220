// Bulk-copy helpers of the experiments (tail_variants.cu, experiments/matvec_variants.cu) that the library's
// kernels do not use; the rest are kernels/device_math.cuh's.
#pragma once

#include "device_math.cuh"

namespace kb14 {

// Orders this thread's earlier shared-memory accesses before later bulk copies into it.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// bulk_prefetch_to_l2 under an L2 `policy` (0: none).
__device__ __forceinline__ void bulk_prefetch_to_l2(const void* p, uint32_t bytes, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (policy) {
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p), "r"(bytes), "l"(policy)
                 : "memory");
  } else {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
  }
#endif
}

}  // namespace kb14
