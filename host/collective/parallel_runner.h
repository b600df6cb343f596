// Several devices driven by one process, a thread each: Paddle's ParallelExecutor as used by the
// collective mode "single_process_multi_thread". Every device is one rank of an in-process
// collective group: it has its own Executor (and so its own scope: a full replica of the
// parameters), its own CollectiveRuntime (rank d of N) and its own copy of the programs,
// transpiled for rank d of N (grad_allreduce: c_comm_init and the parameter broadcast in startup,
// the loss gradient scaled by 1/N and every gradient all-reduced in main). The ranks meet in one
// MemoryStore owned by the runner, so no network rendezvous is needed; the communicator
// component (e.g. "gloo") still moves the data between the threads.
//
// Devices: device ordinal d drives rank d when the device component has at least N units. A
// device whose memory is host memory (the "cpu" device, which has one unit) gives every rank
// ordinal 0: the ranks are then N replicas on the same host memory, which is what Paddle's
// CPU_NUM places are.
//
// Feeds (as ParallelExecutor::FeedAndSplitTensorIntoLocalScopes does):
//   - one FeedMap for the whole batch: every feed is split along dim 0 into chunks of
//     ceil(rows / N) rows, the last chunk taking what is left (Paddle's SplitLoDTensor). When
//     that gives fewer than N chunks (fewer samples than devices, or e.g. 5 rows on 4 devices:
//     chunks of 2, 2, 1) it is INVALID_ARGUMENT naming the feed, its rows and N, as in Paddle.
//     A 0-d feed cannot be split and is INVALID_ARGUMENT too.
//   - one FeedMap per device: map d goes to device d unchanged; a vector whose size is not N is
//     INVALID_ARGUMENT.
// Fetches: each device fetches the same names into ParallelFetch::per_device[d]. In
// FetchMode::kConcat they are also concatenated along dim 0 into ParallelFetch::merged, device
// 0 first (a loss of shape [1] or [] from N devices becomes [N], as Paddle returns it); the
// devices must agree on dtype and on every dim but the first.
//
// Open files: N ranks whose communicators connect every two of them (Gloo's full mesh) hold
// about N(N - 1) sockets in this process. Create raises the soft RLIMIT_NOFILE to that when it
// is lower and the hard limit allows, and is RESOURCE_EXHAUSTED naming the need and the limit
// when it does not.
//
// Threads: one persistent worker per device, started by Create and joined by the destructor;
// a step hands the workers their job through a condition variable (no thread is created per
// step). Prepare and the kernels' prepare run on the device's own thread. Every wait a step can
// block in is a collective, and those are bounded by the communicator's timeout. When a device
// fails while running, it aborts every device's communicators at once (CollectiveRuntime::
// AbortAll) so the others leave their collectives with ABORTED instead of waiting out the
// timeout; the call returns the failure that happened first, prefixed with "device <d>". After
// such a failure the communicators are gone and every later call is FAILED_PRECONDITION.
// Preparation failures (shapes, kernels) abort nothing: no collective has started.
//
// The public methods are for one calling thread at a time.
//
// Determinism: every device's executor gets the same ExecutorOptions::seed, so the startup
// programs initialise identical replicas (which the broadcast then confirms), and a run's
// result depends only on the seed and the feeds.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "collective/collective_runtime.h"
#include "rendezvous/memory_store.h"
#include "executor/executor.h"
#include "executor/tensor.h"
#include "ir/program.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet::exec {

// Programs by name, as pipeline's Transpile returns them: "startup", "main", and any other the
// strategy adds (e.g. "main.local" for local_sgd).
using ProgramSet = std::map<std::string, ir::Program>;

// Makes the program set of rank `rank` of `world_size` (e.g. by calling pipeline's Transpile
// with a Role of that rank and size).
using TranspileFn = std::function<StatusOr<ProgramSet>(int32_t rank, int32_t world_size)>;

struct ParallelOptions {
  int32_t num_devices = 1;  // N >= 1
  // Copied to every device's executor, except that host_kernels becomes the device's collective
  // runtime and device_ordinal is chosen as described above. num_threads 0 (all cores) becomes
  // max(1, cores / N) so N devices on one CPU do not oversubscribe it.
  ExecutorOptions executor;
  // Bounds every rendezvous and collective wait (the communicators' timeout).
  std::chrono::milliseconds timeout{300000};
  // Backend options for every communicator (FleetCommConfig.options); "hostname" defaults to
  // 127.0.0.1, since every rank lives in this process.
  std::vector<std::pair<std::string, std::string>> comm_options;
  // When the devices compare their collectives (ResolveDesyncCheck).
  DesyncCheck desync_check = DesyncCheck::kStep;
};

enum class FetchMode {
  kConcat,     // per_device and merged (concatenated along dim 0)
  kPerDevice,  // per_device only
};

struct ParallelFetch {
  std::vector<HostTensor> merged;                   // [fetch]; kConcat only, else empty
  std::vector<std::vector<HostTensor>> per_device;  // [device][fetch]
};

class ParallelRunner {
 public:
  // `registry` (with the device and communicator components) must outlive the runner, as must
  // `communicator`, a FLEET_COMPONENT_COMMUNICATOR record of it. `programs` holds one program
  // set per device, programs[d] transpiled for rank d of N; each must have "startup" and "main".
  static StatusOr<std::unique_ptr<ParallelRunner>> Create(const PluginRegistry& registry,
                                                          std::string_view device,
                                                          const ComponentRecord& communicator,
                                                          ParallelOptions options,
                                                          std::vector<ProgramSet> programs);
  // The same, with programs[d] = transpile(d, N).
  static StatusOr<std::unique_ptr<ParallelRunner>> Create(const PluginRegistry& registry,
                                                          std::string_view device,
                                                          const ComponentRecord& communicator,
                                                          ParallelOptions options,
                                                          const TranspileFn& transpile);
  ~ParallelRunner();  // aborts nothing; waits for the workers to go idle, then joins them
  ParallelRunner(const ParallelRunner&) = delete;
  ParallelRunner& operator=(const ParallelRunner&) = delete;

