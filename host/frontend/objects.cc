// Configuration objects: ParamAttr, initializers, regularizers, gradient clipping, optimizers
// and learning-rate schedules. Each call makes an Object holding its bound arguments; the object
// is checked when it is made (so a typo is reported where it is written) and converted to a
// typed spec where it is used.
#include <memory>
#include <set>

#include "frontend/builtins.h"

namespace fleet::frontend {
namespace {

const std::set<std::string, std::less<>> kInitKinds = {
    "Constant", "Normal", "TruncatedNormal", "Uniform", "Xavier", "XavierUniform",
    "XavierNormal", "MSRA", "KaimingNormal", "KaimingUniform"};
const std::set<std::string, std::less<>> kRegularizerKinds = {"L2Decay", "L1Decay"};
const std::set<std::string, std::less<>> kOptimizerKinds = {
    "sgd", "momentum", "adam", "adamw", "adagrad", "rmsprop", "lamb", "adamax"};
const std::set<std::string, std::less<>> kScheduleKinds = {
    "piecewise_decay", "exponential_decay",  "cosine_decay",       "linear_warmup",
    "polynomial_decay", "noam_decay",        "natural_exp_decay", "inverse_time_decay"};
const std::set<std::string, std::less<>> kClipKinds = {"ClipGradByGlobalNorm", "ClipGradByNorm",
                                                       "ClipGradByValue"};

const Object* ObjectOf(const Arg* arg) {
  return arg != nullptr && arg->value.kind == Value::Kind::kObject ? arg->value.object.get()
                                                                   : nullptr;
}

// Reads a value that has two accepted spellings (Paddle 2.x's and fluid's, e.g. mean / loc).
StatusOr<double> FloatEither(const Args& a, std::string_view name, std::string_view alias,
                             double def) {
  if (a.Has(name) && a.Has(alias)) {
    return a.ErrorAt(alias, "give either '" + std::string(name) + "' or '" + std::string(alias) +
                                "', not both");
  }
  return a.Has(alias) ? a.Float(alias, def) : a.Float(name, def);
}

StatusOr<InitSpec> InitFromObject(const Object& o) {
  const Args& a = o.args;
  InitSpec s;
  FLEET_ASSIGN_OR_RETURN(s.seed, a.Int("seed", 0));
  if (o.kind == "Constant") {
    s.kind = "constant";
    FLEET_ASSIGN_OR_RETURN(s.value, a.Float("value", 0.0));
  } else if (o.kind == "Normal" || o.kind == "TruncatedNormal") {
    s.kind = o.kind == "Normal" ? "normal" : "truncated_normal";
    FLEET_ASSIGN_OR_RETURN(s.mean, FloatEither(a, "mean", "loc", 0.0));
    FLEET_ASSIGN_OR_RETURN(s.std, FloatEither(a, "std", "scale", 1.0));
    if (s.std < 0) return a.ErrorAt(a.Has("scale") ? "scale" : "std", "must not be negative");
  } else if (o.kind == "Uniform") {
    s.kind = "uniform";
    FLEET_ASSIGN_OR_RETURN(s.low, a.Float("low", -1.0));
    FLEET_ASSIGN_OR_RETURN(s.high, a.Float("high", 1.0));
    if (s.low > s.high) return a.Error("low must not exceed high");
  } else {
    bool xavier = o.kind.rfind("Xavier", 0) == 0;
    s.kind = xavier ? "xavier" : "msra";
    if (o.kind == "Xavier" || o.kind == "MSRA") {
      FLEET_ASSIGN_OR_RETURN(s.uniform, a.Bool("uniform", true));
    } else {
      s.uniform = o.kind == "XavierUniform" || o.kind == "KaimingUniform";
    }
    FLEET_ASSIGN_OR_RETURN(s.fan_in, a.OptFloat("fan_in"));
    if (xavier) {
      FLEET_ASSIGN_OR_RETURN(s.fan_out, a.OptFloat("fan_out"));
    }
    if ((s.fan_in && *s.fan_in <= 0) || (s.fan_out && *s.fan_out <= 0)) {
      return a.Error("fan_in and fan_out must be positive");
    }
  }
  return s;
}

struct Regularizer {
  std::string kind;  // "l2" | "l1"
  double coeff = 0.0;
};

StatusOr<Regularizer> RegularizerFromObject(const Object& o) {
  Regularizer r;
  r.kind = o.kind == "L2Decay" ? "l2" : "l1";
  FLEET_ASSIGN_OR_RETURN(r.coeff, FloatEither(o.args, "coeff", "regularization_coeff", 0.0));
  if (r.coeff < 0) return o.args.Error("the coefficient must not be negative");
  return r;
}

StatusOr<ParamAttrSpec> ParamAttrFromObject(const Object& o) {
  const Args& a = o.args;
  ParamAttrSpec s;
  FLEET_ASSIGN_OR_RETURN(s.name, a.String("name", ""));
  FLEET_ASSIGN_OR_RETURN(s.learning_rate, a.Float("learning_rate", 1.0));
  FLEET_ASSIGN_OR_RETURN(s.trainable, a.Bool("trainable", true));
  if (const Arg* init = a.Get("initializer")) {
    const Object* io = ObjectOf(init);
    if (io == nullptr || !kInitKinds.count(io->kind)) {
      return a.ErrorAt("initializer", "argument 'initializer' must be an initializer such as "
                                      "Normal(...) or Constant(...), got " +
                                          DescribeValue(init->value));
    }
    FLEET_ASSIGN_OR_RETURN(s.init, InitFromObject(*io));
  }
  if (const Arg* reg = a.Get("regularizer")) {
    const Object* ro = ObjectOf(reg);
    if (ro == nullptr || !kRegularizerKinds.count(ro->kind)) {
      return a.ErrorAt("regularizer", "argument 'regularizer' must be L2Decay(...) or "
                                      "L1Decay(...), got " + DescribeValue(reg->value));
    }
    FLEET_ASSIGN_OR_RETURN(Regularizer r, RegularizerFromObject(*ro));
    s.regularizer = r.kind;
    s.regularization_coeff = r.coeff;
  }
  return s;
}

StatusOr<optim::LrSchedule> ScheduleArg(const Args& a, std::string_view name, double def);

StatusOr<optim::LrSchedule> ScheduleFromObject(const Object& o) {
  const Args& a = o.args;
  optim::LrSchedule s;
  if (o.kind == "piecewise_decay") {
    s.type = "piecewise";
    FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> boundaries, a.Ints("boundaries"));
    FLEET_ASSIGN_OR_RETURN(std::vector<double> values, a.Floats("values"));
    if (values.size() != boundaries.size() + 1) {
      return a.ErrorAt("values", "needs one more value than boundaries (" +
                                     std::to_string(boundaries.size()) + " boundaries, " +
                                     std::to_string(values.size()) + " values)");
    }
    for (size_t i = 1; i < boundaries.size(); ++i) {
      if (boundaries[i] <= boundaries[i - 1]) {
        return a.ErrorAt("boundaries", "boundaries must increase");
      }
    }
    s.learning_rate = values[0];
    s.args["boundaries"] = boundaries;
    s.args["values"] = values;
  } else if (o.kind == "exponential_decay") {
    s.type = "exponential";
    FLEET_ASSIGN_OR_RETURN(s.learning_rate, a.Float("learning_rate"));
    FLEET_ASSIGN_OR_RETURN(double gamma, a.Float("gamma"));
    FLEET_ASSIGN_OR_RETURN(int64_t steps, a.Int("decay_steps", 1));
    FLEET_ASSIGN_OR_RETURN(bool staircase, a.Bool("staircase", false));
    if (gamma <= 0) return a.ErrorAt("gamma", "gamma must be positive");
    if (steps <= 0) return a.ErrorAt("decay_steps", "decay_steps must be positive");
    s.args["gamma"] = gamma;
    s.args["decay_steps"] = steps;
    s.args["staircase"] = staircase;
  } else if (o.kind == "cosine_decay") {
    s.type = "cosine";
    FLEET_ASSIGN_OR_RETURN(s.learning_rate, a.Float("learning_rate"));
    FLEET_ASSIGN_OR_RETURN(int64_t t_max, a.Int("T_max"));
    FLEET_ASSIGN_OR_RETURN(double eta_min, a.Float("eta_min", 0.0));
    if (t_max <= 0) return a.ErrorAt("T_max", "T_max must be positive");
    s.args["T_max"] = t_max;
    s.args["eta_min"] = eta_min;
  } else if (o.kind == "polynomial_decay") {
    s.type = "polynomial";
    FLEET_ASSIGN_OR_RETURN(s.learning_rate, a.Float("learning_rate"));
    FLEET_ASSIGN_OR_RETURN(int64_t steps, a.Int("decay_steps"));
    FLEET_ASSIGN_OR_RETURN(double end, a.Float("end_learning_rate", 0.0001));
    FLEET_ASSIGN_OR_RETURN(double power, a.Float("power", 1.0));
    FLEET_ASSIGN_OR_RETURN(bool cycle, a.Bool("cycle", false));
    if (steps <= 0) return a.ErrorAt("decay_steps", "decay_steps must be positive");
    if (end < 0) return a.ErrorAt("end_learning_rate", "end_learning_rate must not be negative");
    if (power <= 0) return a.ErrorAt("power", "power must be positive");
    s.args["decay_steps"] = steps;
    s.args["end_learning_rate"] = end;
    s.args["power"] = power;
    s.args["cycle"] = cycle;
  } else if (o.kind == "noam_decay") {
    s.type = "noam";
    FLEET_ASSIGN_OR_RETURN(s.learning_rate, a.Float("learning_rate", 1.0));
    FLEET_ASSIGN_OR_RETURN(double d_model, a.Float("d_model"));
    FLEET_ASSIGN_OR_RETURN(int64_t warmup, a.Int("warmup_steps"));
    if (d_model <= 0) return a.ErrorAt("d_model", "d_model must be positive");
    if (warmup <= 0) return a.ErrorAt("warmup_steps", "warmup_steps must be positive");
    s.args["d_model"] = d_model;
    s.args["warmup_steps"] = warmup;
  } else if (o.kind == "natural_exp_decay" || o.kind == "inverse_time_decay") {
    s.type = o.kind == "natural_exp_decay" ? "natural_exp" : "inverse_time";
    FLEET_ASSIGN_OR_RETURN(s.learning_rate, a.Float("learning_rate"));
    FLEET_ASSIGN_OR_RETURN(int64_t steps, a.Int("decay_steps"));
    FLEET_ASSIGN_OR_RETURN(double rate, a.Float("decay_rate"));
    FLEET_ASSIGN_OR_RETURN(bool staircase, a.Bool("staircase", false));
    if (steps <= 0) return a.ErrorAt("decay_steps", "decay_steps must be positive");
    if (rate < 0) return a.ErrorAt("decay_rate", "decay_rate must not be negative");
    s.args["decay_steps"] = steps;
    s.args["decay_rate"] = rate;
    s.args["staircase"] = staircase;
  } else {
    s.type = "linear_warmup";
    FLEET_ASSIGN_OR_RETURN(int64_t warmup, a.Int("warmup_steps"));
    FLEET_ASSIGN_OR_RETURN(double start_lr, a.Float("start_lr"));
    FLEET_ASSIGN_OR_RETURN(double end_lr, a.Float("end_lr"));
    if (warmup <= 0) return a.ErrorAt("warmup_steps", "warmup_steps must be positive");
    FLEET_ASSIGN_OR_RETURN(optim::LrSchedule inner, ScheduleArg(a, "learning_rate", end_lr));
    s.learning_rate = inner.learning_rate;
    s.args["warmup_steps"] = warmup;
    s.args["start_lr"] = start_lr;
    s.args["end_lr"] = end_lr;
    s.inner = std::make_shared<const optim::LrSchedule>(std::move(inner));
  }
  return s;
}

// A learning rate: a number (a constant schedule) or a schedule call.
StatusOr<optim::LrSchedule> ScheduleArg(const Args& a, std::string_view name, double def) {
  optim::LrSchedule s;
  const Arg* arg = a.Get(name);
  if (arg == nullptr) {
    s.learning_rate = def;
    return s;
  }
  if (arg->value.is_number()) {
    s.learning_rate = arg->value.number();
    if (s.learning_rate < 0) return a.ErrorAt(name, "the learning rate must not be negative");
    return s;
  }
  const Object* o = ObjectOf(arg);
  if (o == nullptr || !kScheduleKinds.count(o->kind)) {
    return a.ErrorAt(name, "argument '" + std::string(name) +
                               "' must be a number or a schedule such as piecewise_decay(...), "
                               "got " + DescribeValue(arg->value));
  }
  return ScheduleFromObject(*o);
}

StatusOr<optim::OptimizerSpec> OptimizerFromObject(const Object& o) {
  const Args& a = o.args;
  optim::OptimizerSpec s;
  s.type = o.kind;
  FLEET_ASSIGN_OR_RETURN(s.lr, ScheduleArg(a, "learning_rate", 0.001));
  if (s.type == "momentum") {
    FLEET_ASSIGN_OR_RETURN(double mu, a.Float("momentum", 0.9));
    FLEET_ASSIGN_OR_RETURN(bool nesterov, a.Bool("use_nesterov", false));
    s.options["momentum"] = mu;
    s.options["use_nesterov"] = nesterov;
  } else if (s.type == "adam" || s.type == "adamw" || s.type == "adamax") {
    FLEET_ASSIGN_OR_RETURN(double beta1, a.Float("beta1", 0.9));
    FLEET_ASSIGN_OR_RETURN(double beta2, a.Float("beta2", 0.999));
    FLEET_ASSIGN_OR_RETURN(double epsilon, a.Float("epsilon", 1e-8));
    FLEET_ASSIGN_OR_RETURN(bool lazy, a.Bool("lazy_mode", false));
    if (beta1 < 0 || beta1 >= 1) return a.ErrorAt("beta1", "beta1 must be in [0, 1)");
    if (beta2 < 0 || beta2 >= 1) return a.ErrorAt("beta2", "beta2 must be in [0, 1)");
    s.options["beta1"] = beta1;
    s.options["beta2"] = beta2;
    s.options["epsilon"] = epsilon;
    if (s.type != "adamax") s.options["lazy_mode"] = lazy;
    if (s.type == "adamw") {
      FLEET_ASSIGN_OR_RETURN(double wd, a.Float("weight_decay", 0.01));
      s.options["weight_decay"] = wd;
    }
  } else if (s.type == "adagrad") {
    FLEET_ASSIGN_OR_RETURN(double epsilon, a.Float("epsilon", 1e-6));
    FLEET_ASSIGN_OR_RETURN(double init, a.Float("initial_accumulator_value", 0.0));
    if (epsilon <= 0) return a.ErrorAt("epsilon", "epsilon must be positive");
    if (init < 0) return a.ErrorAt("initial_accumulator_value", "must not be negative");
    s.options["epsilon"] = epsilon;
    s.options["initial_accumulator_value"] = init;
  } else if (s.type == "rmsprop") {
    FLEET_ASSIGN_OR_RETURN(double rho, a.Float("rho", 0.95));
    FLEET_ASSIGN_OR_RETURN(double epsilon, a.Float("epsilon", 1e-6));
    FLEET_ASSIGN_OR_RETURN(double momentum, a.Float("momentum", 0.0));
    FLEET_ASSIGN_OR_RETURN(bool centered, a.Bool("centered", false));
    if (rho < 0 || rho >= 1) return a.ErrorAt("rho", "rho must be in [0, 1)");
    if (epsilon <= 0) return a.ErrorAt("epsilon", "epsilon must be positive");
    if (momentum < 0) return a.ErrorAt("momentum", "momentum must not be negative");
    s.options["rho"] = rho;
    s.options["epsilon"] = epsilon;
    s.options["momentum"] = momentum;
    s.options["centered"] = centered;
  } else if (s.type == "lamb") {
    FLEET_ASSIGN_OR_RETURN(double wd, a.Float("lamb_weight_decay", 0.01));
    FLEET_ASSIGN_OR_RETURN(double beta1, a.Float("beta1", 0.9));
    FLEET_ASSIGN_OR_RETURN(double beta2, a.Float("beta2", 0.999));
    FLEET_ASSIGN_OR_RETURN(double epsilon, a.Float("epsilon", 1e-6));
    if (wd < 0) return a.ErrorAt("lamb_weight_decay", "lamb_weight_decay must not be negative");
    if (beta1 < 0 || beta1 >= 1) return a.ErrorAt("beta1", "beta1 must be in [0, 1)");
    if (beta2 < 0 || beta2 >= 1) return a.ErrorAt("beta2", "beta2 must be in [0, 1)");
    if (epsilon <= 0) return a.ErrorAt("epsilon", "epsilon must be positive");
    s.options["weight_decay"] = wd;
    s.options["beta1"] = beta1;
    s.options["beta2"] = beta2;
    s.options["epsilon"] = epsilon;
  }
  FLEET_ASSIGN_OR_RETURN(s.l2_coeff, L2CoeffArg(a, "regularization"));
  FLEET_ASSIGN_OR_RETURN(GradClip clip, GradClipArg(a, "grad_clip"));
  clip.ApplyTo(s);
  return s;
}

// Registers `kind` under its own name and its aliases; the call makes an Object checked by
// `check`.
void AddObject(BuiltinTable& t, const std::string& kind, std::vector<std::string> aliases,
               std::vector<Param> params, std::function<Status(const Object&)> check) {
  Builtin b;
  b.params = std::move(params);
  b.fn = [kind, check](State&, const Args& a) -> StatusOr<Value> {
    auto o = std::make_shared<Object>(Object{kind, a});
    FLEET_RETURN_IF_ERROR(check(*o));
    Value v;
    v.kind = Value::Kind::kObject;
    v.pos = a.call_pos();
    v.object = std::move(o);
    return v;
  };
  t[kind] = b;
  for (const auto& alias : aliases) t[alias] = b;
}

template <typename F>
std::function<Status(const Object&)> Check(F convert) {
  return [convert](const Object& o) { return convert(o).status(); };
}

}  // namespace

