// Indexing kernels: gather, index_select, gather_nd, scatter, one_hot_v2 and the grads of the
// first four. Geometry and messages come from plugins/common/index_plan.h (shared with the CUDA
// plugin), planned at prepare.
//
// Every index is checked before anything is written, so a bad one leaves the outputs untouched
// and the error names the op, the index slot, the position, the value and the bound.
// Gradients that gather several contributions into one element add them in index order, one
// thread, so results do not depend on the machine; the CUDA plugin adds in the same order.
#include <cstring>
#include <memory>
#include <string>

#include "index_plan.h"
#include "kernels/nn_kernels.h"
#include "kernels/tensor_kernel_util.h"

namespace fleet_cpu::tensor {
namespace {

namespace plan = fleet::kernel;
using plan::GatherNdPlan;
using plan::IndexInRange;
using plan::OneHotPlan;
using plan::ScatterPlan;
using plan::TakePlan;

template <typename P>
void ReleasePlan(void*, void* state) {
  delete static_cast<P*>(state);
}

// Keeps `make(kc, plan)`'s plan as the kernel's state.
template <typename P, typename Make>
FleetStatus* KeepPlan(const FleetKernelContext* kc, void** state, Make&& make) {
  return Guard(kc, [&]() -> FleetStatus* {
    auto p = std::make_unique<P>();
    if (FleetStatus* err = plan::ToFleetStatus(make(kc, p.get()), Error)) return err;
    *state = p.release();
    return nullptr;
  });
}

FleetStatus* NotPrepared(const FleetKernelContext* kc) {
  return InvalidArgument(OpName(kc) + ": not prepared");
}

FleetStatus* Changed(const FleetKernelContext* kc) {
  return InvalidArgument(OpName(kc) + ": shapes changed after prepare");
}

// INVALID_ARGUMENT for the first of `n` entries of `index` outside [0, bound).
FleetStatus* CheckIndices(const FleetKernelContext* kc, const FleetTensor* index,
                          const char* slot, int64_t n, int64_t bound) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t v = IndexAt(index, j);
    if (!IndexInRange(v, bound)) {
      return InvalidArgument(plan::BadIndexMessage(kc, slot, j, v, bound));
    }
  }
  return nullptr;
}

// ---- gather / index_select ------------------------------------------------------------------

template <const char* kAxis, bool kGrad>
FleetStatus* TakePrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return KeepPlan<TakePlan>(kc, state, [](const FleetKernelContext* c, TakePlan* p) {
    return plan::PlanTake(c, kAxis, kGrad, p);
  });
}

template <typename E>
FleetStatus* TakeLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const TakePlan*>(state);
    if (p == nullptr) return NotPrepared(kc);
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* index = Input(kc, "Index");
    const FleetTensor* out = Output(kc, "Out");
    if (Numel(x) != p->outer * p->rows * p->inner || Numel(index) != p->count ||
        Numel(out) != p->outer * p->count * p->inner) {
      return Changed(kc);
    }
    if (FleetStatus* err = CheckIndices(kc, index, "Index", p->count, p->rows)) return err;
    const E* src = Data<const E>(x);
    E* dst = Data<E>(out);
    const size_t bytes = static_cast<size_t>(p->inner) * sizeof(E);
    for (int64_t o = 0; o < p->outer; ++o) {
      for (int64_t j = 0; j < p->count; ++j) {
        const int64_t row = IndexAt(index, j);
        if (bytes > 0) {
          std::memcpy(dst + (o * p->count + j) * p->inner, src + (o * p->rows + row) * p->inner,
                      bytes);
        }
      }
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* TakeGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const TakePlan*>(state);
    if (p == nullptr) return NotPrepared(kc);
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx == nullptr) return nullptr;
    const FleetTensor* index = Input(kc, "Index");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (Numel(dx) != p->outer * p->rows * p->inner || Numel(index) != p->count ||
        Numel(dout) != p->outer * p->count * p->inner) {
      return Changed(kc);
    }
    if (FleetStatus* err = CheckIndices(kc, index, "Index", p->count, p->rows)) return err;
    T* g = Data<T>(dx);
    const T* d = Data<const T>(dout);
    std::memset(g, 0, static_cast<size_t>(Numel(dx)) * sizeof(T));
    for (int64_t o = 0; o < p->outer; ++o) {
      for (int64_t j = 0; j < p->count; ++j) {
        T* row = g + (o * p->rows + IndexAt(index, j)) * p->inner;
        const T* from = d + (o * p->count + j) * p->inner;
        for (int64_t i = 0; i < p->inner; ++i) row[i] += from[i];
      }
    }
    return nullptr;
  });
}

