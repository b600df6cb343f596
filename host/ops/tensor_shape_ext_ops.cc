// More layout ops: unsqueeze2, squeeze2, expand_v2, expand_as_v2, tile, stack, unstack, flip,
// roll and tril_triu, with their gradient ops (strided_slice and the pads: tensor_slice_pad_ops.cc).
//
// unsqueeze2 and squeeze2 write the XShape marker as reshape2 does, so their grads are
// reshape-like copies reading only XShape. expand_v2, expand_as_v2 and tile repeat elements;
// their grads sum the repeats back (the kernels add in a fixed order). flip's grad is flip
// again, as in Paddle; roll's is roll_grad (the opposite shifts).
#include <algorithm>
#include <set>
#include <utility>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/tensor_ops_util.h"

namespace fleet::ops {
namespace {

using tensor_ops::InferGradLikeX;
using tensor_ops::NormalizeAxis;
using tensor_ops::SetXShape;
using tensor_ops::XShapeGrad;
using tensor_ops::XShapeGradSchema;

// Paddle's expand_v2 and tile refuse ranks above 6; the kernels share that bound.
constexpr int64_t kMaxRepeatRank = 6;

std::string Str(int64_t v) { return std::to_string(v); }

// ---- unsqueeze2 / squeeze2 ------------------------------------------------------------------

// Paddle inserts the axes one after the other: a negative axis counts from the end of the shape
// built so far (plus one), so [-1] appends and [0, 0] adds two leading 1s.
Status InferUnsqueeze(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const std::vector<int64_t> axes = c.IntsAttr("axes");
  if (axes.empty()) return c.Error("axes is empty; name at least one axis to insert");
  std::vector<int64_t> out = x.dims;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t rank = static_cast<int64_t>(out.size());
    int64_t at = axes[i] < 0 ? axes[i] + rank + 1 : axes[i];
    if (at < 0 || at > rank) {
      return c.Error("axes[" + Str(static_cast<int64_t>(i)) + "] = " + Str(axes[i]) +
                     " is out of range [" + Str(-rank - 1) + ", " + Str(rank) +
                     "] for X of shape " + ir::ShapeText(x.dims) + " after " + Str(
                         static_cast<int64_t>(i)) + " insertions");
    }
    out.insert(out.begin() + at, 1);
  }
  c.Output("Out") = {x.dtype, std::move(out)};
  SetXShape(c, x);
  return OkStatus();
}

// Empty axes drops every dim of size 1; named axes drop their dim when it is 1 and keep it
// otherwise (Paddle 2.x). A named dim of unknown size cannot be decided before run time, so it
// is refused rather than given a rank that might change.
Status InferSqueeze(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const std::vector<int64_t> axes = c.IntsAttr("axes");
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  std::vector<bool> drop(x.dims.size(), false);
  if (axes.empty()) {
    for (size_t k = 0; k < x.dims.size(); ++k) drop[k] = x.dims[k] == 1;
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = 0;
    if (!NormalizeAxis(axes[i], rank, &a)) {
      return c.Error("axes[" + Str(static_cast<int64_t>(i)) + "] = " + Str(axes[i]) +
                     " is out of range for X of shape " + ir::ShapeText(x.dims));
    }
    const int64_t d = x.dims[static_cast<size_t>(a)];
    if (d < 0) {
      return c.Error("axes[" + Str(static_cast<int64_t>(i)) + "] names dim " + Str(a) +
                     " of X " + ir::ShapeText(x.dims) +
                     ", whose size is unknown before run time");
    }
    drop[static_cast<size_t>(a)] = d == 1;
  }
  std::vector<int64_t> out;
  for (size_t k = 0; k < x.dims.size(); ++k) {
    if (!drop[k]) out.push_back(x.dims[k]);
  }
  // Squeezing every dim leaves [1], as slice's decrease_axis does (not a rank-0 tensor).
  if (out.empty()) out.push_back(1);
  c.Output("Out") = {x.dtype, std::move(out)};
  SetXShape(c, x);
  return OkStatus();
}

// ---- expand_v2 / expand_as_v2 / tile --------------------------------------------------------

Status CheckRepeatRank(ShapeContext& c, const TensorInfo& x, int64_t out_rank) {
  if (static_cast<int64_t>(x.dims.size()) > kMaxRepeatRank || out_rank > kMaxRepeatRank) {
    return c.Error("X " + ir::ShapeText(x.dims) + " -> rank " + Str(out_rank) +
                   " exceeds the supported rank " + Str(kMaxRepeatRank));
  }
  return OkStatus();
}

// Out = X broadcast to `shape` (aligned at the right); -1 keeps X's dim.
StatusOr<std::vector<int64_t>> ExpandShape(ShapeContext& c, const TensorInfo& x,
                                           const std::vector<int64_t>& shape,
                                           const std::string& what) {
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  const int64_t n = static_cast<int64_t>(shape.size());
  if (n < rank) {
    return c.Error(what + " " + ir::ShapeText(shape) + " has fewer dims than X " +
                   ir::ShapeText(x.dims));
  }
  FLEET_RETURN_IF_ERROR(CheckRepeatRank(c, x, n));
  std::vector<int64_t> out(shape.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t xi = i - (n - rank);
    const int64_t xd = xi >= 0 ? x.dims[static_cast<size_t>(xi)] : 1;
    const int64_t s = shape[static_cast<size_t>(i)];
    if (s == -1) {
      if (xi < 0) {
        return c.Error(what + "[" + Str(i) + "] is -1 but X " + ir::ShapeText(x.dims) +
                       " has no dim there to keep");
      }
      out[static_cast<size_t>(i)] = xd;
    } else if (s <= 0) {
      return c.Error(what + "[" + Str(i) + "] is " + Str(s) +
                     "; entries must be positive or -1 (keep X's dim)");
    } else if (xd == 1 || xd < 0 || xd == s) {
      out[static_cast<size_t>(i)] = s;
    } else {
      return c.Error("X " + ir::ShapeText(x.dims) + " cannot expand to " + what + " " +
                     ir::ShapeText(shape) + ": dim " + Str(xi) + " is " + Str(xd) +
                     ", not 1 or " + Str(s));
    }
  }
  return out;
}

Status InferExpand(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> out,
                         ExpandShape(c, x, c.IntsAttr("shape"), "shape"));
  c.Output("Out") = {x.dtype, std::move(out)};
  return OkStatus();
}

