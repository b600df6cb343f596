// The large-vocabulary losses: hierarchical_sigmoid (default complete binary tree) and nce
// (uniform and log-uniform samplers, or fixed custom_neg_classes), with their gradient ops.
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

bool IsFloat(ir::DataType t) { return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64; }

// `t` must be 2-D [rows, cols] with the given known dims (-1 = any).
Status Expect2d(const ShapeContext& c, const TensorInfo& t, const char* slot, int64_t rows,
                int64_t cols, const char* what) {
  if (t.dims.size() != 2 || !DimsMatch(t.dims[0], rows) || !DimsMatch(t.dims[1], cols)) {
    return c.Error(std::string(slot) + " must be " + what + ", got " + ir::ShapeText(t.dims));
  }
  return OkStatus();
}

// ---- hierarchical_sigmoid ----------------------------------------------------------------------

std::vector<AttrSpec> HsigmoidAttrs() {
  return {{"num_classes", int32_t{2}}, {"is_sparse", false}, {"remote_prefetch", false}};
}

int64_t CodeWidth(int64_t num_classes) {
  int64_t n = 0;
  for (uint64_t v = static_cast<uint64_t>(num_classes - 1); v != 0; v >>= 1) ++n;
  return n;
}

// Checks X, W, Label, Bias against num_classes; returns the batch dim.
StatusOr<int64_t> CheckHsigmoid(const ShapeContext& c) {
  if (c.HasInput("PathTable") || c.HasInput("PathCode")) {
    return c.Error("a custom tree (PathTable/PathCode) is not supported; only the default "
                   "complete binary tree over num_classes");
  }
  const int64_t num_classes = c.IntAttr("num_classes");
  if (num_classes < 2) {
    return c.Error("num_classes must be at least 2, got " + std::to_string(num_classes));
  }
  const TensorInfo& x = c.Input("X");
  const TensorInfo& w = c.Input("W");
  const TensorInfo& label = c.Input("Label");
  if (!IsFloat(x.dtype) || w.dtype != x.dtype) {
    return c.Error("X and W must be float32 or float64 of one dtype");
  }
  FLEET_RETURN_IF_ERROR(Expect2d(c, x, "X", -1, -1, "2-D [N, D]"));
  const std::string w_shape = "[num_classes - 1, D] = [" + std::to_string(num_classes - 1) + ", " +
                              std::to_string(x.dims[1]) + "]";
  FLEET_RETURN_IF_ERROR(Expect2d(c, w, "W", num_classes - 1, x.dims[1], w_shape.c_str()));
  if (label.dtype != ir::DataType::kInt64) return c.Error("Label must be int64");
  FLEET_RETURN_IF_ERROR(Expect2d(c, label, "Label", x.dims[0], 1, "[N, 1] with N of X"));
  if (c.HasInput("Bias")) {
    const TensorInfo& b = c.Input("Bias");
    if (b.dtype != x.dtype) return c.Error("Bias must have X's dtype");
    const std::string b_shape = "[num_classes - 1, 1] = [" + std::to_string(num_classes - 1) + ", 1]";
    FLEET_RETURN_IF_ERROR(Expect2d(c, b, "Bias", num_classes - 1, 1, b_shape.c_str()));
  }
  return x.dims[0];
}

