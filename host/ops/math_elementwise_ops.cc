// elementwise_{add,sub,mul,div,max,min} and their grads, with Paddle's `axis` broadcast rule:
// the lower-rank operand's dims line up with the higher-rank one's starting at `axis` (-1: at
// the rank difference), trailing 1s of the lower-rank operand that would run past the end are
// dropped, and each aligned pair must be equal or contain a 1. Either operand may be the
// smaller one; the result has the broadcast shape.
#include <algorithm>

#include "ops/math_internal.h"

namespace fleet::ops::math {
namespace {

// Joins one aligned pair of dims; false when they do not broadcast.
bool JoinDim(int64_t a, int64_t b, int64_t* out) {
  if (a == b || b == 1) {
    *out = a;
  } else if (a == 1) {
    *out = b;
  } else if (a < 0) {
    *out = b;
  } else if (b < 0) {
    *out = a;
  } else {
    return false;
  }
  return true;
}

}  // namespace

Status InferBroadcastBinary(ShapeContext& c, int64_t axis_attr) {
  const TensorInfo& x = c.Input("X");
  const TensorInfo& y = c.Input("Y");
  if (x.dtype != y.dtype) {
    return c.Error("X is " + std::string(ir::DataTypeName(x.dtype)) + " but Y is " +
                   std::string(ir::DataTypeName(y.dtype)));
  }
  const bool x_big = x.dims.size() >= y.dims.size();
  const std::vector<int64_t>& big = x_big ? x.dims : y.dims;
  std::vector<int64_t> small = x_big ? y.dims : x.dims;
  int64_t axis = axis_attr;
  const auto diff = static_cast<int64_t>(big.size() - small.size());
  if (diff == 0 || axis == -1) axis = diff;
  while (!small.empty() && axis + static_cast<int64_t>(small.size()) >
                               static_cast<int64_t>(big.size()) && small.back() == 1) {
    small.pop_back();
  }
  if (axis < 0 || axis + static_cast<int64_t>(small.size()) > static_cast<int64_t>(big.size())) {
    return c.Error("axis " + std::to_string(axis_attr) + " does not place " +
                   (x_big ? "Y " : "X ") + ir::ShapeText(x_big ? y.dims : x.dims) + " inside " +
                   (x_big ? "X " : "Y ") + ir::ShapeText(big));
  }
  TensorInfo out{x.dtype, big};
  for (size_t i = 0; i < small.size(); ++i) {
    const size_t j = static_cast<size_t>(axis) + i;
    if (!JoinDim(big[j], small[i], &out.dims[j])) {
      return c.Error("X " + ir::ShapeText(x.dims) + " and Y " + ir::ShapeText(y.dims) +
                     " do not broadcast at axis " + std::to_string(axis) + ": dim " +
                     std::to_string(big[j]) + " vs " + std::to_string(small[i]));
    }
  }
  c.Output("Out") = out;
  return OkStatus();
}

namespace {

// A sequence X (the only operand that may hold sequences, OpSchema::lod_share) needs a Y that
// broadcasts over its rows: Y's dim lined up with X's rows is absent or 1, so every row of Out
// reads its own row of X and the same Y.
Status CheckSequenceOperand(const ShapeContext& c, int64_t axis_attr) {
  const TensorInfo& x = c.Input("X");
  const TensorInfo& y = c.Input("Y");
  if (x.lod_level == 0 || y.lod_level != 0) return OkStatus();
  const auto xr = static_cast<int64_t>(x.dims.size());
  const auto yr = static_cast<int64_t>(y.dims.size());
  const int64_t axis = yr == xr || axis_attr == -1 ? xr - yr : axis_attr;
  if (yr > xr || (axis == 0 && yr > 0 && y.dims[0] != 1)) {
    return c.Error("X '" + std::string(c.op().InputOne("X")) + "' holds sequences, so Y " +
                   ir::ShapeText(y.dims) + " must broadcast over its rows (no dim, or a dim of "
                   "1, lined up with X's first dim " + ir::ShapeText(x.dims) + ")");
  }
  return OkStatus();
}

Status InferElementwise(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  if (x.selected_rows()) {  // elementwise_mul only (its selected_rows_inputs)
    const TensorInfo& y = c.Input("Y");
    if (y.dtype != x.dtype || ir::KnownNumel(y.dims) != 1) {
      return c.Error("a sparse X (selected_rows) takes only a one-element Y of its dtype, got " +
                     std::string(ir::DataTypeName(y.dtype)) + ir::ShapeText(y.dims));
    }
    c.Output("Out") = x;
    return OkStatus();
  }
  FLEET_RETURN_IF_ERROR(CheckSequenceOperand(c, c.IntAttr("axis")));
  return InferBroadcastBinary(c, c.IntAttr("axis"));
}

Status InferElementwiseGrad(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(SameShapeAs(c, "X@GRAD", "X"));
  return SameShapeAs(c, "Y@GRAD", "Y");
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& registry) {
  struct Kind {
    const char* name;
    const char* summary;
    bool grad_reads_out;
  };
  const Kind kinds[] = {
      {"elementwise_add", "Out = X + Y (broadcast at axis)", false},
      {"elementwise_sub", "Out = X - Y (broadcast at axis)", false},
      {"elementwise_mul", "Out = X * Y (broadcast at axis)", false},
      {"elementwise_div", "Out = X / Y (broadcast at axis)", true},
      {"elementwise_max", "Out = max(X, Y) (broadcast at axis); ties send the gradient to Y",
       false},
      {"elementwise_min", "Out = min(X, Y) (broadcast at axis); ties send the gradient to Y",
       false},
  };
  for (const Kind& k : kinds) {
    const std::string type = k.name;
    const std::string grad_type = type + "_grad";
    OpSchema s;
    s.type = type;
    s.summary = k.summary;
    s.inputs = {{"X"}, {"Y"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"axis", int32_t{-1}}};
    s.infer_shape = InferElementwise;
    // X may hold sequences when Y broadcasts over its rows (InferElementwise checks): Out
    // follows X. A Y with sequences is refused.
    s.lod_share = {{"Out", "X"}};
    // A sparse gradient times a one-element Y (clipping by global norm scales it).
    if (type == "elementwise_mul") s.selected_rows_inputs = {"X"};
    const bool reads_out = k.grad_reads_out;
    s.grad = [grad_type, reads_out](const ir::Op& fwd) {
      std::vector<std::string> outs;
      if (reads_out) outs.push_back("Out");
      return std::vector<ir::Op>{MakeGradOp(fwd, grad_type, {"X", "Y"}, outs, {"Out"},
                                            {"X", "Y"})};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = grad_type;
    g.summary = "gradients of " + type + ", reduced over broadcast dims";
    g.inputs = {{"X"}, {"Y"}};
    if (reads_out) g.inputs.push_back({"Out"});
    g.inputs.push_back({"Out@GRAD"});
    g.outputs = {{"X@GRAD", true}, {"Y@GRAD", true}};
    g.attrs = {{"axis", int32_t{-1}}};
    g.infer_shape = InferElementwiseGrad;
    g.kernel_dtype_slot = "Out@GRAD";
    // Y@GRAD sums Out@GRAD over X's rows, where the zero padding rows add nothing.
    g.lod_share = {{"X@GRAD", "X"}, {"", "Out@GRAD"}};
    if (reads_out) g.lod_share.emplace_back("", "Out");
    RegisterBuiltin(registry, std::move(g));
  }
}

}  // namespace fleet::ops::math