StatusOr<ParamAttrSpec> ParamAttrArg(const Args& a, std::string_view name) {
  ParamAttrSpec s;
  const Arg* arg = a.Get(name);
  if (arg == nullptr) return s;
  const Value& v = arg->value;
  if (v.kind == Value::Kind::kBool) {
    s.disabled = !v.bool_value;
    return s;
  }
  if (v.kind == Value::Kind::kString) {
    s.name = v.text;
    return s;
  }
  if (const Object* o = ObjectOf(arg)) {
    if (o->kind == "ParamAttr") return ParamAttrFromObject(*o);
    if (kInitKinds.count(o->kind)) {
      FLEET_ASSIGN_OR_RETURN(s.init, InitFromObject(*o));
      return s;
    }
    if (kRegularizerKinds.count(o->kind)) {
      FLEET_ASSIGN_OR_RETURN(Regularizer r, RegularizerFromObject(*o));
      s.regularizer = r.kind;
      s.regularization_coeff = r.coeff;
      return s;
    }
  }
  return a.ErrorAt(name, "argument '" + std::string(name) +
                             "' must be ParamAttr(...), a parameter name, an initializer, a "
                             "regularizer, False or None, got " + DescribeValue(v));
}

StatusOr<optim::OptimizerSpec> OptimizerArg(const Args& a, std::string_view name) {
  const Arg* arg = a.Get(name);
  const Object* o = ObjectOf(arg);
  if (o == nullptr || !kOptimizerKinds.count(o->kind)) {
    return a.ErrorAt(name, "argument '" + std::string(name) +
                               "' must be an optimizer: sgd(...), momentum(...), adam(...), "
                               "adamw(...), adagrad(...), rmsprop(...), lamb(...) or "
                               "adamax(...), got " +
                               (arg ? DescribeValue(arg->value) : std::string("nothing")));
  }
  return OptimizerFromObject(*o);
}

