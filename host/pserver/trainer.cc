#include "pserver/trainer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fleet/fleet_device.h"
#include "fleet/fleet_kernels.h"
#include "ops/op_registry.h"
#include "pserver/growable_table.h"
#include "fleet/fleet_plugin.h"
#include "fleet/fleet_transport.h"
#include "plugin/host_api.h"

namespace fleet {
namespace {

PsTrainerRuntime* Runtime(void* ctx) { return static_cast<PsTrainerRuntime*>(ctx); }

const FleetAttr* FindAttr(const FleetKernelContext* kc, const char* name) {
  for (size_t i = 0; i < kc->num_attrs; ++i) {
    if (std::strcmp(kc->attrs[i]->name, name) == 0) return kc->attrs[i];
  }
  return nullptr;
}

std::vector<std::string> AttrStrings(const FleetKernelContext* kc, const char* name) {
  std::vector<std::string> out;
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr || a->type != FLEET_ATTR_STRINGS) return out;
  for (size_t i = 0; i < a->count; ++i) out.emplace_back(a->strings[i]);
  return out;
}

const FleetTensorSlot* Slot(const FleetTensorSlot* const* slots, size_t n, const char* name) {
  for (size_t i = 0; i < n; ++i) {
    if (slots[i] != nullptr && std::strcmp(slots[i]->name, name) == 0) return slots[i];
  }
  return nullptr;
}

size_t Bytes(const FleetTensor& t) {
  size_t n = ir::DataTypeSize(static_cast<ir::DataType>(t.dtype));
  for (int32_t d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.dims[d]);
  return n;
}

std::vector<int64_t> DimsOf(const FleetTensor& t) {
  return std::vector<int64_t>(t.dims, t.dims + t.ndim);
}

std::string TypeText(int32_t dtype, const std::vector<int64_t>& dims) {
  return ir::TypeShapeText(static_cast<ir::DataType>(dtype), dims);
}

enum class Kind { kSend, kRecv, kBatchBarrier, kFetchBarrier, kPrefetch, kGeo };

// geo_sgd: the blocks it exchanges, read at prepare, and what it remembers between launches.
struct GeoState {
  int64_t k_steps = 1;
  float trainers = 1;
  std::vector<int64_t> blocks;  // per X: how many of the entries below are its blocks
  std::vector<std::string> names, epmap;
  std::vector<int64_t> sections;
  std::vector<int64_t> sparse;          // per X: 1 = exchange the rows that changed only
  std::vector<std::vector<float>> old;  // per X: its values as of the last exchange
  std::vector<float> delta, pulled;     // one block's change, and its value on the server
  std::vector<int64_t> rows;            // a sparse block's changed rows
  int64_t launches = 0;
};

// distributed_lookup_table's table: row blocks table_names[k] on endpoints[k], whose first row
// is starts[k] of the whole table.
struct PrefetchTable {
  std::string name;                 // the table, for messages
  std::vector<std::string> blocks;
  std::vector<std::string> endpoints;
  std::vector<int64_t> starts;      // one per block, then the table's height
  int64_t padding_idx = -1;
  int64_t width = 0;
  int32_t dtype = FLEET_DTYPE_FLOAT32;
  size_t row_bytes = 0;
  // A growable table: ids in [0, 2^63 - 1), block fleet_row_shard(id, blocks), asked by id.
  bool growable = false;
  // What each block's server is asked for: the block, or with is_test on a growable table its
  // read-only view ("<block>@READ", server.h), which makes no row.
  std::vector<std::string> asked;
};

// What a launch needs, read from the op once at prepare.
struct OpState {
  Kind kind = Kind::kSend;
  std::string op_type;
  std::vector<std::string> names;   // send: X's vars; recv: what to ask the server for
  std::vector<std::string> epmap;   // per tensor
  // Tensor indices per server, so each server gets one thread that calls it in op order.
  std::vector<std::string> group_endpoints;
  std::vector<std::vector<size_t>> groups;
  std::vector<std::string> endpoints;  // barriers
  std::vector<std::vector<uint8_t>> staging;  // per tensor, for a device without host memory
  // send of a sparse X: the entries of one row summed into one, per tensor (a launch's threads
  // each own the tensors of one server).
  std::vector<MergedRows> merged;
  // recv through the communicator: the version of each output's value taken last.
  std::vector<uint64_t> versions;
  PrefetchTable table;  // distributed_lookup_table
  GeoState geo;         // geo_sgd
  // distributed_lookup_table's per-block buffers: the local rows wanted (sorted, distinct) and
  // the rows the server sent for them.
  std::vector<std::vector<int64_t>> wanted;
  std::vector<std::vector<uint8_t>> fetched;
};

int64_t AttrInt(const FleetKernelContext* kc, const char* name, int64_t fallback) {
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr || (a->type != FLEET_ATTR_INT && a->type != FLEET_ATTR_INT64)) return fallback;
  return a->i;
}

std::vector<int64_t> AttrInts(const FleetKernelContext* kc, const char* name) {
  const FleetAttr* a = FindAttr(kc, name);
  if (a == nullptr || (a->type != FLEET_ATTR_INTS && a->type != FLEET_ATTR_INT64S)) return {};
  return std::vector<int64_t>(a->ints, a->ints + a->count);
}

