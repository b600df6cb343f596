// sum (of several tensors), mean, reduce_sum, reduce_mean and their grads: plain loops. The
// reduce plan (which dims fold into which output element) is built at prepare.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/math_util.h"

namespace fleet_cpu::math {
namespace {

template <typename T>
FleetStatus* SumLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {}, {"Out"})) return e;
    const FleetTensor* out = Output(kc, "Out");
    const size_t count = InputCount(kc, "X");
    const int64_t n = Numel(out);
    // Input pointers on the stack for the usual handful of inputs; every input element is read
    // before Out's is written, so Out may be one of the inputs.
    constexpr size_t kStack = 64;
    const T* stack_ptrs[kStack];
    std::vector<const T*> heap_ptrs;
    const T** ptrs = stack_ptrs;
    if (count > kStack) {
      heap_ptrs.resize(count);
      ptrs = heap_ptrs.data();
    }
    for (size_t k = 0; k < count; ++k) {
      const FleetTensor* x = Input(kc, "X", k);
      if (x == nullptr || Numel(x) != n) {
        return InvalidArgument("sum: X[" + std::to_string(k) + "] is missing or has " +
                               std::to_string(x ? Numel(x) : 0) + " elements, Out has " +
                               std::to_string(n));
      }
      ptrs[k] = Data<const T>(x);
    }
    T* os = Data<T>(out);
    if (count == 0) {
      std::fill(os, os + n, T(0));
      return nullptr;
    }
    for (int64_t i = 0; i < n; ++i) {
      T acc = ptrs[0][i];
      for (size_t k = 1; k < count; ++k) acc += ptrs[k][i];
      os[i] = acc;
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* MeanLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    const FleetTensor* x = Input(kc, "X");
    const int64_t n = Numel(x);
    const T* xs = Data<const T>(x);
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += xs[i];
    Data<T>(Output(kc, "Out"))[0] = static_cast<T>(n > 0 ? acc / static_cast<double>(n) : 0.0);
    return nullptr;
  });
}

template <typename T>
FleetStatus* MeanGradLaunch(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"Out@GRAD"}, {"X@GRAD"})) return e;
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const int64_t n = Numel(dx);
    const T g = Data<const T>(Input(kc, "Out@GRAD"))[0] / static_cast<T>(n > 0 ? n : 1);
    std::fill(Data<T>(dx), Data<T>(dx) + n, g);
    return nullptr;
  });
}

// Over X's dims: `sa` walks X (contiguous), `sb` walks Out (0 along reduced dims).
struct ReducePlan {
  StridePlan plan;
  int64_t reduced_count = 1;  // elements folded into each output element
};

FleetStatus* BuildReducePlan(const FleetKernelContext* kc, ReducePlan* rp) {
  const FleetTensor* x = Input(kc, "X");
  const int rank = x->ndim;
  if (rank > kMaxRank) {
    return InvalidArgument(std::string(kc->op_type) + ": rank " + std::to_string(rank) +
                           " exceeds " + std::to_string(kMaxRank));
  }
  bool reduced[kMaxRank] = {};
  std::vector<int64_t> dims = IntsAttr(kc, "dim");
  if (BoolAttr(kc, "reduce_all", false) || dims.empty()) {
    std::fill(reduced, reduced + rank, true);
  } else {
    for (int64_t d : dims) {
      const int64_t k = d < 0 ? d + rank : d;
      if (k < 0 || k >= rank) {
        return InvalidArgument(std::string(kc->op_type) + ": dim " + std::to_string(d) +
                               " is out of range for rank " + std::to_string(rank));
      }
      reduced[k] = true;
    }
  }
  StridePlan& p = rp->plan;
  p.rank = rank;
  int64_t xs = 1, os = 1;
  rp->reduced_count = 1;
  for (int i = rank - 1; i >= 0; --i) {
    p.dims[i] = x->dims[i];
    p.sa[i] = xs;
    xs *= x->dims[i];
    if (reduced[i]) {
      p.sb[i] = 0;
      rp->reduced_count *= x->dims[i];
    } else {
      p.sb[i] = os;
      os *= x->dims[i];
    }
  }
  Coalesce(p);
  return nullptr;
}

FleetStatus* ReducePrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {})) return e;
    auto rp = std::make_unique<ReducePlan>();
    if (FleetStatus* s = BuildReducePlan(kc, rp.get())) return s;
    *state = rp.release();
    return nullptr;
  });
}

