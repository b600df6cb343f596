// CPU kernels of the ops that take or make SelectedRows tensors (sparse gradients, ABI 1.6):
// lookup_table(_v2)_grad with is_sparse, sum of sparse gradients, the sparse updates of sgd,
// momentum, adam and adagrad, squared_l2_norm and elementwise_mul of a sparse gradient
// (clipping by global norm), sparse_weight_decay, and scale and split_selected_rows (a
// parameter server's merge, and a trainer cutting a gradient at the servers' row blocks).
//
// Each is registered after the dense kernel of its op and refuses dense calls in `supports`,
// so the host picks it only when a tensor is sparse. Updates merge a gradient's entries per row
// in entry order (plugins/common/selected_rows_plan.h), the order the dense gradient sums them
// in, in scratch asked for at prepare: a launch allocates nothing.
//
// Which rows an update moves follows Paddle: sgd, adagrad and lazy adam move the listed rows
// only; momentum and adam without lazy_mode move every row, the others with a zero gradient
// (so they equal the dense update).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel_util.h"
#include "kernels/nn_kernels.h"
#include "kernels/optimizer_apply.h"
#include "optimizer_formulas.h"
#include "selected_rows_plan.h"

namespace fleet_cpu {
namespace {

using fleet::kernel::IsSelectedRows;
using fleet::kernel::RowsView;

FleetStatus* Plan(const fleet::kernel::PlanStatus& s) { return FromPlan(s); }

FleetStatus* SparseOnly(void*, const FleetKernelContext* kc) {
  return Plan(fleet::kernel::SparseCallsOnly(kc));
}

// The sparse Grad of an update, checked against Param.
FleetStatus* PlanGrad(const FleetKernelContext* kc, const FleetTensor* p, RowsView* v) {
  if (p == nullptr) return Missing(kc, "Param");
  return Plan(fleet::kernel::PlanRows(Input(kc, "Grad"), kc->op_type, "Grad", Dims(p), v));
}

// Entry order in the scratch, then room for one merged row of T.
template <typename T>
struct SortedScratch {
  int64_t* order;
  T* row;
};

template <typename T>
SortedScratch<T> Sorted(const FleetKernelContext* kc, int64_t entries) {
  auto* base = static_cast<uint8_t*>(kc->scratch);
  return {reinterpret_cast<int64_t*>(base),
          reinterpret_cast<T*>(base + fleet::kernel::SortScratchBytes(entries, 0))};
}

// Calls f(row, b, e) for each run order[b..e) of entries naming one row, rows ascending.
template <typename F>
void ForEachRow(const RowsView& v, const int64_t* order, int64_t count, F&& f) {
  for (int64_t b = 0; b < count;) {
    int64_t e = b + 1;
    while (e < count && v.rows[order[e]] == v.rows[order[b]]) ++e;
    f(v.rows[order[b]], b, e);
    b = e;
  }
}

// The sum of entries order[b..e) of `values`, in entry order.
template <typename T>
void MergeRow(const T* values, int64_t width, const int64_t* order, int64_t b, int64_t e,
              T* out) {
  std::memcpy(out, values + order[b] * width, static_cast<size_t>(width) * sizeof(T));
  for (int64_t k = b + 1; k < e; ++k) {
    const T* src = values + order[k] * width;
    for (int64_t j = 0; j < width; ++j) out[j] += src[j];
  }
}

// The dense tensor `v` stands for, into `dense` (height * width), entries added in entry order.
template <typename T>
FleetStatus* Densify(const FleetKernelContext* kc, const char* slot, const RowsView& v,
                     const T* values, T* dense) {
  if (FleetStatus* s = Plan(fleet::kernel::CheckEntries(v, kc->op_type, slot))) return s;
  std::fill(dense, dense + v.height * v.width, T(0));
  for (int64_t i = 0; i < v.entries; ++i) {
    if (v.rows[i] < 0) continue;
    T* dst = dense + v.rows[i] * v.width;
    const T* src = values + i * v.width;
    for (int64_t j = 0; j < v.width; ++j) dst[j] += src[j];
  }
  return nullptr;
}

template <typename T>
void CopyIfApart(const FleetTensor* from, const FleetTensor* to) {
  if (from->data != to->data) {
    std::memcpy(to->data, from->data, static_cast<size_t>(Numel(from)) * sizeof(T));
  }
}

// ---- prepare: scratch sizes ---------------------------------------------------------------

// Sorted entries of `slot` plus one merged row.
template <typename T>
FleetStatus* PrepareSorted(const FleetKernelContext* kc, const char* slot, size_t* scratch) {
  const FleetTensor* g = Input(kc, slot);
  if (!IsSelectedRows(g)) return nullptr;
  const int64_t width = g->dims[0] > 0 ? Numel(g) / g->dims[0] : 0;
  *scratch = fleet::kernel::SortScratchBytes(g->dims[0], static_cast<size_t>(width) * sizeof(T));
  return nullptr;
}

// The dense gradient: the whole of Param.
template <typename T>
FleetStatus* PrepareDense(const FleetKernelContext* kc, size_t* scratch) {
  const FleetTensor* p = Input(kc, "Param");
  *scratch = p != nullptr ? static_cast<size_t>(Numel(p)) * sizeof(T) : 0;
  return nullptr;
}

template <typename T>
FleetStatus* GradSortedPrepare(void*, const FleetKernelContext* kc, void**, size_t* scratch) {
  return PrepareSorted<T>(kc, "Grad", scratch);
}

template <typename T>
FleetStatus* XSortedPrepare(void*, const FleetKernelContext* kc, void**, size_t* scratch) {
  return PrepareSorted<T>(kc, "X", scratch);
}

template <typename T>
FleetStatus* DensePrepare(void*, const FleetKernelContext* kc, void**, size_t* scratch) {
  return PrepareDense<T>(kc, scratch);
}

template <typename T>
FleetStatus* AdamPrepare(void*, const FleetKernelContext* kc, void**, size_t* scratch) {
  if (BoolAttr(kc, "lazy_mode", false)) return PrepareSorted<T>(kc, "Grad", scratch);
  return PrepareDense<T>(kc, scratch);
}

// ---- lookup_table(_v2)_grad ----------------------------------------------------------------

// One entry per id: rows are the ids, slices the rows of Out@GRAD. Ids of padding_idx, and the
// padding rows of a sequence batch past its last offset, are empty entries (-1), so they touch
// no row.
template <typename T>
FleetStatus* LookupGradRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* wt = Input(kc, "W");
    const FleetTensor* ids = Input(kc, "Ids");
    const FleetTensor* dout = Input(kc, "Out@GRAD");
    const FleetTensor* dw = Output(kc, "W@GRAD");
    if (ids == nullptr || dout == nullptr || dout->ndim < 1) return Missing(kc, "Ids or Out@GRAD");
    // A table held by the parameter servers is not here: its shape is table_height rows of
    // Out@GRAD's width.
    std::vector<int64_t> table = {IntAttr(kc, "table_height", -1), dout->dims[dout->ndim - 1]};
    if (wt != nullptr) {
      if (FleetStatus* st = ExpectRank(kc, wt, "W", 2)) return st;
      table = Dims(wt);
    }
    RowsView v;
    if (FleetStatus* s = Plan(fleet::kernel::PlanRows(dw, kc->op_type, "W@GRAD", table, &v))) {
      return s;
    }
    const int64_t n = Numel(ids);
    if (v.entries != n || Numel(dout) != n * v.width) {
      return InvalidArgument(OpName(kc) + ": W@GRAD has " + std::to_string(v.entries) +
                             " entries and Out@GRAD " + DimsText(dout) + " for " +
                             std::to_string(n) + " ids");
    }
    int64_t valid = n;
    if (FLEET_HAS_FIELD(ids, FleetTensor, lod_count) && ids->lod_count > 0 && ids->lod != nullptr) {
      valid = std::min(n, ids->lod[ids->lod_count - 1]);
    }
    const int64_t pad = IntAttr(kc, "padding_idx", -1);
    const T* src = Data<const T>(dout);
    T* dst = Data<T>(dw);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = i < valid ? IndexAt(ids, i) : pad;
      if (id != pad && (id < 0 || id >= v.height)) {
        return InvalidArgument(OpName(kc) + ": Ids[" + std::to_string(i) + "] = " +
                               std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(v.height) + ")");
      }
      const bool empty = id == pad;
      v.rows[i] = empty ? -1 : id;
      T* out = dst + i * v.width;
      if (empty) std::fill(out, out + v.width, T(0));
      else std::memcpy(out, src + i * v.width, static_cast<size_t>(v.width) * sizeof(T));
    }
    return nullptr;
  });
}

