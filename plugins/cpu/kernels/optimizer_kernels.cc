// CPU kernels of the optimizer ops (sgd, momentum, adam, adamw), squared_l2_norm and
// lr_schedule, with Paddle's update formulas (see host/ops/optimizer_ops.cc).
//
// Every update loop reads element i of each input before it writes element i of each output,
// so an output may alias its input (ParamOut == Param). Scalars (learning rate, beta powers)
// are read before any output is written. The learning rate may be float32 or float64 whatever
// the parameter's type. Nothing is allocated at launch; lr_schedule parses its attributes once
// in prepare.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_util.h"

namespace fleet_cpu {
namespace {

// The first element of a one-element tensor as double (float32, float64 or int64).
bool ReadScalar(const FleetTensor* t, double* out) {
  if (t == nullptr || t->data == nullptr || Numel(t) < 1) return false;
  switch (t->dtype) {
    case FLEET_DTYPE_FLOAT32: *out = *static_cast<const float*>(t->data); return true;
    case FLEET_DTYPE_FLOAT64: *out = *static_cast<const double*>(t->data); return true;
    case FLEET_DTYPE_INT64:
      *out = static_cast<double>(*static_cast<const int64_t*>(t->data));
      return true;
    default: return false;
  }
}

void WriteScalar(const FleetTensor* t, double v) {
  if (t->dtype == FLEET_DTYPE_FLOAT64) {
    *static_cast<double*>(t->data) = v;
  } else {
    *static_cast<float*>(t->data) = static_cast<float>(v);
  }
}

FleetStatus* Missing(const FleetKernelContext* kc, const char* what) {
  return InvalidArgument(std::string(kc->op_type) + ": " + what + " is missing");
}

// Checks that `t` is present and has `n` elements.
FleetStatus* CheckSized(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                        int64_t n) {
  if (t == nullptr) return Missing(kc, slot);
  if (Numel(t) != n) {
    return InvalidArgument(std::string(kc->op_type) + ": " + slot + " has " +
                           std::to_string(Numel(t)) + " elements, Param has " +
                           std::to_string(n));
  }
  return nullptr;
}

template <typename T>
FleetStatus* SgdLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    const FleetTensor* g = Input(kc, "Grad");
    const FleetTensor* out = Output(kc, "ParamOut");
    if (p == nullptr) return Missing(kc, "Param");
    const int64_t n = Numel(p);
    if (FleetStatus* s = CheckSized(kc, g, "Grad", n)) return s;
    if (FleetStatus* s = CheckSized(kc, out, "ParamOut", n)) return s;
    double lr_d = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr_d)) return Missing(kc, "LearningRate");
    const T lr = static_cast<T>(lr_d);
    const T* ps = Data<T>(p);
    const T* gs = Data<T>(g);
    T* os = Data<T>(out);
    for (int64_t i = 0; i < n; ++i) os[i] = ps[i] - lr * gs[i];
    return nullptr;
  });
}

template <typename T>
FleetStatus* MomentumLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    if (p == nullptr) return Missing(kc, "Param");
    const int64_t n = Numel(p);
    const FleetTensor* g = Input(kc, "Grad");
    const FleetTensor* v = Input(kc, "Velocity");
    const FleetTensor* p_out = Output(kc, "ParamOut");
    const FleetTensor* v_out = Output(kc, "VelocityOut");
    if (FleetStatus* s = CheckSized(kc, g, "Grad", n)) return s;
    if (FleetStatus* s = CheckSized(kc, v, "Velocity", n)) return s;
    if (FleetStatus* s = CheckSized(kc, p_out, "ParamOut", n)) return s;
    if (FleetStatus* s = CheckSized(kc, v_out, "VelocityOut", n)) return s;
    double lr_d = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr_d)) return Missing(kc, "LearningRate");
    const T lr = static_cast<T>(lr_d);
    const T mu = static_cast<T>(FloatAttr(kc, "mu", 0.9));
    const bool nesterov = BoolAttr(kc, "use_nesterov", false);
    const bool l2 = StringAttr(kc, "regularization_method") == "l2_decay";
    const T coeff = l2 ? static_cast<T>(FloatAttr(kc, "regularization_coeff", 0.0)) : T(0);
    const T rescale = static_cast<T>(FloatAttr(kc, "rescale_grad", 1.0));
    const T* ps = Data<T>(p);
    const T* gs = Data<T>(g);
    const T* vs = Data<T>(v);
    T* po = Data<T>(p_out);
    T* vo = Data<T>(v_out);
    for (int64_t i = 0; i < n; ++i) {
      const T param = ps[i];
      const T grad = rescale * gs[i] + coeff * param;
      const T vel = mu * vs[i] + grad;
      vo[i] = vel;
      po[i] = nesterov ? param - (grad + mu * vel) * lr : param - lr * vel;
    }
    return nullptr;
  });
}

