// host/executor: prepares a program once and runs its kernels step after step; the scope,
// host tensors and the memory plan.
// Depends on: ir/, ops/, plugin/, support/.
//
// The executor: turns a program into kernel calls once (Prepare), then runs them step after step
// (Run) without allocating.
//
// Prepare, once per program and feed shapes, walks block 0 in order and for each op: looks up
// its schema, infers its output shapes with the real batch size (from a shape table seeded with
// the feeds and the scope's persistables), and picks a kernel for the device and the op's dtype
// (the schema's kernel_dtype_slot, else the first present input slot, else the first output
// slot), trying candidates by priority until one's `supports` accepts. Then it plans memory:
// non-persistable vars get buffers of one arena from the device, reused once a var is dead (see
// memory_plan.h); persistables live in the Scope. Every kernel's `prepare` runs once, and data
// pointers are set once: they never change afterwards.
//
// Run copies the feeds in, launches each op in order and copies the fetches out into the
// caller's tensors, reusing their storage: in steady state nothing is allocated on the host.
// On a device whose memory is host memory (FLEET_DEVICE_CAP_HOST_MEMORY) the copies are plain
// memcpy, with no call into the plugin.
//
// Any other device (a GPU) gets one stream per executor: every kernel, host kernel and copy of a
// run is enqueued on it, and the host waits for it only to fetch. Feeds go through page-locked
// buffers owned by the preparation (so the caller's tensors are free again when Run returns, and
// a feed buffer is rewritten only after the previous step's copy out of it completed); fetches
// come back through page-locked buffers and one stream synchronisation. Everything else that
// touches device memory from the host (the scope's Read and Write, dropping a preparation or
// the executor) first waits for the stream, so it never races the kernels.
//
// Sequence feeds (LoD level 1, HostTensor::lod) vary in rows from batch to batch while a
// preparation is made for fixed shapes. So a sequence tensor is prepared with a capacity of rows
// (SequenceCapacity) and carries its offsets; the rows past the last sequence are padding, kept
// zero: Run zeroes them in the feed and in every sequence output after its op (FleetTensor.lod
// has the contract kernels see). A batch with more rows than the capacity makes Run prepare the
// program again, in place, giving every sequence feed room for a quarter more rows than this
// batch has; that happens a few times at the start of a job, not per step. Ranks of a collective
// job must prepare again together (each preparation holds communicator state the ranks create in
// step), so their training loop agrees on the rows first and calls ReserveSequenceRows. Ops take sequences only where their schema says how
// (OpSchema::lod_share, sequence_kernel); anything else is refused at prepare, naming the op.
//
// Random ops get KernelCallArgs.seed derived from ExecutorOptions::seed, the op's index and its
// output names, so a run is reproducible and two initialisers never share a stream.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "executor/memory_plan.h"
#include "executor/scope.h"
#include "executor/tensor.h"
#include "ir/program.h"
#include "ops/op_registry.h"
#include "plugin/device.h"
#include "plugin/kernel.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet::exec {

struct ExecutorOptions {
  int32_t num_threads = 0;  // CPU threads a kernel may use; 0 = all cores
  uint64_t seed = 1;        // base of every random op's seed
  int32_t device_ordinal = 0;
  bool profile = false;     // time every launch (PreparedProgram::op_seconds)
  // The kernels of collective and RPC ops (schemas marked `collective` or `rpc`); must outlive
  // the executor.
  // nullptr: none, and a program with a collective op fails to prepare, saying why.
  const HostKernels* host_kernels = nullptr;
};

class Executor;

// The rows a sequence tensor of `rows` rows is prepared for: at least 16, at most 25% more than
// `rows`, from a small set of values so that growing batches settle on a few preparations.
int64_t SequenceCapacity(int64_t rows);

