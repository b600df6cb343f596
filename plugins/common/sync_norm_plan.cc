#include "sync_norm_plan.h"

#include <string>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

// INVALID_ARGUMENT naming `slot` unless `t` exists with `numel` elements, `what` saying whose.
// The op's name is built only for an error: this runs at every launch.
PlanStatus Expect(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                  int64_t numel, const char* what, int32_t dtype) {
  if (t == nullptr) return PlanInvalid(OpName(kc) + ": missing " + slot);
  if (Numel(t) != numel) {
    return PlanInvalid(OpName(kc) + ": " + slot + " must have " + std::to_string(numel) +
                       " elements (" + what + "), got " + DimsText(t));
  }
  if (t->dtype != dtype) {
    return PlanInvalid(OpName(kc) + ": " + slot + " has dtype " + std::to_string(t->dtype) +
                       ", expected " + std::to_string(dtype));
  }
  return PlanOk();
}

}  // namespace

PlanStatus PlanSyncNorm(const FleetKernelContext* kc, SyncNormOp op, SyncNormPlan* plan) {
  const FleetTensor* x = Input(kc, "X");
  if (x == nullptr) return PlanInvalid(OpName(kc) + ": missing X");
  if (x->ndim < 2) {
    return PlanInvalid(OpName(kc) + ": X must be at least 2-D, got " + DimsText(x));
  }
  plan->n = x->dims[0];
  plan->c = x->dims[1];
  plan->s = 1;
  for (int32_t i = 2; i < x->ndim; ++i) plan->s *= x->dims[i];
  const int64_t numel = Numel(x), c = plan->c;
  const int32_t f64 = FLEET_DTYPE_FLOAT64, same = x->dtype;
  auto check = [&](bool input, const char* slot, int64_t size, const char* what,
                   int32_t dtype) -> PlanStatus {
    return Expect(kc, input ? Input(kc, slot) : Output(kc, slot), slot, size, what, dtype);
  };
  auto optional = [&](const char* slot, int64_t size, const char* what) -> PlanStatus {
    return Output(kc, slot) == nullptr ? PlanOk() : check(false, slot, size, what, same);
  };
  PlanStatus st;
  switch (op) {
    case SyncNormOp::kStats:
      return check(false, "Stats", plan->StatsSize(), "2 * channels + 1", f64);
    case SyncNormOp::kForward:
      for (const char* slot : {"Scale", "Bias", "Mean", "Variance"}) {
        if (!(st = check(true, slot, c, "X's channels", same)).ok()) return st;
      }
      if (!(st = check(true, "Stats", plan->StatsSize(), "2 * channels + 1", f64)).ok()) return st;
      if (!(st = check(false, "Y", numel, "X's shape", same)).ok()) return st;
      for (const char* slot : {"MeanOut", "VarianceOut", "SavedMean", "SavedVariance"}) {
        if (!(st = optional(slot, c, "X's channels")).ok()) return st;
      }
      return PlanOk();
    case SyncNormOp::kGradStats:
    case SyncNormOp::kGrad:
      if (!(st = check(true, "Y@GRAD", numel, "X's shape", same)).ok()) return st;
      for (const char* slot : {"SavedMean", "SavedVariance"}) {
        if (!(st = check(true, slot, c, "X's channels", same)).ok()) return st;
      }
      if (op == SyncNormOp::kGradStats) {
        if (!(st = check(false, "GradStats", plan->GradStatsSize(), "2 * channels", f64)).ok()) {
          return st;
        }
        if (!(st = optional("Scale@GRAD", c, "X's channels")).ok()) return st;
        return optional("Bias@GRAD", c, "X's channels");
      }
      if (!(st = check(true, "Scale", c, "X's channels", same)).ok()) return st;
      if (!(st = check(true, "Stats", plan->StatsSize(), "2 * channels + 1", f64)).ok()) return st;
      if (!(st = check(true, "GradStats", plan->GradStatsSize(), "2 * channels", f64)).ok()) {
        return st;
      }
      return check(false, "X@GRAD", numel, "X's shape", same);
  }
  return PlanInvalid(OpName(kc) + ": unknown sync_batch_norm op");
}

}  // namespace fleet::kernel
