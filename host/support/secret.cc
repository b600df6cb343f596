#include "support/secret.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "support/text.h"

namespace fleet {
namespace {

std::string FileType(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::string> ReadJobSecretFile(const std::string& path) {
  std::string name = "job secret file " + QuoteForMessage(path, 200);
  if (path.empty()) return InvalidArgument("job secret file: the path is empty");
  std::error_code ec;
  if (std::filesystem::is_symlink(path, ec)) {
    // The checks below are on the target; say which file that is.
    const std::filesystem::path target = std::filesystem::canonical(path, ec);
    if (!ec) name += " (a link to " + QuoteForMessage(target.string(), 200) + ")";
  }
  // O_NONBLOCK: opening a FIFO nobody writes to would otherwise wait forever.
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    const int err = errno;
    const std::string why = name + ": " + std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return NotFound(why);
    if (err == EACCES || err == EPERM) return PermissionDenied(why);
    return FailedPrecondition(why);
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) {
    return FailedPrecondition(name + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return FailedPrecondition(name + " is " + FileType(st.st_mode) +
                              "; a job secret must be in a regular file");
  }
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return PermissionDenied(name + " is owned by uid " + std::to_string(st.st_uid) +
                            ", not by this user (uid " + std::to_string(me) +
                            ") or root: whoever owns it can change the job's secret");
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return PermissionDenied(name + " has mode " + Octal(st.st_mode) +
                            ": group or others may read or change it; a secret file must be "
                            "private to its owner (chmod 600 it)");
  }
  const std::string too_large = name + " is larger than " +
                                std::to_string(kMaxJobSecretFileBytes) +
                                " bytes; a job secret file holds the secret and nothing else";
  if (st.st_size > static_cast<off_t>(kMaxJobSecretFileBytes)) {
    return InvalidArgument(too_large);
  }
  // Read one byte past the cap, so a file that grew since fstat is still caught.
  std::string secret(kMaxJobSecretFileBytes + 1, '\0');
  size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = ::read(fd.get(), secret.data() + got, secret.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailedPrecondition(name + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxJobSecretFileBytes) return InvalidArgument(too_large);
  secret.resize(got);
  // `echo` and editors end the file with a line break that is no part of the secret.
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if (secret.empty()) return InvalidArgument(name + " is empty");
  if (secret.size() < kMinJobSecretBytes) {
    return InvalidArgument(name + " holds " + std::to_string(secret.size()) +
                           " bytes; a job secret needs at least " +
                           std::to_string(kMinJobSecretBytes) +
                           " (e.g. `openssl rand -hex 32`)");
  }
  return secret;
}

StatusOr<std::string> JobSecretFromEnvironment(const std::map<std::string, std::string>& env) {
  auto value = [&env](const char* key) {
    auto it = env.find(key);
    return it != env.end() ? it->second : std::string();
  };
  if (std::string secret = value(kJobSecretEnv); !secret.empty()) {
    if (secret.size() < kMinJobSecretBytes) {
      return InvalidArgument(std::string(kJobSecretEnv) + " holds " +
                             std::to_string(secret.size()) +
                             " bytes; a job secret needs at least " +
                             std::to_string(kMinJobSecretBytes));
    }
    return secret;
  }
  if (std::string path = value(kJobSecretFileEnv); !path.empty()) {
    StatusOr<std::string> secret = ReadJobSecretFile(path);
    if (!secret.ok()) return secret.status().WithContext(kJobSecretFileEnv);
    return secret;
  }
  return std::string();
}

StatusOr<std::string> JobSecretFromEnvironment() {
  std::map<std::string, std::string> env;
  for (const char* key : {kJobSecretEnv, kJobSecretFileEnv}) {
    if (const char* v = std::getenv(key)) env[key] = v;
  }
  return JobSecretFromEnvironment(env);
}

std::string TransportTokenFromSecret(std::string_view secret) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr std::string_view kLabel = "fleet transport token v1";
  if (secret.empty()) return "";  // no secret, no token (never HMAC under an empty key)
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(kLabel.data()), kLabel.size(), mac, &len);
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[mac[i] >> 4];
    hex += kHex[mac[i] & 0xF];
  }
  return hex;
}

}  // namespace fleet
