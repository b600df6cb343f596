// The planners of index_plan.h: shape, rank and dtype checks of the indexing ops and
// tril_triu, worded once for both plugins.
#include "index_plan.h"

#include <vector>

#include "kernel_context.h"

namespace fleet::kernel {
namespace {

PlanStatus Missing(const FleetKernelContext* kc, const char* slot) {
  return PlanInvalid(OpName(kc) + ": " + slot + " is missing");
}

PlanStatus CheckIndexTensor(const FleetKernelContext* kc, const FleetTensor* t,
                            const char* slot) {
  if (t == nullptr) return Missing(kc, slot);
  if (t->dtype != FLEET_DTYPE_INT32 && t->dtype != FLEET_DTYPE_INT64) {
    return PlanInvalid(OpName(kc) + ": " + slot + " must hold int32 or int64 values, got dtype " +
                       std::to_string(t->dtype));
  }
  return PlanOk();
}

// A 1-D index list, or [N, 1].
PlanStatus CheckIndexList(const FleetKernelContext* kc, const FleetTensor* t, const char* slot) {
  PlanStatus st = CheckIndexTensor(kc, t, slot);
  if (!st.ok()) return st;
  if (t->ndim == 1 || (t->ndim == 2 && t->dims[1] == 1)) return PlanOk();
  return PlanInvalid(OpName(kc) + ": " + slot + " must be 1-D (or [N, 1]), got " +
                     DimsText(Dims(t)));
}

PlanStatus CheckShape(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                      const std::vector<int64_t>& want) {
  if (t == nullptr || Dims(t) == want) return PlanOk();
  return PlanInvalid(OpName(kc) + ": " + slot + " is " + DimsText(Dims(t)) + ", expected " +
                     DimsText(want));
}

}  // namespace

std::string BadIndexMessage(const FleetKernelContext* kc, const char* slot, int64_t pos,
                            int64_t value, int64_t bound) {
  return OpName(kc) + ": " + slot + "[" + std::to_string(pos) + "] = " + std::to_string(value) +
         " is out of range [0, " + std::to_string(bound) + ")";
}

PlanStatus PlanTake(const FleetKernelContext* kc, const char* axis_attr, bool grad,
                    TakePlan* plan) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* index = Input(kc, "Index");
  if (x == nullptr) return Missing(kc, "X");
  PlanStatus st = CheckIndexList(kc, index, "Index");
  if (!st.ok()) return st;
  const std::vector<int64_t> xd = Dims(x);
  const int64_t rank = static_cast<int64_t>(xd.size());
  int64_t axis = IntAttr(kc, axis_attr);
  if (axis < -rank || axis >= rank) {
    return PlanInvalid(OpName(kc) + ": " + axis_attr + " " + std::to_string(axis) +
                       " is out of range for X " + DimsText(xd));
  }
  if (axis < 0) axis += rank;
  *plan = TakePlan{};
  for (int64_t d = 0; d < axis; ++d) plan->outer *= xd[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) plan->inner *= xd[static_cast<size_t>(d)];
  plan->rows = xd[static_cast<size_t>(axis)];
  plan->count = index->dims[0];
  std::vector<int64_t> od = xd;
  od[static_cast<size_t>(axis)] = plan->count;
  if (grad) {
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (dout == nullptr) return Missing(kc, "Out@GRAD");
    st = CheckShape(kc, dout, "Out@GRAD", od);
    if (st.ok()) st = CheckShape(kc, Output(kc, "X@GRAD"), "X@GRAD", xd);
    return st;
  }
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return Missing(kc, "Out");
  return CheckShape(kc, out, "Out", od);
}

PlanStatus PlanGatherNd(const FleetKernelContext* kc, bool grad, GatherNdPlan* plan) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* index = Input(kc, "Index");
  if (x == nullptr) return Missing(kc, "X");
  PlanStatus st = CheckIndexTensor(kc, index, "Index");
  if (!st.ok()) return st;
  const std::vector<int64_t> xd = Dims(x), id = Dims(index);
  if (id.empty()) return PlanInvalid(OpName(kc) + ": Index must have rank >= 1");
  const int64_t depth = id.back();
  if (depth > static_cast<int64_t>(xd.size()) || depth > kMaxGatherNdDepth) {
    return PlanInvalid(OpName(kc) + ": Index " + DimsText(id) + " addresses " +
                       std::to_string(depth) + " dims of X " + DimsText(xd) + " (at most " +
                       std::to_string(kMaxGatherNdDepth) + " and X's rank)");
  }
  *plan = GatherNdPlan{};
  plan->depth = static_cast<int>(depth);
  for (int64_t k = 0; k < depth; ++k) plan->dims[k] = xd[static_cast<size_t>(k)];
  for (int64_t k = depth; k-- > 0;) {
    plan->row_strides[k] = plan->rows;
    plan->rows *= plan->dims[k];
  }
  for (size_t k = static_cast<size_t>(depth); k < xd.size(); ++k) plan->inner *= xd[k];
  plan->count = 1;
  for (size_t k = 0; k + 1 < id.size(); ++k) plan->count *= id[k];
  std::vector<int64_t> od(id.begin(), id.end() - 1);
  od.insert(od.end(), xd.begin() + depth, xd.end());
  if (grad) {
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (dout == nullptr) return Missing(kc, "Out@GRAD");
    st = CheckShape(kc, dout, "Out@GRAD", od);
    if (st.ok()) st = CheckShape(kc, Output(kc, "X@GRAD"), "X@GRAD", xd);
    return st;
  }
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return Missing(kc, "Out");
  return CheckShape(kc, out, "Out", od);
}

