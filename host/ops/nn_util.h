// Shared pieces of the nn op group (nn_*.cc): the registration entry points of each file and the
// Paddle window geometry (paddings, SAME/VALID, output sizes) that conv2d and pool2d agree on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace fleet::ops {

// One per file, all called from RegisterNnOps (nn_ops.cc).
void RegisterNnLossOps(OpRegistry& registry);   // nn_loss_ops.cc
void RegisterNnLossExtOps(OpRegistry& registry);  // nn_loss_ext_ops.cc: sigmoid/bce/log/huber/
                                                  // smooth_l1/kldiv/margin_rank losses,
                                                  // label_smooth
void RegisterNnConvOps(OpRegistry& registry);   // nn_conv_ops.cc: conv2d, pool2d
void RegisterNnNormOps(OpRegistry& registry);   // nn_norm_ops.cc: batch_norm, layer_norm
void RegisterNnMiscOps(OpRegistry& registry);   // nn_misc_ops.cc: dropout, lookup_table_v2,
                                                // accuracy, top_k_v2
void RegisterNnExtOps(OpRegistry& registry);    // nn_ext_ops.cc: group_norm, instance_norm
void RegisterNnInterpOps(OpRegistry& registry); // nn_interp_ops.cc: bilinear/nearest_interp_v2
void RegisterNnDeconvOps(OpRegistry& registry); // nn_deconv_ops.cc: conv2d_transpose
void RegisterNnSampledOps(OpRegistry& registry);  // nn_sampled_ops.cc: hierarchical_sigmoid, nce
void RegisterNnRnnOps(OpRegistry& registry);      // nn_rnn_ops.cc: rnn (LSTM, GRU, simple RNN)
void RegisterSequenceOps(OpRegistry& registry);   // sequence_ops.cc: sequence_pool
void RegisterSequenceOffsetOps(OpRegistry& registry);  // sequence_offset_ops.cc: concat, slice,
                                                       // unpad
void RegisterNnMetricOps(OpRegistry& registry);   // nn_metric_ops.cc: auc


// Geometry of a 2-D sliding window over spatial dims (H, W), Paddle's rules applied:
// paddings of 2 values [ph, pw] or 4 values [top, bottom, left, right]; "SAME" pads so that
// out = ceil(in / stride) and resets dilation to 1; "VALID" zeroes the paddings.
struct Window2d {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0};  // top, left
  int64_t pad_end[2] = {0, 0};    // bottom, right
};

// Fills `w` for input spatial dims `in` (either may be -1: SAME paddings then stay 0, which is
// harmless as the output stays unknown too). Errors name the attribute.
Status ResolveWindow2d(const ShapeContext& c, const int64_t in[2],
                       const std::vector<int64_t>& ksize, Window2d* w);

// Output size of one spatial dim; -1 when `in` is -1. Ceil mode rounds up like Paddle's pool2d.
int64_t WindowOutSize(int64_t in, const Window2d& w, int dim, bool ceil_mode);


// A "<type>" grad op of `fwd`: `reads` are slots copied from the forward op (inputs or outputs,
// absent ones skipped), `out_grads` forward output slots whose "<slot>@GRAD" it reads,
// `in_grads` forward input slots whose "<slot>@GRAD" it writes. Attributes are copied.
ir::Op GradOp(const ir::Op& fwd, std::string type, const std::vector<std::string>& reads,
              const std::vector<std::string>& out_grads, const std::vector<std::string>& in_grads);

// Two dims agree unless both are known and differ.
bool DimsMatch(int64_t a, int64_t b);

// Sequence ops (sequence_ops.cc). Input `slot` must hold sequences; `what` says what the op does
// with them.
Status RequireSequences(const ShapeContext& c, std::string_view slot, std::string_view what);
// A sequence kernel sees every sequence input's offsets, so an input that must be dense says so
// rather than being silently read as rows.
Status RequireDense(const ShapeContext& c, std::string_view slot, std::string_view why);


}  // namespace fleet::ops
