// Layout ops: reshape2, transpose2, flatten_contiguous_range, flatten2, concat, split, slice, and their
// gradient ops. Creation and conversion ops (cast, fills, random initializers, assign,
// increment) are in tensor_create_ops.cc.
//
// reshape2, transpose2 and flatten_contiguous_range write Paddle's XShape marker: dims
// [0, x dims...], so it holds no elements and only carries X's shape to the grad op.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "ops/op_registry.h"
#include "ops/tensor_ops_util.h"

namespace fleet::ops {
namespace tensor_ops {

bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

bool IsValidDtype(int64_t value) {
  return value >= FLEET_DTYPE_BOOL && value <= FLEET_DTYPE_FLOAT64;
}

ir::Op GradOpOf(const ir::Op& forward, std::string type) {
  ir::Op g;
  g.type = std::move(type);
  g.attrs = forward.attrs;
  return g;
}

// XShape = [0, x dims...], X's dtype.
void SetXShape(ShapeContext& c, const TensorInfo& x) {
  if (!c.HasOutput("XShape")) return;
  TensorInfo& xs = c.Output("XShape");
  xs.dtype = x.dtype;
  xs.dims.assign(1, 0);
  xs.dims.insert(xs.dims.end(), x.dims.begin(), x.dims.end());
}

// The forward input's shape as seen by an XShape grad op: XShape minus its leading 0, or X.
StatusOr<TensorInfo> ForwardXInfo(const ShapeContext& c) {
  if (c.HasInput("XShape")) {
    const TensorInfo& xs = c.Input("XShape");
    if (xs.dims.empty()) return c.Error("XShape has rank 0; expected [0, x dims...]");
    TensorInfo x = xs;
    x.dims.erase(x.dims.begin());
    return x;
  }
  if (c.HasInput("X")) return c.Input("X");
  return c.Error("needs XShape (or X) to know the shape of X@GRAD");
}

// Grad maker of the ops that write XShape: "<type>_grad" reading XShape (X when the forward op
// has no XShape output) and Out@GRAD, writing X@GRAD.
GradFn XShapeGrad(std::string grad_type) {
  return [grad_type](const ir::Op& fwd) {
    ir::Op g = GradOpOf(fwd, grad_type);
    if (!fwd.Output("XShape").empty()) {
      g.inputs["XShape"] = fwd.Output("XShape");
    } else {
      g.inputs["X"] = fwd.Input("X");
    }
    g.inputs["Out@GRAD"] = {ir::GradVarName(fwd.OutputOne("Out"))};
    g.outputs["X@GRAD"] = {ir::GradVarName(fwd.InputOne("X"))};
    return std::vector<ir::Op>{std::move(g)};
  };
}

// Schema of an XShape grad op whose X@GRAD simply has X's shape (the kernel does the work).
OpSchema XShapeGradSchema(std::string type, std::vector<AttrSpec> attrs, std::string summary) {
  OpSchema s;
  s.type = std::move(type);
  s.summary = std::move(summary);
  s.inputs = {{"XShape", true}, {"X", true, false, true}, {"Out@GRAD"}};
  s.outputs = {{"X@GRAD"}};
  s.attrs = std::move(attrs);
  s.kernel_dtype_slot = "Out@GRAD";
  s.infer_shape = [](ShapeContext& c) -> Status {
    FLEET_ASSIGN_OR_RETURN(TensorInfo x, ForwardXInfo(c));
    if (c.HasOutput("X@GRAD")) {
      TensorInfo& g = c.Output("X@GRAD");
      g.dims = x.dims;
      g.dtype = c.Input("Out@GRAD").dtype;
    }
    return OkStatus();
  };
  return s;
}

}  // namespace tensor_ops

namespace {

using tensor_ops::ForwardXInfo;
using tensor_ops::GradOpOf;
using tensor_ops::NormalizeAxis;
using tensor_ops::SetXShape;
using tensor_ops::XShapeGrad;
using tensor_ops::XShapeGradSchema;

std::string Str(int64_t v) { return std::to_string(v); }

// ---- reshape2 -------------------------------------------------------------------------------

// Shape of reshape2's Out. Unknown (-1) dims of X are treated as one unknown factor B: when
// Out copies (with 0) exactly as many of them as X has, the element counts still determine the
// -1 entry of `shape` (X [-1, 3, 4] with shape [0, -1] gives [-1, 12]); otherwise that entry
// stays unknown.
Status InferReshape(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const std::vector<int64_t> shape = c.IntsAttr("shape");
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> out(shape.size());
  int64_t infer_at = -1;
  int64_t out_unknown = 0, out_known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t s = shape[i];
    if (s == -1) {
      if (infer_at >= 0) {
        return c.Error("shape " + ir::ShapeText(shape) + " has more than one -1 (shape[" +
                       Str(infer_at) + "] and shape[" + Str(static_cast<int64_t>(i)) + "])");
      }
      infer_at = static_cast<int64_t>(i);
      out[i] = -1;
      continue;
    }
    if (s == 0) {
      if (static_cast<int64_t>(i) >= rank) {
        return c.Error("shape[" + Str(static_cast<int64_t>(i)) +
                       "] is 0 (copy X's dim) but X has only rank " + Str(rank) + " (shape " +
                       ir::ShapeText(x.dims) + ")");
      }
      out[i] = x.dims[i];
    } else if (s < 0) {
      return c.Error("shape[" + Str(static_cast<int64_t>(i)) + "] is " + Str(s) +
                     "; entries must be positive, 0 (copy X's dim) or -1 (infer)");
    } else {
      out[i] = s;
    }
    if (out[i] < 0) ++out_unknown;
    else out_known *= out[i];
  }
  int64_t x_unknown = 0, x_known = 1;
  for (int64_t d : x.dims) {
    if (d < 0) ++x_unknown;
    else x_known *= d;
  }
  const std::string what = "cannot reshape X of shape " + ir::ShapeText(x.dims) + " to " +
                           ir::ShapeText(shape);
  if (x_unknown == out_unknown) {
    if (infer_at >= 0) {
      if (out_known == 0 || x_known % out_known != 0) {
        return c.Error(what + ": " + Str(x_known) + " elements do not divide into parts of " +
                       Str(out_known));
      }
      out[static_cast<size_t>(infer_at)] = x_known / out_known;
    } else if (x_known != out_known) {
      return c.Error(what + ": " + Str(x_known) + " elements vs " + Str(out_known));
    }
  } else if (infer_at < 0 && out_unknown == 0 && x_known != 0 && out_known % x_known != 0) {
    // X has an unknown factor, Out is fully known: X's known part must divide Out.
    return c.Error(what + ": " + Str(out_known) + " elements are not a multiple of " +
                   Str(x_known));
  }
  TensorInfo& o = c.Output("Out");
  o.dtype = x.dtype;
  o.dims = std::move(out);
  SetXShape(c, x);
  return OkStatus();
}

// ---- transpose2 -----------------------------------------------------------------------------

StatusOr<std::vector<int64_t>> Permutation(const ShapeContext& c, int64_t rank) {
  const std::vector<int64_t> axis = c.IntsAttr("axis");
  if (static_cast<int64_t>(axis.size()) != rank) {
    return c.Error("axis " + ir::ShapeText(axis) + " has " + Str(static_cast<int64_t>(axis.size())) +
                   " entries but X has rank " + Str(rank));
  }
  std::vector<int64_t> perm(axis.size());
  std::vector<bool> seen(axis.size(), false);
  for (size_t i = 0; i < axis.size(); ++i) {
    if (!NormalizeAxis(axis[i], rank, &perm[i])) {
      return c.Error("axis[" + Str(static_cast<int64_t>(i)) + "] = " + Str(axis[i]) +
                     " is out of range for rank " + Str(rank));
    }
    if (seen[static_cast<size_t>(perm[i])]) {
      return c.Error("axis " + ir::ShapeText(axis) + " is not a permutation (repeats " +
                     Str(axis[i]) + ")");
    }
    seen[static_cast<size_t>(perm[i])] = true;
  }
  return perm;
}

Status InferTranspose(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                         Permutation(c, static_cast<int64_t>(x.dims.size())));
  TensorInfo& o = c.Output("Out");
  o.dtype = x.dtype;
  o.dims.resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) o.dims[i] = x.dims[static_cast<size_t>(perm[i])];
  SetXShape(c, x);
  return OkStatus();
}

