// More optimizer ops with Paddle's slots and attributes (adagrad, rmsprop, lamb, adamax) and the
// per-tensor clipping op clip_by_norm. Update rules: plugins/common/optimizer_formulas.h. As
// for the other update ops, every output may be the input it updates (ParamOut == Param, ...),
// which is how the optimizers emit them; none is differentiable.
#include <string>

#include "ops/op_registry.h"

namespace fleet::ops {
namespace {

bool IsFloat(ir::DataType t) {
  return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64;
}

bool SameShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  }
  return true;
}

Status LikeParam(const ShapeContext& c, std::string_view slot) {
  const TensorInfo& p = c.Input("Param");
  const TensorInfo& t = c.Input(slot);
  if (t.dtype != p.dtype) {
    return c.Error(std::string(slot) + " is " + std::string(ir::DataTypeName(t.dtype)) +
                   " but Param is " + std::string(ir::DataTypeName(p.dtype)));
  }
  const std::vector<int64_t> shape = DeclaredShape(t);  // a sparse Grad's dense shape
  if (!SameShape(shape, p.dims)) {
    return c.Error(std::string(slot) + " has shape " + ir::ShapeText(shape) + " but Param has " +
                   ir::ShapeText(p.dims));
  }
  return OkStatus();
}

Status OneElement(const ShapeContext& c, std::string_view slot) {
  const TensorInfo& t = c.Input(slot);
  if (!IsFloat(t.dtype)) {
    return c.Error(std::string(slot) + " must be float32 or float64, not " +
                   std::string(ir::DataTypeName(t.dtype)));
  }
  const int64_t n = ir::KnownNumel(t.dims);
  if (n >= 0 && n != 1) {
    return c.Error(std::string(slot) + " must hold one element, but has shape " +
                   ir::ShapeText(t.dims));
  }
  return OkStatus();
}

Status ParamGradRate(const ShapeContext& c) {
  if (!IsFloat(c.Input("Param").dtype)) {
    return c.Error("Param must be float32 or float64, not " +
                   std::string(ir::DataTypeName(c.Input("Param").dtype)));
  }
  FLEET_RETURN_IF_ERROR(LikeParam(c, "Grad"));
  return OneElement(c, "LearningRate");
}

Status Positive(const ShapeContext& c, const char* attr) {
  const double v = c.FloatAttr(attr);
  if (!(v > 0)) return c.Error(std::string(attr) + " must be positive, got " + std::to_string(v));
  return OkStatus();
}

Status InUnit(const ShapeContext& c, const char* attr) {
  const double v = c.FloatAttr(attr);
  if (!(v >= 0 && v < 1)) {
    return c.Error(std::string(attr) + " must be in [0, 1), got " + std::to_string(v));
  }
  return OkStatus();
}

void Forward(ShapeContext& c, std::string_view in, std::string_view out) {
  if (c.HasOutput(out) && c.HasInput(in)) c.Output(out) = c.Input(in);
}

