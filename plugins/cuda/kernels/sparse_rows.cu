// CUDA kernels of the ops that take or make SelectedRows tensors (sparse gradients, ABI 1.6),
// with the CPU plugin's semantics (plugins/cpu/kernels/sparse_kernels.cc) and messages
// (plugins/common/selected_rows_plan.h): lookup_table(_v2)_grad with is_sparse, sum of sparse
// gradients, the sparse updates of sgd, momentum, adam and adagrad, squared_l2_norm and
// elementwise_mul of a sparse gradient (clipping by global norm), sparse_weight_decay, scale,
// and split_selected_rows (a trainer cutting a gradient at the servers' row blocks or shards).
//
// Each is registered after the dense kernel of its op and refuses dense calls in `supports`,
// so the host picks it only when a tensor is sparse. Which rows an update moves follows the
// CPU plugin, and Paddle: sgd, adagrad and lazy adam the listed rows only; momentum and adam
// without lazy_mode every row, from the gradient made dense in scratch (optimizer_groups.h).
//
// Merging without float atomics: an update sorts the gradient's entries by row with the stable
// key sort (key_sort.h), so the entries of a row form a run in entry order, and one thread per
// (run, column) adds the run in that order. That is the CPU's order, so a merged row is the
// CPU's to the bit; the update formulas are shared with it (optimizer_formulas.h).
//
// Bad rows: the rows live in device memory, so a launch cannot look at them before it
// enqueues work. An entry naming a row outside [0, height) other than -1 is skipped (nothing
// is read or written out of bounds) and recorded in the nn group's flag (nn_groups.h); a
// synchronous launch reads the flag back and fails with the CPU's message, an asynchronous one
// leaves the update without that entry. (The forward lookup of a bad id already writes NaN.)
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

#include "kernels/key_sort.h"
#include "kernels/nn_groups.h"
#include "kernels/optimizer_groups.h"
#include "optimizer_formulas.h"
#include "selected_rows_plan.h"

namespace fleet_cuda {
namespace {

namespace plan = fleet::kernel;
using nn::AlignScratch;
using nn::ClearFlag;
using nn::DtypeOf;
using nn::FlagOf;
using nn::LoadIndex;
using nn::NoteBad;
using nn::OpName;
using nn::ReadFlag;
using nn::Require;
using nn::RequireSized;
using plan::IsSelectedRows;
using plan::RowsView;

FleetStatus* Plan(const plan::PlanStatus& s) { return FromPlan(s); }

FleetStatus* SparseOnly(void*, const FleetKernelContext* kc) {
  return Plan(plan::SparseCallsOnly(kc));
}

// What prepare planned: the sort of one slot's entries, and where the kernel's own scratch
// (a dense gradient) starts after it.
struct RowsState {
  SortPlan sort;
  size_t extra_offset = 0;
};

FleetStatus* NotPrepared(const FleetKernelContext* kc) {
  return InvalidArgument(OpName(kc) + ": launched with other shapes than it was prepared for");
}

// ---- device helpers ---------------------------------------------------------------------------

// Key of entry i: its row, or `height` (sorted last, skipped) for an empty entry (-1) and for
// a bad one, which is noted.
__global__ void RowKeysKernel(const int64_t* rows, int64_t n, int64_t height, uint32_t* keys,
                              uint32_t* positions, unsigned long long* flag) {
  FLEET_CUDA_LOOP(i, n) {
    const int64_t r = rows[i];
    const bool ok = r >= 0 && r < height;
    if (!ok && r != -1) NoteBad(flag, i);
    keys[i] = static_cast<uint32_t>(ok ? r : height);
    positions[i] = static_cast<uint32_t>(i);
  }
}

// Whether sorted position s starts the run of a row.
__device__ inline bool RunStart(const uint32_t* keys, int64_t s, int64_t height) {
  const uint32_t k = keys[s];
  return k < height && (s == 0 || keys[s - 1] != k);
}

// Column j of the run starting at sorted position s: its entries added in entry order, onto
// `acc`, or from_first onto the first entry itself. The CPU's MergeRow starts from the first
// entry; its Densify starts from zero and its dense sum from the dense value.
template <typename T>
__device__ inline T AddRun(T acc, bool from_first, const T* values, int64_t width,
                           const uint32_t* keys, const uint32_t* pos, int64_t n, int64_t s,
                           int64_t j) {
  int64_t t = s;
  if (from_first) acc = values[static_cast<int64_t>(pos[t++]) * width + j];
  for (; t < n && keys[t] == keys[s]; ++t) acc += values[static_cast<int64_t>(pos[t]) * width + j];
  return acc;
}

// ---- host helpers -----------------------------------------------------------------------------

// Plans the sort of the entries of sparse input `slot` and `extra` bytes of scratch after it.
// A dense `slot` plans nothing: `supports` refuses such a call.
FleetStatus* PrepareSortOf(const FleetKernelContext* kc, const char* slot, size_t extra,
                           void** state, size_t* scratch) {
  const FleetTensor* g = Input(kc, slot);
  if (!IsSelectedRows(g)) return nullptr;
  if (g->ndim < 1) {
    return InvalidArgument(OpName(kc) + ": " + slot + " has no entries dimension");
  }
  auto* st = new (std::nothrow) RowsState();
  if (st == nullptr) return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": out of memory");
  if (FleetStatus* e = PlanSort(kc, g->dims[0], g->height, &st->sort)) {
    delete st;
    return e;
  }
  st->extra_offset = SortScratch(st->sort);
  *scratch = st->extra_offset + AlignScratch(extra);
  *state = st;
  return nullptr;
}

// Enqueues the keys of `rows` and their sort.
FleetStatus* SortRows(const FleetKernelContext* kc, FleetStream* s, const SortPlan& sp,
                      const SortBuffers& b, const int64_t* rows, unsigned long long* flag) {
  if (sp.n == 0) return nullptr;
  RowKeysKernel<<<Blocks(sp.n), kThreads, 0, s->native>>>(rows, sp.n, sp.rows, b.keys_in,
                                                           b.pos_in, flag);
  return SortKeys(kc, sp, b, s);
}

// The CPU's error for the first bad entry of `t` the flag recorded (synchronous launches).
FleetStatus* ReportBadRow(const FleetKernelContext* kc, FleetStream* s,
                          const unsigned long long* flag, const FleetTensor* t,
                          const char* slot) {
  FleetTensor rows = *t;
  rows.data = t->rows;
  rows.dtype = FLEET_DTYPE_INT64;
  int64_t pos = -1, value = 0;
  if (FleetStatus* st = ReadFlag(kc, s, flag, &rows, &pos, &value)) return st;
  if (pos < 0) return nullptr;
  return InvalidArgument(plan::BadEntryMessage(OpName(kc).c_str(), slot, pos, value, t->height));
}

// A launch that sorts the entries of sparse input `slot`: prepare's plan, checked against the
// launch, and the flag and sort buffers in its scratch.
struct SortedCall {
  const RowsState* st = nullptr;
  const FleetTensor* x = nullptr;  // the sparse input
  const char* slot = nullptr;
  unsigned long long* flag = nullptr;
  SortBuffers b{};
};

FleetStatus* SortedCallOf(const FleetKernelContext* kc, void* state, const char* slot,
                          SortedCall* c) {
  const auto* st = static_cast<const RowsState*>(state);
  const FleetTensor* x = Input(kc, slot);
  if (st == nullptr || x == nullptr || x->ndim < 1 || st->sort.n != x->dims[0] ||
      st->sort.rows != x->height) {
    return NotPrepared(kc);
  }
  if (kc->scratch == nullptr) return MissingScratch(kc, st->extra_offset);
  if (FleetStatus* e = FlagOf(kc, &c->flag)) return e;
  c->st = st;
  c->x = x;
  c->slot = slot;
  c->b = BuffersOf(kc, st->sort);
  return nullptr;
}

// Enqueues the flag's reset and the sort of the entries (keys_out/pos_out hold it).
FleetStatus* EnqueueSort(const FleetKernelContext* kc, FleetStream* s, const SortedCall& c) {
  if (FleetStatus* e = ClearFlag(kc, s, c.flag)) return e;
  return SortRows(kc, s, c.st->sort, c.b, c.x->rows, c.flag);
}

// After the call's kernels: the CPU's error for its first bad entry (synchronous launches).
FleetStatus* ReportBadRow(const FleetKernelContext* kc, FleetStream* s, const SortedCall& c) {
  return ReportBadRow(kc, s, c.flag, c.x, c.slot);
}

// Enqueues a device-to-device copy of `bytes`, unless `to` is `from`.
FleetStatus* CopyApart(const FleetKernelContext* kc, FleetStream* s, void* to, const void* from,
                       size_t bytes, const char* what) {
  if (to == from || bytes == 0) return nullptr;
  return CudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, s->native),
                    OpName(kc) + ": copying " + what);
}

