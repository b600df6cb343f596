#include "sequence_plan.h"

#include <string>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

bool ParsePoolType(std::string_view name, SequencePoolType* type) {
  struct Entry {
    const char* name;
    SequencePoolType type;
  };
  static constexpr Entry kTypes[] = {
      {"AVERAGE", SequencePoolType::kAverage}, {"SUM", SequencePoolType::kSum},
      {"SQRT", SequencePoolType::kSqrt},       {"MAX", SequencePoolType::kMax},
      {"LAST", SequencePoolType::kLast},       {"FIRST", SequencePoolType::kFirst}};
  for (const Entry& e : kTypes) {
    if (name == e.name) {
      *type = e.type;
      return true;
    }
  }
  return false;
}

}  // namespace

PlanStatus PlanSequencePool(const FleetKernelContext* kc, bool grad, SequencePoolPlan* plan) {
  const std::string op = kc->op_type != nullptr ? kc->op_type : "sequence_pool";
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = grad ? Input(kc, "Out@GRAD") : Output(kc, "Out");
  if (x == nullptr || out == nullptr) return PlanInvalid(op + ": X and Out are required");
  if (x->struct_size < FLEET_STRUCT_SIZE(FleetTensor, lod_count) || x->lod_count < 1) {
    return PlanInvalid(op + ": X carries no sequence offsets");
  }
  if (x->ndim < 1 || out->ndim != x->ndim) {
    return PlanInvalid(op + ": X " + DimsText(x) + " and Out " + DimsText(out) +
                       " must have the same rank, at least 1");
  }
  if (!ParsePoolType(StringAttr(kc, "pooltype"), &plan->type)) {
    return PlanInvalid(op + ": unknown pooltype '" + std::string(StringAttr(kc, "pooltype")) + "'");
  }
  plan->sequences = x->lod_count - 1;
  plan->capacity = x->dims[0];
  plan->width = 1;
  for (int32_t d = 1; d < x->ndim; ++d) {
    if (out->dims[d] != x->dims[d]) {
      return PlanInvalid(op + ": Out " + DimsText(out) + " does not have X's rows " + DimsText(x));
    }
    plan->width *= x->dims[d];
  }
  if (out->dims[0] != plan->sequences) {
    return PlanInvalid(op + ": Out has " + std::to_string(out->dims[0]) + " rows for " +
                       std::to_string(plan->sequences) + " sequences");
  }
  const FleetTensor* index = grad ? Input(kc, "MaxIndex") : Output(kc, "MaxIndex");
  if (plan->type == SequencePoolType::kMax && grad && index == nullptr) {
    return PlanInvalid(op + ": pooltype MAX needs MaxIndex");
  }
  if (index != nullptr && (index->dtype != FLEET_DTYPE_INT32 || Numel(index) != Numel(out))) {
    return PlanInvalid(op + ": MaxIndex must be int32 with Out's shape, got " + DimsText(index));
  }
  plan->pad_value = static_cast<float>(FloatAttr(kc, "pad_value", 0.0));
  plan->lod = x->lod;
  return PlanOk();
}

}  // namespace fleet::kernel
