// CUDA indexing kernels: gather, index_select, gather_nd, scatter, one_hot_v2 and the grads of
// the first four, with the CPU plugin's semantics (plugins/cpu/kernels/tensor_index_kernels.cc)
// and its geometry and messages (plugins/common/index_plan.h).
//
// Bad indices: as lookup_table_v2 (nn_misc.cu) does, through the nn group's flag. A kernel that
// meets an index outside [0, bound) writes NaN (0 for integer dtypes) where the value would go,
// or skips the contribution, and records the smallest bad position; a synchronous launch reads
// it back and fails with the CPU's message, an asynchronous one leaves the NaN as the only sign.
//
// Determinism, without float atomics: where several indices address one element (the take
// grads, scatter), the positions are sorted by the row they address with a stable radix sort,
// so each row's positions form a run in increasing order; one thread per (run, column) then adds
// the run in that order, the CPU's order, or takes its last entry (scatter's overwrite).
#include <climits>
#include <cmath>
#include <exception>
#include <memory>
#include <new>
#include <type_traits>

#include "index_plan.h"
#include "kernels/key_sort.h"
#include "kernels/nn_groups.h"
#include "kernels/tensor_groups.h"

namespace fleet_cuda {
namespace {

namespace plan = fleet::kernel;
using nn::ClearFlag;
using nn::FlagOf;
using nn::kFlagBytes;
using nn::LoadIndex;
using nn::NoteBad;
using nn::ReadFlag;
using plan::GatherNdPlan;
using plan::IndexInRange;
using plan::OneHotPlan;
using plan::OpName;
using plan::ScatterPlan;
using plan::TakePlan;

template <typename T>
__device__ inline T BadValue() {
  if constexpr (std::is_floating_point_v<T>) {
    return std::numeric_limits<T>::quiet_NaN();
  } else {
    return T(0);
  }
}

bool Is32(const FleetTensor* t) { return t->dtype == FLEET_DTYPE_INT32; }

FleetStatus* NotPrepared(const FleetKernelContext* kc) {
  return InvalidArgument(OpName(kc) + ": not prepared");
}
FleetStatus* Changed(const FleetKernelContext* kc) {
  return InvalidArgument(OpName(kc) + ": shapes changed after prepare");
}


// The error for the first bad position the flag recorded, if any. `bound_of(pos)` gives the
// bound that position was checked against.
template <typename Bound>
FleetStatus* ReportBad(const FleetKernelContext* kc, FleetStream* s,
                       const unsigned long long* flag, const FleetTensor* index,
                       const char* slot, Bound&& bound_of) {
  int64_t pos = -1, value = 0;
  if (FleetStatus* st = ReadFlag(kc, s, flag, index, &pos, &value)) return st;
  if (pos < 0) return nullptr;
  return InvalidArgument(plan::BadIndexMessage(kc, slot, pos, value, bound_of(pos)));
}

// Key of position i: its index, or `rows` (sorted last, skipped) when out of range.
__global__ void ListKeysKernel(const void* index, bool i32, int64_t n, int64_t rows,
                               uint32_t* keys, uint32_t* positions, unsigned long long* flag) {
  FLEET_CUDA_LOOP(i, n) {
    const int64_t v = LoadIndex(index, i32, i);
    const bool ok = IndexInRange(v, rows);
    if (!ok) NoteBad(flag, i);
    keys[i] = static_cast<uint32_t>(ok ? v : rows);
    positions[i] = static_cast<uint32_t>(i);
  }
}

// The X row index vector j addresses, or -1 (its first bad entry noted).
__device__ inline int64_t NdRow(const GatherNdPlan& p, const void* index, bool i32, int64_t j,
                                unsigned long long* flag, bool note) {
  int64_t idx[plan::kMaxGatherNdDepth];
  for (int k = 0; k < p.depth; ++k) {
    idx[k] = LoadIndex(index, i32, j * p.depth + k);
    if (!IndexInRange(idx[k], p.dims[k])) {
      if (note) NoteBad(flag, j * p.depth + k);
      return -1;
    }
  }
  return plan::GatherNdRow(p, idx);
}

__global__ void NdKeysKernel(GatherNdPlan p, const void* index, bool i32, uint32_t* keys,
                             uint32_t* positions, unsigned long long* flag) {
  FLEET_CUDA_LOOP(j, p.count) {
    const int64_t row = NdRow(p, index, i32, j, flag, true);
    keys[j] = static_cast<uint32_t>(row < 0 ? p.rows : row);
    positions[j] = static_cast<uint32_t>(j);
  }
}

// dx[o, key, i] = sum over the run of `key` of dout[o, position, i], for the first position s
// of each run (the others skip).
template <typename T>
__global__ void RunSumKernel(const T* dout, const uint32_t* keys, const uint32_t* positions,
                             T* dx, int64_t outer, int64_t n, int64_t inner, int64_t rows) {
  FLEET_CUDA_LOOP(e, outer * n * inner) {
    const int64_t i = e % inner;
    const int64_t sj = e / inner;
    const int64_t s = sj % n;
    const int64_t o = sj / n;
    const uint32_t key = keys[s];
    if (key >= rows) continue;
    if (s > 0 && keys[s - 1] == key) continue;
    T acc = T(0);
    for (int64_t t = s; t < n && keys[t] == key; ++t) {
      acc += dout[(o * n + positions[t]) * inner + i];
    }
    dx[(o * rows + key) * inner + i] = acc;
  }
}

// ---- gather / index_select ------------------------------------------------------------------

template <typename T>
__global__ void TakeKernel(TakePlan p, const T* x, const void* index, bool i32, T* out,
                           unsigned long long* flag) {
  FLEET_CUDA_LOOP(e, p.outer * p.count * p.inner) {
    const int64_t i = e % p.inner;
    const int64_t oj = e / p.inner;
    const int64_t j = oj % p.count;
    const int64_t o = oj / p.count;
    const int64_t row = LoadIndex(index, i32, j);
    if (!IndexInRange(row, p.rows)) {
      if (i == 0) NoteBad(flag, j);
      out[e] = BadValue<T>();
    } else {
      out[e] = x[(o * p.rows + row) * p.inner + i];
    }
  }
}

// Forward state: the plan; scratch: the flag.
template <const char* kAxis>
FleetStatus* TakePrepare(void*, const FleetKernelContext* kc, void** state,
                         size_t* scratch_bytes) {
  auto p = std::make_unique<TakePlan>();
  if (FleetStatus* err = FromPlan(plan::PlanTake(kc, kAxis, false, p.get()))) return err;
  *scratch_bytes = kFlagBytes;
  *state = p.release();
  return nullptr;
}

template <typename T>
FleetStatus* TakeLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* p = static_cast<const TakePlan*>(state);
  if (p == nullptr) return NotPrepared(kc);
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* index = Input(kc, "Index");
  const FleetTensor* out = Output(kc, "Out");
  const int64_t n = p->outer * p->count * p->inner;
  if (Numel(x) != p->outer * p->rows * p->inner || Numel(index) != p->count ||
      Numel(out) != n) {
    return Changed(kc);
  }
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    if (n > 0) {
      TakeKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(*p, Data<const T>(x), index->data,
                                                           Is32(index), Data<T>(out), flag);
    }
    return ReportBad(kc, s, flag, index, "Index", [&](int64_t) { return p->rows; });
  });
}

