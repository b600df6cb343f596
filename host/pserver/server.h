// host/pserver: parameter-server training at run time: the server loop, its checkpoints, and
// the trainer's side of the RPC ops.
// Depends on: checkpoint/, config/, data/, executor/, ir/, ops/, plugin/, roles/, support/.
//
// A parameter server: runs one pserver program ("pserver.<i>" with its startup) and answers
// trainers through the TransportHandler interface.
//
// Setup (Create): the startup program runs in the server's executor; every receive var (X of
// the listen_and_serv op) that startup did not create is made (zeros, declared dtype and
// shape); each optimize block, and the LR block, becomes a standalone program (block 0 = the
// vars of block 0 and of the block's ancestors, plus the block's own vars and ops) prepared
// once, without feeds.
//
// Sync mode (distributed_mode 0) follows Paddle's RunSyncLoop (reference §9.2) with deadlines:
//   round 0:   phase Get: trainers' startups fetch the parameters, then each sends a FETCH
//              barrier.
//   round r:   phase Send: trainers send gradients into their own receive vars and a BATCH
//              barrier (a BATCH barrier waits until the phase is Send, which keeps a fast
//              trainer from fetching before the round's update); once every live trainer
//              arrived, the optimize blocks run, grouped by parent in list order (the LR block
//              first), the blocks of a group in parallel; then phase Get: Gets are answered,
//              and once every live trainer sent its FETCH barrier the next round starts.
// Every wait has the deadline `timeout`; a barrier that does not fill in time fails the server
// with an error naming the trainers that did not arrive, and every waiting handler returns it.
//
// A trainer that fails tells the servers (OnAbort): each fails at once, naming it, so no server
// waits out its deadline for a trainer that is gone.
//
// Completion: a trainer's Complete removes it from the barriers. Unlike Paddle, whose merge
// keeps dividing by the original number of trainers (so a departed trainer's zeroed gradient
// drags the mean down), the merge here averages over the trainers that contributed to the
// round: each optimize block's sum/scale(1/N) merge is rebuilt (and prepared once) for the set
// of live trainers. When every trainer has completed, Serve returns OK (Paddle's servers never
// leave their loop).
//
// Async mode (distributed_mode 1): a received gradient runs its block (grad_to_block_id) at
// once, one update at a time per block (Paddle runs them unlocked); a Get copies the current
// value under the lock of the block that writes it; barriers return at once. The LR block, if
// any, runs once before serving (what RunAsyncLoop does with an unbound block). A live trainer
// silent for longer than `timeout` fails the server.
//
// Row prefetch (OnPrefetch, distributed_lookup_table on the trainers): the rows asked of a
// parameter block an optimize block updates are copied out; in sync mode outside a round's
// update (a prefetch waits for it to end, and the next update for the copy), in async mode
// under the lock of the block that writes it.
//
// Sparse gradients (receive vars declared selected_rows): a send carries the entries of a
// trainer's batch that fall in the server's rows. The receive var holds them in the scope with
// room for the largest send so far: a larger one gets new memory (twice the room, or what it
// needs) and the block that reads it is prepared again before its next run; the entries past
// a send's are emptied. A send's rows must lie in the var's height (the error names the
// trainer, the var, the entry and the row). Such vars cannot be fetched and are not saved in
// checkpoints (they last one round).
//
// Growable tables (listen_and_serv growable_tables; pserver/growable_table.h): the table's
// block and the optimizer's per-row vars are [capacity, dim] vars, and the table's gradients
// arrive keyed by id. A prefetch or a send first maps its ids to slots (making the rows the
// table admits now, from the declared initializer), growing the vars (twice the rows, or what
// is needed) when the slots run out; the block is then prepared again before its next run. A
// send's rows become slots before the block reads them; entries of ids without a row are
// dropped. Every run of the table's block ends an update of its clock (eviction). A prefetch
// of "<block>@READ" (kGrowableReadView: an evaluation's lookup) makes and counts nothing; an
// id without a row reads as its first value when admission is immediate, else as zeros. A growth the
// memory cannot hold fails the server with RESOURCE_EXHAUSTED naming the table, its rows and
// bytes. Checkpoints hold the vars and the index ("<block>@ids", "@seen", "@waiting",
// "@clock"); at exit the server logs each table's rows and memory.
//
// At exit (every trainer completed), with save_params_dir set, the parameter blocks this
// server updates are written there as NAME.npy (temporary file + rename); a growable table's
// as NAME.npy holding its rows in id order and NAME.ids.npy holding the ids.
//
// Threading: the handler methods may be called from many threads at once; Serve runs on one
// thread; Fail from any. Create is not thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "roles/role.h"
#include "executor/executor.h"
#include "ir/program.h"
#include "plugin/registry.h"
#include "plugin/transport.h"
#include "support/status.h"