Status InferTransposeGrad(ShapeContext& c) {
  FLEET_ASSIGN_OR_RETURN(TensorInfo x, ForwardXInfo(c));
  FLEET_RETURN_IF_ERROR(Permutation(c, static_cast<int64_t>(x.dims.size())).status());
  if (c.HasOutput("X@GRAD")) {
    c.Output("X@GRAD") = {c.Input("Out@GRAD").dtype, x.dims};
  }
  return OkStatus();
}

// ---- flatten_contiguous_range ---------------------------------------------------------------

Status InferFlatten(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  TensorInfo& o = c.Output("Out");
  o.dtype = x.dtype;
  if (x.dims.empty()) {  // a scalar flattens to [1], as in Paddle
    o.dims = {1};
    SetXShape(c, x);
    return OkStatus();
  }
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t start = 0, stop = 0;
  if (!NormalizeAxis(c.IntAttr("start_axis"), rank, &start) ||
      !NormalizeAxis(c.IntAttr("stop_axis"), rank, &stop)) {
    return c.Error("start_axis " + Str(c.IntAttr("start_axis")) + " / stop_axis " +
                   Str(c.IntAttr("stop_axis")) + " out of range for X of shape " +
                   ir::ShapeText(x.dims));
  }
  if (start > stop) {
    return c.Error("start_axis (" + Str(start) + ") is after stop_axis (" + Str(stop) + ")");
  }
  std::vector<int64_t> out(x.dims.begin(), x.dims.begin() + start);
  std::vector<int64_t> middle(x.dims.begin() + start, x.dims.begin() + stop + 1);
  out.push_back(ir::KnownNumel(middle));
  out.insert(out.end(), x.dims.begin() + stop + 1, x.dims.end());
  o.dims = std::move(out);
  SetXShape(c, x);
  return OkStatus();
}