struct TakeGradState {
  TakePlan take;
  SortPlan sort;
};

template <const char* kAxis>
FleetStatus* TakeGradPrepare(void*, const FleetKernelContext* kc, void** state,
                             size_t* scratch_bytes) {
  auto st = std::unique_ptr<TakeGradState>(new (std::nothrow) TakeGradState());
  if (st == nullptr) return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": out of memory");
  if (FleetStatus* err = FromPlan(plan::PlanTake(kc, kAxis, true, &st->take))) return err;
  if (FleetStatus* err = PlanSort(kc, st->take.count, st->take.rows, &st->sort)) return err;
  *scratch_bytes = SortScratch(st->sort);
  *state = st.release();
  return nullptr;
}

template <typename T>
FleetStatus* TakeGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* st = static_cast<const TakeGradState*>(state);
  if (st == nullptr) return NotPrepared(kc);
  const TakePlan& p = st->take;
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* index = Input(kc, "Index");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  if (Numel(dx) != p.outer * p.rows * p.inner || Numel(index) != p.count ||
      Numel(dout) != p.outer * p.count * p.inner) {
    return Changed(kc);
  }
  unsigned long long* flag = nullptr;
  if (FleetStatus* err = FlagOf(kc, &flag)) return err;
  const SortBuffers b = BuffersOf(kc, st->sort);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* err = ClearFlag(kc, s, flag)) return err;
    const size_t bytes = static_cast<size_t>(Numel(dx)) * sizeof(T);
    if (bytes > 0) {
      if (FleetStatus* err = CudaStatus(cudaMemsetAsync(dx->data, 0, bytes, s->native),
                                        OpName(kc) + ": clearing X@GRAD")) {
        return err;
      }
    }
    if (p.count > 0) {
      ListKeysKernel<<<Blocks(p.count), kThreads, 0, s->native>>>(
          index->data, Is32(index), p.count, p.rows, b.keys_in, b.pos_in, flag);
      if (FleetStatus* err = SortKeys(kc, st->sort, b, s)) return err;
      const int64_t n = p.outer * p.count * p.inner;
      if (n > 0) {
        RunSumKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
            Data<const T>(dout), b.keys_out, b.pos_out, Data<T>(dx), p.outer, p.count, p.inner,
            p.rows);
      }
    }
    return ReportBad(kc, s, flag, index, "Index", [&](int64_t) { return p.rows; });
  });
}

