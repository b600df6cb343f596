// batch_norm and layer_norm with their gradient ops, and the four ops of batch_norm over every
// rank's batch (sync_batch_norm*).
//
// batch_norm follows Paddle: MeanOut/VarianceOut are the running statistics (usually the same
// vars as Mean/Variance, updated in place), SavedMean/SavedVariance the batch mean and inverse
// standard deviation the gradient reads. layer_norm's Mean/Variance are per-row mean and
// variance of X flattened at begin_norm_axis.
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

std::vector<AttrSpec> BatchNormAttrs() {
  return {{"momentum", 0.9f},
          {"epsilon", 1e-5f},
          {"is_test", false},
          {"data_layout", std::string("NCHW")},
          {"use_global_stats", false},
          {"trainable_statistics", false},
          {"use_mkldnn", false},
          {"fuse_with_relu", false}};
}

Status CheckChannelVector(const ShapeContext& c, const char* slot, int64_t channels,
                          ir::DataType dtype) {
  if (!c.HasInput(slot)) return c.Error(std::string("missing input ") + slot);
  const TensorInfo& t = c.Input(slot);
  if (t.dims.size() != 1 || !DimsMatch(t.dims[0], channels)) {
    return c.Error(std::string(slot) + " must be [" + std::to_string(channels) + "], got " +
                   ir::ShapeText(t.dims));
  }
  if (t.dtype != dtype) {
    return c.Error(std::string(slot) + " dtype " + std::string(ir::DataTypeName(t.dtype)) +
                   " differs from X's " + std::string(ir::DataTypeName(dtype)));
  }
  return OkStatus();
}

Status InferBatchNorm(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  std::string layout = c.StringAttr("data_layout");
  if (layout != "NCHW" && layout != "AnyLayout") {
    return c.Error("data_layout '" + layout + "' is not supported (NCHW only)");
  }
  if (x.dims.size() < 2 || x.dims.size() > 5) {
    return c.Error("X must be [N, C] or [N, C, ...] with rank 2 to 5, got " +
                   ir::ShapeText(x.dims));
  }
  const int64_t ch = x.dims[1];
  for (const char* slot : {"Scale", "Bias", "Mean", "Variance"}) {
    FLEET_RETURN_IF_ERROR(CheckChannelVector(c, slot, ch, x.dtype));
  }
  c.Output("Y") = x;
  TensorInfo stat{x.dtype, {ch >= 0 ? ch : c.Input("Scale").dims[0]}};
  for (const char* slot : {"MeanOut", "VarianceOut", "SavedMean", "SavedVariance"}) {
    if (c.HasOutput(slot)) c.Output(slot) = stat;
  }
  if (c.HasOutput("ReserveSpace")) c.Output("ReserveSpace") = TensorInfo{x.dtype, {0}};
  return OkStatus();
}

