#include "data/npy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "support/durable_file.h"
#include "support/input_file.h"
#include "support/text.h"

namespace fleet::data {

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

// The header dict as NumPy writes it: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// then spaces and a newline. Python-literal syntax, strictly: exactly the keys descr,
// fortran_order and shape, each once, in any order; quoted strings without escapes; True or
// False; a tuple of non-negative integers ((), (5,), (2, 3)); an optional trailing comma. Every
// byte is accounted for, so no key can hide inside another's value and none can come twice.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Dimensions at most; NumPy allows 64.
constexpr size_t kMaxNpyDims = 64;

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  // "" when the header is well-formed (`out` filled), else what is wrong.
  std::string Parse(NpyHeader& out) {
    if (!Eat('{')) return Expected("'{'");
    bool seen[3] = {false, false, false};
    static constexpr const char* kKeys[3] = {"descr", "fortran_order", "shape"};
    while (!Eat('}')) {
      std::string key;
      if (!String(key)) return Expected("a quoted key or '}'");
      int which = -1;
      for (int k = 0; k < 3; ++k) {
        if (key == kKeys[k]) which = k;
      }
      if (which < 0) {
        return "unexpected key " + QuoteForMessage(key, 40) +
               " (the header has exactly 'descr', 'fortran_order' and 'shape')";
      }
      if (seen[which]) return "key '" + key + "' appears twice";
      seen[which] = true;
      if (!Eat(':')) return Expected("':' after '" + key + "'");
      std::string error;
      if (which == 0 && !String(out.descr)) error = Expected("a quoted dtype for 'descr'");
      if (which == 1 && !Bool(out.fortran_order)) {
        error = Expected("True or False for 'fortran_order'");
      }
      if (which == 2) error = Tuple(out.shape);
      if (!error.empty()) return error;
      if (Eat(',')) continue;
      if (Eat('}')) break;
      return Expected("',' or '}'");
    }
    for (int k = 0; k < 3; ++k) {
      if (!seen[k]) return std::string("the header has no '") + kKeys[k] + "'";
    }
    // NumPy pads the dict with spaces and ends it with a newline.
    size_t end = pos_;
    while (end < text_.size() && text_[end] == ' ') ++end;
    if (end + 1 != text_.size() || text_[end] != '\n') {
      return "after the dict expected spaces and a final newline, found " +
             QuoteForMessage(text_.substr(pos_, 20), 20);
    }
    return {};
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }

  bool Eat(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  std::string Expected(const std::string& what) {
    SkipSpace();
    const std::string found = pos_ == text_.size()
                                  ? std::string("its end")
                                  : QuoteForMessage(text_.substr(pos_, 20), 20);
    return "expected " + what + " at byte " + std::to_string(pos_) + " of the header, found " +
           found;
  }

  // A string in single or double quotes, printable ASCII without a backslash (no escapes: the
  // keys and dtype strings NumPy writes need none).
  bool String(std::string& out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_];
    size_t end = pos_ + 1;
    while (end < text_.size() && text_[end] != quote) {
      const unsigned char c = static_cast<unsigned char>(text_[end]);
      if (c < 0x20 || c >= 0x7f || c == '\\') return false;
      ++end;
    }
    if (end == text_.size()) return false;
    out.assign(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }

  // True or False, as a whole word.
  bool Bool(bool& out) {
    SkipSpace();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true},
                                      std::pair{std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) != word) continue;
      const size_t after = pos_ + word.size();
      if (after < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[after])) ||
                                   text_[after] == '_')) {
        return false;
      }
      pos_ = after;
      out = value;
      return true;
    }
    return false;
  }

  // (), (5,), (2, 3) or (2, 3,): "" or what is wrong. (5) is a number in Python, not a tuple.
  std::string Tuple(std::vector<int64_t>& dims) {
    dims.clear();
    if (!Eat('(')) return Expected("a tuple for 'shape'");
    if (Eat(')')) return {};
    while (true) {
      SkipSpace();
      const size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      const std::string_view digits = text_.substr(start, pos_ - start);
      if (digits.empty()) {
        pos_ = start;
        return Expected("a non-negative integer in 'shape'");
      }
      int64_t d = 0;
      const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), d);
      if ((digits.size() > 1 && digits[0] == '0') || err != std::errc() ||
          end != digits.data() + digits.size()) {
        return "dimension " + QuoteForMessage(digits, 24) + " in 'shape' is not a valid int64";
      }
      if (dims.size() == kMaxNpyDims) {
        return "'shape' has more than " + std::to_string(kMaxNpyDims) + " dimensions";
      }
      dims.push_back(d);
      if (Eat(',')) {
        if (Eat(')')) return {};
        continue;
      }
      if (Eat(')')) {
        if (dims.size() > 1) return {};
        const std::string d(digits);
        return "'shape' (" + d + ") is a number, not a tuple; NumPy writes (" + d + ",)";
      }
      return Expected("',' or ')' in 'shape'");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// "(2, 3)", for messages.
