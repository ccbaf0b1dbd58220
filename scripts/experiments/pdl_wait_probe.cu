// How long a programmatic dependent's blocks wait at griddepcontrol.wait, per block: thread 0
// of each block stores the wait's length in %globaltimer ns and in clock64 cycles. Built and driven
// by pdl_wait_probe.py (no torch headers), launched as the library launches (device_math.cuh).
#include <cstdint>
#include <cuda_runtime.h>

#include "device_math.cuh"

namespace {

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(512) wait_probe_kernel(unsigned long long* out) {
  if (threadIdx.x != 0) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    return;
  }
  const uint64_t t0 = global_timer_ns();
  const long long c0 = clock64();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const long long c1 = clock64();
  const uint64_t t1 = global_timer_ns();
  out[2 * blockIdx.x] = t1 - t0;
  out[2 * blockIdx.x + 1] = static_cast<unsigned long long>(c1 - c0);
}

// The test of the warming gate without a record in isolation (its patch, warm_gate_kinds.patch,
// kind 2, is in git history before e0d796b; results/kernel_notes.md, the warming gate): thread 0 of each of the first SMs' blocks watches for the
// second warp's griddepcontrol.wait to return, for at most `limit` cycles. out per block:
// whether it gave up, and the cycles it watched. kHow: 0 the patch's form (a volatile flag,
// the two warps met at a named barrier); 1 the block met at __syncthreads; 2 the flag read and
// written by shared-memory atomics.
template <int kHow>
__global__ void __launch_bounds__(512) gate_probe_kernel(unsigned long long* out, long long limit) {
  __shared__ int primary_done;
  volatile int& done = primary_done;
  unsigned sms;
  asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
  const bool gated = blockIdx.x < sms;
  long long watched = -1;
  int gave_up = 0;
  if (gated) {
    if (threadIdx.x == 0) done = 0;
    if constexpr (kHow == 1) {
      __syncthreads();
    } else {
      if (threadIdx.x < 64) asm volatile("bar.sync 1, 64;" ::: "memory");
    }
    if (threadIdx.x == 32) {
      asm volatile("griddepcontrol.wait;" ::: "memory");
      if constexpr (kHow == 2) {
        atomicExch(&primary_done, 1);
      } else {
        done = 1;
      }
    } else if (threadIdx.x == 0) {
      const long long asked = clock64();
      while (kHow == 2 ? atomicAdd(&primary_done, 0) == 0 : !done) {
        if (clock64() - asked > limit) {
          gave_up = 1;
          break;
        }
      }
      watched = clock64() - asked;
    }
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = static_cast<unsigned long long>(gave_up);
    out[2 * blockIdx.x + 1] = static_cast<unsigned long long>(watched);
  }
}

}  // namespace

template <typename... Args>
int launch_dependent(void (*kernel)(Args...), int blocks, void* stream, Args... args) {
  return static_cast<int>(kb14::launch_programmatic(kernel, dim3(blocks), dim3(512), 0,
                                                    static_cast<cudaStream_t>(stream), true, args...));
}

extern "C" int kb14x_wait_probe(unsigned long long* out, int blocks, void* stream) {
  return launch_dependent(wait_probe_kernel, blocks, stream, out);
}

extern "C" int kb14x_gate_probe(unsigned long long* out, int blocks, int how, long long limit, void* stream) {
  constexpr void (*kForms[])(unsigned long long*, long long) = {gate_probe_kernel<0>, gate_probe_kernel<1>,
                                                                gate_probe_kernel<2>};
  if (how < 0 || how > 2) return static_cast<int>(cudaErrorInvalidValue);
  return launch_dependent(kForms[how], blocks, stream, out, limit);
}
