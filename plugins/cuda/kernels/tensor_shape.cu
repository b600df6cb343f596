// Layout kernels: reshape2, flatten_contiguous_range, flatten2, assign, transpose2, concat, split,
// split_byref, slice and their gradients, with the semantics of the CPU plugin's
// (plugins/cpu/kernels/tensor_kernels.cc). They only move elements, so one kernel per element
// size serves every dtype.
//
// Prepare turns the op into copy steps through the builders shared with the CPU plugin
// (plugins/common/layout_plan.h): each a box of elements with strides on both sides,
// simplified (unit dims dropped, neighbours contiguous on both sides merged) so that most steps
// end up dense on both sides. Launch enqueues the steps on the kernel's stream in order: a dense
// step as one device-to-device cudaMemcpyAsync, any other through one strided-copy kernel.
// XShape outputs hold no elements (dims [0, ...]) and are never written, as on the CPU.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/tensor_groups.h"
#include "layout_plan.h"

namespace fleet_cuda {
namespace {

// The plans (validation, messages and copy steps) come from plugins/common/layout_plan.h,
// shared with the CPU plugin, so both accept and reject the same programs with the same words.
namespace plan = fleet::kernel;
using fleet::kernel::CopyPlan;
using fleet::kernel::CopyStep;
using fleet::kernel::LayoutBuilder;
using fleet::kernel::OpName;

constexpr int64_t kIndex32Limit = 0x7fffffff;

// A shared copy step plus what launch needs to know about it, worked out once at prepare.
struct Step : CopyStep {
  int64_t numel = 0;        // elements copied
  int64_t src_extent = 0;   // elements the source tensor must hold (last one read + 1)
  int64_t dst_extent = 0;   // elements the destination tensor must hold
  bool dense = false;       // dense on both sides: one cudaMemcpyAsync
  bool index32 = false;     // every index of the kernel fits 32 bits, which divide faster
};

struct LayoutState {
  std::vector<Step> steps;
  std::vector<std::pair<const char*, size_t>> zero_outputs;  // cleared before the steps
};


// Fills in what launch needs to know about a finished plan. A negative stride (flip) walks
// back from the offset, which the builder placed at that dim's last element, so only the
// positive strides reach past the offset.
void Describe(Step* step) {
  const CopyPlan& p = step->plan;
  int64_t n = 1, src_span = 0, dst_span = 0;
  bool negative = false;
  for (int i = 0; i < p.rank; ++i) n *= p.dims[i];
  step->numel = n;
  if (n > 0) {
    for (int i = 0; i < p.rank; ++i) {
      negative = negative || p.src_strides[i] < 0 || p.dst_strides[i] < 0;
      if (p.src_strides[i] > 0) src_span += (p.dims[i] - 1) * p.src_strides[i];
      if (p.dst_strides[i] > 0) dst_span += (p.dims[i] - 1) * p.dst_strides[i];
    }
    step->src_extent = p.src_offset + src_span + 1;
    step->dst_extent = p.dst_offset + dst_span + 1;
  }
  step->dense = p.rank == 0 || (p.rank == 1 && p.src_strides[0] == 1 && p.dst_strides[0] == 1);
  // The kernel indexes from the offset pointers, so only the spans must fit; unsigned indices
  // cannot step backwards.
  step->index32 = !negative && n <= kIndex32Limit && src_span < kIndex32Limit &&
                  dst_span < kIndex32Limit;
}

FleetStatus* PrepareLayoutImpl(const FleetKernelContext* kc, LayoutBuilder build, void** state) {
  // Plans are plain host data; only allocation can throw, and nothing may cross the ABI.
  try {
    plan::LayoutPlan built;
    if (FleetStatus* err = plan::ToFleetStatus(build(kc, &built), Error)) return err;
    auto st = std::make_unique<LayoutState>();
    st->zero_outputs = std::move(built.zero_outputs);
    st->steps.reserve(built.steps.size());
    for (const CopyStep& copy : built.steps) {
      Step step;
      static_cast<CopyStep&>(step) = copy;
      Describe(&step);
      st->steps.push_back(step);
    }
    *state = st.release();
    return nullptr;
  } catch (const std::exception& e) {
    return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": " + e.what());
  } catch (...) {
    return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": unknown exception");
  }
}

template <LayoutBuilder kBuild>
FleetStatus* PrepareLayout(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return PrepareLayoutImpl(kc, kBuild, state);
}

void ReleaseLayout(void*, void* state) { delete static_cast<LayoutState*>(state); }

// ---- device side ----------------------------------------------------------------------------

// The source and destination index of element k of the box (row-major over p.dims), counted
// from the plan's offsets. I is the index type: uint32_t when every index fits (Step::index32),
// else int64_t.
template <typename I>
__host__ __device__ __forceinline__ void BoxIndex(const CopyPlan& p, I k, I* src, I* dst) {
  I rem = k, s = 0, d = 0;
  for (int j = p.rank - 1; j > 0; --j) {
    const I dim = static_cast<I>(p.dims[j]);
    const I q = rem / dim;
    const I r = rem - q * dim;
    s += r * static_cast<I>(p.src_strides[j]);
    d += r * static_cast<I>(p.dst_strides[j]);
    rem = q;
  }
  if (p.rank > 0) {  // what is left is the index along dim 0, already below dims[0]
    s += rem * static_cast<I>(p.src_strides[0]);
    d += rem * static_cast<I>(p.dst_strides[0]);
  }
  *src = s;
  *dst = d;
}

