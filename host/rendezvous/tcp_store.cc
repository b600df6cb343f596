#include "rendezvous/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <map>

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Past this a timeout is treated as "forever" (it keeps deadline arithmetic from overflowing).
constexpr int64_t kMaxTimeoutMs = int64_t{365} * 24 * 3600 * 1000;
constexpr uint32_t kMaxMessageBytes = 1 << 20;

std::string ErrnoText(int err) { return std::strerror(err); }

std::string Address(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
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

int64_t ClampTimeout(milliseconds timeout) {
  return std::min<int64_t>(std::max<int64_t>(timeout.count(), 0), kMaxTimeoutMs);
}

int PollMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left + 1, 1 << 30));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

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

// ---- incremental request parsing (server side) ----

struct Request {
  uint8_t op = 0;
  std::vector<std::string> keys;
  std::string value;
  int64_t number = 0;  // timeout_ms for GET/WAIT, delta for ADD
};

enum class Parse { kIncomplete, kDone, kBad };

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
  if (len > tcp_store::kMaxKeyBytes) {
    *error = "key of " + std::to_string(len) + " bytes exceeds the limit of " +
             std::to_string(tcp_store::kMaxKeyBytes);
    return Parse::kBad;
  }
  if (!c->Have(len)) return Parse::kIncomplete;
  *key = c->TakeBytes(len);
  return Parse::kDone;
}

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
    case tcp_store::kSet: {
      if ((p = key()) != Parse::kDone) return p;
      if (!c.Have(8)) return Parse::kIncomplete;
      uint64_t len = c.Take(8);
      if (len > tcp_store::kMaxValueBytes) {
        *error = "value of " + std::to_string(len) + " bytes exceeds the limit of " +
                 std::to_string(tcp_store::kMaxValueBytes);
        return Parse::kBad;
      }
      if (!c.Have(len)) return Parse::kIncomplete;
      req->value = c.TakeBytes(len);
      break;
    }
    case tcp_store::kGet:
    case tcp_store::kAdd:
      if ((p = key()) != Parse::kDone) return p;
      if (!c.Have(8)) return Parse::kIncomplete;
      req->number = static_cast<int64_t>(c.Take(8));
      break;
    case tcp_store::kWait: {
      if (!c.Have(4)) return Parse::kIncomplete;
      uint64_t n = c.Take(4);
      if (n > tcp_store::kMaxWaitKeys) {
        *error = "wait for " + std::to_string(n) + " keys exceeds the limit of " +
                 std::to_string(tcp_store::kMaxWaitKeys);
        return Parse::kBad;
      }
      for (uint64_t i = 0; i < n; ++i) {
        if ((p = key()) != Parse::kDone) return p;
      }
      if (!c.Have(8)) return Parse::kIncomplete;
      req->number = static_cast<int64_t>(c.Take(8));
      break;
    }
    default:
      *error = "unknown operation " + std::to_string(req->op);
      return Parse::kBad;
  }
  *consumed = c.pos();
  return Parse::kDone;
}

std::string ErrorReply(const Status& s) {
  std::string out;
  PutU8(&out, static_cast<uint8_t>(s.code()));
  std::string msg = s.message().substr(0, kMaxMessageBytes);
  PutBytes32(&out, msg);
  return out;
}

// ---- blocking I/O with a deadline (client side) ----

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

// One non-blocking connect attempt bounded by the deadline; returns the connected socket.
StatusOr<int> ConnectOnce(const std::string& host, int port, Clock::time_point deadline) {
  FLEET_ASSIGN_OR_RETURN(AddrInfoPtr addrs, Resolve(host, port, false));
  std::string last = "no address";
  for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      a->ai_protocol);
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

}  // namespace

// ---- server ----

struct TcpStoreServer::State {
  struct Client {
    int fd = -1;
    std::string in;
    std::string out;
    bool dead = false;
    bool close_after_flush = false;
    bool pending = false;
    Request request;
    Clock::time_point deadline;
  };
  std::map<std::string, std::string> data;
  std::list<Client> clients;
  std::string name;