namespace fleet {

namespace checkpoint {
struct SafeTensors;
}  // namespace checkpoint

struct PsServerOptions {
  std::chrono::milliseconds timeout{300000};  // every wait for trainers
  std::filesystem::path save_params_dir;      // empty: do not save (run: <dir>/pserver.<i>)
  int32_t num_threads = 1;                    // CPU threads per kernel
  uint64_t seed = 1;                          // the startup program's random ops
  int32_t device_ordinal = 0;
  int32_t max_parallel_blocks = 0;            // optimize blocks run at once; 0 = cores
  // Checkpoints (sync mode): with checkpoint_dir set, after every checkpoint_every-th round
  // and after round last_round the server's whole scope is saved as shard "pserver.<id>" of
  // that step's checkpoint (checkpoint/checkpoint.h), keeping checkpoint_keep steps.
  std::filesystem::path checkpoint_dir;
  int64_t checkpoint_every = 1;
  int64_t checkpoint_keep = 0;
  int64_t last_round = 0;
  int64_t num_servers = 1;      // shards of a checkpoint
  std::string program_hash;     // checkpoint::ProgramHash of the job's optimized programs
  int64_t trainer_batch = 0;    // what a trainer's data source delivers per step (manifest)
  // Growable tables ([strategy.growable_tables]; pserver/growable_table.h).
  int64_t admit_after = 1;      // lookups of an id before it gets a row
  int64_t evict_after = 0;      // updates a row may go unseen; 0 = never
};

class PsServer final : public TransportHandler {
 public:
  // `pserver` holds exactly one listen_and_serv in block 0; `startup` initialises its vars.
  // `registry` (with `device`) must outlive the server; the programs are copied.
  static StatusOr<std::unique_ptr<PsServer>> Create(const PluginRegistry& registry,
                                                    const std::string& device,
                                                    const ir::Program& pserver,
                                                    const ir::Program& startup,
                                                    PsServerOptions options);
  ~PsServer() override;
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  // Blocks until every trainer has completed (OK, after saving the parameters when asked) or
  // the server failed (that error). Call once.
  Status Serve();
  // Makes Serve and every waiting handler return `why` (prefixed with the server's label).
  // The first failure wins. Any thread.
  void Fail(const Status& why);

  // TransportHandler. Errors name the server and the var or trainer.
  Status OnSend(int32_t trainer_id, std::string_view name, const FleetTensor& tensor) override;
  Status OnGet(int32_t trainer_id, std::string_view name, FleetTensor& out,
               void** token) override;
  void OnGetDone(void* token) override;
  Status OnBarrier(int32_t trainer_id, int32_t kind) override;
  Status OnComplete(int32_t trainer_id) override;
  // Checks the send against the receive var (as OnSend does) before its payload is buffered.
  Status OnSendBegin(int32_t trainer_id, std::string_view name,
                     const FleetTensor& shape) override;
  // Rows ids[0 .. num_ids) of a var an optimize block updates (a block of a table the trainers
  // look up with distributed_lookup_table), copied: sync, between rounds (it waits out a
  // round's update); async, under the lock of the block that writes it. A var that is not
  // such a table is NOT_FOUND, an id outside its rows INVALID_ARGUMENT naming the id, the var
  // and the trainer; a reply over kMaxPrefetchBytes RESOURCE_EXHAUSTED.
  Status OnPrefetch(int32_t trainer_id, std::string_view name, const int64_t* ids,
                    int64_t num_ids, FleetTensor& out, void** token) override;
  static constexpr uint64_t kMaxPrefetchBytes = uint64_t{1} << 30;
  // Fails the server naming the trainer and its reason, so the other trainers' waits end now
  // and Serve returns that error, instead of at the deadline.
  Status OnAbort(int32_t trainer_id, std::string_view reason) override;