template <typename T, bool kAdamW>
FleetStatus* AdamLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    if (p == nullptr) return Missing(kc, "Param");
    const int64_t n = Numel(p);
    const FleetTensor* g = Input(kc, "Grad");
    const FleetTensor* m1 = Input(kc, "Moment1");
    const FleetTensor* m2 = Input(kc, "Moment2");
    const FleetTensor* p_out = Output(kc, "ParamOut");
    const FleetTensor* m1_out = Output(kc, "Moment1Out");
    const FleetTensor* m2_out = Output(kc, "Moment2Out");
    if (FleetStatus* s = CheckSized(kc, g, "Grad", n)) return s;
    if (FleetStatus* s = CheckSized(kc, m1, "Moment1", n)) return s;
    if (FleetStatus* s = CheckSized(kc, m2, "Moment2", n)) return s;
    if (FleetStatus* s = CheckSized(kc, p_out, "ParamOut", n)) return s;
    if (FleetStatus* s = CheckSized(kc, m1_out, "Moment1Out", n)) return s;
    if (FleetStatus* s = CheckSized(kc, m2_out, "Moment2Out", n)) return s;
    double lr_d = 0, b1p_d = 0, b2p_d = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr_d)) return Missing(kc, "LearningRate");
    if (!ReadScalar(Input(kc, "Beta1Pow"), &b1p_d)) return Missing(kc, "Beta1Pow");
    if (!ReadScalar(Input(kc, "Beta2Pow"), &b2p_d)) return Missing(kc, "Beta2Pow");
    const T beta1 = static_cast<T>(FloatAttr(kc, "beta1", 0.9));
    const T beta2 = static_cast<T>(FloatAttr(kc, "beta2", 0.999));
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-8));
    const T b1p = static_cast<T>(b1p_d);
    const T b2p = static_cast<T>(b2p_d);
    T lr = static_cast<T>(lr_d);
    // adamw: decoupled decay with the (ratio-scaled) rate before bias correction.
    T decay = 0;
    if constexpr (kAdamW) {
      lr *= static_cast<T>(FloatAttr(kc, "lr_ratio", 1.0));
      if (BoolAttr(kc, "with_decay", false)) {
        decay = lr * static_cast<T>(FloatAttr(kc, "coeff", 0.01));
      }
    }
    const T lr_t = lr * std::sqrt(T(1) - b2p) / (T(1) - b1p);
    const T eps_t = eps * std::sqrt(T(1) - b2p);
    const T* ps = Data<T>(p);
    const T* gs = Data<T>(g);
    const T* m1s = Data<T>(m1);
    const T* m2s = Data<T>(m2);
    T* po = Data<T>(p_out);
    T* m1o = Data<T>(m1_out);
    T* m2o = Data<T>(m2_out);
    for (int64_t i = 0; i < n; ++i) {
      const T grad = gs[i];
      T param = ps[i];
      if constexpr (kAdamW) param -= decay * param;
      const T mom1 = beta1 * m1s[i] + (T(1) - beta1) * grad;
      const T mom2 = beta2 * m2s[i] + (T(1) - beta2) * grad * grad;
      m1o[i] = mom1;
      m2o[i] = mom2;
      po[i] = param - lr_t * (mom1 / (std::sqrt(mom2) + eps_t));
    }
    if (const FleetTensor* o = Output(kc, "Beta1PowOut")) WriteScalar(o, b1p_d * beta1);
    if (const FleetTensor* o = Output(kc, "Beta2PowOut")) WriteScalar(o, b2p_d * beta2);
    return nullptr;
  });
}

template <typename T>
FleetStatus* SquaredL2NormLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    if (x == nullptr) return Missing(kc, "X");
    if (out == nullptr || Numel(out) != 1) return Missing(kc, "Out (one element)");
    const T* xs = Data<T>(x);
    const int64_t n = Numel(x);
    // Accumulated in double so a large float32 gradient does not lose small terms.
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(xs[i]) * xs[i];
    Data<T>(out)[0] = static_cast<T>(acc);
    return nullptr;
  });
}

// ---- lr_schedule -----------------------------------------------------------------------------

enum class Schedule { kConstant, kPiecewise, kExponential, kCosine };

struct LrState {
  Schedule type = Schedule::kConstant;
  double learning_rate = 0;
  std::vector<int64_t> boundaries;
  std::vector<double> values;
  double gamma = 1;
  double decay_steps = 1;
  bool staircase = false;
  double t_max = 1;
  double eta_min = 0;
  double warmup_steps = 0;
  double start_lr = 0;
  double end_lr = 0;
};

