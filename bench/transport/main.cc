// fleet_transport_bench: throughput of a transport component (default "rpc") over loopback,
// against a plain TCP stream of the same bytes measured in the same run.
//
//   fleet_transport_bench [--transport rpc] [--plugin-dir DIR] [--reps 7]
//                         [--max-message-mb 4] [--sizes 1024,65536,...] [--token T]
//
// --token runs server and client with that shared token, so every call carries the
// challenge-response proofs (run it once with and once without to see what they cost).
//
// For each size: a warm-up, then `reps` timed Sends and `reps` timed Gets of one tensor (the
// server's handler takes a send without copying it again and serves a get from a prepared
// buffer), and `reps` timed TCP round trips: an 8-byte length, the payload, a 1-byte ack from
// the receiver once it holds every byte. The three are timed in turn, rep after rep; small
// sizes repeat each timing (iters) so the clock resolution does not matter. Prints medians in
// GB/s (1e9 bytes per second).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fleet/fleet_host.h"
#include "plugin/registry.h"
#include "plugin/transport.h"

namespace fleet::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string transport = "rpc";
  std::string plugin_dir = FLEET_BENCH_PLUGIN_DIR;
  int reps = 7;
  double max_message_mb = 4.0;
  std::vector<int64_t> sizes;
  std::string token;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int64_t b = 1024; b <= (int64_t{64} << 20); b *= 4) a->sizes.push_back(b);
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (flag == "--transport") {
      a->transport = value;
    } else if (flag == "--plugin-dir") {
      a->plugin_dir = value;
    } else if (flag == "--token") {
      a->token = value;
    } else if (flag == "--reps") {
      a->reps = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--max-message-mb") {
      a->max_message_mb = std::atof(value.c_str());
    } else if (flag == "--sizes") {
      a->sizes.clear();
      size_t pos = 0;
      while (pos < value.size()) {
        const size_t comma = value.find(',', pos);
        a->sizes.push_back(std::atoll(value.substr(pos, comma - pos).c_str()));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else {
      return false;
    }
  }
  return true;
}

// Takes sends without keeping them (the transport has already assembled the bytes) and serves
// every get from one prepared buffer of the requested size ("t<bytes>").
class BenchHandler : public TransportHandler {
 public:
  explicit BenchHandler(int64_t max_bytes) : buffer_(static_cast<size_t>(max_bytes), 1) {}
  Status OnSend(int32_t, std::string_view, const FleetTensor& t) override {
    // Touch the data, as a real handler copying it out would.
    if (t.data != nullptr) last_ = static_cast<const uint8_t*>(t.data)[0];
    return OkStatus();
  }
  Status OnGet(int32_t, std::string_view name, FleetTensor& out, void** token) override {
    dims_ = std::stoll(std::string(name.substr(1)));
    out = FleetTensor{};
    out.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
    out.data = buffer_.data();
    out.dtype = FLEET_DTYPE_UINT8;
    out.ndim = 1;
    out.dims = &dims_;
    out.device_type = FLEET_DEVICE_TYPE_HOST;
    *token = nullptr;
    return OkStatus();
  }
  void OnGetDone(void*) override {}
  Status OnBarrier(int32_t, int32_t) override { return OkStatus(); }
  Status OnComplete(int32_t) override { return OkStatus(); }
  Status OnSendBegin(int32_t, std::string_view, const FleetTensor&) override {
    return OkStatus();
  }
  Status OnAbort(int32_t, std::string_view) override { return OkStatus(); }

 private:
  std::vector<uint8_t> buffer_;
  int64_t dims_ = 0;  // one get at a time in this benchmark
  volatile uint8_t last_ = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of `body`, over `iters` calls.
template <typename F>
double TimeCall(int iters, F&& body) {
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) body();
  return std::chrono::duration<double>(Clock::now() - start).count() / iters;
}

// ---- the TCP baseline -----------------------------------------------------------------------

bool WriteAll(int fd, const void* p, size_t n) {
  const auto* c = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n) {
  auto* c = static_cast<uint8_t*>(p);
  while (n > 0) {
    const ssize_t r = ::recv(fd, c, n, 0);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void NoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A receiver thread on 127.0.0.1 that reads length-prefixed messages into its buffer and acks
// each with one byte; Send() is one timed round.
class TcpPair {
 public:
  explicit TcpPair(int64_t max_bytes) : sink_(static_cast<size_t>(max_bytes)) {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::perror("tcp baseline: listen");
      std::exit(1);
    }
    receiver_ = std::thread([this, listener] {
      const int fd = ::accept(listener, nullptr, nullptr);
      ::close(listener);
      if (fd < 0) return;
      NoDelay(fd);
      uint64_t n = 0;
      const uint8_t ack = 1;
      while (ReadAll(fd, &n, 8) && n <= sink_.size() && ReadAll(fd, sink_.data(), n) &&
             WriteAll(fd, &ack, 1)) {
      }
      ::close(fd);
    });
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      std::perror("tcp baseline: connect");
      std::exit(1);
    }
    NoDelay(fd_);
  }
  ~TcpPair() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    receiver_.join();
  }
  void Send(const uint8_t* data, uint64_t n) {
    uint8_t ack = 0;
    if (!WriteAll(fd_, &n, 8) || !WriteAll(fd_, data, n) || !ReadAll(fd_, &ack, 1)) {
      std::fprintf(stderr, "tcp baseline: connection lost\n");
      std::exit(1);
    }
  }

 private:
  std::vector<uint8_t> sink_;
  std::thread receiver_;
  int fd_ = -1;
};

