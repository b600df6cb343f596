// The learning rate of the lr_schedule op at a given step, written once for the CPU and the
// CUDA plugin so the two schedules cannot drift apart.
//
// Contract: LrAt is a pure function of the parameters and the step, which counts from 0 at
// the first training step (the host's @LR_DECAY_COUNTER@, as Paddle 1.8's counter does for
// every schedule but noam, whose counter starts at 1: LrAt shifts noam's step itself). The
// caller parses and validates the attributes (decay_steps, T_max, noam_warmup_steps and d_model
// positive; for piecewise, num_boundaries + 1 values) and owns the piecewise table; LrSchedule
// only points at it, in host memory on the CPU and in device memory on the CUDA side, so the
// struct can be passed to a kernel by value.
//
// Rounding: the formulas use plain operators on both sides, as each plugin did before they were
// shared (the CUDA kernel has always let nvcc contract them; pow and cos come from different
// math libraries anyway, so the schedule agrees to an ulp or so, not bit for bit).
//
// Header-only, C++17, usable from g++ and nvcc (see host_device.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "host_device.h"

namespace fleet::kernel {

enum class LrScheduleType : int32_t {
  kConstant,
  kPiecewise,
  kExponential,
  kCosine,
  kPolynomial,   // Paddle's polynomial_decay
  kNoam,         // noam_decay
  kNaturalExp,   // natural_exp_decay
  kInverseTime,  // inverse_time_decay
};

struct LrSchedule {
  LrScheduleType type = LrScheduleType::kConstant;
  bool staircase = false;  // exponential: whole decay periods only
  double learning_rate = 0;
  double gamma = 1;        // exponential: factor per decay period
  double decay_steps = 1;
  double t_max = 1;        // cosine: half period
  double eta_min = 0;      // cosine: floor
  double warmup_steps = 0; // linear warm-up from start_lr to end_lr before the schedule
  double start_lr = 0;
  double end_lr = 0;
  double end_learning_rate = 0.0001;  // polynomial: the rate reached at decay_steps
  double power = 1;                   // polynomial: exponent
  bool cycle = false;                 // polynomial: restart every decay_steps
  double d_model = 1;                 // noam: model width
  double noam_warmup_steps = 1;       // noam: steps of rising rate
  double decay_rate = 0;              // natural_exp, inverse_time
  int64_t num_boundaries = 0;
  const int64_t* boundaries = nullptr;  // piecewise: num_boundaries entries
  const double* values = nullptr;       // piecewise: num_boundaries + 1 entries
};

// pi spelled out: M_PI is POSIX rather than standard C++; this is the same double.
inline constexpr double kLrPi = 3.14159265358979323846;

FLEET_HOST_DEVICE inline double LrAt(const LrSchedule& s, double step) {
  if (s.warmup_steps > 0) {
    if (step < s.warmup_steps) {
      return s.start_lr + (s.end_lr - s.start_lr) * step / s.warmup_steps;
    }
    // The schedule proper starts counting when the warm-up ends.
    step -= s.warmup_steps;
  }
  switch (s.type) {
    case LrScheduleType::kConstant:
      return s.learning_rate;
    case LrScheduleType::kPiecewise:
      for (int64_t i = 0; i < s.num_boundaries; ++i) {
        if (step < static_cast<double>(s.boundaries[i])) return s.values[i];
      }
      return s.values[s.num_boundaries];
    case LrScheduleType::kExponential: {
      double e = step / s.decay_steps;
      if (s.staircase) e = floor(e);
      return s.learning_rate * pow(s.gamma, e);
    }
    case LrScheduleType::kCosine:
      return s.eta_min +
             (s.learning_rate - s.eta_min) * 0.5 * (1.0 + cos(kLrPi * step / s.t_max));
    case LrScheduleType::kPolynomial: {
      double steps = s.decay_steps;
      if (s.cycle) {
        // The period grows to the next multiple of decay_steps at or above the step.
        double periods = ceil(step / s.decay_steps);
        if (periods < 1) periods = 1;
        steps = s.decay_steps * periods;
      } else if (step > steps) {
        step = steps;
      }
      return (s.learning_rate - s.end_learning_rate) * pow(1.0 - step / steps, s.power) +
             s.end_learning_rate;
    }
    case LrScheduleType::kNoam: {
      // Paddle 1.8 counts noam's steps from 1 (its counter starts there), so step 0 here is
      // its step 1 and the first rate is not 0.
      const double t = step + 1;
      const double a = pow(t, -0.5);
      const double b = pow(s.noam_warmup_steps, -1.5) * t;
      return s.learning_rate * pow(s.d_model, -0.5) * (a < b ? a : b);
    }
    case LrScheduleType::kNaturalExp:
    case LrScheduleType::kInverseTime: {
      double e = step / s.decay_steps;
      if (s.staircase) e = floor(e);
      if (s.type == LrScheduleType::kNaturalExp) return s.learning_rate * exp(-s.decay_rate * e);
      return s.learning_rate / (1.0 + s.decay_rate * e);
    }
  }
  return s.learning_rate;
}

}  // namespace fleet::kernel
