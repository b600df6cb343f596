#include "reduce_plan.h"

#include <string>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

PlanStatus CheckRank(const FleetKernelContext* kc, const FleetTensor* x) {
  if (x == nullptr) return PlanInvalid(OpName(kc) + ": input X is missing");
  if (x->ndim > kMaxStrideRank) {
    return PlanInvalid(OpName(kc) + ": X " + DimsText(x) + " has rank " +
                       std::to_string(x->ndim) + ", more than " +
                       std::to_string(kMaxStrideRank));
  }
  return PlanOk();
}

}  // namespace

void MakeReduceGroups(const int64_t* dims, int rank, const bool* reduced, ReduceGroups* g) {
  *g = ReduceGroups();
  int64_t strides[kMaxStrideRank] = {};
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
  int last_kind = -1;  // 0 kept, 1 reduced: the kind of the dim appended last
  for (int i = 0; i < rank; ++i) {
    const bool red = reduced[i];
    (red ? g->red_count : g->kept_count) *= dims[i];
    if (dims[i] == 1) continue;
    int& r = red ? g->red_rank : g->kept_rank;
    int64_t* ds = red ? g->red_dims : g->kept_dims;
    int64_t* ss = red ? g->red_strides : g->kept_strides;
    // A dim merges into the previous one of its kind when both are adjacent in X and the
    // previous one steps over exactly this one.
    if (last_kind == static_cast<int>(red) && r > 0 && ss[r - 1] == strides[i] * dims[i]) {
      ds[r - 1] *= dims[i];
      ss[r - 1] = strides[i];
      continue;
    }
    ds[r] = dims[i];
    ss[r] = strides[i];
    ++r;
    last_kind = static_cast<int>(red);
  }
}

PlanStatus PlanReduce(const FleetKernelContext* kc, const FleetTensor* x, ReduceGroups* g) {
  if (PlanStatus s = CheckRank(kc, x); !s.ok()) return s;
  const int rank = x->ndim;
  bool reduced[kMaxStrideRank] = {};
  const std::vector<int64_t> dims = IntsAttr(kc, "dim");
  const bool all = BoolAttr(kc, "reduce_all", false) || dims.empty();
  for (int i = 0; i < rank; ++i) reduced[i] = all;
  if (!all) {
    for (int64_t d : dims) {
      const int64_t k = d < 0 ? d + rank : d;
      if (k < 0 || k >= rank) {
        return PlanInvalid(OpName(kc) + ": dim " + std::to_string(d) +
                           " is out of range for X " + DimsText(x));
      }
      reduced[k] = true;
    }
  }
  MakeReduceGroups(x->dims, rank, reduced, g);
  return PlanOk();
}

PlanStatus PlanAxis(const FleetKernelContext* kc, const FleetTensor* x, const char* axis_attr,
                    int64_t fallback, bool flatten, AxisPlan* plan) {
  if (PlanStatus s = CheckRank(kc, x); !s.ok()) return s;
  int64_t numel = 1;
  for (int i = 0; i < x->ndim; ++i) numel *= x->dims[i];
  if (flatten) {
    const bool reduced[1] = {true};
    MakeReduceGroups(&numel, 1, reduced, &plan->groups);
    plan->axis_len = numel;
    plan->axis_stride = 1;
    return PlanOk();
  }
  const int64_t rank = x->ndim;
  const int64_t axis = IntAttr(kc, axis_attr, fallback);
  const int64_t k = axis < 0 ? axis + rank : axis;
  if (k < 0 || k >= rank) {
    return PlanInvalid(OpName(kc) + ": " + axis_attr + " " + std::to_string(axis) +
                       " is out of range for X " + DimsText(x));
  }
  bool reduced[kMaxStrideRank] = {};
  reduced[k] = true;
  MakeReduceGroups(x->dims, static_cast<int>(rank), reduced, &plan->groups);
  plan->axis_len = x->dims[k];
  int64_t stride = 1;
  for (int64_t i = rank - 1; i > k; --i) stride *= x->dims[i];
  plan->axis_stride = stride;
  return PlanOk();
}

}  // namespace fleet::kernel
