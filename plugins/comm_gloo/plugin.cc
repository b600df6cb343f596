// Entry point of the Gloo plugin: registers the "gloo" communicator (host memory, TCP) and turns
// its C vtable into calls on fleet_gloo::Communicator. No exception crosses the ABI: every slot
// catches everything and answers a status.
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>

#include <cstring>
#include <memory>
#include <string>

#include "communicator.h"
#include "sigpipe_guard.h"
#include "fleet/plugin.hpp"
#include "store_adapter.h"

struct FleetComm {
  std::unique_ptr<fleet_gloo::Communicator> impl;
};

namespace fleet_gloo {
namespace {

const FleetHostApi* g_host = nullptr;

FleetStatus* Error(int32_t code, const std::string& message) {
  return g_host->status_new(code, message.c_str());
}

// Runs body, answering its CommError or any other exception as a status.
template <typename F>
FleetStatus* Guard(const char* op, F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const CommError& e) {
    return Error(e.code, e.what());
  } catch (const std::exception& e) {
    return Error(FLEET_CODE_INTERNAL, std::string("gloo ") + op + ": " + e.what());
  } catch (...) {
    return Error(FLEET_CODE_INTERNAL, std::string("gloo ") + op + ": unknown exception");
  }
}

struct Options {
  std::string hostname;
  std::string iface;
  std::string algorithm;  // allreduce algorithm: "ring" (default) or "bcube"
};

std::string StringOption(const FleetAttr& a, const std::string& where) {
  if (a.type != FLEET_ATTR_STRING || a.s == nullptr) {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": option '" + a.name + "' must be a string");
  }
  return std::string(a.s, a.s_len);
}

void ApplyOption(const FleetAttr& a, Options* o, const std::string& where) {
  const std::string key = a.name != nullptr ? a.name : "";
  if (key == "hostname") {
    o->hostname = StringOption(a, where);
  } else if (key == "interface") {
    o->iface = StringOption(a, where);
  } else if (key == "algorithm") {
    o->algorithm = StringOption(a, where);
    if (o->algorithm != "ring" && o->algorithm != "bcube") {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT, where + ": option 'algorithm' must be "
                                                           "'ring' or 'bcube', got '" +
                                                           o->algorithm + "'");
    }
  } else {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": unknown option '" + key +
                        "' (known: hostname, interface, algorithm)");
  }
}

// The plugin's own table ([plugins.config.comm_gloo]) gives defaults; the communicator's options
// override them.
Options ReadOptions(const FleetCommConfig* config, const std::string& where) {
  Options o;
  if (FLEET_CAN_CALL(g_host, FleetHostApi, config_get)) {
    for (const char* key : {"hostname", "interface", "algorithm"}) {
      FleetAttr a{};
      a.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings);
      FleetStatus* s = g_host->config_get(g_host->host_ctx, key, &a);
      if (s != nullptr) {
        g_host->status_free(s);
        continue;
      }
      a.name = key;
      ApplyOption(a, &o, where + " [plugin config]");
    }
  }
  if (FLEET_HAS_FIELD(config, FleetCommConfig, options)) {
    Options from_comm;
    for (size_t i = 0; i < config->num_options; ++i) {
      const FleetAttr* a = config->options != nullptr ? config->options[i] : nullptr;
      if (a == nullptr) {
        throw CommError(FLEET_CODE_INVALID_ARGUMENT, where + ": option " + std::to_string(i) +
                                                          " is NULL");
      }
      ApplyOption(*a, &from_comm, where);
    }
    // A communicator address option replaces the plugin default of either kind.
    if (!from_comm.hostname.empty() || !from_comm.iface.empty()) {
      o.hostname = from_comm.hostname;
      o.iface = from_comm.iface;
    }
    if (!from_comm.algorithm.empty()) o.algorithm = from_comm.algorithm;
  }
  if (!o.hostname.empty() && !o.iface.empty()) {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": set either option 'hostname' or 'interface', not both");
  }
  return o;
}

std::shared_ptr<gloo::transport::Device> MakeDevice(const Options& o,
                                                    const std::string& where) {
  gloo::transport::tcp::attr attr;
  // Empty both: Gloo resolves gethostname(), the address peers on other hosts can reach.
  attr.hostname = o.hostname;
  attr.iface = o.iface;
  try {
    // The device's event loop thread, which also writes to sockets, inherits this mask.
    SigpipeGuard no_sigpipe;
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    const std::string what = o.iface.empty()
                                 ? "hostname '" + (o.hostname.empty() ? "<gethostname()>"
                                                                      : o.hostname) + "'"
                                 : "interface '" + o.iface + "'";
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": cannot bind a TCP device to " + what + ": " + e.what());
  }
}

FleetStatus* Create(void*, const FleetCommConfig* config, FleetComm** out) {
  return Guard("create", [&] {
    if (out == nullptr) throw CommError(FLEET_CODE_INVALID_ARGUMENT, "gloo create: out is NULL");
    *out = nullptr;
    if (!FLEET_HAS_FIELD(config, FleetCommConfig, options)) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT, "gloo create: config is NULL or too small");
    }
    const std::string where = "gloo create (rank " + std::to_string(config->rank) + " of " +
                              std::to_string(config->world_size) + ")";
    if (config->world_size < 1 || config->rank < 0 || config->rank >= config->world_size) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT, where + ": rank must lie in [0, world_size)");
    }
    if (config->store == nullptr) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT, where + ": config.store is NULL");
    }
    if (config->timeout_ms <= 0) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT, where + ": timeout_ms must be > 0, got " +
                                                       std::to_string(config->timeout_ms));
    }
    if (config->device != nullptr && std::strcmp(config->device, "cpu") != 0) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                      where + ": device '" + config->device +
                          "' is not supported; the gloo communicator reduces cpu memory");
    }
    const Options options = ReadOptions(config, where);
    CreateParams params;
    params.host = g_host;
    params.store = config->store;
    params.rank = config->rank;
    params.size = config->world_size;
    params.timeout = std::chrono::milliseconds(config->timeout_ms);
    params.device = MakeDevice(options, where);
    params.bcube = options.algorithm == "bcube";
    params.cpu_device_type = FLEET_CAN_CALL(g_host, FleetHostApi, device_type_id)
                                 ? g_host->device_type_id(g_host->host_ctx, "cpu")
                                 : -1;
    auto comm = std::make_unique<FleetComm>();
    comm->impl = Communicator::Create(std::move(params));
    *out = comm.release();
  });
}