// ---- sum -----------------------------------------------------------------------------------

// Sparse inputs alone: their entries one after another. With a dense input, a dense Out: the
// dense inputs added, then every entry added to its row.
template <typename T>
FleetStatus* SumRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* out = Output(kc, "Out");
    const size_t n = InputCount(kc, "X");
    if (out == nullptr || n == 0) return Missing(kc, "X or Out");
    if (IsSelectedRows(out)) {
      int64_t at = 0;
      const int64_t width = out->dims[0] > 0 ? Numel(out) / out->dims[0] : 0;
      for (size_t k = 0; k < n; ++k) {
        const FleetTensor* x = Input(kc, "X", k);
        if (!IsSelectedRows(x) || x->height != out->height || at + x->dims[0] > out->dims[0]) {
          return InvalidArgument(OpName(kc) + ": X[" + std::to_string(k) +
                                 "] is not a sparse gradient of Out's table");
        }
        const int64_t m = x->dims[0];
        if (x->data != Data<T>(out) + at * width) {  // X[0] may be Out itself
          std::memmove(Data<T>(out) + at * width, x->data,
                       static_cast<size_t>(m * width) * sizeof(T));
          std::memmove(out->rows + at, x->rows, static_cast<size_t>(m) * sizeof(int64_t));
        }
        at += m;
      }
      if (at != out->dims[0]) return InvalidArgument(OpName(kc) + ": Out has room for " +
                                                     std::to_string(out->dims[0]) +
                                                     " entries, X holds " + std::to_string(at));
      return nullptr;
    }
    const int64_t total = Numel(out);
    T* o = Data<T>(out);
    bool first = true;
    for (size_t k = 0; k < n; ++k) {
      const FleetTensor* x = Input(kc, "X", k);
      if (IsSelectedRows(x)) continue;
      if (Numel(x) != total) return InvalidArgument(OpName(kc) + ": X[" + std::to_string(k) +
                                                    "] does not match Out " + DimsText(out));
      const T* xs = Data<const T>(x);
      for (int64_t i = 0; i < total; ++i) o[i] = first ? xs[i] : o[i] + xs[i];
      first = false;
    }
    if (first) std::fill(o, o + total, T(0));
    for (size_t k = 0; k < n; ++k) {
      const FleetTensor* x = Input(kc, "X", k);
      if (!IsSelectedRows(x)) continue;
      RowsView v;
      if (FleetStatus* s = Plan(fleet::kernel::PlanRows(x, kc->op_type, "X", Dims(out), &v))) {
        return s;
      }
      if (FleetStatus* s = Plan(fleet::kernel::CheckEntries(v, kc->op_type, "X"))) return s;
      const T* xs = Data<const T>(x);
      for (int64_t i = 0; i < v.entries; ++i) {
        if (v.rows[i] < 0) continue;
        T* dst = o + v.rows[i] * v.width;
        for (int64_t j = 0; j < v.width; ++j) dst[j] += xs[i * v.width + j];
      }
    }
    return nullptr;
  });
}

