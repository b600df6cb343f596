// Learning-rate schedules. A schedule becomes one lr_schedule op (host/ops/optimizer_ops.cc)
// evaluated at the step counter each step, where Paddle emits several small ops with the same
// values. Paddle's step counter is kept: @LR_DECAY_COUNTER@ (int64 [1]) starts at -1 in startup
// and is incremented by the first op of main, so step 0 is the first step. That is Paddle 1.8's
// origin for every schedule except noam_decay, whose counter starts at 1; the noam formula
// (plugins/common/lr_formulas.h) adds the 1 itself.
#include <algorithm>
#include <cmath>

#include "optim/emit.h"
#include "support/text.h"

namespace fleet::optim::internal {
namespace {

constexpr const char* kCounter = "@LR_DECAY_COUNTER@";

StatusOr<int64_t> IntArg(const LrSchedule& s, const std::string& name, std::optional<int64_t> dflt,
                         const std::string& what) {
  auto it = s.args.find(name);
  if (it == s.args.end()) {
    if (dflt.has_value()) return *dflt;
    return InvalidArgument(what + ": '" + name + "' is required");
  }
  std::optional<int64_t> v = ir::AttrAsInt(it->second);
  if (!v.has_value()) {
    return InvalidArgument(what + ": '" + name + "' must be an integer, not " +
                           std::string(ir::AttrTypeName(ir::AttrTypeOf(it->second))));
  }
  return *v;
}

StatusOr<double> RequiredDouble(const LrSchedule& s, const std::string& name,
                                const std::string& what) {
  if (s.args.count(name) == 0) return InvalidArgument(what + ": '" + name + "' is required");
  return DoubleOption(s.args, name, 0.0, what);
}

Status CheckRate(double v, const std::string& name, const std::string& what) {
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgument(what + ": " + name + " must be a finite non-negative number, got " +
                           std::to_string(v));
  }
  return OkStatus();
}

// Fills the attributes of a non-warm-up schedule into `attrs`; `value0` gets its rate at step 0.
Status PlanInner(const LrSchedule& s, ir::AttrMap& attrs, double* value0) {
  static const std::vector<std::string> kTypes = {
      "constant", "piecewise",   "exponential",  "cosine",       "polynomial",
      "noam",     "natural_exp", "inverse_time", "linear_warmup"};
  const std::string what = "learning-rate schedule '" + s.type + "'";
  bool known = false;
  for (const auto& t : kTypes) known = known || t == s.type;
  if (!known) {
    std::string msg = "unknown learning-rate schedule '" + s.type + "'";
    std::string guess = ClosestMatch(s.type, kTypes);
    if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
    return InvalidArgument(msg + "; expected " + JoinWords(kTypes, " or "));
  }
  FLEET_RETURN_IF_ERROR(CheckRate(s.learning_rate, "learning_rate", what));
  attrs["type"] = s.type;
  attrs["learning_rate"] = static_cast<float>(s.learning_rate);
  *value0 = s.learning_rate;
  if (s.type == "constant") {
    return CheckNames(s.args, {}, what);
  }
  if (s.type == "piecewise") {
    FLEET_RETURN_IF_ERROR(CheckNames(s.args, {"boundaries", "values"}, what));
    auto b = s.args.find("boundaries");
    auto v = s.args.find("values");
    if (b == s.args.end() || v == s.args.end()) {
      return InvalidArgument(what + ": 'boundaries' and 'values' are required");
    }
    std::optional<std::vector<int64_t>> bounds = ir::AttrAsInts(b->second);
    std::optional<std::vector<double>> values = ir::AttrAsDoubles(v->second);
    if (!bounds.has_value()) return InvalidArgument(what + ": 'boundaries' must be integers");
    if (!values.has_value()) return InvalidArgument(what + ": 'values' must be numbers");
    if (values->size() != bounds->size() + 1) {
      return InvalidArgument(what + ": needs one more value than boundaries, got " +
                             std::to_string(bounds->size()) + " boundaries and " +
                             std::to_string(values->size()) + " values");
    }
    for (size_t i = 1; i < bounds->size(); ++i) {
      if ((*bounds)[i] <= (*bounds)[i - 1]) {
        return InvalidArgument(what + ": boundaries must increase strictly");
      }
    }
    for (double x : *values) FLEET_RETURN_IF_ERROR(CheckRate(x, "every value", what));
    attrs["boundaries"] = *bounds;
    attrs["values"] = std::vector<float>(values->begin(), values->end());
    *value0 = values->back();
    for (size_t i = 0; i < bounds->size(); ++i) {
      if (0 < (*bounds)[i]) {
        *value0 = (*values)[i];
        break;
      }
    }
    return OkStatus();
  }
  if (s.type == "exponential") {
    FLEET_RETURN_IF_ERROR(CheckNames(s.args, {"gamma", "decay_steps", "staircase"}, what));
    FLEET_ASSIGN_OR_RETURN(double gamma, RequiredDouble(s, "gamma", what));
    FLEET_ASSIGN_OR_RETURN(int64_t steps, IntArg(s, "decay_steps", 1, what));
    FLEET_ASSIGN_OR_RETURN(bool staircase, BoolOption(s.args, "staircase", false, what));
    if (!(gamma > 0)) return InvalidArgument(what + ": gamma must be positive");
    if (steps <= 0) return InvalidArgument(what + ": decay_steps must be positive");
    attrs["gamma"] = static_cast<float>(gamma);
    attrs["decay_steps"] = steps;
    attrs["staircase"] = staircase;
    return OkStatus();
  }
  if (s.type == "cosine") {
    FLEET_RETURN_IF_ERROR(CheckNames(s.args, {"T_max", "decay_steps", "eta_min"}, what));
    const char* key = s.args.count("T_max") != 0 ? "T_max" : "decay_steps";
    FLEET_ASSIGN_OR_RETURN(int64_t t_max, IntArg(s, key, std::nullopt, what + " (T_max)"));
    FLEET_ASSIGN_OR_RETURN(double eta_min, DoubleOption(s.args, "eta_min", 0.0, what));
    if (t_max <= 0) return InvalidArgument(what + ": T_max must be positive");
    FLEET_RETURN_IF_ERROR(CheckRate(eta_min, "eta_min", what));
    attrs["T_max"] = t_max;
    attrs["eta_min"] = static_cast<float>(eta_min);
    return OkStatus();
  }
  if (s.type == "polynomial") {
    FLEET_RETURN_IF_ERROR(
        CheckNames(s.args, {"decay_steps", "end_learning_rate", "power", "cycle"}, what));
    FLEET_ASSIGN_OR_RETURN(int64_t steps, IntArg(s, "decay_steps", std::nullopt, what));
    FLEET_ASSIGN_OR_RETURN(double end, DoubleOption(s.args, "end_learning_rate", 0.0001, what));
    FLEET_ASSIGN_OR_RETURN(double power, DoubleOption(s.args, "power", 1.0, what));
    FLEET_ASSIGN_OR_RETURN(bool cycle, BoolOption(s.args, "cycle", false, what));
    if (steps <= 0) return InvalidArgument(what + ": decay_steps must be positive");
    FLEET_RETURN_IF_ERROR(CheckRate(end, "end_learning_rate", what));
    if (!(power > 0) || !std::isfinite(power)) {
      return InvalidArgument(what + ": power must be a positive number");
    }
    attrs["decay_steps"] = steps;
    attrs["end_learning_rate"] = static_cast<float>(end);
    attrs["power"] = static_cast<float>(power);
    attrs["cycle"] = cycle;
    return OkStatus();
  }
  if (s.type == "noam") {
    FLEET_RETURN_IF_ERROR(CheckNames(s.args, {"d_model", "warmup_steps"}, what));
    FLEET_ASSIGN_OR_RETURN(double d_model, RequiredDouble(s, "d_model", what));
    FLEET_ASSIGN_OR_RETURN(int64_t warmup, IntArg(s, "warmup_steps", std::nullopt, what));
    if (!(d_model > 0) || !std::isfinite(d_model)) {
      return InvalidArgument(what + ": d_model must be positive");
    }
    if (warmup <= 0) return InvalidArgument(what + ": warmup_steps must be positive");
    attrs["d_model"] = static_cast<float>(d_model);
    attrs["noam_warmup_steps"] = warmup;
    // The rate of the first step (Paddle's noam counter starts at 1).
    *value0 = s.learning_rate / std::sqrt(d_model) *
              std::min(1.0, std::pow(static_cast<double>(warmup), -1.5));
    return OkStatus();
  }
  if (s.type == "natural_exp" || s.type == "inverse_time") {
    FLEET_RETURN_IF_ERROR(CheckNames(s.args, {"decay_steps", "decay_rate", "staircase"}, what));
    FLEET_ASSIGN_OR_RETURN(int64_t steps, IntArg(s, "decay_steps", std::nullopt, what));
    FLEET_ASSIGN_OR_RETURN(double rate, RequiredDouble(s, "decay_rate", what));
    FLEET_ASSIGN_OR_RETURN(bool staircase, BoolOption(s.args, "staircase", false, what));
    if (steps <= 0) return InvalidArgument(what + ": decay_steps must be positive");
    FLEET_RETURN_IF_ERROR(CheckRate(rate, "decay_rate", what));
    attrs["decay_steps"] = steps;
    attrs["decay_rate"] = static_cast<float>(rate);
    attrs["staircase"] = staircase;
    return OkStatus();
  }
  return InvalidArgument(what + ": linear_warmup cannot be nested in another warm-up");
}

}  // namespace