double LrAt(const LrState& s, double step) {
  if (s.warmup_steps > 0) {
    if (step < s.warmup_steps) {
      return s.start_lr + (s.end_lr - s.start_lr) * step / s.warmup_steps;
    }
    step -= s.warmup_steps;
  }
  switch (s.type) {
    case Schedule::kConstant: return s.learning_rate;
    case Schedule::kPiecewise:
      for (size_t i = 0; i < s.boundaries.size(); ++i) {
        if (step < static_cast<double>(s.boundaries[i])) return s.values[i];
      }
      return s.values.back();
    case Schedule::kExponential: {
      double e = step / s.decay_steps;
      if (s.staircase) e = std::floor(e);
      return s.learning_rate * std::pow(s.gamma, e);
    }
    case Schedule::kCosine:
      return s.eta_min +
             (s.learning_rate - s.eta_min) * 0.5 * (1.0 + std::cos(M_PI * step / s.t_max));
  }
  return s.learning_rate;
}

FleetStatus* LrPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto s = std::make_unique<LrState>();
    std::string_view type = StringAttr(kc, "type");
    if (type == "constant") {
      s->type = Schedule::kConstant;
    } else if (type == "piecewise") {
      s->type = Schedule::kPiecewise;
    } else if (type == "exponential") {
      s->type = Schedule::kExponential;
    } else if (type == "cosine") {
      s->type = Schedule::kCosine;
    } else {
      return InvalidArgument("lr_schedule: unknown schedule type \"" + std::string(type) + "\"");
    }
    s->learning_rate = FloatAttr(kc, "learning_rate", 0.01);
    s->boundaries = IntsAttr(kc, "boundaries");
    s->values = FloatsAttr(kc, "values");
    if (s->type == Schedule::kPiecewise && s->values.size() != s->boundaries.size() + 1) {
      return InvalidArgument("lr_schedule: piecewise needs one more value than boundaries");
    }
    s->gamma = FloatAttr(kc, "gamma", 1.0);
    s->decay_steps = static_cast<double>(IntAttr(kc, "decay_steps", 1));
    s->staircase = BoolAttr(kc, "staircase", false);
    s->t_max = static_cast<double>(IntAttr(kc, "T_max", 1));
    s->eta_min = FloatAttr(kc, "eta_min", 0.0);
    s->warmup_steps = static_cast<double>(IntAttr(kc, "warmup_steps", 0));
    s->start_lr = FloatAttr(kc, "start_lr", 0.0);
    s->end_lr = FloatAttr(kc, "end_lr", 0.0);
    if (s->decay_steps <= 0 || s->t_max <= 0) {
      return InvalidArgument("lr_schedule: decay_steps and T_max must be positive");
    }
    *state = s.release();
    return nullptr;
  });
}

void LrRelease(void*, void* state) { delete static_cast<LrState*>(state); }

FleetStatus* LrLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (state == nullptr) return InvalidArgument("lr_schedule: launched without prepare");
    double step = 0;
    if (!ReadScalar(Input(kc, "Step"), &step)) return Missing(kc, "Step");
    const FleetTensor* out = Output(kc, "Out");
    if (out == nullptr || Numel(out) != 1) return Missing(kc, "Out (one element)");
    WriteScalar(out, LrAt(*static_cast<const LrState*>(state), step));
    return nullptr;
  });
}

}  // namespace

void AddOptimizerKernels(KernelList& list) {
  Add(list, "sgd", FLEET_DTYPE_FLOAT32, SgdLaunch<float>);
  Add(list, "sgd", FLEET_DTYPE_FLOAT64, SgdLaunch<double>);
  Add(list, "momentum", FLEET_DTYPE_FLOAT32, MomentumLaunch<float>);
  Add(list, "momentum", FLEET_DTYPE_FLOAT64, MomentumLaunch<double>);
  Add(list, "adam", FLEET_DTYPE_FLOAT32, AdamLaunch<float, false>);
  Add(list, "adam", FLEET_DTYPE_FLOAT64, AdamLaunch<double, false>);
  Add(list, "adamw", FLEET_DTYPE_FLOAT32, AdamLaunch<float, true>);
  Add(list, "adamw", FLEET_DTYPE_FLOAT64, AdamLaunch<double, true>);
  Add(list, "squared_l2_norm", FLEET_DTYPE_FLOAT32, SquaredL2NormLaunch<float>);
  Add(list, "squared_l2_norm", FLEET_DTYPE_FLOAT64, SquaredL2NormLaunch<double>);
  for (int32_t dtype : {FLEET_DTYPE_INT64, FLEET_DTYPE_FLOAT32, FLEET_DTYPE_FLOAT64}) {
    Add(list, "lr_schedule", dtype, LrLaunch, LrPrepare, LrRelease);
  }
}

}  // namespace fleet_cpu
