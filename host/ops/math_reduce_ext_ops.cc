// The reductions beyond sums: reduce_max, reduce_min, reduce_prod (with grads), reduce_any,
// reduce_all (bool), and the per-axis ops arg_max, arg_min, argsort (with a grad through its
// indices) and p_norm (with a grad).
//
// reduce_* take reduce_sum's attributes and shapes (math_reduce_ops.cc). Gradient rules:
// reduce_max / reduce_min send Out@GRAD to every element equal to the extreme (Paddle's rule:
// ties are not split); reduce_prod's is the product of the other elements of the group;
// p_norm's is Paddle's, epsilon in the denominator. Scalar-like results have shape [1].
//
// arg_max / arg_min's `dtype` holds a FLEET_DTYPE_* value like cast's (int64 = 6, int32 = 5);
// Paddle's default -1 means int64. With `flatten` X is read as 1-D and Out has shape [1].
#include <string>

#include "ops/math_internal.h"

namespace fleet::ops::math {
namespace {

bool IsNumeric(ir::DataType t) {
  return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64 ||
         t == ir::DataType::kInt32 || t == ir::DataType::kInt64;
}
bool IsFloat(ir::DataType t) {
  return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64;
}

std::string Describe(const TensorInfo& t) {
  return std::string(ir::DataTypeName(t.dtype)) + ir::ShapeText(t.dims);
}

Status RequireDtype(const ShapeContext& c, std::string_view slot, bool (*ok)(ir::DataType),
                    const char* expected) {
  const TensorInfo& t = c.Input(slot);
  if (ok(t.dtype)) return OkStatus();
  return c.Error(std::string(slot) + " is " + Describe(t) + "; expected " + expected);
}

bool IsBool(ir::DataType t) { return t == ir::DataType::kBool; }

constexpr const char* kNumeric = "float32, float64, int32 or int64";
constexpr const char* kFloats = "float32 or float64";

// The axis attribute `name` of X normalised into [0, rank), or an error naming it.
StatusOr<int64_t> AxisOf(const ShapeContext& c, std::string_view name) {
  const TensorInfo& x = c.Input("X");
  const auto rank = static_cast<int64_t>(x.dims.size());
  const int64_t axis = c.IntAttr(name);
  if (axis < -rank || axis >= rank) {
    return c.Error(std::string(name) + " " + std::to_string(axis) + " is out of range for X " +
                   ir::ShapeText(x.dims));
  }
  return axis < 0 ? axis + rank : axis;
}

// X's dims without `axis` (a 1 in its place with `keep`); [1] when nothing is left.
std::vector<int64_t> DropAxis(const std::vector<int64_t>& dims, int64_t axis, bool keep) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (static_cast<int64_t>(i) != axis) {
      out.push_back(dims[i]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  if (out.empty()) out.push_back(1);
  return out;
}

std::vector<AttrSpec> ReduceAttrs() {
  return {{"dim", std::vector<int32_t>{0}}, {"keep_dim", false}, {"reduce_all", false}};
}

void RegisterReductions(OpRegistry& registry) {
  struct Kind {
    const char* name;
    const char* summary;
    bool boolean;
    bool grad;
  };
  const Kind kinds[] = {
      {"reduce_max", "max over `dim` (every dim with reduce_all)", false, true},
      {"reduce_min", "min over `dim` (every dim with reduce_all)", false, true},
      {"reduce_prod", "product over `dim` (every dim with reduce_all)", false, true},
      {"reduce_any", "logical or over `dim` (bool)", true, false},
      {"reduce_all", "logical and over `dim` (bool)", true, false},
  };
  for (const Kind& k : kinds) {
    const std::string type = k.name;
    const std::string grad_type = type + "_grad";
    OpSchema s;
    s.type = type;
    s.summary = k.summary;
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = ReduceAttrs();
    if (k.boolean) {
      s.infer_shape = [](ShapeContext& c) -> Status {
        FLEET_RETURN_IF_ERROR(RequireDtype(c, "X", IsBool, "bool"));
        return InferReduceShape(c);
      };
    } else {
      s.infer_shape = [](ShapeContext& c) -> Status {
        FLEET_RETURN_IF_ERROR(RequireDtype(c, "X", IsNumeric, kNumeric));
        return InferReduceShape(c);
      };
    }
    if (k.grad) {
      s.grad = [grad_type](const ir::Op& fwd) {
        return std::vector<ir::Op>{MakeGradOp(fwd, grad_type, {"X"}, {"Out"}, {"Out"}, {"X"})};
      };
    }
    RegisterBuiltin(registry, std::move(s));
    if (!k.grad) continue;
    OpSchema g;
    g.type = grad_type;
    g.summary = type == "reduce_prod"
                    ? "X@GRAD = Out@GRAD times the product of the other elements of the group"
                    : "X@GRAD = Out@GRAD where X equals Out (every tied element), else 0";
    g.inputs = {{"X"}, {"Out"}, {"Out@GRAD"}};
    g.outputs = {{"X@GRAD"}};
    g.attrs = ReduceAttrs();
    g.infer_shape = [](ShapeContext& c) -> Status {
      FLEET_RETURN_IF_ERROR(RequireDtype(c, "Out@GRAD", IsFloat, kFloats));
      return SameShapeAs(c, "X@GRAD", "X");
    };
    g.kernel_dtype_slot = "Out@GRAD";
    RegisterBuiltin(registry, std::move(g));
  }
}

Status InferArg(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireDtype(c, "X", IsNumeric, kNumeric));
  const TensorInfo& x = c.Input("X");
  const int64_t dtype = c.IntAttr("dtype");
  TensorInfo out;
  if (dtype == -1 || dtype == FLEET_DTYPE_INT64) {
    out.dtype = ir::DataType::kInt64;
  } else if (dtype == FLEET_DTYPE_INT32) {
    out.dtype = ir::DataType::kInt32;
  } else {
    return c.Error("dtype " + std::to_string(dtype) +
                   " is not int64 (6, or Paddle's default -1) or int32 (5)");
  }
  if (c.BoolAttr("flatten")) {
    for (int64_t d : x.dims) {
      if (d == 0) return c.Error("X " + ir::ShapeText(x.dims) + " is empty; it has no arg");
    }
    out.dims = {1};
  } else {
    FLEET_ASSIGN_OR_RETURN(int64_t axis, AxisOf(c, "axis"));
    if (x.dims[static_cast<size_t>(axis)] == 0) {
      return c.Error("axis " + std::to_string(axis) + " of X " + ir::ShapeText(x.dims) +
                     " is empty; it has no arg");
    }
    out.dims = DropAxis(x.dims, axis, c.BoolAttr("keepdims"));
  }
  c.Output("Out") = out;
  return OkStatus();
}

void RegisterArgs(OpRegistry& registry) {
  for (const char* name : {"arg_max", "arg_min"}) {
    OpSchema s;
    s.type = name;
    s.summary = std::string("index of the ") + (name == std::string("arg_max") ? "max" : "min") +
                " along axis (first on ties), int64 or int32 by dtype";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"axis", int64_t{0}},
               {"keepdims", false},
               {"flatten", false},
               {"dtype", int32_t{-1}}};
    s.infer_shape = InferArg;
    s.kernel_dtype_slot = "X";
    RegisterBuiltin(registry, std::move(s));
  }

