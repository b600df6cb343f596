// elementwise_{add,sub,mul,div,max,min} and their grads, with Paddle's `axis` broadcast rule as
// the CPU plugin applies it. The broadcast plan depends only on shapes and `axis`, so prepare
// makes it (and, for grads, how each gradient is summed) and keeps it as the kernel's state.
// Forward: a thread per output element. Grads: a same-shape kernel, else one group sum per
// requested gradient (math_groups.h), which adds each gradient element's contributions over the
// broadcast dims in a fixed order, so results do not vary from run to run.
#include <memory>
#include <string>

#include "kernels/math_groups.h"

namespace fleet_cuda {
namespace math {
namespace {

enum class Bin { kAdd, kSub, kMul, kDiv, kMax, kMin };

// The plan over `out`'s dims (slot `out_slot`: Out, or Out@GRAD for a grad) with X's offsets
// in sa and Y's in sb (Paddle's axis rule, plugins/common/broadcast_plan.h); the messages are
// this plugin's.
FleetStatus* BinaryPlan(const FleetKernelContext* kc, const FleetTensor* x, const FleetTensor* y,
                        const FleetTensor* out, const char* out_slot, StridePlan* p) {
  if (out->ndim > kMaxRank) {
    return InvalidArgument(OpName(kc) + ": " + out_slot + " has rank " +
                           std::to_string(out->ndim) + ", more than " + std::to_string(kMaxRank));
  }
  const int64_t axis = IntAttr(kc, "axis", -1);
  if (!fleet::kernel::BinaryBroadcastPlan(x, y, out, axis, p)) {
    return InvalidArgument(OpName(kc) + ": X " + DimsText(x) + " and Y " + DimsText(y) +
                           " do not broadcast to " + out_slot + " " + DimsText(out) +
                           " at axis " + std::to_string(axis));
  }
  return nullptr;
}

bool SameShape(const StridePlan& p) {
  return p.rank == 0 || (p.rank == 1 && p.sa[0] == 1 && p.sb[0] == 1);
}

// What prepare keeps. The group plans split Out's dims into those a gradient keeps (its operand
// has them) and those it sums over (its operand broadcasts along them); array 0 is Out /
// Out@GRAD, 1 is X, 2 is Y.
struct BinaryState {
  StridePlan plan;
  GroupPlan gx, gy;
  GroupLaunch lx, ly;
};

FleetStatus* MakeState(const FleetKernelContext* kc, bool grad, bool allow_split,
                       BinaryState* st) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* y = Input(kc, "Y");
  const char* out_slot = grad ? "Out@GRAD" : "Out";
  const FleetTensor* out = grad ? Input(kc, out_slot) : Output(kc, out_slot);
  if (x == nullptr || y == nullptr || out == nullptr) {
    return InvalidArgument(OpName(kc) + (grad ? ": needs inputs X, Y and Out@GRAD"
                                              : ": needs inputs X, Y and output Out"));
  }
  if (FleetStatus* s = BinaryPlan(kc, x, y, out, out_slot, &st->plan)) return s;
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
FleetStatus* BinaryPrepare(void*, const FleetKernelContext* kc, void** state,
                           size_t* scratch_bytes) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto st = std::make_unique<BinaryState>();
    if (FleetStatus* s = MakeState(kc, kGrad, /*allow_split=*/true, st.get())) return s;
    // dX and dY are summed one after the other on the same stream, so they share the scratch.
    *scratch_bytes = st->lx.scratch_bytes > st->ly.scratch_bytes ? st->lx.scratch_bytes
                                                                 : st->ly.scratch_bytes;
    *state = st.release();
    return nullptr;
  });
}

void BinaryRelease(void*, void* state) { delete static_cast<BinaryState*>(state); }

// The prepared state, or one made now (without split sums, as no scratch was asked for) for a
// launch that had no prepare.
FleetStatus* StateFor(const FleetKernelContext* kc, bool grad, void* state, BinaryState* local,
                      const BinaryState** st) {
  if (state != nullptr) {
    *st = static_cast<const BinaryState*>(state);
    return nullptr;
  }
  *st = local;
  return MakeState(kc, grad, /*allow_split=*/false, local);
}

// ---- forward --------------------------------------------------------------------------------