// ---- gather_nd ------------------------------------------------------------------------------

template <bool kGrad>
FleetStatus* GatherNdPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return KeepPlan<GatherNdPlan>(kc, state, [](const FleetKernelContext* c, GatherNdPlan* p) {
    return plan::PlanGatherNd(c, kGrad, p);
  });
}

// Checks every index vector; fills the X row of vector j into rows[j] via `use(j, row)`.
template <typename F>
FleetStatus* ForEachNdRow(const FleetKernelContext* kc, const GatherNdPlan& p,
                          const FleetTensor* index, F&& use) {
  int64_t idx[plan::kMaxGatherNdDepth] = {};
  for (int pass = 0; pass < 2; ++pass) {  // check everything, then use
    for (int64_t j = 0; j < p.count; ++j) {
      for (int k = 0; k < p.depth; ++k) {
        const int64_t pos = j * p.depth + k;
        idx[k] = IndexAt(index, pos);
        if (pass == 0 && !IndexInRange(idx[k], p.dims[k])) {
          return InvalidArgument(plan::BadIndexMessage(kc, "Index", pos, idx[k], p.dims[k]));
        }
      }
      if (pass == 1) use(j, plan::GatherNdRow(p, idx));
    }
  }
  return nullptr;
}

template <typename E>
FleetStatus* GatherNdLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const GatherNdPlan*>(state);
    if (p == nullptr) return NotPrepared(kc);
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* index = Input(kc, "Index");
    const FleetTensor* out = Output(kc, "Out");
    if (Numel(x) != p->rows * p->inner || Numel(index) != p->count * p->depth ||
        Numel(out) != p->count * p->inner) {
      return Changed(kc);
    }
    const E* src = Data<const E>(x);
    E* dst = Data<E>(out);
    const size_t bytes = static_cast<size_t>(p->inner) * sizeof(E);
    return ForEachNdRow(kc, *p, index, [&](int64_t j, int64_t row) {
      if (bytes > 0) std::memcpy(dst + j * p->inner, src + row * p->inner, bytes);
    });
  });
}

template <typename T>
FleetStatus* GatherNdGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const GatherNdPlan*>(state);
    if (p == nullptr) return NotPrepared(kc);
    const FleetTensor* dx = Output(kc, "X@GRAD");
    if (dx == nullptr) return nullptr;
    const FleetTensor* index = Input(kc, "Index");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    if (Numel(dx) != p->rows * p->inner || Numel(index) != p->count * p->depth ||
        Numel(dout) != p->count * p->inner) {
      return Changed(kc);
    }
    T* g = Data<T>(dx);
    const T* d = Data<const T>(dout);
    std::memset(g, 0, static_cast<size_t>(Numel(dx)) * sizeof(T));
    return ForEachNdRow(kc, *p, index, [&](int64_t j, int64_t row) {
      for (int64_t i = 0; i < p->inner; ++i) g[row * p->inner + i] += d[j * p->inner + i];
    });
  });
}

// ---- scatter --------------------------------------------------------------------------------

template <bool kGrad>
FleetStatus* ScatterPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return KeepPlan<ScatterPlan>(kc, state, [](const FleetKernelContext* c, ScatterPlan* p) {
    return plan::PlanScatter(c, kGrad, p);
  });
}

