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
  // Empty for a dense tensor. For a sequence tensor (LoD level 1, ir::Var::lod_level): where
  // each sequence starts, plus the end: lod.size() is the number of sequences + 1, lod[0] is 0,
  // offsets never decrease and lod.back() == dims[0]. Sequence i is rows [lod[i], lod[i+1]);
  // an empty sequence has lod[i] == lod[i+1].
  std::vector<int64_t> lod;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  // Sets dtype and dims, sizes `bytes` to match and makes the tensor dense (clears `lod`).
  // Reuses the existing storage, so refilling a tensor of the same (or a smaller) size
  // allocates nothing.
  void Reshape(ir::DataType type, const std::vector<int64_t>& shape) {
    lod.clear();
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
// Feed shapes by var name, as Prepare takes them. A sequence feed's dims[0] is the capacity
// its preparation holds (see Executor::Prepare).
using FeedShapes = std::map<std::string, std::vector<int64_t>>;
// How many sequences each sequence feed (ir::Var::lod_level 1) holds, by var name.
using FeedSequences = std::map<std::string, int64_t>;

}  // namespace fleet::exec
