// Shared pieces of the nn kernel group (nn_*.cc): each file's registration function, Paddle's
// 2-D window geometry as the kernels see it, and small helpers for kernel state.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/kernel_util.h"
#include "window_plan.h"

namespace fleet_cpu {

// One per file, all called from AddNnKernels (nn_kernels.cc).
void AddNnLossKernels(KernelList& list);   // nn_loss_kernels.cc
void AddNnLossExtKernels(KernelList& list);  // nn_loss_ext_kernels.cc
void AddNnConvKernels(KernelList& list);   // nn_conv_kernels.cc
void AddNnPoolKernels(KernelList& list);   // nn_pool_kernels.cc
void AddNnNormKernels(KernelList& list);   // nn_norm_kernels.cc
void AddNnSyncNormKernels(KernelList& list);  // nn_sync_norm_kernels.cc: sync_batch_norm*
void AddNnMiscKernels(KernelList& list);   // nn_misc_kernels.cc
void AddSequenceKernels(KernelList& list); // sequence_kernels.cc: sequence_pool
void AddSequenceOffsetKernels(KernelList& list);  // sequence_offset_kernels.cc: concat, slice,
                                                  // unpad
void AddNnExtKernels(KernelList& list);    // nn_ext_kernels.cc: group_norm, instance_norm
void AddNnInterpKernels(KernelList& list); // nn_interp_kernels.cc: bilinear/nearest_interp_v2
void AddNnDeconvKernels(KernelList& list); // nn_deconv_kernels.cc: conv2d_transpose
void AddNnSampledKernels(KernelList& list);  // nn_sampled_kernels.cc: hierarchical_sigmoid, nce
void AddNnRnnKernels(KernelList& list);    // nn_rnn_kernels.cc: rnn (LSTM, GRU, simple RNN)
void AddNnMetricKernels(KernelList& list); // nn_metric_kernels.cc: auc

// A resolved 2-D window; the type and the rules are shared with the CUDA plugin
// (plugins/common/window_plan.h).
using fleet::kernel::Window2d;

// Reads strides/paddings/padding_algorithm (and dilations when `with_dilation`) for input
// spatial dims `in` and kernel sizes `k`. NULL on success.
FleetStatus* ResolveWindow(const FleetKernelContext* kc, const int64_t in[2], const int64_t k[2],
                           bool with_dilation, Window2d* w);

// Checks that `t` has `ndim` dims; an INVALID_ARGUMENT naming the op and slot otherwise.
FleetStatus* ExpectRank(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                        int32_t ndim);
// INVALID_ARGUMENT "<op>: missing <slot>" when `t` is NULL.
FleetStatus* Require(const FleetKernelContext* kc, const FleetTensor* t, const char* slot);

// An integer label/index element of an int32 or int64 tensor.
inline int64_t IndexAt(const FleetTensor* t, int64_t i) {
  return t->dtype == FLEET_DTYPE_INT32 ? static_cast<const int32_t*>(t->data)[i]
                                       : static_cast<const int64_t*>(t->data)[i];
}

template <typename S>
void DeleteState(void*, void* state) {
  delete static_cast<S*>(state);
}

std::string OpName(const FleetKernelContext* kc);

}  // namespace fleet_cpu
