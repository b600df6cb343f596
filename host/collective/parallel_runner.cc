#include "collective/parallel_runner.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "fleet/fleet_device.h"
#include "fleet/fleet_host.h"
#include "plugin/device.h"
#include "support/logging.h"

namespace fleet::exec {
namespace {

std::string DeviceLabel(int32_t d) { return "device " + std::to_string(d); }

// The ordinal every rank uses: d when the device has a unit per rank; 0 for all of them on a
// device whose memory is host memory (the cpu device's one unit); else an error.
StatusOr<std::vector<int32_t>> Ordinals(const PluginRegistry& registry, std::string_view device,
                                        int32_t n) {
  const ComponentRecord* record = registry.Find(FLEET_COMPONENT_DEVICE, device);
  if (record == nullptr) {
    return NotFound("device '" + std::string(device) + "' is not registered");
  }
  Device probe(record);
  FLEET_ASSIGN_OR_RETURN(int32_t count, probe.Count());
  std::vector<int32_t> ordinals(static_cast<size_t>(n), 0);
  if (count >= n) {
    for (int32_t d = 0; d < n; ++d) ordinals[static_cast<size_t>(d)] = d;
    return ordinals;
  }
  FLEET_ASSIGN_OR_RETURN(DeviceProps props, probe.Props(0));
  if ((props.caps & FLEET_DEVICE_CAP_HOST_MEMORY) != 0) return ordinals;
  return InvalidArgument("device '" + std::string(device) + "' has " + std::to_string(count) +
                         " unit(s) but " + std::to_string(n) + " devices were asked for");
}

// Open files n ranks of one process may hold at once: a communicator that connects every pair
// of ranks (Gloo's full mesh of TCP pairs) keeps a socket per peer on each rank, n(n - 1) in
// all, plus a few per rank (an event loop, a listener) and the process's own. 64 Gloo devices
// were measured at 4102 at their peak.
int64_t OpenFilesFor(int32_t n) { return int64_t{n} * (n - 1) + 8 * int64_t{n} + 64; }

// Raises the soft RLIMIT_NOFILE to what the devices need when it is lower and the hard limit
// allows (what `ulimit -n` would do; 32 devices already need more than the usual 1024), so the
// communicators do not fail midway through connecting with "Too many open files".
Status ReserveOpenFiles(int32_t n) {
  if (n < 2) return OkStatus();
  const auto need = static_cast<rlim_t>(OpenFilesFor(n));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return OkStatus();  // unknown: the sockets will say
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= need) return OkStatus();
  const std::string what = std::to_string(n) + " devices in one process need about " +
                           std::to_string(need) +
                           " open files (their communicators connect every two devices)";
  const std::string fix =
      "raise it (ulimit -Hn), use fewer devices, or run them as processes "
      "(fleet-host launch --nproc N)";
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < need) {
    return ResourceExhausted(what + ", but the hard limit on open files (RLIMIT_NOFILE) is " +
                             std::to_string(limit.rlim_max) + ": " + fix);
  }
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = need;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return ResourceExhausted(what + ", but raising the limit on open files (RLIMIT_NOFILE) from " +
                             std::to_string(before) + " failed (" + std::strerror(errno) +
                             "): " + fix);
  }
  Log().info("raised the limit on open files from {} to {} for {} devices", before, need, n);
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<ParallelRunner>> ParallelRunner::Create(
    const PluginRegistry& registry, std::string_view device, const ComponentRecord& communicator,
    ParallelOptions options, const TranspileFn& transpile) {
  if (options.num_devices < 1) {
    return InvalidArgument("the number of devices must be at least 1, not " +
                           std::to_string(options.num_devices));
  }
  std::vector<ProgramSet> programs;
  for (int32_t d = 0; d < options.num_devices; ++d) {
    StatusOr<ProgramSet> set = transpile(d, options.num_devices);
    if (!set.ok()) {
      return set.status().WithContext("transpiling for rank " + std::to_string(d) + " of " +
                                      std::to_string(options.num_devices));
    }
    programs.push_back(std::move(*set));
  }
  return Create(registry, device, communicator, std::move(options), std::move(programs));
}