  bool AllPresent(const std::vector<std::string>& keys) const {
    for (const std::string& k : keys) {
      if (data.count(k) == 0) return false;
    }
    return true;
  }

  void Answer(Client& c) {
    PutU8(&c.out, 0);
    if (c.request.op == tcp_store::kGet) {
      const std::string& v = data.at(c.request.keys[0]);
      PutU64(&c.out, v.size());
      c.out += v;
    }
    c.pending = false;
  }

  void Expire(Client& c) {
    std::vector<std::string> missing;
    for (const std::string& k : c.request.keys) {
      if (data.count(k) == 0) missing.push_back(k);
    }
    c.out += ErrorReply(
        store_internal::MissingKeysError(name, missing, milliseconds(c.request.number)));
    c.pending = false;
  }

  void WakeWaiters() {
    for (Client& c : clients) {
      if (c.pending && AllPresent(c.request.keys)) Answer(c);
    }
  }

  void Handle(Client& c) {
    Request& r = c.request;
    switch (r.op) {
      case tcp_store::kSet:
        data[r.keys[0]] = std::move(r.value);
        PutU8(&c.out, 0);
        WakeWaiters();
        break;
      case tcp_store::kAdd: {
        int64_t sum = r.number;
        auto it = data.find(r.keys[0]);
        if (it != data.end()) {
          StatusOr<int64_t> current = store_internal::ParseCounter(name, r.keys[0], it->second);
          if (!current.ok()) {
            c.out += ErrorReply(current.status());
            break;
          }
          sum = static_cast<int64_t>(static_cast<uint64_t>(sum) +
                                     static_cast<uint64_t>(*current));
        }
        data[r.keys[0]] = std::to_string(sum);
        PutU8(&c.out, 0);
        PutI64(&c.out, sum);
        WakeWaiters();
        break;
      }
      default:  // GET and WAIT
        r.number = std::min(std::max<int64_t>(r.number, 0), kMaxTimeoutMs);
        c.pending = true;
        c.deadline = Clock::now() + milliseconds(r.number);
        if (AllPresent(r.keys)) Answer(c);
        break;
    }
  }

  void Process(Client& c) {
    while (!c.pending && !c.close_after_flush && !c.in.empty()) {
      size_t consumed = 0;
      std::string error;
      Parse p = ParseRequest(c.in, &c.request, &consumed, &error);
      if (p == Parse::kIncomplete) return;
      if (p == Parse::kBad) {
        c.out += ErrorReply(InvalidArgument(name + ": bad request: " + error));
        c.close_after_flush = true;
        c.in.clear();
        return;
      }
      c.in.erase(0, consumed);
      Handle(c);
    }
  }

  void Read(Client& c) {
    char buffer[65536];
    while (true) {
      ssize_t n = ::recv(c.fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        if (!c.close_after_flush) c.in.append(buffer, static_cast<size_t>(n));
        // The parser rejects oversized lengths as soon as it sees them; this bounds what a
        // client may queue behind a blocked request.
        if (c.in.size() > tcp_store::kMaxValueBytes + 2 * tcp_store::kMaxKeyBytes + 64) {
          c.dead = true;
          return;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.dead = true;  // closed by the client, or reset
      return;
    }
  }

  void Flush(Client& c) {
    while (!c.out.empty()) {
      ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.dead = true;
      return;
    }
    if (c.close_after_flush) c.dead = true;
  }
};

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                 int port) {
  if (port < 0 || port > 65535) {
    return InvalidArgument("tcp store: port " + std::to_string(port) + " is out of range");
  }
  FLEET_ASSIGN_OR_RETURN(AddrInfoPtr addrs, Resolve(host, port, true));
  std::string address = Address(host, port);
  Status last = Unavailable("tcp store: no address to listen on for " + address);
  for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      a->ai_protocol);
    if (fd < 0) {
      last = Unavailable("tcp store: cannot create a socket for " + address + ": " +
                         ErrnoText(errno));
      continue;
    }
    // Lets a restarted server reuse a port in TIME_WAIT; Linux still refuses a port that has
    // a live listener.
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EADDRINUSE) {
        return Unavailable("tcp store: cannot listen on " + address +
                           ": the port is already in use");
      }
      last = Unavailable("tcp store: cannot listen on " + address + ": " + ErrnoText(err));
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    int actual = bound.ss_family == AF_INET6
                     ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                     : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    int wake[2];
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
      int err = errno;
      ::close(fd);
      return Internal("tcp store: cannot create a pipe: " + ErrnoText(err));
    }
    std::unique_ptr<TcpStoreServer> server(
        new TcpStoreServer(host, actual, fd, wake[0], wake[1]));
    server->thread_ = std::thread([s = server.get()] { s->Serve(); });
    return server;
  }
  return last;
}

