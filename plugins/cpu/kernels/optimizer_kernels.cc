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
#include "lr_formulas.h"
#include "optimizer_formulas.h"

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
      const auto r = fleet::kernel::MomentumStep(ps[i], gs[i], vs[i], lr, mu, coeff, rescale,
                                                 nesterov);
      vo[i] = r.velocity;
      po[i] = r.param;
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
      T param = ps[i];
      if constexpr (kAdamW) param -= decay * param;
      const auto r =
          fleet::kernel::AdamStep(param, gs[i], m1s[i], m2s[i], beta1, beta2, lr_t, eps_t);
      m1o[i] = r.moment1;
      m2o[i] = r.moment2;
      po[i] = r.param;
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

// The schedule's parameters and formula are plugins/common/lr_formulas.h, shared with the CUDA
// plugin; the state adds the piecewise table the parameters point into (the state is allocated
// once in prepare and never moved, so the pointers stay valid).
struct LrState {
  fleet::kernel::LrSchedule params;
  std::vector<int64_t> boundaries;
  std::vector<double> values;
};

FleetStatus* LrPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    using fleet::kernel::LrScheduleType;
    auto s = std::make_unique<LrState>();
    fleet::kernel::LrSchedule& p = s->params;
    std::string_view type = StringAttr(kc, "type");
    if (type == "constant") {
      p.type = LrScheduleType::kConstant;
    } else if (type == "piecewise") {
      p.type = LrScheduleType::kPiecewise;
    } else if (type == "exponential") {
      p.type = LrScheduleType::kExponential;
    } else if (type == "cosine") {
      p.type = LrScheduleType::kCosine;
    } else if (type == "polynomial") {
      p.type = LrScheduleType::kPolynomial;
    } else if (type == "noam") {
      p.type = LrScheduleType::kNoam;
    } else if (type == "natural_exp") {
      p.type = LrScheduleType::kNaturalExp;
    } else if (type == "inverse_time") {
      p.type = LrScheduleType::kInverseTime;
    } else {
      return InvalidArgument("lr_schedule: unknown schedule type \"" + std::string(type) + "\"");
    }
    p.learning_rate = FloatAttr(kc, "learning_rate", 0.01);
    s->boundaries = IntsAttr(kc, "boundaries");
    s->values = FloatsAttr(kc, "values");
    if (p.type == LrScheduleType::kPiecewise && s->values.size() != s->boundaries.size() + 1) {
      return InvalidArgument("lr_schedule: piecewise needs one more value than boundaries");
    }
    if (p.type == LrScheduleType::kPiecewise) {
      p.num_boundaries = static_cast<int64_t>(s->boundaries.size());
      p.boundaries = s->boundaries.data();
      p.values = s->values.data();
    }
    p.gamma = FloatAttr(kc, "gamma", 1.0);
    p.decay_steps = static_cast<double>(IntAttr(kc, "decay_steps", 1));
    p.staircase = BoolAttr(kc, "staircase", false);
    p.t_max = static_cast<double>(IntAttr(kc, "T_max", 1));
    p.eta_min = FloatAttr(kc, "eta_min", 0.0);
    p.warmup_steps = static_cast<double>(IntAttr(kc, "warmup_steps", 0));
    p.start_lr = FloatAttr(kc, "start_lr", 0.0);
    p.end_lr = FloatAttr(kc, "end_lr", 0.0);
    p.end_learning_rate = FloatAttr(kc, "end_learning_rate", 0.0001);
    p.power = FloatAttr(kc, "power", 1.0);
    p.cycle = BoolAttr(kc, "cycle", false);
    p.d_model = FloatAttr(kc, "d_model", 1.0);
    p.noam_warmup_steps = static_cast<double>(IntAttr(kc, "noam_warmup_steps", 1));
    p.decay_rate = FloatAttr(kc, "decay_rate", 0.0);
    if (p.noam_warmup_steps <= 0 || p.d_model <= 0) {
      return InvalidArgument("lr_schedule: noam_warmup_steps and d_model must be positive");
    }
    if (p.decay_steps <= 0 || p.t_max <= 0) {
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
    WriteScalar(out, fleet::kernel::LrAt(static_cast<const LrState*>(state)->params, step));
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
  AddOptimizerExtKernels(list);
}

}  // namespace fleet_cpu
