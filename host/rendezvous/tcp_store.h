// A rendezvous store served over TCP by rank 0 to the ranks of every machine (DESIGN.md §6).
//
// Protocol (all integers little-endian; one request then one reply per connection at a time):
//   request  = op:u8 body
//     SET  (1)  key value           -> reply OK
//     GET  (2)  key timeout_ms:i64  -> reply OK value | DEADLINE_EXCEEDED at the deadline
//     ADD  (3)  key delta:i64       -> reply OK sum:i64 | INVALID_ARGUMENT
//     WAIT (4)  n:u32 key*n timeout_ms:i64 -> reply OK | DEADLINE_EXCEEDED naming missing keys
//     HELLO (5)                      -> reply OK nonce:32 bytes (a server with a job secret)
//     AUTH (6)  mac:32 bytes         -> reply OK | UNAUTHENTICATED, then the connection closes
// A server started with a job secret answers nothing but HELLO and AUTH until the connection
// has authenticated: AUTH carries HMAC-SHA256(secret, nonce) for the nonce HELLO returned on
// that connection, compared in constant time. Anything else first is UNAUTHENTICATED; every
// refusal is logged with the peer's address. The secret itself never crosses the wire.
//   key      = len:u32 bytes   (len <= kMaxKeyBytes)
//   value    = len:u64 bytes   (len <= kMaxValueBytes)
//   reply    = code:u8 (fleet::Code) then, for OK, the op's payload, else message:u32-len bytes
// A length past its cap, an unknown op or n > kMaxWaitKeys is answered INVALID_ARGUMENT and the
// connection is closed; the cap is checked before anything is allocated.
//
// The server waits on its deadlines itself: a blocked GET/WAIT is answered when its keys arrive
// or its deadline passes. The client gives a reply `io_timeout` beyond the request's own
// deadline; a server that goes away (connection closed or reset) is UNAVAILABLE naming host:port.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/store.h"

namespace fleet {

namespace tcp_store {
constexpr uint32_t kMaxKeyBytes = 4096;
constexpr uint64_t kMaxValueBytes = uint64_t{64} << 20;
constexpr uint32_t kMaxWaitKeys = 65536;
enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4, kHello = 5, kAuth = 6 };
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
}  // namespace tcp_store

// What one server holds at most, so that a peer (a stranger on the port among them) cannot grow
// it without bound. A SET or ADD past a quota is answered RESOURCE_EXHAUSTED and logged with
// the peer's address; a connection past max_clients is closed as soon as it is accepted, and
// while the process is out of file descriptors the server stops accepting for a moment instead
// of spinning on the listening socket.
struct TcpStoreLimits {
  size_t max_clients = 8192;  // every rank of a large job may hold a few connections
  uint64_t max_bytes = uint64_t{1} << 30;  // keys and values together
  size_t max_keys = size_t{1} << 20;
};

// Serves a store on host:port from its own thread. Threading: Start/Stop/port from any thread.
class TcpStoreServer {
 public:
  // Binds and listens on host:port and keeps the socket. Port 0 picks a free port (see port()).
  // A port in use is UNAVAILABLE naming host:port.
  // A non-empty `secret` (the job secret, JobSecretFromEnv) makes every connection
  // authenticate first; serving a non-loopback address without one is logged as a warning.
  static StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port,
                                                         TcpStoreLimits limits = {},
                                                         std::string secret = "");
  ~TcpStoreServer();

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  const std::string& host() const { return host_; }

  // Closes the listening socket and every connection (their clients see UNAVAILABLE) and joins
  // the thread. Idempotent; the destructor calls it.
  void Stop();

 private:
  struct State;
  TcpStoreServer(std::string host, int port, int listen_fd, int wake_read, int wake_write);
  void Serve();

  std::string host_;
  int port_;
  int listen_fd_;
  int wake_read_;
  int wake_write_;
  std::unique_ptr<State> state_;
  std::thread thread_;
  std::mutex stop_mu_;
  bool stopped_ = false;
};

struct TcpStoreOptions {
  // How long Connect keeps retrying (the server may start later).
  std::chrono::milliseconds connect_timeout{30000};
  // How long a Set/Add may take, and the slack given to a Get/Wait reply past its deadline.
  std::chrono::milliseconds io_timeout{30000};
  // The job secret; non-empty: every connection authenticates before its first request.
  std::string secret;
};

// A fresh secret: 32 random bytes from the kernel, in hex.
StatusOr<std::string> NewJobSecret();

// A client of TcpStoreServer. Thread-safe: each call borrows an idle connection or opens one,
// so a thread blocked in Get never stops another thread's Set on the same client.
class TcpStore final : public Store {
 public:
  // Connects, retrying until options.connect_timeout; DEADLINE_EXCEEDED names host:port and
  // the last error.
  static StatusOr<std::unique_ptr<TcpStore>> Connect(const std::string& host, int port,
                                                     TcpStoreOptions options = {});
  ~TcpStore() override;

  const std::string& address() const { return address_; }

 protected:
  Status DoSet(const std::string& key, std::string_view value) override;
  StatusOr<std::string> DoGet(const std::string& key,
                              std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> DoAdd(const std::string& key, int64_t delta) override;
  Status DoWait(const std::vector<std::string>& keys,
                std::chrono::milliseconds timeout) override;

 private:
  using Clock = std::chrono::steady_clock;
  TcpStore(std::string host, int port, TcpStoreOptions options);

  // Sends `request` and reads the reply header; on OK returns the connection with the payload
  // still unread through `read_payload`.
  template <typename ReadPayload>
  Status Call(const std::string& request, Clock::time_point deadline, const std::string& what,
              ReadPayload read_payload);
  StatusOr<int> Borrow(Clock::time_point deadline);
  // A new connection, authenticated when options_.secret is set.
  StatusOr<int> Open(Clock::time_point deadline);
  // INVALID_ARGUMENT for a key over tcp_store::kMaxKeyBytes, before anything is sent.
  Status CheckKey(const std::string& key) const;
  void Return(int fd);

  std::string host_;
  int port_;
  std::string address_;
  TcpStoreOptions options_;
  std::mutex mu_;
  std::vector<int> idle_;
};

}  // namespace fleet