// ---- gather_nd ------------------------------------------------------------------------------

template <typename T>
__global__ void GatherNdKernel(GatherNdPlan p, const T* x, const void* index, bool i32, T* out,
                               unsigned long long* flag) {
  FLEET_CUDA_LOOP(e, p.count * p.inner) {
    const int64_t i = e % p.inner;
    const int64_t j = e / p.inner;
    const int64_t row = NdRow(p, index, i32, j, flag, i == 0);
    out[e] = row < 0 ? BadValue<T>() : x[row * p.inner + i];
  }
}

FleetStatus* GatherNdPrepare(void*, const FleetKernelContext* kc, void** state,
                             size_t* scratch_bytes) {
  auto p = std::make_unique<GatherNdPlan>();
  if (FleetStatus* err = FromPlan(plan::PlanGatherNd(kc, false, p.get()))) return err;
  *scratch_bytes = kFlagBytes;
  *state = p.release();
  return nullptr;
}

template <typename T>
FleetStatus* GatherNdLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* p = static_cast<const GatherNdPlan*>(state);
  if (p == nullptr) return NotPrepared(kc);
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* index = Input(kc, "Index");
  const FleetTensor* out = Output(kc, "Out");
  const int64_t n = p->count * p->inner;
  if (Numel(x) != p->rows * p->inner || Numel(index) != p->count * p->depth || Numel(out) != n) {
    return Changed(kc);
  }
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    if (n > 0) {
      GatherNdKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
          *p, Data<const T>(x), index->data, Is32(index), Data<T>(out), flag);
    }
    return ReportBad(kc, s, flag, index, "Index",
                     [&](int64_t pos) { return p->dims[pos % p->depth]; });
  });
}

struct GatherNdGradState {
  GatherNdPlan nd;
  SortPlan sort;
};