// The shape function checked the attributes; what is read here is what a launch needs.
Status PreparePrefetch(PsTrainerRuntime& rt, const FleetKernelContext* kc, OpState& st) {
  if (rt.device() != nullptr) {
    return Unimplemented("the rows of a table on the servers are fetched into host memory "
                         "only; this device has none");
  }
  PrefetchTable& t = st.table;
  t.blocks = AttrStrings(kc, "table_names");
  t.endpoints = AttrStrings(kc, "endpoints");
  const std::vector<int64_t> sections = AttrInts(kc, "height_sections");
  if (t.blocks.empty() || t.blocks.size() != t.endpoints.size() ||
      t.blocks.size() != sections.size()) {
    return InvalidArgument("table_names, endpoints and height_sections do not pair up");
  }
  t.starts.push_back(0);
  for (int64_t rows : sections) t.starts.push_back(t.starts.back() + rows);
  // Blocks of one table are "<table>.block<k>" (the pserver pass), a whole one its own name.
  t.name = t.blocks[0];
  if (t.blocks.size() > 1 && t.name.ends_with(".block0")) t.name.resize(t.name.size() - 7);
  t.padding_idx = AttrInt(kc, "padding_idx", -1);
  t.width = AttrInt(kc, "emb_dim", 0);
  t.dtype = static_cast<int32_t>(AttrInt(kc, "dtype", FLEET_DTYPE_FLOAT32));
  const FleetAttr* growable = FindAttr(kc, "growable");
  t.growable = growable != nullptr && growable->type == FLEET_ATTR_BOOL && growable->i != 0;
  const FleetAttr* is_test = FindAttr(kc, "is_test");
  const bool read_only = t.growable && is_test != nullptr && is_test->type == FLEET_ATTR_BOOL &&
                         is_test->i != 0;
  t.asked = t.blocks;
  if (read_only) {
    for (std::string& name : t.asked) name += kGrowableReadView;
  }
  t.row_bytes =
      ir::DataTypeSize(static_cast<ir::DataType>(t.dtype)) * static_cast<size_t>(t.width);
  return OkStatus();
}

OpState& State(void* state) { return *static_cast<OpState*>(state); }

Status PrepareState(PsTrainerRuntime& rt, const FleetKernelContext* kc, OpState& st) {
  const std::string_view type = kc->op_type;
  st.op_type = kc->op_type;
  // send carries no trainer_id in the transpiled programs (the schema's default 0 reaches the
  // kernel), so only the ops that do are checked.
  if (const FleetAttr* id = FindAttr(kc, "trainer_id"); type != "send" && id != nullptr &&
      (id->type == FLEET_ATTR_INT || id->type == FLEET_ATTR_INT64) && id->i != rt.trainer_id()) {
    return InvalidArgument("trainer_id is " + std::to_string(id->i) + " but this process is "
                           "trainer " + std::to_string(rt.trainer_id()) +
                           " (was the program transpiled for another trainer?)");
  }
  if (type == "distributed_lookup_table") {
    st.kind = Kind::kPrefetch;
    return PreparePrefetch(rt, kc, st);
  }
  if (type == "geo_sgd") {
    st.kind = Kind::kGeo;
    if (rt.device() != nullptr) {
      return Unimplemented("GEO-SGD exchanges parameters in host memory only; this device has "
                           "none");
    }
    GeoState& g = st.geo;
    g.k_steps = AttrInt(kc, "k_steps", 1);
    g.trainers = static_cast<float>(AttrInt(kc, "trainers", 1));
    g.blocks = AttrInts(kc, "blocks");
    g.names = AttrStrings(kc, "block_names");
    g.epmap = AttrStrings(kc, "epmap");
    g.sections = AttrInts(kc, "sections");
    g.sparse = AttrInts(kc, "sparse");
    g.sparse.resize(g.blocks.size(), 0);
    g.old.resize(g.blocks.size());
    return OkStatus();  // the shape function checked that the attributes pair up
  }
  if (type == "send_barrier" || type == "fetch_barrier") {
    st.kind = type == "send_barrier" ? Kind::kBatchBarrier : Kind::kFetchBarrier;
    if (const FleetAttr* h = FindAttr(kc, "half_async"); h != nullptr && h->i != 0) {
      return Unimplemented("half_async send_barrier (Paddle's communicator mode) is not "
                           "supported; use strategy.sync_mode");
    }
    st.endpoints = AttrStrings(kc, "endpoints");
    return OkStatus();
  }
  st.kind = type == "send" ? Kind::kSend : Kind::kRecv;
  const FleetTensorSlot* slot = st.kind == Kind::kSend
                                    ? Slot(kc->inputs, kc->num_inputs, "X")
                                    : Slot(kc->outputs, kc->num_outputs, "Out");
  const size_t count = slot == nullptr ? 0 : slot->count;
  const char* slot_name = st.kind == Kind::kSend ? "X" : "Out";
  st.names = AttrStrings(kc, (std::string(ops::kSlotNamesAttrPrefix) + slot_name).c_str());
  if (st.names.size() != count) {
    return FailedPrecondition(std::string("the var names of ") + slot_name +
                              " are not known to the kernel (the executor passes them to "
                              "kernels of rpc ops only)");
  }
  if (st.kind == Kind::kRecv) {
    std::vector<std::string> remote = AttrStrings(kc, "varnames");
    if (!remote.empty()) {
      if (remote.size() != count) {
        return InvalidArgument("varnames has " + std::to_string(remote.size()) +
                               " names for " + std::to_string(count) + " outputs");
      }
      st.names = std::move(remote);
    }
  }
  st.epmap = AttrStrings(kc, "epmap");
  if (st.epmap.size() != count) {
    return InvalidArgument("epmap has " + std::to_string(st.epmap.size()) + " endpoints for " +
                           std::to_string(count) + " vars in " + slot_name);
  }
  for (size_t i = 0; i < count; ++i) {
    size_t g = 0;
    while (g < st.group_endpoints.size() && st.group_endpoints[g] != st.epmap[i]) ++g;
    if (g == st.group_endpoints.size()) {
      st.group_endpoints.push_back(st.epmap[i]);
      st.groups.emplace_back();
    }
    st.groups[g].push_back(i);
  }
  if (st.kind == Kind::kSend) st.merged.resize(count);
  // (StartCommunicator refused a device without host memory.)
  if (AsyncCommunicator* comm = rt.communicator(); comm != nullptr && st.kind == Kind::kRecv) {
    st.versions.assign(count, 0);
    for (size_t i = 0; i < count; ++i) {
      comm->Register(st.names[i], st.epmap[i], slot->tensors[i]->dtype,
                     DimsOf(*slot->tensors[i]));
    }
  }
  if (rt.device() != nullptr) {
    st.staging.resize(count);
    for (size_t i = 0; i < count; ++i) st.staging[i].resize(Bytes(*slot->tensors[i]));
  }
  return OkStatus();
}

