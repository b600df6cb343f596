// Comparisons, logic ops, where, isfinite_v2 and elementwise_pow / mod / floordiv (+ the grads
// of pow and where), with the CPU plugin's semantics: the same broadcast plan (plugins/common/
// broadcast_plan.h) and the same element formulas (plugins/common/logic_formulas.h). Forward:
// a thread per output element. elementwise_pow_grad with broadcasting sums each gradient over
// its broadcast dims with the deterministic group sums of math_groups.h.
#include <memory>
#include <string>

#include "kernels/math_groups.h"
#include "logic_formulas.h"

namespace fleet_cuda {
namespace math {
namespace {

using fleet::kernel::ArithOp;
using fleet::kernel::CompareOp;
using fleet::kernel::LogicOp;

bool SameShape(const StridePlan& p) {
  return p.rank == 0 || (p.rank == 1 && p.sa[0] == 1 && p.sb[0] == 1);
}

// The plan over Out's dims (Out@GRAD's for the pow grad), and for the grad how each gradient is
// summed: array 0 is Out@GRAD, 1 is X, 2 is Y. Ops without an axis attribute (the logic ops)
// align trailing dims, as axis -1 does.
struct PlanState {
  StridePlan plan;
  GroupPlan gx, gy;
  GroupLaunch lx, ly;
};

FleetStatus* MakeState(const FleetKernelContext* kc, bool grad, bool allow_split,
                       PlanState* st) {
  const char* out_slot = grad ? "Out@GRAD" : "Out";
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Input(kc, "Y");
  const FleetTensor* out = grad ? Input(kc, out_slot) : Output(kc, out_slot);
  if (x == nullptr || y == nullptr || out == nullptr) {
    return InvalidArgument(OpName(kc) + ": needs X, Y and " + out_slot);
  }
  if (out->ndim > kMaxRank) {
    return InvalidArgument(OpName(kc) + ": " + out_slot + " has rank " +
                           std::to_string(out->ndim) + ", more than " + std::to_string(kMaxRank));
  }
  const int64_t axis = IntAttr(kc, "axis", -1);
  if (!fleet::kernel::BinaryBroadcastPlan(x, y, out, axis, &st->plan)) {
    return InvalidArgument(OpName(kc) + ": X " + DimsText(x) + " and Y " + DimsText(y) +
                           " do not broadcast to " + out_slot + " " + DimsText(out) +
                           " at axis " + std::to_string(axis));
  }
  if (!grad) return nullptr;
  const StridePlan& p = st->plan;
  int64_t out_stride[kMaxRank] = {};
  int64_t stride = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    out_stride[i] = stride;
    stride *= p.dims[i];
  }
  for (int i = 0; i < p.rank; ++i) {
    AddGroupDim(st->gx, p.sa[i] == 0, p.dims[i], out_stride[i], p.sa[i], p.sb[i]);
    AddGroupDim(st->gy, p.sb[i] == 0, p.dims[i], out_stride[i], p.sa[i], p.sb[i]);
  }
  st->lx = PlanGroupLaunch(st->gx, allow_split);
  st->ly = PlanGroupLaunch(st->gy, allow_split);
  return nullptr;
}

template <bool kGrad>
FleetStatus* PlanPrepare(void*, const FleetKernelContext* kc, void** state,
                         size_t* scratch_bytes) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto st = std::make_unique<PlanState>();
    if (FleetStatus* s = MakeState(kc, kGrad, /*allow_split=*/true, st.get())) return s;
    *scratch_bytes = st->lx.scratch_bytes > st->ly.scratch_bytes ? st->lx.scratch_bytes
                                                                 : st->ly.scratch_bytes;
    *state = st.release();
    return nullptr;
  });
}

void PlanRelease(void*, void* state) { delete static_cast<PlanState*>(state); }

FleetStatus* StateFor(const FleetKernelContext* kc, bool grad, void* state, PlanState* local,
                      const PlanState** st) {
  if (state != nullptr) {
    *st = static_cast<const PlanState*>(state);
    return nullptr;
  }
  *st = local;
  return MakeState(kc, grad, /*allow_split=*/false, local);
}

// ---- forward --------------------------------------------------------------------------------

template <CompareOp op, typename T>
struct CompareF {
  __device__ uint8_t operator()(T a, T b) const { return fleet::kernel::Compare<op>(a, b); }
};
template <LogicOp op>
struct LogicF {
  __device__ uint8_t operator()(uint8_t a, uint8_t b) const {
    return fleet::kernel::Logic<op>(a, b);
  }
};
template <ArithOp op, typename T>
struct ArithF {
  __device__ T operator()(T a, T b) const { return fleet::kernel::Arith<op>(a, b); }
};

