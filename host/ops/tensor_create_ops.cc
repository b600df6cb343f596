// Creation and conversion ops: cast, assign, fill_constant, fill_any_like, fill_zeros_like,
// uniform_random, gaussian_random, truncated_gaussian_random, increment.
//
// Dtype attributes (cast's in_dtype/out_dtype, the fills' and initializers' dtype) hold
// FLEET_DTYPE_* values (float32 = 9, float64 = 10, int64 = 6, int32 = 5, bool = 1), not
// Paddle's VarType numbers; a frontend reading a Paddle program translates them.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "ops/op_registry.h"
#include "ops/tensor_ops_util.h"

namespace fleet::ops::tensor_ops {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

std::string DtypeText(int64_t v) {
  if (!IsValidDtype(v)) return Str(v);
  return std::string(ir::DataTypeName(static_cast<ir::DataType>(v))) + " (" + Str(v) + ")";
}

// The dims of a creation op's `shape` attribute; every entry must be known and >= 0.
StatusOr<std::vector<int64_t>> CreationShape(const ShapeContext& c) {
  std::vector<int64_t> shape = c.IntsAttr("shape");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return c.Error("shape " + ir::ShapeText(shape) + " has a negative entry at " +
                     Str(static_cast<int64_t>(i)) + "; a created tensor needs known dims");
    }
  }
  return shape;
}

StatusOr<ir::DataType> DtypeAttr(const ShapeContext& c, std::string_view name) {
  const int64_t v = c.IntAttr(name);
  if (!IsValidDtype(v)) {
    return c.Error(std::string(name) + " = " + Str(v) + " is not a FLEET_DTYPE_* value (" +
                   "float32 = 9, float64 = 10, int64 = 6, int32 = 5, bool = 1)");
  }
  return static_cast<ir::DataType>(v);
}

Status CheckFloatDtype(const ShapeContext& c, ir::DataType t) {
  if (t != ir::DataType::kFloat32 && t != ir::DataType::kFloat64) {
    return c.Error("dtype " + DtypeText(static_cast<int64_t>(t)) +
                   " is not supported; use float32 (9) or float64 (10)");
  }
  return OkStatus();
}

Status InferCast(ShapeContext& c) {
  const TensorInfo& x = c.Input("X");
  FLEET_ASSIGN_OR_RETURN(ir::DataType out, DtypeAttr(c, "out_dtype"));
  const int64_t in = c.IntAttr("in_dtype");
  if (in >= 0 && in != static_cast<int64_t>(x.dtype)) {
    return c.Error("in_dtype is " + DtypeText(in) + " but X is " +
                   DtypeText(static_cast<int64_t>(x.dtype)));
  }
  c.Output("Out") = {out, x.dims};
  return OkStatus();
}

Status InferFillConstant(ShapeContext& c) {
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> shape, CreationShape(c));
  FLEET_ASSIGN_OR_RETURN(ir::DataType dtype, DtypeAttr(c, "dtype"));
  const std::string text = c.StringAttr("str_value");
  if (!text.empty()) {
    char* end = nullptr;
    errno = 0;
    (void)std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0') {
      return c.Error("str_value '" + text + "' is not a number");
    }
  }
  c.Output("Out") = {dtype, std::move(shape)};
  return OkStatus();
}

Status InferRandom(ShapeContext& c, const char* lo_name, const char* hi_name) {
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> shape, CreationShape(c));
  FLEET_ASSIGN_OR_RETURN(ir::DataType dtype, DtypeAttr(c, "dtype"));
  FLEET_RETURN_IF_ERROR(CheckFloatDtype(c, dtype));
  if (c.FloatAttr(lo_name) > c.FloatAttr(hi_name)) {
    return c.Error(std::string(lo_name) + " (" + std::to_string(c.FloatAttr(lo_name)) +
                   ") is greater than " + hi_name + " (" + std::to_string(c.FloatAttr(hi_name)) +
                   ")");
  }
  c.Output("Out") = {dtype, std::move(shape)};
  return OkStatus();
}

