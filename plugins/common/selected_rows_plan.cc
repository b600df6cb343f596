#include "selected_rows_plan.h"

#include <algorithm>
#include <string>

#include "kernel_context.h"

namespace fleet::kernel {

bool IsSelectedRows(const FleetTensor* t) {
  return t != nullptr && FLEET_HAS_FIELD(t, FleetTensor, height) && t->height >= 0;
}

PlanStatus SparseCallsOnly(const FleetKernelContext* kc) {
  for (size_t s = 0; s < kc->num_inputs; ++s) {
    for (size_t i = 0; i < kc->inputs[s]->count; ++i) {
      if (IsSelectedRows(kc->inputs[s]->tensors[i])) return PlanOk();
    }
  }
  for (size_t s = 0; s < kc->num_outputs; ++s) {
    for (size_t i = 0; i < kc->outputs[s]->count; ++i) {
      if (IsSelectedRows(kc->outputs[s]->tensors[i])) return PlanOk();
    }
  }
  return PlanUnimplemented(OpName(kc) + ": this kernel takes sparse (selected_rows) tensors; "
                                        "dense ones go to the op's dense kernel");
}

PlanStatus PlanRows(const FleetTensor* t, const char* op, const char* slot,
                    const std::vector<int64_t>& dense_dims, RowsView* view) {
  const std::string where = std::string(op) + ": " + slot;
  if (!IsSelectedRows(t) || t->rows == nullptr) {
    return PlanInvalid(where + " is not a sparse (selected_rows) tensor with its rows");
  }
  if (t->ndim < 1) return PlanInvalid(where + " has no entries dimension");
  std::vector<int64_t> stands_for = Dims(t);
  stands_for[0] = t->height;
  if (stands_for != dense_dims) {
    return PlanInvalid(where + " stands for " + DimsText(stands_for) + ", expected " +
                       DimsText(dense_dims));
  }
  view->rows = t->rows;
  view->entries = t->dims[0];
  view->height = t->height;
  view->width = 1;
  for (int32_t d = 1; d < t->ndim; ++d) view->width *= t->dims[d];
  return PlanOk();
}

PlanStatus CheckEntries(const RowsView& view, const char* op, const char* slot) {
  for (int64_t i = 0; i < view.entries; ++i) {
    const int64_t row = view.rows[i];
    if (row != -1 && (row < 0 || row >= view.height)) {
      return PlanInvalid(BadEntryMessage(op, slot, i, row, view.height));
    }
  }
  return PlanOk();
}

std::string BadEntryMessage(const char* op, const char* slot, int64_t entry, int64_t row,
                            int64_t height) {
  return std::string(op) + ": " + slot + " entry " + std::to_string(entry) + " names row " +
         std::to_string(row) + ", outside the " + std::to_string(height) +
         " rows of the tensor";
}

PlanStatus SortEntries(const RowsView& view, const char* op, const char* slot, int64_t* order,
                       int64_t* count) {
  if (PlanStatus s = CheckEntries(view, op, slot); !s.ok()) return s;
  int64_t n = 0;
  for (int64_t i = 0; i < view.entries; ++i) {
    if (view.rows[i] != -1) order[n++] = i;
  }
  std::stable_sort(order, order + n,
                   [&](int64_t a, int64_t b) { return view.rows[a] < view.rows[b]; });
  *count = n;
  return PlanOk();
}

size_t SortScratchBytes(int64_t entries, size_t extra) {
  const size_t order = static_cast<size_t>(entries > 0 ? entries : 0) * sizeof(int64_t);
  const size_t aligned = (order + 63) / 64 * 64;
  return aligned + extra;
}

}  // namespace fleet::kernel
