// Comparisons, logic ops, where, isfinite_v2 and elementwise_pow / mod / floordiv (+ the grads
// of pow and where). Plain loops over the broadcast plan made at prepare (Paddle's axis rule,
// plugins/common/broadcast_plan.h); the element formulas are shared with the CUDA plugin
// (plugins/common/logic_formulas.h). oneDNN's binary primitive compares only exactly (Paddle's
// float equality has a tolerance), takes no 32- or 64-bit integers and broadcasts only its
// second operand, so these stay plain C++, like the elementwise ops beside them. Broadcast grads
// accumulate in element order, which is the reduction over the broadcast dims.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "kernels/math_util.h"
#include "logic_formulas.h"

namespace fleet_cpu::math {
namespace {

using fleet::kernel::ArithOp;
using fleet::kernel::CompareOp;
using fleet::kernel::LogicOp;

constexpr int64_t kGrain = 1 << 14;

// The plan over Out's dims (Out@GRAD's for a grad) with X's offsets in sa and Y's in sb.
// Ops without an axis attribute (the logic ops) align trailing dims, as axis -1 does.
template <bool kGrad>
FleetStatus* PlanPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const char* out_slot = kGrad ? "Out@GRAD" : "Out";
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* out = kGrad ? Input(kc, out_slot) : Output(kc, out_slot);
    if (x == nullptr || y == nullptr || out == nullptr) {
      return InvalidArgument(std::string(kc->op_type) + ": needs X, Y and " + out_slot);
    }
    if (out->ndim > kMaxRank) {
      return InvalidArgument(std::string(kc->op_type) + ": " + out_slot + " has rank " +
                             std::to_string(out->ndim) + ", more than " +
                             std::to_string(kMaxRank));
    }
    auto plan = std::make_unique<StridePlan>();
    const int64_t axis = IntAttr(kc, "axis", -1);
    if (!fleet::kernel::BinaryBroadcastPlan(x, y, out, axis, plan.get())) {
      return InvalidArgument(std::string(kc->op_type) + ": X " + DimsText(x) + " and Y " +
                             DimsText(y) + " do not broadcast to " + out_slot + " " +
                             DimsText(out) + " at axis " + std::to_string(axis));
    }
    *state = plan.release();
    return nullptr;
  });
}

void PlanRelease(void*, void* state) { delete static_cast<StridePlan*>(state); }

FleetStatus* PreparedPlan(const FleetKernelContext* kc, void* state, const StridePlan** plan) {
  if (state == nullptr) {
    return Error(FLEET_CODE_FAILED_PRECONDITION,
                 std::string(kc->op_type) + ": launched without prepare");
  }
  *plan = static_cast<const StridePlan*>(state);
  return nullptr;
}

bool SameShape(const StridePlan& p) {
  return p.rank == 0 || (p.rank == 1 && p.sa[0] == 1 && p.sb[0] == 1);
}

// os[i] = f(X element, Y element) over the plan.
template <typename O, typename A, typename F>
void MapBinary(const FleetKernelContext* kc, const StridePlan& p, const A* xs, const A* ys,
               O* os, F f) {
  if (SameShape(p)) {
    ParallelFor(kc, p.Numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) os[i] = f(xs[i], ys[i]);
    });
    return;
  }
  VisitRows(p, [&](int64_t n, int64_t o, int64_t a, int64_t b, int64_t sa, int64_t sb) {
    for (int64_t j = 0; j < n; ++j) os[o + j] = f(xs[a + j * sa], ys[b + j * sb]);
  });
}

template <typename O, typename A, typename F>
FleetStatus* BinaryLaunch(const FleetKernelContext* kc, void* state, F f) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y"}, {"Out"})) return e;
    const StridePlan* p = nullptr;
    if (FleetStatus* s = PreparedPlan(kc, state, &p)) return s;
    MapBinary(kc, *p, Data<const A>(Input(kc, "X")), Data<const A>(Input(kc, "Y")),
              Data<O>(Output(kc, "Out")), f);
    return nullptr;
  });
}