template <typename O, typename A, typename F>
__global__ void MapSameKernel(const A* x, const A* y, O* out, int64_t n, F f) {
  FLEET_CUDA_LOOP(i, n) { out[i] = f(x[i], y[i]); }
}

template <typename O, typename A, typename F>
__global__ void MapBroadcastKernel(StridePlan p, const A* x, const A* y, O* out, int64_t n, F f) {
  FLEET_CUDA_LOOP(i, n) {
    int64_t a, b;
    PlanOffsets(p, i, &a, &b);
    out[i] = f(x[a], y[b]);
  }
}

template <typename O, typename A, typename F>
FleetStatus* BinaryLaunch(const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y"}, {"Out"})) return e;
    PlanState local;
    const PlanState* st = nullptr;
    if (FleetStatus* e = StateFor(kc, false, state, &local, &st)) return e;
    const FleetTensor* out = Output(kc, "Out");
    const int64_t n = st->plan.Numel();
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    if (n == 0) return nullptr;
    const A* xs = Data<const A>(Input(kc, "X"));
    const A* ys = Data<const A>(Input(kc, "Y"));
    O* os = Data<O>(out);
    if (SameShape(st->plan)) {
      MapSameKernel<O, A, F><<<Blocks(n), kThreads, 0, s->native>>>(xs, ys, os, n, F{});
    } else {
      MapBroadcastKernel<O, A, F><<<Blocks(n), kThreads, 0, s->native>>>(st->plan, xs, ys, os, n,
                                                                        F{});
    }
    return nullptr;
  });
}

template <CompareOp op, typename T>
FleetStatus* CompareLaunch(void*, const FleetKernelContext* kc, void* state) {
  return BinaryLaunch<uint8_t, T, CompareF<op, T>>(kc, state);
}
template <LogicOp op>
FleetStatus* LogicLaunch(void*, const FleetKernelContext* kc, void* state) {
  return BinaryLaunch<uint8_t, uint8_t, LogicF<op>>(kc, state);
}
template <ArithOp op, typename T>
FleetStatus* ArithLaunch(void*, const FleetKernelContext* kc, void* state) {
  return BinaryLaunch<T, T, ArithF<op, T>>(kc, state);
}

struct NotF {
  __device__ uint8_t operator()(uint8_t a) const { return a == 0; }
};
template <typename T>
struct IsFiniteF {
  __device__ uint8_t operator()(T a) const { return fleet::kernel::IsFinite(a); }
};

template <typename O, typename A, typename F>
__global__ void MapUnaryKernel(const A* x, O* out, int64_t n, F f) {
  FLEET_CUDA_LOOP(i, n) { out[i] = f(x[i]); }
}

template <typename O, typename A, typename F>
FleetStatus* UnaryLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const int64_t n = Numel(Input(kc, "X"));
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "Out"), "Out", n)) return e;
    if (n == 0) return nullptr;
    MapUnaryKernel<O, A, F><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const A>(Input(kc, "X")), Data<O>(Output(kc, "Out")), n, F{});
    return nullptr;
  });
}

// ---- where ----------------------------------------------------------------------------------

template <typename T>
__global__ void WhereKernel(const uint8_t* c, const T* x, const T* y, T* out, int64_t n) {
  FLEET_CUDA_LOOP(i, n) { out[i] = c[i] ? x[i] : y[i]; }
}

template <typename T>
__global__ void WhereGradKernel(const uint8_t* c, const T* g, T* dx, T* dy, int64_t n) {
  FLEET_CUDA_LOOP(i, n) {
    const T gv = g[i];
    if (dx != nullptr) dx[i] = c[i] ? gv : T(0);
    if (dy != nullptr) dy[i] = c[i] ? T(0) : gv;
  }
}

template <typename T>
FleetStatus* WhereLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Condition", "X", "Y"}, {"Out"})) return e;
    const int64_t n = Numel(Input(kc, "Condition"));
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "X"), "X", n)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Y"), "Y", n)) return e;
    if (FleetStatus* e = ExpectNumel(kc, Output(kc, "Out"), "Out", n)) return e;
    if (n == 0) return nullptr;
    WhereKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const uint8_t>(Input(kc, "Condition")), Data<const T>(Input(kc, "X")),
        Data<const T>(Input(kc, "Y")), Data<T>(Output(kc, "Out")), n);
    return nullptr;
  });
}