// ---- updates -------------------------------------------------------------------------------

template <typename T>
FleetStatus* SgdRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    const FleetTensor* out = Output(kc, "ParamOut");
    RowsView v;
    if (FleetStatus* s = PlanGrad(kc, p, &v)) return s;
    if (out == nullptr || Numel(out) != Numel(p)) return Missing(kc, "ParamOut");
    double lr_d = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr_d)) return Missing(kc, "LearningRate");
    const T lr = static_cast<T>(lr_d);
    SortedScratch<T> sc = Sorted<T>(kc, v.entries);
    int64_t count = 0;
    if (FleetStatus* s =
            Plan(fleet::kernel::SortEntries(v, kc->op_type, "Grad", sc.order, &count))) {
      return s;
    }
    CopyIfApart<T>(p, out);
    const T* g = Data<const T>(Input(kc, "Grad"));
    T* po = Data<T>(out);
    ForEachRow(v, sc.order, count, [&](int64_t row, int64_t b, int64_t e) {
      MergeRow(g, v.width, sc.order, b, e, sc.row);
      T* dst = po + row * v.width;
      for (int64_t j = 0; j < v.width; ++j) dst[j] = dst[j] - lr * sc.row[j];
    });
    return nullptr;
  });
}

template <typename T>
FleetStatus* AdagradRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    const FleetTensor* m = Input(kc, "Moment");
    const FleetTensor* po_t = Output(kc, "ParamOut");
    const FleetTensor* mo_t = Output(kc, "MomentOut");
    RowsView v;
    if (FleetStatus* s = PlanGrad(kc, p, &v)) return s;
    for (const FleetTensor* t : {m, po_t, mo_t}) {
      if (t == nullptr || Numel(t) != Numel(p)) return Missing(kc, "Moment, ParamOut or MomentOut");
    }
    double lr_d = 0;
    if (!ReadScalar(Input(kc, "LearningRate"), &lr_d)) return Missing(kc, "LearningRate");
    const T lr = static_cast<T>(lr_d);
    const T eps = static_cast<T>(FloatAttr(kc, "epsilon", 1e-6));
    SortedScratch<T> sc = Sorted<T>(kc, v.entries);
    int64_t count = 0;
    if (FleetStatus* s =
            Plan(fleet::kernel::SortEntries(v, kc->op_type, "Grad", sc.order, &count))) {
      return s;
    }
    CopyIfApart<T>(p, po_t);
    CopyIfApart<T>(m, mo_t);
    const T* g = Data<const T>(Input(kc, "Grad"));
    T* po = Data<T>(po_t);
    T* mo = Data<T>(mo_t);
    ForEachRow(v, sc.order, count, [&](int64_t row, int64_t b, int64_t e) {
      MergeRow(g, v.width, sc.order, b, e, sc.row);
      for (int64_t j = 0; j < v.width; ++j) {
        const int64_t i = row * v.width + j;
        const auto r = fleet::kernel::AdagradStep<T>(po[i], sc.row[j], mo[i], lr, eps);
        po[i] = r.param;
        mo[i] = r.moment;
      }
    });
    return nullptr;
  });
}