  // Handler calls running right now; waits up to `limit` for none (before stopping a server).
  void WaitHandlersIdle(std::chrono::milliseconds limit);

  const std::string& endpoint() const { return endpoint_; }  // listen_and_serv's
  int64_t pserver_id() const { return pserver_id_; }
  bool sync() const { return sync_; }
  int32_t trainers() const { return trainers_; }
  size_t num_blocks() const { return num_blocks_; }
  // "pserver 0 (127.0.0.1:6170)".
  const std::string& label() const { return label_; }
  // "sync, 2 trainers, 3 blocks".
  std::string Describe() const;
  // Each growable table's rows, ids waiting for admission, evicted rows, capacity and memory
  // (rows and index), "; "-separated; "" without one. Any thread.
  std::string DescribeGrowable() const;
  // The rounds finished so far (sync).
  int64_t rounds() const;
  // A copy of a scope var (for tests and saving). Not while rounds run.
  StatusOr<exec::HostTensor> Read(const std::string& name) const;
  // Before Serve: restores this server's shard of the newest checkpoint whose every shard is
  // intact, and continues the round count from its step; returns that step (0: none found,
  // nothing changed). Skipped checkpoints are logged as warnings.
  StatusOr<int64_t> ResumeFromCheckpoint();
  // Before Serve: [train] init_from for this server's share of the state (checkpoint/
  // init_from.h, LoadInitialWeightsForServer). `job` holds every program of the job, for the
  // checks; `startup` is this server's startup program, whose split_byref ops say which rows
  // of a whole var each block holds. Returns the vars written.
  StatusOr<std::vector<std::string>> LoadInitialWeights(const std::filesystem::path& dir,
                                                        const std::vector<const ir::Program*>& job,
                                                        const ir::Program& startup);

 // Defined in server_internal.h (the server's own files only).
  struct Block;
  struct GetToken;
  struct SparseReceive;
  struct Growable;

 private:
  enum class Phase { kGet, kSend };

  PsServer() = default;
  Status Setup(const PluginRegistry& registry, const std::string& device,
               const ir::Program& pserver, const ir::Program& startup);
  Status CheckTrainer(int32_t trainer_id) const;
  // The receive var `name` when `shape`'s dtype and dims are its own; errors name both.
  StatusOr<const exec::ScopeVar*> ReceiveVar(int32_t trainer_id, std::string_view name,
                                             const FleetTensor& shape) const;
  // Waits (mu_ held through `lock`) until every live trainer's flag in `arrived` is set or
  // nobody is live; fails the server naming the missing trainers at the deadline.
  Status WaitArrivals(std::unique_lock<std::mutex>& lock, const std::vector<bool>& arrived,
                      const char* what);
  Status RunRound(const std::vector<bool>& contributors);
  // Runs one block's program; `contributors` (nullptr = every trainer) picks its merge.
  Status RunBlock(Block& block, const std::vector<bool>* contributors);
  // Copies a sparse send into its receive var (growing it when it has too little room).
  Status WriteSparse(int32_t trainer_id, std::string_view name, const exec::ScopeVar& var,
                     const FleetTensor& tensor);
  StatusOr<exec::PreparedProgram*> PreparedFor(Block& block,
                                               const std::vector<bool>* contributors);
  Status FailLocked(const Status& why);  // mu_ held; returns the failure
  // Sync: waits (mu_ not held) until no round's update runs and holds the next one off until
  // EndBetweenUpdates; `what` names the waiter in the deadline's error.
  Status BeginBetweenUpdates(const std::string& what);
  void EndBetweenUpdates();
  Status ServeSync();
  Status ServeAsync();
  Status SaveParams() const;
  // Growable tables (server_growable.cc).
  Status SetupGrowable(const ir::Op& listen_and_serv, const ir::Program& startup);
  // Before a block's first Prepare: its declared shapes of a growable table's vars.
  void DeclareGrowable(Block& block);
  // After the blocks exist: the receive vars of each table's gradients.
  void BindGrowable();
  // The vars of `g` get room for `need` slots (g.mu held, no update running).
  Status GrowTable(Growable& g, int64_t need, bool exact);
  // Slots for ids (g.mu held, no update running): makes and initialises admitted rows.
  Status ResolveRows(Growable& g, const int64_t* ids, int64_t n, bool lookup, int64_t* slots);
  // `read_only`: through kGrowableReadView, making and counting nothing.
  Status PrefetchGrowable(int32_t trainer_id, Growable& g, const int64_t* ids, int64_t num_ids,
                          bool read_only, std::vector<uint8_t>& rows,
                          std::vector<int64_t>& dims);
  Status SaveGrowableParams(const Growable& g) const;
  // A snapshot of the scope made canonical: each growable table's vars hold its rows in id
  // order (whichever slots they sat in, which depend on the order trainers' calls arrived),
  // with the index as "<table>@ids", "@seen", "@waiting" and "@clock".
  Status CanonicalGrowableState(checkpoint::SafeTensors& state) const;
  // The inverse, before the scope is restored: `index` holds the "<table>@..." tensors (taken);
  // each table's vars get one row per saved id.
  Status RestoreGrowableState(std::map<std::string, exec::HostTensor>& index,
                              const std::string& where);