template <Bin op, typename T>
__device__ inline T Apply(T a, T b) {
  if constexpr (op == Bin::kAdd) {
    return a + b;
  } else if constexpr (op == Bin::kSub) {
    return a - b;
  } else if constexpr (op == Bin::kMul) {
    return a * b;
  } else if constexpr (op == Bin::kDiv) {
    return a / b;
  } else if constexpr (op == Bin::kMax) {
    return a > b ? a : b;
  } else {
    return a < b ? a : b;
  }
}

template <Bin op, typename T>
__global__ void BinarySameKernel(const T* x, const T* y, T* out, int64_t n) {
  FLEET_CUDA_LOOP(i, n) { out[i] = Apply<op>(x[i], y[i]); }
}

template <Bin op, typename T>
__global__ void BinaryBroadcastKernel(StridePlan p, const T* x, const T* y, T* out, int64_t n) {
  FLEET_CUDA_LOOP(i, n) {
    int64_t a, b;
    PlanOffsets(p, i, &a, &b);
    out[i] = Apply<op>(x[a], y[b]);
  }
}

template <Bin op, typename T>
FleetStatus* BinaryLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y"}, {"Out"})) return e;
    BinaryState local;
    const BinaryState* st = nullptr;
    if (FleetStatus* e = StateFor(kc, false, state, &local, &st)) return e;
    const FleetTensor* out = Output(kc, "Out");
    const int64_t n = st->plan.Numel();
    if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    if (n == 0) return nullptr;
    const T* xs = Data<const T>(Input(kc, "X"));
    const T* ys = Data<const T>(Input(kc, "Y"));
    T* os = Data<T>(out);
    if (SameShape(st->plan)) {
      BinarySameKernel<op, T><<<Blocks(n), kThreads, 0, s->native>>>(xs, ys, os, n);
    } else {
      BinaryBroadcastKernel<op, T><<<Blocks(n), kThreads, 0, s->native>>>(st->plan, xs, ys, os,
                                                                          n);
    }
    return nullptr;
  });
}

// ---- grad -----------------------------------------------------------------------------------

// The contribution of one output element to dX (kForX) or dY. Ties of max / min send the
// gradient to Y, as the schema says.
template <Bin op, bool kForX, typename T>
__device__ inline T Partial(const T* x, const T* y, const T* out, const T* g, int64_t o,
                            int64_t xi, int64_t yi) {
  const T gv = g[o];
  if constexpr (op == Bin::kAdd) {
    return gv;
  } else if constexpr (op == Bin::kSub) {
    return kForX ? gv : -gv;
  } else if constexpr (op == Bin::kMul) {
    return kForX ? gv * y[yi] : gv * x[xi];
  } else if constexpr (op == Bin::kDiv) {
    return kForX ? gv / y[yi] : -gv * out[o] / y[yi];
  } else if constexpr (op == Bin::kMax) {
    return (x[xi] > y[yi]) == kForX ? gv : T(0);
  } else {
    return (x[xi] < y[yi]) == kForX ? gv : T(0);
  }
}

template <Bin op, typename T>
__global__ void BinaryGradSameKernel(const T* x, const T* y, const T* out, const T* g, T* dx,
                                     T* dy, int64_t n) {
  FLEET_CUDA_LOOP(i, n) {
    // Both partials are formed before either is stored, so nothing breaks if the executor hands
    // a gradient the buffer of an input.
    const T px = dx != nullptr ? Partial<op, true>(x, y, out, g, i, i, i) : T(0);
    const T py = dy != nullptr ? Partial<op, false>(x, y, out, g, i, i, i) : T(0);
    if (dx != nullptr) dx[i] = px;
    if (dy != nullptr) dy[i] = py;
  }
}

// A group-sum term: the partial at offsets {Out, X, Y}.
template <Bin op, bool kForX, typename T>
struct PartialTerm {
  const T* x;
  const T* y;
  const T* out;
  const T* g;
  __device__ T operator()(const int64_t* off) const {
    return Partial<op, kForX>(x, y, out, g, off[0], off[1], off[2]);
  }
};

