#include "collective/communicator.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "plugin/host_api.h"

namespace fleet {
namespace {

size_t DtypeBytes(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_FLOAT64:
    case FLEET_DTYPE_INT64:
      return 8;
    case FLEET_DTYPE_FLOAT32:
    case FLEET_DTYPE_INT32:
      return 4;
    case FLEET_DTYPE_FLOAT16:
    case FLEET_DTYPE_BFLOAT16:
    case FLEET_DTYPE_INT16:
      return 2;
    default:
      return 1;
  }
}

size_t TensorNumel(const FleetTensor& t) {
  size_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= static_cast<size_t>(t.dims[i]);
  return n;
}

size_t TensorBytes(const FleetTensor& t) { return TensorNumel(t) * DtypeBytes(t.dtype); }

CollectiveCall CallOf(CollectiveKind kind, const CallSite& site, int32_t ring,
                      const FleetTensor& t, int32_t arg) {
  CollectiveCall c;
  c.kind = kind;
  c.from_program = site.from_program;
  c.ring = ring;
  c.dtype = t.dtype;
  c.arg = arg;
  c.tensors = site.tensors;
  c.numel = static_cast<int64_t>(TensorNumel(t));
  c.bytes = static_cast<int64_t>(TensorBytes(t));
  c.var = site.var;
  return c;
}

}  // namespace

Communicator::Communicator(const ComponentRecord& component, Store* store,
                           const std::string& scope, CommunicatorOptions options)
    : component_(component),
      vtable_(component.table<FleetCommVTable>()),
      store_(store, scope),
      options_(std::move(options)),
      ledger_(options_.desync_check, options_.recorder) {}

StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const ComponentRecord& component,
                                                             Store* store,
                                                             const std::string& scope,
                                                             const CommunicatorOptions& options) {
  if (component.kind != FLEET_COMPONENT_COMMUNICATOR) {
    return InvalidArgument("component '" + component.name + "' is not a communicator");
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument(options.label + ": rank " + std::to_string(options.rank) +
                           " is outside a world of " + std::to_string(options.world_size));
  }
  std::unique_ptr<Communicator> c(new Communicator(component, store, scope, options));
  const FleetCommVTable* vt = c->vtable_;
  FLEET_ASSIGN_OR_RETURN(c->placement_,
                         PlaceCommunicator(component, options.device, options.staging, ""));
  c->reduces_host_ = CommReducesMemoryOf(component, "cpu");
  if (options.device_component != nullptr) c->device_.emplace(options.device_component);
  if (c->device_ == std::nullopt &&
      (c->placement_ == CommPlacement::kStaged || !c->reduces_host_)) {
    return Internal(options.label + ": communicator '" + component.name +
                    "' needs the device component of '" + options.device + "'");
  }
  if (vt->create == nullptr || vt->destroy == nullptr) {
    return FailedPrecondition("communicator '" + component.name + "' (plugin '" +
                              component.plugin + "') lacks create or destroy");
  }

  if (FLEET_CAN_CALL(vt, FleetCommVTable, supports_world_size) &&
      vt->supports_world_size(component.ctx, options.world_size) == 0) {
    return FailedPrecondition(options.label + ": communicator '" + component.name + "' (plugin '" +
                              component.plugin + "') does not support a group of " +
                              std::to_string(options.world_size) +
                              " ranks; pick another [comm] backend or world size");
  }

  // Options as typed attributes; their storage lives until create returns (the ABI's rule).
  std::vector<FleetAttr> attrs(options.options.size());
  std::vector<const FleetAttr*> attr_ptrs;
  for (size_t i = 0; i < options.options.size(); ++i) {
    FleetAttr& a = attrs[i];
    a.struct_size = sizeof(FleetAttr);
    a.name = options.options[i].first.c_str();
    a.type = FLEET_ATTR_STRING;
    a.s = options.options[i].second.c_str();
    a.s_len = options.options[i].second.size();
    attr_ptrs.push_back(&a);
  }
  FleetCommConfig config{};
  config.struct_size = sizeof(FleetCommConfig);
  config.rank = options.rank;
  config.world_size = options.world_size;
  config.store = c->store_.table();
  config.timeout_ms = options.timeout.count();
  config.device = options.device.c_str();
  config.device_ordinal = options.device_ordinal;
  config.num_options = attr_ptrs.size();
  config.options = attr_ptrs.empty() ? nullptr : attr_ptrs.data();
  if (c->placement_ == CommPlacement::kStaged) {
    // The plugin sees host tensors only.
    config.device = "cpu";
    config.device_ordinal = 0;
  } else if (c->device_.has_value()) {
    config.device_table = c->device_->table();
    config.device_ctx = c->device_->ctx();
  }
  FLEET_RETURN_IF_ERROR(c->Check(vt->create(component.ctx, &config, &c->comm_), "create"));
  if (c->comm_ == nullptr) {
    return Internal(options.label + ": communicator '" + component.name +
                    "' returned OK from create but no communicator");
  }
  if (options.world_size > 1) {
    c->beat_thread_ = std::thread([raw = c.get()] { raw->Heartbeat(); });
    // Ranks that would check at different points would desync in the check itself.
    FLEET_RETURN_IF_ERROR(c->CompareCalls());
  }
  return c;
}

