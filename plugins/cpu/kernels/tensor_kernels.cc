// Layout kernels: reshape2, flatten_contiguous_range, flatten2, assign, transpose2, concat, split,
// split_byref, slice and their gradients. They only move elements, so one kernel per element
// size serves every dtype. Each prepare turns the op into a list of copy steps through the
// builders shared with the CUDA plugin (plugins/common/layout_plan.h); launch runs them.
#include <memory>
#include <string>

#include "kernels/tensor_kernel_util.h"

namespace fleet_cpu {
namespace {

namespace plan = fleet::kernel;
using fleet::kernel::CopyStep;
using fleet::kernel::LayoutBuilder;
using fleet::kernel::LayoutPlan;

template <LayoutBuilder kBuild>
FleetStatus* PrepareLayout(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return tensor::PrepareLayoutPlan(kc, kBuild, state);
}

void ReleaseLayout(void*, void* state) { delete static_cast<LayoutPlan*>(state); }

template <typename E>
FleetStatus* LaunchLayout(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* st = static_cast<const LayoutPlan*>(state);
    if (st == nullptr) return InvalidArgument(std::string(kc->op_type) + ": not prepared");
    for (const auto& [slot, i] : st->zero_outputs) {
      const FleetTensor* t = Output(kc, slot, i);
      if (t != nullptr && t->data != nullptr) {
        std::memset(t->data, 0, static_cast<size_t>(Numel(t)) * sizeof(E));
      }
    }
    for (const CopyStep& step : st->steps) {
      const FleetTensor* src = Input(kc, step.src_slot, step.src_index);
      const FleetTensor* dst = Output(kc, step.dst_slot, step.dst_index);
      if (src == nullptr || dst == nullptr) continue;
      if (src->data == nullptr || dst->data == nullptr) continue;  // zero elements
      if (step.plain && src->data == dst->data) continue;          // in place
      tensor::RunCopy(step.plan, static_cast<const E*>(src->data), static_cast<E*>(dst->data));
    }
    return nullptr;
  });
}

// Registers a layout kernel for every dtype, by element size.
void AddLayout(KernelList& list, const char* op, PrepareFn prepare) {
  Add(list, op, FLEET_DTYPE_BOOL, LaunchLayout<uint8_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_INT8, LaunchLayout<uint8_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_UINT8, LaunchLayout<uint8_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_INT16, LaunchLayout<uint16_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_FLOAT16, LaunchLayout<uint16_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_BFLOAT16, LaunchLayout<uint16_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_INT32, LaunchLayout<uint32_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_FLOAT32, LaunchLayout<uint32_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_INT64, LaunchLayout<uint64_t>, prepare, ReleaseLayout);
  Add(list, op, FLEET_DTYPE_FLOAT64, LaunchLayout<uint64_t>, prepare, ReleaseLayout);
}

}  // namespace

namespace tensor {

FleetStatus* PrepareLayoutPlan(const FleetKernelContext* kc, LayoutBuilder build, void** state) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto st = std::make_unique<LayoutPlan>();
    if (FleetStatus* err = plan::ToFleetStatus(build(kc, st.get()), Error)) return err;
    *state = st.release();
    return nullptr;
  });
}

void AddLayoutKernel(KernelList& list, const char* op, PrepareFn prepare) {
  AddLayout(list, op, prepare);
}

}  // namespace tensor

void AddTensorKernels(KernelList& list) {
  AddLayout(list, "reshape2", PrepareLayout<plan::BuildXToOut>);
  AddLayout(list, "reshape2_grad", PrepareLayout<plan::BuildGradToXGrad>);
  AddLayout(list, "flatten_contiguous_range", PrepareLayout<plan::BuildXToOut>);
  AddLayout(list, "flatten_contiguous_range_grad", PrepareLayout<plan::BuildGradToXGrad>);
  AddLayout(list, "flatten2", PrepareLayout<plan::BuildXToOut>);
  AddLayout(list, "flatten2_grad", PrepareLayout<plan::BuildGradToXGrad>);
  AddLayout(list, "assign", PrepareLayout<plan::BuildXToOut>);
  AddLayout(list, "transpose2", PrepareLayout<plan::BuildTranspose>);
  AddLayout(list, "transpose2_grad", PrepareLayout<plan::BuildTransposeGrad>);
  AddLayout(list, "concat", PrepareLayout<plan::BuildConcat>);
  AddLayout(list, "concat_grad", PrepareLayout<plan::BuildConcatGrad>);
  AddLayout(list, "split", PrepareLayout<plan::BuildSplit>);
  AddLayout(list, "split_byref", PrepareLayout<plan::BuildSplitByref>);
  AddLayout(list, "slice", PrepareLayout<plan::BuildSlice>);
  AddLayout(list, "slice_grad", PrepareLayout<plan::BuildSliceGrad>);
  tensor::AddTensorCreateKernels(list);
  tensor::AddTensorShapeExtKernels(list);
  tensor::AddTensorIndexKernels(list);
}

}  // namespace fleet_cpu