// A preparation uses its executor's device, stream and scope: drop it before the executor.
class PreparedProgram {
 public:
  ~PreparedProgram();  // waits for the stream, releases kernel state, then the arena
  PreparedProgram(const PreparedProgram&) = delete;
  PreparedProgram& operator=(const PreparedProgram&) = delete;

  size_t num_ops() const { return calls_.size(); }
  const MemoryPlan& plan() const { return plan_; }
  const FeedShapes& feed_shapes() const { return feed_shapes_; }
  const std::vector<std::string>& fetch_names() const { return fetch_names_; }
  // The shape a var has in this preparation; nullptr for a var the program does not touch.
  const ops::TensorInfo* VarInfo(std::string_view name) const;
  // Where a var lives: an arena buffer or a scope var; nullptr when the program does not touch it.
  const void* VarData(std::string_view name) const;
  // The kernel chosen for op `index`.
  const KernelCall& kernel(size_t index) const { return *calls_[index]; }
  size_t scratch_bytes() const { return scratch_bytes_; }
  // With ExecutorOptions::profile: seconds spent in each op's launch over every run so far
  // (synchronous devices; an asynchronous one measures the enqueue), and the number of runs.
  const std::vector<double>& op_seconds() const { return op_seconds_; }
  int64_t runs() const { return runs_; }

  // The launch index (FleetKernelContext.launch_index) the next run hands its kernels; one
  // more after each run. A resumed job sets it to the number of runs the interrupted job had
  // made, so random kernels continue its streams.
  uint64_t next_launch_index() const { return next_launch_index_; }

  // The sequence feeds (lod_level 1), in feed order.
  std::vector<std::string> sequence_feeds() const;
  void set_next_launch_index(uint64_t index) { next_launch_index_ = index; }

 private:
  friend class Executor;
  PreparedProgram() = default;

  struct Binding {  // a feed or a fetch
    std::string name;
    ir::DataType dtype = ir::DataType::kInvalid;
    std::vector<int64_t> dims;
    void* data = nullptr;
    size_t bytes = 0;
    void* staging = nullptr;  // page-locked copy on the host (devices without host memory)
    int lod = -1;             // index in lod_sources_ for a sequence tensor
  };
  // The offsets of one sequence feed, or of the output of an op that makes offsets of its own
  // (a Derivation), shared by every var that follows its sequences.
  struct LodSource {
    std::string feed;              // the feed, or the derived output var
    int64_t sequences = 0;
    int64_t capacity = 0;          // rows the preparation holds
    int64_t* data = nullptr;       // sequences + 1 offsets in the arena
    void* staging = nullptr;       // page-locked copy (devices without host memory)
    std::vector<int64_t> offsets;  // this run's offsets, on the host
  };
  // An op whose output has offsets of its own (OpSchema::derive_lod): Run makes them just
  // before the op launches, from its inputs' offsets and the values of derive_reads.
  struct Derivation {
    size_t op = 0;
    int source = -1;  // the output's offsets, in lod_sources_
    const ops::OpSchema* schema = nullptr;
    // Per input slot, each var's index in lod_sources_, or -1 for a dense var.
    std::vector<std::pair<std::string, std::vector<int>>> inputs;
    struct Read {  // a var of a derive_reads slot
      std::string slot;
      std::string var;
      const void* data = nullptr;
      ir::DataType dtype = ir::DataType::kInvalid;
      int64_t count = 0;
      void* staging = nullptr;           // page-locked copy (devices without host memory)
      std::vector<int64_t>* to = nullptr;  // its entry in `in.values`
    };
    std::vector<Read> reads;
    // What derive_offsets reads, built once the preparation is complete (its offsets point
    // into lod_sources_, whose elements stay put from then on, swaps included); Run refills the
    // values in place, so a step allocates nothing here.
    ops::LodDeriveInputs in;
    FleetEvent* copied = nullptr;  // after the last copy of the offsets' staging buffer
    bool pending = false;          // `copied` was recorded and not waited for yet
  };
  // Rows [rows, capacity) of a sequence output, zeroed after its op.
  struct Padding {
    uint8_t* data = nullptr;
    size_t row_bytes = 0;
    int lod = -1;
  };