FleetStatus* GatherNdGradPrepare(void*, const FleetKernelContext* kc, void** state,
                                 size_t* scratch_bytes) {
  auto st = std::unique_ptr<GatherNdGradState>(new (std::nothrow) GatherNdGradState());
  if (st == nullptr) return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": out of memory");
  if (FleetStatus* err = FromPlan(plan::PlanGatherNd(kc, true, &st->nd))) return err;
  if (FleetStatus* err = PlanSort(kc, st->nd.count, st->nd.rows, &st->sort)) return err;
  *scratch_bytes = SortScratch(st->sort);
  *state = st.release();
  return nullptr;
}

template <typename T>
FleetStatus* GatherNdGradLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* st = static_cast<const GatherNdGradState*>(state);
  if (st == nullptr) return NotPrepared(kc);
  const GatherNdPlan& p = st->nd;
  const FleetTensor* dx = Output(kc, "X@GRAD");
  if (dx == nullptr) return nullptr;
  const FleetTensor* index = Input(kc, "Index");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  if (Numel(dx) != p.rows * p.inner || Numel(index) != p.count * p.depth ||
      Numel(dout) != p.count * p.inner) {
    return Changed(kc);
  }
  unsigned long long* flag = nullptr;
  if (FleetStatus* err = FlagOf(kc, &flag)) return err;
  const SortBuffers b = BuffersOf(kc, st->sort);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* err = ClearFlag(kc, s, flag)) return err;
    const size_t bytes = static_cast<size_t>(Numel(dx)) * sizeof(T);
    if (bytes > 0) {
      if (FleetStatus* err = CudaStatus(cudaMemsetAsync(dx->data, 0, bytes, s->native),
                                        OpName(kc) + ": clearing X@GRAD")) {
        return err;
      }
    }
    if (p.count > 0) {
      NdKeysKernel<<<Blocks(p.count), kThreads, 0, s->native>>>(p, index->data, Is32(index),
                                                                b.keys_in, b.pos_in, flag);
      if (FleetStatus* err = SortKeys(kc, st->sort, b, s)) return err;
      const int64_t n = p.count * p.inner;
      if (n > 0) {
        RunSumKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
            Data<const T>(dout), b.keys_out, b.pos_out, Data<T>(dx), 1, p.count, p.inner, p.rows);
      }
    }
    return ReportBad(kc, s, flag, index, "Index",
                     [&](int64_t pos) { return p.dims[pos % p.depth]; });
  });
}

// ---- scatter --------------------------------------------------------------------------------

// out[key] = the last update of the run (overwrite) or the sum of its updates in Ids order.
template <typename T>
__global__ void ScatterRunKernel(const T* updates, const uint32_t* keys,
                                 const uint32_t* positions, T* out, int64_t n, int64_t inner,
                                 int64_t rows, bool overwrite) {
  FLEET_CUDA_LOOP(e, n * inner) {
    const int64_t i = e % inner;
    const int64_t s = e / inner;
    const uint32_t key = keys[s];
    if (key >= rows) continue;
    if (s > 0 && keys[s - 1] == key) continue;
    T value = T(0);
    if (overwrite) {
      int64_t t = s;
      while (t + 1 < n && keys[t + 1] == key) ++t;
      value = updates[static_cast<int64_t>(positions[t]) * inner + i];
    } else {
      for (int64_t t = s; t < n && keys[t] == key; ++t) {
        value += updates[static_cast<int64_t>(positions[t]) * inner + i];
      }
    }
    out[static_cast<int64_t>(key) * inner + i] = value;
  }
}

struct ScatterState {
  ScatterPlan scatter;
  SortPlan sort;
};

FleetStatus* ScatterPrepare(void*, const FleetKernelContext* kc, void** state,
                            size_t* scratch_bytes) {
  auto st = std::unique_ptr<ScatterState>(new (std::nothrow) ScatterState());
  if (st == nullptr) return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": out of memory");
  if (FleetStatus* err = FromPlan(plan::PlanScatter(kc, false, &st->scatter))) return err;
  if (FleetStatus* err = PlanSort(kc, st->scatter.count, st->scatter.rows, &st->sort)) {
    return err;
  }
  *scratch_bytes = SortScratch(st->sort);
  *state = st.release();
  return nullptr;
}

