// The nn kernel group: losses, conv2d, pool2d, norms, dropout, embedding lookup, accuracy and
// top-k. Each family lives in its own nn_*.cc; this file holds what they share.
#include "kernels/nn_kernels.h"

#include <algorithm>

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
  std::vector<int64_t> strides = IntsAttr(kc, "strides");
  std::vector<int64_t> pads = IntsAttr(kc, "paddings");
  std::string_view algo = StringAttr(kc, "padding_algorithm");
  if (strides.size() != 2) return InvalidArgument(OpName(kc) + ": strides needs 2 values");
  if (pads.size() == 2) pads = {pads[0], pads[0], pads[1], pads[1]};
  if (pads.size() != 4) return InvalidArgument(OpName(kc) + ": paddings needs 2 or 4 values");
  std::vector<int64_t> dil = {1, 1};
  if (with_dilation) {
    dil = IntsAttr(kc, "dilations");
    if (dil.size() != 2) return InvalidArgument(OpName(kc) + ": dilations needs 2 values");
  }
  for (int i = 0; i < 2; ++i) {
    if (strides[i] <= 0 || dil[i] <= 0 || k[i] <= 0 || pads[2 * i] < 0 || pads[2 * i + 1] < 0) {
      return InvalidArgument(OpName(kc) + ": strides, dilations and kernel sizes must be "
                                          "positive and paddings non-negative");
    }
    w->kernel[i] = k[i];
    w->stride[i] = strides[i];
    w->dilation[i] = dil[i];
    w->pad_begin[i] = pads[2 * i];
    w->pad_end[i] = pads[2 * i + 1];
    if (algo == "SAME") {
      w->dilation[i] = 1;
      int64_t out = (in[i] + w->stride[i] - 1) / w->stride[i];
      int64_t sum = std::max<int64_t>((out - 1) * w->stride[i] + k[i] - in[i], 0);
      w->pad_begin[i] = sum / 2;
      w->pad_end[i] = sum - sum / 2;
    } else if (algo == "VALID") {
      w->pad_begin[i] = w->pad_end[i] = 0;
    }
  }
  return nullptr;
}

void AddNnKernels(KernelList& list) {
  AddNnLossKernels(list);
  AddNnConvKernels(list);
  AddNnPoolKernels(list);
  AddNnNormKernels(list);
  AddNnMiscKernels(list);
}

}  // namespace fleet_cpu