PlanStatus PlanScatter(const FleetKernelContext* kc, bool grad, ScatterPlan* plan) {
  const char* base_slot = grad ? "Out@GRAD" : "X";
  const FleetTensor* base = Input(kc, base_slot);
  const FleetTensor* ids = Input(kc, "Ids");
  const FleetTensor* up = Input(kc, "Updates");
  if (base == nullptr) return Missing(kc, base_slot);
  if (up == nullptr) return Missing(kc, "Updates");
  PlanStatus st = CheckIndexList(kc, ids, "Ids");
  if (!st.ok()) return st;
  const std::vector<int64_t> bd = Dims(base);
  if (bd.empty()) return PlanInvalid(OpName(kc) + ": " + base_slot + " must have rank >= 1");
  *plan = ScatterPlan{};
  plan->rows = bd[0];
  for (size_t k = 1; k < bd.size(); ++k) plan->inner *= bd[k];
  plan->count = ids->dims[0];
  std::vector<int64_t> ud = bd;
  ud[0] = plan->count;
  st = CheckShape(kc, up, "Updates", ud);
  if (!st.ok()) return st;
  if (grad) {
    st = CheckShape(kc, Output(kc, "X@GRAD"), "X@GRAD", bd);
    if (st.ok()) st = CheckShape(kc, Output(kc, "Updates@GRAD"), "Updates@GRAD", ud);
    return st;
  }
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr) return Missing(kc, "Out");
  if (up->dtype != base->dtype) {
    return PlanInvalid(OpName(kc) + ": Updates has dtype " + std::to_string(up->dtype) +
                       " but X has " + std::to_string(base->dtype));
  }
  return CheckShape(kc, out, "Out", bd);
}

PlanStatus PlanOneHot(const FleetKernelContext* kc, OneHotPlan* plan) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  PlanStatus st = CheckIndexTensor(kc, x, "X");
  if (!st.ok()) return st;
  if (out == nullptr) return Missing(kc, "Out");
  *plan = OneHotPlan{};
  plan->depth = IntAttr(kc, "depth", -1);
  plan->allow_out_of_range = BoolAttr(kc, "allow_out_of_range", false);
  plan->out_dtype = static_cast<int32_t>(IntAttr(kc, "dtype", FLEET_DTYPE_FLOAT32));
  if (plan->depth <= 0) {
    return PlanInvalid(OpName(kc) + ": depth must be positive, got " +
                       std::to_string(plan->depth));
  }
  if (out->dtype != plan->out_dtype ||
      (out->dtype != FLEET_DTYPE_FLOAT32 && out->dtype != FLEET_DTYPE_FLOAT64)) {
    return PlanInvalid(OpName(kc) + ": Out has dtype " + std::to_string(out->dtype) +
                       "; expected the dtype attribute " + std::to_string(plan->out_dtype) +
                       " (float32 or float64)");
  }
  plan->count = Numel(x);
  std::vector<int64_t> od = Dims(x);
  od.push_back(plan->depth);
  return CheckShape(kc, out, "Out", od);
}

PlanStatus PlanTrilTriu(const FleetKernelContext* kc, const char* src, const char* dst,
                        TrilPlan* plan) {
  const FleetTensor* x = Input(kc, src);
  if (x == nullptr) return Missing(kc, src);
  const std::vector<int64_t> xd = Dims(x);
  if (xd.size() < 2) {
    return PlanInvalid(OpName(kc) + ": " + src + " must have rank >= 2, got " + DimsText(xd));
  }
  *plan = TrilPlan{};
  for (size_t k = 0; k + 2 < xd.size(); ++k) plan->batch *= xd[k];
  plan->rows = xd[xd.size() - 2];
  plan->cols = xd.back();
  plan->diagonal = IntAttr(kc, "diagonal", 0);
  plan->lower = BoolAttr(kc, "lower", true);
  return CheckShape(kc, Output(kc, dst), dst, xd);
}

}  // namespace fleet::kernel