StatusOr<std::unique_ptr<ParallelRunner>> ParallelRunner::Create(
    const PluginRegistry& registry, std::string_view device, const ComponentRecord& communicator,
    ParallelOptions options, std::vector<ProgramSet> programs) {
  const int32_t n = options.num_devices;
  if (n < 1) {
    return InvalidArgument("the number of devices must be at least 1, not " + std::to_string(n));
  }
  if (programs.size() != static_cast<size_t>(n)) {
    return InvalidArgument(std::to_string(programs.size()) + " program sets for " +
                           std::to_string(n) + " devices: give one per device");
  }
  for (int32_t d = 0; d < n; ++d) {
    for (const char* name : {"startup", "main"}) {
      if (programs[static_cast<size_t>(d)].count(name) == 0) {
        return InvalidArgument("the program set of " + DeviceLabel(d) + " has no '" + name +
                               "' program");
      }
    }
  }
  if (communicator.kind != FLEET_COMPONENT_COMMUNICATOR) {
    return InvalidArgument("component '" + communicator.name + "' is not a communicator");
  }
  FLEET_ASSIGN_OR_RETURN(std::vector<int32_t> ordinals, Ordinals(registry, device, n));
  FLEET_RETURN_IF_ERROR(ReserveOpenFiles(n));
  if (options.executor.num_threads == 0 && n > 1) {
    const int32_t cores = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    options.executor.num_threads = std::max(1, cores / n);
  }
  bool has_hostname = false;
  for (const auto& [key, value] : options.comm_options) has_hostname |= key == "hostname";
  if (!has_hostname) options.comm_options.emplace_back("hostname", "127.0.0.1");

  std::unique_ptr<ParallelRunner> runner(new ParallelRunner());
  for (int32_t d = 0; d < n; ++d) {
    auto state = std::make_unique<DeviceState>();
    state->programs = std::move(programs[static_cast<size_t>(d)]);
    CommunicatorOptions comm;
    comm.rank = d;
    comm.world_size = n;
    comm.timeout = options.timeout;
    comm.device = std::string(device);
    comm.device_ordinal = ordinals[static_cast<size_t>(d)];
    comm.device_component = registry.Find(FLEET_COMPONENT_DEVICE, device);
    comm.options = options.comm_options;
    comm.desync_check = options.desync_check;
    comm.label = DeviceLabel(d);
    state->runtime = std::make_unique<CollectiveRuntime>(communicator, &runner->store_, comm);
    ExecutorOptions eo = options.executor;
    eo.host_kernels = state->runtime.get();
    eo.device_ordinal = ordinals[static_cast<size_t>(d)];
    auto executor = Executor::Create(registry, device, eo);
    if (!executor.ok()) return executor.status().WithContext(DeviceLabel(d));
    state->executor = std::move(*executor);
    runner->devices_.push_back(std::move(state));
  }
  for (int32_t d = 0; d < n; ++d) {
    ParallelRunner* self = runner.get();
    runner->devices_[static_cast<size_t>(d)]->thread =
        std::thread([self, d] { self->WorkerLoop(d); });
  }
  return runner;
}

ParallelRunner::~ParallelRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = Job::kExit;
    ++generation_;
  }
  work_.notify_all();
  for (auto& state : devices_) {
    if (state->thread.joinable()) state->thread.join();
  }
  // Preparations hold kernel state and arenas of the executors: release them first.
  cache_.clear();
}

void ParallelRunner::WorkerLoop(int32_t d) {
  DeviceState& state = *devices_[static_cast<size_t>(d)];
  uint64_t seen = 0;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      job = job_;
    }
    if (job == Job::kExit) return;
    Status s = DoJob(d, job);
    bool abort = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.ok()) {
        state.failed_at = ++failures_;
        abort = abort_on_failure_ && state.failed_at == 1;
      }
      state.result = std::move(s);
    }
    // Release the devices waiting for this one in a collective before reporting.
    if (abort) AbortAll();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

