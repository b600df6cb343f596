#include "dist/collective_runtime.h"

#include <cstring>
#include <utility>

#include "fleet/fleet_plugin.h"
#include "ir/program.h"
#include "plugin/host_api.h"

namespace fleet {
namespace {

CollectiveRuntime* Runtime(void* ctx) { return static_cast<CollectiveRuntime*>(ctx); }

int64_t AttrInt(const FleetKernelContext* kc, const char* name, int64_t fallback) {
  for (size_t i = 0; i < kc->num_attrs; ++i) {
    if (std::strcmp(kc->attrs[i]->name, name) == 0) return kc->attrs[i]->i;
  }
  return fallback;
}

const FleetTensorSlot* Slot(const FleetTensorSlot* const* slots, size_t n, const char* name) {
  for (size_t i = 0; i < n; ++i) {
    if (std::strcmp(slots[i]->name, name) == 0) return slots[i];
  }
  return nullptr;
}
const FleetTensorSlot* In(const FleetKernelContext* kc, const char* name) {
  return Slot(kc->inputs, kc->num_inputs, name);
}
const FleetTensorSlot* Out(const FleetKernelContext* kc, const char* name) {
  return Slot(kc->outputs, kc->num_outputs, name);
}

size_t Numel(const FleetTensor& t) {
  size_t n = 1;
  for (int32_t d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.dims[d]);
  return n;
}
size_t Bytes(const FleetTensor& t) {
  return Numel(t) * ir::DataTypeSize(static_cast<ir::DataType>(t.dtype));
}

std::string OpLabel(const FleetKernelContext* kc) {
  return std::string(kc->op_type) + " (ring " + std::to_string(AttrInt(kc, "ring_id", 0)) + ")";
}

StatusOr<Communicator*> RingOf(void* ctx, const FleetKernelContext* kc) {
  auto ring = Runtime(ctx)->Ring(static_cast<int32_t>(AttrInt(kc, "ring_id", 0)));
  if (!ring.ok()) return ring.status().WithContext(kc->op_type);
  return ring;
}

// Out = X where the two are different buffers (host memory only: the planner gives X == Out the
// same buffer whenever the names match, which is how passes emit these ops).
Status CopyIfApart(void* ctx, const FleetTensor& x, const FleetTensor& out) {
  if (x.data == out.data || Bytes(x) == 0) return OkStatus();
  if (Runtime(ctx)->options().device != "cpu") {
    return Unimplemented("X and Out must be the same var on device '" +
                         Runtime(ctx)->options().device + "'");
  }
  std::memcpy(out.data, x.data, Bytes(x));
  return OkStatus();
}

FleetStatus* CommInitLaunch(void* ctx, const FleetKernelContext* kc, void*) {
  Status s = Runtime(ctx)->InitRing(static_cast<int32_t>(AttrInt(kc, "ring_id", 0)),
                                    static_cast<int32_t>(AttrInt(kc, "nranks", 1)),
                                    static_cast<int32_t>(AttrInt(kc, "rank", 0)));
  return MakeFleetStatus(s);
}

FleetStatus* BroadcastLaunch(void* ctx, const FleetKernelContext* kc, void*) {
  auto ring = RingOf(ctx, kc);
  if (!ring.ok()) return MakeFleetStatus(ring.status());
  const FleetTensor& x = *In(kc, "X")->tensors[0];
  const FleetTensor& out = *Out(kc, "Out")->tensors[0];
  Status s = CopyIfApart(ctx, x, out);
  if (s.ok()) s = (*ring)->Broadcast(out, static_cast<int32_t>(AttrInt(kc, "root", 0)));
  return MakeFleetStatus(s.WithContext(OpLabel(kc)));
}

int32_t ReduceOpOf(const char* op_type) {
  std::string_view t(op_type);
  if (t == "c_allreduce_max") return FLEET_REDUCE_MAX;
  if (t == "c_allreduce_min") return FLEET_REDUCE_MIN;
  if (t == "c_allreduce_prod") return FLEET_REDUCE_PROD;
  return FLEET_REDUCE_SUM;
}

// Several tensors of one dtype in host memory are packed into scratch and reduced by one call;
// anything else is reduced tensor by tensor.
bool Packable(void* ctx, const FleetTensorSlot* x) {
  if (x->count < 2 || Runtime(ctx)->options().device != "cpu") return false;
  for (size_t i = 1; i < x->count; ++i) {
    if (x->tensors[i]->dtype != x->tensors[0]->dtype) return false;
  }
  return true;
}

FleetStatus* AllReducePrepare(void* ctx, const FleetKernelContext* kc, void**,
                              size_t* scratch_bytes) {
  const FleetTensorSlot* x = In(kc, "X");
  if (!Packable(ctx, x)) return nullptr;
  size_t total = 0;
  for (size_t i = 0; i < x->count; ++i) total += Bytes(*x->tensors[i]);
  *scratch_bytes = total;
  return nullptr;
}

FleetStatus* AllReduceLaunch(void* ctx, const FleetKernelContext* kc, void*) {
  auto ring = RingOf(ctx, kc);
  if (!ring.ok()) return MakeFleetStatus(ring.status());
  const FleetTensorSlot* x = In(kc, "X");
  const FleetTensorSlot* out = Out(kc, "Out");
  const int32_t op = ReduceOpOf(kc->op_type);
  if (Packable(ctx, x) && kc->scratch != nullptr) {
    char* buffer = static_cast<char*>(kc->scratch);
    size_t offset = 0;
    int64_t numel = 0;
    for (size_t i = 0; i < x->count; ++i) {
      const size_t bytes = Bytes(*x->tensors[i]);
      if (bytes != 0) std::memcpy(buffer + offset, x->tensors[i]->data, bytes);
      offset += bytes;
      numel += static_cast<int64_t>(Numel(*x->tensors[i]));
    }
    FleetTensor packed = *x->tensors[0];
    packed.data = buffer;
    packed.ndim = 1;
    packed.dims = &numel;
    packed.strides = nullptr;
    Status s = (*ring)->AllReduce(packed, packed, op);
    if (!s.ok()) return MakeFleetStatus(s.WithContext(OpLabel(kc)));
    offset = 0;
    for (size_t i = 0; i < out->count; ++i) {
      const size_t bytes = Bytes(*out->tensors[i]);
      if (bytes != 0) std::memcpy(out->tensors[i]->data, buffer + offset, bytes);
      offset += bytes;
    }
    return nullptr;
  }
  for (size_t i = 0; i < x->count; ++i) {
    Status s = (*ring)->AllReduce(*x->tensors[i], *out->tensors[i], op);
    if (!s.ok()) return MakeFleetStatus(s.WithContext(OpLabel(kc)));
  }
  return nullptr;
}

FleetStatus* AllGatherLaunch(void* ctx, const FleetKernelContext* kc, void*) {
  auto ring = RingOf(ctx, kc);
  if (!ring.ok()) return MakeFleetStatus(ring.status());
  Status s = (*ring)->AllGather(*In(kc, "X")->tensors[0], *Out(kc, "Out")->tensors[0]);
  return MakeFleetStatus(s.WithContext(OpLabel(kc)));
}

FleetStatus* ReduceScatterLaunch(void* ctx, const FleetKernelContext* kc, void*) {
  auto ring = RingOf(ctx, kc);
  if (!ring.ok()) return MakeFleetStatus(ring.status());
  Status s = (*ring)->ReduceScatter(*In(kc, "X")->tensors[0], *Out(kc, "Out")->tensors[0],
                                    FLEET_REDUCE_SUM);
  return MakeFleetStatus(s.WithContext(OpLabel(kc)));
}

// The communicators here complete every call before returning (NULL stream), so a sync only
// has to honour Out = X.
FleetStatus* SyncLaunch(void* ctx, const FleetKernelContext* kc, void*) {
  const FleetTensorSlot* x = In(kc, "X");
  const FleetTensorSlot* out = Out(kc, "Out");
  for (size_t i = 0; i < x->count && i < out->count; ++i) {
    Status s = CopyIfApart(ctx, *x->tensors[i], *out->tensors[i]);
    if (!s.ok()) return MakeFleetStatus(s.WithContext(kc->op_type));
  }
  return nullptr;
}

FleetKernelDef Def(const char* type, FleetStatus* (*launch)(void*, const FleetKernelContext*,
                                                            void*)) {
  FleetKernelDef d{};
  d.struct_size = sizeof(FleetKernelDef);
  d.op_type = type;
  d.device = "";  // any: the executor asks the runtime directly
  d.dtype = FLEET_DTYPE_INVALID;
  d.launch = launch;
  return d;
}

const std::vector<FleetKernelDef>& Defs() {
  static const std::vector<FleetKernelDef> defs = [] {
    std::vector<FleetKernelDef> d;
    d.push_back(Def("c_comm_init", CommInitLaunch));
    d.push_back(Def("c_broadcast", BroadcastLaunch));
    for (const char* t : {"c_allreduce_sum", "c_allreduce_max", "c_allreduce_min",
                          "c_allreduce_prod"}) {
      FleetKernelDef def = Def(t, AllReduceLaunch);
      def.prepare = AllReducePrepare;
      d.push_back(def);
    }
    d.push_back(Def("c_allgather", AllGatherLaunch));
    d.push_back(Def("c_reducescatter", ReduceScatterLaunch));
    d.push_back(Def("c_sync_calc_stream", SyncLaunch));
    d.push_back(Def("c_sync_comm_stream", SyncLaunch));
    return d;
  }();
  return defs;
}

}  // namespace

CollectiveRuntime::CollectiveRuntime(const ComponentRecord& component, Store* store,
                                     CommunicatorOptions options)
    : component_(component), store_(store), options_(std::move(options)) {
  kernels_record_.kind = FLEET_COMPONENT_KERNELS;
  kernels_record_.name = "collective";
  kernels_record_.summary = "collective ops over communicator '" + component.name + "'";
  kernels_record_.plugin = "host";
  kernels_record_.ctx = this;
  for (const FleetKernelDef& def : Defs()) {
    kernels_.emplace(def.op_type, KernelCandidate{&kernels_record_, &def});
  }
}

CollectiveRuntime::~CollectiveRuntime() = default;

const KernelCandidate* CollectiveRuntime::Find(std::string_view op_type) const {
  auto it = kernels_.find(op_type);
  return it == kernels_.end() ? nullptr : &it->second;
}

Status CollectiveRuntime::InitRing(int32_t ring_id, int32_t nranks, int32_t rank) {
  if (nranks != options_.world_size || rank != options_.rank) {
    return InvalidArgument("c_comm_init of ring " + std::to_string(ring_id) + " says rank " +
                           std::to_string(rank) + " of " + std::to_string(nranks) +
                           ", but this process is rank " + std::to_string(options_.rank) +
                           " of " + std::to_string(options_.world_size) +
                           " (was the program transpiled for another rank?)");
  }
  std::lock_guard<std::mutex> init(init_mu_);
  auto aborted = [&] {
    return Aborted("ring " + std::to_string(ring_id) + ": the collective runtime was aborted");
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return aborted();
    if (rings_.count(ring_id) != 0) return OkStatus();
  }
  CommunicatorOptions o = options_;
  o.label = "ring " + std::to_string(ring_id);
  FLEET_ASSIGN_OR_RETURN(auto comm, Communicator::Create(component_, &store_,
                                                         "ring" + std::to_string(ring_id), o));
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) {
    comm->Abort();
    return aborted();
  }
  rings_[ring_id] = std::move(comm);
  return OkStatus();
}

StatusOr<Communicator*> CollectiveRuntime::Ring(int32_t ring_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rings_.find(ring_id);
  if (it == rings_.end()) {
    return FailedPrecondition("ring " + std::to_string(ring_id) +
                              " has no communicator: no c_comm_init for it ran (run the "
                              "transpiled startup program first)");
  }
  return it->second.get();
}

void CollectiveRuntime::AbortAll() {
  store_.Abort();
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  for (auto& [id, comm] : rings_) comm->Abort();
}

}  // namespace fleet
