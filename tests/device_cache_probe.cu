// kernels/device_math.cuh's query_device_shape against a stand-in for the CUDA runtime's attribute query
// (tests/test_build_cuda.py builds and runs it; no GPU): threads racing on the first calls all read the
// right shape, a known device is not queried again, a failed query is not cached, a bad index is refused.
#include "device_math.cuh"

#include <cstdio>
#include <thread>
#include <vector>

static std::atomic<int> queries{0};
constexpr int kFailingDevice = 5;

#ifndef __CUDA_ARCH__
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  queries.fetch_add(1);
  if (device == kFailingDevice) return cudaErrorNotReady;
  *value = attr == cudaDevAttrMultiProcessorCount ? 132 + device : attr == cudaDevAttrMaxThreadsPerMultiProcessor ? 2048 : 9;
  return cudaSuccess;
}
// No CUDA runtime is linked: the module registration that nvcc's host code calls does nothing here.
extern "C" void** __cudaRegisterFatBinary(void*) { return nullptr; }
extern "C" void __cudaRegisterFatBinaryEnd(void**) {}
extern "C" void __cudaUnregisterFatBinary(void**) {}
extern "C" char __cudaInitModule(void**) { return 0; }
#endif

static bool right(int device) {
  kb14::DeviceShape s{};
  return kb14::query_device_shape(device, &s) == cudaSuccess && s.multiprocessors == 132 + device &&
         s.max_threads_per_multiprocessor == 2048 && s.compute_major == 9;
}

int main() {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 3000; ++i) wrong += !right(i % 3);
    });
  for (auto& t : threads) t.join();
  const int after_race = queries.load();
  for (int i = 0; i < 3000; ++i) wrong += !right(i % 3);
  const int after_cached = queries.load();
  kb14::DeviceShape s{};
  int failed = 0;
  for (int i = 0; i < 2; ++i) failed += kb14::query_device_shape(kFailingDevice, &s) == cudaErrorNotReady;
  const int refused = (kb14::query_device_shape(-1, &s) == cudaErrorInvalidDevice) +
                      (kb14::query_device_shape(64, &s) == cudaErrorInvalidDevice);
  std::printf("WRONG %d QUERIES %d %d %d FAILED %d REFUSED %d\n", wrong.load(), after_race, after_cached,
              queries.load(), failed, refused);
}