// Every row moves (Paddle's sparse momentum): the dense kernel's update, of the gradient made
// dense in the scratch.
template <typename T>
FleetStatus* MomentumRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    RowsView v;
    if (FleetStatus* s = PlanGrad(kc, Input(kc, "Param"), &v)) return s;
    T* grad = static_cast<T*>(kc->scratch);
    if (FleetStatus* s = Densify(kc, "Grad", v, Data<const T>(Input(kc, "Grad")), grad)) return s;
    return ApplyMomentum<T>(kc, grad);
  });
}

// lazy_mode: the listed rows and their moments only. Otherwise every row (Paddle's sparse adam
// without lazy_mode), from the gradient made dense in the scratch. Either way the dense
// kernel's update (optimizer_apply.h).
template <typename T>
FleetStatus* AdamRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    RowsView v;
    if (FleetStatus* s = PlanGrad(kc, p, &v)) return s;
    const T* g = Data<const T>(Input(kc, "Grad"));
    if (!BoolAttr(kc, "lazy_mode", false)) {
      T* grad = static_cast<T*>(kc->scratch);
      if (FleetStatus* s = Densify(kc, "Grad", v, g, grad)) return s;
      const int64_t n = Numel(p);
      return ApplyAdam<T, false>(kc, [&](auto&& step) {
        for (int64_t i = 0; i < n; ++i) step(i, grad[i]);
      });
    }
    SortedScratch<T> sc = Sorted<T>(kc, v.entries);
    int64_t count = 0;
    if (FleetStatus* s =
            Plan(fleet::kernel::SortEntries(v, kc->op_type, "Grad", sc.order, &count))) {
      return s;
    }
    return ApplyAdam<T, false>(kc, [&](auto&& step) {
      // Rows the batch does not touch keep their values and moments.
      for (const char* slot : {"Param", "Moment1", "Moment2"}) {
        CopyIfApart<T>(Input(kc, slot), Output(kc, (std::string(slot) + "Out").c_str()));
      }
      ForEachRow(v, sc.order, count, [&](int64_t row, int64_t b, int64_t e) {
        MergeRow(g, v.width, sc.order, b, e, sc.row);
        for (int64_t j = 0; j < v.width; ++j) step(row * v.width + j, sc.row[j]);
      });
    });
  });
}