void RegisterHierarchicalSigmoid(OpRegistry& registry) {
  OpSchema s;
  s.type = "hierarchical_sigmoid";
  s.summary = "hierarchical sigmoid loss over the default complete binary tree of num_classes "
              "leaves; Out [N, 1], PreOut [N, code_length] (softrelu of the path logits)";
  s.inputs = {{"X"},
              {"W"},
              {"Label", false, false, true},
              {"PathTable", true, false, true},
              {"PathCode", true, false, true},
              {"Bias", true}};
  s.outputs = {{"Out"}, {"PreOut"}, {"W_Out", true}};
  s.attrs = HsigmoidAttrs();
  s.kernel_dtype_slot = "X";
  s.infer_shape = [](ShapeContext& c) {
    FLEET_ASSIGN_OR_RETURN(int64_t n, CheckHsigmoid(c));
    const ir::DataType t = c.Input("X").dtype;
    c.Output("Out") = TensorInfo{t, {n, 1}};
    c.Output("PreOut") = TensorInfo{t, {n, CodeWidth(c.IntAttr("num_classes"))}};
    if (c.HasOutput("W_Out")) c.Output("W_Out") = c.Input("W");
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "hierarchical_sigmoid_grad",
                                      {"X", "W", "Label", "Bias", "PreOut"}, {"Out"},
                                      {"X", "W", "Bias"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "hierarchical_sigmoid_grad";
  g.inputs = {{"X"},         {"W"},        {"Label", false, false, true},
              {"Bias", true}, {"PreOut"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}, {"W@GRAD", true}, {"Bias@GRAD", true}};
  g.attrs = HsigmoidAttrs();
  g.kernel_dtype_slot = "X";
  g.infer_shape = [](ShapeContext& c) {
    FLEET_ASSIGN_OR_RETURN(int64_t n, CheckHsigmoid(c));
    const TensorInfo& x = c.Input("X");
    const int64_t width = CodeWidth(c.IntAttr("num_classes"));
    FLEET_RETURN_IF_ERROR(Expect2d(c, c.Input("PreOut"), "PreOut", n, width, "[N, code_length]"));
    FLEET_RETURN_IF_ERROR(Expect2d(c, c.Input("Out@GRAD"), "Out@GRAD", n, 1, "[N, 1]"));
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = x;
    if (c.HasOutput("W@GRAD")) c.Output("W@GRAD") = c.Input("W");
    if (c.HasOutput("Bias@GRAD")) {
      if (!c.HasInput("Bias")) return c.Error("Bias@GRAD requested without Bias");
      c.Output("Bias@GRAD") = c.Input("Bias");
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

// ---- nce ---------------------------------------------------------------------------------------

std::vector<AttrSpec> NceAttrs() {
  return {{"num_total_classes", int32_t{0}},
          {"num_neg_samples", int32_t{10}},
          {"sampler", int32_t{0}},
          {"seed", int32_t{0}},
          {"custom_neg_classes", std::vector<int32_t>{}},
          {"is_sparse", false},
          {"remote_prefetch", false},
          {"is_test", false}};
}

struct NceShape {
  int64_t n = -1;
  int64_t cols = -1;  // num_true + num_neg_samples
};

StatusOr<NceShape> CheckNce(const ShapeContext& c) {
  const int64_t total = c.IntAttr("num_total_classes");
  const int64_t neg = c.IntAttr("num_neg_samples");
  const int64_t sampler = c.IntAttr("sampler");
  if (total < 2) {
    return c.Error("num_total_classes must be at least 2, got " + std::to_string(total));
  }
  if (neg < 0) return c.Error("num_neg_samples must be >= 0, got " + std::to_string(neg));
  if (sampler == 2) {
    return c.Error("sampler 2 (custom distribution) is not supported; use 0 (uniform) or 1 "
                   "(log_uniform)");
  }
  if (sampler != 0 && sampler != 1) {
    return c.Error("sampler must be 0 (uniform) or 1 (log_uniform), got " +
                   std::to_string(sampler));
  }
  const std::vector<int64_t> custom = c.IntsAttr("custom_neg_classes");
  if (!custom.empty() && static_cast<int64_t>(custom.size()) != neg) {
    return c.Error("custom_neg_classes has " + std::to_string(custom.size()) +
                   " classes but num_neg_samples is " + std::to_string(neg));
  }
  for (int64_t v : custom) {
    if (v < 0 || v >= total) {
      return c.Error("custom_neg_classes holds " + std::to_string(v) + ", outside [0, " +
                     std::to_string(total) + ")");
    }
  }
  const TensorInfo& x = c.Input("Input");
  const TensorInfo& label = c.Input("Label");
  const TensorInfo& w = c.Input("Weight");
  if (!IsFloat(x.dtype) || w.dtype != x.dtype) {
    return c.Error("Input and Weight must be float32 or float64 of one dtype");
  }
  FLEET_RETURN_IF_ERROR(Expect2d(c, x, "Input", -1, -1, "2-D [N, D]"));
  const std::string w_shape = "[num_total_classes, D] = [" + std::to_string(total) + ", " +
                              std::to_string(x.dims[1]) + "]";
  FLEET_RETURN_IF_ERROR(Expect2d(c, w, "Weight", total, x.dims[1], w_shape.c_str()));
  if (label.dtype != ir::DataType::kInt64) return c.Error("Label must be int64");
  FLEET_RETURN_IF_ERROR(Expect2d(c, label, "Label", x.dims[0], -1, "[N, num_true] with N of Input"));
  if (c.HasInput("Bias")) {
    const TensorInfo& b = c.Input("Bias");
    if (b.dtype != x.dtype) return c.Error("Bias must have Input's dtype");
    const std::string b_shape = "[num_total_classes, 1] = [" + std::to_string(total) + ", 1]";
    FLEET_RETURN_IF_ERROR(Expect2d(c, b, "Bias", total, 1, b_shape.c_str()));
  }
  if (c.HasInput("SampleWeight")) {
    const TensorInfo& sw = c.Input("SampleWeight");
    if (sw.dtype != x.dtype) return c.Error("SampleWeight must have Input's dtype");
    FLEET_RETURN_IF_ERROR(Expect2d(c, sw, "SampleWeight", x.dims[0], 1, "[N, 1]"));
  }
  NceShape s;
  s.n = x.dims[0];
  s.cols = label.dims[1] < 0 ? -1 : label.dims[1] + neg;
  return s;
}

void RegisterNce(OpRegistry& registry) {
  OpSchema s;
  s.type = "nce";
  s.summary = "noise-contrastive estimation loss: Cost [N, 1], with the sigmoid of each scored "
              "sample (SampleLogits) and its class (SampleLabels), both [N, num_true + "
              "num_neg_samples]";
  s.inputs = {{"Input"},
              {"Label", false, false, true},
              {"Weight"},
              {"Bias", true},
              {"SampleWeight", true, false, true}};
  s.outputs = {{"Cost"}, {"SampleLogits"}, {"SampleLabels"}};
  s.attrs = NceAttrs();
  s.kernel_dtype_slot = "Input";
  s.infer_shape = [](ShapeContext& c) {
    FLEET_ASSIGN_OR_RETURN(NceShape sh, CheckNce(c));
    const ir::DataType t = c.Input("Input").dtype;
    c.Output("Cost") = TensorInfo{t, {sh.n, 1}};
    c.Output("SampleLogits") = TensorInfo{t, {sh.n, sh.cols}};
    c.Output("SampleLabels") = TensorInfo{ir::DataType::kInt64, {sh.n, sh.cols}};
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "nce_grad",
                                      {"Input", "Label", "Weight", "Bias", "SampleWeight",
                                       "SampleLogits", "SampleLabels"},
                                      {"Cost"}, {"Input", "Weight", "Bias"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "nce_grad";
  g.inputs = {{"Input"},
              {"Label", false, false, true},
              {"Weight"},
              {"Bias", true},
              {"SampleWeight", true, false, true},
              {"SampleLogits"},
              {"SampleLabels", false, false, true},
              {"Cost@GRAD"}};
  g.outputs = {{"Input@GRAD", true}, {"Weight@GRAD", true}, {"Bias@GRAD", true}};
  g.attrs = NceAttrs();
  g.kernel_dtype_slot = "Input";
  g.infer_shape = [](ShapeContext& c) {
    FLEET_ASSIGN_OR_RETURN(NceShape sh, CheckNce(c));
    FLEET_RETURN_IF_ERROR(
        Expect2d(c, c.Input("SampleLogits"), "SampleLogits", sh.n, sh.cols, "[N, cols]"));
    FLEET_RETURN_IF_ERROR(
        Expect2d(c, c.Input("SampleLabels"), "SampleLabels", sh.n, sh.cols, "[N, cols]"));
    FLEET_RETURN_IF_ERROR(Expect2d(c, c.Input("Cost@GRAD"), "Cost@GRAD", sh.n, 1, "[N, 1]"));
    if (c.HasOutput("Input@GRAD")) c.Output("Input@GRAD") = c.Input("Input");
    if (c.HasOutput("Weight@GRAD")) c.Output("Weight@GRAD") = c.Input("Weight");
    if (c.HasOutput("Bias@GRAD")) {
      if (!c.HasInput("Bias")) return c.Error("Bias@GRAD requested without Bias");
      c.Output("Bias@GRAD") = c.Input("Bias");
    }
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterNnSampledOps(OpRegistry& registry) {
  RegisterHierarchicalSigmoid(registry);
  RegisterNce(registry);
}

}  // namespace fleet::ops
