// Comparisons (equal, not_equal, less_than, less_equal, greater_than, greater_equal), logic
// (logical_and / or / xor / not), selection (where, isfinite_v2) and the integer-friendly
// elementwise ops (elementwise_pow, elementwise_mod, elementwise_floordiv).
//
// Comparisons broadcast by Paddle's `axis` rule like elementwise_add and write bool; the binary
// logic ops broadcast NumPy-style (Paddle gives them no axis attribute, so the smaller operand is
// trailing-aligned). where takes three tensors of one shape (Paddle's where op; the Python API
// broadcasts before it). The element formulas are in plugins/common/logic_formulas.h.
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

Status RequireNumeric(const ShapeContext& c, std::string_view slot) {
  const TensorInfo& t = c.Input(slot);
  if (IsNumeric(t.dtype)) return OkStatus();
  return c.Error(std::string(slot) + " is " + Describe(t) +
                 "; expected float32, float64, int32 or int64");
}

Status RequireBool(const ShapeContext& c, std::string_view slot) {
  const TensorInfo& t = c.Input(slot);
  if (t.dtype == ir::DataType::kBool) return OkStatus();
  return c.Error(std::string(slot) + " is " + Describe(t) + "; expected bool");
}

Status InferCompare(ShapeContext& c) {
  // equal and not_equal also compare bool tensors, as Paddle's do.
  const std::string& type = c.op().type;
  const bool eq = type == "equal" || type == "not_equal";
  if (!(eq && c.Input("X").dtype == ir::DataType::kBool)) {
    FLEET_RETURN_IF_ERROR(RequireNumeric(c, "X"));
  }
  FLEET_RETURN_IF_ERROR(InferBroadcastBinary(c, c.IntAttr("axis")));
  c.Output("Out").dtype = ir::DataType::kBool;
  return OkStatus();
}

Status InferLogicalBinary(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireBool(c, "X"));
  FLEET_RETURN_IF_ERROR(RequireBool(c, "Y"));
  return InferBroadcastBinary(c, -1);
}

Status InferLogicalNot(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireBool(c, "X"));
  c.Output("Out") = c.Input("X");
  return OkStatus();
}

Status InferIsFinite(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireNumeric(c, "X"));
  c.Output("Out") = TensorInfo{ir::DataType::kBool, c.Input("X").dims};
  return OkStatus();
}

// Condition, X and Y have one shape (unknown dims agree with anything); Out is X's dtype with
// the known dims of the three.
Status InferWhere(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(RequireBool(c, "Condition"));
  FLEET_RETURN_IF_ERROR(RequireNumeric(c, "X"));
  const TensorInfo& cond = c.Input("Condition");
  const TensorInfo& x = c.Input("X");
  const TensorInfo& y = c.Input("Y");
  if (x.dtype != y.dtype) return c.Error("X is " + Describe(x) + " but Y is " + Describe(y));
  TensorInfo out = x;
  for (const TensorInfo* t : {&cond, &y}) {
    bool ok = t->dims.size() == out.dims.size();
    for (size_t i = 0; ok && i < out.dims.size(); ++i) {
      ok = DimsAgree(out.dims[i], t->dims[i]);
      if (ok && out.dims[i] < 0) out.dims[i] = t->dims[i];
    }
    if (!ok) {
      return c.Error("Condition " + ir::ShapeText(cond.dims) + ", X " + ir::ShapeText(x.dims) +
                     " and Y " + ir::ShapeText(y.dims) + " must have the same shape");
    }
  }
  c.Output("Out") = out;
  return OkStatus();
}

Status InferXYGrads(ShapeContext& c) {
  FLEET_RETURN_IF_ERROR(SameShapeAs(c, "X@GRAD", "X"));
  return SameShapeAs(c, "Y@GRAD", "Y");
}

void RegisterCompare(OpRegistry& registry) {
  const char* const kinds[][2] = {
      {"equal", "Out = (X == Y), broadcast at axis; floats equal within 1e-8 (Paddle's rule); "
                "also bool"},
      {"not_equal", "Out = !(X == Y), broadcast at axis (equal's float rule)"},
      {"less_than", "Out = X < Y, broadcast at axis"},
      {"less_equal", "Out = X <= Y, broadcast at axis"},
      {"greater_than", "Out = X > Y, broadcast at axis"},
      {"greater_equal", "Out = X >= Y, broadcast at axis"},
  };
  for (const auto& k : kinds) {
    OpSchema s;
    s.type = k[0];
    s.summary = k[1];
    s.inputs = {{"X"}, {"Y"}};
    s.outputs = {{"Out"}};
    // force_cpu is accepted for Paddle programs and has no effect: the kernel runs where the op
    // is placed.
    s.attrs = {{"axis", int32_t{-1}}, {"force_cpu", false}};
    s.infer_shape = InferCompare;
    RegisterBuiltin(registry, std::move(s));
  }
}