template <CompareOp op, typename T>
FleetStatus* CompareLaunch(void*, const FleetKernelContext* kc, void* state) {
  return BinaryLaunch<uint8_t, T>(kc, state,
                                  [](T a, T b) { return fleet::kernel::Compare<op>(a, b); });
}

template <LogicOp op>
FleetStatus* LogicLaunch(void*, const FleetKernelContext* kc, void* state) {
  return BinaryLaunch<uint8_t, uint8_t>(
      kc, state, [](uint8_t a, uint8_t b) { return fleet::kernel::Logic<op>(a, b); });
}

template <ArithOp op, typename T>
FleetStatus* ArithLaunch(void*, const FleetKernelContext* kc, void* state) {
  return BinaryLaunch<T, T>(kc, state, [](T a, T b) { return fleet::kernel::Arith<op>(a, b); });
}

// Element-wise over X into Out (same element count).
template <typename O, typename A, typename F>
FleetStatus* UnaryLaunch(const FleetKernelContext* kc, F f) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const A* xs = Data<const A>(Input(kc, "X"));
    O* os = Data<O>(Output(kc, "Out"));
    ParallelFor(kc, Numel(Input(kc, "X")), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) os[i] = f(xs[i]);
    });
    return nullptr;
  });
}

FleetStatus* LogicalNotLaunch(void*, const FleetKernelContext* kc, void*) {
  return UnaryLaunch<uint8_t, uint8_t>(kc, [](uint8_t a) -> uint8_t { return a == 0; });
}

template <typename T>
FleetStatus* IsFiniteLaunch(void*, const FleetKernelContext* kc, void*) {
  return UnaryLaunch<uint8_t, T>(kc, [](T a) { return fleet::kernel::IsFinite(a); });
}

// INVALID_ARGUMENT unless the listed tensors all hold `n` elements.
FleetStatus* SameCount(const FleetKernelContext* kc, int64_t n,
                       std::initializer_list<std::pair<const char*, const FleetTensor*>> ts) {
  for (const auto& [slot, t] : ts) {
    if (t != nullptr && Numel(t) != n) {
      return InvalidArgument(std::string(kc->op_type) + ": " + slot + " " + DimsText(t) +
                             " does not have the " + std::to_string(n) +
                             " elements of Condition");
    }
  }
  return nullptr;
}

template <typename T>
FleetStatus* WhereLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Condition", "X", "Y"}, {"Out"})) return e;
    const FleetTensor* cond = Input(kc, "Condition");
    const int64_t n = Numel(cond);
    if (FleetStatus* e = SameCount(kc, n, {{"X", Input(kc, "X")}, {"Y", Input(kc, "Y")},
                                           {"Out", Output(kc, "Out")}})) {
      return e;
    }
    const uint8_t* cs = Data<const uint8_t>(cond);
    const T* xs = Data<const T>(Input(kc, "X"));
    const T* ys = Data<const T>(Input(kc, "Y"));
    T* os = Data<T>(Output(kc, "Out"));
    ParallelFor(kc, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) os[i] = cs[i] ? xs[i] : ys[i];
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* WhereGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Condition", "Out@GRAD"}, {})) return e;
    const FleetTensor* cond = Input(kc, "Condition");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    const int64_t n = Numel(cond);
    if (FleetStatus* e = SameCount(kc, n, {{"Out@GRAD", Input(kc, "Out@GRAD")},
                                           {"X@GRAD", dx}, {"Y@GRAD", dy}})) {
      return e;
    }
    const uint8_t* cs = Data<const uint8_t>(cond);
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    T* dxs = dx != nullptr ? Data<T>(dx) : nullptr;
    T* dys = dy != nullptr ? Data<T>(dy) : nullptr;
    ParallelFor(kc, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T g = gs[i];
        if (dxs != nullptr) dxs[i] = cs[i] ? g : T(0);
        if (dys != nullptr) dys[i] = cs[i] ? T(0) : g;
      }
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* PowGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y", "Out@GRAD"}, {})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    const StridePlan* plan = nullptr;
    if (FleetStatus* s = PreparedPlan(kc, state, &plan)) return s;
    const StridePlan& p = *plan;
    const T* xs = Data<const T>(x);
    const T* ys = Data<const T>(y);
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    T* dxs = dx != nullptr ? Data<T>(dx) : nullptr;
    T* dys = dy != nullptr ? Data<T>(dy) : nullptr;
    using fleet::kernel::PowGradX;
    using fleet::kernel::PowGradY;
    if (SameShape(p)) {
      ParallelFor(kc, p.Numel(), kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const T gx = PowGradX(xs[i], ys[i], gs[i]);
          const T gy = PowGradY(xs[i], ys[i], gs[i]);
          if (dxs) dxs[i] = gx;
          if (dys) dys[i] = gy;
        }
      });
      return nullptr;
    }
    if (dxs) std::fill(dxs, dxs + Numel(x), T(0));
    if (dys) std::fill(dys, dys + Numel(y), T(0));
    VisitRows(p, [&](int64_t len, int64_t o, int64_t a, int64_t b, int64_t sa, int64_t sb) {
      for (int64_t j = 0; j < len; ++j) {
        const int64_t xi = a + j * sa, yi = b + j * sb;
        if (dxs) dxs[xi] += PowGradX(xs[xi], ys[yi], gs[o + j]);
        if (dys) dys[yi] += PowGradY(xs[xi], ys[yi], gs[o + j]);
      }
    });
    return nullptr;
  });
}