namespace {
constexpr std::chrono::milliseconds kBeat(500);
std::string BeatKey(int32_t rank) { return "heartbeat/" + std::to_string(rank); }
// Set by a rank whose collective failed, before it surveys (and likely exits): its heartbeat
// stopping later is then not news, and it is not the rank to blame.
std::string FailedKey(int32_t rank) { return "failed/" + std::to_string(rank); }
}  // namespace

void Communicator::Heartbeat() {
  Store* store = store_.store();
  std::unique_lock<std::mutex> lock(beat_mu_);
  while (!stop_beating_) {
    lock.unlock();
    (void)store->Add(BeatKey(options_.rank), 1);  // a store that is gone shows in the survey
    lock.lock();
    beat_cv_.wait_for(lock, kBeat, [&] { return stop_beating_; });
  }
}

Communicator::~Communicator() {
  if (beat_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(beat_mu_);
      stop_beating_ = true;
    }
    beat_cv_.notify_all();
    beat_thread_.join();
  }
  if (comm_ != nullptr) {
    Status s = TakeStatus(vtable_->destroy(component_.ctx, comm_), "destroy");
    (void)s;  // nothing useful to do with a failing destroy at teardown
  }
  if (device_.has_value()) {
    for (Buffer& b : host_) (void)device_->HostFree(b.data);
    if (device_buffer_.data != nullptr) {
      (void)device_->Free(options_.device_ordinal, device_buffer_.data);
    }
  }
}

StatusOr<void*> Communicator::HostBuffer(size_t index, size_t bytes) {
  Buffer& b = host_[index];
  if (b.bytes < bytes || b.data == nullptr) {
    FLEET_RETURN_IF_ERROR(device_->HostFree(b.data));
    b = Buffer{};
    FLEET_ASSIGN_OR_RETURN(b.data, device_->HostAlloc(bytes));
    b.bytes = bytes;
  }
  return b.data;
}

StatusOr<void*> Communicator::DeviceBuffer(size_t bytes) {
  Buffer& b = device_buffer_;
  if (b.bytes < bytes || b.data == nullptr) {
    if (b.data != nullptr) FLEET_RETURN_IF_ERROR(device_->Free(options_.device_ordinal, b.data));
    b = Buffer{};
    FLEET_ASSIGN_OR_RETURN(b.data, device_->Alloc(options_.device_ordinal, bytes));
    b.bytes = bytes;
  }
  return b.data;
}

StatusOr<FleetTensor> Communicator::StageOut(const FleetTensor& t, size_t index, bool copy) {
  const size_t bytes = TensorBytes(t);
  FLEET_ASSIGN_OR_RETURN(void* host, HostBuffer(index, bytes));
  if (copy && bytes > 0) {
    FLEET_RETURN_IF_ERROR(device_->CopyToHost(options_.device_ordinal, host, t.data, bytes));
  }
  FleetTensor h = t;
  h.data = host;
  h.device_type = FLEET_DEVICE_TYPE_HOST;
  h.device_ordinal = 0;
  h.strides = nullptr;
  return h;
}

Status Communicator::StageBack(const FleetTensor& host, const FleetTensor& device_tensor) {
  const size_t bytes = TensorBytes(device_tensor);
  if (bytes == 0) return OkStatus();
  return device_->CopyToDevice(options_.device_ordinal, device_tensor.data, host.data, bytes);
}

