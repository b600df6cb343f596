// The nn kernel group: losses, conv2d, pool2d, norms, dropout, embedding lookup, accuracy and
// top-k. Each family lives in its own nn_*.cc; this file holds what they share.
#include "kernels/nn_kernels.h"

namespace fleet_cpu {

std::string OpName(const FleetKernelContext* kc) {
  return kc != nullptr && kc->op_type != nullptr ? std::string(kc->op_type) : "kernel";
}

FleetStatus* Require(const FleetKernelContext* kc, const FleetTensor* t, const char* slot) {
  if (t != nullptr) return nullptr;
  return InvalidArgument(OpName(kc) + ": missing " + slot);
}

FleetStatus* ExpectRank(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                        int32_t ndim) {
  if (FleetStatus* st = Require(kc, t, slot)) return st;
  if (t->ndim == ndim) return nullptr;
  return InvalidArgument(OpName(kc) + ": " + slot + " must have " + std::to_string(ndim) +
                         " dims, got " + std::to_string(t->ndim));
}

FleetStatus* ResolveWindow(const FleetKernelContext* kc, const int64_t in[2], const int64_t k[2],
                           bool with_dilation, Window2d* w) {
  return fleet::kernel::ToFleetStatus(
      fleet::kernel::ResolveWindow2d(kc, in, k, with_dilation, /*count_in_messages=*/false, w),
      Error);
}

void AddNnKernels(KernelList& list) {
  AddNnLossKernels(list);
  AddNnLossExtKernels(list);
  AddNnConvKernels(list);
  AddNnPoolKernels(list);
  AddNnNormKernels(list);
  AddNnSyncNormKernels(list);
  AddNnMiscKernels(list);
  AddSequenceKernels(list);
  AddSequenceOffsetKernels(list);
  AddNnExtKernels(list);
  AddNnInterpKernels(list);
  AddNnDeconvKernels(list);
  AddNnSampledKernels(list);
  AddNnRnnKernels(list);
  AddNnMetricKernels(list);
}

}  // namespace fleet_cpu
