#include "rendezvous/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

namespace fleet {
namespace {

constexpr size_t kMaxFileName = 240;

std::string ErrnoText(int err) { return std::strerror(err); }

// Holds an exclusive flock on the store's lock file for its lifetime. Each holder opens its own
// descriptor, so threads of one process exclude each other as processes do.
class LockFile {
 public:
  ~LockFile() {
    if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
  }
  Status Acquire(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      return Unavailable("file store: cannot open lock file " + path + ": " + ErrnoText(errno));
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        return Unavailable("file store: cannot lock " + path + ": " + ErrnoText(errno));
      }
    }
    return OkStatus();
  }

 private:
  int fd_ = -1;
};

// Polls `ready` with a sleep growing from 1 ms to 20 ms until it answers true or the deadline.
template <typename Ready>
StatusOr<bool> PollUntil(std::chrono::milliseconds timeout, Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    FLEET_ASSIGN_OR_RETURN(bool done, ready());
    if (done) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause,
                                                                             deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace

StatusOr<std::unique_ptr<FileStore>> FileStore::Open(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("file store: the directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable("file store: cannot create directory " + dir + ": " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) {
    return InvalidArgument("file store: " + dir + " is not a directory");
  }
  return std::unique_ptr<FileStore>(new FileStore(dir));
}

std::string FileStore::EncodeKey(std::string_view key) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = "k_";
  for (unsigned char c : key) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

StatusOr<std::string> FileStore::PathOf(const std::string& key) const {
  std::string name = EncodeKey(key);
  if (name.size() > kMaxFileName) {
    return InvalidArgument(Name() + ": key " + store_internal::QuoteKey(key) +
                           " is too long (its file name would have " +
                           std::to_string(name.size()) + " bytes, at most " +
                           std::to_string(kMaxFileName) + ")");
  }
  return dir_ + "/" + name;
}

Status FileStore::WriteValue(const std::string& key, const std::string& path,
                             std::string_view value) {
  std::string tmp = dir_ + "/tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    return Unavailable(Name() + ": cannot create a temporary file for key " +
                       store_internal::QuoteKey(key) + ": " + ErrnoText(errno));
  }
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Unavailable(Name() + ": cannot " + what + " key " + store_internal::QuoteKey(key) +
                       ": " + ErrnoText(err));
  };
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    fd = -1;
    int err = errno;
    ::unlink(tmp.c_str());
    return Unavailable(Name() + ": cannot close key " + store_internal::QuoteKey(key) + ": " +
                       ErrnoText(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Unavailable(Name() + ": cannot rename into key " + store_internal::QuoteKey(key) +
                       ": " + ErrnoText(err));
  }
  return OkStatus();
}

StatusOr<std::optional<std::string>> FileStore::ReadValue(const std::string& key,
                                                          const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Unavailable(Name() + ": cannot open key " + store_internal::QuoteKey(key) + ": " +
                       ErrnoText(errno));
  }
  std::string value;
  char buffer[65536];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return Unavailable(Name() + ": cannot read key " + store_internal::QuoteKey(key) + ": " +
                         ErrnoText(err));
    }
    if (n == 0) break;
    value.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return std::optional<std::string>(std::move(value));
}

Status FileStore::DoSet(const std::string& key, std::string_view value) {
  FLEET_ASSIGN_OR_RETURN(std::string path, PathOf(key));
  // The lock orders a Set against a concurrent Add's read-modify-write.
  LockFile lock;
  FLEET_RETURN_IF_ERROR(lock.Acquire(dir_ + "/lock"));
  return WriteValue(key, path, value);
}

StatusOr<std::string> FileStore::DoGet(const std::string& key,
                                       std::chrono::milliseconds timeout) {
  FLEET_ASSIGN_OR_RETURN(std::string path, PathOf(key));
  std::optional<std::string> value;
  FLEET_ASSIGN_OR_RETURN(bool found, PollUntil(timeout, [&]() -> StatusOr<bool> {
                           FLEET_ASSIGN_OR_RETURN(value, ReadValue(key, path));
                           return value.has_value();
                         }));
  if (!found) return store_internal::MissingKeysError(Name(), {key}, timeout);
  return std::move(*value);
}

StatusOr<int64_t> FileStore::DoAdd(const std::string& key, int64_t delta) {
  FLEET_ASSIGN_OR_RETURN(std::string path, PathOf(key));
  LockFile lock;
  FLEET_RETURN_IF_ERROR(lock.Acquire(dir_ + "/lock"));
  FLEET_ASSIGN_OR_RETURN(std::optional<std::string> current, ReadValue(key, path));
  int64_t sum = delta;
  if (current.has_value()) {
    FLEET_ASSIGN_OR_RETURN(int64_t before, store_internal::ParseCounter(Name(), key, *current));
    sum += before;
  }
  FLEET_RETURN_IF_ERROR(WriteValue(key, path, std::to_string(sum)));
  return sum;
}

Status FileStore::DoWait(const std::vector<std::string>& keys,
                         std::chrono::milliseconds timeout) {
  std::vector<std::string> paths;
  for (const std::string& k : keys) {
    FLEET_ASSIGN_OR_RETURN(std::string path, PathOf(k));
    paths.push_back(std::move(path));
  }
  std::vector<std::string> missing;
  FLEET_ASSIGN_OR_RETURN(bool all, PollUntil(timeout, [&]() -> StatusOr<bool> {
                           missing.clear();
                           for (size_t i = 0; i < keys.size(); ++i) {
                             struct stat st;
                             if (::stat(paths[i].c_str(), &st) == 0) continue;
                             if (errno != ENOENT) {
                               return Unavailable(Name() + ": cannot stat key " +
                                                  store_internal::QuoteKey(keys[i]) + ": " +
                                                  ErrnoText(errno));
                             }
                             missing.push_back(keys[i]);
                           }
                           return missing.empty();
                         }));
  if (all) return OkStatus();
  return store_internal::MissingKeysError(Name(), missing, timeout);
}

}  // namespace fleet