// The target is Y's shape when Y is given, else target_shape.
Status InferExpandAs(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  std::vector<int64_t> target;
  std::string what = "target_shape";
  if (c.HasInput("Y")) {
    target = c.Input("Y").dims;
    what = "Y's shape";
    // An unknown dim of Y is kept unknown: -1 would otherwise mean "keep X's dim".
    std::vector<int64_t> known = target;
    for (size_t i = 0; i < known.size(); ++i) {
      if (known[i] < 0) known[i] = 1;
    }
    FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> out, ExpandShape(c, x, known, what));
    for (size_t i = 0; i < out.size(); ++i) {
      if (target[i] < 0) out[i] = -1;
    }
    c.Output("Out") = {x.dtype, std::move(out)};
    return OkStatus();
  }
  target = c.IntsAttr("target_shape");
  if (target.empty()) return c.Error("needs input Y or attribute target_shape");
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> out, ExpandShape(c, x, target, what));
  c.Output("Out") = {x.dtype, std::move(out)};
  return OkStatus();
}

// Paddle pads the shorter of X's dims and repeat_times with leading 1s.
Status InferTile(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const std::vector<int64_t> reps = c.IntsAttr("repeat_times");
  const size_t rank = std::max(x.dims.size(), reps.size());
  FLEET_RETURN_IF_ERROR(CheckRepeatRank(c, x, static_cast<int64_t>(rank)));
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const size_t xo = rank - x.dims.size(), ro = rank - reps.size();
    const int64_t xd = i >= xo ? x.dims[i - xo] : 1;
    const int64_t r = i >= ro ? reps[i - ro] : 1;
    if (r <= 0) {
      return c.Error("repeat_times " + ir::ShapeText(reps) + " has entry " + Str(r) +
                     "; every entry must be positive");
    }
    out[i] = xd < 0 ? -1 : xd * r;
  }
  c.Output("Out") = {x.dtype, std::move(out)};
  return OkStatus();
}

