// reduce_max / min / prod / any / all (+ grads of max, min, prod), arg_max / arg_min, argsort
// (+ grad) and p_norm (+ grad). The groups each output element folds (plugins/common/
// reduce_plan.h) are planned at prepare; a launch walks each group in element order, so the
// result does not depend on the thread count. The formulas are shared with the CUDA plugin
// (plugins/common/logic_formulas.h). oneDNN's reduction primitive is not used: it would serve
// float32 alone and leaves NaN in max / min unspecified, while one loop over the planned groups
// gives every dtype, on both devices, the same NaN rule and order (reduce_sum is a loop too).
#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>
#include <string>

#include "kernels/math_util.h"
#include "logic_formulas.h"
#include "reduce_plan.h"

namespace fleet_cpu::math {
namespace {

using fleet::kernel::AxisPlan;
using fleet::kernel::ReduceGroups;
using fleet::kernel::ReduceOp;

constexpr int64_t kGrain = 1 << 12;

// Calls f(offset) for the members of the group at `base`, in GroupMember order.
template <typename F>
void ForMembers(const ReduceGroups& g, int64_t base, F&& f) {
  if (g.red_rank == 0) {
    f(base);
    return;
  }
  const int last = g.red_rank - 1;
  const int64_t n = g.red_dims[last], s = g.red_strides[last];
  int64_t outer = 1;
  for (int d = 0; d < last; ++d) outer *= g.red_dims[d];
  if (n == 0 || outer == 0) return;
  int64_t idx[kMaxRank] = {};
  int64_t off = base;
  for (int64_t r = 0; r < outer; ++r) {
    for (int64_t j = 0; j < n; ++j) f(off + j * s);
    for (int d = last - 1; d >= 0; --d) {
      off += g.red_strides[d];
      if (++idx[d] < g.red_dims[d]) break;
      off -= g.red_strides[d] * g.red_dims[d];
      idx[d] = 0;
    }
  }
}

// Runs f(k, base) for every group, split over threads by groups.
template <typename F>
void ForGroups(const FleetKernelContext* kc, const ReduceGroups& g, F&& f) {
  const int64_t per_group = std::max<int64_t>(1, g.red_count);
  ParallelFor(kc, g.kept_count, std::max<int64_t>(1, kGrain / per_group),
              [&](int64_t begin, int64_t end) {
                for (int64_t k = begin; k < end; ++k) f(k, fleet::kernel::GroupBase(g, k));
              });
}

FleetStatus* ExpectCount(const FleetKernelContext* kc, const FleetTensor* t, const char* slot,
                         int64_t n) {
  if (Numel(t) == n) return nullptr;
  return InvalidArgument(std::string(kc->op_type) + ": " + slot + " " + DimsText(t) + " has " +
                         std::to_string(Numel(t)) + " elements, expected " + std::to_string(n));
}

// ---- reduce_* -------------------------------------------------------------------------------

// max / min over n contiguous elements. The one-accumulator fold is a chain of dependent,
// NaN-aware compares (about a nanosecond an element); here the compares are plain max / min that
// the compiler vectorises (OpenMP simd reductions), and NaN is tracked on the side: any NaN makes
// the result NaN, as in the fold. Max and min do not depend on the order they are folded in, so
// this agrees with the fold; only the sign of a zero among equal zeros may differ.
template <ReduceOp op, typename T>
T ContiguousExtreme(const T* x, int64_t n) {
  T acc = fleet::kernel::ReduceIdentity<op, T>();
  if constexpr (std::is_floating_point_v<T>) {
    int nan = 0;
    if constexpr (op == ReduceOp::kMax) {
#pragma omp simd reduction(max : acc) reduction(| : nan)
      for (int64_t i = 0; i < n; ++i) {
        acc = x[i] > acc ? x[i] : acc;
        nan |= static_cast<int>(x[i] != x[i]);
      }
    } else {
#pragma omp simd reduction(min : acc) reduction(| : nan)
      for (int64_t i = 0; i < n; ++i) {
        acc = x[i] < acc ? x[i] : acc;
        nan |= static_cast<int>(x[i] != x[i]);
      }
    }
    return nan ? std::numeric_limits<T>::quiet_NaN() : acc;
  } else if constexpr (op == ReduceOp::kMax) {
#pragma omp simd reduction(max : acc)
    for (int64_t i = 0; i < n; ++i) acc = x[i] > acc ? x[i] : acc;
    return acc;
  } else {
#pragma omp simd reduction(min : acc)
    for (int64_t i = 0; i < n; ++i) acc = x[i] < acc ? x[i] : acc;
    return acc;
  }
}

FleetStatus* ReducePrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto g = std::make_unique<ReduceGroups>();
    if (FleetStatus* s = FromPlan(fleet::kernel::PlanReduce(kc, Input(kc, "X"), g.get()))) {
      return s;
    }
    *state = g.release();
    return nullptr;
  });
}