// ---- clipping and regularization -------------------------------------------------------------

// The squared norm of the dense tensor X stands for: entries of a row add up before squaring.
template <typename T>
FleetStatus* SquaredL2NormRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    const FleetTensor* out = Output(kc, "Out");
    if (out == nullptr || Numel(out) != 1) return Missing(kc, "Out (one element)");
    if (!IsSelectedRows(x)) return Missing(kc, "a sparse X");
    std::vector<int64_t> dense = Dims(x);
    dense[0] = x->height;
    RowsView v;
    if (FleetStatus* s = Plan(fleet::kernel::PlanRows(x, kc->op_type, "X", dense, &v))) return s;
    SortedScratch<T> sc = Sorted<T>(kc, v.entries);
    int64_t count = 0;
    if (FleetStatus* s = Plan(fleet::kernel::SortEntries(v, kc->op_type, "X", sc.order, &count))) {
      return s;
    }
    const T* xs = Data<const T>(x);
    double acc = 0;
    ForEachRow(v, sc.order, count, [&](int64_t, int64_t b, int64_t e) {
      MergeRow(xs, v.width, sc.order, b, e, sc.row);
      for (int64_t j = 0; j < v.width; ++j) acc += static_cast<double>(sc.row[j]) * sc.row[j];
    });
    Data<T>(out)[0] = static_cast<T>(acc);
    return nullptr;
  });
}

// Out = factor * X, X sparse: the same entries, each slice scaled.
template <typename T>
FleetStatus* ScaleEntries(const FleetKernelContext* kc, T factor) {
  const FleetTensor* x = Input(kc, "X");
  const FleetTensor* out = Output(kc, "Out");
  if (!IsSelectedRows(x) || !IsSelectedRows(out) || Numel(out) != Numel(x) ||
      out->dims[0] != x->dims[0]) {
    return InvalidArgument(OpName(kc) + ": a sparse X needs a sparse Out of its entries");
  }
  if (out->rows != x->rows) {
    std::memcpy(out->rows, x->rows, static_cast<size_t>(x->dims[0]) * sizeof(int64_t));
  }
  const T* xs = Data<const T>(x);
  T* os = Data<T>(out);
  const int64_t n = Numel(x);
  for (int64_t i = 0; i < n; ++i) os[i] = xs[i] * factor;
  return nullptr;
}

// elementwise_mul by a one-element Y.
template <typename T>
FleetStatus* MulRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* y = Input(kc, "Y");
    if (y == nullptr || Numel(y) != 1) return Missing(kc, "a one-element Y");
    return ScaleEntries<T>(kc, Data<const T>(y)[0]);
  });
}

// scale (the schema refuses a bias on a sparse X).
template <typename T>
FleetStatus* ScaleRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    return ScaleEntries<T>(kc, static_cast<T>(FloatAttr(kc, "scale", 1.0)));
  });
}

// coeff * Param[r] (l2) or coeff * sign(Param[r]) (l1) added to the first entry of each row r.
template <typename T>
FleetStatus* SparseWeightDecay(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* p = Input(kc, "Param");
    const FleetTensor* g = Input(kc, "Grad");
    const FleetTensor* out = Output(kc, "Out");
    RowsView v;
    if (FleetStatus* s = PlanGrad(kc, p, &v)) return s;
    if (!IsSelectedRows(out) || out->dims[0] != g->dims[0]) {
      return InvalidArgument(OpName(kc) + ": Out must be sparse with Grad's entries");
    }
    if (out->data != g->data) {
      std::memcpy(out->data, g->data, static_cast<size_t>(Numel(g)) * sizeof(T));
      std::memcpy(out->rows, g->rows, static_cast<size_t>(g->dims[0]) * sizeof(int64_t));
    }
    SortedScratch<T> sc = Sorted<T>(kc, v.entries);
    int64_t count = 0;
    if (FleetStatus* s =
            Plan(fleet::kernel::SortEntries(v, kc->op_type, "Grad", sc.order, &count))) {
      return s;
    }
    const T coeff = static_cast<T>(FloatAttr(kc, "coeff", 0.0));
    const bool l1 = StringAttr(kc, "regularizer") == "l1";
    const T* ps = Data<const T>(p);
    T* os = Data<T>(out);
    ForEachRow(v, sc.order, count, [&](int64_t row, int64_t b, int64_t) {
      T* dst = os + sc.order[b] * v.width;
      const T* src = ps + row * v.width;
      for (int64_t j = 0; j < v.width; ++j) {
        const T decay = l1 ? T((src[j] > 0) - (src[j] < 0)) : src[j];
        dst[j] += coeff * decay;
      }
    });
    return nullptr;
  });
}