int Main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: fleet_transport_bench [--transport rpc] [--plugin-dir DIR] [--reps 7]\n"
                 "  [--max-message-mb 4] [--sizes 1024,65536,...] [--token T]\n");
    return 2;
  }
  LoadOptions load;
  load.search_dirs = {args.plugin_dir};
  PluginRegistry registry(load);
  auto loaded = registry.Load("transport_" + args.transport);
  const ComponentRecord* rec = registry.Find(FLEET_COMPONENT_TRANSPORT, args.transport);
  if (rec == nullptr) {
    std::fprintf(stderr, "no transport '%s' in %s%s\n", args.transport.c_str(),
                 args.plugin_dir.c_str(),
                 loaded.ok() ? "" : (": " + loaded.status().ToString()).c_str());
    return 1;
  }
  const int64_t max_bytes = *std::max_element(args.sizes.begin(), args.sizes.end());
  TransportOptions options;
  options.timeout = std::chrono::milliseconds(120000);
  options.max_message_bytes = static_cast<int64_t>(args.max_message_mb * 1024 * 1024);
  options.token = args.token;
  BenchHandler handler(max_bytes);
  auto server = TransportServer::Start(*rec, "127.0.0.1:0", &handler, options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  auto client = TransportClient::Connect(*rec, (*server)->endpoint(), 0, options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  std::vector<uint8_t> data(static_cast<size_t>(max_bytes));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  std::vector<uint8_t> dest(static_cast<size_t>(max_bytes));
  TcpPair tcp(max_bytes);

  std::printf("transport '%s', max_message_mb %.1f, %d reps, loopback, medians\n",
              args.transport.c_str(), args.max_message_mb, args.reps);
  std::printf("%12s %14s %14s %12s %11s %11s\n", "bytes", "send GB/s", "get GB/s", "tcp GB/s",
              "send/tcp", "get/tcp");
  bool failed = false;
  for (int64_t bytes : args.sizes) {
    const int iters = static_cast<int>(std::clamp<int64_t>((int64_t{16} << 20) / bytes, 1, 200));
    int64_t dims = bytes;
    FleetTensor t{};
    t.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
    t.data = data.data();
    t.dtype = FLEET_DTYPE_UINT8;
    t.ndim = 1;
    t.dims = &dims;
    t.device_type = FLEET_DEVICE_TYPE_HOST;
    const std::string name = "t" + std::to_string(bytes);
    const TensorSink sink = [&](int32_t, const std::vector<int64_t>&) -> StatusOr<FleetTensor> {
      FleetTensor out = t;
      out.data = dest.data();
      return out;
    };
    Status status;
    auto send = [&] {
      Status s = (*client)->Send(name, t);
      if (!s.ok()) status = s;
    };
    auto get = [&] {
      Status s = (*client)->Get(name, sink);
      if (!s.ok()) status = s;
    };
    auto round = [&] { tcp.Send(data.data(), static_cast<uint64_t>(bytes)); };
    send();
    std::fill(dest.begin(), dest.begin() + bytes, 0);
    get();
    // The server's buffer holds ones: a get that delivered anything else is broken.
    if (status.ok() && !std::all_of(dest.begin(), dest.begin() + bytes,
                                    [](uint8_t b) { return b == 1; })) {
      std::fprintf(stderr, "get of %lld bytes delivered wrong bytes\n",
                   static_cast<long long>(bytes));
      return 1;
    }
    round();
    // Interleaved, so load from other processes drifting during the run hits all three alike.
    std::vector<double> send_t, get_t, tcp_t;
    for (int r = 0; r < args.reps; ++r) {
      send_t.push_back(TimeCall(iters, send));
      get_t.push_back(TimeCall(iters, get));
      tcp_t.push_back(TimeCall(iters, round));
    }
    const double send_s = Median(send_t);
    const double get_s = Median(get_t);
    const double tcp_s = Median(tcp_t);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      failed = true;
      break;
    }
    const double gb = static_cast<double>(bytes) / 1e9;
    std::printf("%12lld %14.3f %14.3f %12.3f %11.2f %11.2f\n", static_cast<long long>(bytes),
                gb / send_s, gb / get_s, gb / tcp_s, tcp_s / send_s, tcp_s / get_s);
    std::fflush(stdout);
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace fleet::bench

int main(int argc, char** argv) { return fleet::bench::Main(argc, argv); }