StatusOr<double> L2CoeffArg(const Args& a, std::string_view name) {
  const Arg* arg = a.Get(name);
  if (arg == nullptr) return 0.0;
  const Object* o = ObjectOf(arg);
  if (o == nullptr || o->kind != "L2Decay") {
    return a.ErrorAt(name, "argument '" + std::string(name) +
                               "' must be L2Decay(coeff) (L1Decay is available per parameter "
                               "through ParamAttr), got " + DescribeValue(arg->value));
  }
  FLEET_ASSIGN_OR_RETURN(Regularizer r, RegularizerFromObject(*o));
  return r.coeff;
}

void GradClip::ApplyTo(optim::OptimizerSpec& spec) const {
  spec.clip_global_norm = global_norm;
  spec.clip_norm = norm;
  spec.clip_by_value = by_value;
  spec.clip_min = min;
  spec.clip_max = max;
}

namespace {

StatusOr<GradClip> GradClipFromObject(const Object& o) {
  GradClip c;
  const Args& a = o.args;
  if (o.kind == "ClipGradByValue") {
    FLEET_ASSIGN_OR_RETURN(c.max, a.Float("max"));
    FLEET_ASSIGN_OR_RETURN(std::optional<double> min, a.OptFloat("min"));
    c.min = min.has_value() ? *min : -c.max;
    if (c.min > c.max) {
      return a.ErrorAt(min.has_value() ? "min" : "max",
                       "min (" + std::to_string(c.min) + ") must not exceed max (" +
                           std::to_string(c.max) + ")");
    }
    c.by_value = true;
    return c;
  }
  FLEET_ASSIGN_OR_RETURN(double n, a.Float("clip_norm"));
  if (n <= 0) return a.ErrorAt("clip_norm", "clip_norm must be positive");
  (o.kind == "ClipGradByNorm" ? c.norm : c.global_norm) = n;
  return c;
}

}  // namespace

