#include "rendezvous/tcp_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace fleet::tcp_store {

std::string ErrnoText(int err) { return std::strerror(err); }

std::string Address(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string PeerText(const sockaddr_storage& peer) {
  char host[INET6_ADDRSTRLEN] = {};
  if (peer.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&peer);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return Address(host, ntohs(a->sin_port));
  }
  if (peer.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&peer);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return Address(host, ntohs(a->sin6_port));
  }
  return "unknown peer";
}

std::string ShortKey(std::string_view key) {
  if (key.size() <= 64) return store_internal::QuoteKey(key);
  return store_internal::QuoteKey(key.substr(0, 64)) + "... (" + std::to_string(key.size()) +
         " bytes)";
}

void PutU8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutI64(std::string* out, int64_t v) { PutU64(out, static_cast<uint64_t>(v)); }
void PutBytes32(std::string* out, std::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
uint64_t LoadLe(const char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

int64_t ClampTimeout(std::chrono::milliseconds timeout) {
  return std::min<int64_t>(std::max<int64_t>(timeout.count(), 0), kMaxTimeoutMs);
}

int PollMs(Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left + 1, 1 << 30));
}

StatusOr<AddrInfoPtr> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return Unavailable("tcp store: cannot resolve " + Address(host, port) + ": " +
                       gai_strerror(rc));
  }
  return AddrInfoPtr(result);
}

namespace {

class Cursor {
 public:
  explicit Cursor(const std::string& in) : in_(in) {}
  bool Have(size_t n) const { return in_.size() - pos_ >= n; }
  uint64_t Take(int n) {
    uint64_t v = LoadLe(in_.data() + pos_, n);
    pos_ += static_cast<size_t>(n);
    return v;
  }
  std::string TakeBytes(size_t n) {
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

// Reads a u32-length key; the length is checked against the cap before anything is copied.
Parse TakeKey(Cursor* c, std::string* key, std::string* error) {
  if (!c->Have(4)) return Parse::kIncomplete;
  uint64_t len = c->Take(4);
  if (len > kMaxKeyBytes) {
    *error = "key of " + std::to_string(len) + " bytes exceeds the limit of " +
             std::to_string(kMaxKeyBytes);
    return Parse::kBad;
  }
  if (!c->Have(len)) return Parse::kIncomplete;
  *key = c->TakeBytes(len);
  return Parse::kDone;
}

}  // namespace

Parse ParseRequest(const std::string& in, Request* req, size_t* consumed, std::string* error) {
  Cursor c(in);
  if (!c.Have(1)) return Parse::kIncomplete;
  req->op = static_cast<uint8_t>(c.Take(1));
  req->keys.clear();
  auto key = [&]() {
    req->keys.emplace_back();
    return TakeKey(&c, &req->keys.back(), error);
  };
  Parse p;
  switch (req->op) {
    case kSet: {
      if ((p = key()) != Parse::kDone) return p;
      if (!c.Have(8)) return Parse::kIncomplete;
      uint64_t len = c.Take(8);
      if (len > kMaxValueBytes) {
        *error = "value of " + std::to_string(len) + " bytes exceeds the limit of " +
                 std::to_string(kMaxValueBytes);
        return Parse::kBad;
      }
      if (!c.Have(len)) return Parse::kIncomplete;
      req->value = c.TakeBytes(len);
      break;
    }
    case kGet:
    case kAdd:
      if ((p = key()) != Parse::kDone) return p;
      if (!c.Have(8)) return Parse::kIncomplete;
      req->number = static_cast<int64_t>(c.Take(8));
      break;
    case kWait: {
      if (!c.Have(4)) return Parse::kIncomplete;
      uint64_t n = c.Take(4);
      if (n > kMaxWaitKeys) {
        *error = "wait for " + std::to_string(n) + " keys exceeds the limit of " +
                 std::to_string(kMaxWaitKeys);
        return Parse::kBad;
      }
      for (uint64_t i = 0; i < n; ++i) {
        if ((p = key()) != Parse::kDone) return p;
      }
      if (!c.Have(8)) return Parse::kIncomplete;
      req->number = static_cast<int64_t>(c.Take(8));
      break;
    }
    case kHello:
      break;
    case kAuth:
      if (!c.Have(kMacBytes)) return Parse::kIncomplete;
      req->value = c.TakeBytes(kMacBytes);
      break;
    default:
      *error = "unknown operation " + std::to_string(req->op);
      return Parse::kBad;
  }
  *consumed = c.pos();
  return Parse::kDone;
}

std::string JobMac(std::string_view secret, std::string_view nonce) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(nonce.data()), nonce.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool SameBytes(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

StatusOr<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Internal("getrandom: " + ErrnoText(errno));
    got += static_cast<size_t>(r);
  }
  return out;
}

std::string ErrorReply(const Status& s) {
  std::string out;
  PutU8(&out, static_cast<uint8_t>(s.code()));
  std::string msg = s.message().substr(0, kMaxMessageBytes);
  PutBytes32(&out, msg);
  return out;
}

Status SendAll(int fd, std::string_view data, Clock::time_point deadline,
               const std::string& where) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n >= 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(where + ": cannot send to the server: " + ErrnoText(errno));
    }
    pollfd p{fd, POLLOUT, 0};
    int rc = ::poll(&p, 1, PollMs(deadline));
    if (rc == 0 && Clock::now() >= deadline) {
      return DeadlineExceeded(where + ": the server did not accept the request in time");
    }
  }
  return OkStatus();
}

Status RecvExact(int fd, char* buffer, size_t size, Clock::time_point deadline,
                 const std::string& where) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(fd, buffer + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Unavailable(where + ": the server closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(where + ": lost the connection to the server: " + ErrnoText(errno));
    }
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, PollMs(deadline));
    if (rc == 0 && Clock::now() >= deadline) {
      return DeadlineExceeded(where + ": no reply from the server in time");
    }
  }
  return OkStatus();
}

StatusOr<uint64_t> RecvLe(int fd, int n, Clock::time_point deadline, const std::string& where) {
  char buffer[8];
  FLEET_RETURN_IF_ERROR(RecvExact(fd, buffer, static_cast<size_t>(n), deadline, where));
  return LoadLe(buffer, n);
}

StatusOr<int> ConnectOnce(const std::string& host, int port, Clock::time_point deadline) {
  FLEET_ASSIGN_OR_RETURN(AddrInfoPtr addrs, Resolve(host, port, false));
  std::string last = "no address";
  for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = ErrnoText(errno);
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, PollMs(deadline));
      int err = ETIMEDOUT;
      socklen_t len = sizeof(err);
      if (rc > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    last = ErrnoText(errno);
    ::close(fd);
  }
  return Unavailable("tcp store: cannot connect to " + Address(host, port) + ": " + last);
}

}  // namespace fleet::tcp_store
