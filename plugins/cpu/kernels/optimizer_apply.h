// Momentum and Adam as the CPU plugin applies them, shared by the dense kernels
// (optimizer_kernels.cc) and the sparse ones (sparse_kernels.cc), which differ only in where the
// gradient of each element comes from: Grad itself, a sparse Grad made dense in the kernel's
// scratch, or (lazy Adam) the merged rows of a sparse Grad.
//
// Every slot but Grad is checked here against Param; the caller checks its gradient. Outputs
// may alias their inputs (ParamOut == Param): element i is read before it is written.
#pragma once

#include <cmath>
#include <string>

#include "kernels/kernel_util.h"
#include "optimizer_formulas.h"

namespace fleet_cpu {

// The first element of a one-element tensor as double (float32, float64 or int64).
inline bool ReadScalar(const FleetTensor* t, double* out) {
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

inline void WriteScalar(const FleetTensor* t, double v) {
  if (t->dtype == FLEET_DTYPE_FLOAT64) {
    *static_cast<double*>(t->data) = v;
  } else {
    *static_cast<float*>(t->data) = static_cast<float>(v);
  }
}

inline FleetStatus* Missing(const FleetKernelContext* kc, const char* what) {
  return InvalidArgument(std::string(kc->op_type) + ": " + what + " is missing");
}

// Checks that `t` is present and has `n` elements.
inline FleetStatus* CheckSized(const FleetKernelContext* kc, const FleetTensor* t,
                               const char* slot, int64_t n) {
  if (t == nullptr) return Missing(kc, slot);
  if (Numel(t) != n) {
    return InvalidArgument(std::string(kc->op_type) + ": " + slot + " has " +
                           std::to_string(Numel(t)) + " elements, Param has " +
                           std::to_string(n));
  }
  return nullptr;
}

// momentum over every element, element i with gradient grad[i].
template <typename T>
FleetStatus* ApplyMomentum(const FleetKernelContext* kc, const T* grad) {
  const FleetTensor* p = Input(kc, "Param");
  if (p == nullptr) return Missing(kc, "Param");
  const int64_t n = Numel(p);
  const FleetTensor* v = Input(kc, "Velocity");
  const FleetTensor* p_out = Output(kc, "ParamOut");
  const FleetTensor* v_out = Output(kc, "VelocityOut");
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
  const T* vs = Data<T>(v);
  T* po = Data<T>(p_out);
  T* vo = Data<T>(v_out);
  for (int64_t i = 0; i < n; ++i) {
    const auto r =
        fleet::kernel::MomentumStep(ps[i], grad[i], vs[i], lr, mu, coeff, rescale, nesterov);
    vo[i] = r.velocity;
    po[i] = r.param;
  }
  return nullptr;
}

// adam (adamw with kAdamW): reads the scalars, then calls visit(step), where step(i, g) updates
// element i with gradient g; visit calls it for the elements that move (every one, for a dense
// gradient). Then it advances the beta powers.
template <typename T, bool kAdamW, typename Visit>
FleetStatus* ApplyAdam(const FleetKernelContext* kc, Visit&& visit) {
  const FleetTensor* p = Input(kc, "Param");
  if (p == nullptr) return Missing(kc, "Param");
  const int64_t n = Numel(p);
  const FleetTensor* m1 = Input(kc, "Moment1");
  const FleetTensor* m2 = Input(kc, "Moment2");
  const FleetTensor* p_out = Output(kc, "ParamOut");
  const FleetTensor* m1_out = Output(kc, "Moment1Out");
  const FleetTensor* m2_out = Output(kc, "Moment2Out");
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
  const auto [lr_t, eps_t] = fleet::kernel::AdamRatesOf(lr, eps, b1p, b2p);
  const T* ps = Data<T>(p);
  const T* m1s = Data<T>(m1);
  const T* m2s = Data<T>(m2);
  T* po = Data<T>(p_out);
  T* m1o = Data<T>(m1_out);
  T* m2o = Data<T>(m2_out);
  visit([&](int64_t i, T grad) {
    T param = ps[i];
    if constexpr (kAdamW) param -= decay * param;
    const auto r =
        fleet::kernel::AdamStep(param, grad, m1s[i], m2s[i], beta1, beta2, lr_t, eps_t);
    m1o[i] = r.moment1;
    m2o[i] = r.moment2;
    po[i] = r.param;
  });
  if (const FleetTensor* o = Output(kc, "Beta1PowOut")) WriteScalar(o, b1p_d * beta1);
  if (const FleetTensor* o = Output(kc, "Beta2PowOut")) WriteScalar(o, b2p_d * beta2);
  return nullptr;
}

}  // namespace fleet_cpu
