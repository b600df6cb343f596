// fleet_comm_bench: all-reduce bus bandwidth and latency of one contender (allreduce_impl.h),
// run as one process per rank. bench/allreduce.py starts the ranks and compares the contenders.
//
//   fleet_comm_bench --impl abi|gloo --rank R --world N [--store-port P] [options]
//
// Rank 0 serves the rendezvous store (a TcpStoreServer on 127.0.0.1, port chosen by the kernel)
// and prints {"store_port": P} as its first line; the other ranks are started with that port.
// Then, for each size: one checked all-reduce (rank r contributes r + 1 everywhere; every
// element must come back as N(N+1)/2), warm-up calls, and `reps` timed blocks of `iters` calls,
// each block starting after a barrier. Rank 0 prints one JSON line per size with the median and
// best time per call, algbw = bytes / time and busbw = algbw * 2(N-1)/N (what each rank sends
// in a ring all-reduce, so it compares across world sizes).
#include <csignal>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "comm/allreduce_impl.h"
#include "rendezvous/tcp_store.h"

namespace fleet::bench {
namespace {

struct Args {
  std::string impl;
  int rank = -1;
  int world = 0;
  int store_port = 0;
  GroupOptions group;
  std::vector<size_t> sizes;          // bytes
  int reps = 5;
  size_t block_bytes = size_t{64} << 20;  // data per timed block; iters = this / size
  int min_iters = 2;
  int max_iters = 200;
};

constexpr char kUsage[] =
    "usage: fleet_comm_bench --impl abi|gloo --rank R --world N [--store-port P]\n"
    "  [--hostname 127.0.0.1] [--plugin-dir DIR] [--sizes 4096,16384,...] [--reps 5]\n"
    "  [--block-bytes 67108864] [--min-iters 2] [--max-iters 200] [--timeout-ms 120000]\n";

std::vector<size_t> DefaultSizes() {
  std::vector<size_t> sizes;
  for (size_t b = size_t{4} << 10; b <= size_t{64} << 20; b *= 4) sizes.push_back(b);
  return sizes;
}

StatusOr<long long> ParseInt(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) {
    return InvalidArgument(flag + " wants an integer, got '" + text + "'");
  }
  return v;
}

StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args a;
  a.group.plugin_dir = FLEET_BENCH_PLUGIN_DIR;
  a.sizes = DefaultSizes();
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return InvalidArgument("");
    if (i + 1 >= argc) return InvalidArgument(flag + " needs a value");
    const std::string value = argv[++i];
    auto integer = [&](long long lo, long long hi) -> StatusOr<long long> {
      FLEET_ASSIGN_OR_RETURN(long long v, ParseInt(flag, value));
      if (v < lo || v > hi) {
        return InvalidArgument(flag + " must lie in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "], got " + value);
      }
      return v;
    };
    if (flag == "--impl") {
      if (value != "abi" && value != "gloo") {
        return InvalidArgument("--impl must be 'abi' or 'gloo', got '" + value + "'");
      }
      a.impl = value;
    } else if (flag == "--rank") {
      FLEET_ASSIGN_OR_RETURN(a.rank, integer(0, 1 << 20));
    } else if (flag == "--world") {
      FLEET_ASSIGN_OR_RETURN(a.world, integer(1, 1 << 20));
    } else if (flag == "--store-port") {
      FLEET_ASSIGN_OR_RETURN(a.store_port, integer(1, 65535));
    } else if (flag == "--hostname") {
      a.group.hostname = value;
    } else if (flag == "--plugin-dir") {
      a.group.plugin_dir = value;
    } else if (flag == "--sizes") {
      a.sizes.clear();
      size_t start = 0;
      while (start <= value.size()) {
        size_t comma = value.find(',', start);
        if (comma == std::string::npos) comma = value.size();
        FLEET_ASSIGN_OR_RETURN(long long b, ParseInt(flag, value.substr(start, comma - start)));
        if (b < 4 || b % 4 != 0 || b > (1LL << 34)) {
          return InvalidArgument("--sizes: " + std::to_string(b) +
                                 " is not a positive multiple of 4 bytes (float32) up to 16 GiB");
        }
        a.sizes.push_back(static_cast<size_t>(b));
        start = comma + 1;
      }
    } else if (flag == "--reps") {
      FLEET_ASSIGN_OR_RETURN(a.reps, integer(1, 100000));
    } else if (flag == "--block-bytes") {
      FLEET_ASSIGN_OR_RETURN(long long v, integer(1, 1LL << 40));
      a.block_bytes = static_cast<size_t>(v);
    } else if (flag == "--min-iters") {
      FLEET_ASSIGN_OR_RETURN(a.min_iters, integer(1, 1000000));
    } else if (flag == "--max-iters") {
      FLEET_ASSIGN_OR_RETURN(a.max_iters, integer(1, 1000000));
    } else if (flag == "--timeout-ms") {
      FLEET_ASSIGN_OR_RETURN(long long v, integer(1, 1LL << 40));
      a.group.timeout = std::chrono::milliseconds(v);
    } else {
      return InvalidArgument("unknown option " + flag);
    }
  }
  if (a.impl.empty()) return InvalidArgument("--impl is required");
  if (a.rank < 0 || a.world < 1) return InvalidArgument("--rank and --world are required");
  if (a.rank >= a.world) {
    return InvalidArgument("--rank " + std::to_string(a.rank) + " is outside --world " +
                           std::to_string(a.world));
  }
  if (a.rank != 0 && a.store_port == 0) {
    return InvalidArgument("rank " + std::to_string(a.rank) +
                           " needs --store-port (the port rank 0 printed)");
  }
  if (a.min_iters > a.max_iters) return InvalidArgument("--min-iters exceeds --max-iters");
  a.group.rank = a.rank;
  a.group.world_size = a.world;
  return a;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One size: the checked call, the warm-up and the timed blocks; seconds per call, one per block.
