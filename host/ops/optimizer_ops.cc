// Optimizer ops (Paddle's sgd, momentum, adam, adamw), the global-norm clipping helper
// squared_l2_norm, sparse_weight_decay and the learning-rate schedule op lr_schedule. None is
// differentiable: they run after the backward pass. Every update op may write its outputs in place (ParamOut ==
// Param, VelocityOut == Velocity, ...), which is how the optimizers emit them.
#include <string>

#include "ops/op_registry.h"

namespace fleet::ops {
namespace {

bool IsFloat(ir::DataType t) {
  return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64;
}

// Same rank and equal known dims.
bool SameShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  }
  return true;
}

// `slot` must be a float tensor shaped like Param; a sparse gradient (selected_rows) must stand
// for one.
Status CheckLikeParam(const ShapeContext& c, std::string_view slot) {
  const TensorInfo& p = c.Input("Param");
  const TensorInfo& t = c.Input(slot);
  if (t.dtype != p.dtype) {
    return c.Error(std::string(slot) + " is " + std::string(ir::DataTypeName(t.dtype)) +
                   " but Param is " + std::string(ir::DataTypeName(p.dtype)));
  }
  const std::vector<int64_t> shape = DeclaredShape(t);
  if (!SameShape(shape, p.dims)) {
    return c.Error(std::string(slot) + " has shape " + ir::ShapeText(shape) + " but Param has " +
                   ir::ShapeText(p.dims));
  }
  return OkStatus();
}

// `slot` must be a float tensor of one element (a learning rate, a beta power).
Status CheckOneElement(const ShapeContext& c, std::string_view slot) {
  const TensorInfo& t = c.Input(slot);
  if (!IsFloat(t.dtype)) {
    return c.Error(std::string(slot) + " must be float32 or float64, not " +
                   std::string(ir::DataTypeName(t.dtype)));
  }
  int64_t n = ir::KnownNumel(t.dims);
  if (n >= 0 && n != 1) {
    return c.Error(std::string(slot) + " must hold one element, but has shape " +
                   ir::ShapeText(t.dims));
  }
  return OkStatus();
}

Status CheckParam(const ShapeContext& c) {
  if (!IsFloat(c.Input("Param").dtype)) {
    return c.Error("Param must be float32 or float64, not " +
                   std::string(ir::DataTypeName(c.Input("Param").dtype)));
  }
  FLEET_RETURN_IF_ERROR(CheckLikeParam(c, "Grad"));
  return CheckOneElement(c, "LearningRate");
}

// Sets output `out` to the info of input `in` when the op writes it.
void Forward(ShapeContext& c, std::string_view in, std::string_view out) {
  if (c.HasOutput(out)) c.Output(out) = c.Input(in);
}

void RegisterSgd(OpRegistry& registry) {
  OpSchema s;
  s.type = "sgd";
  s.summary = "ParamOut = Param - LearningRate * Grad";
  s.inputs = {{"Param"}, {"LearningRate"}, {"Grad"}};
  s.outputs = {{"ParamOut"}};
  s.kernel_dtype_slot = "Param";
  s.selected_rows_inputs = {"Grad"};  // updates the listed rows only
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckParam(c));
    Forward(c, "Param", "ParamOut");
    return OkStatus();
  };
  (void)registry.Register(std::move(s));
}

void RegisterMomentum(OpRegistry& registry) {
  OpSchema s;
  s.type = "momentum";
  s.summary =
      "g = rescale_grad * Grad (+ regularization_coeff * Param for l2_decay); "
      "VelocityOut = mu * Velocity + g; ParamOut = Param - LearningRate * VelocityOut, or with "
      "use_nesterov Param - LearningRate * (g + mu * VelocityOut)";
  s.inputs = {{"Param"}, {"Grad"}, {"Velocity"}, {"LearningRate"}};
  s.outputs = {{"ParamOut"}, {"VelocityOut"}};
  s.attrs = {{"mu", 0.9f},
             {"use_nesterov", false},
             {"regularization_method", std::string()},
             {"regularization_coeff", 0.0f},
             {"rescale_grad", 1.0f}};
  s.kernel_dtype_slot = "Param";
  // As Paddle's sparse momentum: every row moves, untouched rows with a zero gradient.
  s.selected_rows_inputs = {"Grad"};
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckParam(c));
    FLEET_RETURN_IF_ERROR(CheckLikeParam(c, "Velocity"));
    std::string method = c.StringAttr("regularization_method");
    if (!method.empty() && method != "l2_decay") {
      return c.Error("regularization_method must be \"\" or \"l2_decay\", not \"" + method +
                     "\"");
    }
    Forward(c, "Param", "ParamOut");
    Forward(c, "Velocity", "VelocityOut");
    return OkStatus();
  };
  (void)registry.Register(std::move(s));
}