template <typename T>
FleetStatus* CopyTensorApart(const FleetKernelContext* kc, FleetStream* s, const FleetTensor* from,
                             const FleetTensor* to, const char* what) {
  return CopyApart(kc, s, to->data, from->data, static_cast<size_t>(Numel(from)) * sizeof(T),
                   what);
}

// The sparse Grad of an update, checked against Param (present and of T).
template <typename T>
FleetStatus* PlanGrad(const FleetKernelContext* kc, RowsView* v) {
  const FleetTensor* p = Input(kc, "Param");
  if (FleetStatus* st = Require(kc, p, "Param")) return st;
  if (FleetStatus* st = RequireSized(kc, p, "Param", DtypeOf<T>(), Numel(p))) return st;
  const FleetTensor* g = Input(kc, "Grad");
  if (FleetStatus* st = Plan(plan::PlanRows(g, kc->op_type, "Grad", Dims(p), v))) return st;
  return RequireSized(kc, g, "Grad", DtypeOf<T>(), Numel(g));
}

// ---- lookup_table(_v2)_grad -----------------------------------------------------------------

// One entry per id: rows are the ids, slices the rows of Out@GRAD; ids of padding_idx and the
// padding rows of a sequence batch (past its last offset) are empty entries.
template <typename T>
__global__ void LookupRowsKernel(const T* dout, const void* ids, bool ids32, const int64_t* lod,
                                 int64_t lod_count, int64_t n, int64_t width, int64_t height,
                                 int64_t pad, int64_t* rows, T* values,
                                 unsigned long long* flag) {
  int64_t valid = n;
  if (lod != nullptr && lod_count > 0 && lod[lod_count - 1] < n) valid = lod[lod_count - 1];
  FLEET_CUDA_LOOP(i, n) {
    const int64_t id = i < valid ? LoadIndex(ids, ids32, i) : pad;
    bool empty = id == pad;
    if (!empty && (id < 0 || id >= height)) {
      NoteBad(flag, i);
      empty = true;
    }
    rows[i] = empty ? -1 : id;
  }
  FLEET_CUDA_LOOP(e, n * width) {
    const int64_t i = e / width;
    const int64_t id = i < valid ? LoadIndex(ids, ids32, i) : pad;
    const bool empty = id == pad || id < 0 || id >= height;
    values[e] = empty ? T(0) : dout[e];
  }
}