// X@GRAD takes X's shape (X is read for its shape only).
// ---- stack / unstack ------------------------------------------------------------------------

Status InferStack(ShapeContext& c) {
  const std::vector<TensorInfo>& xs = c.inputs.at("X");
  if (xs.empty()) return c.Error("X is empty");
  const TensorInfo& first = xs[0];
  const int64_t rank = static_cast<int64_t>(first.dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.IntAttr("axis"), rank + 1, &axis)) {
    return c.Error("axis " + Str(c.IntAttr("axis")) + " is out of range [" + Str(-rank - 1) +
                   ", " + Str(rank) + "] for X[0] of shape " + ir::ShapeText(first.dims));
  }
  std::vector<int64_t> dims = first.dims;
  for (size_t i = 1; i < xs.size(); ++i) {
    const TensorInfo& p = xs[i];
    const std::string name = "X[" + Str(static_cast<int64_t>(i)) + "]";
    if (p.dtype != first.dtype) {
      return c.Error(name + " is " + std::string(ir::DataTypeName(p.dtype)) + " but X[0] is " +
                     std::string(ir::DataTypeName(first.dtype)));
    }
    bool same = p.dims.size() == dims.size();
    for (size_t k = 0; same && k < dims.size(); ++k) {
      same = DimsMatch(p.dims[k], dims[k]);
      if (same && dims[k] < 0) dims[k] = p.dims[k];
    }
    if (!same) {
      return c.Error(name + " " + ir::ShapeText(p.dims) + " differs from X[0] " +
                     ir::ShapeText(first.dims) + "; stacked tensors must have one shape");
    }
  }
  dims.insert(dims.begin() + axis, static_cast<int64_t>(xs.size()));
  c.Output("Y") = {first.dtype, std::move(dims)};
  return OkStatus();
}

Status InferStackGrad(ShapeContext& c) {
  const TensorInfo& dy = c.Input("Y@GRAD");
  const int64_t rank = static_cast<int64_t>(dy.dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.IntAttr("axis"), rank, &axis)) {
    return c.Error("axis " + Str(c.IntAttr("axis")) + " is out of range for Y@GRAD of shape " +
                   ir::ShapeText(dy.dims));
  }
  const int64_t n = static_cast<int64_t>(c.OutputCount("X@GRAD"));
  if (dy.dims[static_cast<size_t>(axis)] >= 0 && dy.dims[static_cast<size_t>(axis)] != n) {
    return c.Error("X@GRAD has " + Str(n) + " vars but Y@GRAD " + ir::ShapeText(dy.dims) +
                   " stacks " + Str(dy.dims[static_cast<size_t>(axis)]) + " along axis " +
                   Str(axis));
  }
  std::vector<int64_t> dims = dy.dims;
  dims.erase(dims.begin() + axis);
  for (size_t i = 0; i < c.OutputCount("X@GRAD"); ++i) c.Output("X@GRAD", i) = {dy.dtype, dims};
  return OkStatus();
}

Status InferUnstack(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.IntAttr("axis"), rank, &axis)) {
    return c.Error("axis " + Str(c.IntAttr("axis")) + " is out of range for X of shape " +
                   ir::ShapeText(x.dims));
  }
  const int64_t dim = x.dims[static_cast<size_t>(axis)];
  const int64_t n = static_cast<int64_t>(c.OutputCount("Y"));
  const int64_t num = c.IntAttr("num");
  if (dim < 0) {
    return c.Error("dim " + Str(axis) + " of X " + ir::ShapeText(x.dims) +
                   " is unknown; unstack needs it to know how many outputs to make");
  }
  if (num != dim || n != dim) {
    return c.Error("num = " + Str(num) + " and Y's " + Str(n) + " vars must both equal dim " +
                   Str(axis) + " of X " + ir::ShapeText(x.dims) + " (" + Str(dim) + ")");
  }
  std::vector<int64_t> dims = x.dims;
  dims.erase(dims.begin() + axis);
  for (int64_t i = 0; i < n; ++i) c.Output("Y", static_cast<size_t>(i)) = {x.dtype, dims};
  return OkStatus();
}