  // Exchanges everything with `other` (a new preparation of the same program replacing this).
  void Swap(PreparedProgram& other);

  const Device* device_ = nullptr;
  int32_t ordinal_ = 0;
  FleetStream* stream_ = nullptr;      // the executor's stream; NULL on host-memory devices
  FleetEvent* feeds_copied_ = nullptr;  // recorded after the feeds' copies of the last run
  bool feeds_pending_ = false;          // feeds_copied_ was recorded and not waited for yet
  // For Executor's cache, and for preparing again when sequence feeds outgrow their capacity.
  const ir::Program* program_ = nullptr;
  FeedShapes feed_shapes_;
  FeedSequences feed_sequences_;
  std::vector<LodSource> lod_sources_;
  std::vector<Derivation> derivations_;  // in op order
  std::vector<std::vector<Padding>> paddings_;  // per op
  std::vector<std::string> fetch_names_;
  std::map<std::string, ops::TensorInfo, std::less<>> infos_;
  std::map<std::string, void*, std::less<>> data_;
  std::vector<Binding> feeds_;
  std::vector<Binding> fetches_;
  std::vector<std::unique_ptr<KernelCall>> calls_;
  MemoryPlan plan_;
  void* arena_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<double> op_seconds_;  // sized at prepare, so profiling allocates nothing per run
  int64_t runs_ = 0;
  uint64_t next_launch_index_ = 0;
};

class Executor {
 public:
  // Uses the device component named `device` from `registry`; both must outlive the executor.
  static StatusOr<std::unique_ptr<Executor>> Create(const PluginRegistry& registry,
                                                    std::string_view device,
                                                    ExecutorOptions options = {});
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  ~Executor();  // waits for the stream, drops every preparation, then the stream

  Scope& scope() { return scope_; }
  const Scope& scope() const { return scope_; }
  const Device& device() const { return device_; }
  const ExecutorOptions& options() const { return options_; }

  // Prepares block 0 of `program` for feeds of exactly these shapes and for fetching `fetch`.
  // Errors name the op (index and type) and what went wrong: an unknown op, a shape error, a var
  // nobody provides, no kernel for (op, device, dtype). Persistables the program writes are
  // created in the scope here; those it reads must be there already (run startup first).
  // A sequence feed needs its number of sequences in `sequences`, and its dims[0] is the
  // capacity of rows to prepare (grown by Run when a batch needs more); `program` must then stay
  // alive and unchanged while the preparation is used.
  StatusOr<std::unique_ptr<PreparedProgram>> Prepare(const ir::Program& program,
                                                     const FeedShapes& feed_shapes,
                                                     const std::vector<std::string>& fetch,
                                                     const FeedSequences& sequences = {});

  // One run. `feeds` must hold every prepared feed with its dtype and prepared shape (errors
  // name the var and both shapes); a sequence feed, its prepared number of sequences, valid
  // offsets (HostTensor::lod) and any number of rows. `fetched` is resized to the fetch list;
  // its tensors' storage is reused from call to call, and a fetched sequence tensor comes back
  // with its rows and offsets.
  Status Run(PreparedProgram& prepared, const FeedMap& feeds, std::vector<HostTensor>& fetched);

  // Prepares on first use for each (program, feed shapes, fetch list) and runs; a feed shape
  // seen before reuses its preparation. `program` must stay alive and unchanged while cached.
  Status Run(const ir::Program& program, const FeedMap& feeds,
             const std::vector<std::string>& fetch, std::vector<HostTensor>& fetched);

