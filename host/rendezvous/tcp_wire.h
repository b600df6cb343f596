// The TCP store's wire format and socket handling, shared by its server (tcp_store_server.cc)
// and client (tcp_store.cc). The protocol is described in tcp_store.h. Internal to rendezvous/.
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/tcp_store.h"
#include "support/status.h"

namespace fleet::tcp_store {

using Clock = std::chrono::steady_clock;

// Past this a timeout is treated as "forever" (it keeps deadline arithmetic from overflowing).
constexpr int64_t kMaxTimeoutMs = int64_t{365} * 24 * 3600 * 1000;
constexpr uint32_t kMaxMessageBytes = 1 << 20;

std::string ErrnoText(int err);
// "host:port", IPv6 hosts in brackets.
std::string Address(const std::string& host, int port);
// Whether `host` names this machine's loopback ("localhost", 127.x.y.z, ::1).
bool IsLoopbackHost(const std::string& host);
// The address of an accepted peer, as Address writes it ("unknown peer" for another family).
std::string PeerText(const sockaddr_storage& peer);
// A key for messages: quoted, cut after 64 bytes.
std::string ShortKey(std::string_view key);

// Little-endian encoding.
void PutU8(std::string* out, uint8_t v);
void PutU32(std::string* out, uint32_t v);
void PutU64(std::string* out, uint64_t v);
void PutI64(std::string* out, int64_t v);
void PutBytes32(std::string* out, std::string_view s);  // u32 length, then the bytes
uint64_t LoadLe(const char* p, int n);

// A timeout in ms, clamped to [0, kMaxTimeoutMs].
int64_t ClampTimeout(std::chrono::milliseconds timeout);
// What is left until `deadline` as a poll() timeout.
int PollMs(Clock::time_point deadline);

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;
StatusOr<AddrInfoPtr> Resolve(const std::string& host, int port, bool passive);

// ---- server side: incremental request parsing ----

struct Request {
  uint8_t op = 0;
  std::vector<std::string> keys;
  std::string value;
  int64_t number = 0;  // timeout_ms for GET/WAIT, delta for ADD
};

enum class Parse { kIncomplete, kDone, kBad };

// Parses one request from the start of `in`. kDone sets `req` and `consumed`; kIncomplete asks
// for more bytes; kBad sets `error` (a length over its cap is refused before anything of that
// length is copied).
Parse ParseRequest(const std::string& in, Request* req, size_t* consumed, std::string* error);

// HMAC-SHA256(secret, nonce): what AUTH carries (kMacBytes).
std::string JobMac(std::string_view secret, std::string_view nonce);
// Constant-time equality of two byte strings of the same length (false for different lengths).
bool SameBytes(std::string_view a, std::string_view b);
// `n` random bytes from the kernel.
StatusOr<std::string> RandomBytes(size_t n);

// The reply for a failed request: code, then the message (cut to kMaxMessageBytes).
std::string ErrorReply(const Status& s);

// ---- client side: blocking I/O with a deadline; `where` prefixes errors ----

Status SendAll(int fd, std::string_view data, Clock::time_point deadline,
               const std::string& where);
Status RecvExact(int fd, char* buffer, size_t size, Clock::time_point deadline,
                 const std::string& where);
StatusOr<uint64_t> RecvLe(int fd, int n, Clock::time_point deadline, const std::string& where);
// One non-blocking connect attempt bounded by the deadline; returns the connected socket.
StatusOr<int> ConnectOnce(const std::string& host, int port, Clock::time_point deadline);

}  // namespace fleet::tcp_store