Status ParallelRunner::DoJob(int32_t d, Job job) {
  DeviceState& state = *devices_[static_cast<size_t>(d)];
  switch (job) {
    case Job::kStartup: {
      auto prepared = state.executor->Prepare(state.programs.at("startup"), {}, {});
      if (!prepared.ok()) return prepared.status().WithContext("startup program");
      std::vector<HostTensor> none;
      return state.executor->Run(**prepared, {}, none).WithContext("startup program");
    }
    case Job::kPrepare: {
      Cached& c = *target_;
      auto it = state.programs.find(c.program);
      if (it == state.programs.end()) {
        return NotFound("there is no program '" + c.program + "'");
      }
      auto prepared = state.executor->Prepare(it->second, c.shapes[static_cast<size_t>(d)],
                                              c.fetch, c.sequences[static_cast<size_t>(d)]);
      if (!prepared.ok()) return prepared.status().WithContext(c.program + " program");
      c.prepared[static_cast<size_t>(d)] = std::move(*prepared);
      return OkStatus();
    }
    case Job::kRun: {
      PreparedProgram& prepared = *target_->prepared[static_cast<size_t>(d)];
      if (!sequence_rows_.empty()) {
        FLEET_RETURN_IF_ERROR(state.executor->ReserveSequenceRows(prepared, sequence_rows_)
                                  .WithContext(target_->program + " program"));
      }
      return state.executor
          ->Run(prepared, (*feeds_)[static_cast<size_t>(d)], (*fetched_)[static_cast<size_t>(d)])
          .WithContext(target_->program + " program");
    }
    case Job::kNone:
    case Job::kExit:
      break;
  }
  return OkStatus();
}

Status ParallelRunner::Dispatch(Job job, bool abort_on_failure) {
  std::unique_lock<std::mutex> lock(mu_);
  job_ = job;
  abort_on_failure_ = abort_on_failure;
  failures_ = 0;
  pending_ = num_devices();
  for (auto& state : devices_) {
    state->result = OkStatus();
    state->failed_at = 0;
  }
  ++generation_;
  work_.notify_all();
  // No deadline here: a worker only blocks in collectives, which the communicators bound.
  done_.wait(lock, [&] { return pending_ == 0; });
  for (int32_t d = 0; d < num_devices(); ++d) {
    const DeviceState& state = *devices_[static_cast<size_t>(d)];
    if (state.failed_at == 1) {
      Status s = state.result.WithContext(DeviceLabel(d));
      if (abort_on_failure) broken_ = s;
      return s;
    }
  }
  return OkStatus();
}

void ParallelRunner::AbortAll() {
  for (auto& state : devices_) state->runtime->AbortAll();
}

Status ParallelRunner::Usable() const {
  if (broken_.ok()) return OkStatus();
  return FailedPrecondition("the devices' communicators were aborted after an earlier failure (" +
                            broken_.message() + ")");
}

Status ParallelRunner::RunStartup() {
  FLEET_RETURN_IF_ERROR(Usable());
  return Dispatch(Job::kStartup, /*abort_on_failure=*/true);
}

StatusOr<ParallelRunner::Cached*> ParallelRunner::FindOrPrepare(
    std::string_view program, const std::vector<FeedShapes>& shapes,
    const std::vector<std::string>& fetch, const std::vector<FeedSequences>& sequences) {
  for (auto& c : cache_) {
    if (c->program == program && c->shapes == shapes && c->fetch == fetch &&
        c->sequences == sequences) {
      return c.get();
    }
  }
  auto c = std::make_unique<Cached>();
  c->program = std::string(program);
  c->shapes = shapes;
  c->sequences = sequences;
  c->fetch = fetch;
  c->prepared.resize(devices_.size());
  target_ = c.get();
  FLEET_RETURN_IF_ERROR(Dispatch(Job::kPrepare, /*abort_on_failure=*/false));
  cache_.push_back(std::move(c));
  return cache_.back().get();
}