StatusOr<GradClip> GradClipArg(const Args& a, std::string_view name) {
  const Arg* arg = a.Get(name);
  if (arg == nullptr) return GradClip{};
  const Object* o = ObjectOf(arg);
  if (o == nullptr || !kClipKinds.count(o->kind)) {
    return a.ErrorAt(name, "argument '" + std::string(name) +
                               "' must be ClipGradByGlobalNorm(clip_norm), ClipGradByNorm("
                               "clip_norm) or ClipGradByValue(max, min), got " +
                               DescribeValue(arg->value));
  }
  return GradClipFromObject(*o);
}

void AddObjectBuiltins(BuiltinTable& t) {
  AddObject(t, "ParamAttr", {"WeightNormParamAttr"},
            {{"name"}, {"initializer"}, {"learning_rate"}, {"regularizer"}, {"trainable"}},
            Check(ParamAttrFromObject));
  auto init = Check(InitFromObject);
  AddObject(t, "Constant", {"ConstantInitializer"}, {{"value"}, {"force_cpu"}}, init);
  AddObject(t, "Normal", {"NormalInitializer"},
            {{"mean"}, {"std"}, {"seed"}, {"loc"}, {"scale"}}, init);
  AddObject(t, "TruncatedNormal", {"TruncatedNormalInitializer"},
            {{"mean"}, {"std"}, {"seed"}, {"loc"}, {"scale"}}, init);
  AddObject(t, "Uniform", {"UniformInitializer"}, {{"low"}, {"high"}, {"seed"}}, init);
  AddObject(t, "Xavier", {"XavierInitializer"},
            {{"uniform"}, {"fan_in"}, {"fan_out"}, {"seed"}}, init);
  AddObject(t, "XavierUniform", {}, {{"fan_in"}, {"fan_out"}, {"seed"}}, init);
  AddObject(t, "XavierNormal", {}, {{"fan_in"}, {"fan_out"}, {"seed"}}, init);
  AddObject(t, "MSRA", {"MSRAInitializer"}, {{"uniform"}, {"fan_in"}, {"seed"}}, init);
  AddObject(t, "KaimingNormal", {}, {{"fan_in"}, {"seed"}}, init);
  AddObject(t, "KaimingUniform", {}, {{"fan_in"}, {"seed"}}, init);
  auto reg = Check(RegularizerFromObject);
  AddObject(t, "L2Decay", {"L2DecayRegularizer"}, {{"coeff"}, {"regularization_coeff"}}, reg);
  AddObject(t, "L1Decay", {"L1DecayRegularizer"}, {{"coeff"}, {"regularization_coeff"}}, reg);
  auto clip = Check(GradClipFromObject);
  AddObject(t, "ClipGradByGlobalNorm", {"GradientClipByGlobalNorm"}, {{"clip_norm", true}},
            clip);
  AddObject(t, "ClipGradByNorm", {"GradientClipByNorm"}, {{"clip_norm", true}}, clip);
  AddObject(t, "ClipGradByValue", {"GradientClipByValue"}, {{"max", true}, {"min"}}, clip);
  auto opt = Check(OptimizerFromObject);
  AddObject(t, "sgd", {"SGD"}, {{"learning_rate"}, {"regularization"}, {"grad_clip"}}, opt);
  AddObject(t, "momentum", {"Momentum"},
            {{"learning_rate"}, {"momentum"}, {"use_nesterov"}, {"regularization"},
             {"grad_clip"}},
            opt);
  AddObject(t, "adam", {"Adam"},
            {{"learning_rate"}, {"beta1"}, {"beta2"}, {"epsilon"}, {"lazy_mode"},
             {"regularization"}, {"grad_clip"}},
            opt);
  AddObject(t, "adamw", {"AdamW"},
            {{"learning_rate"}, {"beta1"}, {"beta2"}, {"epsilon"}, {"weight_decay"},
             {"lazy_mode"}, {"grad_clip"}},
            opt);
  AddObject(t, "adagrad", {"Adagrad"},
            {{"learning_rate"}, {"epsilon"}, {"initial_accumulator_value"}, {"regularization"},
             {"grad_clip"}},
            opt);
  AddObject(t, "rmsprop", {"RMSProp"},
            {{"learning_rate"}, {"rho"}, {"epsilon"}, {"momentum"}, {"centered"},
             {"regularization"}, {"grad_clip"}},
            opt);
  AddObject(t, "adamax", {"Adamax"},
            {{"learning_rate"}, {"beta1"}, {"beta2"}, {"epsilon"}, {"regularization"},
             {"grad_clip"}},
            opt);
  AddObject(t, "lamb", {"Lamb"},
            {{"learning_rate"}, {"lamb_weight_decay"}, {"beta1"}, {"beta2"}, {"epsilon"},
             {"grad_clip"}},
            opt);
  auto sched = Check(ScheduleFromObject);
  AddObject(t, "piecewise_decay", {}, {{"boundaries", true}, {"values", true}}, sched);
  AddObject(t, "exponential_decay", {},
            {{"learning_rate", true}, {"gamma", true}, {"decay_steps"}, {"staircase"}}, sched);
  AddObject(t, "cosine_decay", {}, {{"learning_rate", true}, {"T_max", true}, {"eta_min"}},
            sched);
  AddObject(t, "polynomial_decay", {},
            {{"learning_rate", true}, {"decay_steps", true}, {"end_learning_rate"}, {"power"},
             {"cycle"}},
            sched);
  AddObject(t, "noam_decay", {}, {{"d_model", true}, {"warmup_steps", true}, {"learning_rate"}},
            sched);
  AddObject(t, "natural_exp_decay", {},
            {{"learning_rate", true}, {"decay_steps", true}, {"decay_rate", true}, {"staircase"}},
            sched);
  AddObject(t, "inverse_time_decay", {},
            {{"learning_rate", true}, {"decay_steps", true}, {"decay_rate", true}, {"staircase"}},
            sched);
  AddObject(t, "linear_warmup", {},
            {{"learning_rate", true}, {"warmup_steps", true}, {"start_lr", true},
             {"end_lr", true}},
            sched);
}

}  // namespace fleet::frontend
