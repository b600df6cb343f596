// SelectedRows tensors (FleetTensor.rows, ABI 1.6) as Fleet's plugins read them: the checks
// every kernel makes before it trusts the row indices, and the merge order the update kernels
// share, so a sparse gradient means the same on every device.
//
// A SelectedRows tensor stands for a dense [height, row dims...] tensor that is zero except in
// its listed rows: entry i adds its slice (width elements) to row rows[i]; rows[i] == -1 is an
// empty entry. Merging sums the entries of one row in entry order, which is the order a dense
// gradient accumulates them in, so sparse and dense updates agree to rounding.
//
// Host code (C++17, no device code): on a device without host memory the rows must be copied
// to the host first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fleet/fleet_kernels.h"
#include "plan_status.h"

namespace fleet::kernel {

// Whether `t` is a SelectedRows tensor (only kernels that declare
// FLEET_KERNEL_FLAG_SELECTED_ROWS are handed one).
bool IsSelectedRows(const FleetTensor* t);

// The `supports` of a sparse kernel registered beside its op's dense one: ok when any input or
// output of `kc` is a SelectedRows tensor, else UNIMPLEMENTED, leaving a dense call to the
// dense kernel.
PlanStatus SparseCallsOnly(const FleetKernelContext* kc);

struct RowsView {
  int64_t* rows = nullptr;  // `entries` row indices
  int64_t entries = 0;      // dims[0]
  int64_t height = 0;       // rows of the dense tensor
  int64_t width = 0;        // elements of one entry's slice: the product of dims[1:]
};

// Reads `t` (slot `slot` of op `op`) as a SelectedRows tensor standing for a dense tensor of
// `dense_dims` (a parameter's shape, say); an error names the op, the slot and both shapes.
PlanStatus PlanRows(const FleetTensor* t, const char* op, const char* slot,
                    const std::vector<int64_t>& dense_dims, RowsView* view);

// The checks of the row indices themselves: each in [0, height) or -1. The error names the op,
// the slot, the entry and the row.
PlanStatus CheckEntries(const RowsView& view, const char* op, const char* slot);

// CheckEntries' message for entry `entry` naming `row` of a tensor of `height` rows (a device
// that checks rows in device memory reports the first bad one with it).
std::string BadEntryMessage(const char* op, const char* slot, int64_t entry, int64_t row,
                            int64_t height);

// CheckEntries, then `order` (room for
// view.entries) receives the non-empty entries sorted by row, entries of one row in entry
// order, and *count their number. The error names the op, the slot, the entry and the row.
PlanStatus SortEntries(const RowsView& view, const char* op, const char* slot, int64_t* order,
                       int64_t* count);

// Scratch an update kernel asks for: `order` for every entry, plus `extra` bytes after it,
// aligned for any element type.
size_t SortScratchBytes(int64_t entries, size_t extra);

}  // namespace fleet::kernel
