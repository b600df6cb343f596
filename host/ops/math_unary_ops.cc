// Element-wise math (rsqrt, abs, sin, cos, floor, ceil, round, reciprocal, log1p, erf, pow,
// clip) and activations (relu6, swish, silu, elu, selu, hard_swish, hard_sigmoid, softplus,
// softsign, mish, logsigmoid), prelu and cumsum, with their grads.
//
// As in Paddle, a grad op reads the forward output where the derivative is cheapest from it
// (rsqrt, reciprocal, relu6, selu, hard_sigmoid: Out, Out@GRAD), nothing for the ops whose
// gradient is zero (floor, ceil, round: Out@GRAD alone), and the forward input otherwise.
// pow reads its exponent from the `factor` attribute and clip its bounds from `min` / `max`;
// Paddle's optional FactorTensor / Min / Max tensor inputs are not taken. cumsum_grad is
// Paddle's later form (X, Out@GRAD -> X@GRAD: a cumsum in the other direction shaped like X),
// which, unlike fluid's plain reversed cumsum, keeps X's shape under `flatten`.
#include <string>
#include <vector>

#include "ops/math_internal.h"

namespace fleet::ops::math {
namespace {

enum class Reads { kNothing, kX, kOut };

struct UnaryDef {
  const char* name;
  Reads grad_reads;
  std::vector<AttrSpec> attrs;
  const char* summary;
};

Status InferSameAsX(ShapeContext& c) {
  c.Output("Out") = c.Input("X");
  return OkStatus();
}

const char* ReadSlot(Reads r) { return r == Reads::kOut ? "Out" : "X"; }

void RegisterUnary(OpRegistry& registry, const UnaryDef& d) {
  const std::string type = d.name;
  const std::string grad_type = type + "_grad";
  const Reads reads = d.grad_reads;
  OpSchema s;
  s.type = type;
  s.summary = d.summary;
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = d.attrs;
  if (type == "clip") {
    // Paddle refuses an empty interval when the kernel runs; the attributes are known here.
    s.infer_shape = [](ShapeContext& c) {
      if (c.FloatAttr("min") > c.FloatAttr("max")) {
        return c.Error("min " + std::to_string(c.FloatAttr("min")) + " is greater than max " +
                       std::to_string(c.FloatAttr("max")));
      }
      return InferSameAsX(c);
    };
  } else {
    s.infer_shape = InferSameAsX;
  }
  // Element by element, so row by row: Out keeps X's sequences (OpSchema::lod_share).
  s.lod_share = {{"Out", "X"}};
  s.grad = [grad_type, reads](const ir::Op& fwd) {
    std::vector<std::string> ins, outs;
    if (reads == Reads::kX) ins.push_back("X");
    if (reads == Reads::kOut) outs.push_back("Out");
    return std::vector<ir::Op>{MakeGradOp(fwd, grad_type, ins, outs, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = grad_type;
  g.summary = "X@GRAD of " + type;
  if (reads != Reads::kNothing) g.inputs.push_back({ReadSlot(reads)});
  g.inputs.push_back({"Out@GRAD"});
  g.outputs = {{"X@GRAD"}};
  g.attrs = d.attrs;
  g.infer_shape = [reads](ShapeContext& c) {
    return SameShapeAs(c, "X@GRAD", reads == Reads::kNothing ? "Out@GRAD" : ReadSlot(reads));
  };
  g.kernel_dtype_slot = "Out@GRAD";
  if (reads == Reads::kNothing) {
    g.lod_share = {{"X@GRAD", "Out@GRAD"}};
  } else {
    g.lod_share = {{"X@GRAD", ReadSlot(reads)}, {"", "Out@GRAD"}};
  }
  RegisterBuiltin(registry, std::move(g));
}

// ---- prelu ----------------------------------------------------------------------------------

std::vector<AttrSpec> PreluAttrs() {
  return {{"mode", std::string("all")}, {"data_format", std::string("NCHW")}};
}

int64_t KnownProduct(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) {
    if (dims[i] < 0) return -1;
    p *= dims[i];
  }
  return p;
}

// Alpha must hold one value ("all"), one per channel ("channel") or one per element of a sample
// ("element"); unknown dims are not checked.
Status CheckPrelu(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const TensorInfo& alpha = c.Input("Alpha");
  const std::string mode = c.StringAttr("mode");
  const std::string format = c.StringAttr("data_format");
  if (format != "NCHW" && format != "NHWC") {
    return c.Error("data_format '" + format + "' is not NCHW or NHWC");
  }
  const size_t rank = x.dims.size();
  int64_t want = -1;
  if (mode == "all") {
    want = 1;
  } else if (mode == "channel") {
    if (rank < 2) {
      return c.Error("mode 'channel' needs X of rank 2 or more, got X " + ir::ShapeText(x.dims));
    }
    want = x.dims[format == "NCHW" ? 1 : rank - 1];
  } else if (mode == "element") {
    if (rank < 1) return c.Error("mode 'element' needs X of rank 1 or more");
    want = KnownProduct(x.dims, 1, rank);
  } else {
    return c.Error("mode '" + mode + "' is not 'all', 'channel' or 'element'");
  }
  const int64_t have = KnownProduct(alpha.dims, 0, alpha.dims.size());
  if (want >= 0 && have >= 0 && want != have) {
    return c.Error("mode '" + mode + "' needs Alpha of " + std::to_string(want) +
                   " elements for X " + ir::ShapeText(x.dims) + " (" + format + "), got Alpha " +
                   ir::ShapeText(alpha.dims));
  }
  return OkStatus();
}

void RegisterPrelu(OpRegistry& registry) {
  OpSchema s;
  s.type = "prelu";
  s.summary = "Out = X if X > 0 else Alpha * X, Alpha shared per tensor, channel or element";
  s.inputs = {{"X"}, {"Alpha"}};
  s.outputs = {{"Out"}};
  s.attrs = PreluAttrs();
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckPrelu(c));
    c.Output("Out") = c.Input("X");
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        MakeGradOp(fwd, "prelu_grad", {"X", "Alpha"}, {}, {"Out"}, {"X", "Alpha"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "prelu_grad";
  g.summary = "X@GRAD and Alpha@GRAD of prelu";
  g.inputs = {{"X"}, {"Alpha"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", /*optional=*/true}, {"Alpha@GRAD", /*optional=*/true}};
  g.attrs = PreluAttrs();
  g.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckPrelu(c));
    FLEET_RETURN_IF_ERROR(SameShapeAs(c, "X@GRAD", "X"));
    return SameShapeAs(c, "Alpha@GRAD", "Alpha");
  };
  g.kernel_dtype_slot = "Out@GRAD";
  RegisterBuiltin(registry, std::move(g));
}

// ---- cumsum ---------------------------------------------------------------------------------

std::vector<AttrSpec> CumsumAttrs() {
  return {{"axis", int32_t{-1}},
          {"flatten", false},
          {"exclusive", false},
          {"reverse", false}};
}

// Out's shape: X's, or [numel] with `flatten` (-1 while a dim is unknown). The axis is checked
// unless `flatten` makes it irrelevant.
Status InferCumsum(ShapeContext& c, const TensorInfo& x, TensorInfo* out) {
  const auto rank = static_cast<int64_t>(x.dims.size());
  if (c.BoolAttr("flatten")) {
    *out = TensorInfo{x.dtype, {KnownProduct(x.dims, 0, x.dims.size())}};
    return OkStatus();
  }
  const int64_t axis = c.IntAttr("axis");
  if (rank == 0 || axis < -rank || axis >= rank) {
    return c.Error("axis " + std::to_string(axis) + " is out of range for X " +
                   ir::ShapeText(x.dims));
  }
  *out = x;
  return OkStatus();
}

void RegisterCumsum(OpRegistry& registry) {
  OpSchema s;
  s.type = "cumsum";
  s.summary = "Out = running sum of X along axis (flattened with flatten; exclusive, reverse)";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = CumsumAttrs();
  s.infer_shape = [](ShapeContext& c) {
    TensorInfo out;
    FLEET_RETURN_IF_ERROR(InferCumsum(c, c.Input("X"), &out));
    c.Output("Out") = out;
    return OkStatus();
  };
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{MakeGradOp(fwd, "cumsum_grad", {"X"}, {}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "cumsum_grad";
  g.summary = "X@GRAD = Out@GRAD summed in the opposite direction, shaped like X";
  g.inputs = {{"X"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD"}};
  g.attrs = CumsumAttrs();
  g.infer_shape = [](ShapeContext& c) {
    TensorInfo out;
    FLEET_RETURN_IF_ERROR(InferCumsum(c, c.Input("X"), &out));
    const TensorInfo& dout = c.Input("Out@GRAD");
    if (out.dims.size() != dout.dims.size()) {
      return c.Error("Out@GRAD " + ir::ShapeText(dout.dims) + " does not match Out " +
                     ir::ShapeText(out.dims));
    }
    for (size_t i = 0; i < out.dims.size(); ++i) {
      if (!DimsAgree(out.dims[i], dout.dims[i])) {
        return c.Error("Out@GRAD " + ir::ShapeText(dout.dims) + " does not match Out " +
                       ir::ShapeText(out.dims));
      }
    }
    return SameShapeAs(c, "X@GRAD", "X");
  };
  g.kernel_dtype_slot = "Out@GRAD";
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterUnaryOps(OpRegistry& registry) {
  // Float attributes, as in Paddle: their defaults are float32 values (selu's constants
  // rounded to float32).
  const std::vector<UnaryDef> defs = {
      {"rsqrt", Reads::kOut, {}, "Out = 1 / sqrt(X)"},
      {"abs", Reads::kX, {}, "Out = |X|"},
      {"sin", Reads::kX, {}, "Out = sin(X)"},
      {"cos", Reads::kX, {}, "Out = cos(X)"},
      {"floor", Reads::kNothing, {}, "Out = floor(X); zero gradient"},
      {"ceil", Reads::kNothing, {}, "Out = ceil(X); zero gradient"},
      {"round", Reads::kNothing, {}, "Out = X rounded, halves away from zero; zero gradient"},
      {"reciprocal", Reads::kOut, {}, "Out = 1 / X"},
      {"log1p", Reads::kX, {}, "Out = ln(1 + X)"},
      {"erf", Reads::kX, {}, "Out = erf(X)"},
      {"pow", Reads::kX, {{"factor", 1.0f}}, "Out = X ^ factor"},
      {"clip", Reads::kX, {{"min", 0.0f}, {"max", 0.0f}},
       "Out = min(max(X, min), max); gradient 0 outside (min, max)"},
      {"relu6", Reads::kOut, {{"threshold", 6.0f}}, "Out = min(max(X, 0), threshold)"},
      {"swish", Reads::kX, {{"beta", 1.0f}}, "Out = X * sigmoid(beta * X)"},
      {"silu", Reads::kX, {}, "Out = X * sigmoid(X)"},
      {"elu", Reads::kX, {{"alpha", 1.0f}}, "Out = X if X > 0 else alpha * (exp(X) - 1)"},
      {"selu", Reads::kOut,
       {{"scale", 1.0507009873554804934193349852946f},
        {"alpha", 1.6732632423543772848170429916717f}},
       "Out = scale * (X if X > 0 else alpha * (exp(X) - 1))"},
      {"hard_swish", Reads::kX, {{"threshold", 6.0f}, {"scale", 6.0f}, {"offset", 3.0f}},
       "Out = X * min(max(X + offset, 0), threshold) / scale"},
      {"hard_sigmoid", Reads::kOut, {{"slope", 0.2f}, {"offset", 0.5f}},
       "Out = min(max(slope * X + offset, 0), 1)"},
      {"softplus", Reads::kX, {{"beta", 1.0f}, {"threshold", 20.0f}},
       "Out = X if beta * X > threshold else ln(1 + exp(beta * X)) / beta"},
      {"softsign", Reads::kX, {}, "Out = X / (1 + |X|)"},
      {"mish", Reads::kX, {{"threshold", 20.0f}},
       "Out = X * tanh(softplus(X)), softplus(X) = X above threshold"},
      {"logsigmoid", Reads::kX, {}, "Out = ln(sigmoid(X))"},
  };
  for (const UnaryDef& d : defs) RegisterUnary(registry, d);
  RegisterPrelu(registry);
  RegisterCumsum(registry);
}

}  // namespace fleet::ops::math
