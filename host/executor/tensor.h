// Host-memory tensors: what the executor takes as feeds and hands back as fetches, and what data
// sources fill. Plain data: dtype, dims and the bytes, row-major.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/program.h"

namespace fleet::exec {

struct HostTensor {
  ir::DataType dtype = ir::DataType::kInvalid;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // numel() * element size

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  // Sets dtype and dims and sizes `bytes` to match. Reuses the existing storage, so refilling a
  // tensor of the same (or a smaller) size allocates nothing.
  void Reshape(ir::DataType type, const std::vector<int64_t>& shape) {
    dtype = type;
    dims.assign(shape.begin(), shape.end());
    bytes.resize(static_cast<size_t>(numel()) * ir::DataTypeSize(type));
  }
  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

// Feeds by var name.
using FeedMap = std::map<std::string, HostTensor>;
// Feed shapes by var name, as Prepare takes them.
using FeedShapes = std::map<std::string, std::vector<int64_t>>;

}  // namespace fleet::exec