StatusOr<LrPlan> PlanLrSchedule(const LrSchedule& schedule) {
  LrPlan plan;
  if (schedule.type == "constant") {
    FLEET_RETURN_IF_ERROR(PlanInner(schedule, plan.attrs, &plan.value));
    plan.attrs.clear();
    plan.constant = true;
    return plan;
  }
  plan.constant = false;
  if (schedule.type != "linear_warmup") {
    FLEET_RETURN_IF_ERROR(PlanInner(schedule, plan.attrs, &plan.value));
    return plan;
  }
  // LinearWarmup: a ramp start_lr -> end_lr over warmup_steps, then `inner` (shifted by
  // warmup_steps, as Paddle's LinearWarmup steps its inner scheduler) or end_lr.
  const std::string what = "learning-rate schedule 'linear_warmup'";
  FLEET_RETURN_IF_ERROR(CheckNames(schedule.args, {"warmup_steps", "start_lr", "end_lr"}, what));
  FLEET_ASSIGN_OR_RETURN(int64_t warmup, IntArg(schedule, "warmup_steps", std::nullopt, what));
  FLEET_ASSIGN_OR_RETURN(double start_lr, RequiredDouble(schedule, "start_lr", what));
  FLEET_ASSIGN_OR_RETURN(double end_lr, RequiredDouble(schedule, "end_lr", what));
  if (warmup <= 0) return InvalidArgument(what + ": warmup_steps must be positive");
  FLEET_RETURN_IF_ERROR(CheckRate(start_lr, "start_lr", what));
  FLEET_RETURN_IF_ERROR(CheckRate(end_lr, "end_lr", what));
  double inner_value = 0;
  if (schedule.inner != nullptr) {
    FLEET_RETURN_IF_ERROR(PlanInner(*schedule.inner, plan.attrs, &inner_value));
  } else {
    LrSchedule constant;
    constant.type = "constant";
    constant.learning_rate = end_lr;
    FLEET_RETURN_IF_ERROR(PlanInner(constant, plan.attrs, &inner_value));
  }
  plan.attrs["warmup_steps"] = warmup;
  plan.attrs["start_lr"] = static_cast<float>(start_lr);
  plan.attrs["end_lr"] = static_cast<float>(end_lr);
  plan.value = start_lr;
  return plan;
}

