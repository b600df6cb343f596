#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <list>
#include <map>

#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_wire.h"
#include "support/logging.h"

namespace fleet {

// The wire format and its helpers (tcp_wire.h).
using tcp_store::Clock;
using tcp_store::kMaxTimeoutMs;
using tcp_store::ErrnoText;
using tcp_store::Address;
using tcp_store::PutU8;
using tcp_store::PutU64;
using tcp_store::PutI64;
using tcp_store::PollMs;
using tcp_store::AddrInfoPtr;
using tcp_store::Resolve;
using tcp_store::Request;
using tcp_store::Parse;
using tcp_store::ParseRequest;
using tcp_store::ErrorReply;
using std::chrono::milliseconds;

struct TcpStoreServer::State {
  struct Client {
    int fd = -1;
    std::string peer;  // address:port, for the log
    bool authenticated = false;  // always true on a server without a secret
    std::string nonce;           // the challenge HELLO sent on this connection
    std::string in;
    std::string out;
    bool dead = false;
    bool close_after_flush = false;
    bool pending = false;
    Request request;
    Clock::time_point deadline;
  };
  std::map<std::string, std::string> data;
  uint64_t data_bytes = 0;  // keys and values in `data`
  std::list<Client> clients;
  std::string name;
  TcpStoreLimits limits;
  std::string secret;
  // After accept4 ran out of file descriptors: the listening socket is not polled until then.
  Clock::time_point accept_paused_until{};

  // Stores `value` at `key` if the quotas allow; the refusal otherwise (also logged).
  Status Put(const Client& c, const std::string& key, std::string value) {
    auto it = data.find(key);
    const uint64_t old = it == data.end() ? 0 : key.size() + it->second.size();
    const uint64_t after = data_bytes - old + key.size() + value.size();
    Status refused;
    if (it == data.end() && data.size() >= limits.max_keys) {
      refused = ResourceExhausted(name + ": a new key would exceed the store's quota of " +
                                  std::to_string(limits.max_keys) + " keys");
    } else if (after > limits.max_bytes) {
      refused = ResourceExhausted(name + ": " + std::to_string(value.size()) +
                                  " more bytes would exceed the store's quota of " +
                                  std::to_string(limits.max_bytes) + " bytes");
    }
    if (!refused.ok()) {
      Log().warn("{} (a request from {})", refused.message(), c.peer);
      return refused;
    }
    data_bytes = after;
    if (it == data.end()) {
      data.emplace(key, std::move(value));
    } else {
      it->second = std::move(value);
    }
    return OkStatus();
  }

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

  // Refuses the connection: the reply, a log line naming the peer, then the close.
  void Refuse(Client& c, const std::string& why) {
    Log().warn("{}: refused {}: {}", name, c.peer, why);
    c.out += ErrorReply(Unauthenticated(name + ": " + why));
    c.close_after_flush = true;
    c.in.clear();
  }

  // HELLO and AUTH; false when the request was something else on a connection that has not
  // authenticated (and has been refused).
  bool Authenticate(Client& c) {
    Request& r = c.request;
    if (r.op == tcp_store::kHello) {
      if (secret.empty()) {
        c.out += ErrorReply(FailedPrecondition(
            name + ": this store runs without a job secret, but the client has one (was "
                   "the secret given to some processes of the job only?)"));
        return false;
      }
      auto nonce = tcp_store::RandomBytes(tcp_store::kNonceBytes);
      if (!nonce.ok()) {
        c.out += ErrorReply(nonce.status());
        return false;
      }
      c.nonce = std::move(*nonce);
      PutU8(&c.out, 0);
      c.out += c.nonce;
      return false;
    }
    if (r.op == tcp_store::kAuth) {
      if (secret.empty() || c.nonce.empty() ||
          !tcp_store::SameBytes(r.value, tcp_store::JobMac(secret, c.nonce))) {
        Refuse(c, "wrong job secret (or AUTH without HELLO)");
        return false;
      }
      c.authenticated = true;
      c.nonce.clear();
      PutU8(&c.out, 0);
      return false;
    }
    if (!c.authenticated) {
      Refuse(c, "this store requires the job secret, and the connection has not "
                "authenticated");
      return false;
    }
    return true;
  }

  void Handle(Client& c) {
    Request& r = c.request;
    if (!Authenticate(c)) return;
    switch (r.op) {
      case tcp_store::kSet:
        if (Status put = Put(c, r.keys[0], std::move(r.value)); !put.ok()) {
          c.out += ErrorReply(put);
          break;
        }
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
        if (Status put = Put(c, r.keys[0], std::to_string(sum)); !put.ok()) {
          c.out += ErrorReply(put);
          break;
        }
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
        Log().warn("{}: closed the connection from {} after a bad request: {}", name, c.peer,
                   error);
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
                                                                 int port,
                                                                 TcpStoreLimits limits,
                                                                 std::string secret) {
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
    server->state_->limits = limits;
    if (secret.empty() && !tcp_store::IsLoopbackHost(host)) {
      Log().warn("{}: serving a non-loopback address without a job secret: any process that "
                 "can reach it can join or change the job (give every process of the job "
                 "the same secret: FLEET_JOB_SECRET, FLEET_JOB_SECRET_FILE or [comm] "
                 "secret_file)",
                 server->state_->name);
    }
    server->state_->secret = std::move(secret);
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
    const bool accepting = Clock::now() >= st.accept_paused_until;
    fds.push_back({listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
    bool any_deadline = !accepting;
    Clock::time_point next = st.accept_paused_until;
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
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof(peer);
        int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          // Out of descriptors the listening socket stays readable: without a pause the loop
          // would spin on it and serve nobody.
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            Log().warn("{}: cannot accept a connection ({}); pausing accepts for 100 ms", st.name,
                       ErrnoText(errno));
            st.accept_paused_until = Clock::now() + milliseconds(100);
          }
          break;
        }
        const std::string from = tcp_store::PeerText(peer);
        if (st.clients.size() >= st.limits.max_clients) {
          Log().warn("{}: refused a connection from {}: {} connections are open already",
                     st.name, from, st.clients.size());
          ::close(fd);
          continue;
        }
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        st.clients.emplace_back();
        st.clients.back().fd = fd;
        st.clients.back().peer = from;
        st.clients.back().authenticated = st.secret.empty();
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

}  // namespace fleet