// adam and adamw share slots; adamw adds its decoupled weight decay attributes.
void RegisterAdamLike(OpRegistry& registry, bool adamw) {
  OpSchema s;
  s.type = adamw ? "adamw" : "adam";
  s.summary = std::string(adamw ? "Param -= LearningRate * lr_ratio * coeff * Param (with_decay); "
                                  "then " : "") +
              "Moment1Out = beta1 * Moment1 + (1 - beta1) * Grad; Moment2Out = beta2 * Moment2 + "
              "(1 - beta2) * Grad^2; lr_t = LearningRate * sqrt(1 - Beta2Pow) / (1 - Beta1Pow); "
              "ParamOut = Param - lr_t * Moment1Out / (sqrt(Moment2Out) + epsilon * "
              "sqrt(1 - Beta2Pow)); BetaNPowOut = BetaNPow * betaN";
  s.inputs = {{"Param"},   {"Grad"},     {"LearningRate"}, {"Moment1"},
              {"Moment2"}, {"Beta1Pow"}, {"Beta2Pow"}};
  s.outputs = {{"ParamOut"},
               {"Moment1Out"},
               {"Moment2Out"},
               {"Beta1PowOut", /*optional=*/true},
               {"Beta2PowOut", /*optional=*/true}};
  s.attrs = {{"beta1", 0.9f}, {"beta2", 0.999f}, {"epsilon", 1e-8f}, {"lazy_mode", false}};
  if (adamw) {
    s.attrs.push_back({"coeff", 0.01f});
    s.attrs.push_back({"lr_ratio", 1.0f});
    // Paddle's default: the Python AdamW sets it for every parameter it decays.
    s.attrs.push_back({"with_decay", false});
  }
  s.kernel_dtype_slot = "Param";
  // adam only: lazy_mode updates the listed rows and their moments alone; otherwise every row
  // moves, untouched rows with a zero gradient (Paddle's sparse adam).
  if (!adamw) s.selected_rows_inputs = {"Grad"};
  s.infer_shape = [](ShapeContext& c) {
    FLEET_RETURN_IF_ERROR(CheckParam(c));
    FLEET_RETURN_IF_ERROR(CheckLikeParam(c, "Moment1"));
    FLEET_RETURN_IF_ERROR(CheckLikeParam(c, "Moment2"));
    FLEET_RETURN_IF_ERROR(CheckOneElement(c, "Beta1Pow"));
    FLEET_RETURN_IF_ERROR(CheckOneElement(c, "Beta2Pow"));
    for (const char* beta : {"beta1", "beta2"}) {
      double b = c.FloatAttr(beta);
      if (!(b >= 0.0 && b < 1.0)) {
        return c.Error(std::string(beta) + " must be in [0, 1), got " + std::to_string(b));
      }
    }
    Forward(c, "Param", "ParamOut");
    Forward(c, "Moment1", "Moment1Out");
    Forward(c, "Moment2", "Moment2Out");
    Forward(c, "Beta1Pow", "Beta1PowOut");
    Forward(c, "Beta2Pow", "Beta2PowOut");
    return OkStatus();
  };
  (void)registry.Register(std::move(s));
}

void RegisterSquaredL2Norm(OpRegistry& registry) {
  OpSchema s;
  s.type = "squared_l2_norm";
  s.summary = "Out[0] = sum(X * X) (used by gradient clipping by global norm)";
  s.inputs = {{"X"}};
  s.outputs = {{"Out"}};
  // Of a sparse X: the squared norm of the dense tensor it stands for (entries of one row add
  // up before squaring).
  s.selected_rows_inputs = {"X"};
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& x = c.Input("X");
    if (!IsFloat(x.dtype)) {
      return c.Error("X must be float32 or float64, not " +
                     std::string(ir::DataTypeName(x.dtype)));
    }
    c.Output("Out") = TensorInfo{x.dtype, {1}};
    return OkStatus();
  };
  (void)registry.Register(std::move(s));
}

// Regularization of a sparse gradient, as Paddle regularizes one: only the rows it touches
// decay, each once however many entries list it.
void RegisterSparseWeightDecay(OpRegistry& registry) {
  OpSchema s;
  s.type = "sparse_weight_decay";
  s.summary =
      "Out = Grad (selected_rows) with coeff * Param[r] (regularizer l2) or coeff * "
      "sign(Param[r]) (l1) added once to each row r that Grad lists";
  s.inputs = {{"Grad"}, {"Param"}};
  s.outputs = {{"Out"}};
  s.attrs = {{"coeff", 0.0f}, {"regularizer", std::string("l2")}};
  s.kernel_dtype_slot = "Param";
  s.selected_rows_inputs = {"Grad"};
  s.infer_shape = [](ShapeContext& c) {
    if (!c.Input("Grad").selected_rows()) {
      return c.Error("Grad must be a sparse gradient (selected_rows); a dense one decays with "
                     "scale and sum");
    }
    FLEET_RETURN_IF_ERROR(CheckLikeParam(c, "Grad"));
    const std::string kind = c.StringAttr("regularizer");
    if (kind != "l1" && kind != "l2") {
      return c.Error("regularizer must be \"l1\" or \"l2\", not \"" + kind + "\"");
    }
    c.Output("Out") = c.Input("Grad");
    return OkStatus();
  };
  (void)registry.Register(std::move(s));
}

