#include "collective/collective_runtime.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

#include "collective/sparse_exchange.h"
#include "fleet/fleet_plugin.h"
#include "ir/program.h"
#include "plugin/host_api.h"
#include "support/logging.h"

namespace fleet {
namespace {

CollectiveRuntime* Runtime(void* ctx) { return static_cast<CollectiveRuntime*>(ctx); }

int64_t AttrInt(const FleetKernelContext* kc, const char* name, int64_t fallback) {
  for (size_t i = 0; i < kc->num_attrs; ++i) {
    if (std::strcmp(kc->attrs[i]->name, name) == 0) return kc->attrs[i]->i;
  }
  return fallback;
}

std::string_view AttrString(const FleetKernelContext* kc, const char* name) {
  for (size_t i = 0; i < kc->num_attrs; ++i) {
    const FleetAttr* a = kc->attrs[i];
    if (std::strcmp(a->name, name) == 0 && a->s != nullptr) return {a->s, a->s_len};
  }
  return {};
}

bool IsSparse(const FleetTensor* t) {
  return FLEET_HAS_FIELD(t, FleetTensor, height) && t->height >= 0;
}

size_t Numel(const FleetTensor& t) {
  size_t n = 1;
  for (int32_t d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.dims[d]);
  return n;
}
size_t Bytes(const FleetTensor& t) {
  return Numel(t) * ir::DataTypeSize(static_cast<ir::DataType>(t.dtype));
}

// What a launch needs, read from the op once at prepare. Every collective schema has at most
// one input slot X and one output slot Out (collective_ops.cc), so they are inputs[0] and
// outputs[0]. The ring is looked up at the first launch, not at prepare: a startup program is
// prepared before its c_comm_init has run, and rings are never removed once made.
struct OpState {
  int32_t ring_id = 0;
  int32_t root = 0;
  int32_t nranks = 1;
  int32_t rank = 0;
  int32_t reduce = FLEET_REDUCE_SUM;
  bool packed = false;  // several tensors of one dtype in host memory, reduced by one call
  Communicator* ring = nullptr;
  std::string label;    // "c_allreduce_sum (ring 0)", for errors
  std::vector<std::string> vars;  // X's var names where the schedule tells them
  // c_allgather of a sparse gradient exchanged the dense way (sparse_exchange.h); else null.
  std::unique_ptr<DenseSparseExchange> dense_exchange;
  // The ring's agreements() after this op's last call; equal at a launch means the op already
  // ran since the ranks last compared (a new step). Never-run ops hold a value it cannot have.
  uint64_t agreed_after_last = ~uint64_t{0};
};

// The call site of tensor `i` of the op's X (packed: of the whole slot), for the communicator's
// desync check and records; `first` is whether it is the launch's first call.
CallSite SiteOf(const OpState& st, size_t i, int32_t tensors, bool first) {
  CallSite site;
  site.from_program = true;
  site.var = i < st.vars.size() ? std::string_view(st.vars[i]) : std::string_view();
  site.tensors = tensors;
  site.repeat = first && st.agreed_after_last == st.ring->agreements();
  return site;
}

OpState& State(void* state) { return *static_cast<OpState*>(state); }

int32_t ReduceOpOf(std::string_view t) {
  if (t == "c_allreduce_max") return FLEET_REDUCE_MAX;
  if (t == "c_allreduce_min") return FLEET_REDUCE_MIN;
  if (t == "c_allreduce_prod") return FLEET_REDUCE_PROD;
  return FLEET_REDUCE_SUM;
}

// Chooses how a sparse gradient moves (sparse_exchange.h) and says so: the choice depends on the
// batch's entries, which only prepare knows, and every rank makes the same one from the same
// shapes.
Status PrepareSparseExchange(void* ctx, const FleetKernelContext* kc, OpState& st) {
  const FleetTensor& x = *kc->inputs[0]->tensors[0];
  const int64_t entries = x.ndim > 0 ? x.dims[0] : 0;
  int64_t row_elems = 1;
  for (int32_t d = 1; d < x.ndim; ++d) row_elems *= x.dims[d];
  const std::string device = Runtime(ctx)->options().device;
  FLEET_ASSIGN_OR_RETURN(
      SparseExchangePlan plan,
      PlanSparseExchange(AttrString(kc, "sparse_exchange"), st.nranks, entries, x.height,
                         row_elems, static_cast<ir::DataType>(x.dtype), device == "cpu"));
  const bool named = !st.vars.empty() && st.vars[0] != "?";
  Log().info("{}{}: {}", st.label, named ? " of '" + st.vars[0] + "'" : std::string(),
             plan.Describe(st.nranks, entries, x.height));
  if (!plan.dense) return OkStatus();
  FLEET_ASSIGN_OR_RETURN(st.dense_exchange,
                         DenseSparseExchange::Create(x.height, row_elems,
                                                     static_cast<ir::DataType>(x.dtype),
                                                     st.label));
  return OkStatus();
}

FleetStatus* PrepareOp(void* ctx, const FleetKernelContext* kc, void** state,
                       size_t* scratch_bytes) {
  auto st = std::make_unique<OpState>();
  st->ring_id = static_cast<int32_t>(AttrInt(kc, "ring_id", 0));
  st->root = static_cast<int32_t>(AttrInt(kc, "root", 0));
  st->nranks = static_cast<int32_t>(AttrInt(kc, "nranks", 1));
  st->rank = static_cast<int32_t>(AttrInt(kc, "rank", 0));
  st->reduce = ReduceOpOf(kc->op_type);
  st->label = std::string(kc->op_type) + " (ring " + std::to_string(st->ring_id) + ")";
  if (std::string_view(kc->op_type).rfind("c_allreduce_", 0) == 0) {
    const FleetTensorSlot* x = kc->inputs[0];
    st->packed = x->count >= 2 && Runtime(ctx)->options().device == "cpu";
    size_t total = 0;
    for (size_t i = 0; i < x->count; ++i) {
      st->packed = st->packed && x->tensors[i]->dtype == x->tensors[0]->dtype;
      total += Bytes(*x->tensors[i]);
    }
    if (st->packed) *scratch_bytes = total;
  }
  const std::string_view type = kc->op_type;
  const bool communicates = type.starts_with("c_allreduce_") || type == "c_broadcast" ||
                            type == "c_allgather" || type == "c_reducescatter";
  if (communicates && kc->num_inputs > 0) {
    const FleetTensorSlot* x = kc->inputs[0];
    std::vector<int32_t> dtypes;
    std::vector<std::vector<int64_t>> dims;
    for (size_t i = 0; i < x->count; ++i) {
      const FleetTensor* t = x->tensors[i];
      dtypes.push_back(t == nullptr ? -1 : t->dtype);
      if (t == nullptr) {
        dims.emplace_back();
      } else {
        dims.emplace_back(t->dims, t->dims + t->ndim);
      }
    }
    st->vars = Runtime(ctx)->VarNames(kc->op_type, st->ring_id, dtypes, dims);
  }
  if (type == "c_allgather" && kc->num_inputs > 0 && kc->inputs[0]->count > 0 &&
      IsSparse(kc->inputs[0]->tensors[0])) {
    if (Status s = PrepareSparseExchange(ctx, kc, *st); !s.ok()) {
      return MakeFleetStatus(s.WithContext(st->label));
    }
  }
  *state = st.release();
  return nullptr;
}

void ReleaseOp(void*, void* state) { delete static_cast<OpState*>(state); }

Status RingOf(void* ctx, OpState& st) {
  if (st.ring != nullptr) return OkStatus();
  auto ring = Runtime(ctx)->Ring(st.ring_id);
  if (!ring.ok()) return ring.status();
  st.ring = *ring;
  return OkStatus();
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

FleetStatus* Done(const OpState& st, const Status& s) {
  return MakeFleetStatus(s.WithContext(st.label));
}

FleetStatus* CommInitLaunch(void* ctx, const FleetKernelContext*, void* state) {
  const OpState& st = State(state);
  return MakeFleetStatus(Runtime(ctx)->InitRing(st.ring_id, st.nranks, st.rank));
}

FleetStatus* BroadcastLaunch(void* ctx, const FleetKernelContext* kc, void* state) {
  OpState& st = State(state);
  const FleetTensor& x = *kc->inputs[0]->tensors[0];
  const FleetTensor& out = *kc->outputs[0]->tensors[0];
  Status s = RingOf(ctx, st);
  if (s.ok()) s = CopyIfApart(ctx, x, out);
  if (s.ok()) s = st.ring->Broadcast(out, st.root, kc->stream, SiteOf(st, 0, 1, true));
  if (s.ok()) st.agreed_after_last = st.ring->agreements();
  return Done(st, s);
}

FleetStatus* AllReduceLaunch(void* ctx, const FleetKernelContext* kc, void* state) {
  OpState& st = State(state);
  if (Status s = RingOf(ctx, st); !s.ok()) return Done(st, s);
  const FleetTensorSlot* x = kc->inputs[0];
  const FleetTensorSlot* out = kc->outputs[0];
  if (!st.packed) {
    for (size_t i = 0; i < x->count; ++i) {
      Status s = st.ring->AllReduce(*x->tensors[i], *out->tensors[i], st.reduce, kc->stream,
                                    SiteOf(st, i, 1, i == 0));
      if (!s.ok()) return Done(st, s);
    }
    st.agreed_after_last = st.ring->agreements();
    return nullptr;
  }
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
  Status reduced = st.ring->AllReduce(packed, packed, st.reduce, nullptr,
                                      SiteOf(st, 0, static_cast<int32_t>(x->count), true));
  if (!reduced.ok()) return Done(st, reduced);
  st.agreed_after_last = st.ring->agreements();
  offset = 0;
  for (size_t i = 0; i < out->count; ++i) {
    const size_t bytes = Bytes(*out->tensors[i]);
    if (bytes != 0) std::memcpy(out->tensors[i]->data, buffer + offset, bytes);
    offset += bytes;
  }
  return nullptr;
}

// A sparse gradient (FleetTensor.rows) is exchanged as prepare chose (sparse_exchange.h).
FleetStatus* AllGatherLaunch(void* ctx, const FleetKernelContext* kc, void* state) {
  OpState& st = State(state);
  Status s = RingOf(ctx, st);
  const FleetTensor& x = *kc->inputs[0]->tensors[0];
  const FleetTensor& out = *kc->outputs[0]->tensors[0];
  const bool sparse = IsSparse(&x);
  if (s.ok() && !sparse) s = st.ring->AllGather(x, out, kc->stream, SiteOf(st, 0, 1, true));
  if (s.ok() && sparse && st.dense_exchange != nullptr) {
    s = st.dense_exchange->Run(*st.ring, x, out, SiteOf(st, 0, 1, true), SiteOf(st, 0, 1, false));
  } else if (s.ok() && sparse) {
    s = GatherEntries(*st.ring, x, out, kc->stream, SiteOf(st, 0, 1, true),
                      SiteOf(st, 0, 1, false));
  }
  if (s.ok()) st.agreed_after_last = st.ring->agreements();
  return Done(st, s);
}

FleetStatus* ReduceScatterLaunch(void* ctx, const FleetKernelContext* kc, void* state) {
  OpState& st = State(state);
  Status s = RingOf(ctx, st);
  if (s.ok()) {
    s = st.ring->ReduceScatter(*kc->inputs[0]->tensors[0], *kc->outputs[0]->tensors[0],
                               FLEET_REDUCE_SUM, kc->stream, SiteOf(st, 0, 1, true));
  }
  if (s.ok()) st.agreed_after_last = st.ring->agreements();
  return Done(st, s);
}

// A communicator either completes a call before returning or, handed the compute stream, orders
// its own stream against it with events both ways (fleet_comm.h), so by the time later work on
// the compute stream runs the result is in place: a sync only has to honour Out = X.
// The passes sync sparse gradients in place only (their rows stay where they are).
FleetStatus* SyncLaunch(void* ctx, const FleetKernelContext* kc, void* state) {
  const FleetTensorSlot* x = kc->inputs[0];
  const FleetTensorSlot* out = kc->outputs[0];
  for (size_t i = 0; i < x->count && i < out->count; ++i) {
    const FleetTensor& t = *x->tensors[i];
    if (IsSparse(&t) && t.data != out->tensors[i]->data) {
      return Done(State(state), InvalidArgument(std::string(kc->op_type) +
                                                ": a sparse gradient is synced in place only"));
    }
    Status s = CopyIfApart(ctx, *x->tensors[i], *out->tensors[i]);
    if (!s.ok()) return Done(State(state), s);
  }
  return nullptr;
}

FleetKernelDef Def(const char* type, FleetStatus* (*launch)(void*, const FleetKernelContext*,
                                                            void*),
                   uint32_t flags = 0) {
  FleetKernelDef d{};
  d.flags = flags;
  d.struct_size = sizeof(FleetKernelDef);
  d.op_type = type;
  d.device = "";  // any: the executor asks the runtime directly
  d.dtype = FLEET_DTYPE_INVALID;
  d.prepare = PrepareOp;
  d.launch = launch;
  d.release = ReleaseOp;
  return d;
}

const std::vector<FleetKernelDef>& Defs() {
  static const std::vector<FleetKernelDef> defs = [] {
    std::vector<FleetKernelDef> d;
    d.push_back(Def("c_comm_init", CommInitLaunch));
    d.push_back(Def("c_broadcast", BroadcastLaunch));
    for (const char* t : {"c_allreduce_sum", "c_allreduce_max", "c_allreduce_min",
                          "c_allreduce_prod"}) {
      d.push_back(Def(t, AllReduceLaunch));
    }
    // Sparse gradients are gathered and synced (grad_allreduce), never reduced.
    constexpr uint32_t kRows = FLEET_KERNEL_FLAG_SELECTED_ROWS;
    d.push_back(Def("c_allgather", AllGatherLaunch, kRows));
    d.push_back(Def("c_reducescatter", ReduceScatterLaunch));
    d.push_back(Def("c_sync_calc_stream", SyncLaunch, kRows));
    d.push_back(Def("c_sync_comm_stream", SyncLaunch, kRows));
    return d;
  }();
  return defs;
}

// One recorder file per process: the first runtime to find FLEET_FLIGHT_RECORDER takes it (in
// single_process_multi_thread mode, the first device's).
std::atomic<bool> g_recorder_claimed{false};

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

CollectiveRuntime::CollectiveRuntime(const ComponentRecord& component, Store* store,
                                     CommunicatorOptions options)
    : component_(component),
      store_(store),
      options_(std::move(options)) {
  const std::string path = EnvOr(kFlightRecorderEnv);
  if (!path.empty() && !g_recorder_claimed.exchange(true)) {
    auto recorder = FlightRecorder::Create(path, options_.rank, options_.world_size);
    if (recorder.ok()) {
      recorder_ = std::move(*recorder);
    } else {
      Log().warn("{}; this rank's collectives are not recorded", recorder.status().message());
    }
  }
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
  o.ring = ring_id;
  o.recorder = recorder_.get();
  FLEET_ASSIGN_OR_RETURN(auto comm, Communicator::Create(component_, &store_,
                                                         "ring" + std::to_string(ring_id), o));
  if (schedule_) {
    const CollectiveSchedule schedule = std::move(*schedule_);
    schedule_.reset();
    if (Status agree = CheckSchedulesAgree(*comm, schedule); !agree.ok()) {
      comm->Abort();
      return agree;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) {
    comm->Abort();
    return aborted();
  }
  rings_[ring_id] = std::move(comm);
  return OkStatus();
}

void CollectiveRuntime::SetSchedule(CollectiveSchedule schedule) {
  {
    std::lock_guard<std::mutex> names(names_mu_);
    names_ = VarNamer(schedule);
  }
  std::lock_guard<std::mutex> init(init_mu_);
  schedule_ = std::move(schedule);
}

std::vector<std::string> CollectiveRuntime::VarNames(std::string_view op_type, int32_t ring,
                                                     const std::vector<int32_t>& dtypes,
                                                     const std::vector<std::vector<int64_t>>& dims) {
  std::lock_guard<std::mutex> names(names_mu_);
  return names_.Next(op_type, ring, dtypes, dims);
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