// range: Out = [Start, Start + Step, ...) up to End, its length fixed by the three values.
Status InferRange(ShapeContext& c) {
  const ir::DataType t = c.Input("Start").dtype;
  if (t != ir::DataType::kFloat32 && t != ir::DataType::kFloat64 &&
      t != ir::DataType::kInt32 && t != ir::DataType::kInt64) {
    return c.Error("Start must be float32, float64, int32 or int64");
  }
  double v[3] = {0, 0, 0};
  bool known = true;
  const char* slots[3] = {"Start", "End", "Step"};
  for (int i = 0; i < 3; ++i) {
    const TensorInfo& in = c.Input(slots[i]);
    if (in.dtype != t) return c.Error(std::string(slots[i]) + " must have Start's dtype");
    if (ProductOrUnknown(in.dims, 0, in.dims.size()) != 1) {
      return c.Error(std::string(slots[i]) + " must hold one value, got " +
                     ir::ShapeText(in.dims));
    }
    const std::vector<double>* value = c.InputValue(slots[i]);
    if (value == nullptr) {
      known = false;
    } else {
      v[i] = (*value)[0];
    }
  }
  if (!known) {
    if (!c.values_tracked) {
      c.Output("Out") = TensorInfo{t, {-1}};
      return OkStatus();
    }
    return c.Error("the length of Out depends on the values of Start, End and Step, so they must "
                   "be fixed before the run (written by fill_constant in this program)");
  }
  const bool integral = t == ir::DataType::kInt32 || t == ir::DataType::kInt64;
  if (integral) {
    for (double& x : v) x = std::trunc(x);
  }
  const double start = v[0], end = v[1], step = v[2];
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    return c.Error("Step must be non-zero and Start, End, Step finite");
  }
  if ((start < end && step < 0) || (start > end && step > 0)) {
    return c.Error("Step " + std::to_string(step) + " moves away from End " +
                   std::to_string(end) + " starting at " + std::to_string(start));
  }
  const double count = std::ceil(std::fabs((end - start) / step));
  // Out is allocated from this count: a program must not be able to ask for an absurd one.
  constexpr double kMaxCount = 2147483647.0;
  if (count > kMaxCount) {
    return c.Error("Out would hold " + std::to_string(count) + " elements, more than " +
                   std::to_string(static_cast<int64_t>(kMaxCount)));
  }
  c.Output("Out") = TensorInfo{t, {static_cast<int64_t>(count)}};
  return OkStatus();
}

Status InferSameAsX(ShapeContext& c) {
  c.Output("Out") = c.Input("X");
  return OkStatus();
}

}  // namespace

