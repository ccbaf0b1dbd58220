// From a call's configuration (fused_reduce_dispatch.h) to its kernel, per element type: instantiated by four
// nvcc units that compile side by side (fused_reduce.cu: float; _double.cu, _half.cu, _bf16.cu). No torch headers.
#pragma once

#include "fused_reduce_launch.h"
#include "fused_reduce_lean.cuh"
#include <atomic>
#include <cstdint>

namespace kb14::tail {
// launch(packed, shifted) with the flags as std::bool_constants: packed for 16-bit types, shifted unless kAlignedRows.
template <typename scalar_t, bool kAlignedRows, typename Launch>
cudaError_t with_flags(const Config& c, Launch&& launch) {
  const auto shifted = [&](auto packed) {
    if constexpr (!kAlignedRows) { if (c.shifted) return launch(packed, std::true_type{}); }
    return launch(packed, std::false_type{});
  };
  if constexpr (sizeof(scalar_t) == 2) { if (c.packed) return shifted(std::true_type{}); }
  return shifted(std::false_type{});
}

template <typename scalar_t, int U, bool kWarpRows, bool kExactRows = false, int kBlock = kLeanBlock,
          int kMinBlocks = kLeanBlocksPerSm, bool kWarm = false>
cudaError_t launch_lean_rows(const Config& c, const LeanArgs<scalar_t>& a, cudaStream_t stream) {
  constexpr int V = kInputVec<scalar_t>;
  const auto grid = static_cast<unsigned>(kWarpRows ? ceil_div(a.rows, kBlock / kWarp) : a.rows);
  return with_flags<scalar_t, kExactRows>(c, [&](auto packed, auto shifted) {
    return launch_programmatic(lean_rows_kernel<scalar_t, V, U, kWarpRows, decltype(shifted)::value,
                                                decltype(packed)::value, kExactRows, kBlock, kMinBlocks, kWarm>,
                               dim3(grid), dim3(kBlock), 0, stream, c.programmatic, a);
  });
}

// kStaged: the row's whole vectors in shared memory first (U unused).
template <int U, int kMinBlocks = split_lane_min_blocks(U), bool kStaged = false, typename scalar_t>
cudaError_t launch_split_lanes(const Config& c, const LeanArgs<scalar_t>& a, cudaStream_t stream) {
  constexpr int V = kInputVec<scalar_t>;
  const size_t smem = kStaged ? size_t(a.cols / V) * sizeof(typename RawVec<sizeof(scalar_t) * V>::type) : 0;
  return with_flags<scalar_t, false>(c, [&](auto packed, auto shifted) {
    return launch_programmatic(
        split_lane_rows_kernel<U, kMinBlocks, decltype(shifted)::value, kStaged, scalar_t, decltype(packed)::value>,
        dim3(static_cast<unsigned>(a.rows)), dim3(kSplitLaneThreads), smem, stream, c.programmatic, a);
  });
}

// The leaves only fp32 has (a template, so that only the unit that launches fp32 instantiates them).
template <typename scalar_t>
cudaError_t launch_fp32_leaf(const Config& c, const LeanArgs<scalar_t>& a, cudaStream_t stream) {
  static_assert(std::is_same_v<scalar_t, float>, "fp32 only");
  constexpr int U = lean_row_loads(kInputVec<scalar_t>);
  switch (c.leaf) {
    case Leaf::kBlockRowsWarm: {
      static std::atomic<uint32_t> serial{0};  // a number for each warmed launch (LeanArgs::launch_serial)
      LeanArgs<scalar_t> warmed = a;
      warmed.launch_serial = serial.fetch_add(1, std::memory_order_relaxed) + 1;
      return launch_lean_rows<scalar_t, U, false, true, kLeanBlock, kLeanBlocksPerSm, true>(c, warmed, stream);
    }
    case Leaf::kBlockRowsFive:
      return launch_lean_rows<scalar_t, kFiveVectorLoads, false, false, kLeanBlock, kFiveVectorBlocksPerSm>(
          c, a, stream);
    case Leaf::kWarpRowsDeep:
      return launch_lean_rows<scalar_t, kDeepWarpRowLoads, true, false, kDeepWarpRowBlock>(c, a, stream);
    case Leaf::kWarpRowsWide:
      return launch_lean_rows<scalar_t, kWideWarpRowLoads, true, false, kWideWarpRowBlock>(c, a, stream);
    case Leaf::kSplitLanes:
      if (c.loads == 32) return launch_split_lanes<32>(c, a, stream);
      if (c.loads == 48) return launch_split_lanes<48>(c, a, stream);
      if (c.loads == 64) return launch_split_lanes<64>(c, a, stream);
      return cudaErrorInvalidValue;
    case Leaf::kSplitLanesStaged: return launch_split_lanes<1, 1, true>(c, a, stream);
    default: return cudaErrorInvalidValue;  // no such leaf for this type
  }
}

template <typename scalar_t>
cudaError_t launch_leaf(const Config& c, const Args<scalar_t>& g, cudaStream_t stream) {
  constexpr int V = kInputVec<scalar_t>;
  if constexpr (sizeof(scalar_t) < 8) {
    const LeanArgs<scalar_t> a{g.y, g.row_stride, g.out, g.out_stride, static_cast<int>(g.rows),
                               static_cast<int>(g.cols), g.inv, g.scale, 0};
    constexpr int U = lean_row_loads(V);
    switch (c.leaf) {
      case Leaf::kGeneral: break;
      case Leaf::kBlockRows: return launch_lean_rows<scalar_t, U, false>(c, a, stream);
      case Leaf::kBlockRowsOneChunk: return launch_lean_rows<scalar_t, U, false, true>(c, a, stream);
      case Leaf::kWarpRows: return launch_lean_rows<scalar_t, kLeanWarpRowLoads, true>(c, a, stream);
      default:
        if constexpr (sizeof(scalar_t) == 4) return launch_fp32_leaf(c, a, stream);
        if constexpr (sizeof(scalar_t) == 2) {
          if (c.leaf == Leaf::kBlockRowsDeep)
            return launch_lean_rows<scalar_t, kDeepBlockRowLoads, false, false, kLeanBlock, kDeepBlockRowBlocksPerSm>(
                c, a, stream);
          if constexpr (V * sizeof(scalar_t) == 16) {  // the 2.10+ group's vectors (dispatch's condition)
            if (c.leaf == Leaf::kSplitLanes && c.loads == 8) return launch_split_lanes<8>(c, a, stream);
            if (c.leaf == Leaf::kSplitLanes && c.loads == 16) return launch_split_lanes<16>(c, a, stream);
          }
        }
        return cudaErrorInvalidValue;  // no such leaf for this type
    }
  }
  return launch_general<scalar_t, V>(c.plan, g, stream, c.programmatic);
}

template <typename scalar_t>
cudaError_t launch_typed(const TailCall& call, const Config& c, TailScratch scratch, void* context, cudaStream_t stream) {
  using acc_t = acc_of<scalar_t>;
  acc_t* partials = nullptr;  // a row's blocks' totals, when ctas > 1
  if (c.plan.ctas > 1) {
    partials = static_cast<acc_t*>(scratch(context, c.plan.rows * c.plan.ctas, sizeof(acc_t)));
    if (partials == nullptr) return cudaErrorMemoryAllocation;
  }
  return launch_leaf(c, planned_args(c.plan, static_cast<const scalar_t*>(call.y), call.row_stride, call.col_stride,
                                     static_cast<scalar_t*>(call.out), call.out_stride, call.divisor, call.scale,
                                     partials), stream);
}

// Instantiated in units of their own (fused_reduce_double.cu, _half.cu, _bf16.cu).
extern template cudaError_t launch_typed<double>(const TailCall&, const Config&, TailScratch, void*, cudaStream_t);
extern template cudaError_t launch_typed<__half>(const TailCall&, const Config&, TailScratch, void*, cudaStream_t);
extern template cudaError_t launch_typed<__nv_bfloat16>(const TailCall&, const Config&, TailScratch, void*,
                                                        cudaStream_t);
}  // namespace kb14::tail
