// The launcher of kb14::div_sum_scale on CUDA: `torch.sum(y / d, 1, keepdim=True) * s`
// in one pass over y, with the reference's bits. The kernels and their launch plans
// are in tail_kernels.cuh; this file picks the plan for a call and launches it. No
// torch headers: the op around it (checks, output, device guard, stream, autograd)
// is fused_reduce_cuda.cpp, compiled by the host compiler alongside.

#include "tail_kernels.cuh"
#include "tail_launch.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kb14 {
namespace {

using tail::Arith;
using tail::Args;
using tail::kInputVec;
using tail::Plan;

// Benchmarking and testing switches, read once: KB14_TAIL_PATH=general sends every
// shape to the general kernels (the lean path must return the same bits);
// KB14_LOGICAL_PER_THREAD=2|4|8|16 picks another mapping of the general split-row kernel.
struct TailSwitches {
  bool general_only = false;
  int logical_per_thread = 1;
};

const TailSwitches& tail_switches() {
  static const TailSwitches switches = [] {
    TailSwitches s;
    if (const char* path = std::getenv("KB14_TAIL_PATH")) s.general_only = std::strcmp(path, "general") == 0;
    if (const char* lpp = std::getenv("KB14_LOGICAL_PER_THREAD")) {
      const int n = std::atoi(lpp);
      if (n == 1 || n == 2 || n == 4 || n == 8 || n == 16) s.logical_per_thread = n;
    }
    return s;
  }();
  return switches;
}

// The device properties the launch plans read, queried once per device (after that,
// one atomic load per call).
cudaError_t query_device_shape(int device, DeviceShape* shape) {
  constexpr int kMaxDevices = 64;
  static DeviceShape cache[kMaxDevices];
  static std::atomic<bool> known[kMaxDevices];
  static std::mutex mutex;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (!known[device].load(std::memory_order_acquire)) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!known[device].load(std::memory_order_relaxed)) {
      DeviceShape d{};
      cudaError_t err = cudaDeviceGetAttribute(&d.multiprocessors, cudaDevAttrMultiProcessorCount, device);
      if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&d.max_threads_per_multiprocessor, cudaDevAttrMaxThreadsPerMultiProcessor,
                                     device);
      if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&d.compute_major, cudaDevAttrComputeCapabilityMajor, device);
      if (err != cudaSuccess) return err;
      cache[device] = d;
      known[device].store(true, std::memory_order_release);
    }
  }
  *shape = cache[device];
  return cudaSuccess;
}

template <typename cuda_t>
cudaError_t launch_typed(const TailCall& c, TailScratch scratch, void* context, cudaStream_t stream) {
  using op_t = typename Arith<cuda_t>::op_t;
  using acc_t = typename Arith<cuda_t>::acc_t;
  DeviceShape prop;
  if (const cudaError_t err = query_device_shape(c.device, &prop); err != cudaSuccess) return err;
  constexpr int V = kInputVec<cuda_t>;
  const Plan p = tail::plan_reference_sum(c.rows, c.cols, V, prop);

  Args<cuda_t> a;
  a.y = static_cast<const cuda_t*>(c.y);
  a.row_stride = c.row_stride;
  a.col_stride = c.cols == 1 ? 1 : c.col_stride;
  a.out = static_cast<cuda_t*>(c.out);
  a.out_stride = c.out_stride;
  a.rows = p.rows;
  a.cols = p.cols;
  a.step = p.step;
  a.ctas = p.ctas;
  a.by_logical = p.split_y ? p.by : 1;
  // The reference computes 1 / divisor on the host in the op math type.
  a.inv = op_t(1) / static_cast<op_t>(c.divisor);
  a.scale = static_cast<op_t>(c.scale);
  a.partials = nullptr;
  if (p.ctas > 1) {
    a.partials = static_cast<acc_t*>(scratch(context, p.rows * p.ctas, static_cast<int>(sizeof(acc_t))));
    if (a.partials == nullptr) return cudaErrorMemoryAllocation;
  }
  const TailSwitches& switches = tail_switches();
  if constexpr (sizeof(cuda_t) < 8) {  // the lean path is for float, half and bfloat16
    if (!switches.general_only && tail::lean_path_applies<cuda_t, V>(p, a)) {
      return tail::launch_lean<cuda_t, V>(p, a, prop, tail::LeanOptions{}, stream);
    }
  }
  return tail::launch_general<cuda_t, V>(p, a, switches.logical_per_thread, stream);
}

}  // namespace

cudaError_t launch_div_sum_scale(const TailCall& call, TailScratch scratch, void* context, cudaStream_t stream) {
  switch (call.dtype) {
    case TailDtype::kFloat: return launch_typed<float>(call, scratch, context, stream);
    case TailDtype::kDouble: return launch_typed<double>(call, scratch, context, stream);
    case TailDtype::kHalf: return launch_typed<__half>(call, scratch, context, stream);
    case TailDtype::kBFloat16: return launch_typed<__nv_bfloat16>(call, scratch, context, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace kb14
