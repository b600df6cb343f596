// Reading and writing NumPy .npy files (format versions 1.0-3.0, C order, little-endian), the
// interchange format for data sources, reference results and exported tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "ir/program.h"
#include "support/status.h"

namespace fleet::data {

struct NpyArray {
  ir::DataType dtype = ir::DataType::kInvalid;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // numel * element size, row-major

  int64_t numel() const;
  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

// Errors name the file and what is wrong with it (bad magic, Fortran order, big-endian or an
// unsupported dtype, a size that disagrees with the shape). The header dict is read strictly as
// the Python literal NumPy writes (exactly descr, fortran_order and shape, each once; nothing
// after it but the padding). The file is opened first and what was opened is checked: anything
// but a regular file (a FIFO, /dev/zero) is refused, and the data's size is checked against that
// file's before anything is allocated from the header.
StatusOr<NpyArray> ReadNpy(const std::filesystem::path& file);
// Writes to a temporary file beside `file`, fsyncs it and renames it into place
// (support/durable_file.h), so a reader never sees a half-written array.
Status WriteNpy(const std::filesystem::path& file, const NpyArray& array);

}  // namespace fleet::data
