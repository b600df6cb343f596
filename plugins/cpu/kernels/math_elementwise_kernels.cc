// elementwise_{add,sub,mul,div,max,min} and their grads. Plain loops: a same-shape path, the
// bias-add path (X [N, C] with Y [C]) and a general broadcast path; the broadcast plan is made
// at prepare and kept as kernel state, so a launch neither plans nor allocates. Grads accumulate into the smaller operand's gradient, which
// is the reduction over broadcast dims.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "kernels/math_util.h"

namespace fleet_cpu::math {
namespace {

enum class Bin { kAdd, kSub, kMul, kDiv, kMax, kMin };

// Elements per thread below which a loop stays on one thread.
constexpr int64_t kGrain = 1 << 14;

// The plan over Out's dims with X's offsets in `sa` and Y's in `sb` (Paddle's axis rule,
// plugins/common/broadcast_plan.h); the messages are this plugin's.
FleetStatus* BinaryPlan(const FleetKernelContext* kc, const FleetTensor* x, const FleetTensor* y,
                        const FleetTensor* out, StridePlan* p) {
  if (out->ndim > kMaxRank) {
    return InvalidArgument(std::string(kc->op_type) + ": rank " + std::to_string(out->ndim) +
                           " exceeds " + std::to_string(kMaxRank));
  }
  const int64_t axis = IntAttr(kc, "axis", -1);
  if (!fleet::kernel::BinaryBroadcastPlan(x, y, out, axis, p)) {
    return InvalidArgument(std::string(kc->op_type) + ": X " + DimsText(x) + " and Y " +
                           DimsText(y) + " do not broadcast to Out " + DimsText(out) +
                           " at axis " + std::to_string(axis));
  }
  return nullptr;
}

template <Bin op, typename T>
inline T Apply(T a, T b) {
  if constexpr (op == Bin::kAdd) return a + b;
  if constexpr (op == Bin::kSub) return a - b;
  if constexpr (op == Bin::kMul) return a * b;
  if constexpr (op == Bin::kDiv) return a / b;
  if constexpr (op == Bin::kMax) return a > b ? a : b;
  if constexpr (op == Bin::kMin) return a < b ? a : b;
}

// The broadcast plan depends only on shapes and `axis`, so it is made once at prepare and kept
// as the kernel's state; a launch only walks it. `out` is the slot whose shape the plan
// covers: Out for the forward op, Out@GRAD for the grad op.
template <bool kGrad>
FleetStatus* BinaryPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* out = kGrad ? Input(kc, "Out@GRAD") : Output(kc, "Out");
    if (x == nullptr || y == nullptr || out == nullptr) return nullptr;  // launch reports it
    auto plan = std::make_unique<StridePlan>();
    if (FleetStatus* s = BinaryPlan(kc, x, y, out, plan.get())) return s;
    *state = plan.release();
    return nullptr;
  });
}

void BinaryRelease(void*, void* state) { delete static_cast<StridePlan*>(state); }

// The plan prepare made; the host always prepares a kernel before launching it.
FleetStatus* PreparedPlan(const FleetKernelContext* kc, void* state, const StridePlan** plan) {
  if (state == nullptr) {
    return Error(FLEET_CODE_FAILED_PRECONDITION,
                 std::string(kc->op_type) + ": launched without prepare");
  }
  *plan = static_cast<const StridePlan*>(state);
  return nullptr;
}

template <Bin op, typename T>
FleetStatus* BinaryLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* out = Output(kc, "Out");
    const StridePlan* plan = nullptr;
    if (FleetStatus* s = PreparedPlan(kc, state, &plan)) return s;
    const StridePlan& p = *plan;
    const T* xs = Data<const T>(x);
    const T* ys = Data<const T>(y);
    T* os = Data<T>(out);
    if (p.rank == 0 || (p.rank == 1 && p.sa[0] == 1 && p.sb[0] == 1)) {
      // `omp simd`: Out may be X or Y (in place) but element i reads only element i, so the
      // loop vectorises; without it, -O2 keeps it scalar for fear of aliasing.
      ParallelFor(kc, p.Numel(), kGrain, [&](int64_t begin, int64_t end) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) os[i] = Apply<op>(xs[i], ys[i]);
      });
      return nullptr;
    }
    if (p.rank == 2 && p.sa[0] == p.dims[1] && p.sa[1] == 1 && p.sb[0] == 0 && p.sb[1] == 1) {
      // Bias pattern: every row of X meets the same Y.
      const int64_t rows = p.dims[0], cols = p.dims[1];
      ParallelFor(kc, rows, std::max<int64_t>(1, kGrain / cols), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const T* xr = xs + r * cols;
          T* orow = os + r * cols;
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) orow[c] = Apply<op>(xr[c], ys[c]);
        }
      });
      return nullptr;
    }
    VisitRows(p, [&](int64_t n, int64_t o, int64_t a, int64_t b, int64_t sa, int64_t sb) {
      for (int64_t j = 0; j < n; ++j) os[o + j] = Apply<op>(xs[a + j * sa], ys[b + j * sb]);
    });
    return nullptr;
  });
}

