#include "collective/sparse_exchange.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "support/text.h"

namespace fleet {
namespace {

std::string Megabytes(double bytes) {
  if (bytes < 1e4) return FormatFixed(bytes, 0) + " bytes";
  return FormatFixed(bytes / 1e6, 2) + " MB";
}

// A view of `t` without its rows: its slices as a plain tensor, so communicators never see a
// SelectedRows descriptor.
FleetTensor Plain(const FleetTensor& t) {
  FleetTensor plain = t;
  plain.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
  plain.rows = nullptr;
  plain.height = -1;
  return plain;
}

template <typename T>
void AddRows(const FleetTensor& x, int64_t row_elems, T* sum) {
  const T* slices = static_cast<const T*>(x.data);
  for (int64_t i = 0; i < x.dims[0]; ++i) {
    const int64_t r = x.rows[i];
    if (r < 0) continue;
    T* to = sum + r * row_elems;
    const T* from = slices + i * row_elems;
    for (int64_t j = 0; j < row_elems; ++j) to[j] += from[j];
  }
}

// Entry i of Out gets its row's sum the first time the row comes, zeros after: clearing the
// sum's row as it is taken does both, and leaves the sum all zeros for the next exchange (every
// row any rank added to is among Out's rows).
void TakeRows(const FleetTensor& out, size_t row_bytes, char* sum) {
  char* slices = static_cast<char*>(out.data);
  for (int64_t i = 0; i < out.dims[0]; ++i) {
    char* to = slices + static_cast<size_t>(i) * row_bytes;
    const int64_t r = out.rows[i];
    if (r < 0) {
      std::memset(to, 0, row_bytes);
      continue;
    }
    char* from = sum + static_cast<size_t>(r) * row_bytes;
    std::memcpy(to, from, row_bytes);
    std::memset(from, 0, row_bytes);
  }
}

// The first gathered row that is neither -1 nor in [0, height), as an error naming the rank
// that sent it (`entries` per rank), its entry and the row.
Status CheckRows(const FleetTensor& out, int64_t height, int64_t entries) {
  for (int64_t i = 0; i < out.dims[0]; ++i) {
    const int64_t r = out.rows[i];
    if (r == -1 || (r >= 0 && r < height)) continue;
    return InvalidArgument("rank " + std::to_string(entries > 0 ? i / entries : 0) + "'s entry " +
                           std::to_string(entries > 0 ? i % entries : i) + " has row " +
                           std::to_string(r) + ", outside the table's " + std::to_string(height) +
                           " rows");
  }
  return OkStatus();
}

// Gathers X's rows (int64, X.dims[0] per rank) into Out's.
Status GatherRows(Communicator& ring, const FleetTensor& x, const FleetTensor& out,
                  FleetStream* stream, const CallSite& site) {
  FleetTensor rows = Plain(x), all_rows = Plain(out);
  rows.data = x.rows;
  all_rows.data = out.rows;
  rows.dtype = all_rows.dtype = FLEET_DTYPE_INT64;
  rows.ndim = all_rows.ndim = 1;
  rows.strides = all_rows.strides = nullptr;
  return ring.AllGather(rows, all_rows, stream, site);
}

}  // namespace

std::string SparseExchangePlan::Describe(int64_t nranks, int64_t entries, int64_t height) const {
  const std::string what = std::to_string(nranks) + " ranks x " + std::to_string(entries) +
                           " entries of a " + std::to_string(height) + "-row table";
  if (dense) {
    return "exchanged dense (rows gathered, their sum all-reduced): " + what + ", " +
           Megabytes(dense_bytes) + " received per rank, where gathering would take " +
           Megabytes(gather_bytes) + " (sparse_exchange \"" + mode + "\")";
  }
  return "gathered (rows and slices): " + what + ", " + Megabytes(gather_bytes) +
         " received per rank, where the dense way would take " + Megabytes(dense_bytes) +
         " (sparse_exchange \"" + mode + "\")";
}

StatusOr<SparseExchangePlan> PlanSparseExchange(std::string_view mode, int64_t nranks,
                                                int64_t entries, int64_t height,
                                                int64_t row_elems, ir::DataType dtype,
                                                bool host_memory) {
  if (mode != "auto" && mode != "gather" && mode != "dense") {
    return InvalidArgument("sparse_exchange must be \"auto\", \"gather\" or \"dense\", not \"" +
                           std::string(mode) + "\"");
  }
  SparseExchangePlan plan;
  plan.mode = std::string(mode);
  const double elem = static_cast<double>(ir::DataTypeSize(dtype));
  const double others = static_cast<double>(std::max<int64_t>(nranks - 1, 0));
  const double row_bytes = static_cast<double>(row_elems) * elem;
  const double rows = others * static_cast<double>(entries) * 8.0;
  plan.gather_bytes = rows + others * static_cast<double>(entries) * row_bytes;
  plan.dense_bytes = rows + 2.0 * others / static_cast<double>(std::max<int64_t>(nranks, 1)) *
                                static_cast<double>(height) * row_bytes;

  std::string cannot;
  if (!host_memory) {
    cannot = "the dense way sums in host memory, and this device's tensors are not there";
  } else if (dtype != ir::DataType::kFloat32 && dtype != ir::DataType::kFloat64) {
    cannot = "the dense way sums float32 or float64 slices, not " +
             std::string(ir::DataTypeName(dtype));
  } else if (height < 0 || row_elems < 0 ||
             (row_elems > 0 &&
              height > std::numeric_limits<int64_t>::max() / 8 / row_elems)) {
    cannot = "a sum of " + std::to_string(height) + " rows of " + std::to_string(row_elems) +
             " elements does not fit in memory";
  }
  if (mode == "dense" && !cannot.empty()) {
    return InvalidArgument("sparse_exchange \"dense\": " + cannot);
  }
  plan.dense = cannot.empty() &&
               (mode == "dense" || (mode == "auto" && plan.dense_bytes < plan.gather_bytes));
  return plan;
}

Status GatherEntries(Communicator& ring, const FleetTensor& x, const FleetTensor& out,
                     FleetStream* stream, const CallSite& slices_site, const CallSite& rows_site) {
  FLEET_RETURN_IF_ERROR(ring.AllGather(Plain(x), Plain(out), stream, slices_site));
  return GatherRows(ring, x, out, stream, rows_site);
}

DenseSparseExchange::DenseSparseExchange(int64_t height, int64_t row_elems, ir::DataType dtype)
    : height_(height), row_elems_(row_elems), dtype_(dtype) {}

StatusOr<std::unique_ptr<DenseSparseExchange>> DenseSparseExchange::Create(
    int64_t height, int64_t row_elems, ir::DataType dtype, const std::string& what) {
  std::unique_ptr<DenseSparseExchange> exchange(
      new DenseSparseExchange(height, row_elems, dtype));
  const size_t bytes = static_cast<size_t>(height) * static_cast<size_t>(row_elems) *
                       ir::DataTypeSize(dtype);
  try {
    exchange->sum_.assign((bytes + sizeof(double) - 1) / sizeof(double), 0.0);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(what + ": the dense exchange's sum of " + std::to_string(height) +
                             " rows needs " + std::to_string(bytes) +
                             " bytes, which cannot be allocated; set [strategy] "
                             "sparse_exchange = \"gather\"");
  }
  return exchange;
}

Status DenseSparseExchange::Run(Communicator& ring, const FleetTensor& x, const FleetTensor& out,
                                const CallSite& rows_site, const CallSite& sum_site) {
  // The rows are checked once gathered, X's among them, before the sum is touched: a bad row
  // never writes past it, and every rank sees it and fails alike, none left waiting for the
  // all-reduce of one that stopped.
  FLEET_RETURN_IF_ERROR(GatherRows(ring, x, out, nullptr, rows_site));
  FLEET_RETURN_IF_ERROR(CheckRows(out, height_, x.dims[0]));
  if (dirty_) std::fill(sum_.begin(), sum_.end(), 0.0);
  dirty_ = true;
  if (dtype_ == ir::DataType::kFloat32) {
    AddRows(x, row_elems_, reinterpret_cast<float*>(sum_.data()));
  } else {
    AddRows(x, row_elems_, sum_.data());
  }
  int64_t numel = height_ * row_elems_;
  FleetTensor sum = Plain(x);
  sum.data = sum_.data();
  sum.ndim = 1;
  sum.dims = &numel;
  sum.strides = nullptr;
  FLEET_RETURN_IF_ERROR(ring.AllReduce(sum, sum, FLEET_REDUCE_SUM, nullptr, sum_site));
  TakeRows(out, static_cast<size_t>(row_elems_) * ir::DataTypeSize(dtype_),
           reinterpret_cast<char*>(sum_.data()));
  dirty_ = false;
  return OkStatus();
}

}  // namespace fleet