// Each entry of X goes to the block holding its row, in X's order, so a server merges a row's
// entries in the order one process would; every Out's unused room is empty entries.
template <typename T>
FleetStatus* SplitRows(void*, const FleetKernelContext* kc, void*) {
  return Guard(kc, [&]() -> FleetStatus* {
    const FleetTensor* x = Input(kc, "X");
    const size_t n = OutputCount(kc, "Out");
    RowsView v;
    if (!IsSelectedRows(x)) return InvalidArgument(OpName(kc) + ": X must be sparse");
    std::vector<int64_t> dense = Dims(x);
    dense[0] = x->height;
    if (FleetStatus* s = Plan(fleet::kernel::PlanRows(x, kc->op_type, "X", dense, &v))) return s;
    if (FleetStatus* s = Plan(fleet::kernel::CheckEntries(v, kc->op_type, "X"))) return s;
    const T* xs = Data<const T>(x);
    if (BoolAttr(kc, "by_hash", false)) {
      // A growable table's gradient: rows are ids, each entry goes whole to its shard.
      std::vector<int64_t> at(n, 0);
      for (size_t k = 0; k < n; ++k) {
        const FleetTensor* out = Output(kc, "Out", k);
        if (!IsSelectedRows(out) || out->dims[0] != x->dims[0] || Numel(out) != Numel(x)) {
          return InvalidArgument(OpName(kc) + ": Out[" + std::to_string(k) +
                                 "] must be sparse with X's room for entries");
        }
      }
      for (int64_t i = 0; i < v.entries; ++i) {
        const int64_t row = v.rows[i];
        if (row < 0) continue;
        const auto k = static_cast<size_t>(fleet_row_shard(row, static_cast<int32_t>(n)));
        const FleetTensor* out = Output(kc, "Out", k);
        std::memcpy(Data<T>(out) + at[k] * v.width, xs + i * v.width,
                    static_cast<size_t>(v.width) * sizeof(T));
        out->rows[at[k]++] = row;
      }
      for (size_t k = 0; k < n; ++k) {
        const FleetTensor* out = Output(kc, "Out", k);
        std::fill(out->rows + at[k], out->rows + out->dims[0], int64_t{-1});
        std::fill(Data<T>(out) + at[k] * v.width, Data<T>(out) + out->dims[0] * v.width, T(0));
      }
      return nullptr;
    }
    int64_t start = 0;
    for (size_t k = 0; k < n; ++k) {
      const FleetTensor* out = Output(kc, "Out", k);
      if (!IsSelectedRows(out) || out->dims[0] != x->dims[0] || Numel(out) != Numel(x)) {
        return InvalidArgument(OpName(kc) + ": Out[" + std::to_string(k) +
                               "] must be sparse with X's room for entries");
      }
      const int64_t end = start + out->height;
      T* os = Data<T>(out);
      int64_t at = 0;
      for (int64_t i = 0; i < v.entries; ++i) {
        const int64_t row = v.rows[i];
        if (row < start || row >= end) continue;
        std::memcpy(os + at * v.width, xs + i * v.width, static_cast<size_t>(v.width) * sizeof(T));
        out->rows[at++] = row - start;
      }
      std::fill(out->rows + at, out->rows + out->dims[0], int64_t{-1});
      std::fill(os + at * v.width, os + out->dims[0] * v.width, T(0));
      start = end;
    }
    if (start != v.height) {
      return InvalidArgument(OpName(kc) + ": the blocks hold " + std::to_string(start) +
                             " rows but X has " + std::to_string(v.height));
    }
    return nullptr;
  });
}

}  // namespace