// Paddle 1.x's flatten2: X [d0, ..., dn) -> [d0 * ... * d(axis-1), d(axis) * ... * d(n-1)].
Status InferFlatten2(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  const int64_t axis = c.IntAttr("axis");
  if (axis < 0 || axis > rank) {
    return c.Error("axis " + Str(axis) + " must be in [0, " + Str(rank) + "] for X of shape " +
                   ir::ShapeText(x.dims));
  }
  const std::vector<int64_t> outer(x.dims.begin(), x.dims.begin() + axis);
  const std::vector<int64_t> inner(x.dims.begin() + axis, x.dims.end());
  c.Output("Out") = TensorInfo{x.dtype, {ir::KnownNumel(outer), ir::KnownNumel(inner)}};
  SetXShape(c, x);
  return OkStatus();
}

// ---- concat ---------------------------------------------------------------------------------

// Shape of concatenating `parts` along `axis_attr`; `what` names the slot in errors.
StatusOr<TensorInfo> ConcatShape(const ShapeContext& c, const std::vector<TensorInfo>& parts,
                                 int64_t axis_attr, const std::string& what) {
  if (parts.empty()) return c.Error(what + " is empty");
  const TensorInfo& first = parts[0];
  const int64_t rank = static_cast<int64_t>(first.dims.size());
  int64_t axis = 0;
  if (rank == 0) return c.Error(what + "[0] is a scalar; concat needs rank >= 1");
  if (!NormalizeAxis(axis_attr, rank, &axis)) {
    return c.Error("axis " + Str(axis_attr) + " is out of range for rank " + Str(rank));
  }
  TensorInfo out = first;
  for (size_t i = 1; i < parts.size(); ++i) {
    const TensorInfo& p = parts[i];
    const std::string name = what + "[" + Str(static_cast<int64_t>(i)) + "]";
    if (p.dtype != first.dtype) {
      return c.Error(name + " is " + std::string(ir::DataTypeName(p.dtype)) + " but " + what +
                     "[0] is " + std::string(ir::DataTypeName(first.dtype)));
    }
    if (static_cast<int64_t>(p.dims.size()) != rank) {
      return c.Error(name + " has rank " + Str(static_cast<int64_t>(p.dims.size())) + " " +
                     ir::ShapeText(p.dims) + " but " + what + "[0] has rank " + Str(rank) + " " +
                     ir::ShapeText(first.dims));
    }
    for (int64_t d = 0; d < rank; ++d) {
      const size_t k = static_cast<size_t>(d);
      if (d == axis) {
        out.dims[k] = (out.dims[k] < 0 || p.dims[k] < 0) ? -1 : out.dims[k] + p.dims[k];
        continue;
      }
      if (out.dims[k] >= 0 && p.dims[k] >= 0 && out.dims[k] != p.dims[k]) {
        return c.Error(name + " " + ir::ShapeText(p.dims) + " differs from " + what + "[0] " +
                       ir::ShapeText(first.dims) + " in dim " + Str(d) + " (only axis " +
                       Str(axis) + " may differ)");
      }
      if (out.dims[k] < 0) out.dims[k] = p.dims[k];
    }
  }
  return out;
}

