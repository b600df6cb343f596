#include "passes/pserver_slicing.h"

#include <algorithm>

namespace fleet::passes::pserver {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

StatusOr<std::vector<int64_t>> SliceRows(const std::vector<int64_t>& shape, int32_t slice_count,
                                         int64_t min_block_size, std::string_view what) {
  if (slice_count < 1 || min_block_size < 1) {
    return InvalidArgument(std::string(what) + ": slice_count (" + std::to_string(slice_count) +
                           ") and min_block_size (" + std::to_string(min_block_size) +
                           ") must be >= 1");
  }
  if (shape.empty()) return std::vector<int64_t>{1};
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArgument(std::string(what) + " has an unknown or negative dimension in " +
                             "its shape; only fixed shapes can be sliced");
    }
    numel *= d;
  }
  if (numel == 0) return std::vector<int64_t>{shape[0]};
  const int64_t width = numel / shape[0];
  const int64_t max_servers = std::max<int64_t>(numel / min_block_size, 1);
  const int64_t split_count = std::min<int64_t>(slice_count, max_servers);
  int64_t block_size = CeilDiv(numel, split_count);
  // Whole rows: round the block up to a multiple of the row width.
  if (shape.size() >= 2) block_size = CeilDiv(block_size, width) * width;
  const int64_t blocks = CeilDiv(numel, block_size);
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t size = std::min(block_size, numel - i * block_size);
    rows.push_back(size / width);
  }
  return rows;
}

std::string BlockName(std::string_view var, size_t i) {
  return std::string(var) + ".block" + std::to_string(i);
}

StatusOr<SplitMethod> ParseSplitMethod(std::string_view name) {
  if (name == "round_robin") return SplitMethod::kRoundRobin;
  if (name == "hash_name") return SplitMethod::kHashName;
  return InvalidArgument("pserver: option 'split_method' must be \"round_robin\" or "
                         "\"hash_name\", not \"" + std::string(name) + "\"");
}

uint64_t Fnv1a64(std::string_view text) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::vector<int32_t> Dispatch(const std::vector<std::string>& blocks, int32_t num_servers,
                              SplitMethod method) {
  std::vector<int32_t> servers;
  const uint64_t n = static_cast<uint64_t>(std::max(num_servers, 1));
  for (size_t k = 0; k < blocks.size(); ++k) {
    const uint64_t key = method == SplitMethod::kRoundRobin ? k : Fnv1a64(blocks[k]);
    servers.push_back(static_cast<int32_t>(key % n));
  }
  return servers;
}

}  // namespace fleet::passes::pserver