  int32_t num_devices() const { return static_cast<int32_t>(devices_.size()); }
  Executor& executor(int32_t d) { return *devices_[d]->executor; }
  const Executor& executor(int32_t d) const { return *devices_[d]->executor; }
  CollectiveRuntime& runtime(int32_t d) { return *devices_[d]->runtime; }
  const ProgramSet& programs(int32_t d) const { return devices_[d]->programs; }
  int32_t device_ordinal(int32_t d) const {
    return devices_[d]->executor->options().device_ordinal;
  }

  // Runs every device's "startup" concurrently (c_comm_init joins all N ranks, so they must).
  Status RunStartup();

  // Prepares `program` on every device for these feed shapes (the whole batch's, split as Run
  // splits the batch; or one FeedShapes per device) and fetch list. Run prepares on first use
  // by itself; this only moves the cost (and the shape errors) earlier. A sequence feed takes
  // the batch's number of sequences in `sequences` (split like rows); its rows grow as Run
  // needs (Executor::Run), so its dims[0] here is ignored.
  Status Prepare(const FeedShapes& batch_shapes, const std::vector<std::string>& fetch,
                 std::string_view program = "main", const FeedSequences& sequences = {});
  Status Prepare(const std::vector<FeedShapes>& device_shapes,
                 const std::vector<std::string>& fetch, std::string_view program = "main",
                 const std::vector<FeedSequences>& device_sequences = {});

  // One step of `program` on every device: the batch split among the devices, or one FeedMap
  // per device. Preparations are cached per (program, per-device feed shapes, fetch list).
  Status Run(const FeedMap& batch, const std::vector<std::string>& fetch, ParallelFetch& fetched,
             FetchMode mode = FetchMode::kConcat, std::string_view program = "main");
  Status Run(const std::vector<FeedMap>& device_feeds, const std::vector<std::string>& fetch,
             ParallelFetch& fetched, FetchMode mode = FetchMode::kConcat,
             std::string_view program = "main");

  // Paddle's split of a batch among `num_devices` (see above), into `out` (resized to
  // num_devices; its tensors' storage is reused).
  static Status SplitBatch(const FeedMap& batch, int32_t num_devices, std::vector<FeedMap>& out);
  // The per-device shapes SplitBatch gives for a batch of these shapes.
  static StatusOr<std::vector<FeedShapes>> SplitShapes(const FeedShapes& batch,
                                                       int32_t num_devices);
  // per_device[d][i] concatenated along dim 0 for every fetch i, into `merged`; `names` (the
  // fetch names) label the errors.
  static Status Concat(const std::vector<std::vector<HostTensor>>& per_device,
                       const std::vector<std::string>& names, std::vector<HostTensor>& merged);

 private:
  enum class Job { kNone, kStartup, kPrepare, kRun, kExit };

  struct Cached {
    std::string program;
    std::vector<FeedShapes> shapes;  // per device; a sequence feed's rows are a first capacity
    std::vector<FeedSequences> sequences;  // per device
    std::vector<std::string> fetch;
    std::vector<std::unique_ptr<PreparedProgram>> prepared;  // per device
  };

  struct DeviceState {
    ProgramSet programs;
    std::unique_ptr<CollectiveRuntime> runtime;
    std::unique_ptr<Executor> executor;
    std::thread thread;
    Status result;
    int64_t failed_at = 0;  // order of failure within a job (1 = first); 0 = ok
  };

  ParallelRunner() = default;
  void WorkerLoop(int32_t d);
  Status DoJob(int32_t d, Job job);
  // Hands `job` to every worker and waits for all of them. Returns the first failure in time,
  // prefixed with its device. With `abort_on_failure`, a failing worker aborts every
  // communicator and the runner becomes unusable.
  Status Dispatch(Job job, bool abort_on_failure);
  void AbortAll();
  Status Usable() const;
  StatusOr<Cached*> FindOrPrepare(std::string_view program,
                                  const std::vector<FeedShapes>& shapes,
                                  const std::vector<std::string>& fetch,
                                  const std::vector<FeedSequences>& sequences);
  Status RunSplit(const std::vector<FeedMap>& device_feeds, const std::vector<std::string>& fetch,
                  ParallelFetch& fetched, FetchMode mode, std::string_view program);

  MemoryStore store_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::vector<std::unique_ptr<Cached>> cache_;
  std::vector<FeedMap> split_;  // the split batch, reused from step to step
  // kRun: rows every device makes room for in each sequence feed (the most any device has), so
  // that the devices prepare again together (Executor::ReserveSequenceRows).
  std::map<std::string, int64_t> sequence_rows_;
  Status broken_;               // the failure that aborted the communicators, if any

  // The job in hand and its arguments (read by the workers while a job runs).
  std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable done_;
  Job job_ = Job::kNone;
  uint64_t generation_ = 0;
  int32_t pending_ = 0;
  int64_t failures_ = 0;
  bool abort_on_failure_ = false;
  Cached* target_ = nullptr;                         // kPrepare (filled), kRun
  const std::vector<FeedMap>* feeds_ = nullptr;      // kRun
  std::vector<std::vector<HostTensor>>* fetched_ = nullptr;  // kRun
};

}  // namespace fleet::exec