template <typename T>
FleetStatus* LookupGradRows(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* wt = Input(kc, "W");
  const FleetTensor* ids = Input(kc, "Ids");
  const FleetTensor* dout = Input(kc, "Out@GRAD");
  const FleetTensor* dw = Output(kc, "W@GRAD");
  if (FleetStatus* st = nn::RequireIndex(kc, ids, "Ids")) return st;
  if (FleetStatus* st = Require(kc, dout, "Out@GRAD")) return st;
  if (dout->ndim < 1) return InvalidArgument(OpName(kc) + ": Out@GRAD has no dimensions");
  // A table held by the parameter servers is not here: its shape is table_height rows of
  // Out@GRAD's width.
  std::vector<int64_t> table = {IntAttr(kc, "table_height", -1), dout->dims[dout->ndim - 1]};
  if (wt != nullptr) {
    if (wt->ndim != 2) {
      return InvalidArgument(OpName(kc) + ": W must have 2 dims [vocab, dim], got " +
                             std::to_string(wt->ndim));
    }
    table = Dims(wt);
  }
  RowsView v;
  if (FleetStatus* st = Plan(plan::PlanRows(dw, kc->op_type, "W@GRAD", table, &v))) return st;
  const int64_t n = Numel(ids);
  if (v.entries != n || Numel(dout) != n * v.width) {
    return InvalidArgument(OpName(kc) + ": W@GRAD has " + std::to_string(v.entries) +
                           " entries and Out@GRAD " + DimsText(dout) + " for " +
                           std::to_string(n) + " ids");
  }
  if (FleetStatus* st = RequireSized(kc, dout, "Out@GRAD", DtypeOf<T>(), Numel(dout))) return st;
  if (FleetStatus* st = RequireSized(kc, dw, "W@GRAD", DtypeOf<T>(), Numel(dw))) return st;
  const bool sequences =
      FLEET_HAS_FIELD(ids, FleetTensor, lod_count) && ids->lod_count > 0 && ids->lod != nullptr;
  const int64_t pad = IntAttr(kc, "padding_idx", -1);
  unsigned long long* flag = nullptr;
  if (FleetStatus* st = FlagOf(kc, &flag)) return st;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* st = ClearFlag(kc, s, flag)) return st;
    if (n > 0) {
      LookupRowsKernel<T><<<Blocks(n * std::max<int64_t>(v.width, 1)), kThreads, 0, s->native>>>(
          Data<const T>(dout), ids->data, ids->dtype == FLEET_DTYPE_INT32,
          sequences ? ids->lod : nullptr, sequences ? ids->lod_count : 0, n, v.width, v.height,
          pad, v.rows, Data<T>(dw), flag);
    }
    int64_t pos = -1, value = 0;
    if (FleetStatus* st = ReadFlag(kc, s, flag, ids, &pos, &value)) return st;
    if (pos < 0) return nullptr;
    return InvalidArgument(OpName(kc) + ": Ids[" + std::to_string(pos) + "] = " +
                           std::to_string(value) + " is outside the vocabulary [0, " +
                           std::to_string(v.height) + ")");
  });
}

// ---- sum ------------------------------------------------------------------------------------

template <typename T>
__global__ void AddKernel(const T* x, T* out, int64_t n) {
  FLEET_CUDA_LOOP(i, n) { out[i] += x[i]; }
}

// out[row] += the run's entries, one after another (the CPU adds each entry to the dense sum).
template <typename T>
__global__ void AccumulateRunsKernel(const T* values, const uint32_t* keys, const uint32_t* pos,
                                     int64_t n, int64_t width, int64_t height, T* out) {
  FLEET_CUDA_LOOP(e, n * width) {
    const int64_t s = e / width, j = e - s * width;
    if (!RunStart(keys, s, height)) continue;
    T* dst = out + static_cast<int64_t>(keys[s]) * width + j;
    *dst = AddRun(*dst, false, values, width, keys, pos, n, s, j);
  }
}

// A dense Out sorts each sparse input in turn, in scratch sized for the largest.
template <typename T>
FleetStatus* SumRowsPrepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch) {
  const FleetTensor* out = Output(kc, "Out");
  if (out == nullptr || IsSelectedRows(out) || out->ndim < 1) return nullptr;
  int64_t most = 0;
  for (size_t k = 0; k < InputCount(kc, "X"); ++k) {
    const FleetTensor* x = Input(kc, "X", k);
    if (IsSelectedRows(x) && x->ndim >= 1) most = std::max(most, x->dims[0]);
  }
  auto* st = new (std::nothrow) RowsState();
  if (st == nullptr) return Error(FLEET_CODE_INTERNAL, OpName(kc) + ": out of memory");
  if (FleetStatus* e = PlanSort(kc, most, out->dims[0], &st->sort)) {
    delete st;
    return e;
  }
  st->extra_offset = SortScratch(st->sort);
  *scratch = st->extra_offset;
  *state = st;
  return nullptr;
}

