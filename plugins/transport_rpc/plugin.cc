// Entry point of the rpc transport plugin: registers the transport "rpc" (gRPC, protobuf
// headers) and turns its C vtable into calls on RpcServer and RpcClient. No exception crosses
// the ABI: every slot catches everything and answers a status.
//
// Client handles are ids, not pointers: the ABI has no client_destroy, so client_close both
// cancels and releases the client, and a call racing with it (or made after it) must find
// nothing rather than freed memory. Calls in flight keep their client alive until they return.
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "client.h"
#include "common.h"
#include "fleet/plugin.hpp"
#include "server.h"

struct FleetTransportServer {
  std::unique_ptr<fleet_rpc::RpcServer> impl;
};

namespace fleet_rpc {

const FleetHostApi* g_host = nullptr;

namespace {

template <typename F>
FleetStatus* Guard(const char* op, F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const RpcError& e) {
    return MakeStatus(e.code, e.what());
  } catch (const std::bad_alloc&) {
    return MakeStatus(FLEET_CODE_RESOURCE_EXHAUSTED, std::string("rpc ") + op + ": out of memory");
  } catch (const std::exception& e) {
    return MakeStatus(FLEET_CODE_INTERNAL, std::string("rpc ") + op + ": " + e.what());
  } catch (...) {
    return MakeStatus(FLEET_CODE_INTERNAL, std::string("rpc ") + op + ": unknown exception");
  }
}

class Clients {
 public:
  FleetTransportClient* Add(std::shared_ptr<RpcClient> client) {
    std::lock_guard<std::mutex> lock(mu_);
    const uintptr_t id = next_++;
    map_.emplace(id, std::move(client));
    return reinterpret_cast<FleetTransportClient*>(id);
  }
  std::shared_ptr<RpcClient> Find(FleetTransportClient* handle, const char* op) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == map_.end()) {
      throw RpcError(FLEET_CODE_ABORTED, std::string("rpc ") + op + ": the client is closed");
    }
    return it->second;
  }
  std::shared_ptr<RpcClient> Remove(FleetTransportClient* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == map_.end()) return nullptr;
    std::shared_ptr<RpcClient> client = std::move(it->second);
    map_.erase(it);
    return client;
  }

 private:
  std::mutex mu_;
  uintptr_t next_ = 1;
  std::unordered_map<uintptr_t, std::shared_ptr<RpcClient>> map_;
};

Clients& AllClients() {
  static Clients* clients = new Clients();  // lives until exit: slots may run during teardown
  return *clients;
}

// glibc gives freed memory at the top of a heap back to the kernel once it exceeds the trim
// threshold (128 KiB, or twice the dynamic mmap threshold). gRPC frees megabytes of receive
// buffers after every message, so with that default each message lands in freshly faulted
// pages: half the time of a large transfer on loopback. Once the transport is used, the
// process keeps up to 256 MiB of freed heap instead, and allocations up to 32 MiB (the ceiling
// glibc's dynamic threshold would reach) stay in the heap. A user's own setting
// (MALLOC_*_THRESHOLD_ or GLIBC_TUNABLES) is left alone.
void TuneAllocatorOnce() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
        std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
        (tunables != nullptr && std::strstr(tunables, "malloc.") != nullptr)) {
      return;
    }
    const bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 &&
                    mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1;
    if (FLEET_CAN_CALL(g_host, FleetHostApi, log)) {
      g_host->log(g_host->host_ctx, FLEET_LOG_DEBUG,
                  ok ? "rpc: malloc trim threshold 256 MiB, mmap threshold 32 MiB"
                     : "rpc: could not tune malloc thresholds");
    }
  });
#endif
}

FleetStatus* ServerStart(void*, const FleetTransportServerConfig* config,
                         FleetTransportServer** out) {
  return Guard("server_start", [&] {
    TuneAllocatorOnce();
    if (out == nullptr || !FLEET_HAS_FIELD(config, FleetTransportServerConfig, options)) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT, "rpc server_start: config or out is NULL");
    }
    *out = nullptr;
    auto server = std::make_unique<FleetTransportServer>();
    server->impl = RpcServer::Start(*config);
    *out = server.release();
  });
}

const char* ServerEndpoint(void*, FleetTransportServer* server) {
  return server != nullptr && server->impl != nullptr ? server->impl->endpoint().c_str() : "";
}

void ServerStop(void*, FleetTransportServer* server) {
  if (server == nullptr || server->impl == nullptr) return;
  try {
    server->impl->Stop();
  } catch (...) {
  }
}