void RegisterLogic(OpRegistry& registry) {
  const char* const binary[][2] = {
      {"logical_and", "Out = X && Y (bool, NumPy broadcast)"},
      {"logical_or", "Out = X || Y (bool, NumPy broadcast)"},
      {"logical_xor", "Out = X != Y (bool, NumPy broadcast)"},
  };
  for (const auto& k : binary) {
    OpSchema s;
    s.type = k[0];
    s.summary = k[1];
    s.inputs = {{"X"}, {"Y"}};
    s.outputs = {{"Out"}};
    s.infer_shape = InferLogicalBinary;
    RegisterBuiltin(registry, std::move(s));
  }
  OpSchema n;
  n.type = "logical_not";
  n.summary = "Out = !X (bool)";
  n.inputs = {{"X"}};
  n.outputs = {{"Out"}};
  n.infer_shape = InferLogicalNot;
  RegisterBuiltin(registry, std::move(n));

  OpSchema f;
  f.type = "isfinite_v2";
  f.summary = "Out = X is neither inf nor NaN, element-wise (bool)";
  f.inputs = {{"X"}};
  f.outputs = {{"Out"}};
  f.infer_shape = InferIsFinite;
  RegisterBuiltin(registry, std::move(f));
}

void RegisterWhere(OpRegistry& registry) {
  OpSchema s;
  s.type = "where";
  s.summary = "Out = Condition ? X : Y, element-wise over one shape";
  s.inputs = {{"Condition", false, false, /*no_grad=*/true}, {"X"}, {"Y"}};
  s.outputs = {{"Out"}};
  s.infer_shape = InferWhere;
  s.kernel_dtype_slot = "X";
  s.grad = [](const ir::Op& fwd) {
    return std::vector<ir::Op>{
        MakeGradOp(fwd, "where_grad", {"Condition", "X", "Y"}, {}, {"Out"}, {"X", "Y"})};
  };
  RegisterBuiltin(registry, std::move(s));

  OpSchema g;
  g.type = "where_grad";
  g.summary = "X@GRAD = Condition ? Out@GRAD : 0, Y@GRAD = Condition ? 0 : Out@GRAD";
  g.inputs = {{"Condition"}, {"X"}, {"Y"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}, {"Y@GRAD", true}};
  g.infer_shape = InferXYGrads;
  g.kernel_dtype_slot = "Out@GRAD";
  RegisterBuiltin(registry, std::move(g));
}

void RegisterArith(OpRegistry& registry) {
  const char* const kinds[][2] = {
      {"elementwise_pow", "Out = X ^ Y (broadcast at axis)"},
      {"elementwise_mod", "Out = X mod Y with the sign of Y, like Python's % (broadcast at axis)"},
      {"elementwise_floordiv", "Out = floor(X / Y), like Python's // (broadcast at axis)"},
  };
  for (const auto& k : kinds) {
    OpSchema s;
    s.type = k[0];
    s.summary = k[1];
    s.inputs = {{"X"}, {"Y"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"axis", int32_t{-1}}};
    s.infer_shape = [](ShapeContext& c) -> Status {
      FLEET_RETURN_IF_ERROR(RequireNumeric(c, "X"));
      return InferBroadcastBinary(c, c.IntAttr("axis"));
    };
    if (s.type == "elementwise_pow") {
      s.grad = [](const ir::Op& fwd) {
        return std::vector<ir::Op>{
            MakeGradOp(fwd, "elementwise_pow_grad", {"X", "Y"}, {}, {"Out"}, {"X", "Y"})};
      };
    }
    RegisterBuiltin(registry, std::move(s));
  }
  OpSchema g;
  g.type = "elementwise_pow_grad";
  g.summary = "X@GRAD = dOut * Y * X^(Y-1), Y@GRAD = dOut * X^Y * ln X (0 at X = 0), each "
              "summed over its broadcast dims";
  g.inputs = {{"X"}, {"Y"}, {"Out@GRAD"}};
  g.outputs = {{"X@GRAD", true}, {"Y@GRAD", true}};
  g.attrs = {{"axis", int32_t{-1}}};
  g.infer_shape = [](ShapeContext& c) -> Status {
    const TensorInfo& g = c.Input("Out@GRAD");
    if (!IsFloat(g.dtype)) {
      return c.Error("Out@GRAD is " + Describe(g) + "; gradients are float32 or float64");
    }
    return InferXYGrads(c);
  };
  g.kernel_dtype_slot = "Out@GRAD";
  RegisterBuiltin(registry, std::move(g));
}

}  // namespace

void RegisterCompareOps(OpRegistry& registry) {
  RegisterCompare(registry);
  RegisterLogic(registry);
  RegisterWhere(registry);
  RegisterArith(registry);
}

}  // namespace fleet::ops::math
