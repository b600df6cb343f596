// Loss ops: cross_entropy (on probabilities) and softmax_with_cross_entropy (on logits), with
// their gradient ops. Hard labels are int64 class ids with a trailing dim of 1; soft labels are
// distributions of the input's shape.
#include "ops/nn_util.h"

namespace fleet::ops {
namespace {

// Checks Label against the class dim `axis` of `x`: hard labels have size 1 there, soft labels
// match `x` everywhere.
Status CheckLabel(const ShapeContext& c, const TensorInfo& x, const TensorInfo& label,
                  size_t axis, bool soft) {
  if (label.dims.size() != x.dims.size()) {
    return c.Error("Label " + ir::ShapeText(label.dims) + " must have the rank of the input " +
                   ir::ShapeText(x.dims));
  }
  if (!soft && label.dtype != ir::DataType::kInt64 && label.dtype != ir::DataType::kInt32) {
    return c.Error("hard Label must be int64 class ids, got " +
                   std::string(ir::DataTypeName(label.dtype)));
  }
  if (soft && label.dtype != x.dtype) {
    return c.Error("soft Label must have the input's dtype " +
                   std::string(ir::DataTypeName(x.dtype)));
  }
  for (size_t i = 0; i < x.dims.size(); ++i) {
    int64_t want = (i == axis && !soft) ? 1 : x.dims[i];
    if (!DimsMatch(label.dims[i], want)) {
      return c.Error("Label " + ir::ShapeText(label.dims) + " does not fit input " +
                     ir::ShapeText(x.dims) + (soft ? " (soft_label: same shape expected)"
                                                : " (hard labels: class dim of size 1)"));
    }
  }
  return OkStatus();
}

void RegisterCrossEntropy(OpRegistry& registry) {
  OpSchema s;
  s.type = "cross_entropy";
  s.summary = "Y = -log(X[label]) per row (or -sum(Label * log X) with soft_label)";
  s.inputs = {{"X"}, {"Label", false, false, true}};
  s.outputs = {{"Y"}};
  s.attrs = {{"soft_label", false}, {"ignore_index", int32_t{-100}}};
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("X");
    if (x.dims.empty()) return c.Error("X must have a class dim, got a scalar");
    size_t axis = x.dims.size() - 1;
    FLEET_RETURN_IF_ERROR(CheckLabel(c, x, c.Input("Label"), axis, c.BoolAttr("soft_label")));
    TensorInfo y = x;
    y.dims[axis] = 1;
    c.Output("Y") = y;
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "cross_entropy_grad", {"X", "Label"}, {"Y"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "cross_entropy_grad";
  g.inputs = {{"X"}, {"Label", false, false, true}, {"Y@GRAD"}};
  g.outputs = {{"X@GRAD", true}};
  g.attrs = {{"soft_label", false}, {"ignore_index", int32_t{-100}}};
  g.infer_shape = [](ShapeContext& c) {
    if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

// The class axis of softmax_with_cross_entropy, normalised to [0, rank).
StatusOr<size_t> ClassAxis(const ShapeContext& c, size_t rank) {
  int64_t axis = c.IntAttr("axis");
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return c.Error("axis " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(rank));
  }
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

void RegisterSoftmaxWithCrossEntropy(OpRegistry& registry) {
  std::vector<AttrSpec> attrs = {{"soft_label", false},
                                 {"ignore_index", int32_t{-100}},
                                 {"axis", int32_t{-1}},
                                 {"numeric_stable_mode", true}};
  OpSchema s;
  s.type = "softmax_with_cross_entropy";
  s.summary = "Softmax = softmax(Logits, axis); Loss = cross entropy of Softmax against Label";
  s.inputs = {{"Logits"}, {"Label", false, false, true}};
  s.outputs = {{"Softmax"}, {"Loss"}};
  s.attrs = attrs;
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("Logits");
    if (x.dims.empty()) return c.Error("Logits must have a class dim, got a scalar");
    FLEET_ASSIGN_OR_RETURN(size_t axis, ClassAxis(c, x.dims.size()));
    FLEET_RETURN_IF_ERROR(CheckLabel(c, x, c.Input("Label"), axis, c.BoolAttr("soft_label")));
    c.Output("Softmax") = x;
    TensorInfo loss = x;
    loss.dims[axis] = 1;
    c.Output("Loss") = loss;
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{GradOp(fwd, "softmax_with_cross_entropy_grad",
                                      {"Softmax", "Label"}, {"Loss"}, {"Logits"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "softmax_with_cross_entropy_grad";
  g.inputs = {{"Softmax"}, {"Label", false, false, true}, {"Loss@GRAD"}};
  g.outputs = {{"Logits@GRAD", true}};
  g.attrs = attrs;
  g.kernel_dtype_slot = "Softmax";
  g.infer_shape = [](ShapeContext& c) {
    const TensorInfo& sm = c.Input("Softmax");
    FLEET_ASSIGN_OR_RETURN(size_t axis, ClassAxis(c, sm.dims.size()));
    (void)axis;
    if (c.HasOutput("Logits@GRAD")) c.Output("Logits@GRAD") = sm;
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterNnLossOps(OpRegistry& registry) {
  RegisterCrossEntropy(registry);
  RegisterSoftmaxWithCrossEntropy(registry);
}

}  // namespace fleet::ops