template <Bin op, typename T>
FleetStatus* BinaryGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y", "Out@GRAD"}, {})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* out = Input(kc, "Out");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    if (op == Bin::kDiv && out == nullptr) {
      return InvalidArgument(OpName(kc) + ": input Out is missing (the grad of a division "
                                          "reads it)");
    }
    BinaryState local;
    const BinaryState* st = nullptr;
    if (FleetStatus* e = StateFor(kc, true, state, &local, &st)) return e;
    const int64_t n = st->plan.Numel();
    if (op == Bin::kDiv) {
      if (FleetStatus* e = ExpectNumel(kc, out, "Out", n)) return e;
    }
    if (dx != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", Numel(x))) return e;
    }
    if (dy != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dy, "Y@GRAD", Numel(y))) return e;
    }
    T* dxs = dx != nullptr ? Data<T>(dx) : nullptr;
    T* dys = dy != nullptr ? Data<T>(dy) : nullptr;
    if (n == 0) {
      // No output element contributes: the gradients are zero.
      const size_t xb = dx != nullptr ? static_cast<size_t>(Numel(dx)) * sizeof(T) : 0;
      const size_t yb = dy != nullptr ? static_cast<size_t>(Numel(dy)) * sizeof(T) : 0;
      if (FleetStatus* e = ZeroAsync(kc, dxs, xb, s->native, "X@GRAD")) return e;
      if (FleetStatus* e = ZeroAsync(kc, dys, yb, s->native, "Y@GRAD")) return e;
      return nullptr;
    }
    const T* xs = Data<const T>(x);
    const T* ys = Data<const T>(y);
    const T* os = out != nullptr ? Data<const T>(out) : nullptr;
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    if (SameShape(st->plan)) {
      if (dxs != nullptr || dys != nullptr) {
        BinaryGradSameKernel<op, T><<<Blocks(n), kThreads, 0, s->native>>>(xs, ys, os, gs, dxs,
                                                                           dys, n);
      }
      return nullptr;
    }
    // The group plans cover exactly the operands' elements (the broadcast check made sure), and
    // a split sum needs the scratch prepare asked for.
    if (dx != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dx, "X@GRAD", st->gx.kept_count)) return e;
      if (FleetStatus* e = CheckScratch(kc, st->lx.scratch_bytes)) return e;
    }
    if (dy != nullptr) {
      if (FleetStatus* e = ExpectNumel(kc, dy, "Y@GRAD", st->gy.kept_count)) return e;
      if (FleetStatus* e = CheckScratch(kc, st->ly.scratch_bytes)) return e;
    }
    if (dxs != nullptr) {
      LaunchGroupSum(st->gx, st->lx, PartialTerm<op, true, T>{xs, ys, os, gs}, dxs, 1.0,
                     kc->scratch, s->native);
    }
    if (dys != nullptr) {
      LaunchGroupSum(st->gy, st->ly, PartialTerm<op, false, T>{xs, ys, os, gs}, dys, 1.0,
                     kc->scratch, s->native);
    }
    return nullptr;
  });
}

template <Bin op>
void AddBinary(KernelList& list, const char* name, const char* grad_name) {
  Add(list, name, FLEET_DTYPE_FLOAT32, BinaryLaunch<op, float>, BinaryPrepare<false>,
      BinaryRelease);
  Add(list, name, FLEET_DTYPE_FLOAT64, BinaryLaunch<op, double>, BinaryPrepare<false>,
      BinaryRelease);
  Add(list, grad_name, FLEET_DTYPE_FLOAT32, BinaryGradLaunch<op, float>, BinaryPrepare<true>,
      BinaryRelease);
  Add(list, grad_name, FLEET_DTYPE_FLOAT64, BinaryGradLaunch<op, double>, BinaryPrepare<true>,
      BinaryRelease);
}

}  // namespace
}  // namespace math

void AddMathElementwiseKernels(KernelList& list) {
  using math::Bin;
  math::AddBinary<Bin::kAdd>(list, "elementwise_add", "elementwise_add_grad");
  math::AddBinary<Bin::kSub>(list, "elementwise_sub", "elementwise_sub_grad");
  math::AddBinary<Bin::kMul>(list, "elementwise_mul", "elementwise_mul_grad");
  math::AddBinary<Bin::kDiv>(list, "elementwise_div", "elementwise_div_grad");
  math::AddBinary<Bin::kMax>(list, "elementwise_max", "elementwise_max_grad");
  math::AddBinary<Bin::kMin>(list, "elementwise_min", "elementwise_min_grad");
}

}  // namespace fleet_cuda
