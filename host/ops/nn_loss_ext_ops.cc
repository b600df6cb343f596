// Element-wise and reducing losses beyond cross entropy: sigmoid_cross_entropy_with_logits,
// bce_loss, log_loss, huber_loss, smooth_l1_loss, kldiv_loss, label_smooth and margin_rank_loss,
// each with its grad op. Slots, attributes and defaults are Paddle's; the formulas are in
// plugins/common/loss_formulas.h.
//
// Labels and targets are float tensors of the input's shape and dtype (Paddle's), and are
// never differentiated: each grad op writes only the input gradients Paddle's does.
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

bool IsFloat(ir::DataType t) {
  return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64;
}

Status CheckFloat(const ShapeContext& c, std::string_view slot) {
  const TensorInfo& t = c.Input(slot);
  if (!IsFloat(t.dtype)) {
    return c.Error(std::string(slot) + " must be float32 or float64, got " +
                   std::string(ir::DataTypeName(t.dtype)) + " " + ir::ShapeText(t.dims));
  }
  return OkStatus();
}

// `slot` must have the dtype and shape of `like` (unknown dims agree with anything).
Status CheckSameAs(const ShapeContext& c, std::string_view slot, std::string_view like) {
  const TensorInfo& a = c.Input(slot);
  const TensorInfo& b = c.Input(like);
  if (a.dtype != b.dtype) {
    return c.Error(std::string(slot) + " is " + std::string(ir::DataTypeName(a.dtype)) +
                   " but " + std::string(like) + " is " + std::string(ir::DataTypeName(b.dtype)));
  }
  bool same = a.dims.size() == b.dims.size();
  for (size_t i = 0; same && i < a.dims.size(); ++i) same = DimsMatch(a.dims[i], b.dims[i]);
  if (!same) {
    return c.Error(std::string(slot) + " " + ir::ShapeText(a.dims) + " must have the shape of " +
                   std::string(like) + " " + ir::ShapeText(b.dims));
  }
  return OkStatus();
}

void SetIfPresent(ShapeContext& c, std::string_view slot, const TensorInfo& info) {
  if (c.HasOutput(slot)) c.Output(slot) = info;
}

// A grad op schema whose outputs take the shapes of the forward inputs they differentiate.
// `shapes` maps each output gradient slot to the input slot whose shape it takes.
OpSchema GradSchema(std::string type, std::vector<SlotSpec> inputs,
                    std::vector<std::pair<std::string, std::string>> shapes,
                    std::vector<AttrSpec> attrs, std::string dtype_slot) {
  OpSchema g;
  g.type = std::move(type);
  g.inputs = std::move(inputs);
  for (const auto& [out, in] : shapes) g.outputs.push_back({out, true});
  g.attrs = std::move(attrs);
  g.kernel_dtype_slot = std::move(dtype_slot);
  g.infer_shape = [shapes](ShapeContext& c) {
    for (const auto& [out, in] : shapes) {
      if (c.HasInput(in)) SetIfPresent(c, out, c.Input(in));
    }
    return OkStatus();
  };
  return g;
}

void RegisterSigmoidCe(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"normalize", false}, {"ignore_index", int32_t{-100}}};
  OpSchema s;
  s.type = "sigmoid_cross_entropy_with_logits";
  s.summary =
      "Out = max(X, 0) - X * Label + log(1 + exp(-|X|)); 0 where Label == ignore_index; with "
      "normalize, divided by the number of elements not ignored";
  s.inputs = {{"X"}, {"Label", false, false, true}};
  s.outputs = {{"Out"}};
  s.attrs = attrs;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckFloat(c, "X"));
    FLEET_RETURN_IF_ERROR(CheckSameAs(c, "Label", "X"));
    c.Output("Out") = c.Input("X");
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "sigmoid_cross_entropy_with_logits_grad",
                                      {"X", "Label"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));
  RegisterBuiltin(registry,
                  GradSchema("sigmoid_cross_entropy_with_logits_grad",
                             {{"X"}, {"Label", false, false, true}, {"Out@GRAD"}},
                             {{"X@GRAD", "X"}}, attrs, "X"));
}

// bce_loss (X, Label -> Out) and log_loss (Predicted, Labels -> Loss): same shape, no reduction.
void RegisterProbabilityLoss(OpRegistry& registry, const std::string& type, const char* x,
                             const char* label, const char* out, std::vector<AttrSpec> attrs,
                             const std::string& summary) {
  const std::string xs = x, ls = label, os = out;
  OpSchema s;
  s.type = type;
  s.summary = summary;
  s.inputs = {{xs}, {ls, false, false, true}};
  s.outputs = {{os}};
  s.attrs = attrs;
  s.infer_shape = [xs, ls, os, type](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckFloat(c, xs));
    FLEET_RETURN_IF_ERROR(CheckSameAs(c, ls, xs));
    const TensorInfo& x = c.Input(xs);
    if (type == "log_loss" && (x.dims.size() != 2 || !DimsMatch(x.dims[1], 1))) {
      return c.Error(xs + " must have shape [batch, 1], got " + ir::ShapeText(x.dims));
    }
    c.Output(os) = x;
    return OkStatus();
  };
  const std::string grad_type = type + "_grad";
  s.grad = [grad_type, xs, ls, os](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, grad_type, {xs, ls}, {os}, {xs})};
  };
  RegisterBuiltin(registry, std::move(s));
  RegisterBuiltin(registry, GradSchema(grad_type,
                                       {{xs}, {ls, false, false, true}, {os + "@GRAD"}},
                                       {{xs + "@GRAD", xs}}, attrs, xs));
}