// One op for every schedule, evaluated at the step counter (Paddle builds the same values from
// several small ops). With warmup_steps > 0 the first warmup_steps steps ramp linearly from
// start_lr to end_lr (LinearWarmup), and the schedule `type` then runs on step - warmup_steps.
void RegisterLrSchedule(OpRegistry& registry) {
  OpSchema s;
  s.type = "lr_schedule";
  s.summary =
      "Out[0] = learning rate at step Step[0]: constant (learning_rate); piecewise (values[i] "
      "for the first i with step < boundaries[i], else values.back()); exponential "
      "(learning_rate * gamma^(step / decay_steps), floored with staircase); cosine (eta_min "
      "+ (learning_rate - eta_min) * (1 + cos(pi * step / T_max)) / 2); polynomial, noam, "
      "natural_exp, inverse_time (plugins/common/lr_formulas.h); warmup_steps > 0 puts "
      "a linear ramp start_lr -> end_lr first and shifts the step by warmup_steps";
  s.inputs = {{"Step"}};
  s.outputs = {{"Out"}};
  s.attrs = {{"type", std::string("constant")},
             {"learning_rate", 0.01f},
             {"boundaries", std::vector<int64_t>{}},
             {"values", std::vector<float>{}},
             {"gamma", 1.0f},
             {"decay_steps", int64_t{1}},
             {"staircase", false},
             {"T_max", int64_t{1}},
             {"eta_min", 0.0f},
             {"warmup_steps", int64_t{0}},
             {"start_lr", 0.0f},
             {"end_lr", 0.0f},
             {"end_learning_rate", 0.0001f},
             {"power", 1.0f},
             {"cycle", false},
             {"d_model", 1.0f},
             {"noam_warmup_steps", int64_t{1}},
             {"decay_rate", 0.0f}};
  s.kernel_dtype_slot = "Step";
  s.infer_shape = [](ShapeContext& c) {
    const TensorInfo& step = c.Input("Step");
    if (step.dtype != ir::DataType::kInt64 && !IsFloat(step.dtype)) {
      return c.Error("Step must be int64, float32 or float64, not " +
                     std::string(ir::DataTypeName(step.dtype)));
    }
    int64_t n = ir::KnownNumel(step.dims);
    if (n >= 0 && n != 1) return c.Error("Step must hold one element, got " + ir::ShapeText(step.dims));
    std::string type = c.StringAttr("type");
    if (type == "piecewise") {
      size_t nb = c.IntsAttr("boundaries").size();
      size_t nv = c.FloatsAttr("values").size();
      if (nv != nb + 1) {
        return c.Error("piecewise needs one more value than boundaries, got " +
                       std::to_string(nb) + " boundaries and " + std::to_string(nv) + " values");
      }
    } else if (type == "exponential" || type == "polynomial" || type == "natural_exp" ||
               type == "inverse_time") {
      if (c.IntAttr("decay_steps") <= 0) return c.Error("decay_steps must be positive");
    } else if (type == "noam") {
      if (c.IntAttr("noam_warmup_steps") <= 0) return c.Error("noam_warmup_steps must be positive");
      if (!(c.FloatAttr("d_model") > 0)) return c.Error("d_model must be positive");
    } else if (type == "cosine") {
      if (c.IntAttr("T_max") <= 0) return c.Error("T_max must be positive");
    } else if (type != "constant") {
      return c.Error("unknown schedule type \"" + type +
                     "\" (expected constant, piecewise, exponential, cosine, polynomial, "
                     "noam, natural_exp or inverse_time)");
    }
    if (c.IntAttr("warmup_steps") < 0) return c.Error("warmup_steps must not be negative");
    c.Output("Out") = TensorInfo{ir::DataType::kFloat32, {1}};
    return OkStatus();
  };
  (void)registry.Register(std::move(s));
}

}  // namespace

void RegisterOptimizerOps(OpRegistry& registry) {
  RegisterSgd(registry);
  RegisterMomentum(registry);
  RegisterAdamLike(registry, /*adamw=*/false);
  RegisterAdamLike(registry, /*adamw=*/true);
  RegisterSquaredL2Norm(registry);
  RegisterSparseWeightDecay(registry);
  RegisterLrSchedule(registry);
  RegisterOptimizerExtOps(registry);
}

}  // namespace fleet::ops
