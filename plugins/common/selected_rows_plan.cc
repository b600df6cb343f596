#include "selected_rows_plan.h"

#include <algorithm>
#include <string>

#include "kernel_context.h"

namespace fleet::kernel {

bool IsSelectedRows(const FleetTensor* t) {
  return t != nullptr && FLEET_HAS_FIELD(t, FleetTensor, height) && t->height >= 0;
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
      return PlanInvalid(std::string(op) + ": " + slot + " entry " + std::to_string(i) +
                         " names row " + std::to_string(row) + ", outside the " +
                         std::to_string(view.height) + " rows of the tensor");
    }
  }
  return PlanOk();
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
