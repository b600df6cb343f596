// batch_norm and layer_norm with their gradient ops.
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
  RegisterLayerNorm(registry);
}

}  // namespace fleet::ops