// src and dst already point at the plan's offsets.
template <typename E, typename I>
__global__ void StridedCopyKernel(CopyPlan p, I n, const E* __restrict__ src,
                                  E* __restrict__ dst) {
  const I stride = static_cast<I>(blockDim.x) * static_cast<I>(gridDim.x);
  for (I k = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) +
             static_cast<I>(threadIdx.x);
       k < n; k += stride) {
    I s = 0, d = 0;
    BoxIndex(p, k, &s, &d);
    dst[d] = src[s];
  }
}

// The tensors of a step, or false when the step has nothing to do: an absent tensor (a
// gradient nobody wants) or no data (zero elements), as on the CPU.
bool StepTensors(const FleetKernelContext* kc, const Step& step, const FleetTensor** src,
                 const FleetTensor** dst) {
  *src = Input(kc, step.src_slot, step.src_index);
  *dst = Output(kc, step.dst_slot, step.dst_index);
  if (*src == nullptr || *dst == nullptr) return false;
  if ((*src)->data == nullptr || (*dst)->data == nullptr) return false;
  return step.numel > 0;
}

FleetStatus* TooSmall(const FleetKernelContext* kc, const char* slot, size_t i, int64_t has,
                      int64_t needs) {
  return InvalidArgument(OpName(kc) + ": " + slot + "[" + std::to_string(i) + "] holds " +
                         std::to_string(has) + " elements but the copy prepared for it needs " +
                         std::to_string(needs) + " (its shape changed after prepare)");
}

template <typename E>
FleetStatus* LaunchLayout(void*, const FleetKernelContext* kc, void* state) {
  const auto* st = static_cast<const LayoutState*>(state);
  if (st == nullptr) return InvalidArgument(OpName(kc) + ": not prepared");
  // A shape that changed since prepare would make the copies run off the end of a device
  // buffer, so every step is checked before anything is enqueued.
  for (const Step& step : st->steps) {
    const FleetTensor* src = nullptr;
    const FleetTensor* dst = nullptr;
    if (!StepTensors(kc, step, &src, &dst)) continue;
    const int64_t src_n = Numel(src), dst_n = Numel(dst);
    if (src_n < step.src_extent) {
      return TooSmall(kc, step.src_slot, step.src_index, src_n, step.src_extent);
    }
    if (dst_n < step.dst_extent) {
      return TooSmall(kc, step.dst_slot, step.dst_index, dst_n, step.dst_extent);
    }
  }
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    for (const auto& [slot, i] : st->zero_outputs) {
      const FleetTensor* t = Output(kc, slot, i);
      if (t == nullptr || t->data == nullptr) continue;
      const size_t bytes = static_cast<size_t>(Numel(t)) * sizeof(E);
      const cudaError_t err = cudaMemsetAsync(t->data, 0, bytes, s->native);
      if (err != cudaSuccess) return CudaStatus(err, OpName(kc) + ": clearing " + slot);
    }
    for (const Step& step : st->steps) {
      const FleetTensor* src_t = nullptr;
      const FleetTensor* dst_t = nullptr;
      if (!StepTensors(kc, step, &src_t, &dst_t)) continue;
      if (step.plain && src_t->data == dst_t->data) continue;  // in place
      const E* src = static_cast<const E*>(src_t->data) + step.plan.src_offset;
      E* dst = static_cast<E*>(dst_t->data) + step.plan.dst_offset;
      if (step.dense) {
        const size_t bytes = static_cast<size_t>(step.numel) * sizeof(E);
        const cudaError_t err =
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->native);
        if (err != cudaSuccess) {
          return CudaStatus(err, OpName(kc) + ": copying " + step.src_slot + " to " +
                                     step.dst_slot);
        }
      } else if (step.index32) {
        StridedCopyKernel<E, uint32_t><<<Blocks(step.numel), kThreads, 0, s->native>>>(
            step.plan, static_cast<uint32_t>(step.numel), src, dst);
      } else {
        StridedCopyKernel<E, int64_t><<<Blocks(step.numel), kThreads, 0, s->native>>>(
            step.plan, step.numel, src, dst);
      }
    }
    return nullptr;
  });
}

// Registers a layout kernel for every dtype, by element size (the CPU plugin's list).
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

FleetStatus* PrepareLayoutPlan(const FleetKernelContext* kc, LayoutBuilder build, void** state) {
  return PrepareLayoutImpl(kc, build, state);
}

void AddLayoutKernel(KernelList& list, const char* op, PrepareFn prepare) {
  AddLayout(list, op, prepare);
}

void AddTensorShapeKernels(KernelList& list) {
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
}

}  // namespace fleet_cuda