TcpStoreServer::TcpStoreServer(std::string host, int port, int listen_fd, int wake_read,
                               int wake_write)
    : host_(std::move(host)),
      port_(port),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      state_(std::make_unique<State>()) {
  state_->name = "tcp store " + Address(host_, port_);
}

TcpStoreServer::~TcpStoreServer() { Stop(); }

void TcpStoreServer::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  char byte = 1;
  while (::write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  for (auto& c : state_->clients) ::close(c.fd);
  state_->clients.clear();
  ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
}

void TcpStoreServer::Serve() {
  State& st = *state_;
  std::vector<pollfd> fds;
  std::vector<State::Client*> polled;
  while (true) {
    fds.clear();
    polled.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    bool any_deadline = false;
    Clock::time_point next{};
    for (State::Client& c : st.clients) {
      short events = POLLIN;
      if (!c.out.empty()) events |= POLLOUT;
      fds.push_back({c.fd, events, 0});
      polled.push_back(&c);
      if (c.pending && (!any_deadline || c.deadline < next)) {
        next = c.deadline;
        any_deadline = true;
      }
    }
    int timeout = any_deadline ? PollMs(next) : -1;
    int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR) return;
    if (rc > 0 && (fds[0].revents & POLLIN)) return;  // Stop()
    if (rc > 0 && (fds[1].revents & POLLIN)) {
      while (true) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        st.clients.emplace_back();
        st.clients.back().fd = fd;
      }
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      short revents = fds[i + 2].revents;
      State::Client& c = *polled[i];
      if (revents & (POLLIN | POLLHUP | POLLERR)) st.Read(c);
      if (!c.dead) st.Process(c);
    }
    auto now = Clock::now();
    for (State::Client& c : st.clients) {
      if (c.pending && c.deadline <= now) st.Expire(c);
      if (!c.dead && (!c.out.empty() || c.close_after_flush)) st.Flush(c);
    }
    for (auto it = st.clients.begin(); it != st.clients.end();) {
      if (it->dead) {
        ::close(it->fd);
        it = st.clients.erase(it);
      } else {
        ++it;
      }
    }
  }
}

// ---- client ----

TcpStore::TcpStore(std::string host, int port, TcpStoreOptions options)
    : host_(std::move(host)), port_(port), options_(options) {
  address_ = Address(host_, port_);
}

TcpStore::~TcpStore() {
  for (int fd : idle_) ::close(fd);
}

StatusOr<std::unique_ptr<TcpStore>> TcpStore::Connect(const std::string& host, int port,
                                                       TcpStoreOptions options) {
  std::unique_ptr<TcpStore> store(new TcpStore(host, port, options));
  auto deadline = Clock::now() + milliseconds(ClampTimeout(options.connect_timeout));
  auto pause = milliseconds(10);
  while (true) {
    StatusOr<int> fd = ConnectOnce(host, port, deadline);
    if (fd.ok()) {
      store->idle_.push_back(*fd);
      return store;
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
  return ConnectOnce(host_, port_, deadline);
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
    answered = code != static_cast<uint64_t>(Code::kInvalidArgument);
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