Status InferUnstackGrad(ShapeContext& c) {
  const std::vector<TensorInfo>& dys = c.inputs.at("Y@GRAD");
  if (dys.empty()) return c.Error("Y@GRAD is empty");
  const int64_t rank = static_cast<int64_t>(dys[0].dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.IntAttr("axis"), rank + 1, &axis)) {
    return c.Error("axis " + Str(c.IntAttr("axis")) + " is out of range for Y@GRAD[0] of shape " +
                   ir::ShapeText(dys[0].dims));
  }
  for (size_t i = 1; i < dys.size(); ++i) {
    if (dys[i].dims.size() != dys[0].dims.size()) {
      return c.Error("Y@GRAD[" + Str(static_cast<int64_t>(i)) + "] " +
                     ir::ShapeText(dys[i].dims) + " differs from Y@GRAD[0] " +
                     ir::ShapeText(dys[0].dims));
    }
  }
  std::vector<int64_t> dims = dys[0].dims;
  dims.insert(dims.begin() + axis, static_cast<int64_t>(dys.size()));
  if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = {dys[0].dtype, std::move(dims)};
  return OkStatus();
}

// ---- flip / roll / tril_triu ----------------------------------------------------------------

Status CheckAxes(ShapeContext& c, const TensorInfo& x, const std::vector<int64_t>& axes,
                 bool distinct) {
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  std::set<int64_t> seen;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = 0;
    if (!NormalizeAxis(axes[i], rank, &a)) {
      return c.Error("axis[" + Str(static_cast<int64_t>(i)) + "] = " + Str(axes[i]) +
                     " is out of range for X of shape " + ir::ShapeText(x.dims));
    }
    if (distinct && !seen.insert(a).second) {
      return c.Error("axis " + ir::ShapeText(axes) + " names dim " + Str(a) + " twice");
    }
  }
  return OkStatus();
}

Status InferFlip(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_RETURN_IF_ERROR(CheckAxes(c, x, c.IntsAttr("axis"), true));
  c.Output("Out") = x;
  return OkStatus();
}

// Empty axis rolls the flattened tensor (one shift); otherwise one shift per axis.
Status CheckRoll(ShapeContext& c, const TensorInfo& x) {
  const std::vector<int64_t> shifts = c.IntsAttr("shifts");
  const std::vector<int64_t> axis = c.IntsAttr("axis");
  if (axis.empty()) {
    if (shifts.size() != 1) {
      return c.Error("shifts " + ir::ShapeText(shifts) +
                     " must have one entry when axis is empty (a roll of the flattened X)");
    }
    return OkStatus();
  }
  if (shifts.size() != axis.size()) {
    return c.Error("shifts " + ir::ShapeText(shifts) + " and axis " + ir::ShapeText(axis) +
                   " must have the same length");
  }
  return CheckAxes(c, x, axis, false);
}

Status InferRoll(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_RETURN_IF_ERROR(CheckRoll(c, x));
  c.Output("Out") = x;
  return OkStatus();
}

Status InferTrilTriu(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  if (x.dims.size() < 2) {
    return c.Error("X must have rank >= 2 (a matrix or a batch of them), got " +
                   ir::ShapeText(x.dims));
  }
  c.Output("Out") = x;
  return OkStatus();
}

// A grad op whose one input gradient `in`@GRAD has the shape of its output gradient.
OpSchema SameShapeGrad(std::string type, std::string out_grad, std::string in_grad,
                       std::vector<AttrSpec> attrs, std::string summary, bool reads_x) {
  OpSchema g;
  g.type = std::move(type);
  g.summary = std::move(summary);
  if (reads_x) g.inputs.push_back({"X", false, false, true});
  g.inputs.push_back({out_grad});
  g.outputs = {{in_grad}};
  g.attrs = std::move(attrs);
  g.kernel_dtype_slot = out_grad;
  g.infer_shape = [out_grad, in_grad](ShapeContext& c) {
    if (c.HasOutput(in_grad)) c.Output(in_grad) = c.Input(out_grad);
    return OkStatus();
  };
  return g;
}