FleetStatus* PrepareOp(void* ctx, const FleetKernelContext* kc, void** state, size_t*) {
  auto st = std::make_unique<OpState>();
  if (Status s = PrepareState(*Runtime(ctx), kc, *st); !s.ok()) {
    return MakeFleetStatus(s.WithContext(kc->op_type));
  }
  *state = st.release();
  return nullptr;
}

void ReleaseOp(void*, void* state) { delete static_cast<OpState*>(state); }

// Elements per entry of a sparse block.
size_t RowWidth(const FleetTensor& x) {
  size_t width = 1;
  for (int32_t d = 1; d < x.ndim; ++d) width *= static_cast<size_t>(x.dims[d]);
  return width;
}

bool IsSparse(const FleetTensor& x) {
  return x.struct_size >= FLEET_STRUCT_SIZE(FleetTensor, height) && x.height >= 0;
}

// A sparse block's entries up to its last non-empty one: a block's entries are at its front
// (split_selected_rows), so a server receives what the batch touched in its rows, not the
// gradient's whole room.
int64_t UsedEntries(const FleetTensor& x) {
  int64_t used = x.ndim > 0 ? x.dims[0] : 0;
  while (used > 0 && x.rows[used - 1] < 0) --used;
  return used;
}

Status SendOne(PsTrainerRuntime& rt, OpState& st, const FleetTensor& x, size_t i) {
  const std::string& ep = st.epmap[i];
  auto what = [&] { return "send '" + st.names[i] + "' to " + rt.ServerLabel(ep); };
  // Host memory either way (a host-memory device's pointers are host pointers): the transport
  // reads only host tensors.
  FleetTensor t = x;
  t.device_type = FLEET_DEVICE_TYPE_HOST;
  t.device_ordinal = 0;
  std::vector<int64_t> dims;
  if (IsSparse(x)) {
    if (rt.device() != nullptr) {
      return Unimplemented(what() + ": sparse gradients are sent from host memory only");
    }
    if (!rt.CarriesSelectedRows()) {
      return FailedPrecondition(what() + ": the transport predates ABI 1.7 and would drop a "
                                         "sparse gradient's rows");
    }
    const int64_t used = UsedEntries(x);
    dims = DimsOf(x);
    dims[0] = used;
    t.dims = dims.data();
    MergedRows& m = st.merged[i];
    if (MergeRows(x.dtype, x.rows, x.data, used, RowWidth(x), m)) {
      dims[0] = static_cast<int64_t>(m.rows.size());
      t.data = m.values.data();
      t.rows = m.rows.data();
    }
  }
  if (rt.device() != nullptr) {
    std::vector<uint8_t>& host = st.staging[i];
    if (!host.empty()) {
      FLEET_RETURN_IF_ERROR(
          rt.device()->CopyToHost(rt.device_ordinal(), host.data(), x.data, host.size())
              .WithContext(what()));
    }
    t.data = host.data();
    t.device_type = FLEET_DEVICE_TYPE_HOST;
    t.device_ordinal = 0;
  }
  auto client = rt.Client(ep);
  if (!client.ok()) return client.status().WithContext(what());
  return (*client)->Send(st.names[i], t).WithContext(what());
}

Status RecvOne(PsTrainerRuntime& rt, OpState& st, const FleetTensor& out, size_t i) {
  const std::string& ep = st.epmap[i];
  const std::string what = "recv '" + st.names[i] + "' from " + rt.ServerLabel(ep);
  FleetTensor target = out;
  target.device_type = FLEET_DEVICE_TYPE_HOST;
  target.device_ordinal = 0;
  if (rt.device() != nullptr) {
    target.data = st.staging[i].data();
    target.device_type = FLEET_DEVICE_TYPE_HOST;
    target.device_ordinal = 0;
  }
  FLEET_RETURN_IF_ERROR(rt.GetInto(st.names[i], ep, out, target));
  if (rt.device() != nullptr && !st.staging[i].empty()) {
    FLEET_RETURN_IF_ERROR(rt.device()
                              ->CopyToDevice(rt.device_ordinal(), out.data,
                                             st.staging[i].data(), st.staging[i].size())
                              .WithContext(what));
  }
  return OkStatus();
}

