// The dense group of the CUDA plugin: matmul (cuBLAS), conv2d (cuDNN, with direct kernels for
// what cuDNN cannot express), pool2d and batch/layer norm (own kernels), the same ops, dtypes
// and semantics as the CPU plugin's. This file holds what the family files share.
#include <string>

#include "kernels/dense_groups.h"

namespace fleet_cuda {
namespace dense {

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
      fleet::kernel::ResolveWindow2d(kc, in, k, with_dilation, /*count_in_messages=*/true, w),
      Error);
}

}  // namespace dense

void AddDenseKernels(KernelList& list) {
  AddDenseMatmulKernels(list);
  AddDenseConvKernels(list);
  AddDensePoolKernels(list);
  AddDenseNormKernels(list);
  AddDenseSyncNormKernels(list);
  AddDenseDeconvKernels(list);
}

}  // namespace fleet_cuda