template <typename T>
FleetStatus* ScatterLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* st = static_cast<const ScatterState*>(state);
  if (st == nullptr) return NotPrepared(kc);
  const ScatterPlan& p = st->scatter;
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* ids = Input(kc, "Ids");
  const FleetTensor* up = Input(kc, "Updates");
  const FleetTensor* out = Output(kc, "Out");
  if (Numel(x) != p.rows * p.inner || Numel(ids) != p.count || Numel(up) != p.count * p.inner ||
      Numel(out) != Numel(x)) {
    return Changed(kc);
  }
  unsigned long long* flag = nullptr;
  if (FleetStatus* err = FlagOf(kc, &flag)) return err;
  const SortBuffers b = BuffersOf(kc, st->sort);
  const bool overwrite = BoolAttr(kc, "overwrite", true);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* err = ClearFlag(kc, s, flag)) return err;
    const size_t bytes = static_cast<size_t>(Numel(x)) * sizeof(T);
    if (bytes > 0 && out->data != x->data) {
      if (FleetStatus* err = CudaStatus(cudaMemcpyAsync(out->data, x->data, bytes,
                                                        cudaMemcpyDeviceToDevice, s->native),
                                        OpName(kc) + ": copying X")) {
        return err;
      }
    }
    if (p.count > 0) {
      ListKeysKernel<<<Blocks(p.count), kThreads, 0, s->native>>>(
          ids->data, Is32(ids), p.count, p.rows, b.keys_in, b.pos_in, flag);
      if (FleetStatus* err = SortKeys(kc, st->sort, b, s)) return err;
      const int64_t n = p.count * p.inner;
      if (n > 0) {
        ScatterRunKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
            Data<const T>(up), b.keys_out, b.pos_out, Data<T>(out), p.count, p.inner, p.rows,
            overwrite);
      }
    }
    return ReportBad(kc, s, flag, ids, "Ids", [&](int64_t) { return p.rows; });
  });
}

// Clears the rows of X@GRAD that Ids address (every writer writes 0, so overlaps agree).
template <typename T>
__global__ void ZeroRowsKernel(const void* ids, bool i32, int64_t n, int64_t inner, int64_t rows,
                               T* dx, unsigned long long* flag) {
  FLEET_CUDA_LOOP(e, n * inner) {
    const int64_t i = e % inner;
    const int64_t j = e / inner;
    const int64_t row = LoadIndex(ids, i32, j);
    if (IndexInRange(row, rows)) {
      dx[row * inner + i] = T(0);
    } else if (i == 0) {
      NoteBad(flag, j);
    }
  }
}

FleetStatus* ScatterGradPrepare(void*, const FleetKernelContext* kc, void** state,
                                size_t* scratch_bytes) {
  auto p = std::make_unique<ScatterPlan>();
  if (FleetStatus* err = FromPlan(plan::PlanScatter(kc, true, p.get()))) return err;
  *scratch_bytes = kFlagBytes;
  *state = p.release();
  return nullptr;
}

template <typename T>
FleetStatus* ScatterGradLaunch(void*, const FleetKernelContext* kc, void* state) {
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
  unsigned long long* flag = nullptr;
  if (FleetStatus* err = FlagOf(kc, &flag)) return err;
  const int64_t n = p->count * p->inner;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* err = ClearFlag(kc, s, flag)) return err;
    if (dx != nullptr) {
      const size_t bytes = static_cast<size_t>(Numel(dout)) * sizeof(T);
      if (bytes > 0 && dx->data != dout->data) {
        if (FleetStatus* err = CudaStatus(cudaMemcpyAsync(dx->data, dout->data, bytes,
                                                          cudaMemcpyDeviceToDevice, s->native),
                                          OpName(kc) + ": copying Out@GRAD")) {
          return err;
        }
      }
      if (n > 0) {
        ZeroRowsKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(
            ids->data, Is32(ids), p->count, p->inner, p->rows, Data<T>(dx), flag);
      }
    }
    if (dup != nullptr && n > 0) {
      TakePlan take;
      take.rows = p->rows;
      take.inner = p->inner;
      take.count = p->count;
      TakeKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(take, Data<const T>(dout), ids->data,
                                                           Is32(ids), Data<T>(dup), flag);
    }
    return ReportBad(kc, s, flag, ids, "Ids", [&](int64_t) { return p->rows; });
  });
}