StatusOr<std::vector<double>> Measure(AllReduceImpl& impl, const Args& a, float* buf,
                                      size_t count, int iters) {
  const float contribution = static_cast<float>(a.rank + 1);
  std::fill(buf, buf + count, contribution);
  FLEET_RETURN_IF_ERROR(impl.AllReduce(buf, count));
  const float expected = static_cast<float>(a.world) * static_cast<float>(a.world + 1) / 2.0f;
  for (size_t i = 0; i < count; ++i) {
    if (buf[i] != expected) {
      return Internal("all-reduce of " + std::to_string(count) + " floats is wrong on rank " +
                      std::to_string(a.rank) + ": element " + std::to_string(i) + " is " +
                      std::to_string(buf[i]) + ", expected " + std::to_string(expected));
    }
  }
  // Zeros stay zeros however often they are summed: no overflow to inf, no denormals.
  std::fill(buf, buf + count, 0.0f);
  const int warmup = std::max(2, iters / 4);
  for (int i = 0; i < warmup; ++i) FLEET_RETURN_IF_ERROR(impl.AllReduce(buf, count));
  std::vector<double> per_call;
  for (int r = 0; r < a.reps; ++r) {
    FLEET_RETURN_IF_ERROR(impl.Barrier());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) FLEET_RETURN_IF_ERROR(impl.AllReduce(buf, count));
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    per_call.push_back(took.count() / iters);
  }
  return per_call;
}

Status Run(const Args& a) {
  std::unique_ptr<TcpStoreServer> server;
  int port = a.store_port;
  if (a.rank == 0 && port == 0) {
    FLEET_ASSIGN_OR_RETURN(server, TcpStoreServer::Start("127.0.0.1", 0));
    port = server->port();
    std::printf("{\"store_port\": %d}\n", port);
    std::fflush(stdout);
  }
  TcpStoreOptions store_options;
  store_options.connect_timeout = a.group.timeout;
  FLEET_ASSIGN_OR_RETURN(auto store, TcpStore::Connect("127.0.0.1", port, store_options));

  std::unique_ptr<AllReduceImpl> impl;
  if (a.impl == "abi") {
    FLEET_ASSIGN_OR_RETURN(impl, CreateAbiAllReduce(store.get(), a.group));
  } else {
    FLEET_ASSIGN_OR_RETURN(impl, CreateGlooAllReduce(store.get(), a.group));
  }

  const size_t max_bytes = *std::max_element(a.sizes.begin(), a.sizes.end());
  std::vector<float> buf(max_bytes / sizeof(float), 0.0f);  // touched once, before timing
  const double bus_factor = 2.0 * (a.world - 1) / a.world;
  for (size_t bytes : a.sizes) {
    const size_t count = bytes / sizeof(float);
    const int iters = static_cast<int>(std::clamp<size_t>(
        a.block_bytes / bytes, static_cast<size_t>(a.min_iters),
        static_cast<size_t>(a.max_iters)));
    FLEET_ASSIGN_OR_RETURN(std::vector<double> per_call,
                           Measure(*impl, a, buf.data(), count, iters));
    if (a.rank != 0) continue;
    const double t = Median(per_call);
    const double best = *std::min_element(per_call.begin(), per_call.end());
    const double algbw = static_cast<double>(bytes) / t / 1e9;
    std::printf(
        "{\"impl\": \"%s\", \"world\": %d, \"bytes\": %zu, \"iters\": %d, \"reps\": %d, "
        "\"time_us\": %.3f, \"best_us\": %.3f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f}\n",
        a.impl.c_str(), a.world, bytes, iters, a.reps, t * 1e6, best * 1e6, algbw,
        algbw * bus_factor);
    std::fflush(stdout);
  }
  // Nobody leaves (and rank 0 stops serving the store) before every rank is done.
  FLEET_RETURN_IF_ERROR(impl->Barrier());
  impl.reset();
  return OkStatus();
}

}  // namespace
}  // namespace fleet::bench

int main(int argc, char** argv) {
  // As fleet-host does (host/main.cc), so the plugin runs as it does in production.
  std::signal(SIGPIPE, SIG_IGN);
  auto args = fleet::bench::ParseArgs(argc, argv);
  if (!args.ok()) {
    if (!args.status().message().empty()) {
      std::cerr << "fleet_comm_bench: " << args.status().message() << "\n";
    }
    std::cerr << fleet::bench::kUsage;
    return 2;
  }
  fleet::Status s = fleet::bench::Run(*args);
  if (!s.ok()) {
    std::cerr << "fleet_comm_bench (" << args->impl << ", rank " << args->rank << " of "
              << args->world << "): " << s.ToString() << "\n";
    return 1;
  }
  return 0;
}