template <typename T>
void AddNumeric(KernelList& list, int32_t dtype) {
  Add(list, "equal", dtype, CompareLaunch<CompareOp::kEqual, T>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "not_equal", dtype, CompareLaunch<CompareOp::kNotEqual, T>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "less_than", dtype, CompareLaunch<CompareOp::kLess, T>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "less_equal", dtype, CompareLaunch<CompareOp::kLessEqual, T>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "greater_than", dtype, CompareLaunch<CompareOp::kGreater, T>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "greater_equal", dtype, CompareLaunch<CompareOp::kGreaterEqual, T>,
      PlanPrepare<false>, PlanRelease);
  Add(list, "elementwise_pow", dtype, ArithLaunch<ArithOp::kPow, T>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "elementwise_mod", dtype, ArithLaunch<ArithOp::kMod, T>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "elementwise_floordiv", dtype, ArithLaunch<ArithOp::kFloorDiv, T>,
      PlanPrepare<false>, PlanRelease);
  Add(list, "isfinite_v2", dtype, IsFiniteLaunch<T>);
  Add(list, "where", dtype, WhereLaunch<T>);
}

template <typename T>
void AddFloatGrads(KernelList& list, int32_t dtype) {
  Add(list, "where_grad", dtype, WhereGradLaunch<T>);
  Add(list, "elementwise_pow_grad", dtype, PowGradLaunch<T>, PlanPrepare<true>, PlanRelease);
}

}  // namespace

void AddCompareKernels(KernelList& list) {
  AddNumeric<float>(list, FLEET_DTYPE_FLOAT32);
  AddNumeric<double>(list, FLEET_DTYPE_FLOAT64);
  AddNumeric<int32_t>(list, FLEET_DTYPE_INT32);
  AddNumeric<int64_t>(list, FLEET_DTYPE_INT64);
  AddFloatGrads<float>(list, FLEET_DTYPE_FLOAT32);
  AddFloatGrads<double>(list, FLEET_DTYPE_FLOAT64);
  Add(list, "equal", FLEET_DTYPE_BOOL, CompareLaunch<CompareOp::kEqual, uint8_t>,
      PlanPrepare<false>, PlanRelease);
  Add(list, "not_equal", FLEET_DTYPE_BOOL, CompareLaunch<CompareOp::kNotEqual, uint8_t>,
      PlanPrepare<false>, PlanRelease);
  Add(list, "logical_and", FLEET_DTYPE_BOOL, LogicLaunch<LogicOp::kAnd>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "logical_or", FLEET_DTYPE_BOOL, LogicLaunch<LogicOp::kOr>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "logical_xor", FLEET_DTYPE_BOOL, LogicLaunch<LogicOp::kXor>, PlanPrepare<false>,
      PlanRelease);
  Add(list, "logical_not", FLEET_DTYPE_BOOL, LogicalNotLaunch);
}

}  // namespace fleet_cpu::math