// Sparse inputs alone: their entries one after another (X[0] may be Out itself). With a dense
// input, a dense Out: the dense inputs added, then every entry added to its row.
template <typename T>
FleetStatus* SumRows(void*, const FleetKernelContext* kc, void* state) {
  const FleetTensor* out = Output(kc, "Out");
  const size_t n = InputCount(kc, "X");
  if (out == nullptr || n == 0) return InvalidArgument(OpName(kc) + ": missing X or Out");
  if (FleetStatus* st = RequireSized(kc, out, "Out", DtypeOf<T>(), Numel(out))) return st;
  if (IsSelectedRows(out)) {
    const int64_t width = out->dims[0] > 0 ? Numel(out) / out->dims[0] : 0;
    int64_t at = 0;
    for (size_t k = 0; k < n; ++k) {
      const FleetTensor* x = Input(kc, "X", k);
      if (!IsSelectedRows(x) || x->height != out->height || at + x->dims[0] > out->dims[0] ||
          x->dtype != out->dtype) {
        return InvalidArgument(OpName(kc) + ": X[" + std::to_string(k) +
                               "] is not a sparse gradient of Out's table");
      }
      at += x->dims[0];
    }
    if (at != out->dims[0]) {
      return InvalidArgument(OpName(kc) + ": Out has room for " + std::to_string(out->dims[0]) +
                             " entries, X holds " + std::to_string(at));
    }
    return Run(kc, [&](FleetStream* s) -> FleetStatus* {
      int64_t to = 0;
      for (size_t k = 0; k < n; ++k) {
        const FleetTensor* x = Input(kc, "X", k);
        const int64_t m = x->dims[0];
        if (FleetStatus* st = CopyApart(kc, s, Data<T>(out) + to * width, x->data,
                                        static_cast<size_t>(m * width) * sizeof(T), "X")) {
          return st;
        }
        if (FleetStatus* st = CopyApart(kc, s, out->rows + to, x->rows,
                                        static_cast<size_t>(m) * sizeof(int64_t), "X's rows")) {
          return st;
        }
        to += m;
      }
      return nullptr;
    });
  }
  const auto* st = static_cast<const RowsState*>(state);
  if (st == nullptr || out->ndim < 1 || st->sort.rows != out->dims[0]) return NotPrepared(kc);
  const int64_t total = Numel(out);
  std::vector<RowsView> views(n);
  for (size_t k = 0; k < n; ++k) {
    const FleetTensor* x = Input(kc, "X", k);
    if (IsSelectedRows(x)) {
      if (FleetStatus* e = Plan(plan::PlanRows(x, kc->op_type, "X", Dims(out), &views[k]))) {
        return e;
      }
      if (views[k].entries > st->sort.n) return NotPrepared(kc);
    } else if (Numel(x) != total) {
      return InvalidArgument(OpName(kc) + ": X[" + std::to_string(k) + "] does not match Out " +
                             DimsText(out));
    }
    if (FleetStatus* e = RequireSized(kc, x, "X", DtypeOf<T>(), Numel(x))) return e;
  }
  unsigned long long* flag = nullptr;
  if (FleetStatus* e = FlagOf(kc, &flag)) return e;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    bool first = true;
    for (size_t k = 0; k < n; ++k) {
      const FleetTensor* x = Input(kc, "X", k);
      if (IsSelectedRows(x)) continue;
      if (first) {
        if (FleetStatus* e = CopyTensorApart<T>(kc, s, x, out, "X")) return e;
      } else {
        AddKernel<T><<<Blocks(total), kThreads, 0, s->native>>>(Data<const T>(x), Data<T>(out),
                                                                 total);
      }
      first = false;
    }
    if (first && total > 0) {
      if (FleetStatus* e = CudaStatus(cudaMemsetAsync(out->data, 0,
                                                      static_cast<size_t>(total) * sizeof(T),
                                                      s->native),
                                      OpName(kc) + ": clearing Out")) {
        return e;
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const FleetTensor* x = Input(kc, "X", k);
      if (!IsSelectedRows(x) || views[k].entries == 0) continue;
      SortPlan sp = st->sort;
      sp.n = views[k].entries;  // fewer items fit the temporary storage sized for the most
      const SortBuffers b = BuffersOf(kc, st->sort);
      if (FleetStatus* e = ClearFlag(kc, s, flag)) return e;
      if (FleetStatus* e = SortRows(kc, s, sp, b, views[k].rows, flag)) return e;
      AccumulateRunsKernel<T><<<Blocks(sp.n * views[k].width), kThreads, 0, s->native>>>(
          Data<const T>(x), b.keys_out, b.pos_out, sp.n, views[k].width, sp.rows, Data<T>(out));
      if (FleetStatus* e = ReportBadRow(kc, s, flag, x, "X")) return e;
    }
    return nullptr;
  });
}

// ---- updates ----------------------------------------------------------------------------------

template <typename T>
FleetStatus* GradSortedPrepare(void*, const FleetKernelContext* kc, void** state,
                               size_t* scratch) {
  return PrepareSortOf(kc, "Grad", 0, state, scratch);
}

// The sort, then the whole of Param as a dense gradient.
template <typename T>
FleetStatus* DensePrepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch) {
  const FleetTensor* p = Input(kc, "Param");
  const size_t bytes = p != nullptr ? static_cast<size_t>(Numel(p)) * sizeof(T) : 0;
  return PrepareSortOf(kc, "Grad", bytes, state, scratch);
}

template <typename T>
FleetStatus* AdamPrepare(void* ctx, const FleetKernelContext* kc, void** state,
                         size_t* scratch) {
  if (BoolAttr(kc, "lazy_mode", false)) return GradSortedPrepare<T>(ctx, kc, state, scratch);
  return DensePrepare<T>(ctx, kc, state, scratch);
}

template <typename T>
__global__ void SgdRowsKernel(const T* grad, const uint32_t* keys, const uint32_t* pos,
                              int64_t n, int64_t width, int64_t height, Scalar lr, T* param) {
  const T rate = static_cast<T>(LoadScalar(lr));
  FLEET_CUDA_LOOP(e, n * width) {
    const int64_t s = e / width, j = e - s * width;
    if (!RunStart(keys, s, height)) continue;
    const T g = AddRun(T(0), true, grad, width, keys, pos, n, s, j);
    T* dst = param + static_cast<int64_t>(keys[s]) * width + j;
    *dst = *dst - rate * g;
  }
}