void RegisterAdagrad(OpRegistry& registry) {
  OpSchema s;
  s.type = "adagrad";
  s.summary =
      "MomentOut = Moment + Grad^2; ParamOut = Param - LearningRate * Grad / (sqrt(MomentOut) "
      "+ epsilon)";
  s.inputs = {{"Param"}, {"Grad"}, {"Moment"}, {"LearningRate"}};
  s.outputs = {{"ParamOut"}, {"MomentOut"}};
  s.attrs = {{"epsilon", 1e-6f}};
  s.kernel_dtype_slot = "Param";
  s.selected_rows_inputs = {"Grad"};  // the listed rows move; others have a zero gradient
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(ParamGradRate(c));
    FLEET_RETURN_IF_ERROR(LikeParam(c, "Moment"));
    FLEET_RETURN_IF_ERROR(Positive(c, "epsilon"));
    Forward(c, "Param", "ParamOut");
    Forward(c, "Moment", "MomentOut");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

void RegisterRmsprop(OpRegistry& registry) {
  OpSchema s;
  s.type = "rmsprop";
  s.summary =
      "MeanSquareOut = decay * MeanSquare + (1 - decay) * Grad^2; centered: MeanGradOut = "
      "decay * MeanGrad + (1 - decay) * Grad, MomentOut = momentum * Moment + LearningRate * "
      "Grad / sqrt(MeanSquareOut - MeanGradOut^2 + epsilon), else / sqrt(MeanSquareOut + "
      "epsilon); ParamOut = Param - MomentOut";
  s.inputs = {{"Param"},    {"MeanSquare"},   {"Grad"},
              {"Moment"},   {"LearningRate"}, {"MeanGrad", /*optional=*/true}};
  s.outputs = {{"ParamOut"}, {"MomentOut"}, {"MeanSquareOut"}, {"MeanGradOut", true}};
  s.attrs = {{"decay", 0.9f}, {"epsilon", 1e-10f}, {"momentum", 0.0f}, {"centered", false}};
  s.kernel_dtype_slot = "Param";
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(ParamGradRate(c));
    FLEET_RETURN_IF_ERROR(LikeParam(c, "MeanSquare"));
    FLEET_RETURN_IF_ERROR(LikeParam(c, "Moment"));
    if (c.BoolAttr("centered")) {
      if (!c.HasInput("MeanGrad") || !c.HasOutput("MeanGradOut")) {
        return c.Error("centered needs the MeanGrad input and the MeanGradOut output");
      }
      FLEET_RETURN_IF_ERROR(LikeParam(c, "MeanGrad"));
    }
    FLEET_RETURN_IF_ERROR(InUnit(c, "decay"));
    FLEET_RETURN_IF_ERROR(Positive(c, "epsilon"));
    if (c.FloatAttr("momentum") < 0) return c.Error("momentum must not be negative");
    Forward(c, "Param", "ParamOut");
    Forward(c, "Moment", "MomentOut");
    Forward(c, "MeanSquare", "MeanSquareOut");
    Forward(c, "MeanGrad", "MeanGradOut");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

void RegisterLamb(OpRegistry& registry) {
  OpSchema s;
  s.type = "lamb";
  s.summary =
      "Moment1Out/Moment2Out as adam; r = (Moment1Out / (1 - Beta1Pow)) / (sqrt(Moment2Out / "
      "(1 - Beta2Pow)) + epsilon) + weight_decay * Param; ParamOut = Param - LearningRate * "
      "(||Param|| / ||r||) * r over the whole parameter (ratio 1 when a norm is 0); "
      "BetaNPowOut = BetaNPow * betaN";
  s.inputs = {{"Param"},   {"Grad"},     {"LearningRate"}, {"Moment1"},
              {"Moment2"}, {"Beta1Pow"}, {"Beta2Pow"}};
  s.outputs = {{"ParamOut"},
               {"Moment1Out"},
               {"Moment2Out"},
               {"Beta1PowOut", true},
               {"Beta2PowOut", true}};
  s.attrs = {{"weight_decay", 0.01f}, {"beta1", 0.9f}, {"beta2", 0.999f}, {"epsilon", 1e-6f}};
  s.kernel_dtype_slot = "Param";
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(ParamGradRate(c));
    FLEET_RETURN_IF_ERROR(LikeParam(c, "Moment1"));
    FLEET_RETURN_IF_ERROR(LikeParam(c, "Moment2"));
    FLEET_RETURN_IF_ERROR(OneElement(c, "Beta1Pow"));
    FLEET_RETURN_IF_ERROR(OneElement(c, "Beta2Pow"));
    FLEET_RETURN_IF_ERROR(InUnit(c, "beta1"));
    FLEET_RETURN_IF_ERROR(InUnit(c, "beta2"));
    FLEET_RETURN_IF_ERROR(Positive(c, "epsilon"));
    if (c.FloatAttr("weight_decay") < 0) return c.Error("weight_decay must not be negative");
    Forward(c, "Param", "ParamOut");
    Forward(c, "Moment1", "Moment1Out");
    Forward(c, "Moment2", "Moment2Out");
    Forward(c, "Beta1Pow", "Beta1PowOut");
    Forward(c, "Beta2Pow", "Beta2PowOut");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

void RegisterAdamax(OpRegistry& registry) {
  OpSchema s;
  s.type = "adamax";
  s.summary =
      "MomentOut = beta1 * Moment + (1 - beta1) * Grad; InfNormOut = max(beta2 * InfNorm + "
      "epsilon, |Grad|); ParamOut = Param - LearningRate / (1 - Beta1Pow) * MomentOut / "
      "InfNormOut (Beta1Pow is advanced by a separate scale op)";
  s.inputs = {{"Param"}, {"Grad"}, {"LearningRate"}, {"Moment"}, {"InfNorm"}, {"Beta1Pow"}};
  s.outputs = {{"ParamOut"}, {"MomentOut"}, {"InfNormOut"}};
  s.attrs = {{"beta1", 0.9f}, {"beta2", 0.999f}, {"epsilon", 1e-8f}};
  s.kernel_dtype_slot = "Param";
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(ParamGradRate(c));
    FLEET_RETURN_IF_ERROR(LikeParam(c, "Moment"));
    FLEET_RETURN_IF_ERROR(LikeParam(c, "InfNorm"));
    FLEET_RETURN_IF_ERROR(OneElement(c, "Beta1Pow"));
    FLEET_RETURN_IF_ERROR(InUnit(c, "beta1"));
    FLEET_RETURN_IF_ERROR(InUnit(c, "beta2"));
    FLEET_RETURN_IF_ERROR(Positive(c, "epsilon"));
    Forward(c, "Param", "ParamOut");
    Forward(c, "Moment", "MomentOut");
    Forward(c, "InfNorm", "InfNormOut");
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

void RegisterClipByNorm(OpRegistry& registry) {
  OpSchema s;
  s.type = "clip_by_norm";
  s.summary = "Out = X * max_norm / ||X|| when ||X|| (the L2 norm of all of X) > max_norm, else X";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  s.attrs = {{"max_norm", 1.0f}};
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("X");
    if (!IsFloat(x.dtype)) {
      return c.Error("X must be float32 or float64, not " +
                     std::string(ir::DataTypeName(x.dtype)));
    }
    FLEET_RETURN_IF_ERROR(Positive(c, "max_norm"));
    c.Output("Out") = x;
    return OkStatus();
  };
  RegisterBuiltin(registry, std::move(s));
}

}  // namespace

void RegisterOptimizerExtOps(OpRegistry& registry) {
  RegisterAdagrad(registry);
  RegisterRmsprop(registry);
  RegisterLamb(registry);
  RegisterAdamax(registry);
  RegisterClipByNorm(registry);
}

}  // namespace fleet::ops