void GroupsRelease(void*, void* state) { delete static_cast<ReduceGroups*>(state); }

template <typename S>
FleetStatus* Prepared(const FleetKernelContext* kc, void* state, const S** out) {
  if (state == nullptr) {
    return Error(FLEET_CODE_FAILED_PRECONDITION,
                 std::string(kc->op_type) + ": launched without prepare");
  }
  *out = static_cast<const S*>(state);
  return nullptr;
}

template <ReduceOp op, typename T>
FleetStatus* ReduceLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const ReduceGroups* g = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &g)) return e;
    const FleetTensor* out = Output(kc, "Out");
    if (FleetStatus* e = ExpectCount(kc, out, "Out", g->kept_count)) return e;
    const T* xs = Data<const T>(Input(kc, "X"));
    T* os = Data<T>(out);
    if constexpr (op == ReduceOp::kMax || op == ReduceOp::kMin) {
      if (g->red_rank == 1 && g->red_strides[0] == 1) {
        const int64_t n = g->red_dims[0];
        ForGroups(kc, *g, [&](int64_t k, int64_t base) {
          os[k] = ContiguousExtreme<op>(xs + base, n);
        });
        return nullptr;
      }
    }
    ForGroups(kc, *g, [&](int64_t k, int64_t base) {
      T acc = fleet::kernel::ReduceIdentity<op, T>();
      ForMembers(*g, base, [&](int64_t i) { acc = fleet::kernel::ReduceCombine<op>(acc, xs[i]); });
      os[k] = acc;
    });
    return nullptr;
  });
}

// reduce_max_grad / reduce_min_grad (kProd false) and reduce_prod_grad.
template <bool kProd, typename T>
FleetStatus* ReduceGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Out", "Out@GRAD"}, {"X@GRAD"})) return e;
    const ReduceGroups* g = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &g)) return e;
    if (FleetStatus* e = ExpectCount(kc, Input(kc, "Out"), "Out", g->kept_count)) return e;
    if (FleetStatus* e = ExpectCount(kc, Input(kc, "Out@GRAD"), "Out@GRAD", g->kept_count)) {
      return e;
    }
    const T* xs = Data<const T>(Input(kc, "X"));
    const T* os = Data<const T>(Input(kc, "Out"));
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    T* dxs = Data<T>(Output(kc, "X@GRAD"));
    ForGroups(kc, *g, [&](int64_t k, int64_t base) {
      if constexpr (kProd) {
        int64_t zeros = 0;
        T product = T(1);
        ForMembers(*g, base, [&](int64_t i) {
          if (xs[i] == T(0)) {
            ++zeros;
          } else {
            product *= xs[i];
          }
        });
        ForMembers(*g, base, [&](int64_t i) {
          dxs[i] = fleet::kernel::ProdGrad(xs[i], zeros, product, gs[k]);
        });
      } else {
        ForMembers(*g, base,
                   [&](int64_t i) { dxs[i] = fleet::kernel::ExtremeGrad(xs[i], os[k], gs[k]); });
      }
    });
    return nullptr;
  });
}

// ---- arg_max / arg_min / argsort / p_norm -----------------------------------------------------

// The groups along `axis` (arg_*: attribute axis, default 0, or all of X with flatten; argsort:
// axis, default -1; p_norm: axis, default -1, or all of X with asvector).
enum class AxisOp { kArg, kSort, kNorm };

template <AxisOp kind>
FleetStatus* AxisPrepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto plan = std::make_unique<AxisPlan>();
    const bool flat = kind == AxisOp::kArg    ? BoolAttr(kc, "flatten", false)
                      : kind == AxisOp::kNorm ? BoolAttr(kc, "asvector", false)
                                              : false;
    const int64_t fallback = kind == AxisOp::kArg ? 0 : -1;
    if (FleetStatus* s = FromPlan(
            fleet::kernel::PlanAxis(kc, Input(kc, "X"), "axis", fallback, flat, plan.get()))) {
      return s;
    }
    if (kind == AxisOp::kArg && plan->axis_len == 0 && plan->groups.kept_count > 0) {
      return InvalidArgument(std::string(kc->op_type) + ": X " + DimsText(Input(kc, "X")) +
                             " is empty along the axis; it has no arg");
    }
    // argsort sorts one row at a time through an index buffer and its merge buffer.
    if (kind == AxisOp::kSort && Output(kc, "Indices") != nullptr) {
      *scratch = static_cast<size_t>(2 * plan->axis_len) * sizeof(int64_t);
    }
    *state = plan.release();
    return nullptr;
  });
}