FleetStatus* ServerDestroy(void*, FleetTransportServer* server) {
  return Guard("server_destroy", [&] { delete server; });
}

FleetStatus* ClientConnect(void*, const FleetTransportClientConfig* config,
                           FleetTransportClient** out) {
  return Guard("client_connect", [&] {
    TuneAllocatorOnce();
    if (out == nullptr || !FLEET_HAS_FIELD(config, FleetTransportClientConfig, options)) {
      throw RpcError(FLEET_CODE_INVALID_ARGUMENT, "rpc client_connect: config or out is NULL");
    }
    *out = nullptr;
    *out = AllClients().Add(std::make_shared<RpcClient>(*config));
  });
}

FleetStatus* ClientSend(void*, FleetTransportClient* client, const char* name,
                        const FleetTensor* tensor, int64_t timeout_ms) {
  return Guard("send", [&] { AllClients().Find(client, "send")->Send(name, tensor, timeout_ms); });
}

FleetStatus* ClientGet(void*, FleetTransportClient* client, const char* name,
                       FleetTensorAllocFn alloc, void* alloc_ctx, FleetTensor* out,
                       int64_t timeout_ms) {
  return Guard("get", [&] {
    AllClients().Find(client, "get")->Get(name, alloc, alloc_ctx, out, timeout_ms);
  });
}

FleetStatus* ClientPrefetch(void*, FleetTransportClient* client, const char* name,
                           const int64_t* ids, int64_t num_ids, FleetTensorAllocFn alloc,
                           void* alloc_ctx, FleetTensor* out, int64_t timeout_ms) {
  return Guard("prefetch", [&] {
    AllClients().Find(client, "prefetch")
        ->Prefetch(name, ids, num_ids, alloc, alloc_ctx, out, timeout_ms);
  });
}

FleetStatus* ClientBarrier(void*, FleetTransportClient* client, int32_t kind,
                           int64_t timeout_ms) {
  return Guard("barrier",
               [&] { AllClients().Find(client, "barrier")->Barrier(kind, timeout_ms); });
}

FleetStatus* ClientComplete(void*, FleetTransportClient* client, int64_t timeout_ms) {
  return Guard("complete",
               [&] { AllClients().Find(client, "complete")->Complete(timeout_ms); });
}

FleetStatus* ClientAbort(void*, FleetTransportClient* client, const char* reason,
                         int64_t timeout_ms) {
  return Guard("abort",
               [&] { AllClients().Find(client, "abort")->Abort(reason, timeout_ms); });
}

void ClientClose(void*, FleetTransportClient* client) {
  try {
    std::shared_ptr<RpcClient> c = AllClients().Remove(client);
    if (c != nullptr) c->Close();
  } catch (...) {
  }
}

const FleetTransportVTable* VTable() {
  static const FleetTransportVTable table = [] {
    FleetTransportVTable t{};
    t.struct_size = FLEET_STRUCT_SIZE(FleetTransportVTable, client_prefetch);
    t.server_start = ServerStart;
    t.server_endpoint = ServerEndpoint;
    t.server_stop = ServerStop;
    t.server_destroy = ServerDestroy;
    t.client_connect = ClientConnect;
    t.client_send = ClientSend;
    t.client_get = ClientGet;
    t.client_barrier = ClientBarrier;
    t.client_complete = ClientComplete;
    t.client_close = ClientClose;
    t.client_abort = ClientAbort;
    t.client_prefetch = ClientPrefetch;
    return t;
  }();
  return &table;
}

}  // namespace
}  // namespace fleet_rpc

extern "C" FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host,
                                                           FleetPluginInfo* info) {
  fleet::plugin::Host h(host);
  FLEET_PLUGIN_GUARD(h, {
    fleet_rpc::g_host = host;
    if (FLEET_HAS_FIELD(info, FleetPluginInfo, description)) {
      info->abi_major = FLEET_ABI_MAJOR;
      info->abi_minor = FLEET_ABI_MINOR;
      info->name = "transport_rpc";
      info->version = "0.1.0";
      info->description = "gRPC parameter-server transport (protobuf headers, TLS, token)";
    }
    FleetComponent transport{};
    transport.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
    transport.kind = FLEET_COMPONENT_TRANSPORT;
    transport.name = "rpc";
    transport.summary = "gRPC streams over TCP, chunked tensors, optional TLS and token";
    transport.vtable = fleet_rpc::VTable();
    return fleet::plugin::Register(h, transport);
  })
}