  OpSchema s;
  s.type = "argsort";
  s.summary = "X sorted along axis (stable; NaN last) into Out, with the int64 source indices";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}, {"Indices"}};
  s.attrs = {{"axis", int32_t{-1}}, {"descending", false}};
  s.infer_shape = [](ShapeContext& c) -> Status {
    FLEET_RETURN_IF_ERROR(RequireDtype(c, "X", IsNumeric, kNumeric));
    FLEET_ASSIGN_OR_RETURN(int64_t axis, AxisOf(c, "axis"));
    (void)axis;
    SetOutputIfPresent(c, "Out", c.Input("X"));
    SetOutputIfPresent(c, "Indices", TensorInfo{ir::DataType::kInt64, c.Input("X").dims});
    return OkStatus();
  };
  s.kernel_dtype_slot = "X";
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{MakeGradOp(fwd, "argsort_grad", {"X"}, {"Indices"}, {"Out"},
                                          {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "argsort_grad";
  g.summary = "X@GRAD[Indices[i]] = Out@GRAD[i] along axis";
  g.inputs = {{"X"}, {"Indices"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD"}};
  g.attrs = {{"axis", int32_t{-1}}, {"descending", false}};
  g.infer_shape = [](ShapeContext& c) -> Status {
    FLEET_RETURN_IF_ERROR(RequireDtype(c, "Out@GRAD", IsFloat, kFloats));
    FLEET_ASSIGN_OR_RETURN(int64_t axis, AxisOf(c, "axis"));
    (void)axis;
    return SameShapeAs(c, "X@GRAD", "X");
  };
  g.kernel_dtype_slot = "Out@GRAD";
  RegisterBuiltin(registry, std::move(g));
}

Status InferPNorm(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireDtype(c, "X", IsFloat, kFloats));
  const TensorInfo& x = c.Input("X");
  TensorInfo out{x.dtype, {}};
  if (c.BoolAttr("asvector")) {
    out.dims.assign(c.BoolAttr("keepdim") ? x.dims.size() : 1, 1);
    if (out.dims.empty()) out.dims.push_back(1);
  } else {
    FLEET_ASSIGN_OR_RETURN(int64_t axis, AxisOf(c, "axis"));
    out.dims = DropAxis(x.dims, axis, c.BoolAttr("keepdim"));
  }
  c.Output("Out") = out;
  return OkStatus();
}

void RegisterPNorm(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"porder", 2.0f},
                                       {"axis", int32_t{-1}},
                                       {"epsilon", 1.0e-12f},
                                       {"keepdim", false},
                                       {"asvector", false}};
  OpSchema s;
  s.type = "p_norm";
  s.summary = "the porder-norm of X along axis (every element with asvector); porder 0 counts "
              "non-zeros, +-inf takes max / min |x|";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = attrs;
  s.infer_shape = InferPNorm;
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{MakeGradOp(fwd, "p_norm_grad", {"X"}, {"Out"}, {"Out"}, {"X"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "p_norm_grad";
  g.summary = "X@GRAD = dOut * sign(x) * |x|^(p-1) / (Out^(p-1) + epsilon) (Paddle's rule)";
  g.inputs = {{"X"}, {"Out"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD"}};
  g.attrs = attrs;
  g.infer_shape = [](ShapeContext& c) -> Status {
    FLEET_RETURN_IF_ERROR(RequireDtype(c, "Out@GRAD", IsFloat, kFloats));
    return SameShapeAs(c, "X@GRAD", "X");
  };
  g.kernel_dtype_slot = "Out@GRAD";
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterReduceExtOps(OpRegistry& registry) {
  RegisterReductions(registry);
  RegisterArgs(registry);
  RegisterPNorm(registry);
}

}  // namespace fleet::ops::math
