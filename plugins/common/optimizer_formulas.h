// The per-element update rules of the optimizer ops momentum, adam, adagrad, rmsprop, lamb and
// adamax, and the scale of clip_by_norm, written once for Fleet's plugins (the CPU's dense and
// sparse kernels, CUDA's) so that they cannot drift apart.
//
// Contract: every function is pure and handles one element (or one finished reduction); the
// caller reads all inputs of element i before writing any output of element i, so outputs may
// alias inputs (ParamOut == Param), and owns the reductions lamb and clip_by_norm need (in a
// fixed order, in double). Formulas, with Paddle's slot and attribute names:
//   momentum: g = rescale_grad * Grad + regularization_coeff * Param (coeff 0 without l2_decay);
//             VelocityOut = mu * Velocity + g; ParamOut = Param - lr * VelocityOut, or with
//             use_nesterov Param - lr * (g + mu * VelocityOut)
//   adam:     Moment1Out = beta1 * Moment1 + (1 - beta1) * g; Moment2Out likewise with g^2;
//             ParamOut = Param - lr_t * Moment1Out / (sqrt(Moment2Out) + eps_t), with the
//             bias-corrected lr_t and eps_t the caller computes once
//   adagrad:  MomentOut = Moment + g^2; ParamOut = Param - lr * g / (sqrt(MomentOut) + epsilon)
//   rmsprop:  MeanSquareOut = rho * MeanSquare + (1 - rho) * g^2 (rho is the attribute decay);
//             centered: MeanGradOut = rho * MeanGrad + (1 - rho) * g and
//             denom = sqrt(MeanSquareOut - MeanGradOut^2 + epsilon), else
//             denom = sqrt(MeanSquareOut + epsilon);
//             MomentOut = momentum * Moment + lr * g / denom; ParamOut = Param - MomentOut
//   lamb:     Moment1Out = beta1 * Moment1 + (1 - beta1) * g; Moment2Out likewise with g^2;
//             r = (Moment1Out / (1 - Beta1Pow)) / (sqrt(Moment2Out / (1 - Beta2Pow)) + epsilon)
//                 + weight_decay * Param;
//             ParamOut = Param - lr * trust * r, trust = ||Param|| / ||r|| over the whole
//             parameter (1 when either norm is 0)
//   adamax:   MomentOut = beta1 * Moment + (1 - beta1) * g;
//             InfNormOut = max(beta2 * InfNorm + epsilon, |g|);
//             ParamOut = Param - LearningRate / (1 - Beta1Pow) * MomentOut / InfNormOut
//             (Beta1Pow is advanced by a separate scale op, as Paddle's Adamax does)
//   clip_by_norm: Out = X * max_norm / ||X|| when ||X|| > max_norm, else X.
//
// Header-only, C++17, usable from g++ and nvcc (see host_device.h).
#pragma once

#include <cmath>

#include "host_device.h"