Status ParallelRunner::Prepare(const FeedShapes& batch_shapes,
                               const std::vector<std::string>& fetch, std::string_view program,
                               const FeedSequences& sequences) {
  // Sequence feeds split by sequences, with a first capacity of rows that Run grows.
  FeedShapes dense = batch_shapes;
  for (const auto& [name, count] : sequences) dense.erase(name);
  FLEET_ASSIGN_OR_RETURN(std::vector<FeedShapes> shapes, SplitShapes(dense, num_devices()));
  std::vector<FeedSequences> device_sequences(shapes.size());
  for (const auto& [name, count] : sequences) {
    auto dims = batch_shapes.find(name);
    if (dims == batch_shapes.end() || dims->second.empty()) {
      return InvalidArgument("sequence feed '" + name + "' has no shape");
    }
    // Sequences split as rows do.
    FLEET_ASSIGN_OR_RETURN(std::vector<FeedShapes> shares,
                           SplitShapes(FeedShapes{{name, {count}}}, num_devices()));
    for (size_t d = 0; d < shapes.size(); ++d) {
      shapes[d][name] = dims->second;
      shapes[d][name][0] = SequenceCapacity(0);
      device_sequences[d][name] = shares[d].at(name)[0];
    }
  }
  return Prepare(shapes, fetch, program, device_sequences);
}

Status ParallelRunner::Prepare(const std::vector<FeedShapes>& device_shapes,
                               const std::vector<std::string>& fetch, std::string_view program,
                               const std::vector<FeedSequences>& device_sequences) {
  FLEET_RETURN_IF_ERROR(Usable());
  if (device_shapes.size() != devices_.size()) {
    return InvalidArgument(std::to_string(device_shapes.size()) + " feed shape maps for " +
                           std::to_string(devices_.size()) + " devices: give one per device");
  }
  std::vector<FeedSequences> sequences = device_sequences;
  sequences.resize(device_shapes.size());
  return FindOrPrepare(program, device_shapes, fetch, sequences).status();
}

Status ParallelRunner::Run(const FeedMap& batch, const std::vector<std::string>& fetch,
                           ParallelFetch& fetched, FetchMode mode, std::string_view program) {
  FLEET_RETURN_IF_ERROR(Usable());
  FLEET_RETURN_IF_ERROR(SplitBatch(batch, num_devices(), split_));
  return RunSplit(split_, fetch, fetched, mode, program);
}

Status ParallelRunner::Run(const std::vector<FeedMap>& device_feeds,
                           const std::vector<std::string>& fetch, ParallelFetch& fetched,
                           FetchMode mode, std::string_view program) {
  FLEET_RETURN_IF_ERROR(Usable());
  if (device_feeds.size() != devices_.size()) {
    return InvalidArgument(std::to_string(device_feeds.size()) + " feed maps for " +
                           std::to_string(devices_.size()) +
                           " devices: give one per device, or one map for the whole batch");
  }
  return RunSplit(device_feeds, fetch, fetched, mode, program);
}

Status ParallelRunner::RunSplit(const std::vector<FeedMap>& device_feeds,
                                const std::vector<std::string>& fetch, ParallelFetch& fetched,
                                FetchMode mode, std::string_view program) {
  std::vector<FeedShapes> shapes(device_feeds.size());
  std::vector<FeedSequences> sequences(device_feeds.size());
  for (size_t d = 0; d < device_feeds.size(); ++d) {
    for (const auto& [name, t] : device_feeds[d]) {
      shapes[d][name] = t.dims;
      // A sequence feed's rows vary: its preparation grows them (Executor::Run).
      if (!t.lod.empty() && !t.dims.empty()) {
        shapes[d][name][0] = SequenceCapacity(0);
        sequences[d][name] = static_cast<int64_t>(t.lod.size()) - 1;
      }
    }
  }
  FLEET_ASSIGN_OR_RETURN(Cached * cached, FindOrPrepare(program, shapes, fetch, sequences));
  sequence_rows_.clear();
  for (const FeedMap& feeds : device_feeds) {
    for (const auto& [name, t] : feeds) {
      if (t.lod.empty() || t.dims.empty()) continue;
      int64_t& most = sequence_rows_[name];
      most = std::max(most, t.dims[0]);
    }
  }
  fetched.per_device.resize(devices_.size());
  target_ = cached;
  feeds_ = &device_feeds;
  fetched_ = &fetched.per_device;
  Status s = Dispatch(Job::kRun, /*abort_on_failure=*/true);
  feeds_ = nullptr;
  fetched_ = nullptr;
  FLEET_RETURN_IF_ERROR(s);
  if (mode == FetchMode::kPerDevice) {
    fetched.merged.clear();
    return OkStatus();
  }
  return Concat(fetched.per_device, fetch, fetched.merged);
}

}  // namespace fleet::exec
