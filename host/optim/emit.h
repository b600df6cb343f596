// Building blocks the optimizers share (internal to host/optim): unique var names, var
// declarations in main and startup, op construction, option parsing with did-you-mean errors,
// and the pieces ApplyOptimizer strings together (learning rate, clipping, regularization).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autodiff/backward.h"
#include "ir/program.h"
#include "optim/optimizer.h"
#include "support/status.h"

namespace fleet::optim::internal {

using ir::MakeOp;

// "<prefix>_<k>" for the smallest k >= 0 that neither program's global block declares
// (Paddle's unique_name.generate for accumulators: "fc_0.w_0_moment1_0").
std::string UniqueName(const ir::Program& main, const ir::Program& startup,
                       const std::string& prefix);

// Declares `var` in main's global block, and also in startup's when `startup` is given.
Status Declare(ir::Program& main, ir::Program* startup, const ir::Var& var);

ir::Var MakeVar(std::string name, ir::DataType dtype, std::vector<int64_t> shape,
                bool persistable);

// fill_constant with Paddle's attribute types (shape int64s, value float, dtype int32).
ir::Op FillConstant(const std::string& out, std::vector<int64_t> shape, double value,
                    ir::DataType dtype);

// Checks `given` names against `allowed`: INVALID_ARGUMENT naming the first unknown one, with a
// did-you-mean and the list of accepted names. `what` says whose options these are.
Status CheckNames(const std::map<std::string, ir::Attribute>& given,
                  const std::vector<std::string>& allowed, const std::string& what);

// Typed reads of an option map; `fallback` when absent, an error naming `what`.`name` when the
// stored type does not convert.
StatusOr<double> DoubleOption(const std::map<std::string, ir::Attribute>& options,
                              const std::string& name, double fallback, const std::string& what);
StatusOr<bool> BoolOption(const std::map<std::string, ir::Attribute>& options,
                          const std::string& name, bool fallback, const std::string& what);

// The learning-rate schedule as lr_schedule attributes, validated; `constant` is set (and no
// attributes are returned) for a plain constant rate.
struct LrPlan {
  bool constant = true;
  double value = 0.0;     // the constant rate, or the rate at step 0 for the startup value
  ir::AttrMap attrs;      // lr_schedule attributes when !constant
};
StatusOr<LrPlan> PlanLrSchedule(const LrSchedule& schedule);

// Appends the learning-rate var (persistable float32 [1], "learning_rate_<k>") and what sets
// it: a fill_constant in startup, or (for a schedule) the step counter @LR_DECAY_COUNTER@
// (int64 [1], -1 in startup) incremented at the start of main, followed by lr_schedule.
// Returns the var's name.
StatusOr<std::string> AppendLearningRate(ir::Program& main, ir::Program& startup,
                                         const LrSchedule& schedule);

// ClipGradByGlobalNorm: every grad is multiplied in place by
// clip_norm / max(sqrt(sum_g squared_l2_norm(g)), clip_norm).
Status AppendGlobalNormClip(ir::Program& main, ir::Program& startup,
                            const std::vector<autodiff::ParamGrad>& params_grads,
                            double clip_norm);

// ClipGradByNorm: every grad is rewritten in place by clip_by_norm (max_norm = clip_norm).
Status AppendNormClip(ir::Program& main, const std::vector<autodiff::ParamGrad>& params_grads,
                      double clip_norm);

// ClipGradByValue: every grad is rewritten in place by Paddle's `clip` op (attributes min, max).
Status AppendValueClip(ir::Program& main, const std::vector<autodiff::ParamGrad>& params_grads,
                       double min, double max);

// Weight decay added to the gradient in place: grad = sum(grad, coeff * param) for "l2" (and
// coeff * sign(param) for "l1"), with the param's own regularizer or the global l2 coefficient.
Status AppendRegularization(ir::Program& main, ir::Program& startup,
                            const autodiff::ParamGrad& pg, double global_l2_coeff);

}  // namespace fleet::optim::internal
