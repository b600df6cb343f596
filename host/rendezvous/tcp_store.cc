#include "rendezvous/tcp_store.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "rendezvous/tcp_wire.h"

namespace fleet {

// The wire format and its helpers (tcp_wire.h).
using tcp_store::Clock;
using tcp_store::kMaxMessageBytes;
using tcp_store::Address;
using tcp_store::ShortKey;
using tcp_store::PutU8;
using tcp_store::PutU32;
using tcp_store::PutU64;
using tcp_store::PutI64;
using tcp_store::PutBytes32;
using tcp_store::ClampTimeout;
using tcp_store::SendAll;
using tcp_store::RecvExact;
using tcp_store::RecvLe;
using tcp_store::ConnectOnce;
using std::chrono::milliseconds;

TcpStore::TcpStore(std::string host, int port, TcpStoreOptions options)
    : host_(std::move(host)), port_(port), options_(options) {
  address_ = Address(host_, port_);
}

TcpStore::~TcpStore() {
  for (int fd : idle_) ::close(fd);
}

StatusOr<std::string> NewJobSecret() {
  static constexpr char kHex[] = "0123456789abcdef";
  FLEET_ASSIGN_OR_RETURN(std::string bytes, tcp_store::RandomBytes(32));
  std::string hex;
  for (unsigned char c : bytes) {
    hex += kHex[c >> 4];
    hex += kHex[c & 0xF];
  }
  return hex;
}

StatusOr<int> TcpStore::Open(Clock::time_point deadline) {
  FLEET_ASSIGN_OR_RETURN(int fd, ConnectOnce(host_, port_, deadline));
  if (options_.secret.empty()) return fd;
  // HELLO for a nonce, then AUTH with its HMAC under the secret.
  const std::string where = "tcp store " + address_ + " (authenticating)";
  auto handshake = [&]() -> Status {
    auto reply_code = [&]() -> Status {
      FLEET_ASSIGN_OR_RETURN(uint64_t code, RecvLe(fd, 1, deadline, where));
      if (code == 0) return OkStatus();
      FLEET_ASSIGN_OR_RETURN(uint64_t len, RecvLe(fd, 4, deadline, where));
      if (len > kMaxMessageBytes) return Unavailable(where + ": malformed error reply");
      std::string message(len, '\0');
      FLEET_RETURN_IF_ERROR(RecvExact(fd, message.data(), len, deadline, where));
      if (code > static_cast<uint64_t>(Code::kUnauthenticated)) code = 2;  // kUnknown
      return Status(static_cast<Code>(code), message);
    };
    std::string hello;
    PutU8(&hello, tcp_store::kHello);
    FLEET_RETURN_IF_ERROR(SendAll(fd, hello, deadline, where));
    FLEET_RETURN_IF_ERROR(reply_code());
    std::string nonce(tcp_store::kNonceBytes, '\0');
    FLEET_RETURN_IF_ERROR(RecvExact(fd, nonce.data(), nonce.size(), deadline, where));
    std::string auth;
    PutU8(&auth, tcp_store::kAuth);
    auth += tcp_store::JobMac(options_.secret, nonce);
    FLEET_RETURN_IF_ERROR(SendAll(fd, auth, deadline, where));
    return reply_code();
  };
  if (Status s = handshake(); !s.ok()) {
    ::close(fd);
    return s;
  }
  return fd;
}

StatusOr<std::unique_ptr<TcpStore>> TcpStore::Connect(const std::string& host, int port,
                                                       TcpStoreOptions options) {
  std::unique_ptr<TcpStore> store(new TcpStore(host, port, options));
  auto deadline = Clock::now() + milliseconds(ClampTimeout(options.connect_timeout));
  auto pause = milliseconds(10);
  while (true) {
    StatusOr<int> fd = store->Open(deadline);
    if (fd.ok()) {
      store->idle_.push_back(*fd);
      return store;
    }
    // A server that answered and refused will refuse again: no retrying that.
    const Code code = fd.status().code();
    if (code == Code::kUnauthenticated || code == Code::kFailedPrecondition) {
      return fd.status();
    }
    auto now = Clock::now();
    if (now >= deadline) {
      return DeadlineExceeded("tcp store: could not connect to " + store->address_ +
                              " within " + std::to_string(options.connect_timeout.count()) +
                              " ms (" + fd.status().message() + ")");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, milliseconds(200));
  }
}

StatusOr<int> TcpStore::Borrow(Clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      int fd = idle_.back();
      idle_.pop_back();
      return fd;
    }
  }
  return Open(deadline);
}

void TcpStore::Return(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(fd);
}