Status InferConcat(ShapeContext& c) {
  FLEET_ASSIGN_OR_RETURN(TensorInfo out,
                         ConcatShape(c, c.inputs.at("X"), c.IntAttr("axis"), "X"));
  c.Output("Out") = std::move(out);
  return OkStatus();
}

Status InferConcatGrad(ShapeContext& c) {
  const size_t n = c.InputCount("X");
  if (c.HasOutput("X@GRAD") && c.OutputCount("X@GRAD") != n) {
    return c.Error("X@GRAD has " + Str(static_cast<int64_t>(c.OutputCount("X@GRAD"))) +
                   " vars but X has " + Str(static_cast<int64_t>(n)));
  }
  const ir::DataType dtype = c.Input("Out@GRAD").dtype;
  for (size_t i = 0; i < c.OutputCount("X@GRAD"); ++i) {
    c.Output("X@GRAD", i) = {dtype, c.Input("X", i).dims};
  }
  return OkStatus();
}

// ---- split ----------------------------------------------------------------------------------

Status InferSplit(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = 0;
  if (!NormalizeAxis(c.IntAttr("axis"), rank, &axis)) {
    return c.Error("axis " + Str(c.IntAttr("axis")) + " is out of range for X of shape " +
                   ir::ShapeText(x.dims));
  }
  const int64_t n = static_cast<int64_t>(c.OutputCount("Out"));
  const int64_t num = c.IntAttr("num");
  const std::vector<int64_t> sections = c.IntsAttr("sections");
  const int64_t dim = x.dims[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  if (num > 0) {
    if (!sections.empty()) return c.Error("set either num or sections, not both");
    if (num != n) {
      return c.Error("num = " + Str(num) + " but Out has " + Str(n) + " vars");
    }
    if (dim >= 0 && dim % num != 0) {
      return c.Error("dim " + Str(axis) + " of X " + ir::ShapeText(x.dims) +
                     " does not split into " + Str(num) + " equal parts");
    }
    sizes.assign(static_cast<size_t>(num), dim < 0 ? -1 : dim / num);
  } else {
    if (num < 0) return c.Error("num = " + Str(num) + " is negative");
    if (sections.empty()) return c.Error("set num > 0 or sections");
    if (static_cast<int64_t>(sections.size()) != n) {
      return c.Error("sections " + ir::ShapeText(sections) + " has " +
                     Str(static_cast<int64_t>(sections.size())) + " entries but Out has " +
                     Str(n) + " vars");
    }
    int64_t infer_at = -1, sum = 0;
    for (size_t i = 0; i < sections.size(); ++i) {
      if (sections[i] == -1) {
        if (infer_at >= 0) return c.Error("sections " + ir::ShapeText(sections) + " has two -1");
        infer_at = static_cast<int64_t>(i);
      } else if (sections[i] < 0) {
        return c.Error("sections " + ir::ShapeText(sections) + " has a negative entry");
      } else {
        sum += sections[i];
      }
    }
    sizes = sections;
    if (dim >= 0) {
      if (infer_at >= 0) {
        if (sum > dim) {
          return c.Error("sections " + ir::ShapeText(sections) + " sum to more than dim " +
                         Str(axis) + " of X " + ir::ShapeText(x.dims));
        }
        sizes[static_cast<size_t>(infer_at)] = dim - sum;
      } else if (sum != dim) {
        return c.Error("sections " + ir::ShapeText(sections) + " sum to " + Str(sum) +
                       " but dim " + Str(axis) + " of X " + ir::ShapeText(x.dims) + " is " +
                       Str(dim));
      }
    }
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    TensorInfo& o = c.Output("Out", i);
    o.dtype = x.dtype;
    o.dims = x.dims;
    o.dims[static_cast<size_t>(axis)] = sizes[i];
  }
  return OkStatus();
}

// ---- slice ----------------------------------------------------------------------------------

// Paddle's clamping: negative starts/ends count from the end, then both are clamped to
// [0, dim]; a slice whose end lies before its start is an error.
Status InferSlice(ShapeContext& c) {
  const TensorInfo& in = c.Input("Input");
  const int64_t rank = static_cast<int64_t>(in.dims.size());
  const std::vector<int64_t> axes = c.IntsAttr("axes");
  const std::vector<int64_t> starts = c.IntsAttr("starts");
  const std::vector<int64_t> ends = c.IntsAttr("ends");
  if (starts.size() != axes.size() || ends.size() != axes.size()) {
    return c.Error("axes " + ir::ShapeText(axes) + ", starts " + ir::ShapeText(starts) + " and ends " +
                   ir::ShapeText(ends) + " must have the same length");
  }
  std::vector<int64_t> out = in.dims;
  std::set<int64_t> used;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = 0;
    if (!NormalizeAxis(axes[i], rank, &axis)) {
      return c.Error("axes[" + Str(static_cast<int64_t>(i)) + "] = " + Str(axes[i]) +
                     " is out of range for Input of shape " + ir::ShapeText(in.dims));
    }
    if (!used.insert(axis).second) return c.Error("axes " + ir::ShapeText(axes) + " repeats an axis");
    const int64_t dim = in.dims[static_cast<size_t>(axis)];
    if (dim < 0) continue;  // stays unknown
    int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    b = std::min(std::max<int64_t>(b, 0), dim);
    e = std::min(std::max<int64_t>(e, 0), dim);
    if (e < b) {
      return c.Error("along axis " + Str(axis) + " (size " + Str(dim) + ") start " +
                     Str(starts[i]) + " comes after end " + Str(ends[i]));
    }
    out[static_cast<size_t>(axis)] = e - b;
  }
  const std::vector<int64_t> decrease = c.IntsAttr("decrease_axis");
  if (!decrease.empty()) {
    std::vector<bool> drop(out.size(), false);
    for (int64_t d : decrease) {
      int64_t axis = 0;
      if (!NormalizeAxis(d, rank, &axis)) {
        return c.Error("decrease_axis " + ir::ShapeText(decrease) + " is out of range for rank " +
                       Str(rank));
      }
      if (out[static_cast<size_t>(axis)] != 1 && out[static_cast<size_t>(axis)] >= 0) {
        return c.Error("decrease_axis removes dim " + Str(axis) + ", but the slice has size " +
                       Str(out[static_cast<size_t>(axis)]) + " there (must be 1)");
      }
      drop[static_cast<size_t>(axis)] = true;
    }
    std::vector<int64_t> kept;
    for (size_t k = 0; k < out.size(); ++k) {
      if (!drop[k]) kept.push_back(out[k]);
    }
    // Removing every dim leaves [1], as in Paddle 2.0 (not a rank-0 tensor).
    if (kept.empty()) kept.push_back(1);
    out = std::move(kept);
  }
  c.Output("Out") = {in.dtype, std::move(out)};
  return OkStatus();
}

