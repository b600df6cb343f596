// Host-side planning of the layout ops that repeat, stack, reverse or rotate elements
// (expand_v2, expand_as_v2, tile, stack, unstack, flip, roll, strided_slice and their copy-only
// gradients),
// and of the sums that the repeat ops' gradients need. Shared by the CPU and CUDA plugins so both
// accept, reject and lay out exactly the same programs.
//
// Contract: the builders follow layout_plan.h (read shapes and attributes only, at prepare;
// append copy steps; messages are what the op reports), with two additions to what a step may
// hold:
//   - a source stride of 0 repeats an element (expand, tile);
//   - a stride may be negative (flip, strided_slice): the offset then points at the element
//     the box starts from, and every element the box touches still lies inside the tensor.
// A RepeatSumPlan is trivially copyable and plain C++17, so CUDA sources include this header.
#pragma once

#include <cstdint>

#include "layout_plan.h"

namespace fleet::kernel {

// The highest rank expand_v2, expand_as_v2 and tile accept (Paddle's bound).
inline constexpr int kMaxRepeatRank = 6;

PlanStatus BuildExpand(const FleetKernelContext* kc, LayoutPlan* plan);  // expand_v2, _as_v2
PlanStatus BuildTile(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildStack(const FleetKernelContext* kc, LayoutPlan* plan);        // X[i] -> Y
PlanStatus BuildStackGrad(const FleetKernelContext* kc, LayoutPlan* plan);    // Y@GRAD -> X@GRAD[i]
PlanStatus BuildUnstack(const FleetKernelContext* kc, LayoutPlan* plan);      // X -> Y[i]
PlanStatus BuildUnstackGrad(const FleetKernelContext* kc, LayoutPlan* plan);  // Y@GRAD[i] -> X@GRAD
PlanStatus BuildFlip(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildRoll(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildRollGrad(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildStridedSlice(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildStridedSliceGrad(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildPadGrad(const FleetKernelContext* kc, LayoutPlan* plan);  // pad_grad

// X@GRAD of a repeat op: element k of X@GRAD (row-major) is the sum of Out@GRAD over every
// repeat of X's element k. The entries run outer to inner over Out@GRAD's dims, each split in
// two (the repeat count, then X's size there); `reduced` marks the repeat entries. Strides are
// Out@GRAD's, in elements. The kept entries, in order, are X's dims, so X@GRAD is dense.
struct RepeatSumPlan {
  int rank = 0;
  int64_t dims[2 * kMaxRepeatRank] = {};
  int64_t strides[2 * kMaxRepeatRank] = {};
  bool reduced[2 * kMaxRepeatRank] = {};
  int64_t kept_count = 1;  // elements of X@GRAD
  int64_t red_count = 1;   // repeats summed per element
};

// expand_v2_grad, expand_as_v2_grad (`tile` false) and tile_grad (`tile` true): reads X (its
// shape) and Out@GRAD. Entries of size 1 are left out.
PlanStatus BuildRepeatSum(const FleetKernelContext* kc, bool tile, RepeatSumPlan* plan);

}  // namespace fleet::kernel