// Overwrite: rows are written in Ids order, so the last duplicate wins. Otherwise each
// addressed row is cleared, then its updates are added in Ids order.
template <typename T>
FleetStatus* ScatterLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const ScatterPlan*>(state);
    if (p == nullptr) return NotPrepared(kc);
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* ids = Input(kc, "Ids");
    const FleetTensor* up = Input(kc, "Updates");
    const FleetTensor* out = Output(kc, "Out");
    if (Numel(x) != p->rows * p->inner || Numel(ids) != p->count ||
        Numel(up) != p->count * p->inner || Numel(out) != Numel(x)) {
      return Changed(kc);
    }
    if (FleetStatus* err = CheckIndices(kc, ids, "Ids", p->count, p->rows)) return err;
    T* o = Data<T>(out);
    const T* u = Data<const T>(up);
    if (out->data != x->data && Numel(x) > 0) {
      std::memcpy(o, x->data, static_cast<size_t>(Numel(x)) * sizeof(T));
    }
    const bool overwrite = BoolAttr(kc, "overwrite", true);
    if (!overwrite) {
      for (int64_t j = 0; j < p->count; ++j) {
        T* row = o + IndexAt(ids, j) * p->inner;
        for (int64_t i = 0; i < p->inner; ++i) row[i] = T(0);
      }
    }
    for (int64_t j = 0; j < p->count; ++j) {
      T* row = o + IndexAt(ids, j) * p->inner;
      const T* from = u + j * p->inner;
      for (int64_t i = 0; i < p->inner; ++i) row[i] = overwrite ? from[i] : row[i] + from[i];
    }
    return nullptr;
  });
}

template <typename T>
FleetStatus* ScatterGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const ScatterPlan*>(state);
    if (p == nullptr) return NotPrepared(kc);
    const FleetTensor* ids = Input(kc, "Ids");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dx = Output(kc, "X@GRAD");
    const FleetTensor* dup = Output(kc, "Updates@GRAD");
    if (Numel(dout) != p->rows * p->inner || Numel(ids) != p->count ||
        (dx != nullptr && Numel(dx) != Numel(dout)) ||
        (dup != nullptr && Numel(dup) != p->count * p->inner)) {
      return Changed(kc);
    }
    if (FleetStatus* err = CheckIndices(kc, ids, "Ids", p->count, p->rows)) return err;
    const T* d = Data<const T>(dout);
    const size_t row_bytes = static_cast<size_t>(p->inner) * sizeof(T);
    if (dx != nullptr) {
      T* g = Data<T>(dx);
      if (g != d && Numel(dout) > 0) {
        std::memcpy(g, d, static_cast<size_t>(Numel(dout)) * sizeof(T));
      }
      for (int64_t j = 0; j < p->count; ++j) {
        if (row_bytes > 0) std::memset(g + IndexAt(ids, j) * p->inner, 0, row_bytes);
      }
    }
    if (dup != nullptr) {
      T* g = Data<T>(dup);
      for (int64_t j = 0; j < p->count; ++j) {
        if (row_bytes > 0) std::memcpy(g + j * p->inner, d + IndexAt(ids, j) * p->inner, row_bytes);
      }
    }
    return nullptr;
  });
}

// ---- one_hot_v2 -----------------------------------------------------------------------------

FleetStatus* OneHotPrepare(void*, const FleetKernelContext* kc, void** state, size_t*) {
  return KeepPlan<OneHotPlan>(kc, state, [](const FleetKernelContext* c, OneHotPlan* p) {
    return plan::PlanOneHot(c, p);
  });
}

template <typename T>
void FillOneHot(const OneHotPlan& p, const FleetTensor* x, T* out) {
  std::memset(out, 0, static_cast<size_t>(p.count * p.depth) * sizeof(T));
  for (int64_t j = 0; j < p.count; ++j) {
    const int64_t v = IndexAt(x, j);
    if (IndexInRange(v, p.depth)) out[j * p.depth + v] = T(1);
  }
}

// With allow_out_of_range an index outside [0, depth) gives a row of zeros.
FleetStatus* OneHotLaunch(void*, const FleetKernelContext* kc, void* state) {
  return Guard(kc, [&]() -> FleetStatus* {
    const auto* p = static_cast<const OneHotPlan*>(state);
    if (p == nullptr) return NotPrepared(kc);
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    if (Numel(x) != p->count || Numel(out) != p->count * p->depth) return Changed(kc);
    if (!p->allow_out_of_range) {
      if (FleetStatus* err = CheckIndices(kc, x, "X", p->count, p->depth)) return err;
    }
    if (out->dtype == FLEET_DTYPE_FLOAT64) {
      FillOneHot(*p, x, Data<double>(out));
    } else {
      FillOneHot(*p, x, Data<float>(out));
    }
    return nullptr;
  });
}