template <typename Call>
Status Communicator::Staged(const FleetTensor* in, const FleetTensor* out, FleetStream* stream,
                            Call&& call) {
  if (placement_ == CommPlacement::kDirect) return call(in, out, stream);
  // The kernels producing `in` may still be queued on the stream; the copies below are
  // synchronous, so work enqueued on the stream after this call sees the result.
  if (stream != nullptr) FLEET_RETURN_IF_ERROR(device_->StreamSynchronize(stream));
  FleetTensor h_in{}, h_out{};
  if (in != nullptr) {
    FLEET_ASSIGN_OR_RETURN(h_in, StageOut(*in, 0, true));
  }
  const bool same = in != nullptr && out != nullptr && in->data == out->data;
  if (out != nullptr && !same) {
    FLEET_ASSIGN_OR_RETURN(h_out, StageOut(*out, 1, in == nullptr));
  }
  if (same) h_out = h_in;
  FLEET_RETURN_IF_ERROR(call(in != nullptr ? &h_in : nullptr, out != nullptr ? &h_out : nullptr,
                             nullptr));
  if (out != nullptr) FLEET_RETURN_IF_ERROR(StageBack(h_out, *out));
  return OkStatus();
}

Status Communicator::Check(FleetStatus* status, const char* op) const {
  if (status == nullptr) return OkStatus();
  Status s = TakeStatus(status, options_.label + " (" + component_.name + ", rank " +
                                    std::to_string(options_.rank) + " of " +
                                    std::to_string(options_.world_size) + ") " + op);
  if (aborted_.load() || comm_ == nullptr || s.code() == Code::kInvalidArgument ||
      options_.world_size < 2) {
    return s;
  }
  // A broken group stays broken: aborting it first fails the peers still blocked on this rank
  // at once, so they join the survey instead of waiting out their timeout.
  if (vtable_->abort != nullptr) vtable_->abort(component_.ctx, comm_);
  (void)store_.store()->Set(FailedKey(options_.rank), "1");  // best effort: see SurveyPeers
  return Status(s.code(), s.message() + "; " + SurveyPeers());
}

std::string Communicator::SurveyPeers() const {
  Store* store = store_.store();
  auto beats = [&]() -> StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> out;
    for (int32_t r = 0; r < options_.world_size; ++r) {
      FLEET_ASSIGN_OR_RETURN(int64_t n, store->Add(BeatKey(r), 0));
      out.push_back(n);
    }
    return out;
  };
  auto before = beats();
  if (before.ok()) std::this_thread::sleep_for(4 * kBeat);  // a live rank beats 3-4 times
  auto after = before.ok() ? beats() : before;
  if (!after.ok()) {
    return "the rendezvous store is unreachable too (" + after.status().message() +
           "), so the process serving it may be gone";
  }
  // Ranks that stopped beating without having reported a failure of their own are the ones
  // that died or froze; those that reported one are only following the same failure.
  std::vector<int32_t> gone, followed;
  for (int32_t r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    if ((*after)[static_cast<size_t>(r)] != (*before)[static_cast<size_t>(r)]) continue;
    const bool reported = store->Wait({FailedKey(r)}, std::chrono::milliseconds(0)).ok();
    (reported ? followed : gone).push_back(r);
  }
  auto list = [](const std::vector<int32_t>& ranks) {
    std::string text = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      text += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
    }
    return text;
  };
  std::string out;
  if (!gone.empty()) out = list(gone) + " stopped beating (dead or stuck)";
  if (!followed.empty()) {
    out += (out.empty() ? "" : "; ") + list(followed) + " failed in a collective too";
  }
  if (out.empty()) return "every rank is still alive (the failure came from the communicator)";
  return out;
}

template <typename Run>
Status Communicator::Tracked(const CollectiveCall& call, bool repeat, Run&& run) {
  if (!desync_.ok()) return desync_;
  const CallLedger::Ticket ticket = ledger_.Enter(call, repeat);
  if (ticket.check && options_.world_size > 1) {
    if (Status s = CompareCalls(); !s.ok()) {
      ledger_.Finished(ticket, false);
      return s;
    }
  }
  ledger_.Started(ticket);
  Status s = run();
  ledger_.Finished(ticket, s.ok());
  return s;
}