FleetStatus* Destroy(void*, FleetComm* comm) {
  return Guard("destroy", [&] { delete comm; });
}

void Abort(void*, FleetComm* comm) {
  if (comm != nullptr && comm->impl != nullptr) comm->impl->Abort();
}

Communicator& Impl(FleetComm* comm, const char* op) {
  if (comm == nullptr || comm->impl == nullptr) {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT, std::string("gloo ") + op + ": comm is NULL");
  }
  return *comm->impl;
}

FleetStatus* AllReduce(void*, FleetComm* comm, const FleetTensor* in, const FleetTensor* out,
                       int32_t op, FleetStream*) {
  // Streams: the cpu device's streams are synchronous, so every call completes before it
  // returns whether or not one is given.
  return Guard("all_reduce", [&] { Impl(comm, "all_reduce").AllReduce(in, out, op); });
}

FleetStatus* Broadcast(void*, FleetComm* comm, const FleetTensor* buf, int32_t root,
                       FleetStream*) {
  return Guard("broadcast", [&] { Impl(comm, "broadcast").Broadcast(buf, root); });
}

FleetStatus* AllGather(void*, FleetComm* comm, const FleetTensor* in, const FleetTensor* out,
                       FleetStream*) {
  return Guard("all_gather", [&] { Impl(comm, "all_gather").AllGather(in, out); });
}

FleetStatus* ReduceScatter(void*, FleetComm* comm, const FleetTensor* in,
                           const FleetTensor* out, int32_t op, FleetStream*) {
  return Guard("reduce_scatter",
               [&] { Impl(comm, "reduce_scatter").ReduceScatter(in, out, op); });
}

FleetStatus* Reduce(void*, FleetComm* comm, const FleetTensor* in, const FleetTensor* out,
                    int32_t op, int32_t root, FleetStream*) {
  return Guard("reduce", [&] { Impl(comm, "reduce").Reduce(in, out, op, root); });
}

FleetStatus* AllToAll(void*, FleetComm* comm, const FleetTensor* in, const FleetTensor* out,
                      FleetStream*) {
  return Guard("all_to_all", [&] { Impl(comm, "all_to_all").AllToAll(in, out); });
}

FleetStatus* Send(void*, FleetComm* comm, const FleetTensor* buf, int32_t peer, FleetStream*) {
  return Guard("send", [&] { Impl(comm, "send").Send(buf, peer); });
}

FleetStatus* Recv(void*, FleetComm* comm, const FleetTensor* buf, int32_t peer, FleetStream*) {
  return Guard("recv", [&] { Impl(comm, "recv").Recv(buf, peer); });
}

FleetStatus* Barrier(void*, FleetComm* comm) {
  return Guard("barrier", [&] { Impl(comm, "barrier").Barrier(); });
}

FleetStatus* NewGroup(void*, FleetComm* parent, const int32_t* ranks, size_t n,
                      FleetComm** out) {
  return Guard("new_group", [&] {
    if (out == nullptr) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT, "gloo new_group: out is NULL");
    }
    *out = nullptr;
    auto child = Impl(parent, "new_group").NewGroup(ranks, n);
    if (child == nullptr) return;
    auto comm = std::make_unique<FleetComm>();
    comm->impl = std::move(child);
    *out = comm.release();
  });
}

const char* const kDevices[] = {"cpu"};

const FleetCommVTable* VTable() {
  static const FleetCommVTable table = [] {
    FleetCommVTable t{};
    t.struct_size = FLEET_STRUCT_SIZE(FleetCommVTable, new_group);
    t.num_devices = 1;
    t.devices = kDevices;
    t.create = Create;
    t.destroy = Destroy;
    t.abort = Abort;
    t.all_reduce = AllReduce;
    t.broadcast = Broadcast;
    t.all_gather = AllGather;
    t.reduce_scatter = ReduceScatter;
    t.reduce = Reduce;
    t.all_to_all = AllToAll;
    t.send = Send;
    t.recv = Recv;
    t.barrier = Barrier;
    t.new_group = NewGroup;
    return t;
  }();
  return &table;
}

}  // namespace
}  // namespace fleet_gloo

extern "C" FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host,
                                                           FleetPluginInfo* info) {
  fleet::plugin::Host h(host);
  FLEET_PLUGIN_GUARD(h, {
    fleet_gloo::g_host = host;
    if (FLEET_HAS_FIELD(info, FleetPluginInfo, description)) {
      info->abi_major = FLEET_ABI_MAJOR;
      info->abi_minor = FLEET_ABI_MINOR;
      info->name = "comm_gloo";
      info->version = "0.1.0";
      info->description = "Gloo communicator over TCP for host memory";
    }
    FleetComponent comm{};
    comm.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
    comm.kind = FLEET_COMPONENT_COMMUNICATOR;
    comm.name = "gloo";
    comm.summary = "Gloo collectives over TCP (ring allreduce) on cpu tensors";
    comm.vtable = fleet_gloo::VTable();
    return fleet::plugin::Register(h, comm);
  })
}
