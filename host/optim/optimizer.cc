// ApplyOptimizer: Paddle's Optimizer.apply_gradients on a static program. Pairs are sorted by
// parameter name; clipping, then regularization, then the learning rate (per-parameter scale)
// and one update op per parameter with its accumulators.
#include <algorithm>
#include <cmath>
#include <set>

#include "optim/emit.h"
#include "support/text.h"

namespace fleet::optim {
namespace {

using internal::Declare;
using internal::FillConstant;
using internal::MakeOp;
using internal::MakeVar;
using internal::UniqueName;

// Validated options of one optimizer type.
struct Options {
  double momentum = 0.9;
  bool use_nesterov = false;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  bool lazy_mode = false;
  double weight_decay = 0.01;
  double initial_accumulator_value = 0.0;  // adagrad
  double rho = 0.95;                       // rmsprop
  bool centered = false;                   // rmsprop
};

const std::vector<std::string>& OptimizerTypes() {
  static const std::vector<std::string> types = {"sgd",     "momentum", "adam", "adamw",
                                                  "adagrad", "rmsprop",  "lamb", "adamax"};
  return types;
}

// adagrad: epsilon, initial_accumulator_value; rmsprop: rho, epsilon, momentum, centered.
Status ParseAdagradRmsprop(const OptimizerSpec& spec, const std::string& what, Options& o) {
  const auto& opts = spec.options;
  if (spec.type == "adagrad") {
    FLEET_RETURN_IF_ERROR(
        internal::CheckNames(opts, {"epsilon", "initial_accumulator_value"}, what));
    FLEET_ASSIGN_OR_RETURN(o.initial_accumulator_value,
                           internal::DoubleOption(opts, "initial_accumulator_value", 0.0, what));
    if (!(o.initial_accumulator_value >= 0)) {
      return InvalidArgument(what + ": initial_accumulator_value must not be negative");
    }
  } else {
    FLEET_RETURN_IF_ERROR(
        internal::CheckNames(opts, {"rho", "epsilon", "momentum", "centered"}, what));
    FLEET_ASSIGN_OR_RETURN(o.rho, internal::DoubleOption(opts, "rho", 0.95, what));
    FLEET_ASSIGN_OR_RETURN(o.momentum, internal::DoubleOption(opts, "momentum", 0.0, what));
    FLEET_ASSIGN_OR_RETURN(o.centered, internal::BoolOption(opts, "centered", false, what));
    if (!(o.rho >= 0 && o.rho < 1)) {
      return InvalidArgument(what + ": rho must be in [0, 1), got " + std::to_string(o.rho));
    }
    if (!(o.momentum >= 0)) {
      return InvalidArgument(what + ": momentum must not be negative, got " +
                             std::to_string(o.momentum));
    }
  }
  FLEET_ASSIGN_OR_RETURN(o.epsilon, internal::DoubleOption(opts, "epsilon", 1e-6, what));
  if (!(o.epsilon > 0)) {
    return InvalidArgument(what + ": epsilon must be positive, got " + std::to_string(o.epsilon));
  }
  return OkStatus();
}

StatusOr<Options> ParseOptions(const OptimizerSpec& spec) {
  const std::string what = "optimizer '" + spec.type + "'";
  Options o;
  const auto& opts = spec.options;
  if (spec.type == "sgd") {
    FLEET_RETURN_IF_ERROR(internal::CheckNames(opts, {}, what));
  } else if (spec.type == "momentum") {
    FLEET_RETURN_IF_ERROR(internal::CheckNames(opts, {"momentum", "use_nesterov"}, what));
    FLEET_ASSIGN_OR_RETURN(o.momentum, internal::DoubleOption(opts, "momentum", 0.9, what));
    FLEET_ASSIGN_OR_RETURN(o.use_nesterov,
                           internal::BoolOption(opts, "use_nesterov", false, what));
    if (o.momentum < 0) {
      return InvalidArgument(what + ": momentum must not be negative, got " +
                             std::to_string(o.momentum));
    }
  } else if (spec.type == "adagrad" || spec.type == "rmsprop") {
    FLEET_RETURN_IF_ERROR(ParseAdagradRmsprop(spec, what, o));
  } else {
    // adam, adamw, lamb and adamax; lamb's weight_decay is Paddle's lamb_weight_decay.
    std::vector<std::string> names = {"beta1", "beta2", "epsilon"};
    if (spec.type == "adam" || spec.type == "adamw") names.push_back("lazy_mode");
    if (spec.type == "adamw" || spec.type == "lamb") names.push_back("weight_decay");
    FLEET_RETURN_IF_ERROR(internal::CheckNames(opts, names, what));
    FLEET_ASSIGN_OR_RETURN(o.beta1, internal::DoubleOption(opts, "beta1", 0.9, what));
    FLEET_ASSIGN_OR_RETURN(o.beta2, internal::DoubleOption(opts, "beta2", 0.999, what));
    const double default_eps = spec.type == "lamb" ? 1e-6 : 1e-8;
    FLEET_ASSIGN_OR_RETURN(o.epsilon,
                           internal::DoubleOption(opts, "epsilon", default_eps, what));
    FLEET_ASSIGN_OR_RETURN(o.lazy_mode, internal::BoolOption(opts, "lazy_mode", false, what));
    FLEET_ASSIGN_OR_RETURN(o.weight_decay,
                           internal::DoubleOption(opts, "weight_decay", 0.01, what));
    for (auto [name, v] : {std::pair{"beta1", o.beta1}, std::pair{"beta2", o.beta2}}) {
      if (!(v >= 0 && v < 1)) {
        return InvalidArgument(what + ": " + name + " must be in [0, 1), got " +
                               std::to_string(v));
      }
    }
    if (!(o.epsilon > 0)) {
      return InvalidArgument(what + ": epsilon must be positive, got " +
                             std::to_string(o.epsilon));
    }
    if (o.weight_decay < 0) {
      return InvalidArgument(what + ": weight_decay must not be negative, got " +
                             std::to_string(o.weight_decay));
    }
  }
  return o;
}

// The declared param and grad of a pair, checked.
Status CheckPair(const ir::Program& main, const autodiff::ParamGrad& pg) {
  const ir::Var* p = main.global().FindVar(pg.param);
  const ir::Var* g = main.global().FindVar(pg.grad);
  if (p == nullptr) {
    return NotFound("optimizer: parameter '" + pg.param + "' is not declared in main");
  }
  if (g == nullptr) {
    return NotFound("optimizer: gradient '" + pg.grad + "' of parameter '" + pg.param +
                    "' is not declared in main");
  }
  if (p->dtype != ir::DataType::kFloat32 && p->dtype != ir::DataType::kFloat64) {
    return InvalidArgument("optimizer: parameter '" + pg.param + "' is " +
                           std::string(ir::DataTypeName(p->dtype)) +
                           "; only float32 and float64 parameters can be optimized");
  }
  if (g->dtype != p->dtype) {
    return InvalidArgument("optimizer: gradient '" + pg.grad + "' is " +
                           std::string(ir::DataTypeName(g->dtype)) + " but parameter '" +
                           pg.param + "' is " + std::string(ir::DataTypeName(p->dtype)));
  }
  for (int64_t d : p->shape) {
    if (d < 0) {
      return InvalidArgument("optimizer: parameter '" + pg.param +
                             "' has an unknown dimension; parameters need fixed shapes");
    }
  }
  return OkStatus();
}

// A sparse gradient goes only where an op takes it: these updates, clipping by global norm and
// regularization.
Status CheckSparsePair(const ir::Program& main, const OptimizerSpec& spec,
                       const autodiff::ParamGrad& pg) {
  const ir::Var* g = main.global().FindVar(pg.grad);
  if (!g->selected_rows) return OkStatus();
  const std::string what = "optimizer: the gradient of '" + pg.param +
                           "' is sparse (an embedding with is_sparse=True), ";
  if (spec.clip_norm > 0 || spec.clip_by_value) {
    return InvalidArgument(what + "which " +
                           (spec.clip_norm > 0 ? "ClipGradByNorm" : "ClipGradByValue") +
                           " does not take; clip by global norm, or use is_sparse=False");
  }
  if (!OptimizerTakesSparseGradients(spec)) {
    return InvalidArgument(what + "which " + spec.type + " does not update; use sgd, momentum, "
                           "adam or adagrad, or is_sparse=False");
  }
  return OkStatus();
}

// A persistable accumulator shaped `shape`, declared in both programs and set to `init` in
// startup.
StatusOr<std::string> Accumulator(ir::Program& main, ir::Program& startup, const ir::Var& param,
                                  const std::string& kind, std::vector<int64_t> shape,
                                  double init) {
  std::string name = UniqueName(main, startup, param.name + "_" + kind);
  FLEET_RETURN_IF_ERROR(Declare(main, &startup, MakeVar(name, param.dtype, shape, true)));
  startup.global().ops.push_back(FillConstant(name, std::move(shape), init, param.dtype));
  return name;
}

// The learning rate of one parameter: the global var, or a scale of it for
// ParamAttr(learning_rate=...) != 1.
StatusOr<std::string> ParamLearningRate(ir::Program& main, ir::Program& startup,
                                        const ir::Var& param, const std::string& lr) {
  double scale = param.param.has_value() ? param.param->learning_rate : 1.0;
  if (!std::isfinite(scale) || scale < 0) {
    return InvalidArgument("parameter '" + param.name + "': learning_rate must be a finite " +
                           "non-negative number, got " + std::to_string(scale));
  }
  if (scale == 1.0) return lr;
  std::string name = UniqueName(main, startup, param.name + "_learning_rate");
  FLEET_RETURN_IF_ERROR(
      Declare(main, nullptr, MakeVar(name, ir::DataType::kFloat32, {1}, false)));
  main.global().ops.push_back(MakeOp("scale", {{"X", {lr}}}, {{"Out", {name}}},
                                     {{"scale", static_cast<float>(scale)},
                                      {"bias", 0.0f},
                                      {"bias_after_scale", true}}));
  return name;
}

Status AppendUpdate(ir::Program& main, ir::Program& startup, const OptimizerSpec& spec,
                    const Options& o, const autodiff::ParamGrad& pg, const std::string& lr) {
  const ir::Var param = *main.global().FindVar(pg.param);
  const std::string& p = pg.param;
  const std::string& g = pg.grad;
  std::vector<ir::Op>& ops = main.global().ops;
  if (spec.type == "sgd") {
    ops.push_back(MakeOp("sgd", {{"Param", {p}}, {"LearningRate", {lr}}, {"Grad", {g}}},
                         {{"ParamOut", {p}}}));
    return OkStatus();
  }
  if (spec.type == "momentum") {
    FLEET_ASSIGN_OR_RETURN(std::string v,
                           Accumulator(main, startup, param, "velocity", param.shape, 0.0));
    ops.push_back(MakeOp(
        "momentum",
        {{"Param", {p}}, {"Grad", {g}}, {"Velocity", {v}}, {"LearningRate", {lr}}},
        {{"ParamOut", {p}}, {"VelocityOut", {v}}},
        {{"mu", static_cast<float>(o.momentum)}, {"use_nesterov", o.use_nesterov}}));
    return OkStatus();
  }
  if (spec.type == "adagrad") {
    FLEET_ASSIGN_OR_RETURN(std::string m, Accumulator(main, startup, param, "moment", param.shape,
                                                      o.initial_accumulator_value));
    ops.push_back(MakeOp("adagrad",
                         {{"Param", {p}}, {"Grad", {g}}, {"Moment", {m}}, {"LearningRate", {lr}}},
                         {{"ParamOut", {p}}, {"MomentOut", {m}}},
                         {{"epsilon", static_cast<float>(o.epsilon)}}));
    return OkStatus();
  }
  if (spec.type == "rmsprop") {
    FLEET_ASSIGN_OR_RETURN(std::string mom,
                           Accumulator(main, startup, param, "momentum", param.shape, 0.0));
    FLEET_ASSIGN_OR_RETURN(std::string ms,
                           Accumulator(main, startup, param, "mean_square", param.shape, 0.0));
    ir::SlotMap ins = {{"Param", {p}},
                       {"Grad", {g}},
                       {"Moment", {mom}},
                       {"MeanSquare", {ms}},
                       {"LearningRate", {lr}}};
    ir::SlotMap outs = {{"ParamOut", {p}}, {"MomentOut", {mom}}, {"MeanSquareOut", {ms}}};
    if (o.centered) {
      FLEET_ASSIGN_OR_RETURN(std::string mg,
                             Accumulator(main, startup, param, "mean_grad", param.shape, 0.0));
      ins["MeanGrad"] = {mg};
      outs["MeanGradOut"] = {mg};
    }
    ops.push_back(MakeOp("rmsprop", std::move(ins), std::move(outs),
                         {{"decay", static_cast<float>(o.rho)},
                          {"epsilon", static_cast<float>(o.epsilon)},
                          {"momentum", static_cast<float>(o.momentum)},
                          {"centered", o.centered}}));
    return OkStatus();
  }
  if (spec.type == "adamax") {
    FLEET_ASSIGN_OR_RETURN(std::string m,
                           Accumulator(main, startup, param, "moment", param.shape, 0.0));
    FLEET_ASSIGN_OR_RETURN(std::string u,
                           Accumulator(main, startup, param, "inf_norm", param.shape, 0.0));
    FLEET_ASSIGN_OR_RETURN(std::string b1,
                           Accumulator(main, startup, param, "beta1_pow_acc", {1}, o.beta1));
    ops.push_back(MakeOp("adamax",
                         {{"Param", {p}},
                          {"Grad", {g}},
                          {"LearningRate", {lr}},
                          {"Moment", {m}},
                          {"InfNorm", {u}},
                          {"Beta1Pow", {b1}}},
                         {{"ParamOut", {p}}, {"MomentOut", {m}}, {"InfNormOut", {u}}},
                         {{"beta1", static_cast<float>(o.beta1)},
                          {"beta2", static_cast<float>(o.beta2)},
                          {"epsilon", static_cast<float>(o.epsilon)}}));
    // Paddle's Adamax advances its beta1 power with a scale op after the update.
    ops.push_back(MakeOp("scale", {{"X", {b1}}}, {{"Out", {b1}}},
                         {{"scale", static_cast<float>(o.beta1)},
                          {"bias", 0.0f},
                          {"bias_after_scale", true}}));
    return OkStatus();
  }
  FLEET_ASSIGN_OR_RETURN(std::string m1,
                         Accumulator(main, startup, param, "moment1", param.shape, 0.0));
  FLEET_ASSIGN_OR_RETURN(std::string m2,
                         Accumulator(main, startup, param, "moment2", param.shape, 0.0));
  FLEET_ASSIGN_OR_RETURN(std::string b1,
                         Accumulator(main, startup, param, "beta1_pow_acc", {1}, o.beta1));
  FLEET_ASSIGN_OR_RETURN(std::string b2,
                         Accumulator(main, startup, param, "beta2_pow_acc", {1}, o.beta2));
  ir::AttrMap attrs = {{"beta1", static_cast<float>(o.beta1)},
                       {"beta2", static_cast<float>(o.beta2)},
                       {"epsilon", static_cast<float>(o.epsilon)}};
  if (spec.type == "lamb") {
    attrs["weight_decay"] = static_cast<float>(o.weight_decay);
  } else {
    attrs["lazy_mode"] = o.lazy_mode;
  }
  if (spec.type == "adamw") {
    attrs["coeff"] = static_cast<float>(o.weight_decay);
    attrs["lr_ratio"] = 1.0f;
    attrs["with_decay"] = true;
  }
  ops.push_back(MakeOp(spec.type,
                       {{"Param", {p}},
                        {"Grad", {g}},
                        {"LearningRate", {lr}},
                        {"Moment1", {m1}},
                        {"Moment2", {m2}},
                        {"Beta1Pow", {b1}},
                        {"Beta2Pow", {b2}}},
                       {{"ParamOut", {p}},
                        {"Moment1Out", {m1}},
                        {"Moment2Out", {m2}},
                        {"Beta1PowOut", {b1}},
                        {"Beta2PowOut", {b2}}},
                       std::move(attrs)));
  return OkStatus();
}

// Appends clipping, regularization, the learning rate and the updates.
Status Emit(ir::Program& main, ir::Program& startup, const std::vector<autodiff::ParamGrad>& pairs,
            const OptimizerSpec& spec, const Options& options) {
  if (spec.clip_global_norm > 0) {
    FLEET_RETURN_IF_ERROR(
        internal::AppendGlobalNormClip(main, startup, pairs, spec.clip_global_norm));
  }
  if (spec.clip_norm > 0) {
    FLEET_RETURN_IF_ERROR(internal::AppendNormClip(main, pairs, spec.clip_norm));
  }
  if (spec.clip_by_value) {
    FLEET_RETURN_IF_ERROR(internal::AppendValueClip(main, pairs, spec.clip_min, spec.clip_max));
  }
  for (const auto& pg : pairs) {
    FLEET_RETURN_IF_ERROR(internal::AppendRegularization(main, startup, pg, spec.l2_coeff));
  }
  FLEET_ASSIGN_OR_RETURN(std::string lr, internal::AppendLearningRate(main, startup, spec.lr));
  for (const auto& pg : pairs) {
    const ir::Var param = *main.global().FindVar(pg.param);
    FLEET_ASSIGN_OR_RETURN(std::string param_lr, ParamLearningRate(main, startup, param, lr));
    FLEET_RETURN_IF_ERROR(AppendUpdate(main, startup, spec, options, pg, param_lr));
  }
  return OkStatus();
}

}  // namespace

bool OptimizerTakesSparseGradients(const OptimizerSpec& spec) {
  const bool update = spec.type == "sgd" || spec.type == "momentum" || spec.type == "adam" ||
                      spec.type == "adagrad";
  return update && spec.clip_norm == 0 && !spec.clip_by_value;
}

Status ApplyOptimizer(ir::Program& main, ir::Program& startup,
                      const std::vector<autodiff::ParamGrad>& params_grads,
                      const OptimizerSpec& spec) {
  const auto& types = OptimizerTypes();
  if (std::find(types.begin(), types.end(), spec.type) == types.end()) {
    std::string msg = "unknown optimizer '" + spec.type + "'";
    std::string guess = ClosestMatch(spec.type, types);
    if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
    return InvalidArgument(msg + "; expected " + JoinWords(types, " or "));
  }
  FLEET_ASSIGN_OR_RETURN(Options options, ParseOptions(spec));
  if (!std::isfinite(spec.l2_coeff) || spec.l2_coeff < 0) {
    return InvalidArgument("optimizer: regularization L2 coefficient must be a finite "
                           "non-negative number, got " + std::to_string(spec.l2_coeff));
  }
  if (!std::isfinite(spec.clip_global_norm) || spec.clip_global_norm < 0) {
    return InvalidArgument("optimizer: grad_clip global norm must be a finite non-negative "
                           "number (0 = no clipping), got " +
                           std::to_string(spec.clip_global_norm));
  }
  if (!std::isfinite(spec.clip_norm) || spec.clip_norm < 0) {
    return InvalidArgument("optimizer: grad_clip ClipGradByNorm needs a finite positive "
                           "clip_norm (0 = no clipping), got " + std::to_string(spec.clip_norm));
  }
  if (spec.clip_by_value && !(std::isfinite(spec.clip_min) && std::isfinite(spec.clip_max) &&
                              spec.clip_min <= spec.clip_max)) {
    return InvalidArgument("optimizer: grad_clip ClipGradByValue needs finite min <= max, got "
                           "min " + std::to_string(spec.clip_min) + " and max " +
                           std::to_string(spec.clip_max));
  }
  if ((spec.clip_global_norm > 0) + (spec.clip_norm > 0) + spec.clip_by_value > 1) {
    return InvalidArgument("optimizer: only one grad_clip may be given (by global norm, by "
                           "norm or by value)");
  }
  if (params_grads.empty()) {
    return InvalidArgument("optimizer: no (parameter, gradient) pairs to optimize; does any "
                           "trainable parameter reach the loss?");
  }
  std::vector<autodiff::ParamGrad> pairs = params_grads;
  std::sort(pairs.begin(), pairs.end(),
            [](const auto& a, const auto& b) { return a.param < b.param; });
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i > 0 && pairs[i].param == pairs[i - 1].param) {
      return InvalidArgument("optimizer: parameter '" + pairs[i].param + "' is listed twice");
    }
    FLEET_RETURN_IF_ERROR(CheckPair(main, pairs[i]));
    FLEET_RETURN_IF_ERROR(CheckSparsePair(main, spec, pairs[i]));
  }
  // Validate the schedule before anything is appended, so an error leaves the programs alone.
  FLEET_RETURN_IF_ERROR(internal::PlanLrSchedule(spec.lr).status());
  for (const auto& pg : pairs) {
    const ir::Var* p = main.global().FindVar(pg.param);
    if (p->param.has_value()) {
      const auto& info = *p->param;
      if (!info.regularizer.empty() && info.regularizer != "l1" && info.regularizer != "l2") {
        return InvalidArgument("parameter '" + pg.param + "': unknown regularizer '" +
                               info.regularizer + "' (expected l1 or l2)");
      }
    }
  }

  // Emission works on copies, so an error part-way leaves both programs as they were.
  ir::Program new_main = main, new_startup = startup;
  auto count_lr_ops = [](const ir::Block& b) {
    return std::count_if(b.ops.begin(), b.ops.end(), [](const ir::Op& op) {
      return ir::OpRoleOf(op) == ir::op_role::kLRSched;
    });
  };
  const size_t before = new_main.global().ops.size();
  const auto lr_before = count_lr_ops(new_main.global());
  FLEET_RETURN_IF_ERROR(Emit(new_main, new_startup, pairs, spec, options));
  // Everything appended at the end (clipping, regularization, the updates) is the Optimize
  // phase; the schedule ops inserted at the front carry LRSched already.
  std::vector<ir::Op>& ops = new_main.global().ops;
  const size_t front = static_cast<size_t>(count_lr_ops(new_main.global()) - lr_before);
  for (size_t i = before + front; i < ops.size(); ++i) {
    ops[i].attrs[std::string(ir::op_role::kAttr)] = ir::op_role::kOptimize;
  }
  main = std::move(new_main);
  startup = std::move(new_startup);
  return OkStatus();
}

}  // namespace fleet::optim