  // Room in `p` for sequence feeds of `rows` rows (by feed name; others keep their capacity):
  // prepares it again, in place, when one exceeds its capacity, as Run does by itself for the
  // rows of its feeds. Ranks of a collective job call it with rows they agreed on, so that they
  // all prepare again at the same step.
  Status ReserveSequenceRows(PreparedProgram& p, const std::map<std::string, int64_t>& rows);

  // Drops every cached preparation (e.g. after changing a program).
  void ClearCache() { cache_.clear(); }

  // Waits until every run so far has finished on the device (no-op on host-memory devices).
  // Host code that reads device memory other than through fetches or the scope calls it first.
  Status Synchronize() const;
  // The stream runs are enqueued on; NULL on host-memory devices.
  FleetStream* stream() const { return stream_; }

 private:
  using LodOf = std::map<std::string, int, std::less<>>;  // var -> index in lod_sources_
  // Var names per schema slot of one op, in schema order.
  struct OpSlots {
    std::vector<std::vector<std::string>> inputs, outputs;
  };
  // The feeds of `p` (its feed_shapes_ and feed_sequences_ set) into its infos_ and lod_of.
  Status AddFeeds(PreparedProgram& p, LodOf& lod_of);

  // ---- sequences.cc: the sequence rules --------------------------------------------------
  // Where the offsets of sequence var `var` live in the arena (not a var of the program).
  static std::string LodBufferName(const std::string& var);
  // A sequence feed's offsets: `sequences` of them, from 0, never back, ending at its rows.
  static Status CheckFeedOffsets(const std::string& name, const HostTensor& t,
                                 int64_t sequences);
  // The op's sequence inputs hold one set of sequences, unless its kernels read each tensor's
  // own offsets (OpSchema::mixed_sequences): rows of two sets do not correspond.
  static Status CheckSequenceInputs(const PreparedProgram& p, const ops::OpSchema& schema,
                                    const ir::Op& op, const LodOf& lod_of);
  // The source a sequence output (slot `slot`, var `k`) follows: its lod_share input, or for a
  // sequence kernel the op's first sequence input; -1 for none.
  static int FollowedSource(const ops::OpSchema& schema, const ir::Op& op, const LodOf& lod_of,
                            const std::string& slot, size_t k);
  // Output `var` of op `index` has offsets of its own (OpSchema::derive_lod): a LodSource for
  // it and the Derivation that fills it at run time.
  static Status AddDerivation(PreparedProgram& p, size_t index, const ir::Op& op,
                              const ops::OpSchema& schema, const std::string& var,
                              const ops::TensorInfo& info, LodOf& lod_of);
  // After the arena is placed: the offsets' buffers, the derivations' reads, each call's
  // offsets and each op's padding rows.
  Status BindSequences(PreparedProgram& p, const std::vector<OpSlots>& op_slots,
                       const LodOf& lod_of);
  // Prepares `p` again, in place, when a sequence feed has more rows than its capacity.
  Status FitSequences(PreparedProgram& p, const FeedMap& feeds);
  // Makes the offsets of derivation `d` of `p` for this run (before its op launches).
  Status Derive(PreparedProgram& p, PreparedProgram::Derivation& d);
  // Zeroes rows [from, to) of `data`, on the stream for devices.
  Status ZeroRows(uint8_t* data, size_t row_bytes, int64_t from, int64_t to);

  Executor(const PluginRegistry& registry, const ComponentRecord* device, ExecutorOptions options)
      : registry_(registry), device_(device), options_(options),
        scope_(device_, options.device_ordinal) {}

  const PluginRegistry& registry_;
  Device device_;
  ExecutorOptions options_;
  Scope scope_;
  size_t alignment_ = 64;
  MemoryLimit limit_;  // what one allocation may take (memory_plan.h)
  bool host_memory_ = false;  // device pointers are host pointers: feeds and fetches memcpy
  FleetStream* stream_ = nullptr;  // made at Create for devices without host memory
  std::vector<std::unique_ptr<PreparedProgram>> cache_;
};

}  // namespace fleet::exec