  Status SaveCheckpoint(int64_t round) const;  // the scope as this server's shard
  Status Failure() const;  // under mu_: the failure, or OK
  void Touch(int32_t trainer_id);

  PsServerOptions options_;
  std::string endpoint_;
  std::string label_;
  int64_t pserver_id_ = 0;
  bool sync_ = true;
  int32_t trainers_ = 1;
  size_t num_blocks_ = 0;
  bool host_memory_ = true;
  std::unique_ptr<exec::Executor> executor_;
  // Blocks in run order, and the groups (runs of blocks sharing a parent) they form.
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<std::vector<Block*>> groups_;
  Block* lr_block_ = nullptr;
  std::map<std::string, Block*, std::less<>> block_of_grad_;    // grad_to_block_id
  std::map<std::string, Block*, std::less<>> writer_;           // persistable -> its block
  std::map<std::string, const exec::ScopeVar*, std::less<>> receive_;  // listen_and_serv X
  std::map<std::string, const exec::ScopeVar*, std::less<>> vars_;     // every scope var
  std::vector<std::string> params_;  // what SaveParams writes
  std::map<std::string, std::unique_ptr<SparseReceive>, std::less<>> sparse_;  // by receive var
  std::map<std::string, std::unique_ptr<Growable>, std::less<>> growable_;  // by table block
  std::mutex grow_mu_;     // one sparse receive var grows at a time
  std::mutex prepare_mu_;  // Executor::Prepare is not for concurrent use (async re-prepares)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  Phase phase_ = Phase::kGet;
  int64_t round_ = 0;
  std::vector<bool> live_;
  int32_t num_live_ = 0;
  std::vector<bool> batch_;  // BATCH barriers of the round being collected
  std::vector<bool> fetch_;  // FETCH barriers of the round being collected
  // Views handed out and not yet done, and sync prefetches and sends at work: a round's
  // update waits for none.
  int64_t outstanding_gets_ = 0;
  bool updating_ = false;         // sync: a round's blocks are running
  Status failure_;
  bool failed_ = false;
  std::vector<std::chrono::steady_clock::time_point> last_heard_;  // async
  int64_t in_flight_ = 0;  // handler calls running
};

// `fleet-host run` for a pserver: from the transpiled set, "pserver.<role.rank>" and its
// startup; serves them over `transport` at the listen_and_serv endpoint (which must be
// role.current_endpoint when that is known) with the [transport] options, printing one line
// when listening and one when done. Blocks until every trainer has completed (OK) or the
// server failed. `registry` (with `device` and `transport`) must outlive the call. With
// [checkpoint] dir, the server saves its shard every every_steps rounds and after round
// train.steps, and with resume restores the newest complete checkpoint before listening;
// `program_hash` is checkpoint::ProgramHash of the job's optimized programs.
Status RunPserver(const Config& config, const Role& role,
                  const std::map<std::string, ir::Program>& programs,
                  const PluginRegistry& registry, const std::string& device,
                  const ComponentRecord& transport, const std::string& program_hash,
                  std::ostream& out);

}  // namespace fleet
