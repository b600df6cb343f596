#include "support/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "support/text.h"

namespace fleet {

std::string InputFileKind(unsigned mode) {
  const mode_t m = static_cast<mode_t>(mode);
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISREG(m)) return "a regular file";
  return "not a regular file";
}

namespace {

std::string Name(const std::filesystem::path& path, std::string_view what) {
  std::string name(what);
  if (!name.empty()) name += " ";
  return name + QuoteForMessage(path.string(), 200);
}

template <typename Out>
StatusOr<Out> ReadCapped(const std::filesystem::path& path, std::string_view what,
                         size_t max_bytes) {
  FLEET_ASSIGN_OR_RETURN(const int fd, OpenInputFile(path, what));
  const std::string name = Name(path, what);
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return FailedPrecondition(name + ": " + std::strerror(err));
  }
  const std::string too_large =
      name + " is larger than " + std::to_string(max_bytes) + " bytes, the most read from it";
  if (st.st_size < 0 || static_cast<uintmax_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return ResourceExhausted(too_large);
  }
  // Sized from fstat of a regular file within the cap, plus one byte to see growth past it.
  const size_t want = static_cast<size_t>(st.st_size);
  Out out(want < max_bytes ? want + 1 : max_bytes + 1, 0);
  size_t got = 0;
  while (true) {
    if (got == out.size()) {
      if (got > max_bytes) break;
      out.resize(std::min(max_bytes + 1, out.size() * 2 + 4096));
    }
    const ssize_t n = ::read(fd, reinterpret_cast<char*>(out.data()) + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return DataLoss("cannot read " + name + ": " + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > max_bytes) return ResourceExhausted(too_large);
  out.resize(got);
  return out;
}

}  // namespace

StatusOr<int> OpenInputFile(const std::filesystem::path& path, std::string_view what) {
  const std::string name = Name(path, what);
  if (path.empty()) return InvalidArgument(std::string(what) + ": the path is empty");
  // O_NONBLOCK: opening a FIFO nobody writes to would otherwise wait forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    const std::string why = "cannot open " + name + ": " + std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return NotFound(why);
    if (err == EACCES || err == EPERM) return PermissionDenied(why);
    return FailedPrecondition(why);
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return FailedPrecondition(name + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return FailedPrecondition(name + " is " + InputFileKind(st.st_mode) +
                              ", not a regular file");
  }
  // A regular file never blocks, but the readers expect ordinary blocking semantics.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

StatusOr<std::FILE*> OpenInputStream(const std::filesystem::path& path, std::string_view what) {
  FLEET_ASSIGN_OR_RETURN(const int fd, OpenInputFile(path, what));
  std::FILE* file = ::fdopen(fd, "rb");
  if (file == nullptr) {
    const int err = errno;
    ::close(fd);
    return FailedPrecondition("cannot open " + Name(path, what) + ": " + std::strerror(err));
  }
  return file;
}

StatusOr<std::string> ReadInputFileText(const std::filesystem::path& path, std::string_view what,
                                        size_t max_bytes) {
  return ReadCapped<std::string>(path, what, max_bytes);
}

StatusOr<std::vector<uint8_t>> ReadInputFileBytes(const std::filesystem::path& path,
                                                  std::string_view what, size_t max_bytes) {
  return ReadCapped<std::vector<uint8_t>>(path, what, max_bytes);
}

}  // namespace fleet