void AddSparseKernels(KernelList& list) {
  constexpr uint32_t kRows = FLEET_KERNEL_FLAG_SELECTED_ROWS;
  // The ids' offsets tell the padding rows of a sequence batch from real ids.
  constexpr uint32_t kRowsSeq = FLEET_KERNEL_FLAG_SELECTED_ROWS | FLEET_KERNEL_FLAG_SEQUENCES;
  for (const char* op : {"lookup_table_v2_grad", "lookup_table_grad"}) {
    Add(list, op, FLEET_DTYPE_FLOAT32, LookupGradRows<float>, nullptr, nullptr, SparseOnly,
        kRowsSeq);
    Add(list, op, FLEET_DTYPE_FLOAT64, LookupGradRows<double>, nullptr, nullptr, SparseOnly,
        kRowsSeq);
  }
  Add(list, "sum", FLEET_DTYPE_FLOAT32, SumRows<float>, nullptr, nullptr, SparseOnly, kRows);
  Add(list, "sum", FLEET_DTYPE_FLOAT64, SumRows<double>, nullptr, nullptr, SparseOnly, kRows);
  Add(list, "sgd", FLEET_DTYPE_FLOAT32, SgdRows<float>, GradSortedPrepare<float>, nullptr,
      SparseOnly, kRows);
  Add(list, "sgd", FLEET_DTYPE_FLOAT64, SgdRows<double>, GradSortedPrepare<double>, nullptr,
      SparseOnly, kRows);
  Add(list, "adagrad", FLEET_DTYPE_FLOAT32, AdagradRows<float>, GradSortedPrepare<float>,
      nullptr, SparseOnly, kRows);
  Add(list, "adagrad", FLEET_DTYPE_FLOAT64, AdagradRows<double>, GradSortedPrepare<double>,
      nullptr, SparseOnly, kRows);
  Add(list, "momentum", FLEET_DTYPE_FLOAT32, MomentumRows<float>, DensePrepare<float>, nullptr,
      SparseOnly, kRows);
  Add(list, "momentum", FLEET_DTYPE_FLOAT64, MomentumRows<double>, DensePrepare<double>, nullptr,
      SparseOnly, kRows);
  Add(list, "adam", FLEET_DTYPE_FLOAT32, AdamRows<float>, AdamPrepare<float>, nullptr,
      SparseOnly, kRows);
  Add(list, "adam", FLEET_DTYPE_FLOAT64, AdamRows<double>, AdamPrepare<double>, nullptr,
      SparseOnly, kRows);
  Add(list, "squared_l2_norm", FLEET_DTYPE_FLOAT32, SquaredL2NormRows<float>,
      XSortedPrepare<float>, nullptr, SparseOnly, kRows);
  Add(list, "squared_l2_norm", FLEET_DTYPE_FLOAT64, SquaredL2NormRows<double>,
      XSortedPrepare<double>, nullptr, SparseOnly, kRows);
  Add(list, "elementwise_mul", FLEET_DTYPE_FLOAT32, MulRows<float>, nullptr, nullptr,
      SparseOnly, kRows);
  Add(list, "elementwise_mul", FLEET_DTYPE_FLOAT64, MulRows<double>, nullptr, nullptr,
      SparseOnly, kRows);
  Add(list, "sparse_weight_decay", FLEET_DTYPE_FLOAT32, SparseWeightDecay<float>,
      GradSortedPrepare<float>, nullptr, nullptr, kRows);
  Add(list, "sparse_weight_decay", FLEET_DTYPE_FLOAT64, SparseWeightDecay<double>,
      GradSortedPrepare<double>, nullptr, nullptr, kRows);
  Add(list, "scale", FLEET_DTYPE_FLOAT32, ScaleRows<float>, nullptr, nullptr, SparseOnly, kRows);
  Add(list, "scale", FLEET_DTYPE_FLOAT64, ScaleRows<double>, nullptr, nullptr, SparseOnly, kRows);
  Add(list, "split_selected_rows", FLEET_DTYPE_FLOAT32, SplitRows<float>, nullptr, nullptr,
      nullptr, kRows);
  Add(list, "split_selected_rows", FLEET_DTYPE_FLOAT64, SplitRows<double>, nullptr, nullptr,
      nullptr, kRows);
}

}  // namespace fleet_cpu
