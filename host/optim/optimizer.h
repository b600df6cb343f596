// host/optim: optimizers, learning-rate schedules, regularization and clipping, as ops
// appended to a program.
// Depends on: autodiff/, ir/, ops/, support/.
//
// Optimizers: append update ops (and their accumulators) for each (param, grad) pair, with the
// learning rate as a var computed by schedule ops in the program.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autodiff/backward.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet::optim {

// A learning-rate schedule. `type` is "constant", "piecewise" (boundaries, values),
// "exponential" (gamma, decay_steps, staircase), "cosine" (T_max / decay_steps, eta_min) or
// "linear_warmup" (warmup_steps, start_lr, end_lr, wrapping `inner` or a constant end_lr),
// "polynomial" (decay_steps, end_learning_rate, power, cycle), "noam" (d_model, warmup_steps),
// "natural_exp" or "inverse_time" (decay_steps, decay_rate, staircase).
struct LrSchedule {
  std::string type = "constant";
  double learning_rate = 0.01;                 // base rate (constant, exponential, cosine)
  std::map<std::string, ir::Attribute> args;   // the type's parameters, Paddle's names
  std::shared_ptr<const LrSchedule> inner;     // linear_warmup: the schedule after warm-up
};

struct OptimizerSpec {
  // sgd | momentum | adam | adamw | adagrad | rmsprop | lamb | adamax
  std::string type = "sgd";
  LrSchedule lr;
  // The type's options with Paddle's names: momentum, use_nesterov (momentum); beta1, beta2,
  // epsilon, lazy_mode (adam, adamw); weight_decay (adamw's decoupled coefficient, lamb's
  // lamb_weight_decay); beta1, beta2, epsilon (lamb); epsilon, initial_accumulator_value
  // (adagrad); rho, epsilon, momentum, centered (rmsprop); beta1, beta2, epsilon (adamax).
  std::map<std::string, ir::Attribute> options;
  double l2_coeff = 0.0;           // regularization=L2Decay(c) for every param without its own
  double clip_global_norm = 0.0;   // grad_clip=ClipGradByGlobalNorm(c); 0 = no clipping
  // grad_clip=ClipGradByNorm(c): each gradient scaled to L2 norm at most c (a clip_by_norm op
  // per gradient); 0 = none.
  double clip_norm = 0.0;
  // grad_clip=ClipGradByValue(max, min): each gradient element limited to [clip_min, clip_max]
  // (a `clip` op per gradient).
  bool clip_by_value = false;
  double clip_min = 0.0;
  double clip_max = 0.0;
};

// Whether `spec` can apply sparse gradients (ir::Var::selected_rows): its update is sgd,
// momentum, adam (lazy_mode or not) or adagrad, and it clips by global norm if at all.
bool OptimizerTakesSparseGradients(const OptimizerSpec& spec);

// Appends to `main`: regularization, clipping, the learning-rate ops and one update op per
// parameter (with per-parameter learning-rate scale), in parameter-name order; declares the
// accumulators (moments, beta powers, the step counter, the learning-rate var) as persistable
// vars in both programs and appends their initializers to `startup`. Errors name the option or
// parameter at fault.
Status ApplyOptimizer(ir::Program& main, ir::Program& startup,
                      const std::vector<autodiff::ParamGrad>& params_grads,
                      const OptimizerSpec& spec);

}  // namespace fleet::optim