Status Barriers(PsTrainerRuntime& rt, const OpState& st) {
  const int32_t kind =
      st.kind == Kind::kBatchBarrier ? FLEET_BARRIER_BATCH : FLEET_BARRIER_FETCH;
  const char* name = st.kind == Kind::kBatchBarrier ? "batch barrier" : "fetch barrier";
  return RunConcurrently(st.endpoints.size(), [&](size_t i) -> Status {
    const std::string what = std::string(name) + " at " + rt.ServerLabel(st.endpoints[i]);
    auto client = rt.Client(st.endpoints[i]);
    if (!client.ok()) return client.status().WithContext(what);
    return (*client)->Barrier(kind).WithContext(what);
  });
}

// distributed_lookup_table: the ids of every Ids input, checked against the table, go to the
// servers of their blocks once each (sorted, without repeats; one call per server, the servers
// at once), and each output row is copied from what came back. Rows past a sequence batch's
// last offset, and those of padding_idx, are zero.
Status Prefetch(PsTrainerRuntime& rt, OpState& st, const FleetKernelContext* kc) {
  const PrefetchTable& t = st.table;
  const FleetTensorSlot* ids_slot = Slot(kc->inputs, kc->num_inputs, "Ids");
  const FleetTensorSlot* out_slot = Slot(kc->outputs, kc->num_outputs, "Outputs");
  const size_t inputs = ids_slot == nullptr ? 0 : ids_slot->count;
  if (out_slot == nullptr || out_slot->count != inputs) {
    return InvalidArgument("Outputs does not hold one var per Ids");
  }
  const size_t num_blocks = t.blocks.size();
  const int64_t height = t.starts.back();
  auto rows_in = [](const FleetTensor& ids) {
    int64_t n = 1;
    for (int32_t d = 0; d < ids.ndim; ++d) n *= ids.dims[d];
    if (ids.struct_size >= FLEET_STRUCT_SIZE(FleetTensor, lod_count) && ids.lod_count > 0 &&
        ids.lod != nullptr) {
      n = std::min(n, ids.lod[ids.lod_count - 1]);
    }
    return n;
  };
  auto block_of = [&](int64_t id) {
    if (t.growable) {
      return static_cast<size_t>(fleet_row_shard(id, static_cast<int32_t>(num_blocks)));
    }
    return static_cast<size_t>(std::upper_bound(t.starts.begin(), t.starts.end(), id) -
                               t.starts.begin() - 1);
  };
  // What block k's server is asked for: the id itself in a growable table, else its row.
  auto key_of = [&](int64_t id, size_t k) { return t.growable ? id : id - t.starts[k]; };
  // Reused from step to step: after the first steps a lookup allocates nothing.
  std::vector<std::vector<int64_t>>& wanted = st.wanted;
  std::vector<std::vector<uint8_t>>& fetched = st.fetched;
  wanted.resize(num_blocks);
  fetched.resize(num_blocks);
  for (auto& w : wanted) w.clear();
  for (size_t i = 0; i < inputs; ++i) {
    const FleetTensor& ids = *ids_slot->tensors[i];
    const int64_t* v = static_cast<const int64_t*>(ids.data);
    const int64_t n = rows_in(ids);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t id = v[j];
      if (id == t.padding_idx) continue;
      if (t.growable && id < 0) {
        return InvalidArgument("Ids " + std::to_string(i) + " [" + std::to_string(j) + "] = " +
                               std::to_string(id) + " is negative; growable table '" + t.name +
                               "' takes ids in [0, 2^63 - 1)");
      }
      if (!t.growable && (id < 0 || id >= height)) {
        return InvalidArgument("Ids " + std::to_string(i) + " [" + std::to_string(j) + "] = " +
                               std::to_string(id) + " is outside table '" + t.name + "' of " +
                               std::to_string(height) + " rows");
      }
      const size_t k = block_of(id);
      wanted[k].push_back(key_of(id, k));
    }
  }
  for (auto& w : wanted) {
    std::sort(w.begin(), w.end());
    w.erase(std::unique(w.begin(), w.end()), w.end());
  }
  FLEET_RETURN_IF_ERROR(RunConcurrently(num_blocks, [&](size_t k) -> Status {
    if (wanted[k].empty()) return OkStatus();
    const std::string what = "fetch " + std::to_string(wanted[k].size()) + " rows of '" +
                             t.blocks[k] + "' from " + rt.ServerLabel(t.endpoints[k]);
    const std::vector<int64_t> expect = {static_cast<int64_t>(wanted[k].size()), t.width};
    fetched[k].resize(wanted[k].size() * t.row_bytes);
    const TensorSink sink = [&](int32_t dtype,
                                const std::vector<int64_t>& dims) -> StatusOr<FleetTensor> {
      if (dtype != t.dtype || dims != expect) {
        return InvalidArgument("the server sent " + TypeText(dtype, dims) + " for " +
                               TypeText(t.dtype, expect));
      }
      FleetTensor target{};
      target.struct_size = sizeof(FleetTensor);
      target.data = fetched[k].data();
      target.dtype = t.dtype;
      target.ndim = 2;
      target.dims = expect.data();
      target.device_type = FLEET_DEVICE_TYPE_HOST;
      target.height = -1;
      return target;
    };
    auto client = rt.Client(t.endpoints[k]);
    if (!client.ok()) return client.status().WithContext(what);
    return (*client)
        ->Prefetch(t.asked[k], wanted[k].data(), static_cast<int64_t>(wanted[k].size()), sink)
        .WithContext(what);
  }));
  for (size_t i = 0; i < inputs; ++i) {
    const FleetTensor& ids = *ids_slot->tensors[i];
    const FleetTensor& out = *out_slot->tensors[i];
    const int64_t* v = static_cast<const int64_t*>(ids.data);
    const int64_t n = rows_in(ids);
    const size_t out_bytes = Bytes(out);
    uint8_t* dst = static_cast<uint8_t*>(out.data);
    if (out_bytes < static_cast<size_t>(n) * t.row_bytes) {
      return InvalidArgument("Outputs " + std::to_string(i) + " has room for fewer rows than "
                             "its Ids");
    }
    std::memset(dst, 0, out_bytes);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t id = v[j];
      if (id == t.padding_idx) continue;
      const size_t k = block_of(id);
      const auto& w = wanted[k];
      const size_t pos = static_cast<size_t>(
          std::lower_bound(w.begin(), w.end(), key_of(id, k)) - w.begin());
      std::memcpy(dst + static_cast<size_t>(j) * t.row_bytes,
                  fetched[k].data() + pos * t.row_bytes, t.row_bytes);
    }
  }
  return OkStatus();
}