// ---- one_hot_v2 -----------------------------------------------------------------------------

template <typename T>
__global__ void OneHotKernel(OneHotPlan p, const void* x, bool i32, T* out,
                             unsigned long long* flag) {
  FLEET_CUDA_LOOP(e, p.count * p.depth) {
    const int64_t k = e % p.depth;
    const int64_t j = e / p.depth;
    const int64_t v = LoadIndex(x, i32, j);
    if (IndexInRange(v, p.depth)) {
      out[e] = v == k ? T(1) : T(0);
    } else if (p.allow_out_of_range) {
      out[e] = T(0);
    } else {
      if (k == 0) NoteBad(flag, j);
      out[e] = BadValue<T>();
    }
  }
}

FleetStatus* OneHotPrepare(void*, const FleetKernelContext* kc, void** state,
                           size_t* scratch_bytes) {
  auto p = std::make_unique<OneHotPlan>();
  if (FleetStatus* err = FromPlan(plan::PlanOneHot(kc, p.get()))) return err;
  *scratch_bytes = kFlagBytes;
  *state = p.release();
  return nullptr;
}

FleetStatus* OneHotLaunch(void*, const FleetKernelContext* kc, void* state) {
  const auto* p = static_cast<const OneHotPlan*>(state);
  if (p == nullptr) return NotPrepared(kc);
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  const int64_t n = p->count * p->depth;
  if (Numel(x) != p->count || Numel(out) != n) return Changed(kc);
  unsigned long long* flag = nullptr;
  if (FleetStatus* err = FlagOf(kc, &flag)) return err;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* err = ClearFlag(kc, s, flag)) return err;
    if (n > 0) {
      if (out->dtype == FLEET_DTYPE_FLOAT64) {
        OneHotKernel<double><<<Blocks(n), kThreads, 0, s->native>>>(*p, x->data, Is32(x),
                                                                    Data<double>(out), flag);
      } else {
        OneHotKernel<float><<<Blocks(n), kThreads, 0, s->native>>>(*p, x->data, Is32(x),
                                                                   Data<float>(out), flag);
      }
    }
    return ReportBad(kc, s, flag, x, "X", [&](int64_t) { return p->depth; });
  });
}

// Planning builds host strings and vectors, which may throw, and nothing may cross the ABI.
template <PrepareFn kPrepare>
FleetStatus* Guarded(void* ctx, const FleetKernelContext* kc, void** state,
                     size_t* scratch_bytes) {
  try {
    return kPrepare(ctx, kc, state, scratch_bytes);
  } catch (const std::exception& e) {
    return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": " + e.what());
  } catch (...) {
    return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": unknown exception");
  }
}

template <typename P>
void ReleasePlan(void*, void* state) {
  delete static_cast<P*>(state);
}

constexpr char kAxis[] = "axis";
constexpr char kDim[] = "dim";

// The CPU plugin's dtypes for a gather-like op, typed so a bad index writes NaN into floats.
template <template <typename> class Launch>
void AddTake(KernelList& list, const char* op, PrepareFn prepare, ReleaseFn release) {
  Add(list, op, FLEET_DTYPE_BOOL, Launch<uint8_t>::fn, prepare, release);
  Add(list, op, FLEET_DTYPE_INT32, Launch<int32_t>::fn, prepare, release);
  Add(list, op, FLEET_DTYPE_INT64, Launch<int64_t>::fn, prepare, release);
  Add(list, op, FLEET_DTYPE_FLOAT32, Launch<float>::fn, prepare, release);
  Add(list, op, FLEET_DTYPE_FLOAT64, Launch<double>::fn, prepare, release);
}

