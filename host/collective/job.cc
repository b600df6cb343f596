#include "collective/job.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "config/job_secret.h"
#include "rendezvous/file_store.h"
#include "rendezvous/memory_store.h"
#include "plugin/host_api.h"

namespace fleet {
namespace {

std::string EnvOr(const std::map<std::string, std::string>& env, const std::string& key,
                  const std::string& fallback) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]";
}

// "host:port" -> host (brackets removed) and port; CheckEndpoint has validated the form.
std::pair<std::string, int> SplitEndpoint(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  std::string host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, std::stoi(endpoint.substr(colon + 1))};
}

}  // namespace

StatusOr<std::string> LocalAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Unavailable("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::string result;
  Status error = Unavailable("no route to " + host + ":" + service);
  for (addrinfo* a = found; a != nullptr && result.empty(); a = a->ai_next) {
    int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // Connecting a datagram socket only picks the route and the source address.
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      sockaddr_storage local{};
      socklen_t len = sizeof(local);
      char text[INET6_ADDRSTRLEN] = {};
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        const void* addr =
            local.ss_family == AF_INET
                ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
        if (inet_ntop(local.ss_family, addr, text, sizeof(text)) != nullptr) result = text;
      }
    } else {
      error = Unavailable("no route to " + host + ":" + service + ": " + std::strerror(errno));
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (result.empty()) return error;
  return result;
}

StatusOr<std::unique_ptr<Job>> Job::Open(const Config& config, const Role& role,
                                         const ComponentRecord* comm,
                                         const ComponentRecord* device,
                                         const std::map<std::string, std::string>& env) {
  std::unique_ptr<Job> job(new Job());
  job->role_ = role;
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(config.comm_timeout_s * 1000.0));
  std::string master_host;
  int master_port = 0;

  if (role.world_size <= 1) {
    job->root_ = std::make_unique<MemoryStore>();
    job->store_description_ = "memory (one trainer)";
  } else if (config.comm_store == "file") {
    if (config.comm_store_dir.empty()) {
      return InvalidArgument("comm.store is \"file\" but comm.store_dir is not set");
    }
    auto store = FileStore::Open(config.comm_store_dir.string());
    if (!store.ok()) return store.status().WithContext("comm.store_dir");
    job->root_ = std::move(*store);
    job->store_description_ = "file " + config.comm_store_dir.string();
  } else {
    std::string why;
    if (!role.master_addr.empty() && role.master_port > 0) {
      master_host = role.master_addr;
      master_port = static_cast<int>(role.master_port);
      why = "master (" + role.source.at("master_addr") + ")";
    } else if (!role.trainer_endpoints.empty()) {
      std::tie(master_host, master_port) = SplitEndpoint(role.trainer_endpoints[0]);
      why = "trainer 0's endpoint (" + role.source.at("trainer_endpoints") + ")";
    } else {
      return InvalidArgument(
          "a job of " + std::to_string(role.world_size) + " trainers (world_size from " +
          role.source.at("world_size") +
          ") needs a rendezvous address: set MASTER_ADDR and MASTER_PORT (or [role] master), "
          "or PADDLE_TRAINER_ENDPOINTS, or start it with `fleet-host launch`");
    }
    const bool served_elsewhere = EnvOr(env, "FLEET_MASTER_SERVED", "0") == "1";
    // One secret for both ends of the store, by JobSecret's precedence (env, then fleet.toml).
    StatusOr<std::string> secret = JobSecret(config, env);
    if (!secret.ok()) return secret.status().WithContext("the job secret");
    if (role.rank == 0 && !served_elsewhere) {
      auto server = TcpStoreServer::Start(master_host, master_port, {}, *secret);
      if (!server.ok()) {
        return server.status().WithContext("rank 0 serving the rendezvous store at " + why);
      }
      job->server_ = std::move(*server);
    }
    TcpStoreOptions options;
    options.connect_timeout = timeout;
    options.secret = *secret;
    options.io_timeout = std::min(timeout, options.io_timeout);  // no wait outlives [comm]
    auto client = TcpStore::Connect(master_host, master_port, options);
    if (!client.ok()) {
      return client.status().WithContext("rank " + std::to_string(role.rank) +
                                         " joining the rendezvous store at " + why);
    }
    job->root_ = std::move(*client);
    job->store_description_ = "tcp " + master_host + ":" + std::to_string(master_port) +
                              (job->server_ ? " (served here)" : "");
  }
  job->scoped_ = std::make_unique<ScopedStore>(
      job->root_.get(), "job/" + EnvOr(env, "FLEET_JOB_ID", "fleet"));

  if (comm != nullptr) {
    CommunicatorOptions options;
    options.rank = static_cast<int32_t>(role.rank);
    options.world_size = static_cast<int32_t>(role.world_size);
    options.timeout = timeout;
    options.device = config.device.backend;
    options.device_ordinal =
        config.device.backend == "cpu" ? 0 : static_cast<int32_t>(role.local_rank);
    options.device_component = device;
    options.staging = config.comm_staging;
    FLEET_ASSIGN_OR_RETURN(options.desync_check, ResolveDesyncCheck(config.comm_check, env));
    std::string hostname = config.comm_hostname;
    if (hostname.empty() && !role.current_endpoint.empty()) {
      hostname = SplitEndpoint(role.current_endpoint).first;
    }
    if (hostname.empty() && !master_host.empty()) {
      if (IsLoopback(master_host)) {
        hostname = "127.0.0.1";
      } else {
        FLEET_ASSIGN_OR_RETURN(hostname, LocalAddressToward(master_host, master_port));
      }
    }
    if (hostname.empty()) hostname = "127.0.0.1";  // memory or file store: one machine
    options.options.emplace_back("hostname", hostname);
    job->collectives_ = std::make_unique<CollectiveRuntime>(*comm, job->scoped_.get(), options);
  }
  return job;
}

Job::~Job() {
  // The runtime's communicators use the store; the store's client, then the server, go last.
  collectives_.reset();
  scoped_.reset();
  root_.reset();
  server_.reset();
}

}  // namespace fleet
