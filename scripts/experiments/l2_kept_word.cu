// Standalone probe (no torch headers): is a 64-bit word stored and read under an L2
// evict_last policy still in L2 after a 256 MB flush? Cycles of one read of the word,
// plain (volatile) or kept (relaxed.gpu with an evict_last cache hint: the accesses
// tail_variants run64 tried for the tail's warming record), timed by scripts/experiments/l2_kept_word.py.
#include <cstdint>
#include <cuda_runtime.h>

__device__ uint64_t cell_kept, cell_plain;

__device__ __forceinline__ uint64_t evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__global__ void write_cells(uint64_t v) {
  asm volatile("st.relaxed.gpu.global.L2::cache_hint.b64 [%0], %1, %2;" ::"l"(&cell_kept), "l"(v),
               "l"(evict_last_policy()) : "memory");
  *static_cast<volatile uint64_t*>(&cell_plain) = v;
}

__global__ void read_latency(int kept, long long* out) {
  const long long t0 = clock64();
  uint64_t v;
  if (kept) {
    asm volatile("ld.relaxed.gpu.global.L2::cache_hint.b64 %0, [%1], %2;" : "=l"(v) : "l"(&cell_kept),
                 "l"(evict_last_policy()) : "memory");
  } else {
    v = *static_cast<volatile uint64_t*>(&cell_plain);
  }
  const uint64_t w = v * 3 + 1;  // a use of the value before the second clock read
  __threadfence_block();
  const long long t1 = clock64();
  out[0] = t1 - t0;
  out[1] = static_cast<long long>(w);
}

extern "C" int probe_write(unsigned long long v) {
  write_cells<<<1, 1>>>(v);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int probe_read(int kept, long long* out) {
  read_latency<<<1, 1>>>(kept, out);
  return static_cast<int>(cudaGetLastError());
}