template <typename T>
struct TakeFn {
  static constexpr LaunchFn fn = TakeLaunch<T>;
};
template <typename T>
struct GatherNdFn {
  static constexpr LaunchFn fn = GatherNdLaunch<T>;
};

}  // namespace

void AddTensorIndexKernels(KernelList& list) {
  AddTake<TakeFn>(list, "gather", Guarded<TakePrepare<kAxis>>, ReleasePlan<TakePlan>);
  AddTake<TakeFn>(list, "index_select", Guarded<TakePrepare<kDim>>, ReleasePlan<TakePlan>);
  AddTake<GatherNdFn>(list, "gather_nd", Guarded<GatherNdPrepare>, ReleasePlan<GatherNdPlan>);
  Add(list, "gather_grad", FLEET_DTYPE_FLOAT32, TakeGradLaunch<float>,
      Guarded<TakeGradPrepare<kAxis>>, ReleasePlan<TakeGradState>);
  Add(list, "gather_grad", FLEET_DTYPE_FLOAT64, TakeGradLaunch<double>,
      Guarded<TakeGradPrepare<kAxis>>, ReleasePlan<TakeGradState>);
  Add(list, "index_select_grad", FLEET_DTYPE_FLOAT32, TakeGradLaunch<float>,
      Guarded<TakeGradPrepare<kDim>>, ReleasePlan<TakeGradState>);
  Add(list, "index_select_grad", FLEET_DTYPE_FLOAT64, TakeGradLaunch<double>,
      Guarded<TakeGradPrepare<kDim>>, ReleasePlan<TakeGradState>);
  Add(list, "gather_nd_grad", FLEET_DTYPE_FLOAT32, GatherNdGradLaunch<float>,
      Guarded<GatherNdGradPrepare>, ReleasePlan<GatherNdGradState>);
  Add(list, "gather_nd_grad", FLEET_DTYPE_FLOAT64, GatherNdGradLaunch<double>,
      Guarded<GatherNdGradPrepare>, ReleasePlan<GatherNdGradState>);

  Add(list, "scatter", FLEET_DTYPE_INT32, ScatterLaunch<int32_t>, Guarded<ScatterPrepare>,
      ReleasePlan<ScatterState>);
  Add(list, "scatter", FLEET_DTYPE_INT64, ScatterLaunch<int64_t>, Guarded<ScatterPrepare>,
      ReleasePlan<ScatterState>);
  Add(list, "scatter", FLEET_DTYPE_FLOAT32, ScatterLaunch<float>, Guarded<ScatterPrepare>,
      ReleasePlan<ScatterState>);
  Add(list, "scatter", FLEET_DTYPE_FLOAT64, ScatterLaunch<double>, Guarded<ScatterPrepare>,
      ReleasePlan<ScatterState>);
  Add(list, "scatter_grad", FLEET_DTYPE_FLOAT32, ScatterGradLaunch<float>,
      Guarded<ScatterGradPrepare>, ReleasePlan<ScatterPlan>);
  Add(list, "scatter_grad", FLEET_DTYPE_FLOAT64, ScatterGradLaunch<double>,
      Guarded<ScatterGradPrepare>, ReleasePlan<ScatterPlan>);

  Add(list, "one_hot_v2", FLEET_DTYPE_INT32, OneHotLaunch, Guarded<OneHotPrepare>,
      ReleasePlan<OneHotPlan>);
  Add(list, "one_hot_v2", FLEET_DTYPE_INT64, OneHotLaunch, Guarded<OneHotPrepare>,
      ReleasePlan<OneHotPlan>);
}

}  // namespace fleet_cuda
