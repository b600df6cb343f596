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
#include "kernels/optimizer_apply.h"
#include "lr_formulas.h"

namespace fleet_cpu {
namespace {

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
    const FleetTensor* g = Input(kc, "Grad");
    if (FleetStatus* s = CheckSized(kc, g, "Grad", Numel(p))) return s;
    return ApplyMomentum<T>(kc, Data<const T>(g));
  });
}

template <typename T, bool kAdamW>
FleetStatus* AdamLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    if (p == nullptr) return Missing(kc, "Param");
    const int64_t n = Numel(p);
    const FleetTensor* g = Input(kc, "Grad");
    if (FleetStatus* s = CheckSized(kc, g, "Grad", n)) return s;
    const T* gs = Data<const T>(g);
    return ApplyAdam<T, kAdamW>(kc, [&](auto&& step) {
      for (int64_t i = 0; i < n; ++i) step(i, gs[i]);
    });
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
