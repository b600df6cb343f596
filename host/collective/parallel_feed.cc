// How ParallelRunner shares a batch out among its devices and gathers the fetches back
// (see parallel_runner.h for the rules, which are ParallelExecutor's).
#include <algorithm>
#include <cstring>
#include <iterator>

#include "collective/parallel_runner.h"

namespace fleet::exec {
namespace {

// The rows each device gets of a feed of `rows` rows (or the sequences, `unit` "sequence", of a
// sequence feed): chunks of ceil(rows / n), the last one short, as Paddle's SplitLoDTensor cuts
// them; fewer chunks than devices is an error.
StatusOr<std::vector<int64_t>> RowShares(const std::string& name, int64_t rows, int32_t n,
                                         const std::string& unit = "row") {
  if (n == 1) return std::vector<int64_t>{rows};
  const int64_t devices = n;
  const int64_t step = rows > 0 ? (rows + devices - 1) / devices : 0;
  const int64_t chunks = step > 0 ? (rows + step - 1) / step : 0;
  if (chunks < devices) {
    return InvalidArgument(
        "feed '" + name + "' has " + std::to_string(rows) + " " + unit + "(s), which split into " +
        std::to_string(chunks) + " chunk(s) of at most " + std::to_string(step) + " for " +
        std::to_string(n) + " devices: every device needs a share (a batch is cut into chunks "
        "of ceil(" + unit + "s / devices) " + unit + "s, as Paddle's ParallelExecutor does); "
        "feed more " + unit + "s or one feed map per device");
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
    // A sequence feed is cut between sequences, each device taking whole ones with their rows
    // and its offsets rebased to 0, so that its samples are those of the dense feeds' rows.
    const bool sequence = !t.lod.empty();
    if (sequence) {
      bool valid = t.lod.front() == 0 && t.lod.back() == t.dims[0];
      for (size_t k = 1; valid && k < t.lod.size(); ++k) valid = t.lod[k - 1] <= t.lod[k];
      if (!valid) {
        return InvalidArgument("feed '" + name + "': its sequence offsets do not match its " +
                               std::to_string(t.dims[0]) + " rows (they must start at 0, " +
                               "never decrease and end at the row count)");
      }
    }
    const int64_t samples = sequence ? static_cast<int64_t>(t.lod.size()) - 1 : t.dims[0];
    FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> shares,
                           RowShares(name, samples, num_devices, sequence ? "sequence" : "row"));
    const size_t row_bytes = t.dims[0] > 0 ? t.bytes.size() / static_cast<size_t>(t.dims[0]) : 0;
    int64_t first = 0;  // the device's first sample
    for (size_t d = 0; d < out.size(); ++d) {
      const int64_t count = shares[d];
      const int64_t row = sequence ? t.lod[static_cast<size_t>(first)] : first;
      const int64_t end = sequence ? t.lod[static_cast<size_t>(first + count)] : first + count;
      std::vector<int64_t> dims = t.dims;
      dims[0] = end - row;
      HostTensor& part = out[d][name];
      part.Reshape(t.dtype, dims);
      if (!part.bytes.empty()) {
        std::memcpy(part.bytes.data(), t.bytes.data() + static_cast<size_t>(row) * row_bytes,
                    part.bytes.size());
      }
      if (sequence) {
        part.lod.resize(static_cast<size_t>(count) + 1);
        for (int64_t k = 0; k <= count; ++k) {
          part.lod[static_cast<size_t>(k)] = t.lod[static_cast<size_t>(first + k)] - row;
        }
      }
      first += count;
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
