// The element-wise formulas of the loss ops sigmoid_cross_entropy_with_logits, bce_loss,
// log_loss, huber_loss, smooth_l1_loss and kldiv_loss (forward value and derivative), written
// once for the CPU and the CUDA plugin so the two cannot drift apart.
//
// Contract: every function is pure and handles one element; the caller owns the layout,
// the reductions (in a fixed order) and the chain rule with the incoming gradient. Each
// derivative is d(value)/d(first argument) of its forward twin, with Paddle's clamps:
//   - SigmoidCe: max(x, 0) - x * label + log(1 + exp(-|x|)), stable for any x;
//   - Bce: -(label * max(log x, -100) + (1 - label) * max(log(1 - x), -100)); the derivative
//     divides by max(x * (1 - x), 1e-12) as Paddle's bce_loss_grad does;
//   - LogLoss: -label * log(p + eps) - (1 - label) * log(1 - p + eps);
//   - Huber on the residual r = y - x: r^2 / 2 inside [-delta, delta], delta * (|r| - delta / 2)
//     outside;
//   - SmoothL1 on d = (x - y) * inside_weight with sigma2 = sigma^2: sigma2 * d^2 / 2 when
//     |d| < 1 / sigma2, |d| - 1 / (2 sigma2) otherwise;
//   - KlDiv: target * (log(target) - x) where target > 0, else 0 (and so its derivative);
//   - MarginRank: max(0, -label * (x1 - x2) + margin); its derivative in x1 is -label where the
//     value is positive (x2's is the opposite).
//
// Header-only, C++17, usable from g++ and nvcc (see host_device.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "host_device.h"

namespace fleet::kernel {

FLEET_HOST_DEVICE inline float LossLog(float v) { return logf(v); }
FLEET_HOST_DEVICE inline double LossLog(double v) { return log(v); }
FLEET_HOST_DEVICE inline float LossLog1p(float v) { return log1pf(v); }
FLEET_HOST_DEVICE inline double LossLog1p(double v) { return log1p(v); }
FLEET_HOST_DEVICE inline float LossExp(float v) { return expf(v); }
FLEET_HOST_DEVICE inline double LossExp(double v) { return exp(v); }
FLEET_HOST_DEVICE inline float LossAbs(float v) { return fabsf(v); }
FLEET_HOST_DEVICE inline double LossAbs(double v) { return fabs(v); }

template <typename T>
FLEET_HOST_DEVICE inline T SigmoidCe(T x, T label) {
  const T relu = x > T(0) ? x : T(0);
  return relu - x * label + LossLog1p(LossExp(-LossAbs(x)));
}

template <typename T>
FLEET_HOST_DEVICE inline T SigmoidCeGrad(T x, T label) {
  return T(1) / (T(1) + LossExp(-x)) - label;
}

template <typename T>
FLEET_HOST_DEVICE inline T Bce(T x, T label) {
  T lx = LossLog(x);
  T l1x = LossLog(T(1) - x);
  if (!(lx > T(-100))) lx = T(-100);
  if (!(l1x > T(-100))) l1x = T(-100);
  return -(label * lx + (T(1) - label) * l1x);
}

template <typename T>
FLEET_HOST_DEVICE inline T BceGrad(T x, T label) {
  T denom = x * (T(1) - x);
  if (denom < T(1e-12)) denom = T(1e-12);
  return (x - label) / denom;
}

template <typename T>
FLEET_HOST_DEVICE inline T LogLoss(T p, T label, T eps) {
  return -label * LossLog(p + eps) - (T(1) - label) * LossLog(T(1) - p + eps);
}

template <typename T>
FLEET_HOST_DEVICE inline T LogLossGrad(T p, T label, T eps) {
  return -label / (p + eps) + (T(1) - label) / (T(1) - p + eps);
}

template <typename T>
FLEET_HOST_DEVICE inline T Huber(T r, T delta) {
  const T a = LossAbs(r);
  return a <= delta ? T(0.5) * r * r : delta * (a - T(0.5) * delta);
}

// d Huber / d r.
template <typename T>
FLEET_HOST_DEVICE inline T HuberGrad(T r, T delta) {
  if (LossAbs(r) <= delta) return r;
  return r > T(0) ? delta : -delta;
}

template <typename T>
FLEET_HOST_DEVICE inline T SmoothL1(T d, T sigma2) {
  const T a = LossAbs(d);
  return a < T(1) / sigma2 ? T(0.5) * sigma2 * d * d : a - T(0.5) / sigma2;
}

// d SmoothL1 / d d.
template <typename T>
FLEET_HOST_DEVICE inline T SmoothL1Grad(T d, T sigma2) {
  if (LossAbs(d) < T(1) / sigma2) return sigma2 * d;
  return d > T(0) ? T(1) : (d < T(0) ? T(-1) : T(0));
}

template <typename T>
FLEET_HOST_DEVICE inline T KlDiv(T x, T target) {
  return target > T(0) ? target * (LossLog(target) - x) : T(0);
}

// d KlDiv / d x.
template <typename T>
FLEET_HOST_DEVICE inline T KlDivGrad(T target) {
  return target > T(0) ? -target : T(0);
}

// What sigmoid_cross_entropy_with_logits divides by with normalize: the count of elements
// whose label is not ignore_index, floored at 1e-5 as Paddle does (so an all-ignored batch
// gives 0, not NaN).
template <typename T>
FLEET_HOST_DEVICE inline T SigmoidCeNorm(double kept) {
  return kept > 1e-5 ? static_cast<T>(kept) : static_cast<T>(1e-5);
}

// The label value that marks an element ignored (compared exactly, as Paddle does).
template <typename T>
FLEET_HOST_DEVICE inline bool SigmoidCeIgnored(T label, int64_t ignore_index) {
  return label == static_cast<T>(ignore_index);
}

template <typename T>
FLEET_HOST_DEVICE inline T MarginRank(T x1, T x2, T label, T margin) {
  const T v = -label * (x1 - x2) + margin;
  return v > T(0) ? v : T(0);
}

}  // namespace fleet::kernel
