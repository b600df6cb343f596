#include "job/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

namespace fleet {
namespace {

// CRC-32C (Castagnoli): reflected polynomial 0x82f63b78, initial value and final xor ~0.
const std::array<uint32_t, 256>& Crc32cTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

uint32_t Crc32c(const uint8_t* data, size_t size) {
  const std::array<uint32_t, 256>& table = Crc32cTable();
  uint32_t c = ~0u;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

void PutFixed(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Protobuf wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void PutKey(std::string& out, int field, int wire_type) {
  PutVarint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

void PutBytesField(std::string& out, int field, const std::string& bytes) {
  PutKey(out, field, 2);
  PutVarint(out, bytes.size());
  out += bytes;
}

void PutDoubleField(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutKey(out, field, 1);
  PutFixed(out, bits, 8);
}

void PutFloatField(std::string& out, int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutKey(out, field, 5);
  PutFixed(out, bits, 4);
}

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The host name as a file-name part: anything but [A-Za-z0-9._-] becomes '_'.
std::string HostNameForFile() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string name = buf;
  for (char& c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!plain) c = '_';
  }
  return name;
}

}  // namespace

uint32_t MaskedCrc32c(const uint8_t* data, size_t size) {
  const uint32_t c = Crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Open(
    const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Unavailable("train.tensorboard_dir: cannot create '" + dir.string() +
                       "': " + ec.message());
  }
  const auto seconds = static_cast<int64_t>(WallTime());
  const std::string base =
      "events.out.tfevents." + std::to_string(seconds) + "." + HostNameForFile();
  // Two writers in one second (a job resumed at once) each get a file of their own.
  for (int n = 0; n < 100; ++n) {
    std::filesystem::path path = dir / (n == 0 ? base : base + "." + std::to_string(n));
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      return Unavailable("train.tensorboard_dir: cannot create '" + path.string() +
                         "': " + std::strerror(errno));
    }
    std::unique_ptr<EventFileWriter> w(new EventFileWriter(std::move(path), fd));
    std::string event;
    PutDoubleField(event, 1, WallTime());
    PutBytesField(event, 3, "brain.Event:2");
    FLEET_RETURN_IF_ERROR(w->WriteRecord(event));
    return w;
  }
  return Unavailable("train.tensorboard_dir: '" + (dir / base).string() +
                     "' and 99 numbered variants of it exist already");
}

EventFileWriter::~EventFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status EventFileWriter::WriteScalars(int64_t step,
                                     const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary, value;
  for (const auto& [tag, v] : scalars) {
    value.clear();
    PutBytesField(value, 1, tag);
    PutFloatField(value, 2, static_cast<float>(v));
    PutBytesField(summary, 1, value);
  }
  std::string event;
  PutDoubleField(event, 1, WallTime());
  PutKey(event, 2, 0);
  PutVarint(event, static_cast<uint64_t>(step));
  PutBytesField(event, 5, summary);
  return WriteRecord(event);
}

Status EventFileWriter::WriteRecord(const std::string& event) {
  record_.clear();
  PutFixed(record_, event.size(), 8);
  PutFixed(record_, MaskedCrc32c(reinterpret_cast<const uint8_t*>(record_.data()), 8), 4);
  record_ += event;
  PutFixed(record_,
           MaskedCrc32c(reinterpret_cast<const uint8_t*>(event.data()), event.size()), 4);
  size_t done = 0;
  while (done < record_.size()) {
    const ssize_t n = ::write(fd_, record_.data() + done, record_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Unavailable("train.tensorboard_dir: writing '" + path_.string() +
                         "' failed: " + std::strerror(n < 0 ? errno : EIO));
    }
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

}  // namespace fleet