// geo_sgd for one block of a table whose gradient is sparse (Paddle's GEO sends the ids a
// trainer touched): the rows whose values changed since the last exchange go as a sparse delta,
// and only those rows come back (a prefetch), each then moved as a dense block's would be.
// Rows other trainers changed reach this one when it next changes them too.
Status GeoSparseBlock(PsTrainerRuntime& rt, GeoState& g, size_t at, float* p, float* old,
                      size_t rows, size_t width, int32_t dtype) {
  const std::string& ep = g.epmap[at];
  const std::string delta_name = g.names[at] + ".delta";
  const std::string what = "send '" + delta_name + "' to " + rt.ServerLabel(ep);
  if (!rt.CarriesSelectedRows()) {
    return FailedPrecondition(what + ": the transport predates ABI 1.7 and would drop a sparse "
                              "delta's rows");
  }
  g.rows.clear();
  for (size_t r = 0; r < rows; ++r) {
    if (std::memcmp(p + r * width, old + r * width, width * sizeof(float)) != 0) {
      g.rows.push_back(static_cast<int64_t>(r));
    }
  }
  if (g.rows.empty()) return OkStatus();
  const size_t n = g.rows.size();
  g.delta.resize(n * width);
  for (size_t k = 0; k < n; ++k) {
    const size_t r = static_cast<size_t>(g.rows[k]) * width;
    for (size_t j = 0; j < width; ++j) {
      g.delta[k * width + j] = (p[r + j] - old[r + j]) / g.trainers;
      old[r + j] += g.delta[k * width + j];
    }
  }
  const std::vector<int64_t> dims = {static_cast<int64_t>(n), static_cast<int64_t>(width)};
  FleetTensor delta{};
  delta.struct_size = sizeof(FleetTensor);
  delta.dtype = dtype;
  delta.ndim = 2;
  delta.dims = dims.data();
  delta.device_type = FLEET_DEVICE_TYPE_HOST;
  delta.data = g.delta.data();
  delta.rows = g.rows.data();
  delta.height = static_cast<int64_t>(rows);
  auto client = rt.Client(ep);
  if (!client.ok()) return client.status().WithContext(what);
  FLEET_RETURN_IF_ERROR((*client)->Send(delta_name, delta).WithContext(what));
  g.pulled.resize(n * width);
  const std::string fetch = "fetch " + std::to_string(n) + " rows of '" + g.names[at] +
                            "' from " + rt.ServerLabel(ep);
  const TensorSink sink = [&](int32_t got, const std::vector<int64_t>& got_dims)
      -> StatusOr<FleetTensor> {
    if (got != dtype || got_dims != dims) {
      return InvalidArgument("the server sent " + TypeText(got, got_dims) + " for " +
                             TypeText(dtype, dims));
    }
    FleetTensor target = delta;
    target.data = g.pulled.data();
    target.rows = nullptr;
    target.height = -1;
    return target;
  };
  FLEET_RETURN_IF_ERROR(
      (*client)->Prefetch(g.names[at], g.rows.data(), static_cast<int64_t>(n), sink)
          .WithContext(fetch));
  for (size_t k = 0; k < n; ++k) {
    const size_t r = static_cast<size_t>(g.rows[k]) * width;
    for (size_t j = 0; j < width; ++j) {
      p[r + j] += g.pulled[k * width + j] - old[r + j];
      old[r + j] = g.pulled[k * width + j];
    }
  }
  return OkStatus();
}

