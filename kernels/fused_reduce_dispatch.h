// The tail's dispatch as data: from a call (dtype, shape, layout, divisor, GPU, release group, launch kind) to the
// fastest kernel that reproduces the reference's plan. Plain C++, tested on the CPU; the figures: kernel_notes.md.
#pragma once

#include "fused_reduce_order.h"
#include <cmath>
#include <cstdint>

namespace kb14 {
enum class TailDtype : int { kFloat = 0, kDouble = 1, kHalf = 2, kBFloat16 = 3 };
namespace tail {
// The kernel a call takes: general (any plan, fused_reduce_general.cuh) or lean (fused_reduce_lean.cuh): a row
// per 512-thread block (BlockRows*) or per warp (WarpRows*), or a warp row over 128 threads (SplitLanes*).
enum class Leaf : int {
  kGeneral,
  kBlockRows,          // lean_row_loads(V) vectors in flight per thread
  kBlockRowsOneChunk,  // rows of exactly one round of loads: loop-free
  kBlockRowsWarm,      // the same, warming L2 behind another warmed launch (fp32, programmatic)
  kBlockRowsFive,      // fp32 rows of five vectors per thread, all in flight
  kBlockRowsDeep,      // long 16-bit rows, eight vectors in flight
  kWarpRows,           // two vectors in flight per lane
  kWarpRowsDeep,       // fp32, few rows: sixteen in flight per lane
  kWarpRowsWide,       // fp32, many rows: eight in flight per lane
  kSplitLanes,         // `loads` words in flight per thread
  kSplitLanesStaged,   // fp32: the row bulk-copied to shared memory, then added
};

struct Config {
  Plan plan;
  Leaf leaf = Leaf::kGeneral;
  int loads = 0;              // vectors (words for split lanes) each thread keeps in flight
  bool shifted = false;       // rows may start mid-vector (cols % V != 0)
  bool packed = false;        // 16-bit quotients two per packed multiply (packed_quotient_exact)
  bool programmatic = false;  // launched as a programmatic dependent of the stream's previous kernel
};

// One call, as the op's glue checked it (strides in elements).
struct Call {
  TailDtype dtype;
  int64_t rows, cols, row_stride, col_stride;
  uintptr_t y;  // the first element's address (its alignment decides)
  double divisor;
  DeviceShape device;
  int torch_version;  // major * 100 + minor: the release group whose order is reproduced
  bool pdl;           // the caller allows a programmatic dependent launch (taken on sm_90 and newer)
};

// The leaves' shapes: threads per block, blocks per SM the launch bounds ask, loads in flight.
constexpr int kLeanBlock = 512;  // the reference's 32 x 16 block
constexpr int kLeanWarps = kLeanBlock / kWarp;
constexpr int kLeanBlocksPerSm = 4;
constexpr int lean_row_loads(int V) { return V == 8 ? 2 : 4; }  // 32 registers: full occupancy
constexpr int kLeanWarpRowLoads = 2;
constexpr int kFiveVectorLoads = 5, kFiveVectorBlocksPerSm = 3;
constexpr int kDeepBlockRowLoads = 8, kDeepBlockRowBlocksPerSm = 2, kDeepBlockRowMinLastRound = 6;
constexpr int kDeepWarpRowLoads = 16, kDeepWarpRowBlock = 128, kDeepWarpRowMaxRows = 4096;
constexpr int kWideWarpRowLoads = 8, kWideWarpRowBlock = 256;
constexpr int kSplitLaneThreads = 128;
constexpr int split_lane_min_blocks(int loads) { return loads <= 32 ? 8 : loads <= 48 ? 5 : 4; }
constexpr int kStagedMaxRows = 1536;
constexpr int64_t kStagedRowBytes = 48 * 1024;

// Whether the packed 16-bit multiply is the reference's: 1 / divisor = 2^k normal in the type, y * 2^k exact in float.
inline bool packed_quotient_exact(float inv, bool half) {
  const int lowest = half ? -14 : -16, highest = half ? 15 : 127;
  int exponent = 0;
  const float mantissa = std::frexp(std::fabs(inv), &exponent);  // inv = mantissa * 2^exponent
  return mantissa == 0.5f && exponent - 1 >= lowest && exponent - 1 <= highest;
}

// fp32 warp rows with more vectors a lane than the deep kernel keeps in flight, that fit in shared memory.
inline bool staged_rows(int64_t rows, int64_t cols, int V) {
  return rows <= kStagedMaxRows && cols > kDeepWarpRowLoads * kWarp * V && (cols / V) * 16 <= kStagedRowBytes;
}

// Split-lane loads for fp32 warp rows (0: none): kernel_notes.md, "How many loads in flight for split lanes".
inline int split_lane_loads(int64_t rows, int64_t cols, int V) {
  if (!staged_rows(rows, cols, V) || rows < 128) return 0;
  const int64_t share = ceil_div(cols, kSplitLaneThreads);
  if (share <= 32) return cols % V != 0 && share > 24 ? 32 : 0;  // shifted rows copy slowly when staged
  if (rows <= 256) return share <= 48 ? 48 : 64;
  if (rows <= 576) return share > 48 ? 32 : rows <= 384 ? 48 : 0;
  if (share > 40) return 64;
  return rows > 768 ? 48 : 0;
}

inline Config dispatch(const Call& c) {
  const ReleaseOrder order = release_order(c.torch_version);
  const bool fp32 = c.dtype == TailDtype::kFloat;
  const bool bits16 = c.dtype == TailDtype::kHalf || c.dtype == TailDtype::kBFloat16;
  const int bytes = fp32 ? 4 : bits16 ? 2 : 8;
  const int V = input_vec(order, bytes);
  Config k;
  k.plan = plan_reference_sum(c.rows, c.cols, V, c.device, order);
  k.programmatic = c.pdl && c.device.compute_major >= 9;
  k.loads = V == 8 ? 2 : 4;  // the general kernels' vectors in flight per logical thread
  const Plan& p = k.plan;
  const int64_t col_stride = c.cols == 1 ? 1 : c.col_stride;
  const bool lean = bytes < 8 && p.vectorized && p.bx == kWarp && p.ctas == 1 && (!p.split_y || p.by == kLeanWarps) &&
                    col_stride == 1 && (c.row_stride - c.cols) % V == 0 && c.y % (bytes * V) == 0 &&
                    c.rows * c.row_stride <= INT32_MAX;
  if (!lean) return k;
  k.packed = bits16 && packed_quotient_exact(reciprocal<float>(order, c.divisor), c.dtype == TailDtype::kHalf);
  k.shifted = c.cols % V != 0;
  const int64_t rows = c.rows, cols = c.cols, sms = c.device.multiprocessors;
  const auto take = [&](Leaf leaf, int loads) { k.leaf = leaf; k.loads = loads; return k; };
  if (p.split_y) {  // a row per block
    const int64_t per_thread = ceil_div(cols / V, kLeanBlock);
    if (cols == lean_row_loads(V) * V * kLeanBlock) {
      // Warm only plans of more rows than one wave of blocks: kernel_notes.md, "L2 warming".
      if (fp32 && k.programmatic && rows > kLeanBlocksPerSm * sms) return take(Leaf::kBlockRowsWarm, lean_row_loads(V));
      return take(Leaf::kBlockRowsOneChunk, lean_row_loads(V));
    }
    if (fp32 && per_thread == kFiveVectorLoads) return take(Leaf::kBlockRowsFive, kFiveVectorLoads);
    const int64_t last_round = per_thread % kDeepBlockRowLoads;  // a short last round loses
    if (bits16 && per_thread >= kDeepBlockRowLoads &&
        (rows <= sms || last_round == 0 || last_round >= kDeepBlockRowMinLastRound))
      return take(Leaf::kBlockRowsDeep, kDeepBlockRowLoads);
    return take(Leaf::kBlockRows, lean_row_loads(V));
  }
  const bool four_vectors_a_lane = cols >= 4 * kWarp * V;  // below, deeper kernels hold no more in flight
  if (fp32) {
    if (const int loads = split_lane_loads(rows, cols, V)) return take(Leaf::kSplitLanes, loads);
    if (staged_rows(rows, cols, V)) return take(Leaf::kSplitLanesStaged, 1);
    if (rows > kDeepWarpRowMaxRows && four_vectors_a_lane) return take(Leaf::kWarpRowsWide, kWideWarpRowLoads);
    if (four_vectors_a_lane) return take(Leaf::kWarpRowsDeep, kDeepWarpRowLoads);
  } else if (bytes * V == 16 && rows <= kDeepWarpRowMaxRows && four_vectors_a_lane) {  // 16-bit: four words a vector
    return take(Leaf::kSplitLanes, ceil_div(cols, 2 * kSplitLaneThreads) > 8 ? 16 : 8);
  }
  return take(Leaf::kWarpRows, kLeanWarpRowLoads);
}
}  // namespace tail
}  // namespace kb14