namespace fleet::kernel {

FLEET_HOST_DEVICE inline float OptSqrt(float v) { return sqrtf(v); }
FLEET_HOST_DEVICE inline double OptSqrt(double v) { return sqrt(v); }

template <typename T>
struct MomentumOut {
  T param, velocity;
};

template <typename T>
FLEET_HOST_DEVICE inline MomentumOut<T> MomentumStep(T param, T grad, T velocity, T lr, T mu,
                                                     T coeff, T rescale, bool nesterov) {
  const T g = rescale * grad + coeff * param;
  const T v = mu * velocity + g;
  return {nesterov ? param - (g + mu * v) * lr : param - lr * v, v};
}

template <typename T>
struct AdamOut {
  T param, moment1, moment2;
};

template <typename T>
FLEET_HOST_DEVICE inline AdamOut<T> AdamStep(T param, T grad, T moment1, T moment2, T beta1,
                                             T beta2, T lr_t, T eps_t) {
  const T m1 = beta1 * moment1 + (T(1) - beta1) * grad;
  const T m2 = beta2 * moment2 + (T(1) - beta2) * grad * grad;
  return {param - lr_t * (m1 / (OptSqrt(m2) + eps_t)), m1, m2};
}

// Adam's bias-corrected rate and epsilon for beta powers b1p and b2p, computed once per step.
template <typename T>
struct AdamRates {
  T lr_t, eps_t;
};

template <typename T>
FLEET_HOST_DEVICE inline AdamRates<T> AdamRatesOf(T lr, T epsilon, T b1p, T b2p) {
  return {lr * OptSqrt(T(1) - b2p) / (T(1) - b1p), epsilon * OptSqrt(T(1) - b2p)};
}

template <typename T>
struct AdagradOut {
  T param, moment;
};

template <typename T>
FLEET_HOST_DEVICE inline AdagradOut<T> AdagradStep(T param, T grad, T moment, T lr, T epsilon) {
  const T m = moment + grad * grad;
  return {param - lr * grad / (OptSqrt(m) + epsilon), m};
}

template <typename T>
struct RmspropOut {
  T param, moment, mean_square, mean_grad;
};

// mean_grad is ignored (and returned unchanged) unless centered.
template <typename T>
FLEET_HOST_DEVICE inline RmspropOut<T> RmspropStep(T param, T grad, T moment, T mean_square,
                                                   T mean_grad, T lr, T rho, T epsilon,
                                                   T momentum, bool centered) {
  RmspropOut<T> o;
  o.mean_square = rho * mean_square + (T(1) - rho) * grad * grad;
  o.mean_grad = mean_grad;
  T denom;
  if (centered) {
    o.mean_grad = rho * mean_grad + (T(1) - rho) * grad;
    denom = OptSqrt(o.mean_square - o.mean_grad * o.mean_grad + epsilon);
  } else {
    denom = OptSqrt(o.mean_square + epsilon);
  }
  o.moment = momentum * moment + lr * grad / denom;
  o.param = param - o.moment;
  return o;
}

template <typename T>
struct LambMoments {
  T moment1, moment2, r;  // the new moments and the update direction r
};

template <typename T>
FLEET_HOST_DEVICE inline LambMoments<T> LambDirection(T param, T grad, T moment1, T moment2,
                                                      T beta1, T beta2, T beta1_pow,
                                                      T beta2_pow, T epsilon, T weight_decay) {
  LambMoments<T> o;
  o.moment1 = beta1 * moment1 + (T(1) - beta1) * grad;
  o.moment2 = beta2 * moment2 + (T(1) - beta2) * grad * grad;
  const T m1_hat = o.moment1 / (T(1) - beta1_pow);
  const T m2_hat = o.moment2 / (T(1) - beta2_pow);
  o.r = m1_hat / (OptSqrt(m2_hat) + epsilon) + weight_decay * param;
  return o;
}

template <typename T>
struct AdamaxOut {
  T param, moment, inf_norm;
};

template <typename T>
FLEET_HOST_DEVICE inline AdamaxOut<T> AdamaxStep(T param, T grad, T moment, T inf_norm, T lr,
                                                 T beta1, T beta2, T epsilon, T beta1_pow) {
  AdamaxOut<T> o;
  o.moment = beta1 * moment + (T(1) - beta1) * grad;
  const T decayed = beta2 * inf_norm + epsilon;
  const T a = grad < T(0) ? -grad : grad;
  o.inf_norm = decayed > a ? decayed : a;
  o.param = param - (lr / (T(1) - beta1_pow)) * (o.moment / o.inf_norm);
  return o;
}

// From the squared norms of Param and r over the whole parameter.
FLEET_HOST_DEVICE inline double LambTrustRatio(double param_norm_sq, double r_norm_sq) {
  if (!(param_norm_sq > 0) || !(r_norm_sq > 0)) return 1.0;
  return sqrt(param_norm_sq) / sqrt(r_norm_sq);
}

// The factor clip_by_norm multiplies X by, from X's squared norm.
FLEET_HOST_DEVICE inline double ClipByNormScale(double norm_sq, double max_norm) {
  const double norm = sqrt(norm_sq);
  return norm > max_norm ? max_norm / norm : 1.0;
}

}  // namespace fleet::kernel