std::string ShapeTuple(const std::vector<int64_t>& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + (dims.size() == 1 ? ",)" : ")");
}

// Reads exactly `n` bytes; false at the end of the file or on an error (errno set, or 0).
bool ReadExactly(int fd, void* into, size_t n) {
  auto* at = static_cast<char*>(into);
  while (n > 0) {
    const ssize_t got = ::read(fd, at, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = 0;
      return false;
    }
    at += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

StatusOr<NpyArray> ReadNpy(const std::filesystem::path& file) {
  const std::string where = file.string();
  // Opened first, then checked: what is read is the regular file that was opened (a FIFO or a
  // device such as /dev/zero is refused), and its size comes from that same descriptor.
  FLEET_ASSIGN_OR_RETURN(const int fd, OpenInputFile(file, ".npy file"));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) return FailedPrecondition(where + ": " + std::strerror(errno));
  const uintmax_t file_size = static_cast<uintmax_t>(st.st_size);
  auto read_error = [&](const std::string& what) {
    return errno != 0 ? DataLoss(where + ": cannot read " + what + ": " + std::strerror(errno))
                      : InvalidArgument(where + ": truncated " + what);
  };

  unsigned char magic[8];
  if (!ReadExactly(fd, magic, 8)) {
    if (errno != 0) return read_error("the magic");
    return InvalidArgument(where + ": not a .npy file (bad magic)");
  }
  if (std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    return InvalidArgument(where + ": not a .npy file (bad magic)");
  }
  const int major = magic[6];
  uint32_t header_len = 0;
  uintmax_t data_start = 8;
  if (major == 1) {
    unsigned char b[2];
    if (!ReadExactly(fd, b, 2)) return read_error("header length");
    header_len = b[0] | (b[1] << 8);
    data_start += 2;
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!ReadExactly(fd, b, 4)) return read_error("header length");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
    data_start += 4;
  } else {
    return InvalidArgument(where + ": unsupported .npy version " + std::to_string(major));
  }
  if (header_len > (1u << 20)) return InvalidArgument(where + ": header too large");
  if (file_size < data_start + header_len) return InvalidArgument(where + ": truncated header");
  std::string header(header_len, '\0');
  if (!ReadExactly(fd, header.data(), header_len)) return read_error("header");
  data_start += header_len;

  NpyHeader parsed;
  if (std::string error = HeaderParser(header).Parse(parsed); !error.empty()) {
    return InvalidArgument(where + ": bad .npy header: " + error);
  }
  NpyArray out;
  for (const auto& t : kTypes) {
    if (parsed.descr == t.descr) out.dtype = t.dtype;
  }
  if (out.dtype == ir::DataType::kInvalid) {
    return InvalidArgument(where + ": unsupported dtype " + QuoteForMessage(parsed.descr, 40) +
                           " (expected little-endian float32/float64/int64/int32/bool/...)");
  }
  if (parsed.fortran_order) {
    return InvalidArgument(where + ": Fortran-ordered arrays are not supported; save with "
                           "np.ascontiguousarray");
  }
  out.dims = std::move(parsed.shape);
  const std::string shape = ShapeTuple(out.dims);
  // The header's shape is checked against the file before anything is allocated from it.
  auto checked = ir::TensorBytes(out.dtype, out.dims);
  if (!checked.ok()) {
    return InvalidArgument(where + ": shape " + shape + ": " + checked.status().message());
  }
  const size_t bytes = *checked;
  if (file_size < data_start || file_size - data_start < bytes) {
    return InvalidArgument(where + ": data shorter than shape " + shape + " needs (" +
                           std::to_string(bytes) + " bytes)");
  }
  out.bytes.resize(bytes);
  if (bytes > 0 && !ReadExactly(fd, out.bytes.data(), bytes)) {
    if (errno != 0) return read_error("the data");
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