Status Communicator::CompareCalls() {
  const int world = options_.world_size;
  const std::array<int64_t, CallLedger::kFingerprintWords> row = ledger_.FingerprintRow();
  fingerprints_.resize(static_cast<size_t>(world) * row.size());
  const std::string what = std::string("comparing the ranks' collectives (") + kDesyncCheckKey +
                           " / " + kDesyncCheckEnv + ")";
  FLEET_RETURN_IF_ERROR(
      HostAllGather(row.data(), fingerprints_.data(), static_cast<int64_t>(row.size()))
          .WithContext(what));
  switch (CallLedger::Judge(fingerprints_, world)) {
    case CallLedger::Verdict::kAgree:
      ledger_.Agreed();
      return OkStatus();
    case CallLedger::Verdict::kModesDiffer:
      desync_ = FailedPrecondition(DescribeModes(fingerprints_, world));
      return desync_;
    case CallLedger::Verdict::kCallsDiffer:
      break;
  }
  // Every rank saw the same rows, so all make the two exchanges below, of fixed sizes.
  std::vector<int64_t> mine(CallLedger::kWindowWords);
  std::vector<int64_t> windows(static_cast<size_t>(world) * CallLedger::kWindowWords);
  ledger_.WindowRow(mine.data());
  FLEET_RETURN_IF_ERROR(
      HostAllGather(mine.data(), windows.data(), static_cast<int64_t>(mine.size()))
          .WithContext(what));
  const size_t first = FirstDifference(windows, world);
  mine.assign(CallLedger::kEntryWords, 0);
  std::vector<int64_t> entries(static_cast<size_t>(world) * CallLedger::kEntryWords);
  ledger_.EntryRow(first, mine.data());
  FLEET_RETURN_IF_ERROR(
      HostAllGather(mine.data(), entries.data(), static_cast<int64_t>(mine.size()))
          .WithContext(what));
  desync_ = FailedPrecondition(
      DescribeDesync(windows, entries, world, options_.rank, options_.ring, first));
  return desync_;
}

Status Communicator::HostAllGather(const int64_t* row, int64_t* rows, int64_t count) {
  int64_t total = count * options_.world_size;
  FleetTensor in{};
  in.struct_size = sizeof(FleetTensor);
  in.data = const_cast<int64_t*>(row);
  in.dtype = FLEET_DTYPE_INT64;
  in.ndim = 1;
  in.dims = &count;
  in.device_type = FLEET_DEVICE_TYPE_HOST;
  in.height = -1;
  FleetTensor out = in;
  out.data = rows;
  out.dims = &total;
  if (reduces_host_) {
    return Check(vtable_->all_gather(component_.ctx, comm_, &in, &out, nullptr), "all_gather");
  }
  // A communicator of device memory only: one device buffer holds the row, then the rows.
  const size_t in_bytes = static_cast<size_t>(count) * sizeof(int64_t);
  const size_t out_bytes = static_cast<size_t>(total) * sizeof(int64_t);
  FLEET_ASSIGN_OR_RETURN(void* dev, DeviceBuffer(in_bytes + out_bytes));
  FleetTensor d_in = in, d_out = out;
  d_in.data = dev;
  d_out.data = static_cast<char*>(dev) + in_bytes;
  d_in.device_type = d_out.device_type = device_->type_id();
  d_in.device_ordinal = d_out.device_ordinal = options_.device_ordinal;
  FLEET_RETURN_IF_ERROR(device_->CopyToDevice(options_.device_ordinal, dev, row, in_bytes));
  FLEET_RETURN_IF_ERROR(
      Check(vtable_->all_gather(component_.ctx, comm_, &d_in, &d_out, nullptr), "all_gather"));
  return device_->CopyToHost(options_.device_ordinal, rows, d_out.data, out_bytes);
}

Status Communicator::AllReduce(const FleetTensor& in, const FleetTensor& out, int32_t op,
                               FleetStream* stream, const CallSite& site) {
  return Tracked(CallOf(CollectiveKind::kAllReduce, site, options_.ring, in, op), site.repeat,
                 [&] {
                   return Staged(&in, &out, stream,
                                 [&](const FleetTensor* i, const FleetTensor* o, FleetStream* s) {
                                   return Check(vtable_->all_reduce(component_.ctx, comm_, i, o,
                                                                    op, s),
                                                "all_reduce");
                                 });
                 });
}