void RegisterHuber(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"delta", 1.0f}};
  OpSchema s;
  s.type = "huber_loss";
  s.summary =
      "Residual = Y - X; Out = Residual^2 / 2 where |Residual| <= delta, else "
      "delta * (|Residual| - delta / 2)";
  s.inputs = {{"X"}, {"Y"}};
  s.outputs = {{"Out"}, {"Residual"}};
  s.attrs = attrs;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckFloat(c, "X"));
    FLEET_RETURN_IF_ERROR(CheckSameAs(c, "Y", "X"));
    if (!(c.FloatAttr("delta") > 0)) {
      return c.Error("delta must be positive, got " + std::to_string(c.FloatAttr("delta")));
    }
    c.Output("Out") = c.Input("X");
    SetIfPresent(c, "Residual", c.Input("X"));
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "huber_loss_grad", {"Residual"}, {"Out"}, {"X", "Y"})};
  };
  RegisterBuiltin(registry, std::move(s));
  RegisterBuiltin(registry, GradSchema("huber_loss_grad", {{"Residual"}, {"Out@GRAD"}},
                                       {{"X@GRAD", "Residual"}, {"Y@GRAD", "Residual"}}, attrs,
                                       "Residual"));
}

void RegisterSmoothL1(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"sigma", 1.0f}};
  OpSchema s;
  s.type = "smooth_l1_loss";
  s.summary =
      "Diff = (X - Y) * InsideWeight; Out[n] = sum over the other dims of OutsideWeight * "
      "(sigma^2 Diff^2 / 2 where |Diff| < 1 / sigma^2, else |Diff| - 1 / (2 sigma^2))";
  s.inputs = {{"X"},
              {"Y"},
              {"InsideWeight", true, false, true},
              {"OutsideWeight", true, false, true}};
  s.outputs = {{"Diff"}, {"Out"}};
  s.attrs = attrs;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckFloat(c, "X"));
    const TensorInfo& x = c.Input("X");
    if (x.dims.size() < 2) {
      return c.Error("X must have rank >= 2 ([batch, ...]), got " + ir::ShapeText(x.dims));
    }
    FLEET_RETURN_IF_ERROR(CheckSameAs(c, "Y", "X"));
    for (const char* w : {"InsideWeight", "OutsideWeight"}) {
      if (c.HasInput(w)) FLEET_RETURN_IF_ERROR(CheckSameAs(c, w, "X"));
    }
    if (c.HasInput("InsideWeight") != c.HasInput("OutsideWeight")) {
      return c.Error("InsideWeight and OutsideWeight must be given together");
    }
    if (!(c.FloatAttr("sigma") > 0)) {
      return c.Error("sigma must be positive, got " + std::to_string(c.FloatAttr("sigma")));
    }
    SetIfPresent(c, "Diff", x);
    c.Output("Out") = TensorInfo{x.dtype, {x.dims[0], 1}};
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "smooth_l1_loss_grad",
                                      {"InsideWeight", "OutsideWeight", "Diff"}, {"Out"},
                                      {"X", "Y"})};
  };
  RegisterBuiltin(registry, std::move(s));
  RegisterBuiltin(registry, GradSchema("smooth_l1_loss_grad",
                                       {{"InsideWeight", true, false, true},
                                        {"OutsideWeight", true, false, true},
                                        {"Diff"},
                                        {"Out@GRAD"}},
                                       {{"X@GRAD", "Diff"}, {"Y@GRAD", "Diff"}}, attrs, "Diff"));
}

void RegisterKlDiv(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"reduction", std::string("mean")}};
  OpSchema s;
  s.type = "kldiv_loss";
  s.summary =
      "l = Target * (log(Target) - X) where Target > 0, else 0; Loss = l (none), or sum(l) / "
      "numel (mean), / X.dims[0] (batchmean), or sum(l) (sum), of shape [1]";
  s.inputs = {{"X"}, {"Target", false, false, true}};
  s.outputs = {{"Loss"}};
  s.attrs = attrs;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckFloat(c, "X"));
    FLEET_RETURN_IF_ERROR(CheckSameAs(c, "Target", "X"));
    const std::string r = c.StringAttr("reduction");
    const TensorInfo& x = c.Input("X");
    if (r == "none") {
      c.Output("Loss") = x;
    } else if (r == "mean" || r == "sum" || r == "batchmean") {
      if (r == "batchmean" && x.dims.empty()) {
        return c.Error("reduction batchmean needs a batch dim, X is a scalar");
      }
      c.Output("Loss") = TensorInfo{x.dtype, {1}};
    } else {
      return c.Error("reduction must be none, batchmean, mean or sum, got '" + r + "'");
    }
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        GradOp(fwd, "kldiv_loss_grad", {"X", "Target"}, {"Loss"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));
  RegisterBuiltin(registry, GradSchema("kldiv_loss_grad",
                                       {{"X"}, {"Target", false, false, true}, {"Loss@GRAD"}},
                                       {{"X@GRAD", "X"}}, attrs, "X"));
}