template <typename ReadPayload>
Status TcpStore::Call(const std::string& request, Clock::time_point deadline,
                      const std::string& what, ReadPayload read_payload) {
  std::string where = "tcp store " + address_ + " (" + what + ")";
  FLEET_ASSIGN_OR_RETURN(int fd, Borrow(deadline));
  // An error the server answered with is the call's result and leaves the connection usable,
  // except after a bad request, which the server answers and then drops; a transport error
  // leaves the connection in an unknown state.
  bool answered = false;
  auto io = [&]() -> Status {
    FLEET_RETURN_IF_ERROR(SendAll(fd, request, deadline, where));
    FLEET_ASSIGN_OR_RETURN(uint64_t code, RecvLe(fd, 1, deadline, where));
    if (code == 0) {
      Status s = read_payload(fd, where);
      answered = s.ok();
      return s;
    }
    FLEET_ASSIGN_OR_RETURN(uint64_t len, RecvLe(fd, 4, deadline, where));
    if (len > kMaxMessageBytes) return Unavailable(where + ": malformed error reply");
    std::string message(len, '\0');
    FLEET_RETURN_IF_ERROR(RecvExact(fd, message.data(), len, deadline, where));
    if (code > static_cast<uint64_t>(Code::kUnauthenticated)) code = 2;  // kUnknown
    // The server closes the connection after a bad request and after a refusal.
    answered = code != static_cast<uint64_t>(Code::kInvalidArgument) &&
               code != static_cast<uint64_t>(Code::kUnauthenticated);
    return Status(static_cast<Code>(code), message);
  };
  Status s = io();
  if (answered) {
    Return(fd);
  } else {
    ::close(fd);
  }
  return s;
}

Status TcpStore::CheckKey(const std::string& key) const {
  if (key.size() <= tcp_store::kMaxKeyBytes) return OkStatus();
  return InvalidArgument("tcp store " + address_ + ": key " + ShortKey(key) +
                         " exceeds the limit of " + std::to_string(tcp_store::kMaxKeyBytes) +
                         " bytes");
}

Status TcpStore::DoSet(const std::string& key, std::string_view value) {
  FLEET_RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > tcp_store::kMaxValueBytes) {
    return InvalidArgument("tcp store " + address_ + ": the value of key " + ShortKey(key) +
                           " has " + std::to_string(value.size()) +
                           " bytes, more than the limit of " +
                           std::to_string(tcp_store::kMaxValueBytes));
  }
  std::string request;
  PutU8(&request, tcp_store::kSet);
  PutBytes32(&request, key);
  PutU64(&request, value.size());
  request.append(value);
  auto deadline = Clock::now() + milliseconds(ClampTimeout(options_.io_timeout));
  return Call(request, deadline, "set " + ShortKey(key),
              [](int, const std::string&) { return OkStatus(); });
}

StatusOr<std::string> TcpStore::DoGet(const std::string& key, milliseconds timeout) {
  FLEET_RETURN_IF_ERROR(CheckKey(key));
  int64_t ms = ClampTimeout(timeout);
  std::string request;
  PutU8(&request, tcp_store::kGet);
  PutBytes32(&request, key);
  PutI64(&request, ms);
  auto deadline = Clock::now() + milliseconds(ms) + milliseconds(ClampTimeout(options_.io_timeout));
  std::string value;
  FLEET_RETURN_IF_ERROR(Call(request, deadline, "get " + ShortKey(key),
                             [&](int fd, const std::string& where) -> Status {
                               FLEET_ASSIGN_OR_RETURN(uint64_t len,
                                                      RecvLe(fd, 8, deadline, where));
                               if (len > tcp_store::kMaxValueBytes) {
                                 return Unavailable(where + ": reply of " +
                                                    std::to_string(len) + " bytes is too big");
                               }
                               value.resize(len);
                               return RecvExact(fd, value.data(), len, deadline, where);
                             }));
  return value;
}

StatusOr<int64_t> TcpStore::DoAdd(const std::string& key, int64_t delta) {
  FLEET_RETURN_IF_ERROR(CheckKey(key));
  std::string request;
  PutU8(&request, tcp_store::kAdd);
  PutBytes32(&request, key);
  PutI64(&request, delta);
  auto deadline = Clock::now() + milliseconds(ClampTimeout(options_.io_timeout));
  int64_t sum = 0;
  FLEET_RETURN_IF_ERROR(Call(request, deadline, "add " + ShortKey(key),
                             [&](int fd, const std::string& where) -> Status {
                               FLEET_ASSIGN_OR_RETURN(uint64_t v,
                                                      RecvLe(fd, 8, deadline, where));
                               sum = static_cast<int64_t>(v);
                               return OkStatus();
                             }));
  return sum;
}

Status TcpStore::DoWait(const std::vector<std::string>& keys, milliseconds timeout) {
  if (keys.size() > tcp_store::kMaxWaitKeys) {
    return InvalidArgument("tcp store " + address_ + ": wait for " +
                           std::to_string(keys.size()) + " keys exceeds the limit of " +
                           std::to_string(tcp_store::kMaxWaitKeys));
  }
  int64_t ms = ClampTimeout(timeout);
  std::string request;
  PutU8(&request, tcp_store::kWait);
  PutU32(&request, static_cast<uint32_t>(keys.size()));
  for (const std::string& k : keys) {
    FLEET_RETURN_IF_ERROR(CheckKey(k));
    PutBytes32(&request, k);
  }
  PutI64(&request, ms);
  auto deadline = Clock::now() + milliseconds(ms) + milliseconds(ClampTimeout(options_.io_timeout));
  return Call(request, deadline, "wait", [](int, const std::string&) { return OkStatus(); });
}

}  // namespace fleet