void RegisterSqueezeOps(OpRegistry& registry) {
  for (const char* name : {"unsqueeze2", "squeeze2"}) {
    const std::string type = name;
    const bool un = type == "unsqueeze2";
    OpSchema s;
    s.type = type;
    s.summary = un ? "Out = X with a dim of size 1 inserted at each of axes, in order"
                   : "Out = X without the size-1 dims named by axes (all of them when empty)";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}, {"XShape", true}};
    s.attrs = {{"axes", std::vector<int32_t>{}}};
    s.infer_shape = un ? InferUnsqueeze : InferSqueeze;
    s.grad = XShapeGrad(type + "_grad");
    RegisterBuiltin(registry, std::move(s));
    RegisterBuiltin(registry, XShapeGradSchema(type + "_grad", {{"axes", std::vector<int32_t>{}}},
                                               "X@GRAD = Out@GRAD with X's dims"));
  }
}

// expand_v2, expand_as_v2 and tile: Out repeats X; the grads read X (for its shape) and
// Out@GRAD.
void RegisterRepeatOps(OpRegistry& registry) {
  struct Repeat {
    const char* type;
    std::vector<SlotSpec> inputs;
    std::vector<AttrSpec> attrs;
    ShapeFn infer;
    const char* summary;
  };
  const std::vector<Repeat> ops = {
      {"expand_v2", {{"X"}}, {{"shape", std::vector<int32_t>{}}}, InferExpand,
       "Out = X broadcast to shape (aligned right; -1 keeps X's dim)"},
      {"expand_as_v2", {{"X"}, {"Y", true, false, true}},
       {{"target_shape", std::vector<int32_t>{}}}, InferExpandAs,
       "Out = X broadcast to Y's shape, or to target_shape without Y"},
      {"tile", {{"X"}}, {{"repeat_times", std::vector<int32_t>{}}}, InferTile,
       "Out = X repeated repeat_times[i] times along dim i"},
  };
  for (const Repeat& r : ops) {
    const std::string type = r.type;
    OpSchema s;
    s.type = type;
    s.summary = r.summary;
    s.inputs = r.inputs;
    s.outputs = {{"Out"}};
    s.attrs = r.attrs;
    s.infer_shape = r.infer;
    s.kernel_dtype_slot = "X";
    s.grad = [type](const ir::Op& fwd) {
      return std::vector<ir::Op>{GradOp(fwd, type + "_grad", {"X"}, {"Out"}, {"X"})};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = type + "_grad";
    g.summary = "X@GRAD = Out@GRAD summed over the repeats of each X element";
    g.inputs = {{"X", false, false, true}, {"Out@GRAD"}};
    g.outputs = {{"X@GRAD", true}};
    g.attrs = r.attrs;
    g.kernel_dtype_slot = "Out@GRAD";
    g.infer_shape = InferGradLikeX;
    RegisterBuiltin(registry, std::move(g));
  }
}

void RegisterStackOps(OpRegistry& registry) {
  {
    OpSchema s;
    s.type = "stack";
    s.summary = "Y = the X tensors (one shape) joined along a new dim at axis";
    s.inputs = {{"X", false, true}};
    s.outputs = {{"Y"}};
    s.attrs = {{"axis", int32_t{0}}};
    s.infer_shape = InferStack;
    s.grad = [](const ir::Op& fwd) {
      ir::Op g = GradOp(fwd, "stack_grad", {}, {"Y"}, {});
      std::vector<std::string> grads;
      for (const auto& x : fwd.Input("X")) grads.push_back(ir::GradVarName(x));
      g.outputs["X@GRAD"] = std::move(grads);
      return std::vector<ir::Op>{std::move(g)};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = "stack_grad";
    g.summary = "X@GRAD[i] = Y@GRAD[..., i, ...] along axis";
    g.inputs = {{"Y@GRAD"}};
    g.outputs = {{"X@GRAD", true, true}};
    g.attrs = {{"axis", int32_t{0}}};
    g.kernel_dtype_slot = "Y@GRAD";
    g.infer_shape = InferStackGrad;
    RegisterBuiltin(registry, std::move(g));
  }
  {
    OpSchema s;
    s.type = "unstack";
    s.summary = "Y[i] = X[..., i, ...] along axis (num = dim axis of X)";
    s.inputs = {{"X"}};
    s.outputs = {{"Y", false, true}};
    s.attrs = {{"axis", int32_t{0}}, {"num", int32_t{0}}};
    s.infer_shape = InferUnstack;
    s.grad = [](const ir::Op& fwd) {
      ir::Op g = GradOp(fwd, "unstack_grad", {}, {}, {"X"});
      std::vector<std::string> grads;
      for (const auto& y : fwd.Output("Y")) grads.push_back(ir::GradVarName(y));
      g.inputs["Y@GRAD"] = std::move(grads);
      return std::vector<ir::Op>{std::move(g)};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = "unstack_grad";
    g.summary = "X@GRAD = the Y@GRAD tensors stacked along axis";
    g.inputs = {{"Y@GRAD", false, true}};
    g.outputs = {{"X@GRAD", true}};
    g.attrs = {{"axis", int32_t{0}}, {"num", int32_t{0}}};
    g.kernel_dtype_slot = "Y@GRAD";
    g.infer_shape = InferUnstackGrad;
    RegisterBuiltin(registry, std::move(g));
  }
}

void RegisterFlipRollTril(OpRegistry& registry) {
  {
    OpSchema s;
    s.type = "flip";
    s.summary = "Out = X reversed along each dim in axis";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"axis", std::vector<int32_t>{}}};
    s.infer_shape = InferFlip;
    // Paddle's flip grad is flip of Out@GRAD over the same axes.
    s.grad = [](const ir::Op& fwd) {
      ir::Op g;
      g.type = "flip";
      g.attrs = fwd.attrs;
      g.inputs["X"] = {ir::GradVarName(fwd.OutputOne("Out"))};
      g.outputs["Out"] = {ir::GradVarName(fwd.InputOne("X"))};
      return std::vector<ir::Op>{std::move(g)};
    };
    RegisterBuiltin(registry, std::move(s));
  }
  const std::vector<AttrSpec> roll_attrs = {{"shifts", std::vector<int64_t>{}},
                                            {"axis", std::vector<int64_t>{}}};
  {
    OpSchema s;
    s.type = "roll";
    s.summary = "Out = X rolled by shifts[i] along axis[i] (the flattened X when axis is empty)";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = roll_attrs;
    s.infer_shape = InferRoll;
    s.grad = [](const ir::Op& fwd) {
      return std::vector<ir::Op>{GradOp(fwd, "roll_grad", {"X"}, {"Out"}, {"X"})};
    };
    RegisterBuiltin(registry, std::move(s));
    OpSchema g = SameShapeGrad("roll_grad", "Out@GRAD", "X@GRAD", roll_attrs,
                               "X@GRAD = Out@GRAD rolled back by shifts", true);
    g.infer_shape = [](ShapeContext& c) {
      FLEET_RETURN_IF_ERROR(CheckRoll(c, c.Input("Out@GRAD")));
      if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("Out@GRAD");
      return OkStatus();
    };
    RegisterBuiltin(registry, std::move(g));
  }
  const std::vector<AttrSpec> tril_attrs = {{"diagonal", int32_t{0}}, {"lower", true}};
  {
    OpSchema s;
    s.type = "tril_triu";
    s.summary = "Out = X on and below (lower) or on and above (upper) the diagonal-th "
                "diagonal of its last two dims, 0 elsewhere";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = tril_attrs;
    s.infer_shape = InferTrilTriu;
    s.grad = [](const ir::Op& fwd) {
      return std::vector<ir::Op>{GradOp(fwd, "tril_triu_grad", {}, {"Out"}, {"X"})};
    };
    RegisterBuiltin(registry, std::move(s));
    RegisterBuiltin(registry,
                    SameShapeGrad("tril_triu_grad", "Out@GRAD", "X@GRAD", tril_attrs,
                                  "X@GRAD = Out@GRAD masked like the forward", false));
  }
}

}  // namespace

namespace tensor_ops {

Status InferGradLikeX(ShapeContext& c) {
  if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = {c.Input("Out@GRAD").dtype, c.Input("X").dims};
  return OkStatus();
}

void RegisterTensorShapeExtOps(OpRegistry& registry) {
  RegisterSqueezeOps(registry);
  RegisterRepeatOps(registry);
  RegisterStackOps(registry);
  RegisterFlipRollTril(registry);
}

}  // namespace tensor_ops
}  // namespace fleet::ops