template <typename T>
FleetStatus* SgdRows(void*, const FleetKernelContext* kc, void* state) {
  RowsView v;
  if (FleetStatus* e = PlanGrad<T>(kc, &v)) return e;
  const FleetTensor* p = Input(kc, "Param");
  const FleetTensor* out = Output(kc, "ParamOut");
  const FleetTensor* lr = Input(kc, "LearningRate");
  if (FleetStatus* e = RequireSized(kc, out, "ParamOut", DtypeOf<T>(), Numel(p))) return e;
  if (FleetStatus* e = CheckScalarIn(kc, lr, "LearningRate")) return e;
  SortedCall c;
  if (FleetStatus* e = SortedCallOf(kc, state, "Grad", &c)) return e;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = CopyTensorApart<T>(kc, s, p, out, "Param")) return e;
    if (FleetStatus* e = EnqueueSort(kc, s, c)) return e;
    if (v.entries > 0) {
      SgdRowsKernel<T><<<Blocks(v.entries * v.width), kThreads, 0, s->native>>>(
          Data<const T>(c.x), c.b.keys_out, c.b.pos_out, v.entries, v.width, v.height,
          ScalarOf(lr), Data<T>(out));
    }
    return ReportBadRow(kc, s, c);
  });
}

template <typename T>
__global__ void AdagradRowsKernel(const T* grad, const uint32_t* keys, const uint32_t* pos,
                                  int64_t n, int64_t width, int64_t height, Scalar lr, T epsilon,
                                  T* param, T* moment) {
  const T rate = static_cast<T>(LoadScalar(lr));
  FLEET_CUDA_LOOP(e, n * width) {
    const int64_t s = e / width, j = e - s * width;
    if (!RunStart(keys, s, height)) continue;
    const T g = AddRun(T(0), true, grad, width, keys, pos, n, s, j);
    const int64_t i = static_cast<int64_t>(keys[s]) * width + j;
    const auto r = fleet::kernel::AdagradStep<T>(param[i], g, moment[i], rate, epsilon);
    param[i] = r.param;
    moment[i] = r.moment;
  }
}

template <typename T>
FleetStatus* AdagradRows(void*, const FleetKernelContext* kc, void* state) {
  RowsView v;
  if (FleetStatus* e = PlanGrad<T>(kc, &v)) return e;
  const FleetTensor* p = Input(kc, "Param");
  const FleetTensor* m = Input(kc, "Moment");
  const FleetTensor* po = Output(kc, "ParamOut");
  const FleetTensor* mo = Output(kc, "MomentOut");
  const FleetTensor* lr = Input(kc, "LearningRate");
  if (FleetStatus* e = RequireSized(kc, m, "Moment", DtypeOf<T>(), Numel(p))) return e;
  if (FleetStatus* e = RequireSized(kc, po, "ParamOut", DtypeOf<T>(), Numel(p))) return e;
  if (FleetStatus* e = RequireSized(kc, mo, "MomentOut", DtypeOf<T>(), Numel(p))) return e;
  if (FleetStatus* e = CheckScalarIn(kc, lr, "LearningRate")) return e;
  const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-6));
  SortedCall c;
  if (FleetStatus* e = SortedCallOf(kc, state, "Grad", &c)) return e;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = CopyTensorApart<T>(kc, s, p, po, "Param")) return e;
    if (FleetStatus* e = CopyTensorApart<T>(kc, s, m, mo, "Moment")) return e;
    if (FleetStatus* e = EnqueueSort(kc, s, c)) return e;
    if (v.entries > 0) {
      AdagradRowsKernel<T><<<Blocks(v.entries * v.width), kThreads, 0, s->native>>>(
          Data<const T>(c.x), c.b.keys_out, c.b.pos_out, v.entries, v.width, v.height,
          ScalarOf(lr), eps, Data<T>(po), Data<T>(mo));
    }
    return ReportBadRow(kc, s, c);
  });
}

// dense[row] = 0 + the run's entries in entry order, as the CPU's Densify adds them.
template <typename T>
__global__ void DensifyKernel(const T* values, const uint32_t* keys, const uint32_t* pos,
                              int64_t n, int64_t width, int64_t height, T* dense) {
  FLEET_CUDA_LOOP(e, n * width) {
    const int64_t s = e / width, j = e - s * width;
    if (!RunStart(keys, s, height)) continue;
    dense[static_cast<int64_t>(keys[s]) * width + j] =
        AddRun(T(0), false, values, width, keys, pos, n, s, j);
  }
}

// Enqueues the dense gradient the sparse Grad stands for into the kernel's own scratch.
template <typename T>
FleetStatus* EnqueueDensify(const FleetKernelContext* kc, FleetStream* s, const SortedCall& c,
                            const RowsView& v, T** dense) {
  *dense = reinterpret_cast<T*>(static_cast<char*>(kc->scratch) + c.st->extra_offset);
  const size_t bytes = static_cast<size_t>(v.height * v.width) * sizeof(T);
  if (bytes > 0) {
    if (FleetStatus* e = CudaStatus(cudaMemsetAsync(*dense, 0, bytes, s->native),
                                    OpName(kc) + ": clearing the dense gradient")) {
      return e;
    }
  }
  if (FleetStatus* e = EnqueueSort(kc, s, c)) return e;
  if (v.entries > 0) {
    DensifyKernel<T><<<Blocks(v.entries * v.width), kThreads, 0, s->native>>>(
        Data<const T>(c.x), c.b.keys_out, c.b.pos_out, v.entries, v.width, v.height, *dense);
  }
  return nullptr;
}

// Every row moves (Paddle's sparse momentum): the dense kernel's update of the gradient made
// dense.
template <typename T>
FleetStatus* MomentumRows(void*, const FleetKernelContext* kc, void* state) {
  RowsView v;
  if (FleetStatus* e = PlanGrad<T>(kc, &v)) return e;
  if (FleetStatus* e = CheckMomentum<T>(kc)) return e;
  SortedCall c;
  if (FleetStatus* e = SortedCallOf(kc, state, "Grad", &c)) return e;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    T* dense = nullptr;
    if (FleetStatus* e = EnqueueDensify<T>(kc, s, c, v, &dense)) return e;
    EnqueueMomentum<T>(kc, s, dense);
    return ReportBadRow(kc, s, c);
  });
}