void RegisterBatchNorm(OpRegistry& registry) {
  OpSchema s;
  s.type = "batch_norm";
  s.summary = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias per channel (dim 1)";
  s.inputs = {{"X"}, {"Scale"}, {"Bias"}, {"Mean", false, false, true},
              {"Variance", false, false, true}};
  s.outputs = {{"Y"},         {"MeanOut"},       {"VarianceOut"},
               {"SavedMean"}, {"SavedVariance"}, {"ReserveSpace", true}};
  s.attrs = BatchNormAttrs();
  s.infer_shape = InferBatchNorm;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(
        fwd, "batch_norm_grad",
        {"X", "Scale", "Bias", "Mean", "Variance", "SavedMean", "SavedVariance"}, {"Y"},
        {"X", "Scale", "Bias"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "batch_norm_grad";
  g.inputs = {{"X"},    {"Scale"},     {"Bias", true},          {"Mean", true},
              {"Variance", true}, {"SavedMean"}, {"SavedVariance"}, {"Y@GRAD"}};
  g.outputs = {{"X@GRAD", true}, {"Scale@GRAD", true}, {"Bias@GRAD", true}};
  g.attrs = BatchNormAttrs();
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    if (c.HasOutput("Scale@GRAD")) c.Output("Scale@GRAD") = c.Input("Scale");
    if (c.HasOutput("Bias@GRAD")) c.Output("Bias@GRAD") = c.Input("Scale");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

// sync_batch_norm: batch_norm whose statistics cover the batches of every rank. The
// sync_batch_norm pass (host/passes/sync_batch_norm.cc) puts four ops and two all-reduces in
// place of a training batch_norm and its grad:
//   sync_batch_norm_stats(X) -> Stats: float64 [2C + 1], per channel the sum of X, then per
//     channel the sum of its squares, then the element count of one channel;
//   c_allreduce_sum(Stats);
//   sync_batch_norm(X, Scale, Bias, Mean, Variance, Stats) -> batch_norm's outputs, with
//     mean = sum / count and the biased variance sum_sq / count - mean^2;
//   sync_batch_norm_grad_stats(X, Y@GRAD, SavedMean, SavedVariance) -> GradStats: float64 [2C],
//     per channel sum(dy), then sum(dy * xhat); and this rank's Scale@GRAD and Bias@GRAD (the
//     data-parallel all-reduce sums them over ranks like any other gradient);
//   c_allreduce_sum(GradStats);
//   sync_batch_norm_grad(X, Scale, SavedMean, SavedVariance, Y@GRAD, Stats, GradStats)
//     -> X@GRAD, batch_norm_grad's formula with the sums and count of every rank.
// The sums are float64 whatever X's dtype, so that E[x^2] - E[x]^2 keeps float32's precision.

// X's channel count (dim 1), checking the rank as batch_norm does.
StatusOr<int64_t> SyncChannels(const ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  if (x.dims.size() < 2 || x.dims.size() > 5) {
    return c.Error("X must be [N, C] or [N, C, ...] with rank 2 to 5, got " +
                   ir::ShapeText(x.dims));
  }
  if (x.dtype != ir::DataType::kFloat32 && x.dtype != ir::DataType::kFloat64) {
    return c.Error("X must be float32 or float64, got " + std::string(ir::DataTypeName(x.dtype)));
  }
  return x.dims[1];
}

// A float64 statistics vector of `per_channel` * C (+ `extra`) elements in `slot`.
Status CheckStatsVector(const ShapeContext& c, const char* slot, int64_t channels,
                        int64_t per_channel, int64_t extra) {
  if (!c.HasInput(slot)) return c.Error(std::string("missing input ") + slot);
  const TensorInfo& t = c.Input(slot);
  const int64_t want = channels >= 0 ? per_channel * channels + extra : -1;
  if (t.dims.size() != 1 || !DimsMatch(t.dims[0], want) || t.dtype != ir::DataType::kFloat64) {
    return c.Error(std::string(slot) + " must be float64 [" +
                   (want >= 0 ? std::to_string(want) : std::to_string(per_channel) + "C" +
                                                            (extra ? " + 1" : "")) +
                   "], got " + std::string(ir::DataTypeName(t.dtype)) + " " +
                   ir::ShapeText(t.dims));
  }
  return OkStatus();
}

// Y@GRAD has X's shape and dtype.
Status CheckGradLikeX(const ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const TensorInfo& dy = c.Input("Y@GRAD");
  if (!ir::ShapesCompatible(dy.dims, x.dims) || dy.dtype != x.dtype) {
    return c.Error("Y@GRAD " + std::string(ir::DataTypeName(dy.dtype)) + " " +
                   ir::ShapeText(dy.dims) + " must match X " +
                   std::string(ir::DataTypeName(x.dtype)) + " " + ir::ShapeText(x.dims));
  }
  return OkStatus();
}

TensorInfo StatsInfo(int64_t channels, int64_t per_channel, int64_t extra) {
  return TensorInfo{ir::DataType::kFloat64,
                    {channels >= 0 ? per_channel * channels + extra : -1}};
}

void RegisterSyncBatchNorm(OpRegistry& registry) {
  OpSchema stats;
  stats.type = "sync_batch_norm_stats";
  stats.summary = "Stats = [sum(X), sum(X^2)] per channel (dim 1), then the count per channel";
  stats.inputs = {{"X"}};
  stats.outputs = {{"Stats"}};
  stats.infer_shape = [](ShapeContext& c) -> Status {
    FLEET_ASSIGN_OR_RETURN(int64_t ch, SyncChannels(c));
    c.Output("Stats") = StatsInfo(ch, 2, 1);
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(stats));

  OpSchema s;
  s.type = "sync_batch_norm";
  s.summary = "batch_norm with the statistics of every rank, from all-reduced Stats";
  s.inputs = {{"X"},
              {"Scale"},
              {"Bias"},
              {"Mean", false, false, true},
              {"Variance", false, false, true},
              {"Stats", false, false, true}};
  s.outputs = {{"Y"}, {"MeanOut"}, {"VarianceOut"}, {"SavedMean"}, {"SavedVariance"}};
  s.attrs = BatchNormAttrs();
  s.infer_shape = [](ShapeContext& c) -> Status {
    FLEET_ASSIGN_OR_RETURN(int64_t ch, SyncChannels(c));
    if (c.BoolAttr("is_test") || c.BoolAttr("use_global_stats")) {
      return c.Error("is_test and use_global_stats must be false: with the running statistics "
                     "batch_norm needs no other rank");
    }
    FLEET_RETURN_IF_ERROR(CheckStatsVector(c, "Stats", ch, 2, 1));
    return InferBatchNorm(c);
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema gs;
  gs.type = "sync_batch_norm_grad_stats";
  gs.summary = "GradStats = [sum(dY), sum(dY * xhat)] per channel; this rank's Scale@GRAD, "
               "Bias@GRAD";
  gs.inputs = {{"X"}, {"Y@GRAD"}, {"SavedMean"}, {"SavedVariance"}};
  gs.outputs = {{"GradStats"}, {"Scale@GRAD", true}, {"Bias@GRAD", true}};
  gs.infer_shape = [](ShapeContext& c) -> Status {
    FLEET_ASSIGN_OR_RETURN(int64_t ch, SyncChannels(c));
    const TensorInfo& x = c.Input("X");
    FLEET_RETURN_IF_ERROR(CheckGradLikeX(c));
    for (const char* slot : {"SavedMean", "SavedVariance"}) {
      FLEET_RETURN_IF_ERROR(CheckChannelVector(c, slot, ch, x.dtype));
    }
    c.Output("GradStats") = StatsInfo(ch, 2, 0);
    for (const char* slot : {"Scale@GRAD", "Bias@GRAD"}) {
      if (c.HasOutput(slot)) c.Output(slot) = c.Input("SavedMean");
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(gs));

  OpSchema g;
  g.type = "sync_batch_norm_grad";
  g.summary = "X@GRAD of batch_norm from the all-reduced Stats and GradStats";
  g.inputs = {{"X"},      {"Scale"}, {"SavedMean"}, {"SavedVariance"},
              {"Y@GRAD"}, {"Stats"}, {"GradStats"}};
  g.outputs = {{"X@GRAD"}};
  g.infer_shape = [](ShapeContext& c) -> Status {
    FLEET_ASSIGN_OR_RETURN(int64_t ch, SyncChannels(c));
    const TensorInfo& x = c.Input("X");
    FLEET_RETURN_IF_ERROR(CheckGradLikeX(c));
    for (const char* slot : {"Scale", "SavedMean", "SavedVariance"}) {
      FLEET_RETURN_IF_ERROR(CheckChannelVector(c, slot, ch, x.dtype));
    }
    FLEET_RETURN_IF_ERROR(CheckStatsVector(c, "Stats", ch, 2, 1));
    FLEET_RETURN_IF_ERROR(CheckStatsVector(c, "GradStats", ch, 2, 0));
    c.Output("X@GRAD") = x;
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

std::vector<AttrSpec> LayerNormAttrs() {
  return {{"epsilon", 1e-5f}, {"begin_norm_axis", int32_t{1}}, {"is_test", false}};
}

StatusOr<size_t> NormAxis(const ShapeContext& c, size_t rank) {
  int64_t axis = c.IntAttr("begin_norm_axis");
  if (axis < 1 || axis >= static_cast<int64_t>(rank)) {
    return c.Error("begin_norm_axis " + std::to_string(axis) + " must be in [1, " +
                   std::to_string(rank) + ") for X of rank " + std::to_string(rank));
  }
  return static_cast<size_t>(axis);
}

Status InferLayerNorm(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_ASSIGN_OR_RETURN(size_t axis, NormAxis(c, x.dims.size()));
  const int64_t left = ProductOrUnknown(x.dims, 0, axis);
  const int64_t right = ProductOrUnknown(x.dims, axis, x.dims.size());
  for (const char* slot : {"Scale", "Bias"}) {
    if (!c.HasInput(slot)) continue;
    const TensorInfo& t = c.Input(slot);
    if (t.dims.size() != 1 || !DimsMatch(t.dims[0], right)) {
      return c.Error(std::string(slot) + " must be [" + std::to_string(right) +
                     "] (X's dims from begin_norm_axis on), got " + ir::ShapeText(t.dims));
    }
  }
  c.Output("Y") = x;
  for (const char* slot : {"Mean", "Variance"}) {
    if (c.HasOutput(slot)) c.Output(slot) = TensorInfo{x.dtype, {left}};
  }
  return OkStatus();
}

void RegisterLayerNorm(OpRegistry& registry) {
  OpSchema s;
  s.type = "layer_norm";
  s.summary = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias over dims >= begin_norm_axis";
  s.inputs = {{"X"}, {"Scale", true}, {"Bias", true}};
  s.outputs = {{"Y"}, {"Mean"}, {"Variance"}};
  s.attrs = LayerNormAttrs();
  s.infer_shape = InferLayerNorm;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "layer_norm_grad",
                                      {"X", "Scale", "Bias", "Mean", "Variance"}, {"Y"},
                                      {"X", "Scale", "Bias"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "layer_norm_grad";
  g.inputs = {{"X"}, {"Scale", true}, {"Bias", true}, {"Mean"}, {"Variance"}, {"Y@GRAD"}};
  g.outputs = {{"X@GRAD", true}, {"Scale@GRAD", true}, {"Bias@GRAD", true}};
  g.attrs = LayerNormAttrs();
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    for (const char* slot : {"Scale", "Bias"}) {
      std::string out = std::string(slot) + "@GRAD";
      if (!c.HasOutput(out)) continue;
      if (!c.HasInput(slot)) return c.Error(out + " needs input " + slot);
      c.Output(out) = c.Input(slot);
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterNnNormOps(OpRegistry& registry) {
  RegisterBatchNorm(registry);
  RegisterSyncBatchNorm(registry);
  RegisterLayerNorm(registry);
}

}  // namespace fleet::ops
