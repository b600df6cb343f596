// The math op group: `scale` here, the rest in math_*_ops.cc (see math_internal.h).
#include <cassert>

#include "ops/math_internal.h"
#include "ops/op_registry.h"

namespace fleet::ops {
namespace math {

void SetOutputIfPresent(ShapeContext& c, std::string_view slot, const TensorInfo& info) {
  if (c.HasOutput(slot)) c.Output(slot) = info;
}

Status SameShapeAs(ShapeContext& c, std::string_view out, std::string_view in) {
  if (!c.HasOutput(out)) return OkStatus();
  if (!c.HasInput(in)) {
    return c.Error("output " + std::string(out) + " needs input " + std::string(in));
  }
  const size_t n = c.OutputCount(out);
  if (c.InputCount(in) != n) {
    return c.Error("output " + std::string(out) + " has " + std::to_string(n) +
                   " vars but input " + std::string(in) + " has " +
                   std::to_string(c.InputCount(in)));
  }
  for (size_t i = 0; i < n; ++i) c.Output(out, i) = c.Input(in, i);
  return OkStatus();
}

ir::Op MakeGradOp(const ir::Op& fwd, std::string type,
                  const std::vector<std::string>& forward_inputs,
                  const std::vector<std::string>& forward_outputs,
                  const std::vector<std::string>& out_grads,
                  const std::vector<std::string>& in_grads) {
  ir::Op g;
  g.type = std::move(type);
  g.attrs = fwd.attrs;
  for (const auto& slot : forward_inputs) {
    if (!fwd.Input(slot).empty()) g.inputs[slot] = fwd.Input(slot);
  }
  for (const auto& slot : forward_outputs) {
    if (!fwd.Output(slot).empty()) g.inputs[slot] = fwd.Output(slot);
  }
  for (const auto& slot : out_grads) {
    std::vector<std::string> names;
    for (const auto& v : fwd.Output(slot)) names.push_back(ir::GradVarName(v));
    if (!names.empty()) g.inputs[ir::GradVarName(slot)] = std::move(names);
  }
  for (const auto& slot : in_grads) {
    std::vector<std::string> names;
    for (const auto& v : fwd.Input(slot)) names.push_back(ir::GradVarName(v));
    if (!names.empty()) g.outputs[ir::GradVarName(slot)] = std::move(names);
  }
  return g;
}

}  // namespace math

void RegisterMathOps(OpRegistry& registry) {
  {
    OpSchema s;
    s.type = "scale";
    s.summary = "Out = scale * X + bias (bias_after_scale) or scale * (X + bias)";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"scale", 1.0f}, {"bias", 0.0f}, {"bias_after_scale", true}};
    // Row by row; a bias lands in padding rows too, which the executor zeroes after the op.
    s.lod_share = {{"Out", "X"}};
    // A parameter server scales the sum of its trainers' sparse gradients by 1/N.
    s.selected_rows_inputs = {"X"};
    s.infer_shape = [](ShapeContext& c) {
      const TensorInfo& x = c.Input("X");
      // A bias would land on every row of the dense tensor a sparse X stands for, which its
      // entries cannot say.
      if (x.selected_rows() && c.FloatAttr("bias") != 0.0f) {
        return c.Error("a sparse X (selected_rows) takes no bias; bias is " +
                       std::to_string(c.FloatAttr("bias")));
      }
      c.Output("Out") = x;
      return OkStatus();
    };
    // d/dX = scale * dOut: Paddle's grad of scale is a scale op with bias 0.
    s.grad = [](const ir::Op& fwd) {
      ir::Op g;
      g.type = "scale";
      g.inputs["X"] = {ir::GradVarName(fwd.OutputOne("Out"))};
      g.outputs["Out"] = {ir::GradVarName(fwd.InputOne("X"))};
      g.attrs["scale"] = fwd.FindAttr("scale") ? *fwd.FindAttr("scale") : ir::Attribute(1.0f);
      g.attrs["bias"] = 0.0f;
      g.attrs["bias_after_scale"] = true;
      return std::vector<ir::Op>{g};
    };
    (void)registry.Register(std::move(s));
  }
  math::RegisterMatmulOps(registry);
  math::RegisterElementwiseOps(registry);
  math::RegisterReduceOps(registry);
  math::RegisterActivationOps(registry);
  math::RegisterUnaryOps(registry);
  math::RegisterCompareOps(registry);
  math::RegisterReduceExtOps(registry);
}

}  // namespace fleet::ops