// lazy_mode: the listed rows and their moments only, read from the inputs (the outputs hold
// their copies).
template <typename T>
__global__ void LazyAdamKernel(const T* grad, const uint32_t* keys, const uint32_t* pos,
                               int64_t n, int64_t width, int64_t height, const T* param,
                               const T* moment1, const T* moment2, T* param_out, T* moment1_out,
                               T* moment2_out, Scalar lr, Scalar beta1_pow, Scalar beta2_pow,
                               T beta1, T beta2, T epsilon) {
  const auto rates = fleet::kernel::AdamRatesOf(
      static_cast<T>(LoadScalar(lr)), epsilon, static_cast<T>(LoadScalar(beta1_pow)),
      static_cast<T>(LoadScalar(beta2_pow)));
  FLEET_CUDA_LOOP(e, n * width) {
    const int64_t s = e / width, j = e - s * width;
    if (!RunStart(keys, s, height)) continue;
    const T g = AddRun(T(0), true, grad, width, keys, pos, n, s, j);
    const int64_t i = static_cast<int64_t>(keys[s]) * width + j;
    const auto r = fleet::kernel::AdamStep(param[i], g, moment1[i], moment2[i], beta1, beta2,
                                           rates.lr_t, rates.eps_t);
    moment1_out[i] = r.moment1;
    moment2_out[i] = r.moment2;
    param_out[i] = r.param;
  }
}

// lazy_mode: the listed rows and their moments; otherwise every row (Paddle's sparse adam
// without lazy_mode), the dense kernel's update of the gradient made dense.
template <typename T>
FleetStatus* AdamRows(void*, const FleetKernelContext* kc, void* state) {
  RowsView v;
  if (FleetStatus* e = PlanGrad<T>(kc, &v)) return e;
  if (FleetStatus* e = CheckAdam<T, false>(kc)) return e;
  SortedCall c;
  if (FleetStatus* e = SortedCallOf(kc, state, "Grad", &c)) return e;
  const bool lazy = BoolAttr(kc, "lazy_mode", false);
  const T beta1 = static_cast<T>(FloatAttr(kc, "beta1", 0.9));
  const T beta2 = static_cast<T>(FloatAttr(kc, "beta2", 0.999));
  const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-8));
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (!lazy) {
      T* dense = nullptr;
      if (FleetStatus* e = EnqueueDensify<T>(kc, s, c, v, &dense)) return e;
      EnqueueAdam<T, false>(kc, s, dense);
      return ReportBadRow(kc, s, c);
    }
    // Rows the batch does not touch keep their values and moments.
    for (const char* slot : {"Param", "Moment1", "Moment2"}) {
      const std::string out_slot = std::string(slot) + "Out";
      if (FleetStatus* e =
              CopyTensorApart<T>(kc, s, Input(kc, slot), Output(kc, out_slot.c_str()), slot)) {
        return e;
      }
    }
    if (FleetStatus* e = EnqueueSort(kc, s, c)) return e;
    if (v.entries > 0) {
      LazyAdamKernel<T><<<Blocks(v.entries * v.width), kThreads, 0, s->native>>>(
          Data<const T>(c.x), c.b.keys_out, c.b.pos_out, v.entries, v.width, v.height,
          Data<const T>(Input(kc, "Param")), Data<const T>(Input(kc, "Moment1")),
          Data<const T>(Input(kc, "Moment2")), Data<T>(Output(kc, "ParamOut")),
          Data<T>(Output(kc, "Moment1Out")), Data<T>(Output(kc, "Moment2Out")),
          ScalarOf(Input(kc, "LearningRate")), ScalarOf(Input(kc, "Beta1Pow")),
          ScalarOf(Input(kc, "Beta2Pow")), beta1, beta2, eps);
    }
    // The CPU multiplies by beta as T widened to double; so does this.
    EnqueueBetaPows(kc, s, static_cast<double>(beta1), static_cast<double>(beta2));
    return ReportBadRow(kc, s, c);
  });
}

// ---- clipping and regularization ------------------------------------------------------------

// One block, a fixed order for a given size: each thread squares the merged values of its
// (run, column) elements in double, then a tree adds the threads' sums.
template <typename T>
__global__ void SquaredRowsKernel(const T* x, const uint32_t* keys, const uint32_t* pos,
                                  int64_t n, int64_t width, int64_t height, T* out) {
  __shared__ double part[kThreads];
  double acc = 0.0;
  for (int64_t e = threadIdx.x; e < n * width; e += blockDim.x) {
    const int64_t s = e / width, j = e - s * width;
    if (!RunStart(keys, s, height)) continue;
    const double v = static_cast<double>(AddRun(T(0), true, x, width, keys, pos, n, s, j));
    acc += v * v;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = static_cast<T>(part[0]);
}

template <typename T>
FleetStatus* XSortedPrepare(void*, const FleetKernelContext* kc, void** state, size_t* scratch) {
  return PrepareSortOf(kc, "X", 0, state, scratch);
}

// The squared norm of the dense tensor X stands for: entries of a row add up before squaring.
template <typename T>
FleetStatus* SquaredL2NormRows(void*, const FleetKernelContext* kc, void* state) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  if (FleetStatus* e = RequireSized(kc, out, "Out", DtypeOf<T>(), 1)) return e;
  if (!IsSelectedRows(x)) return InvalidArgument(OpName(kc) + ": X must be sparse");
  std::vector<int64_t> dense = Dims(x);
  dense[0] = x->height;
  RowsView v;
  if (FleetStatus* e = Plan(plan::PlanRows(x, kc->op_type, "X", dense, &v))) return e;
  if (FleetStatus* e = RequireSized(kc, x, "X", DtypeOf<T>(), Numel(x))) return e;
  SortedCall c;
  if (FleetStatus* e = SortedCallOf(kc, state, "X", &c)) return e;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = EnqueueSort(kc, s, c)) return e;
    SquaredRowsKernel<T><<<1, kThreads, 0, s->native>>>(Data<const T>(x), c.b.keys_out,
                                                        c.b.pos_out, v.entries, v.width,
                                                        v.height, Data<T>(out));
    return ReportBadRow(kc, s, c);
  });
}

