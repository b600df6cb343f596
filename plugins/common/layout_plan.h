// Host-side planning of the layout kernels (reshape2, flatten_contiguous_range, assign,
// transpose2, concat, split, split_byref, slice and their gradients), shared by the CPU and
// CUDA plugins so both accept, reject and lay out exactly the same programs.
//
// Contract:
//   - A builder reads only the kernel context (shapes and attributes, never tensor data) and
//     appends copy steps to a LayoutPlan; it is called once, at a kernel's prepare.
//   - Every step copies a box of elements between two tensors, strides on both sides, in
//     elements, simplified (Simplify) so common cases are one dense run.
//   - Offsets are element offsets from the tensors' data, so a plugin may run a step as a loop
//     (CPU), a memcpy or a device kernel (CUDA). The builders here make non-negative strides;
//     shape_plan.h's also make source strides of 0 (repeats) and negative ones (flip).
//   - Before the steps, every tensor in `zero_outputs` is cleared (slice_grad).
//   - A step whose source or destination tensor is absent or holds no data is skipped at
//     launch; a `plain` step is also skipped when the destination aliases the source.
//   - Errors come back as a PlanStatus whose message is what the op reports.
// CopyPlan is trivially copyable with fixed-size arrays so a device kernel can take it by
// value. Plain C++17: CUDA sources include this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "fleet/fleet_kernels.h"
#include "plan_status.h"

namespace fleet::kernel {

// The deepest box a step can describe (and so the highest rank a layout op accepts).
inline constexpr int kMaxCopyRank = 16;

// Copies the elements of a box of `dims` from src + src_offset (strides src_strides) to
// dst + dst_offset (strides dst_strides), all in elements.
struct CopyPlan {
  int rank = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t src_strides[kMaxCopyRank] = {};
  int64_t dst_strides[kMaxCopyRank] = {};
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
};

// One copy from tensor `src_index` of input slot `src_slot` to tensor `dst_index` of output
// slot `dst_slot`. Slot names are string literals (static storage).
struct CopyStep {
  const char* src_slot = nullptr;
  size_t src_index = 0;
  const char* dst_slot = nullptr;
  size_t dst_index = 0;
  CopyPlan plan;
  bool plain = false;  // a whole-tensor copy: skipped when the output aliases the input
};

struct LayoutPlan {
  std::vector<CopyStep> steps;
  std::vector<std::pair<const char*, size_t>> zero_outputs;  // cleared before the steps
};

// Row-major strides of `dims`.
std::vector<int64_t> DenseStrides(const std::vector<int64_t>& dims);

// Drops dims of size 1 and merges neighbours that are contiguous on both sides, so common
// cases become one dense run or a 2-d loop.
void Simplify(CopyPlan* plan);

// Elements in the box.
int64_t PlanNumel(const CopyPlan& plan);

// The builders, one per op (gradients included). Each appends to `plan` and returns the op's
// error, if any, leaving `plan` unspecified then.
using LayoutBuilder = PlanStatus (*)(const FleetKernelContext* kc, LayoutPlan* plan);

PlanStatus BuildXToOut(const FleetKernelContext* kc, LayoutPlan* plan);       // reshape2, ...
PlanStatus BuildGradToXGrad(const FleetKernelContext* kc, LayoutPlan* plan);  // their grads
PlanStatus BuildTranspose(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildTransposeGrad(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildConcat(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildConcatGrad(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildSplit(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildSplitByref(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildSlice(const FleetKernelContext* kc, LayoutPlan* plan);
PlanStatus BuildSliceGrad(const FleetKernelContext* kc, LayoutPlan* plan);

}  // namespace fleet::kernel
