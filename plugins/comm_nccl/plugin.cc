// Entry point of the NCCL plugin: registers the "nccl" communicator (cuda tensors) and turns its
// C vtable into calls on fleet_nccl::Communicator. No exception crosses the ABI: every slot
// catches everything and answers a status. The entry touches no GPU (`fleet-host plugins` runs
// it on machines without one); the CUDA runtime is first used by create.
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "communicator.h"
#include "fleet/plugin.hpp"

// "2.28.9": the NCCL this plugin was compiled against, for the description.
#define FLEET_NCCL_STR2(x) #x
#define FLEET_NCCL_STR(x) FLEET_NCCL_STR2(x)
#define FLEET_NCCL_VERSION_TEXT \
  FLEET_NCCL_STR(NCCL_MAJOR) "." FLEET_NCCL_STR(NCCL_MINOR) "." FLEET_NCCL_STR(NCCL_PATCH)

struct FleetComm {
  std::unique_ptr<fleet_nccl::Communicator> impl;
};

namespace fleet_nccl {
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
    return Error(FLEET_CODE_INTERNAL, std::string("nccl ") + op + ": " + e.what());
  } catch (...) {
    return Error(FLEET_CODE_INTERNAL, std::string("nccl ") + op + ": unknown exception");
  }
}

constexpr const char* kOptionKeys[] = {"min_ctas", "max_ctas", "cga_cluster_size"};

// An integer option: an int attribute, or a string of decimal digits (as options written on a
// command line arrive), within [lo, hi].
int IntOption(const FleetAttr& a, int lo, int hi, const std::string& where) {
  const std::string name = a.name != nullptr ? a.name : "";
  int64_t value = 0;
  bool ok = false;
  if (a.type == FLEET_ATTR_INT || a.type == FLEET_ATTR_INT64) {
    value = a.i;
    ok = true;
  } else if (a.type == FLEET_ATTR_STRING && a.s != nullptr && a.s_len > 0) {
    const std::string text(a.s, a.s_len);
    char* end = nullptr;
    errno = 0;
    const long long parsed = std::strtoll(text.c_str(), &end, 10);
    ok = errno == 0 && end == text.c_str() + text.size();
    value = parsed;
  }
  if (!ok) {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": option '" + name + "' must be an integer");
  }
  if (value < lo || value > hi) {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": option '" + name + "' must lie in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "], got " + std::to_string(value));
  }
  return static_cast<int>(value);
}

void ApplyOption(const FleetAttr& a, TuningOptions* o, const std::string& where) {
  const std::string key = a.name != nullptr ? a.name : "";
  // NCCL itself replaces a CTA count above its channel limit by its default (with a warning);
  // a cluster has at most 8 blocks.
  if (key == "min_ctas") {
    o->min_ctas = IntOption(a, 1, INT_MAX, where);
  } else if (key == "max_ctas") {
    o->max_ctas = IntOption(a, 1, INT_MAX, where);
  } else if (key == "cga_cluster_size") {
    o->cga_cluster_size = IntOption(a, 0, 8, where);
  } else if (key == "hostname") {
    // The host hands every communicator the address its peers reach it at ([comm] hostname).
    // NCCL's bootstrap chooses its own interface (NCCL_SOCKET_IFNAME), so it is not used.
  } else {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": unknown option '" + key +
                        "' (known: min_ctas, max_ctas, cga_cluster_size)");
  }
}

// The plugin's own table ([plugins.config.comm_nccl]) gives defaults; the communicator's
// options override them.
TuningOptions ReadOptions(const FleetCommConfig* config, const std::string& where) {
  TuningOptions o;
  if (FLEET_CAN_CALL(g_host, FleetHostApi, config_get)) {
    for (const char* key : kOptionKeys) {
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
  for (size_t i = 0; i < config->num_options; ++i) {
    const FleetAttr* a = config->options != nullptr ? config->options[i] : nullptr;
    if (a == nullptr) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                      where + ": option " + std::to_string(i) + " is NULL");
    }
    ApplyOption(*a, &o, where);
  }
  if (o.min_ctas != NCCL_CONFIG_UNDEF_INT && o.max_ctas != NCCL_CONFIG_UNDEF_INT &&
      o.min_ctas > o.max_ctas) {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                    where + ": option 'min_ctas' (" + std::to_string(o.min_ctas) +
                        ") exceeds 'max_ctas' (" + std::to_string(o.max_ctas) + ")");
  }
  return o;
}

FleetStatus* Create(void*, const FleetCommConfig* config, FleetComm** out) {
  return Guard("create", [&] {
    if (out == nullptr) throw CommError(FLEET_CODE_INVALID_ARGUMENT, "nccl create: out is NULL");
    *out = nullptr;
    if (!FLEET_HAS_FIELD(config, FleetCommConfig, options)) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT, "nccl create: config is NULL or too small");
    }
    const std::string where = "nccl create (rank " + std::to_string(config->rank) + " of " +
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
    if (config->device != nullptr && std::strcmp(config->device, "cuda") != 0) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                      where + ": device '" + config->device +
                          "' is not supported; the nccl communicator reduces cuda memory");
    }
    if (config->device_ordinal < 0) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT,
                      where + ": device_ordinal must be >= 0, got " +
                          std::to_string(config->device_ordinal));
    }
    CreateParams params;
    params.tuning = ReadOptions(config, where);
    params.host = g_host;
    params.store = config->store;
    params.rank = config->rank;
    params.size = config->world_size;
    params.ordinal = config->device_ordinal;
    params.timeout = std::chrono::milliseconds(config->timeout_ms);
    if (FLEET_HAS_FIELD(config, FleetCommConfig, device_ctx)) {
      params.device_table = config->device_table;
      params.device_ctx = config->device_ctx;
    }
    auto comm = std::make_unique<FleetComm>();
    comm->impl = Communicator::Create(std::move(params));
    *out = comm.release();
  });
}