template <typename T>
FleetStatus* WhereGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Condition", "Out@GRAD"}, {})) return e;
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    const int64_t n = Numel(Input(kc, "Condition"));
    if (FleetStatus* e = ExpectNumel(kc, Input(kc, "Out@GRAD"), "Out@GRAD", n)) return e;
    if (dx != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", n)) return e;
    }
    if (dy != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dy, "Y@GRAD", n)) return e;
    }
    if (n == 0 || (dx == nullptr && dy == nullptr)) return nullptr;
    WhereGradKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
        Data<const uint8_t>(Input(kc, "Condition")), Data<const T>(Input(kc, "Out@GRAD")),
        dx != nullptr ? Data<T>(dx) : nullptr, dy != nullptr ? Data<T>(dy) : nullptr, n);
    return nullptr;
  });
}

// ---- elementwise_pow_grad -------------------------------------------------------------------

template <typename T>
__global__ void PowGradSameKernel(const T* x, const T* y, const T* g, T* dx, T* dy, int64_t n) {
  FLEET_CUDA_LOOP(i, n) {
    const T px = fleet::kernel::PowGradX(x[i], y[i], g[i]);
    const T py = fleet::kernel::PowGradY(x[i], y[i], g[i]);
    if (dx != nullptr) dx[i] = px;
    if (dy != nullptr) dy[i] = py;
  }
}

// A group-sum term: the partial at offsets {Out@GRAD, X, Y}.
template <bool kForX, typename T>
struct PowTerm {
  const T* x;
  const T* y;
  const T* g;
  __device__ T operator()(const int64_t* off) const {
    return kForX ? fleet::kernel::PowGradX(x[off[1]], y[off[2]], g[off[0]])
                 : fleet::kernel::PowGradY(x[off[1]], y[off[2]], g[off[0]]);
  }
};

template <typename T>
FleetStatus* PowGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y", "Out@GRAD"}, {})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    PlanState local;
    const PlanState* st = nullptr;
    if (FleetStatus* e = StateFor(kc, true, state, &local, &st)) return e;
    const int64_t n = st->plan.Numel();
    if (dx != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", Numel(x))) return e;
    }
    if (dy != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dy, "Y@GRAD", Numel(y))) return e;
    }
    T* dxs = dx != nullptr ? Data<T>(dx) : nullptr;
    T* dys = dy != nullptr ? Data<T>(dy) : nullptr;
    if (n == 0) {
      const size_t xb = dx != nullptr ? static_cast<size_t>(Numel(dx)) * sizeof(T) : 0;
      const size_t yb = dy != nullptr ? static_cast<size_t>(Numel(dy)) * sizeof(T) : 0;
      if (FleetStatus* e = ZeroAsync(kc, dxs, xb, s->native, "X@GRAD")) return e;
      return ZeroAsync(kc, dys, yb, s->native, "Y@GRAD");
    }
    const T* xs = Data<const T>(x);
    const T* ys = Data<const T>(y);
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    if (SameShape(st->plan)) {
      if (dxs != nullptr || dys != nullptr) {
        PowGradSameKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(xs, ys, gs, dxs, dys, n);
      }
      return nullptr;
    }
    if (dx != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", st->gx.kept_count)) return e;
      if (FleetStatus* e = CheckScratch(kc, st->lx.scratch_bytes)) return e;
      LaunchGroupSum(st->gx, st->lx, PowTerm<true, T>{xs, ys, gs}, dxs, 1.0, kc->scratch,
                     s->native);
    }
    if (dy != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dy, "Y@GRAD", st->gy.kept_count)) return e;
      if (FleetStatus* e = CheckScratch(kc, st->ly.scratch_bytes)) return e;
      LaunchGroupSum(st->gy, st->ly, PowTerm<false, T>{xs, ys, gs}, dys, 1.0, kc->scratch,
                     s->native);
    }
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
  Add(list, "isfinite_v2", dtype, UnaryLaunch<uint8_t, T, IsFiniteF<T>>);
  Add(list, "where", dtype, WhereLaunch<T>);
}

template <typename T>
void AddFloatGrads(KernelList& list, int32_t dtype) {
  Add(list, "where_grad", dtype, WhereGradLaunch<T>);
  Add(list, "elementwise_pow_grad", dtype, PowGradLaunch<T>, PlanPrepare<true>, PlanRelease);
}

}  // namespace
}  // namespace math

void AddMathCompareKernels(KernelList& list) {
  using namespace math;
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
  Add(list, "logical_not", FLEET_DTYPE_BOOL, UnaryLaunch<uint8_t, uint8_t, NotF>);
}

}  // namespace fleet_cuda