// Out = factor * X, factor from `factor_at` (device) when given.
template <typename T>
__global__ void ScaleValuesKernel(const T* x, T* out, int64_t n, const T* factor_at, T factor) {
  const T f = factor_at != nullptr ? *factor_at : factor;
  FLEET_CUDA_LOOP(i, n) { out[i] = x[i] * f; }
}

// A sparse X scaled into a sparse Out of the same entries.
template <typename T>
FleetStatus* ScaleEntries(const FleetKernelContext* kc, const T* factor_at, T factor) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  if (!IsSelectedRows(x) || !IsSelectedRows(out) || Numel(out) != Numel(x) || x->ndim < 1 ||
      out->dims[0] != x->dims[0]) {
    return InvalidArgument(OpName(kc) + ": a sparse X needs a sparse Out of its entries");
  }
  if (FleetStatus* e = RequireSized(kc, x, "X", DtypeOf<T>(), Numel(x))) return e;
  if (FleetStatus* e = RequireSized(kc, out, "Out", DtypeOf<T>(), Numel(x))) return e;
  const int64_t n = Numel(x);
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = CopyApart(kc, s, out->rows, x->rows,
                                   static_cast<size_t>(x->dims[0]) * sizeof(int64_t),
                                   "X's rows")) {
      return e;
    }
    if (n > 0) {
      ScaleValuesKernel<T><<<Blocks(n), kThreads, 0, s->native>>>(Data<const T>(x),
                                                                  Data<T>(out), n, factor_at,
                                                                  factor);
    }
    return nullptr;
  });
}

// elementwise_mul by a one-element Y.
template <typename T>
FleetStatus* MulRows(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* y = Input(kc, "Y");
  if (FleetStatus* e = RequireSized(kc, y, "Y", DtypeOf<T>(), 1)) return e;
  return ScaleEntries<T>(kc, Data<const T>(y), T(1));
}

// scale (the schema refuses a bias on a sparse X).
template <typename T>
FleetStatus* ScaleRows(void*, const FleetKernelContext* kc, void*) {
  return ScaleEntries<T>(kc, nullptr, static_cast<T>(FloatAttr(kc, "scale", 1.0)));
}

// coeff * Param[r] (l2) or coeff * sign(Param[r]) (l1) added to the first entry of row r.
template <typename T>
__global__ void DecayRowsKernel(const T* param, const uint32_t* keys, const uint32_t* pos,
                                int64_t n, int64_t width, int64_t height, T coeff, bool l1,
                                T* out) {
  FLEET_CUDA_LOOP(e, n * width) {
    const int64_t s = e / width, j = e - s * width;
    if (!RunStart(keys, s, height)) continue;
    const T p = param[static_cast<int64_t>(keys[s]) * width + j];
    const T decay = l1 ? T((p > T(0)) - (p < T(0))) : p;
    out[static_cast<int64_t>(pos[s]) * width + j] += coeff * decay;
  }
}

template <typename T>
FleetStatus* SparseWeightDecay(void*, const FleetKernelContext* kc, void* state) {
  RowsView v;
  if (FleetStatus* e = PlanGrad<T>(kc, &v)) return e;
  const FleetTensor* g = Input(kc, "Grad");
  const FleetTensor* out = Output(kc, "Out");
  if (!IsSelectedRows(out) || out->dims[0] != g->dims[0]) {
    return InvalidArgument(OpName(kc) + ": Out must be sparse with Grad's entries");
  }
  if (FleetStatus* e = RequireSized(kc, out, "Out", DtypeOf<T>(), Numel(g))) return e;
  SortedCall c;
  if (FleetStatus* e = SortedCallOf(kc, state, "Grad", &c)) return e;
  const T coeff = static_cast<T>(FloatAttr(kc, "coeff", 0.0));
  const bool l1 = StringAttr(kc, "regularizer") == "l1";
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = CopyTensorApart<T>(kc, s, g, out, "Grad")) return e;
    if (FleetStatus* e = CopyApart(kc, s, out->rows, g->rows,
                                   static_cast<size_t>(g->dims[0]) * sizeof(int64_t),
                                   "Grad's rows")) {
      return e;
    }
    if (FleetStatus* e = EnqueueSort(kc, s, c)) return e;
    if (v.entries > 0) {
      DecayRowsKernel<T><<<Blocks(v.entries * v.width), kThreads, 0, s->native>>>(
          Data<const T>(Input(kc, "Param")), c.b.keys_out, c.b.pos_out, v.entries, v.width,
          v.height, coeff, l1, Data<T>(out));
    }
    return ReportBadRow(kc, s, c);
  });
}

// ---- split_selected_rows ----------------------------------------------------------------------

