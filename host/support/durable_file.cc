#include "support/durable_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <limits>

namespace fleet {

namespace fs = std::filesystem;

uint32_t Crc32(std::span<const uint8_t> bytes, uint32_t crc) {
  // zlib takes a uInt length; feed it in chunks so tensors over 4 GiB are covered.
  uLong c = crc;
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const size_t n = std::min<size_t>(left, std::numeric_limits<uInt>::max() / 2);
    c = crc32(c, p, static_cast<uInt>(n));
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(c);
}

void SyncDirectory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

StatusOr<uint32_t> WriteFileDurably(const fs::path& file,
                                    const std::vector<std::span<const uint8_t>>& pieces) {
  // The writer's pid in the temporary name: processes that replace one file (servers updating a
  // checkpoint's `latest`) do not write into each other's temporary file.
  const fs::path tmp = file.string() + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Unavailable("cannot create '" + tmp.string() + "': " + std::strerror(errno));
  }
  // The checksum runs on another core while this one writes: zlib's CRC-32 (about 4 GB/s) would
  // otherwise add a quarter to the time of writing to the page cache. Small files are not worth
  // a thread.
  size_t total = 0;
  for (std::span<const uint8_t> piece : pieces) total += piece.size();
  auto checksum = [&pieces] {
    uint32_t c = 0;
    for (std::span<const uint8_t> piece : pieces) c = Crc32(piece, c);
    return c;
  };
  std::future<uint32_t> crc_future;
  if (total >= (size_t{4} << 20)) crc_future = std::async(std::launch::async, checksum);
  const auto crc_value = [&] { return crc_future.valid() ? crc_future.get() : checksum(); };
  auto fail = [&](const std::string& what, int err) {
    if (crc_future.valid()) crc_future.wait();  // it reads the caller's memory
    ::close(fd);
    ::unlink(tmp.c_str());
    return Unavailable("cannot " + what + " '" + tmp.string() + "': " + std::strerror(err));
  };
  for (std::span<const uint8_t> piece : pieces) {
    size_t done = 0;
    while (done < piece.size()) {
      const ssize_t w = ::write(fd, piece.data() + done, piece.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return fail("write", w < 0 ? errno : EIO);
      done += static_cast<size_t>(w);
    }
  }
  // The data must be on disk before the rename makes it visible under the final name.
  if (::fsync(fd) != 0) return fail("flush", errno);
  const uint32_t crc = crc_value();
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Unavailable("cannot close '" + tmp.string() + "': " + std::strerror(err));
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    ::unlink(tmp.c_str());
    return Unavailable("cannot rename '" + tmp.string() + "' to '" + file.string() +
                       "': " + ec.message());
  }
  SyncDirectory(file.has_parent_path() ? file.parent_path() : fs::path("."));
  return crc;
}

Status CheckDirectoryTarget(const fs::path& out, bool replace) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return OkStatus();
  if (!fs::is_directory(out, ec)) {
    return AlreadyExists("'" + out.string() + "' exists and is not a directory");
  }
  if (!fs::is_empty(out, ec) && !replace) {
    return AlreadyExists("'" + out.string() + "' exists and is not empty (--force replaces it)");
  }
  return OkStatus();
}

Status MakePrivateDirectories(const fs::path& dir) {
  std::error_code ec;
  // The directories that do not exist yet, outermost first.
  std::vector<fs::path> missing;
  for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(p, ec);
       p = p.parent_path()) {
    missing.insert(missing.begin(), p);
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("cannot create '" + dir.string() + "': " + ec.message());
  for (const fs::path& p : missing) {
    fs::permissions(p, fs::perms::owner_all, fs::perm_options::replace, ec);
    if (ec) return Unavailable("cannot make '" + p.string() + "' private: " + ec.message());
  }
  return OkStatus();
}

StatusOr<fs::path> TempDirBeside(const fs::path& out) {
  const fs::path abs = fs::absolute(out);
  const fs::path tmp = abs.parent_path() / ("." + abs.filename().string() + ".tmp-" +
                                            std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  FLEET_RETURN_IF_ERROR(MakePrivateDirectories(tmp));
  return tmp;
}

Status CommitDirectory(const fs::path& tmp, const fs::path& out, bool replace) {
  std::error_code ec;
  if (Status s = CheckDirectoryTarget(out, replace); !s.ok()) {
    fs::remove_all(tmp, ec);
    return s;
  }
  SyncDirectory(tmp);
  const fs::path abs = fs::absolute(out);
  const fs::path old = abs.parent_path() / ("." + abs.filename().string() + ".old-" +
                                            std::to_string(::getpid()));
  const bool existed = fs::exists(abs, ec);
  if (existed) {
    fs::rename(abs, old, ec);
    if (ec) {
      fs::remove_all(tmp, ec);
      return Unavailable("cannot move '" + out.string() + "' aside: " + ec.message());
    }
  }
  fs::rename(tmp, abs, ec);
  if (ec) {
    const std::string why = ec.message();
    if (existed) fs::rename(old, abs, ec);  // put the old one back
    fs::remove_all(tmp, ec);
    return Unavailable("cannot rename '" + tmp.string() + "' to '" + out.string() + "': " + why);
  }
  SyncDirectory(abs.parent_path());
  if (existed) fs::remove_all(old, ec);
  return OkStatus();
}

}  // namespace fleet