FleetStatus* Destroy(void*, FleetComm* comm) {
  return Guard("destroy", [&] {
    // Freed whatever Destroy answers: the host never calls it twice.
    std::unique_ptr<FleetComm> owned(comm);
    if (owned != nullptr && owned->impl != nullptr) owned->impl->Destroy();
  });
}

void Abort(void*, FleetComm* comm) {
  if (comm != nullptr && comm->impl != nullptr) comm->impl->Abort();
}

Communicator& Impl(FleetComm* comm, const char* op) {
  if (comm == nullptr || comm->impl == nullptr) {
    throw CommError(FLEET_CODE_INVALID_ARGUMENT, std::string("nccl ") + op + ": comm is NULL");
  }
  return *comm->impl;
}

FleetStatus* AllReduce(void*, FleetComm* comm, const FleetTensor* in, const FleetTensor* out,
                       int32_t op, FleetStream* stream) {
  return Guard("all_reduce", [&] { Impl(comm, "all_reduce").AllReduce(in, out, op, stream); });
}

FleetStatus* Broadcast(void*, FleetComm* comm, const FleetTensor* buf, int32_t root,
                       FleetStream* stream) {
  return Guard("broadcast", [&] { Impl(comm, "broadcast").Broadcast(buf, root, stream); });
}

FleetStatus* AllGather(void*, FleetComm* comm, const FleetTensor* in, const FleetTensor* out,
                       FleetStream* stream) {
  return Guard("all_gather", [&] { Impl(comm, "all_gather").AllGather(in, out, stream); });
}

FleetStatus* ReduceScatter(void*, FleetComm* comm, const FleetTensor* in,
                           const FleetTensor* out, int32_t op, FleetStream* stream) {
  return Guard("reduce_scatter",
               [&] { Impl(comm, "reduce_scatter").ReduceScatter(in, out, op, stream); });
}

FleetStatus* Reduce(void*, FleetComm* comm, const FleetTensor* in, const FleetTensor* out,
                    int32_t op, int32_t root, FleetStream* stream) {
  return Guard("reduce", [&] { Impl(comm, "reduce").Reduce(in, out, op, root, stream); });
}

FleetStatus* AllToAll(void*, FleetComm* comm, const FleetTensor* in, const FleetTensor* out,
                      FleetStream* stream) {
  return Guard("all_to_all", [&] { Impl(comm, "all_to_all").AllToAll(in, out, stream); });
}

FleetStatus* Send(void*, FleetComm* comm, const FleetTensor* buf, int32_t peer,
                  FleetStream* stream) {
  return Guard("send", [&] { Impl(comm, "send").Send(buf, peer, stream); });
}

FleetStatus* Recv(void*, FleetComm* comm, const FleetTensor* buf, int32_t peer,
                  FleetStream* stream) {
  return Guard("recv", [&] { Impl(comm, "recv").Recv(buf, peer, stream); });
}

FleetStatus* Barrier(void*, FleetComm* comm) {
  return Guard("barrier", [&] { Impl(comm, "barrier").Barrier(); });
}

FleetStatus* NewGroup(void*, FleetComm* parent, const int32_t* ranks, size_t n,
                      FleetComm** out) {
  return Guard("new_group", [&] {
    if (out == nullptr) {
      throw CommError(FLEET_CODE_INVALID_ARGUMENT, "nccl new_group: out is NULL");
    }
    *out = nullptr;
    auto child = Impl(parent, "new_group").NewGroup(ranks, n);
    if (child == nullptr) return;
    auto comm = std::make_unique<FleetComm>();
    comm->impl = std::move(child);
    *out = comm.release();
  });
}

const char* const kDevices[] = {"cuda"};

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
}  // namespace fleet_nccl

extern "C" FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host,
                                                           FleetPluginInfo* info) {
  fleet::plugin::Host h(host);
  FLEET_PLUGIN_GUARD(h, {
    fleet_nccl::g_host = host;
    if (FLEET_HAS_FIELD(info, FleetPluginInfo, description)) {
      info->abi_major = FLEET_ABI_MAJOR;
      info->abi_minor = FLEET_ABI_MINOR;
      info->name = "comm_nccl";
      info->version = "0.1.0";
      info->description = "NCCL " FLEET_NCCL_VERSION_TEXT " communicator for cuda tensors";
    }
    FleetComponent comm{};
    comm.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
    comm.kind = FLEET_COMPONENT_COMMUNICATOR;
    comm.name = "nccl";
    comm.summary = "NCCL " FLEET_NCCL_VERSION_TEXT
                   " collectives on cuda tensors, on a stream of its own ordered by events";
    comm.vtable = fleet_nccl::VTable();
    return fleet::plugin::Register(h, comm);
  })
}
