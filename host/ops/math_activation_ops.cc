// Element-wise activations, softmax and log_softmax, with their grads.
//
// As in Paddle, a grad op reads the forward output when the derivative is cheapest from it
// (relu, tanh, sigmoid, sqrt, exp: slots Out, Out@GRAD) and the forward input otherwise (gelu,
// leaky_relu, square, log: slots X, Out@GRAD); softmax_grad and log_softmax_grad read Out.
#include "ops/math_internal.h"

namespace fleet::ops::math {
namespace {

Status InferSameAsX(ShapeContext& c) {
  c.Output("Out") = c.Input("X");
  return OkStatus();
}

Status CheckAxis(ShapeContext& c, const TensorInfo& t) {
  const int64_t axis = c.IntAttr("axis");
  const auto rank = static_cast<int64_t>(t.dims.size());
  if (rank == 0 || axis < -rank || axis >= rank) {
    return c.Error("axis " + std::to_string(axis) + " is out of range for a tensor of shape " +
                   ir::ShapeText(t.dims));
  }
  return OkStatus();
}

struct Activation {
  const char* name;
  bool grad_reads_out;
  std::vector<AttrSpec> attrs;
  const char* summary;
};

}  // namespace

void RegisterActivationOps(OpRegistry& registry) {
  const std::vector<Activation> acts = {
      {"relu", true, {}, "Out = max(X, 0)"},
      {"tanh", true, {}, "Out = tanh(X)"},
      {"sigmoid", true, {}, "Out = 1 / (1 + exp(-X))"},
      {"sqrt", true, {}, "Out = sqrt(X)"},
      {"exp", true, {}, "Out = exp(X)"},
      {"gelu", false, {{"approximate", false}},
       "Out = X * Phi(X) (erf form; tanh form with approximate)"},
      {"leaky_relu", false, {{"alpha", 0.02f}}, "Out = X if X > 0 else alpha * X"},
      {"square", false, {}, "Out = X * X"},
      {"log", false, {}, "Out = ln(X)"},
  };
  for (const Activation& a : acts) {
    const std::string type = a.name;
    const std::string grad_type = type + "_grad";
    const bool reads_out = a.grad_reads_out;
    OpSchema s;
    s.type = type;
    s.summary = a.summary;
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = a.attrs;
    s.infer_shape = InferSameAsX;
    s.lod_share = {{"Out", "X"}};  // row by row: Out keeps X's sequences
    s.grad = [grad_type, reads_out](const ir::Op& fwd) {
      std::vector<std::string> ins, outs;
      (reads_out ? outs : ins).push_back(reads_out ? "Out" : "X");
      return std::vector<ir::Op>{MakeGradOp(fwd, grad_type, ins, outs, {"Out"}, {"X"})};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = grad_type;
    g.summary = "X@GRAD of " + type;
    g.inputs = {{reads_out ? "Out" : "X"}, {"Out@GRAD"}};
    g.outputs = {{"X@GRAD"}};
    g.attrs = a.attrs;
    g.infer_shape = [reads_out](ShapeContext& c) {
      return SameShapeAs(c, "X@GRAD", reads_out ? "Out" : "X");
    };
    g.kernel_dtype_slot = "Out@GRAD";
    g.lod_share = {{"X@GRAD", reads_out ? "Out" : "X"}, {"", "Out@GRAD"}};
    RegisterBuiltin(registry, std::move(g));
  }

  {
    // Not differentiable here: its derivative is zero almost everywhere, and its one use is L1
    // regularization, which applies it to parameters after the backward pass.
    OpSchema s;
    s.type = "sign";
    s.summary = "Out = -1, 0 or 1 as X is negative, zero or positive";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.infer_shape = InferSameAsX;
    s.lod_share = {{"Out", "X"}};
    RegisterBuiltin(registry, std::move(s));
  }

  for (const char* name : {"softmax", "log_softmax"}) {
    const std::string type = name;
    const std::string grad_type = type + "_grad";
    OpSchema s;
    s.type = type;
    s.summary = type == "softmax" ? "Out = exp(X) / sum(exp(X)) along axis"
                                  : "Out = X - log(sum(exp(X))) along axis";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"axis", int32_t{-1}}};
    s.infer_shape = [](ShapeContext& c) {
      FLEET_RETURN_IF_ERROR(CheckAxis(c, c.Input("X")));
      c.Output("Out") = c.Input("X");
      return OkStatus();
    };
    s.grad = [grad_type](const ir::Op& fwd) {
      return std::vector<ir::Op>{MakeGradOp(fwd, grad_type, {}, {"Out"}, {"Out"}, {"X"})};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = grad_type;
    g.summary = "X@GRAD of " + type + " from Out and Out@GRAD";
    g.inputs = {{"Out"}, {"Out@GRAD"}};
    g.outputs = {{"X@GRAD"}};
    g.attrs = {{"axis", int32_t{-1}}};
    g.infer_shape = [](ShapeContext& c) {
      FLEET_RETURN_IF_ERROR(CheckAxis(c, c.Input("Out")));
      return SameShapeAs(c, "X@GRAD", "Out");
    };
    g.kernel_dtype_slot = "Out@GRAD";
    RegisterBuiltin(registry, std::move(g));
  }
}

}  // namespace fleet::ops::math