std::vector<AttrSpec> SliceAttrs() {
  return {{"axes", std::vector<int32_t>{}},
          {"starts", std::vector<int32_t>{}},
          {"ends", std::vector<int32_t>{}},
          {"decrease_axis", std::vector<int32_t>{}},
          {"infer_flags", std::vector<int32_t>{}}};
}

void RegisterLayoutOps(OpRegistry& registry) {
  {
    OpSchema s;
    s.type = "reshape2";
    s.summary = "Out = X with dims `shape` (0 copies X's dim, one -1 is inferred); XShape = "
                "[0, X dims]";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}, {"XShape", true}};
    s.attrs = {{"shape", std::vector<int32_t>{}}};
    s.infer_shape = InferReshape;
    s.grad = XShapeGrad("reshape2_grad");
    RegisterBuiltin(registry, std::move(s));
    RegisterBuiltin(registry, XShapeGradSchema("reshape2_grad",
                                               {{"shape", std::vector<int32_t>{}}},
                                               "X@GRAD = Out@GRAD with X's dims"));
  }
  {
    OpSchema s;
    s.type = "transpose2";
    s.summary = "Out = X with dims permuted: Out dim i is X dim axis[i]";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}, {"XShape", true}};
    s.attrs = {{"axis", std::vector<int32_t>{}}};
    s.infer_shape = InferTranspose;
    s.grad = XShapeGrad("transpose2_grad");
    RegisterBuiltin(registry, std::move(s));
    OpSchema g = XShapeGradSchema("transpose2_grad", {{"axis", std::vector<int32_t>{}}},
                                  "X@GRAD = Out@GRAD transposed by the inverse of axis");
    g.infer_shape = InferTransposeGrad;
    RegisterBuiltin(registry, std::move(g));
  }
  {
    OpSchema s;
    s.type = "flatten_contiguous_range";
    s.summary = "Out = X with dims start_axis..stop_axis merged into one";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}, {"XShape", true}};
    s.attrs = {{"start_axis", int32_t{1}}, {"stop_axis", int32_t{1}}};
    s.infer_shape = InferFlatten;
    s.grad = XShapeGrad("flatten_contiguous_range_grad");
    RegisterBuiltin(registry, std::move(s));
    RegisterBuiltin(registry,
                    XShapeGradSchema("flatten_contiguous_range_grad",
                                     {{"start_axis", int32_t{1}}, {"stop_axis", int32_t{1}}},
                                     "X@GRAD = Out@GRAD with X's dims"));
  }
  {
    OpSchema s;
    s.type = "flatten2";
    s.summary = "Out = X as a matrix: the dims before axis times the dims from axis on";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}, {"XShape", true}};
    s.attrs = {{"axis", int32_t{1}}};
    s.infer_shape = InferFlatten2;
    s.grad = XShapeGrad("flatten2_grad");
    RegisterBuiltin(registry, std::move(s));
    RegisterBuiltin(registry, XShapeGradSchema("flatten2_grad", {{"axis", int32_t{1}}},
                                               "X@GRAD = Out@GRAD with X's dims"));
  }
  {
    OpSchema s;
    s.type = "concat";
    s.summary = "Out = the X tensors joined along axis";
    s.inputs = {{"X", false, true}};
    s.outputs = {{"Out"}};
    s.attrs = {{"axis", int32_t{0}}};
    s.infer_shape = InferConcat;
    s.grad = [](const ir::Op& fwd) {
      ir::Op g = GradOpOf(fwd, "concat_grad");
      g.inputs["X"] = fwd.Input("X");
      g.inputs["Out@GRAD"] = {ir::GradVarName(fwd.OutputOne("Out"))};
      std::vector<std::string> grads;
      for (const auto& x : fwd.Input("X")) grads.push_back(ir::GradVarName(x));
      g.outputs["X@GRAD"] = std::move(grads);
      return std::vector<ir::Op>{std::move(g)};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = "concat_grad";
    g.summary = "X@GRAD[i] = the part of Out@GRAD that X[i] filled";
    g.inputs = {{"X", false, true, true}, {"Out@GRAD"}};
    g.outputs = {{"X@GRAD", true, true}};
    g.attrs = {{"axis", int32_t{0}}};
    g.kernel_dtype_slot = "Out@GRAD";
    g.infer_shape = InferConcatGrad;
    RegisterBuiltin(registry, std::move(g));
  }
  {
    OpSchema s;
    s.type = "split";
    s.summary = "Out = X cut along axis into num equal parts or parts of sizes `sections`";
    s.inputs = {{"X"}};
    s.outputs = {{"Out", false, true}};
    s.attrs = {{"num", int32_t{0}}, {"sections", std::vector<int32_t>{}}, {"axis", int32_t{0}}};
    s.infer_shape = InferSplit;
    // Paddle's split grad is a concat of the output gradients.
    s.grad = [](const ir::Op& fwd) {
      ir::Op g;
      g.type = "concat";
      std::vector<std::string> grads;
      for (const auto& o : fwd.Output("Out")) grads.push_back(ir::GradVarName(o));
      g.inputs["X"] = std::move(grads);
      g.outputs["Out"] = {ir::GradVarName(fwd.InputOne("X"))};
      const ir::Attribute* axis = fwd.FindAttr("axis");
      g.attrs["axis"] = axis != nullptr ? *axis : ir::Attribute(int32_t{0});
      return std::vector<ir::Op>{std::move(g)};
    };
    RegisterBuiltin(registry, std::move(s));
  }
  {
    OpSchema s;
    s.type = "slice";
    s.summary = "Out = Input[starts:ends] along axes (clamped like Paddle), decrease_axis "
                "dims removed";
    s.inputs = {{"Input"}};
    s.outputs = {{"Out"}};
    s.attrs = SliceAttrs();
    s.infer_shape = InferSlice;
    s.grad = [](const ir::Op& fwd) {
      ir::Op g = GradOpOf(fwd, "slice_grad");
      g.inputs["Input"] = fwd.Input("Input");
      g.inputs["Out@GRAD"] = {ir::GradVarName(fwd.OutputOne("Out"))};
      g.outputs["Input@GRAD"] = {ir::GradVarName(fwd.InputOne("Input"))};
      return std::vector<ir::Op>{std::move(g)};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = "slice_grad";
    g.summary = "Input@GRAD = zeros with Out@GRAD placed where the slice was taken";
    g.inputs = {{"Input", false, false, true}, {"Out@GRAD"}};
    g.outputs = {{"Input@GRAD"}};
    g.attrs = SliceAttrs();
    g.kernel_dtype_slot = "Out@GRAD";
    g.infer_shape = [](ShapeContext& c) -> Status {
      if (c.HasOutput("Input@GRAD")) {
        c.Output("Input@GRAD") = {c.Input("Out@GRAD").dtype, c.Input("Input").dims};
      }
      return OkStatus();
    };
    RegisterBuiltin(registry, std::move(g));
  }
}

}  // namespace

void RegisterTensorOps(OpRegistry& registry) {
  RegisterLayoutOps(registry);
  tensor_ops::RegisterTensorCreateOps(registry);
  tensor_ops::RegisterTensorShapeExtOps(registry);
  tensor_ops::RegisterTensorSlicePadOps(registry);
  tensor_ops::RegisterTensorIndexOps(registry);
}

}  // namespace fleet::ops