void RegisterTensorCreateOps(OpRegistry& registry) {
  {
    OpSchema s;
    s.type = "cast";
    s.summary = "Out = X converted to out_dtype (FLEET_DTYPE_* value; in_dtype -1 = X's dtype)";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"in_dtype", int32_t{-1}}, {"out_dtype", int32_t{FLEET_DTYPE_FLOAT32}}};
    s.infer_shape = InferCast;
    s.lod_share = {{"Out", "X"}};
    // Paddle: the gradient is a cast back. Without in_dtype the grad op cannot know X's dtype
    // from attributes alone, so cast_grad reads it from X.
    s.grad = [](const ir::Op& fwd) {
      const ir::Attribute* in_attr = fwd.FindAttr("in_dtype");
      const ir::Attribute* out_attr = fwd.FindAttr("out_dtype");
      const int64_t in = in_attr != nullptr ? ir::AttrAsInt(*in_attr).value_or(-1) : -1;
      constexpr int64_t kDefaultOut = FLEET_DTYPE_FLOAT32;
      const int64_t out =
          out_attr != nullptr ? ir::AttrAsInt(*out_attr).value_or(kDefaultOut) : kDefaultOut;
      ir::Op g;
      g.inputs["Out@GRAD"] = {ir::GradVarName(fwd.OutputOne("Out"))};
      g.outputs["X@GRAD"] = {ir::GradVarName(fwd.InputOne("X"))};
      if (in >= 0) {
        g.type = "cast";
        g.inputs["X"] = g.inputs["Out@GRAD"];
        g.inputs.erase("Out@GRAD");
        g.outputs["Out"] = g.outputs["X@GRAD"];
        g.outputs.erase("X@GRAD");
        g.attrs["in_dtype"] = static_cast<int32_t>(out);
        g.attrs["out_dtype"] = static_cast<int32_t>(in);
      } else {
        g.type = "cast_grad";
        g.inputs["X"] = fwd.Input("X");
      }
      return std::vector<ir::Op>{std::move(g)};
    };
    RegisterBuiltin(registry, std::move(s));

    OpSchema g;
    g.type = "cast_grad";
    g.summary = "X@GRAD = Out@GRAD converted to X's dtype (cast's gradient when in_dtype is "
                "not set)";
    g.inputs = {{"X", false, false, true}, {"Out@GRAD"}};
    g.outputs = {{"X@GRAD"}};
    g.kernel_dtype_slot = "Out@GRAD";
    g.lod_share = {{"X@GRAD", "X"}, {"", "Out@GRAD"}};
    g.infer_shape = [](ShapeContext& c) -> Status {
      if (c.HasOutput("X@GRAD")) c.Output("X@GRAD") = c.Input("X");
      return OkStatus();
    };
    RegisterBuiltin(registry, std::move(g));
  }
  {
    OpSchema s;
    s.type = "assign";
    s.summary = "Out = X (a copy)";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.infer_shape = InferSameAsX;
    s.grad = [](const ir::Op& fwd) {
      ir::Op g;
      g.type = "assign";
      g.inputs["X"] = {ir::GradVarName(fwd.OutputOne("Out"))};
      g.outputs["Out"] = {ir::GradVarName(fwd.InputOne("X"))};
      return std::vector<ir::Op>{std::move(g)};
    };
    RegisterBuiltin(registry, std::move(s));
  }
  {
    OpSchema s;
    s.type = "fill_constant";
    s.summary = "Out = a tensor of `shape` and `dtype` (FLEET_DTYPE_*) filled with value "
                "(str_value, when set, wins and keeps int64 values exact)";
    s.outputs = {{"Out"}};
    s.attrs = {{"shape", std::vector<int64_t>{}},
               {"value", 0.0f},
               {"str_value", std::string()},
               {"dtype", int32_t{FLEET_DTYPE_FLOAT32}},
               {"force_cpu", false}};
    s.kernel_dtype_slot = "Out";
    s.infer_shape = InferFillConstant;
    RegisterBuiltin(registry, std::move(s));
  }
  {
    OpSchema s;
    s.type = "range";
    s.summary = "Out = [Start, Start + Step, Start + 2 Step, ...) while before End; Start, End "
                "and Step hold one value each, fixed before the run (fill_constant)";
    s.inputs = {{"Start", false, false, true}, {"End", false, false, true},
                {"Step", false, false, true}};
    s.outputs = {{"Out"}};
    s.kernel_dtype_slot = "Start";
    s.infer_shape = InferRange;
    RegisterBuiltin(registry, std::move(s));
  }
  {
    OpSchema s;
    s.type = "fill_any_like";
    s.summary = "Out = a tensor shaped like X filled with value; dtype -1 = X's dtype";
    s.inputs = {{"X", false, false, true}};
    s.outputs = {{"Out"}};
    s.attrs = {{"value", 0.0f}, {"dtype", int32_t{-1}}};
    s.kernel_dtype_slot = "Out";
    s.infer_shape = [](ShapeContext& c) -> Status {
      TensorInfo out = c.Input("X");
      if (c.IntAttr("dtype") != -1) {
        FLEET_ASSIGN_OR_RETURN(out.dtype, DtypeAttr(c, "dtype"));
      }
      c.Output("Out") = std::move(out);
      return OkStatus();
    };
    RegisterBuiltin(registry, std::move(s));
  }
  {
    OpSchema s;
    s.type = "fill_zeros_like";
    s.summary = "Out = zeros shaped like X";
    s.inputs = {{"X", false, false, true}};
    s.outputs = {{"Out"}};
    s.infer_shape = InferSameAsX;
    RegisterBuiltin(registry, std::move(s));
  }
  {
    OpSchema s;
    s.type = "uniform_random";
    s.summary = "Out = uniform samples in [min, max) from seed (0 = the executor's per-op "
                "seed); diag_num > 0 sets diag_num diagonal entries to diag_val";
    s.outputs = {{"Out"}};
    s.attrs = {{"shape", std::vector<int64_t>{}},
               {"min", -1.0f},
               {"max", 1.0f},
               {"seed", int32_t{0}},
               {"dtype", int32_t{FLEET_DTYPE_FLOAT32}},
               {"diag_num", int32_t{0}},
               {"diag_step", int32_t{0}},
               {"diag_val", 1.0f}};
    s.kernel_dtype_slot = "Out";
    s.infer_shape = [](ShapeContext& c) { return InferRandom(c, "min", "max"); };
    RegisterBuiltin(registry, std::move(s));
  }
  // gaussian_random and its truncated form share attributes and shape rules; only the sampler
  // (in the kernel) differs.
  for (const auto& [type, summary] :
       {std::pair{"gaussian_random", "Out = normal samples with mean and std from seed (0 = the "
                                     "executor's per-op seed)"},
        std::pair{"truncated_gaussian_random",
                  "Out = normal samples with mean and std, redrawn until within 2 std of the "
                  "mean, from seed (0 = the executor's per-op seed)"}}) {
    OpSchema s;
    s.type = type;
    s.summary = summary;
    s.outputs = {{"Out"}};
    s.attrs = {{"shape", std::vector<int64_t>{}},
               {"mean", 0.0f},
               {"std", 1.0f},
               {"seed", int32_t{0}},
               {"dtype", int32_t{FLEET_DTYPE_FLOAT32}}};
    s.kernel_dtype_slot = "Out";
    s.infer_shape = [](ShapeContext& c) -> Status {
      if (c.FloatAttr("std") < 0) {
        return c.Error("std " + std::to_string(c.FloatAttr("std")) + " is negative");
      }
      return InferRandom(c, "mean", "mean");
    };
    RegisterBuiltin(registry, std::move(s));
  }
  {
    OpSchema s;
    s.type = "increment";
    s.summary = "Out = X + step for a one-element X (step counters)";
    s.inputs = {{"X"}};
    s.outputs = {{"Out"}};
    s.attrs = {{"step", 1.0f}};
    s.infer_shape = [](ShapeContext& c) -> Status {
      const TensorInfo& x = c.Input("X");
      const int64_t n = ir::KnownNumel(x.dims);
      if (n >= 0 && n != 1) {
        return c.Error("X must hold exactly one element, but has shape " + ir::ShapeText(x.dims));
      }
      c.Output("Out") = x;
      return OkStatus();
    };
    RegisterBuiltin(registry, std::move(s));
  }
}

}  // namespace fleet::ops::tensor_ops