// dX and dY contributions of one element.
template <Bin op, typename T>
inline void Partials(T x, T y, T out, T g, T* dx, T* dy) {
  if constexpr (op == Bin::kAdd) {
    *dx = g;
    *dy = g;
  } else if constexpr (op == Bin::kSub) {
    *dx = g;
    *dy = -g;
  } else if constexpr (op == Bin::kMul) {
    *dx = g * y;
    *dy = g * x;
  } else if constexpr (op == Bin::kDiv) {
    *dx = g / y;
    *dy = -g * out / y;
  } else if constexpr (op == Bin::kMax) {
    *dx = x > y ? g : T(0);
    *dy = x > y ? T(0) : g;
  } else {
    *dx = x < y ? g : T(0);
    *dy = x < y ? T(0) : g;
  }
}

template <Bin op, typename T>
FleetStatus* BinaryGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Y", "Out@GRAD"}, {})) return e;
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* y = Input(kc, "Y");
    const FleetTensor* out = Input(kc, "Out");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dy = Output(kc, "Y@GRAD");
    if (op == Bin::kDiv && out == nullptr) {
      return InvalidArgument("elementwise_div_grad: input Out is missing");
    }
    const StridePlan* plan = nullptr;
    if (FleetStatus* s = PreparedPlan(kc, state, &plan)) return s;
    const StridePlan& p = *plan;
    const T* xs = Data<const T>(x);
    const T* ys = Data<const T>(y);
    const T* os = out != nullptr ? Data<const T>(out) : nullptr;
    const T* gs = Data<const T>(dout);
    T* dxs = dx != nullptr ? Data<T>(dx) : nullptr;
    T* dys = dy != nullptr ? Data<T>(dy) : nullptr;
    const int64_t n = p.Numel();
    auto at = [&](const T* d, int64_t i) { return d != nullptr ? d[i] : T(0); };

    if (p.rank == 0 || (p.rank == 1 && p.sa[0] == 1 && p.sb[0] == 1)) {
      // Same shape: each gradient element is written once.
      for (int64_t i = 0; i < n; ++i) {
        T gx, gy;
        Partials<op>(xs[i], ys[i], at(os, i), gs[i], &gx, &gy);
        if (dxs) dxs[i] = gx;
        if (dys) dys[i] = gy;
      }
      return nullptr;
    }
    if constexpr (op == Bin::kAdd) {
      if (p.rank == 2 && p.sa[0] == p.dims[1] && p.sa[1] == 1 && p.sb[0] == 0 && p.sb[1] == 1) {
        // Bias-add backward: dX = dOut, dY = column sums of dOut.
        const int64_t rows = p.dims[0], cols = p.dims[1];
        if (dxs != nullptr && dxs != gs) std::memcpy(dxs, gs, sizeof(T) * static_cast<size_t>(n));
        if (dys != nullptr) {
          // Column blocks per thread, each summing down all rows.
          ParallelFor(kc, cols, std::max<int64_t>(16, kGrain / rows), [&](int64_t c0, int64_t c1) {
            std::fill(dys + c0, dys + c1, T(0));
            for (int64_t r = 0; r < rows; ++r) {
              const T* grow = gs + r * cols;
              for (int64_t c = c0; c < c1; ++c) dys[c] += grow[c];
            }
          });
        }
        return nullptr;
      }
    }
    if (dxs) std::fill(dxs, dxs + Numel(x), T(0));
    if (dys) std::fill(dys, dys + Numel(y), T(0));
    VisitRows(p, [&](int64_t len, int64_t o, int64_t a, int64_t b, int64_t sa, int64_t sb) {
      for (int64_t j = 0; j < len; ++j) {
        const int64_t xi = a + j * sa, yi = b + j * sb;
        T gx, gy;
        Partials<op>(xs[xi], ys[yi], at(os, o + j), gs[o + j], &gx, &gy);
        if (dxs) dxs[xi] += gx;
        if (dys) dys[yi] += gy;
      }
    });
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

void AddElementwiseKernels(KernelList& list) {
  AddBinary<Bin::kAdd>(list, "elementwise_add", "elementwise_add_grad");
  AddBinary<Bin::kSub>(list, "elementwise_sub", "elementwise_sub_grad");
  AddBinary<Bin::kMul>(list, "elementwise_mul", "elementwise_mul_grad");
  AddBinary<Bin::kDiv>(list, "elementwise_div", "elementwise_div_grad");
  AddBinary<Bin::kMax>(list, "elementwise_max", "elementwise_max_grad");
  AddBinary<Bin::kMin>(list, "elementwise_min", "elementwise_min_grad");
}

}  // namespace fleet_cpu::math
