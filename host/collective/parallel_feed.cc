// How ParallelRunner shares a batch out among its devices and gathers the fetches back
// (see parallel_runner.h for the rules, which are ParallelExecutor's).
#include <algorithm>
#include <cstring>
#include <iterator>

#include "collective/parallel_runner.h"

namespace fleet::exec {
namespace {

// The rows each device gets of a feed of `rows` rows: chunks of ceil(rows / n), the last one
// short, as Paddle's SplitLoDTensor cuts them; fewer chunks than devices is an error.
StatusOr<std::vector<int64_t>> RowShares(const std::string& name, int64_t rows, int32_t n) {
  if (n == 1) return std::vector<int64_t>{rows};
  const int64_t devices = n;
  const int64_t step = rows > 0 ? (rows + devices - 1) / devices : 0;
  const int64_t chunks = step > 0 ? (rows + step - 1) / step : 0;
  if (chunks < devices) {
    return InvalidArgument(
        "feed '" + name + "' has " + std::to_string(rows) + " row(s), which split into " +
        std::to_string(chunks) + " chunk(s) of at most " + std::to_string(step) + " for " +
        std::to_string(n) + " devices: every device needs a share (a batch is cut into chunks "
        "of ceil(rows / devices) rows, as Paddle's ParallelExecutor does); feed more rows or one "
        "feed map per device");
  }
  std::vector<int64_t> shares(static_cast<size_t>(n));
  for (int64_t d = 0; d < devices; ++d) {
    shares[static_cast<size_t>(d)] = std::min(step, rows - d * step);
  }
  return shares;
}

Status CheckSplittable(const std::string& name, const std::vector<int64_t>& dims, int32_t n) {
  if (dims.empty()) {
    return InvalidArgument("feed '" + name + "' is a 0-d tensor and cannot be split among " +
                           std::to_string(n) + " devices: give one feed map per device");
  }
  if (dims[0] < 0) {
    return InvalidArgument("feed '" + name + "' has an unknown batch dimension (" +
                           std::to_string(dims[0]) + ")");
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<FeedShapes>> ParallelRunner::SplitShapes(const FeedShapes& batch,
                                                              int32_t num_devices) {
  if (num_devices < 1) return InvalidArgument("the number of devices must be at least 1");
  std::vector<FeedShapes> out(static_cast<size_t>(num_devices));
  for (const auto& [name, dims] : batch) {
    FLEET_RETURN_IF_ERROR(CheckSplittable(name, dims, num_devices));
    FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> shares, RowShares(name, dims[0], num_devices));
    for (size_t d = 0; d < out.size(); ++d) {
      std::vector<int64_t> part = dims;
      part[0] = shares[d];
      out[d][name] = std::move(part);
    }
  }
  return out;
}

Status ParallelRunner::SplitBatch(const FeedMap& batch, int32_t num_devices,
                                  std::vector<FeedMap>& out) {
  if (num_devices < 1) return InvalidArgument("the number of devices must be at least 1");
  out.resize(static_cast<size_t>(num_devices));
  // Drop feeds of an earlier step that this batch lacks; keep the others' storage.
  for (FeedMap& part : out) {
    for (auto it = part.begin(); it != part.end();) {
      it = batch.count(it->first) != 0 ? std::next(it) : part.erase(it);
    }
  }
  for (const auto& [name, t] : batch) {
    FLEET_RETURN_IF_ERROR(CheckSplittable(name, t.dims, num_devices));
    const size_t element = ir::DataTypeSize(t.dtype);
    if (t.bytes.size() != static_cast<size_t>(t.numel()) * element) {
      return InvalidArgument("feed '" + name + "' holds " + std::to_string(t.bytes.size()) +
                             " bytes but its dtype and shape need " +
                             std::to_string(static_cast<size_t>(t.numel()) * element));
    }
    FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> shares, RowShares(name, t.dims[0], num_devices));
    const size_t row_bytes = t.dims[0] > 0 ? t.bytes.size() / static_cast<size_t>(t.dims[0]) : 0;
    size_t offset = 0;
    for (size_t d = 0; d < out.size(); ++d) {
      std::vector<int64_t> dims = t.dims;
      dims[0] = shares[d];
      HostTensor& part = out[d][name];
      part.Reshape(t.dtype, dims);
      if (!part.bytes.empty()) std::memcpy(part.bytes.data(), t.bytes.data() + offset,
                                           part.bytes.size());
      offset += static_cast<size_t>(shares[d]) * row_bytes;
    }
  }
  return OkStatus();
}

Status ParallelRunner::Concat(const std::vector<std::vector<HostTensor>>& per_device,
                              const std::vector<std::string>& names,
                              std::vector<HostTensor>& merged) {
  merged.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    int64_t rows = 0;
    const HostTensor* first = nullptr;
    for (size_t d = 0; d < per_device.size(); ++d) {
      if (i >= per_device[d].size()) {
        return Internal("device " + std::to_string(d) + " did not fetch '" + name + "'");
      }
      const HostTensor& t = per_device[d][i];
      if (first == nullptr) {
        first = &t;
      } else {
        const bool same_tail =
            t.dims.size() == first->dims.size() &&
            (t.dims.empty() || std::equal(t.dims.begin() + 1, t.dims.end(),
                                          first->dims.begin() + 1));
        if (t.dtype != first->dtype || !same_tail) {
          return InvalidArgument("cannot concatenate fetch '" + name + "': device 0 gives " +
                                 std::string(ir::DataTypeName(first->dtype)) + " " +
                                 ir::ShapeText(first->dims) + " but device " +
                                 std::to_string(d) + " gives " +
                                 std::string(ir::DataTypeName(t.dtype)) + " " +
                                 ir::ShapeText(t.dims) + " (fetch it per device)");
        }
      }
      rows += t.dims.empty() ? 1 : t.dims[0];  // a 0-d value counts as one row
    }
    if (first == nullptr) {
      merged[i] = HostTensor{};
      continue;
    }
    std::vector<int64_t> dims = first->dims.empty() ? std::vector<int64_t>{0} : first->dims;
    dims[0] = rows;
    HostTensor& out = merged[i];
    out.Reshape(first->dtype, dims);
    size_t offset = 0;
    for (const auto& device : per_device) {
      const HostTensor& t = device[i];
      if (!t.bytes.empty()) std::memcpy(out.bytes.data() + offset, t.bytes.data(), t.bytes.size());
      offset += t.bytes.size();
    }
  }
  return OkStatus();
}

}  // namespace fleet::exec
