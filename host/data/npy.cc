#include "data/npy.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "support/durable_file.h"

namespace fleet::data {

namespace fs = std::filesystem;
namespace {

// NumPy's type strings for the dtypes Fleet moves through files.
struct NpyType {
  ir::DataType dtype;
  const char* descr;
};
constexpr NpyType kTypes[] = {
    {ir::DataType::kFloat32, "<f4"}, {ir::DataType::kFloat64, "<f8"},
    {ir::DataType::kInt64, "<i8"},   {ir::DataType::kInt32, "<i4"},
    {ir::DataType::kBool, "|b1"},    {ir::DataType::kUInt8, "|u1"},
    {ir::DataType::kInt8, "|i1"},    {ir::DataType::kInt16, "<i2"},
    {ir::DataType::kFloat16, "<f2"},
};

// The value of `key` in the header dict, e.g. 'descr': '<f4' -> <f4 (quotes stripped) or
// 'shape': (2, 3) -> (2, 3).
std::string HeaderValue(const std::string& header, const std::string& key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return {};
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) return {};
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) return {};
  if (header[start] == '\'') {
    size_t end = header.find('\'', start + 1);
    return end == std::string::npos ? std::string() : header.substr(start + 1, end - start - 1);
  }
  if (header[start] == '(') {
    size_t end = header.find(')', start);
    return end == std::string::npos ? std::string() : header.substr(start, end - start + 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end - start);
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

StatusOr<NpyArray> ReadNpy(const std::filesystem::path& file) {
  const std::string where = file.string();
  std::error_code ec;
  // A FIFO or a device (/dev/zero) would be read without end.
  if (fs::exists(file, ec) && !fs::is_regular_file(file, ec)) {
    return InvalidArgument(where + ": not a regular file");
  }
  const uintmax_t file_size = fs::file_size(file, ec);
  std::ifstream in(file, std::ios::binary);
  if (!in || ec) return NotFound(where + ": cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    return InvalidArgument(where + ": not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) return InvalidArgument(where + ": truncated");
    header_len = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) return InvalidArgument(where + ": truncated");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    return InvalidArgument(where + ": unsupported .npy version " + std::to_string(major));
  }
  if (header_len > (1u << 20)) return InvalidArgument(where + ": header too large");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) return InvalidArgument(where + ": truncated header");

  NpyArray out;
  const std::string descr = HeaderValue(header, "descr");
  for (const auto& t : kTypes) {
    if (descr == t.descr) out.dtype = t.dtype;
  }
  if (out.dtype == ir::DataType::kInvalid) {
    return InvalidArgument(where + ": unsupported dtype '" + descr +
                           "' (expected little-endian float32/float64/int64/int32/bool/...)");
  }
  if (HeaderValue(header, "fortran_order") != "False") {
    return InvalidArgument(where + ": Fortran-ordered arrays are not supported; save with "
                           "np.ascontiguousarray");
  }
  const std::string shape = HeaderValue(header, "shape");
  if (shape.size() < 2) return InvalidArgument(where + ": header has no shape");
  std::string inner = shape.substr(1, shape.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = inner.find(',', pos);
    std::string item = inner.substr(pos, comma == std::string::npos ? std::string::npos
                                                                    : comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) {
      // The whole item must be a non-negative integer: "16abc" is not 16.
      int64_t d = -1;
      const auto [end, err] = std::from_chars(item.data(), item.data() + item.size(), d);
      if (err != std::errc() || end != item.data() + item.size() || d < 0) {
        return InvalidArgument(where + ": bad dimension '" + item + "' in shape " + shape);
      }
      out.dims.push_back(d);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  // The header's shape is checked against the file before anything is allocated from it.
  auto checked = ir::TensorBytes(out.dtype, out.dims);
  if (!checked.ok()) {
    return InvalidArgument(where + ": shape " + shape + ": " + checked.status().message());
  }
  const size_t bytes = *checked;
  const uintmax_t data_start = static_cast<uintmax_t>(in.tellg());
  if (file_size < data_start || file_size - data_start < bytes) {
    return InvalidArgument(where + ": data shorter than shape " + shape + " needs (" +
                           std::to_string(bytes) + " bytes)");
  }
  out.bytes.resize(bytes);
  if (bytes > 0 && !in.read(reinterpret_cast<char*>(out.bytes.data()),
                            static_cast<std::streamsize>(bytes))) {
    return InvalidArgument(where + ": data shorter than shape " + shape + " needs (" +
                           std::to_string(bytes) + " bytes)");
  }
  return out;
}

Status WriteNpy(const std::filesystem::path& file, const NpyArray& array) {
  const char* descr = nullptr;
  for (const auto& t : kTypes) {
    if (t.dtype == array.dtype) descr = t.descr;
  }
  if (descr == nullptr) {
    return InvalidArgument(file.string() + ": cannot write dtype " +
                           std::string(ir::DataTypeName(array.dtype)) + " as .npy");
  }
  std::string shape = "(";
  for (size_t i = 0; i < array.dims.size(); ++i) {
    shape += std::to_string(array.dims[i]);
    shape += (array.dims.size() == 1 || i + 1 < array.dims.size()) ? "," : "";
    if (i + 1 < array.dims.size()) shape += " ";
  }
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, " +
                       "'shape': " + shape + ", }";
  // Pad so the data starts on a 64-byte boundary, ending the header with a newline.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  const char len[2] = {static_cast<char>(header.size() & 0xff),
                       static_cast<char>((header.size() >> 8) & 0xff)};
  static constexpr uint8_t kMagic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  // Straight from the array's memory, fsynced and renamed into place.
  auto written = WriteFileDurably(
      file, {std::span<const uint8_t>(kMagic, 8),
             std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(len), 2),
             std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(header.data()),
                                      header.size()),
             std::span<const uint8_t>(array.bytes)});
  if (!written.ok()) return written.status();
  return OkStatus();
}

}  // namespace fleet::data