void ReduceRelease(void*, void* state) { delete static_cast<ReducePlan*>(state); }

template <typename T, bool kMean>
FleetStatus* ReduceLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X"}, {"Out"})) return e;
    ReducePlan local;
    const ReducePlan* rp = static_cast<const ReducePlan*>(state);
    if (rp == nullptr) {
      if (FleetStatus* s = BuildReducePlan(kc, &local)) return s;
      rp = &local;
    }
    const FleetTensor* out = Output(kc, "Out");
    const T* xs = Data<const T>(Input(kc, "X"));
    T* os = Data<T>(out);
    const int64_t n_out = Numel(out);
    std::fill(os, os + n_out, T(0));
    VisitRows(rp->plan, [&](int64_t n, int64_t, int64_t a, int64_t b, int64_t sa, int64_t sb) {
      if (sb == 0) {
        T acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += xs[a + j * sa];
        os[b] += acc;
      } else {
        for (int64_t j = 0; j < n; ++j) os[b + j * sb] += xs[a + j * sa];
      }
    });
    if (kMean && rp->reduced_count > 0) {
      const T inv = T(1) / static_cast<T>(rp->reduced_count);
      for (int64_t i = 0; i < n_out; ++i) os[i] *= inv;
    }
    return nullptr;
  });
}

template <typename T, bool kMean>
FleetStatus* ReduceGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    if (FleetStatus* e = RequireSlots(kc, {"X", "Out@GRAD"}, {"X@GRAD"})) return e;
    ReducePlan local;
    const ReducePlan* rp = static_cast<const ReducePlan*>(state);
    if (rp == nullptr) {
      if (FleetStatus* s = BuildReducePlan(kc, &local)) return s;
      rp = &local;
    }
    const T* gs = Data<const T>(Input(kc, "Out@GRAD"));
    T* dxs = Data<T>(Output(kc, "X@GRAD"));
    const T scale = kMean && rp->reduced_count > 0 ? T(1) / static_cast<T>(rp->reduced_count)
                                                   : T(1);
    VisitRows(rp->plan, [&](int64_t n, int64_t, int64_t a, int64_t b, int64_t sa, int64_t sb) {
      for (int64_t j = 0; j < n; ++j) dxs[a + j * sa] = gs[b + j * sb] * scale;
    });
    return nullptr;
  });
}

}  // namespace

void AddReduceKernels(KernelList& list) {
  Add(list, "sum", FLEET_DTYPE_FLOAT32, SumLaunch<float>);
  Add(list, "sum", FLEET_DTYPE_FLOAT64, SumLaunch<double>);
  Add(list, "mean", FLEET_DTYPE_FLOAT32, MeanLaunch<float>);
  Add(list, "mean", FLEET_DTYPE_FLOAT64, MeanLaunch<double>);
  Add(list, "mean_grad", FLEET_DTYPE_FLOAT32, MeanGradLaunch<float>);
  Add(list, "mean_grad", FLEET_DTYPE_FLOAT64, MeanGradLaunch<double>);
  Add(list, "reduce_sum", FLEET_DTYPE_FLOAT32, ReduceLaunch<float, false>, ReducePrepare,
      ReduceRelease);
  Add(list, "reduce_sum", FLEET_DTYPE_FLOAT64, ReduceLaunch<double, false>, ReducePrepare,
      ReduceRelease);
  Add(list, "reduce_mean", FLEET_DTYPE_FLOAT32, ReduceLaunch<float, true>, ReducePrepare,
      ReduceRelease);
  Add(list, "reduce_mean", FLEET_DTYPE_FLOAT64, ReduceLaunch<double, true>, ReducePrepare,
      ReduceRelease);
  Add(list, "reduce_sum_grad", FLEET_DTYPE_FLOAT32, ReduceGradLaunch<float, false>,
      ReducePrepare, ReduceRelease);
  Add(list, "reduce_sum_grad", FLEET_DTYPE_FLOAT64, ReduceGradLaunch<double, false>,
      ReducePrepare, ReduceRelease);
  Add(list, "reduce_mean_grad", FLEET_DTYPE_FLOAT32, ReduceGradLaunch<float, true>,
      ReducePrepare, ReduceRelease);
  Add(list, "reduce_mean_grad", FLEET_DTYPE_FLOAT64, ReduceGradLaunch<double, true>,
      ReducePrepare, ReduceRelease);
}

}  // namespace fleet_cpu::math