void RegisterLabelSmooth(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"epsilon", 0.0f}};
  OpSchema s;
  s.type = "label_smooth";
  s.summary =
      "Out = (1 - epsilon) * X + epsilon * PriorDist (broadcast over the last dim), or "
      "+ epsilon / K without PriorDist, K = X's last dim";
  s.inputs = {{"X"}, {"PriorDist", true, false, true}};
  s.outputs = {{"Out"}};
  s.attrs = attrs;
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckFloat(c, "X"));
    const TensorInfo& x = c.Input("X");
    if (x.dims.empty()) return c.Error("X must have a class dim, got a scalar");
    if (c.HasInput("PriorDist")) {
      const TensorInfo& p = c.Input("PriorDist");
      if (p.dtype != x.dtype) {
        return c.Error("PriorDist is " + std::string(ir::DataTypeName(p.dtype)) + " but X is " +
                       std::string(ir::DataTypeName(x.dtype)));
      }
      const int64_t n = ir::KnownNumel(p.dims);
      if (p.dims.empty() || !DimsMatch(p.dims.back(), x.dims.back()) ||
          (n >= 0 && x.dims.back() >= 0 && n != x.dims.back())) {
        return c.Error("PriorDist " + ir::ShapeText(p.dims) + " must hold one value per class (" +
                       "[1, K] with K = X's last dim, X is " + ir::ShapeText(x.dims) + ")");
      }
    }
    c.Output("Out") = x;
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "label_smooth_grad", {}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));
  RegisterBuiltin(registry, GradSchema("label_smooth_grad", {{"Out@GRAD"}},
                                       {{"X@GRAD", "Out@GRAD"}}, attrs, "Out@GRAD"));
}

// margin_rank_loss: X1, X2, Label [N, 1] -> Out = max(0, -Label * (X1 - X2) + margin), and
// Activated (1 where Out > 0, else 0), which the gradient reads.
void RegisterMarginRank(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"margin", 0.0f}};
  OpSchema s;
  s.type = "margin_rank_loss";
  s.summary = "Out = max(0, -Label * (X1 - X2) + margin); Activated = (Out > 0)";
  s.inputs = {{"X1"}, {"X2"}, {"Label", false, false, true}};
  s.outputs = {{"Out"}, {"Activated"}};
  s.attrs = attrs;
  s.kernel_dtype_slot = "X1";
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckFloat(c, "X1"));
    FLEET_RETURN_IF_ERROR(CheckSameAs(c, "X2", "X1"));
    FLEET_RETURN_IF_ERROR(CheckSameAs(c, "Label", "X1"));
    const TensorInfo& x = c.Input("X1");
    if (x.dims.size() != 2 || !DimsMatch(x.dims[1], 1)) {
      return c.Error("X1 must have shape [batch, 1], got " + ir::ShapeText(x.dims));
    }
    c.Output("Out") = x;
    c.Output("Activated") = x;
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        GradOp(fwd, "margin_rank_loss_grad", {"Label", "Activated"}, {"Out"}, {"X1", "X2"})};
  };
  RegisterBuiltin(registry, std::move(s));
  RegisterBuiltin(registry, GradSchema("margin_rank_loss_grad",
                                       {{"Label", false, false, true}, {"Activated"}, {"Out@GRAD"}},
                                       {{"X1@GRAD", "Label"}, {"X2@GRAD", "Label"}}, attrs,
                                       "Out@GRAD"));
}

}  // namespace

void RegisterNnLossExtOps(OpRegistry& registry) {
  RegisterSigmoidCe(registry);
  RegisterProbabilityLoss(registry, "bce_loss", "X", "Label", "Out", {},
                          "Out = -(Label * log X + (1 - Label) * log(1 - X)), each log floored "
                          "at -100");
  RegisterProbabilityLoss(registry, "log_loss", "Predicted", "Labels", "Loss",
                          {{"epsilon", 1e-4f}},
                          "Loss = -Labels * log(Predicted + epsilon) - (1 - Labels) * "
                          "log(1 - Predicted + epsilon)");
  RegisterHuber(registry);
  RegisterSmoothL1(registry);
  RegisterKlDiv(registry);
  RegisterLabelSmooth(registry);
  RegisterMarginRank(registry);
}

}  // namespace fleet::ops