constexpr char kAxis[] = "axis";
constexpr char kDim[] = "dim";

// Gathers move elements only: one kernel per element size.
void AddTake(KernelList& list, const char* op, PrepareFn prepare, LaunchFn b8, LaunchFn b32,
             LaunchFn b64, ReleaseFn release) {
  Add(list, op, FLEET_DTYPE_BOOL, b8, prepare, release);
  Add(list, op, FLEET_DTYPE_INT32, b32, prepare, release);
  Add(list, op, FLEET_DTYPE_INT64, b64, prepare, release);
  Add(list, op, FLEET_DTYPE_FLOAT32, b32, prepare, release);
  Add(list, op, FLEET_DTYPE_FLOAT64, b64, prepare, release);
}

}  // namespace

void AddTensorIndexKernels(KernelList& list) {
  AddTake(list, "gather", TakePrepare<kAxis, false>, TakeLaunch<uint8_t>, TakeLaunch<uint32_t>,
          TakeLaunch<uint64_t>, ReleasePlan<TakePlan>);
  AddTake(list, "index_select", TakePrepare<kDim, false>, TakeLaunch<uint8_t>,
          TakeLaunch<uint32_t>, TakeLaunch<uint64_t>, ReleasePlan<TakePlan>);
  AddTake(list, "gather_nd", GatherNdPrepare<false>, GatherNdLaunch<uint8_t>,
          GatherNdLaunch<uint32_t>, GatherNdLaunch<uint64_t>, ReleasePlan<GatherNdPlan>);
  Add(list, "gather_grad", FLEET_DTYPE_FLOAT32, TakeGradLaunch<float>, TakePrepare<kAxis, true>,
      ReleasePlan<TakePlan>);
  Add(list, "gather_grad", FLEET_DTYPE_FLOAT64, TakeGradLaunch<double>,
      TakePrepare<kAxis, true>, ReleasePlan<TakePlan>);
  Add(list, "index_select_grad", FLEET_DTYPE_FLOAT32, TakeGradLaunch<float>,
      TakePrepare<kDim, true>, ReleasePlan<TakePlan>);
  Add(list, "index_select_grad", FLEET_DTYPE_FLOAT64, TakeGradLaunch<double>,
      TakePrepare<kDim, true>, ReleasePlan<TakePlan>);
  Add(list, "gather_nd_grad", FLEET_DTYPE_FLOAT32, GatherNdGradLaunch<float>,
      GatherNdPrepare<true>, ReleasePlan<GatherNdPlan>);
  Add(list, "gather_nd_grad", FLEET_DTYPE_FLOAT64, GatherNdGradLaunch<double>,
      GatherNdPrepare<true>, ReleasePlan<GatherNdPlan>);

  Add(list, "scatter", FLEET_DTYPE_INT32, ScatterLaunch<int32_t>, ScatterPrepare<false>,
      ReleasePlan<ScatterPlan>);
  Add(list, "scatter", FLEET_DTYPE_INT64, ScatterLaunch<int64_t>, ScatterPrepare<false>,
      ReleasePlan<ScatterPlan>);
  Add(list, "scatter", FLEET_DTYPE_FLOAT32, ScatterLaunch<float>, ScatterPrepare<false>,
      ReleasePlan<ScatterPlan>);
  Add(list, "scatter", FLEET_DTYPE_FLOAT64, ScatterLaunch<double>, ScatterPrepare<false>,
      ReleasePlan<ScatterPlan>);
  Add(list, "scatter_grad", FLEET_DTYPE_FLOAT32, ScatterGradLaunch<float>, ScatterPrepare<true>,
      ReleasePlan<ScatterPlan>);
  Add(list, "scatter_grad", FLEET_DTYPE_FLOAT64, ScatterGradLaunch<double>,
      ScatterPrepare<true>, ReleasePlan<ScatterPlan>);

  Add(list, "one_hot_v2", FLEET_DTYPE_INT32, OneHotLaunch, OneHotPrepare,
      ReleasePlan<OneHotPlan>);
  Add(list, "one_hot_v2", FLEET_DTYPE_INT64, OneHotLaunch, OneHotPrepare,
      ReleasePlan<OneHotPlan>);
}

}  // namespace fleet_cpu::tensor
