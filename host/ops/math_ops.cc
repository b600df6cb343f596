#include "ops/op_registry.h"

namespace fleet::ops {

void RegisterMathOps(OpRegistry& registry) {
  {
    OpSchema s;
    s.type = "scale";
    s.summary = "Out = scale * X + bias (bias_after_scale) or scale * (X + bias)";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"scale", 1.0f}, {"bias", 0.0f}, {"bias_after_scale", true}};
    s.infer_shape = [](ShapeContext& c) {
      c.Output("Out") = c.Input("X");
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
}

}  // namespace fleet::ops