StatusOr<std::string> AppendLearningRate(ir::Program& main, ir::Program& startup,
                                         const LrSchedule& schedule) {
  FLEET_ASSIGN_OR_RETURN(LrPlan plan, PlanLrSchedule(schedule));
  std::string lr = UniqueName(main, startup, "learning_rate");
  FLEET_RETURN_IF_ERROR(Declare(main, &startup, MakeVar(lr, ir::DataType::kFloat32, {1}, true)));
  // Also for a schedule, so the persistable var holds a defined value before the first step.
  startup.global().ops.push_back(FillConstant(lr, {1}, plan.value, ir::DataType::kFloat32));
  if (plan.constant) return lr;

  // One counter per program, shared by every schedule in it.
  std::vector<ir::Op>& ops = main.global().ops;
  size_t at = 0;
  if (main.global().FindVar(kCounter) == nullptr) {
    FLEET_RETURN_IF_ERROR(
        Declare(main, &startup, MakeVar(kCounter, ir::DataType::kInt64, {1}, true)));
    startup.global().ops.push_back(FillConstant(kCounter, {1}, -1.0, ir::DataType::kInt64));
    ops.insert(ops.begin(), MakeOp("increment", {{"X", {kCounter}}}, {{"Out", {kCounter}}},
                                   {{"step", 1.0f}, {std::string(ir::op_role::kAttr),
                                                     ir::op_role::kLRSched}}));
  }
  // After the increment (and any earlier schedule ops), before the forward pass.
  while (at < ops.size() && (ops[at].type == "increment" || ops[at].type == "lr_schedule")) ++at;
  ir::AttrMap attrs = plan.attrs;
  attrs[std::string(ir::op_role::kAttr)] = ir::op_role::kLRSched;
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at),
             MakeOp("lr_schedule", {{"Step", {kCounter}}}, {{"Out", {lr}}}, std::move(attrs)));
  return lr;
}

}  // namespace fleet::optim::internal