// One block fills Out[k]: X's entries of block [start, end) (rebased to the block) or, with
// by_hash, of shard k, in X's order, by a block-wide scan over chunks of kThreads entries;
// then the rest of Out[k]'s room becomes empty entries.
template <typename T>
__global__ void SplitKernel(const int64_t* rows, const T* x, int64_t n, int64_t width,
                            int64_t height, bool by_hash, int32_t shards, int32_t k,
                            int64_t start, int64_t end, int64_t* out_rows, T* out,
                            unsigned long long* flag) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage temp;
  int64_t base = 0;
  for (int64_t chunk = 0; chunk < n; chunk += kThreads) {
    const int64_t i = chunk + threadIdx.x;
    int64_t row = -1;
    int take = 0;
    if (i < n) {
      row = rows[i];
      if (row != -1 && (row < 0 || row >= height)) {
        if (k == 0) NoteBad(flag, i);
      } else if (row >= 0) {
        take = by_hash ? fleet_row_shard(row, shards) == k : (row >= start && row < end);
      }
    }
    int offset = 0, total = 0;
    Scan(temp).ExclusiveSum(take, offset, total);
    if (take) {
      const int64_t at = base + offset;
      out_rows[at] = by_hash ? row : row - start;
      for (int64_t j = 0; j < width; ++j) out[at * width + j] = x[i * width + j];
    }
    base += total;
    __syncthreads();  // before the scan's storage is used again
  }
  for (int64_t at = base + threadIdx.x; at < n; at += blockDim.x) {
    out_rows[at] = -1;
    for (int64_t j = 0; j < width; ++j) out[at * width + j] = T(0);
  }
}

// Each entry of X goes to the block holding its row, in X's order, so a server merges a row's
// entries in the order one process would; every Out's unused room is empty entries.
template <typename T>
FleetStatus* SplitRows(void*, const FleetKernelContext* kc, void*) {
  const FleetTensor* x = Input(kc, "X");
  const size_t n = OutputCount(kc, "Out");
  if (!IsSelectedRows(x)) return InvalidArgument(OpName(kc) + ": X must be sparse");
  std::vector<int64_t> dense = Dims(x);
  dense[0] = x->height;
  RowsView v;
  if (FleetStatus* e = Plan(plan::PlanRows(x, kc->op_type, "X", dense, &v))) return e;
  if (FleetStatus* e = RequireSized(kc, x, "X", DtypeOf<T>(), Numel(x))) return e;
  if (n > static_cast<size_t>(INT32_MAX)) return InvalidArgument(OpName(kc) + ": too many Out");
  const bool by_hash = BoolAttr(kc, "by_hash", false);
  int64_t sections = 0;
  for (size_t k = 0; k < n; ++k) {
    const FleetTensor* out = Output(kc, "Out", k);
    if (!IsSelectedRows(out) || out->dims[0] != x->dims[0] || Numel(out) != Numel(x) ||
        out->dtype != x->dtype) {
      return InvalidArgument(OpName(kc) + ": Out[" + std::to_string(k) +
                             "] must be sparse with X's room for entries");
    }
    sections += out->height;
  }
  if (!by_hash && sections != v.height) {
    return InvalidArgument(OpName(kc) + ": the blocks hold " + std::to_string(sections) +
                           " rows but X has " + std::to_string(v.height));
  }
  unsigned long long* flag = nullptr;
  if (FleetStatus* e = FlagOf(kc, &flag)) return e;
  return Run(kc, [&](FleetStream* s) -> FleetStatus* {
    if (FleetStatus* e = ClearFlag(kc, s, flag)) return e;
    int64_t start = 0;
    for (size_t k = 0; k < n; ++k) {
      const FleetTensor* out = Output(kc, "Out", k);
      const int64_t end = start + out->height;
      SplitKernel<T><<<1, kThreads, 0, s->native>>>(
          v.rows, Data<const T>(x), v.entries, v.width, v.height, by_hash,
          static_cast<int32_t>(n), static_cast<int32_t>(k), start, end, out->rows,
          Data<T>(out), flag);
      start = end;
    }
    return ReportBadRow(kc, s, flag, x, "X");
  });
}

template <typename T>
void AddFor(KernelList& list, int32_t dtype) {
  constexpr uint32_t kRows = FLEET_KERNEL_FLAG_SELECTED_ROWS;
  // The ids' offsets tell the padding rows of a sequence batch from real ids.
  constexpr uint32_t kRowsSeq = FLEET_KERNEL_FLAG_SELECTED_ROWS | FLEET_KERNEL_FLAG_SEQUENCES;
  const auto release = nn::DeleteState<RowsState>;
  for (const char* op : {"lookup_table_v2_grad", "lookup_table_grad"}) {
    Add(list, op, dtype, LookupGradRows<T>, nn::PrepareFlag, nullptr, SparseOnly, kRowsSeq);
  }
  Add(list, "sum", dtype, SumRows<T>, SumRowsPrepare<T>, release, SparseOnly, kRows);
  Add(list, "sgd", dtype, SgdRows<T>, GradSortedPrepare<T>, release, SparseOnly, kRows);
  Add(list, "adagrad", dtype, AdagradRows<T>, GradSortedPrepare<T>, release, SparseOnly, kRows);
  Add(list, "momentum", dtype, MomentumRows<T>, DensePrepare<T>, release, SparseOnly, kRows);
  Add(list, "adam", dtype, AdamRows<T>, AdamPrepare<T>, release, SparseOnly, kRows);
  Add(list, "squared_l2_norm", dtype, SquaredL2NormRows<T>, XSortedPrepare<T>, release,
      SparseOnly, kRows);
  Add(list, "elementwise_mul", dtype, MulRows<T>, nullptr, nullptr, SparseOnly, kRows);
  Add(list, "sparse_weight_decay", dtype, SparseWeightDecay<T>, GradSortedPrepare<T>, release,
      nullptr, kRows);
  Add(list, "scale", dtype, ScaleRows<T>, nullptr, nullptr, SparseOnly, kRows);
  Add(list, "split_selected_rows", dtype, SplitRows<T>, nn::PrepareFlag, nullptr, nullptr,
      kRows);
}

}  // namespace

void AddSparseKernels(KernelList& list) {
  AddFor<float>(list, FLEET_DTYPE_FLOAT32);
  AddFor<double>(list, FLEET_DTYPE_FLOAT64);
}

}  // namespace fleet_cuda