void AxisRelease(void*, void* state) { delete static_cast<AxisPlan*>(state); }

template <bool kMax, typename T>
FleetStatus* ArgLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const FleetTensor* out = Output(kc, "Out");
    if (FleetStatus* e = ExpectCount(kc, out, "Out", p->groups.kept_count)) return e;
    const bool i32 = out->dtype == FLEET_DTYPE_INT32;
    if (!i32 && out->dtype != FLEET_DTYPE_INT64) {
      return InvalidArgument(std::string(kc->op_type) + ": Out must be int64 or int32");
    }
    const T* xs = Data<const T>(Input(kc, "X"));
    const int64_t len = p->axis_len, stride = p->axis_stride;
    ForGroups(kc, p->groups, [&](int64_t k, int64_t base) {
      int64_t best_i = 0;
      T best = xs[base];
      for (int64_t r = 1; r < len; ++r) {
        const T v = xs[base + r * stride];
        if (fleet::kernel::ArgBetter<kMax>(v, best)) {
          best = v;
          best_i = r;
        }
      }
      if (i32) {
        Data<int32_t>(out)[k] = static_cast<int32_t>(best_i);
      } else {
        Data<int64_t>(out)[k] = best_i;
      }
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* ArgsortLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out", "Indices"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const FleetTensor* x = Input(kc, "X");
    if (FleetStatus* e = ExpectCount(kc, Output(kc, "Out"), "Out", Numel(x))) return e;
    if (FleetStatus* e = ExpectCount(kc, Output(kc, "Indices"), "Indices", Numel(x))) return e;
    const int64_t len = p->axis_len, stride = p->axis_stride;
    if (len > 0 && kc->scratch == nullptr) {
      return InvalidArgument(std::string(kc->op_type) + ": launched without its scratch memory");
    }
    const T* xs = Data<const T>(x);
    T* os = Data<T>(Output(kc, "Out"));
    int64_t* is = Data<int64_t>(Output(kc, "Indices"));
    int64_t* idx = static_cast<int64_t*>(kc->scratch);
    // One row at a time through the one buffer: the rows are independent and short next to
    // the sort, and the scratch stays one row's worth.
    for (int64_t k = 0; k < p->groups.kept_count; ++k) {
      const int64_t base = fleet::kernel::GroupBase(p->groups, k);
      fleet::kernel::StableArgsortRow(xs + base, len, stride, BoolAttr(kc, "descending", false),
                                      idx, idx + len);
      for (int64_t r = 0; r < len; ++r) {
        os[base + r * stride] = xs[base + idx[r] * stride];
        is[base + r * stride] = idx[r];
      }
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* ArgsortGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Indices", "Out@GRAD"}, {"X@GRAD"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const int64_t n = Numel(Input(kc, "X"));
    if (FleetStatus* e = ExpectCount(kc, Input(kc, "Indices"), "Indices", n)) return e;
    if (FleetStatus* e = ExpectCount(kc, Input(kc, "Out@GRAD"), "Out@GRAD", n)) return e;
    const int64_t len = p->axis_len, stride = p->axis_stride;
    const int64_t* is = Data<const int64_t>(Input(kc, "Indices"));
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    T* dxs = Data<T>(Output(kc, "X@GRAD"));
    std::fill(dxs, dxs + n, T(0));
    for (int64_t k = 0; k < p->groups.kept_count; ++k) {
      const int64_t base = fleet::kernel::GroupBase(p->groups, k);
      for (int64_t r = 0; r < len; ++r) {
        const int64_t j = is[base + r * stride];
        if (j < 0 || j >= len) {
          return InvalidArgument(std::string(kc->op_type) + ": Indices holds " +
                                 std::to_string(j) + " at element " +
                                 std::to_string(base + r * stride) + ", outside [0, " +
                                 std::to_string(len) + ") of the axis");
        }
        dxs[base + j * stride] += gs[base + r * stride];
      }
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* PNormLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const FleetTensor* out = Output(kc, "Out");
    if (FleetStatus* e = ExpectCount(kc, out, "Out", p->groups.kept_count)) return e;
    const double porder = FloatAttr(kc, "porder", 2.0);
    const T* xs = Data<const T>(Input(kc, "X"));
    T* os = Data<T>(out);
    const int64_t len = p->axis_len, stride = p->axis_stride;
    ForGroups(kc, p->groups, [&](int64_t k, int64_t base) {
      double acc = fleet::kernel::PNormInit(porder);
      for (int64_t r = 0; r < len; ++r) {
        acc = fleet::kernel::PNormAccumulate(acc, xs[base + r * stride], porder);
      }
      os[k] = static_cast<T>(fleet::kernel::PNormFinish(acc, porder));
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* PNormGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Out", "Out@GRAD"}, {"X@GRAD"})) return e;
    const AxisPlan* p = nullptr;
    if (FleetStatus* e = Prepared(kc, state, &p)) return e;
    const int64_t kept = p->groups.kept_count;
    if (FleetStatus* e = ExpectCount(kc, Input(kc, "Out"), "Out", kept)) return e;
    if (FleetStatus* e = ExpectCount(kc, Input(kc, "Out@GRAD"), "Out@GRAD", kept)) return e;
    const double porder = FloatAttr(kc, "porder", 2.0);
    const double eps = FloatAttr(kc, "epsilon", 1e-12);
    const T* xs = Data<const T>(Input(kc, "X"));
    const T* os = Data<const T>(Input(kc, "Out"));
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    T* dxs = Data<T>(Output(kc, "X@GRAD"));
    const int64_t len = p->axis_len, stride = p->axis_stride;
    ForGroups(kc, p->groups, [&](int64_t k, int64_t base) {
      for (int64_t r = 0; r < len; ++r) {
        const int64_t i = base + r * stride;
        dxs[i] = static_cast<T>(fleet::kernel::PNormGrad(xs[i], os[k], gs[k], porder, eps));
      }
    });
    return nullptr;
  });
}

template <typename T>
void AddNumeric(KernelList& list, int32_t dtype) {
  Add(list, "reduce_max", dtype, ReduceLaunch<ReduceOp::kMax, T>, ReducePrepare, GroupsRelease);
  Add(list, "reduce_min", dtype, ReduceLaunch<ReduceOp::kMin, T>, ReducePrepare, GroupsRelease);
  Add(list, "reduce_prod", dtype, ReduceLaunch<ReduceOp::kProd, T>, ReducePrepare,
      GroupsRelease);
  Add(list, "arg_max", dtype, ArgLaunch<true, T>, AxisPrepare<AxisOp::kArg>, AxisRelease);
  Add(list, "arg_min", dtype, ArgLaunch<false, T>, AxisPrepare<AxisOp::kArg>, AxisRelease);
  Add(list, "argsort", dtype, ArgsortLaunch<T>, AxisPrepare<AxisOp::kSort>, AxisRelease);
}

template <typename T>
void AddFloat(KernelList& list, int32_t dtype) {
  Add(list, "reduce_max_grad", dtype, ReduceGradLaunch<false, T>, ReducePrepare, GroupsRelease);
  Add(list, "reduce_min_grad", dtype, ReduceGradLaunch<false, T>, ReducePrepare, GroupsRelease);
  Add(list, "reduce_prod_grad", dtype, ReduceGradLaunch<true, T>, ReducePrepare, GroupsRelease);
  Add(list, "argsort_grad", dtype, ArgsortGradLaunch<T>, AxisPrepare<AxisOp::kSort>,
      AxisRelease);
  Add(list, "p_norm", dtype, PNormLaunch<T>, AxisPrepare<AxisOp::kNorm>, AxisRelease);
  Add(list, "p_norm_grad", dtype, PNormGradLaunch<T>, AxisPrepare<AxisOp::kNorm>, AxisRelease);
}

}  // namespace

void AddReduceExtKernels(KernelList& list) {
  AddNumeric<float>(list, FLEET_DTYPE_FLOAT32);
  AddNumeric<double>(list, FLEET_DTYPE_FLOAT64);
  AddNumeric<int32_t>(list, FLEET_DTYPE_INT32);
  AddNumeric<int64_t>(list, FLEET_DTYPE_INT64);
  AddFloat<float>(list, FLEET_DTYPE_FLOAT32);
  AddFloat<double>(list, FLEET_DTYPE_FLOAT64);
  Add(list, "reduce_any", FLEET_DTYPE_BOOL, ReduceLaunch<ReduceOp::kAny, uint8_t>, ReducePrepare,
      GroupsRelease);
  Add(list, "reduce_all", FLEET_DTYPE_BOOL, ReduceLaunch<ReduceOp::kAll, uint8_t>, ReducePrepare,
      GroupsRelease);
}

}  // namespace fleet_cpu::math