// geo_sgd (GEO-SGD, Paddle's GeoCommunicator): the first launch remembers every parameter;
// every k_steps launches after it, each block's change since then, divided by the number of
// trainers, goes to its server as "<block>.delta" (which the server adds to its block), the
// remembered value moves by that much, and the parameter then takes the server's block in
// place of the remembered value: p += server - old; old = server. With one trainer the
// parameter ends where local training left it, and the server catches up.
Status Geo(PsTrainerRuntime& rt, OpState& st, const FleetKernelContext* kc) {
  GeoState& g = st.geo;
  const FleetTensorSlot* xs = Slot(kc->inputs, kc->num_inputs, "X");
  const FleetTensorSlot* outs = Slot(kc->outputs, kc->num_outputs, "Out");
  if (xs == nullptr || outs == nullptr || xs->count != g.blocks.size() ||
      outs->count != xs->count) {
    return InvalidArgument("X and Out do not hold one var per parameter of `blocks`");
  }
  const int64_t launch = g.launches++;
  if (launch > 0 && launch % g.k_steps != 0) return OkStatus();
  size_t at = 0;  // the first block of parameter i
  for (size_t i = 0; i < xs->count; ++i) {
    const FleetTensor& x = *xs->tensors[i];
    const FleetTensor& out = *outs->tensors[i];
    const size_t n = Bytes(x) / sizeof(float);
    float* p = static_cast<float*>(out.data);
    if (out.data != x.data) std::memcpy(out.data, x.data, n * sizeof(float));
    std::vector<float>& old = g.old[i];
    if (launch == 0) {
      old.assign(p, p + n);
      at += static_cast<size_t>(g.blocks[i]);
      continue;
    }
    const size_t width = x.dims[0] > 0 ? n / static_cast<size_t>(x.dims[0]) : 0;
    size_t row = 0;
    for (int64_t b = 0; b < g.blocks[i]; ++b, ++at) {
      const size_t rows = static_cast<size_t>(g.sections[at]);
      const size_t from = row * width, count = rows * width;
      row += rows;
      if (g.sparse[i] != 0) {
        FLEET_RETURN_IF_ERROR(GeoSparseBlock(rt, g, at, p + from, old.data() + from, rows, width,
                                             x.dtype));
        continue;
      }
      g.delta.resize(count);
      g.pulled.resize(count);
      for (size_t j = 0; j < count; ++j) {
        g.delta[j] = (p[from + j] - old[from + j]) / g.trainers;
        old[from + j] += g.delta[j];
      }
      std::vector<int64_t> dims = DimsOf(x);
      dims[0] = static_cast<int64_t>(rows);
      FleetTensor block{};
      block.struct_size = sizeof(FleetTensor);
      block.dtype = FLEET_DTYPE_FLOAT32;
      block.ndim = static_cast<int32_t>(dims.size());
      block.dims = dims.data();
      block.device_type = FLEET_DEVICE_TYPE_HOST;
      block.height = -1;
      const std::string& ep = g.epmap[at];
      const std::string delta_name = g.names[at] + ".delta";
      const std::string what = "send '" + delta_name + "' to " + rt.ServerLabel(ep);
      auto client = rt.Client(ep);
      if (!client.ok()) return client.status().WithContext(what);
      block.data = g.delta.data();
      FLEET_RETURN_IF_ERROR((*client)->Send(delta_name, block).WithContext(what));
      FleetTensor target = block;
      target.data = g.pulled.data();
      FLEET_RETURN_IF_ERROR(rt.GetInto(g.names[at], ep, block, target));
      for (size_t j = 0; j < count; ++j) {
        p[from + j] += g.pulled[j] - old[from + j];
        old[from + j] = g.pulled[j];
      }
    }
  }
  return OkStatus();
}

// send and recv through the communicator (strategy.a_sync): a send queues its tensors, a recv
// takes what the communicator received last, or gets the var itself before anything arrived.
Status ThroughCommunicator(PsTrainerRuntime& rt, OpState& st, const FleetKernelContext* kc) {
  AsyncCommunicator& comm = *rt.communicator();
  const bool send = st.kind == Kind::kSend;
  const FleetTensorSlot* slot = send ? Slot(kc->inputs, kc->num_inputs, "X")
                                     : Slot(kc->outputs, kc->num_outputs, "Out");
  for (size_t i = 0; i < st.names.size(); ++i) {
    const FleetTensor& t = *slot->tensors[i];
    const std::string& ep = st.epmap[i];
    if (!send) {
      FLEET_ASSIGN_OR_RETURN(const bool taken, comm.Take(st.names[i], ep, t, &st.versions[i]));
      if (!taken) FLEET_RETURN_IF_ERROR(RecvOne(rt, st, t, i));
      continue;
    }
    auto what = [&] { return "send '" + st.names[i] + "' to " + rt.ServerLabel(ep); };
    FleetTensor x = t;
    std::vector<int64_t> dims;
    if (IsSparse(t)) {
      if (!rt.CarriesSelectedRows()) {
        return FailedPrecondition(what() + ": the transport predates ABI 1.7 and would drop a "
                                           "sparse gradient's rows");
      }
      dims = DimsOf(t);
      dims[0] = UsedEntries(t);
      x.dims = dims.data();
    }
    FLEET_RETURN_IF_ERROR(comm.Push(st.names[i], ep, x).WithContext(what()));
  }
  return OkStatus();
}

