// group_norm and instance_norm (NCHW), with their gradient ops. Statistics are per (sample,
// group) and per (sample, channel) row, the variance is the biased one; group_norm returns
// Mean/Variance [N, groups], instance_norm SavedMean and SavedVariance [N * C], the latter as
// 1 / sqrt(var + epsilon) like Paddle. Scale and Bias are per channel and optional.
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

// Scale/Bias, when present, must be [C].
Status CheckChannelParams(const ShapeContext& c, int64_t channels) {
  for (const char* slot : {"Scale", "Bias"}) {
    if (!c.HasInput(slot)) continue;
    const TensorInfo& t = c.Input(slot);
    if (t.dims.size() != 1 || !DimsMatch(t.dims[0], channels)) {
      return c.Error(std::string(slot) + " must be [" + std::to_string(channels) +
                     "] (X's channels), got " + ir::ShapeText(t.dims));
    }
    if (t.dtype != c.Input("X").dtype) {
      return c.Error(std::string(slot) + " dtype " + std::string(ir::DataTypeName(t.dtype)) +
                     " differs from X's " + std::string(ir::DataTypeName(c.Input("X").dtype)));
    }
  }
  return OkStatus();
}

Status CheckNormX(const ShapeContext& c, const TensorInfo& x, size_t max_rank) {
  if (x.dims.size() < 2 || x.dims.size() > max_rank) {
    return c.Error("X must have 2 to " + std::to_string(max_rank) + " dims [N, C, ...], got " +
                   ir::ShapeText(x.dims));
  }
  if (x.dtype != ir::DataType::kFloat32 && x.dtype != ir::DataType::kFloat64) {
    return c.Error("X must be float32 or float64, got " +
                   std::string(ir::DataTypeName(x.dtype)));
  }
  return OkStatus();
}

// Shape of the parameter gradients: like the parameter, which must then be present.
Status InferNormGrad(ShapeContext& c) {
  if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
  for (const char* slot : {"Scale", "Bias"}) {
    std::string out = std::string(slot) + "@GRAD";
    if (!c.HasOutput(out)) continue;
    if (!c.HasInput(slot)) return c.Error(out + " needs input " + slot);
    c.Output(out) = c.Input(slot);
  }
  return OkStatus();
}

// ---- group_norm ------------------------------------------------------------------------------

std::vector<AttrSpec> GroupNormAttrs() {
  return {{"epsilon", 1e-5f}, {"groups", int32_t{1}}, {"data_layout", std::string("NCHW")}};
}

Status InferGroupNorm(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_RETURN_IF_ERROR(CheckNormX(c, x, 5));
  const std::string layout = c.StringAttr("data_layout");
  if (layout != "NCHW" && layout != "AnyLayout") {
    return c.Error("data_layout '" + layout + "' is not supported (NCHW only)");
  }
  const int64_t groups = c.IntAttr("groups");
  if (groups < 1) return c.Error("groups must be >= 1, got " + std::to_string(groups));
  if (x.dims[1] >= 0 && x.dims[1] % groups != 0) {
    return c.Error("X " + ir::ShapeText(x.dims) + " has " + std::to_string(x.dims[1]) +
                   " channels, not divisible by groups " + std::to_string(groups));
  }
  FLEET_RETURN_IF_ERROR(CheckChannelParams(c, x.dims[1]));
  c.Output("Y") = x;
  for (const char* slot : {"Mean", "Variance"}) {
    if (c.HasOutput(slot)) c.Output(slot) = TensorInfo{x.dtype, {x.dims[0], groups}};
  }
  return OkStatus();
}

void RegisterGroupNorm(OpRegistry& registry) {
  OpSchema s;
  s.type = "group_norm";
  s.summary = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, statistics per sample and "
              "channel group";
  s.inputs = {{"X"}, {"Scale", true}, {"Bias", true}};
  s.outputs = {{"Y"}, {"Mean"}, {"Variance"}};
  s.attrs = GroupNormAttrs();
  s.infer_shape = InferGroupNorm;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "group_norm_grad",
                                      {"X", "Scale", "Bias", "Mean", "Variance"}, {"Y"},
                                      {"X", "Scale", "Bias"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "group_norm_grad";
  g.inputs = {{"X"}, {"Scale", true}, {"Bias", true}, {"Mean"}, {"Variance"}, {"Y@GRAD"}};
  g.outputs = {{"X@GRAD", true}, {"Scale@GRAD", true}, {"Bias@GRAD", true}};
  g.attrs = GroupNormAttrs();
  g.infer_shape = InferNormGrad;
  RegisterBuiltin(registry, std::move(g));
}

// ---- instance_norm ---------------------------------------------------------------------------

std::vector<AttrSpec> InstanceNormAttrs() { return {{"epsilon", 1e-5f}}; }

Status InferInstanceNorm(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_RETURN_IF_ERROR(CheckNormX(c, x, 5));
  FLEET_RETURN_IF_ERROR(CheckChannelParams(c, x.dims[1]));
  c.Output("Y") = x;
  for (const char* slot : {"SavedMean", "SavedVariance"}) {
    if (c.HasOutput(slot)) c.Output(slot) = TensorInfo{x.dtype, {ProductOrUnknown(x.dims, 0, 2)}};
  }
  return OkStatus();
}

void RegisterInstanceNorm(OpRegistry& registry) {
  OpSchema s;
  s.type = "instance_norm";
  s.summary = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, statistics per sample and "
              "channel";
  s.inputs = {{"X"}, {"Scale", true}, {"Bias", true}};
  s.outputs = {{"Y"}, {"SavedMean"}, {"SavedVariance"}};
  s.attrs = InstanceNormAttrs();
  s.infer_shape = InferInstanceNorm;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "instance_norm_grad",
                                      {"X", "Scale", "Bias", "SavedMean", "SavedVariance"}, {"Y"},
                                      {"X", "Scale", "Bias"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "instance_norm_grad";
  g.inputs = {{"X"}, {"Scale", true}, {"Bias", true}, {"SavedMean"}, {"SavedVariance"},
              {"Y@GRAD"}};
  g.outputs = {{"X@GRAD", true}, {"Scale@GRAD", true}, {"Bias@GRAD", true}};
  g.attrs = InstanceNormAttrs();
  g.infer_shape = InferNormGrad;
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterNnExtOps(OpRegistry& registry) {
  RegisterGroupNorm(registry);
  RegisterInstanceNorm(registry);
}

}  // namespace fleet::ops