Status Communicator::AllReduceHost(void* data, int32_t dtype, int64_t count, int32_t op) {
  CollectiveCall call;
  call.kind = CollectiveKind::kAllReduce;
  call.ring = options_.ring;
  call.dtype = dtype;
  call.arg = op;
  call.numel = count;
  call.bytes = count * static_cast<int64_t>(DtypeBytes(dtype));
  return Tracked(call, false, [&] { return HostAllReduce(data, dtype, count, op); });
}

Status Communicator::HostAllReduce(void* data, int32_t dtype, int64_t count, int32_t op) {
  FleetTensor t{};
  t.struct_size = sizeof(FleetTensor);
  t.data = data;
  t.dtype = dtype;
  t.ndim = 1;
  t.dims = &count;
  t.device_type = FLEET_DEVICE_TYPE_HOST;
  t.height = -1;
  if (reduces_host_) {
    return Check(vtable_->all_reduce(component_.ctx, comm_, &t, &t, op, nullptr), "all_reduce");
  }
  // A communicator of device memory only: the figures go through a device buffer.
  const size_t bytes = TensorBytes(t);
  FLEET_ASSIGN_OR_RETURN(void* dev, DeviceBuffer(bytes));
  FleetTensor d = t;
  d.data = dev;
  d.device_type = device_->type_id();
  d.device_ordinal = options_.device_ordinal;
  if (bytes > 0) {
    FLEET_RETURN_IF_ERROR(device_->CopyToDevice(options_.device_ordinal, dev, data, bytes));
  }
  FLEET_RETURN_IF_ERROR(
      Check(vtable_->all_reduce(component_.ctx, comm_, &d, &d, op, nullptr), "all_reduce"));
  if (bytes == 0) return OkStatus();
  return device_->CopyToHost(options_.device_ordinal, data, dev, bytes);
}

Status Communicator::Broadcast(const FleetTensor& buf, int32_t root, FleetStream* stream,
                               const CallSite& site) {
  // In place: staged, the buffer goes out (the root's data) and comes back (everyone's result).
  return Tracked(CallOf(CollectiveKind::kBroadcast, site, options_.ring, buf, root), site.repeat,
                 [&] {
                   return Staged(&buf, &buf, stream,
                                 [&](const FleetTensor* b, const FleetTensor*, FleetStream* s) {
                                   return Check(
                                       vtable_->broadcast(component_.ctx, comm_, b, root, s),
                                       "broadcast");
                                 });
                 });
}

Status Communicator::AllGather(const FleetTensor& in, const FleetTensor& out, FleetStream* stream,
                               const CallSite& site) {
  return Tracked(CallOf(CollectiveKind::kAllGather, site, options_.ring, in, 0), site.repeat,
                 [&] {
                   return Staged(&in, &out, stream,
                                 [&](const FleetTensor* i, const FleetTensor* o, FleetStream* s) {
                                   return Check(
                                       vtable_->all_gather(component_.ctx, comm_, i, o, s),
                                       "all_gather");
                                 });
                 });
}

Status Communicator::ReduceScatter(const FleetTensor& in, const FleetTensor& out, int32_t op,
                                   FleetStream* stream, const CallSite& site) {
  return Tracked(CallOf(CollectiveKind::kReduceScatter, site, options_.ring, in, op),
                 site.repeat, [&] {
                   return Staged(&in, &out, stream,
                                 [&](const FleetTensor* i, const FleetTensor* o, FleetStream* s) {
                                   return Check(vtable_->reduce_scatter(component_.ctx, comm_, i,
                                                                        o, op, s),
                                                "reduce_scatter");
                                 });
                 });
}

Status Communicator::Barrier() {
  CollectiveCall call;
  call.kind = CollectiveKind::kBarrier;
  call.ring = options_.ring;
  return Tracked(call, false,
                 [&] { return Check(vtable_->barrier(component_.ctx, comm_), "barrier"); });
}

void Communicator::Abort() {
  aborted_.store(true);
  if (comm_ != nullptr && vtable_->abort != nullptr) vtable_->abort(component_.ctx, comm_);
}

}  // namespace fleet