FleetStatus* LaunchOp(void* ctx, const FleetKernelContext* kc, void* state) {
  PsTrainerRuntime& rt = *Runtime(ctx);
  OpState& st = State(state);
  Status s;
  if (st.kind == Kind::kBatchBarrier || st.kind == Kind::kFetchBarrier) {
    s = Barriers(rt, st);
  } else if (st.kind == Kind::kPrefetch) {
    s = Prefetch(rt, st, kc);
  } else if (st.kind == Kind::kGeo) {
    s = Geo(rt, st, kc);
  } else if (rt.communicator() != nullptr) {
    s = ThroughCommunicator(rt, st, kc);
  } else {
    const bool send = st.kind == Kind::kSend;
    // On a device with streams, the kernels that produce the sent vars (or still read the vars a
    // recv overwrites) may be queued: the copies through host memory wait for them.
    if (rt.device() != nullptr && kc->stream != nullptr) {
      s = rt.device()->StreamSynchronize(kc->stream);
      if (!s.ok()) return MakeFleetStatus(s.WithContext(st.op_type));
    }
    const FleetTensorSlot* slot = send ? Slot(kc->inputs, kc->num_inputs, "X")
                                       : Slot(kc->outputs, kc->num_outputs, "Out");
    s = RunConcurrently(st.groups.size(), [&](size_t g) -> Status {
      for (size_t i : st.groups[g]) {
        const FleetTensor& t = *slot->tensors[i];
        FLEET_RETURN_IF_ERROR(send ? SendOne(rt, st, t, i) : RecvOne(rt, st, t, i));
      }
      return OkStatus();
    });
  }
  return MakeFleetStatus(s.WithContext(st.op_type));
}

FleetKernelDef Def(const char* type) {
  FleetKernelDef d{};
  d.struct_size = sizeof(FleetKernelDef);
  d.op_type = type;
  d.device = "";  // any: the executor asks the runtime directly
  d.dtype = FLEET_DTYPE_INVALID;
  d.prepare = PrepareOp;
  d.launch = LaunchOp;
  d.release = ReleaseOp;
  // send carries sparse gradients (with a transport of ABI 1.7 or later).
  if (std::string_view(type) == "send") d.flags = FLEET_KERNEL_FLAG_SELECTED_ROWS;
  return d;
}

const std::vector<FleetKernelDef>& Defs() {
  static const std::vector<FleetKernelDef> defs = {Def("send"), Def("recv"), Def("send_barrier"),
                                                   Def("fetch_barrier"),
                                                   Def("distributed_lookup_table"),
                                                   Def("geo_sgd")};
  return defs;
}

// Whether something accepts a TCP connection at "host:port" ("[v6]:port" too) within `wait`.
// The connect is non-blocking and polled, so an address that drops packets costs `wait`, not
// the kernel's two minutes of SYN retries.
bool Accepts(const std::string& endpoint, std::chrono::milliseconds wait) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = endpoint.substr(0, colon);
  const std::string port = endpoint.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return false;
  bool ok = false;
  for (addrinfo* a = found; a != nullptr && !ok; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t len = sizeof(error);
      ok = poll(&p, 1, static_cast<int>(wait.count())) == 1 &&
           getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return ok;
}

}  // namespace

Status RunConcurrently(size_t n, const std::function<Status(size_t)>& fn) {
  if (n == 0) return OkStatus();
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  threads.reserve(n - 1);
  for (size_t i = 1; i < n; ++i) {
    threads.emplace_back([&, i] { results[i] = fn(i); });
  }
  results[0] = fn(0);
  for (std::thread& t : threads) t.join();
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return OkStatus();
}

PsTrainerRuntime::PsTrainerRuntime(const ComponentRecord& transport,
                                   std::vector<std::string> endpoints, int32_t trainer_id,
                                   TransportOptions options, const ComponentRecord* device,
                                   int32_t device_ordinal)
    : transport_(transport),
      endpoints_(std::move(endpoints)),
      trainer_id_(trainer_id),
      options_(std::move(options)),
      device_ordinal_(device_ordinal) {
  if (device != nullptr) {
    // A device whose pointers are host pointers needs no staging; when its properties cannot
    // be read, staging is the safe side.
    auto d = std::make_unique<Device>(device);
    auto props = d->Props(device_ordinal);
    if (!props.ok() || (props->caps & FLEET_DEVICE_CAP_HOST_MEMORY) == 0) device_ = std::move(d);
  }
  kernels_record_.kind = FLEET_COMPONENT_KERNELS;
  kernels_record_.name = "pserver_rpc";
  kernels_record_.summary = "parameter-server RPC ops over transport '" + transport.name + "'";
  kernels_record_.plugin = "host";
  kernels_record_.ctx = this;
  for (const FleetKernelDef& def : Defs()) {
    kernels_.emplace(def.op_type, KernelCandidate{&kernels_record_, &def});
  }
}

PsTrainerRuntime::~PsTrainerRuntime() { Close(); }

const KernelCandidate* PsTrainerRuntime::Find(std::string_view op_type) const {
  auto it = kernels_.find(op_type);
  return it == kernels_.end() ? nullptr : &it->second;
}

bool PsTrainerRuntime::CarriesSelectedRows() const {
  return TransportCarriesSelectedRows(transport_);
}

