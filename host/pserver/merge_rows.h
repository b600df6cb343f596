// Summing the entries of a sparse gradient that share a row, which both the trainer's send op
// and the asynchronous communicator do before a gradient goes on the wire: a batch looks some
// rows up many times (a shared table, popular ids), and each row should cross once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fleet/fleet_abi.h"

namespace fleet {

// Reused buffers of one merge; `order` is scratch.
struct MergedRows {
  std::vector<size_t> order;
  std::vector<int64_t> rows;     // ascending, each once
  std::vector<uint8_t> values;   // rows.size() x width elements
};

// Sums the `n` entries (`rows[e]`, `width` elements of T at values + e * width) that share a row
// into one, in row order, into `out`; entries of row -1 (a block's unused room) are dropped.
template <typename T>
void MergeRowsOf(const int64_t* rows, const T* values, int64_t n, size_t width,
                 MergedRows& out) {
  out.order.clear();
  for (int64_t e = 0; e < n; ++e) {
    if (rows[e] >= 0) out.order.push_back(static_cast<size_t>(e));
  }
  std::stable_sort(out.order.begin(), out.order.end(),
                   [&](size_t a, size_t b) { return rows[a] < rows[b]; });
  out.rows.clear();
  out.values.assign(out.order.size() * width * sizeof(T), 0);
  T* merged = reinterpret_cast<T*>(out.values.data());
  for (size_t e : out.order) {
    if (out.rows.empty() || out.rows.back() != rows[e]) out.rows.push_back(rows[e]);
    T* row = merged + (out.rows.size() - 1) * width;
    for (size_t j = 0; j < width; ++j) row[j] += values[e * width + j];
  }
  out.values.resize(out.rows.size() * width * sizeof(T));
}

// MergeRowsOf for a FLEET_DTYPE_* of floats; false (nothing done) for other dtypes.
inline bool MergeRows(int32_t dtype, const int64_t* rows, const void* values, int64_t n,
                      size_t width, MergedRows& out) {
  if (dtype == FLEET_DTYPE_FLOAT32) {
    MergeRowsOf(rows, static_cast<const float*>(values), n, width, out);
    return true;
  }
  if (dtype == FLEET_DTYPE_FLOAT64) {
    MergeRowsOf(rows, static_cast<const double*>(values), n, width, out);
    return true;
  }
  return false;
}

}  // namespace fleet