std::string PsTrainerRuntime::ServerLabel(const std::string& endpoint) const {
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (endpoints_[i] == endpoint) return "pserver " + std::to_string(i) + " (" + endpoint + ")";
  }
  return "pserver " + endpoint;
}

StatusOr<TransportClient*> PsTrainerRuntime::Client(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return Aborted("the trainer's transport clients were closed");
  auto it = clients_.find(endpoint);
  if (it != clients_.end()) return it->second.get();
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<TransportClient> client,
                         TransportClient::Connect(transport_, endpoint, trainer_id_, options_));
  TransportClient* raw = client.get();
  clients_.emplace(endpoint, std::move(client));
  return raw;
}

Status PsTrainerRuntime::WaitServersReady() {
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  std::vector<char> ready(endpoints_.size(), 0);  // not vector<bool>: written concurrently
  (void)RunConcurrently(endpoints_.size(), [&](size_t i) -> Status {
    while (true) {
      using std::chrono::milliseconds;
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (Accepts(endpoints_[i], std::clamp(left, milliseconds(1), milliseconds(2000)))) break;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (closed_) return OkStatus();
      }
      if (std::chrono::steady_clock::now() >= deadline) return OkStatus();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ready[i] = 1;
    return OkStatus();
  });
  std::string missing;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (!ready[i]) missing += (missing.empty() ? "" : ", ") + ServerLabel(endpoints_[i]);
  }
  if (missing.empty()) return OkStatus();
  return Unavailable(missing + (missing.find(", ") == std::string::npos ? " does" : " do") +
                     " not accept connections after " +
                     std::to_string(options_.timeout.count() / 1000) +
                     " s (transport.timeout_s): is it started, at that address?");
}

Status PsTrainerRuntime::GetInto(const std::string& name, const std::string& endpoint,
                                 const FleetTensor& var, const FleetTensor& target) {
  const std::string what = "recv '" + name + "' from " + ServerLabel(endpoint);
  const TensorSink sink = [&](int32_t dtype,
                              const std::vector<int64_t>& dims) -> StatusOr<FleetTensor> {
    if (dtype != var.dtype || dims != DimsOf(var)) {
      return InvalidArgument("the server holds " + TypeText(dtype, dims) + " but the var is " +
                             TypeText(var.dtype, DimsOf(var)));
    }
    return target;
  };
  auto client = Client(endpoint);
  if (!client.ok()) return client.status().WithContext(what);
  return (*client)->Get(name, sink).WithContext(what);
}

Status PsTrainerRuntime::StartCommunicator(AsyncCommunicatorOptions options) {
  if (device_ != nullptr) {
    return Unimplemented("strategy.a_sync's communicator queues and receives in host memory "
                         "only; this device has none");
  }
  auto send = [this](const std::string& name, const std::string& ep,
                     const FleetTensor& t) -> Status {
    const std::string what = "send '" + name + "' to " + ServerLabel(ep);
    auto client = Client(ep);
    if (!client.ok()) return client.status().WithContext(what);
    return (*client)->Send(name, t).WithContext(what);
  };
  auto get = [this](const std::string& name, const std::string& ep,
                    const FleetTensor& into) { return GetInto(name, ep, into, into); };
  communicator_ = std::make_unique<AsyncCommunicator>(std::move(options), send, get);
  return OkStatus();
}

Status PsTrainerRuntime::Complete() {
  // The servers hear that this trainer is done only after its last gradient reached them.
  if (communicator_ != nullptr) {
    FLEET_RETURN_IF_ERROR(communicator_->Flush().WithContext("the communicator's last sends"));
  }
  std::vector<std::string> targets = endpoints_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [ep, client] : clients_) {
      if (std::find(targets.begin(), targets.end(), ep) == targets.end()) targets.push_back(ep);
    }
  }
  return RunConcurrently(targets.size(), [&](size_t i) -> Status {
    const std::string what = "complete at " + ServerLabel(targets[i]);
    auto client = Client(targets[i]);
    if (!client.ok()) return client.status().WithContext(what);
    return (*client)->Complete().WithContext(what);
  });
}

int PsTrainerRuntime::Abort(std::string_view reason) {
  std::vector<std::string> targets = endpoints_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [ep, client] : clients_) {
      if (std::find(targets.begin(), targets.end(), ep) == targets.end()) targets.push_back(ep);
    }
  }
  // A dying trainer must not linger: a short deadline, however long the job's calls may take.
  const auto limit = std::min<std::chrono::milliseconds>(options_.timeout,
                                                         std::chrono::seconds(5));
  std::vector<char> told(targets.size(), 0);
  (void)RunConcurrently(targets.size(), [&](size_t i) -> Status {
    auto client = Client(targets[i]);
    if (client.ok() && (*client)->Abort(reason, limit).ok()) told[i] = 1;
    return OkStatus();
  });
  return static_cast<int>(std::count(told.begin(), told.end(), 1));
}

void PsTrainerRuntime::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    // The clients stay allocated: a launch on another thread may still hold one, and Close
    // makes its pending call fail rather than pulling it from under it.
    for (auto& [ep, client] : clients_) client->Close();
  }
  // After the clients (its call in flight fails at once) and outside mu_ (its threads take it).
  if (communicator_ != nullptr) communicator_->Stop();
}

}  // namespace fleet
