// host/config: fleet.toml read with TOML++ into a typed Config, every key checked against
// its schema with file:line:col errors.
// Depends on: support/.
//
// fleet.toml as a typed configuration.
//
// The file says everything about a run except the model: which plugins to load and from where,
// which backends to use, logging. LoadConfig reads it with TOML++, applies command-line overrides
// (`--set a.b=v`) and checks every key against the schema in one pass, so the user sees all
// mistakes at once: unknown keys (with "did you mean"), wrong types and bad values, each as
// "FILE:LINE:COL: KEY: what was expected".
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "support/status.h"

namespace fleet {

// One value of a plugin's own table ([plugins.config.NAME]) or of a pass's options
// ([passes.NAME]). Arrays hold one type.
using ConfigScalar = std::variant<int64_t, double, bool, std::string>;
struct ConfigValue {
  std::string key;
  std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>,
               std::vector<bool>, std::vector<std::string>>
      value;
  std::string where;  // "fleet.toml:12:3" or "--set plugins.config.cpu.threads"
};

// A backend choice: which component to use, and which plugin provides it.
struct BackendChoice {
  std::string backend;  // component name, e.g. "cpu", "gloo"
  std::string plugin;   // plugin name; defaults to a name derived from the backend
};

struct Config {
  // Where the config came from: a file path, or "<defaults>" when no file was read.
  std::string source;

  struct Plugins {
    std::vector<std::filesystem::path> dirs;  // absolute (relative ones resolved against the file)
    bool allow_insecure = false;
    std::vector<std::string> load;            // extra plugins to initialise
    std::vector<std::string> optional;        // plugins whose failure is only a warning
    std::map<std::string, std::vector<ConfigValue>> config;  // per plugin name
  } plugins;

  BackendChoice device{"cpu", "cpu"};                  // plugin default: the backend name
  BackendChoice comm{"gloo", "comm_gloo"};             // plugin default: "comm_" + backend
  double comm_timeout_s = 300.0;
  // The address peers reach this process's communicator at ("" = derived: this machine's
  // address on the route to the rendezvous master, or 127.0.0.1 for a local job).
  std::string comm_hostname;
  // The rendezvous store of a multi-process job: "tcp" (served by rank 0, or by the launcher,
  // at the master address) or "file" (a directory every rank can reach, comm_store_dir).
  std::string comm_store = "tcp";
  std::filesystem::path comm_store_dir;  // absolute; empty = not set
  // A file holding the job secret the TCP store authenticates with (absolute; empty = not set);
  // read by JobSecret (config/job_secret.h), after FLEET_JOB_SECRET and FLEET_JOB_SECRET_FILE.
  std::filesystem::path comm_secret_file;
  // Collectives on a device the communicator cannot reduce (Gloo with CUDA tensors) go through
  // host memory: copied out, reduced there, copied back. Off by default, so that a pairing that
  // silently costs two copies per collective is a choice, not an accident.
  bool comm_staging = false;
  // When the ranks compare the collectives they made (collective/desync.h): "step" (at the first
  // collective of each step and before the host's own), "every" (before each) or "off" (only
  // when a communicator forms). FLEET_COLLECTIVE_CHECK overrides it where set.
  std::string comm_check = "step";
  BackendChoice transport{"rpc", "transport_rpc"};     // plugin default: "transport_" + backend
  // [transport] besides backend/plugin: how trainers and parameter servers talk.
  struct Rpc {
    double timeout_s = 300.0;   // deadline of every RPC, and of a server's wait for trainers
    int64_t retries = 3;        // >= 0: extra attempts of a call that found the server down
    double max_message_mb = 4.0;  // > 0: the largest message either side sends or accepts;
                                  // bigger tensors travel in chunks of at most this size
    std::string token;          // "" = none; else every call must carry this shared secret
    // A file holding the job secret (absolute; empty = not set); see comm_secret_file.
    std::filesystem::path secret_file;
    bool tls = false;           // TLS on every connection
    std::filesystem::path tls_cert;         // server certificate chain (PEM; absolute)
    std::filesystem::path tls_key;          // server private key (PEM)
    std::filesystem::path tls_ca;           // CA bundle clients verify the server with; a
                                            // server given one also requires client certs
    std::filesystem::path tls_client_cert;  // optional client certificate (PEM)
    std::filesystem::path tls_client_key;   // its private key
  } rpc;

  std::string log_level = "info";  // trace, debug, info, warn, error

  // none, collective, pserver; auto = collective when the job has several trainers, else none.
  std::string strategy_mode = "auto";
  // Where each [strategy] key the config sets was set, by key ("nrings" -> "fleet.toml:7:1" or
  // "--set strategy.nrings"), so that a program file's DistributedStrategy can be merged with
  // it and a disagreement named in both places.
  std::map<std::string, std::string> strategy_where;
  struct Collective {
    std::string mode = "grad_allreduce";  // grad_allreduce, local_sgd, single_process_multi_thread
    int64_t devices = 1;                  // single_process_multi_thread: devices (threads)
    int64_t nrings = 1;                   // communicators gradients alternate over
    int64_t local_sgd_k_steps = 1;        // local_sgd: average parameters every k steps
    double fuse_grad_size_mb = 32.0;      // all-reduce gradients in buckets this big; 0 = off
    bool sync_batch_norm = false;         // batch_norm statistics over every rank's batch
    // grad_allreduce: how sparse gradients move (auto, gather, dense; c_allgather's attr)
    std::string sparse_exchange = "auto";
    std::vector<std::string> passes;      // pass components run after the built-in ones
    std::string passes_where;             // where passes was set: "fleet.toml:12:10" or
                                          // "--set strategy.passes"; "" = not set
  } collective;
  // [passes.NAME]: options of the pass component NAME (built-in or from a plugin), checked
  // against the options the pass declares when the job is transpiled (or by `check`). Options
  // the host derives from [strategy] for its built-in passes cannot be set here as well.
  std::map<std::string, std::vector<ConfigValue>> passes;
  // [strategy] keys of mode = "pserver" (Paddle's DistributeTranspilerConfig).
  struct Pserver {
    bool sync_mode = true;            // barrier-synchronous rounds; false = apply on arrival
    bool slice_var_up = true;         // split parameters into blocks across servers
    int64_t min_block_size = 8192;    // >= 1: smallest block, in elements
    std::string split_method = "round_robin";  // round_robin or hash_name
    // full: every server runs the whole initialisation and keeps its blocks, so a job starts
    // from the values a single process would; shard: each server initialises only its blocks
    // (Paddle's way; values then depend on the number of servers).
    std::string init = "full";
    // Fleet 2.x's vocabulary (Paddle's DistributedStrategy.a_sync): true is an asynchronous job
    // (sync_mode = false) whose trainers send through a background communicator
    // (pserver/async_communicator.h); false is sync_mode = true. Set both, they must agree.
    bool a_sync = false;
    // [strategy.a_sync_configs]: the communicator's settings (a_sync = true only).
    struct AsyncConfigs {
      int64_t k_steps = 0;              // [-1, 1e6]; > 0: GEO-SGD, exchanging every k steps
      int64_t max_merge_var_num = 1;    // [1, 1024]: queued gradients summed into one send
      int64_t send_queue_size = 1;      // [1, 1024]: gradients queued per var before a step waits
      bool independent_recv_thread = false;  // receive in a thread of its own, not after each
                                             // round of sends
      int64_t thread_pool_size = 1;     // [1, 64]: vars sent at once
      int64_t send_wait_times = 1;      // [0, 1000]: 10 ms waits for max_merge_var_num copies
      // Paddle splits a gradient by blocks at run time with it; Fleet's transpiler always
      // splits at transpile time, so either value trains the same (accepted, noted in the log).
      bool runtime_split_send_recv = false;
    } a_sync_configs;
    // [strategy.growable_tables]: tables declared with size [-1, dim] (pserver/growable_table.h).
    struct GrowableTables {
      int64_t admit_after = 1;  // >= 1: lookups of an id before the servers make its row
      int64_t evict_after = 0;  // >= 0: updates a row may go unseen before it is dropped;
                                // 0 = never
    } growable_tables;
  } pserver;

  // The training loop of `fleet-host run`.
  struct Train {
    int64_t steps = 100;        // >= 1
    int64_t batch_size = 64;    // >= 1
    int64_t seed = 1;           // >= 0: random initialisers and synthetic data
    int64_t threads = 0;        // >= 0: CPU threads per kernel; 0 = all cores
    int64_t log_every = 10;     // >= 1: print (and record) every N steps
    std::string metrics_file;   // "" = none; else a JSON-lines file, one object per logged step
    bool profile = false;       // time every op and print where a step's time goes at the end
    // After the last step, one .npy per parameter in this directory (absolute; empty = none);
    // rank 0 writes it in a job of several trainers.
    std::filesystem::path save_params_dir;
    // After startup, the persistable vars found here (NAME.npy per var, or the tensors of
    // *.safetensors files) replace their initial values (absolute; empty = none). See
    // checkpoint/init_from.h.
    std::filesystem::path init_from;
    // At every logged step, check that every trainer holds bit-identical parameters.
    bool check_replicas = false;
    // Vars reported with the loss at every logged step (job/metrics.h): names of the program
    // file's variables or of main-program vars, each holding one value. Not empty, no repeats.
    std::vector<std::string> fetch;
    // TensorBoard event files of the logged steps' scalars here (absolute; empty = none).
    std::filesystem::path tensorboard_dir;
  } train;

  // Checkpoints (checkpoint/checkpoint.h): the whole persistable state every N steps, and
  // resuming from the newest intact one.
  struct Checkpoint {
    std::filesystem::path dir;  // absolute; empty = no checkpoints
    int64_t every_steps = 100;  // >= 1: save after every this many steps (and after the last)
    int64_t keep = 3;           // >= 0: keep the newest this many; 0 keeps all
    bool resume = false;        // start from the newest intact checkpoint in dir, if any
  } checkpoint;

  // An evaluation pass during training (job/evaluation.h): the forward part of the program, with
  // is_test set, run over files of the [data] source's format every every_steps steps; its
  // loss and reported vars go into the logged step's line and record as eval_<name>.
  struct Eval {
    // Files or glob patterns (absolute), read as [data] reads its filelist (csv or multislot);
    // empty = no evaluation.
    std::vector<std::string> filelist;
    int64_t every_steps = 0;  // >= 0: evaluate after every this many steps; 0 = after the last
    int64_t batch_size = 0;   // >= 0: 0 = train.batch_size
    // >= 0: batches per evaluation; 0 = one pass over the files (a partial last batch is left
    // out). A positive count goes on where the previous evaluation stopped.
    int64_t batches = 0;
    std::string where;  // where eval.filelist was set, for messages
  } eval;

  // Where batches come from.
  struct Data {
    std::string source = "synthetic";  // synthetic, csv, multislot, npy
    std::string label;                 // synthetic: the feed the teacher computes ("" = last)
    int64_t classes = 0;               // synthetic int64 label: classes (0 = from the model)
    std::map<std::string, std::filesystem::path> files;  // npy: file per feed (absolute)
    std::filesystem::path csv_path;    // csv: the file (absolute); empty = not set
    bool csv_header = false;           // csv: skip the first line
    std::map<std::string, std::vector<int64_t>> csv_columns;  // csv: 0-based columns per feed
    // csv, multislot: files or glob patterns (absolute), expanded and sorted at run time; for
    // csv, csv_path (when set) is one more.
    std::vector<std::string> filelist;
    std::vector<std::string> slots;    // multislot: the files' slots, in order
    std::string dataset = "memory";    // memory (load the share once) or queue (stream it)
    bool shuffle = false;              // memory: a new order every epoch from train.seed
    std::string last_batch = "wrap";   // wrap, drop or pad: an epoch's partial last batch
    std::string bad_lines = "error";   // error or skip (counted, reported at the end)
    int64_t queue_batches = 4;         // >= 0: batches a reader thread prepares ahead; 0 = none
    // auto: split the files across trainers when there are several trainers and at least as
    // many files; "true": always split (fewer files than trainers is an error); "false": every
    // trainer reads every file and keeps its rows of the global batch.
    std::string shard = "auto";
    std::string where;                 // where data.source was set, for messages
  } data;

  // This process's place in a job. Environment variables of launchers may say the same things;
  // roles/role.h combines both and refuses disagreements. Every key here is optional: the values
  // below mean "not set".
  struct Role {
    std::string role;                            // "", trainer or pserver
    int64_t rank = -1;                           // -1, or >= 0
    int64_t world_size = 0;                      // 0, or >= 1: the number of trainers
    std::vector<std::string> trainer_endpoints;  // "host:port" each
    std::string current_endpoint;                // "host:port"
    std::vector<std::string> pserver_endpoints;  // "host:port" each; order = server index
    std::string master;                          // "host:port" of the rendezvous store
    int64_t local_rank = -1;                     // -1, or >= 0: rank on this machine
    // MPI's symmetric layout (Paddle's MPISymetricRoleMaker): even MPI ranks are parameter
    // servers, odd ones trainers, one of each per node.
    bool mpi_symmetric = false;
    // Where each key set to something other than "not set" was set, by key ("rank"):
    // "fleet.toml:12:1" or "--set role.rank".
    std::map<std::string, std::string> where;
  } role;
};

// Reads `path` (or, when path is empty, uses the defaults) and applies `overrides`, each of the
// form "a.b.c=value" where value is a TOML value or, failing that, a bare string.
StatusOr<Config> LoadConfig(const std::filesystem::path& path,
                            const std::vector<std::string>& overrides);

// As LoadConfig, on text already in memory; `source_name` is used in messages and relative
// plugin dirs resolve against `base_dir`.
StatusOr<Config> ParseConfig(std::string_view text, std::string_view source_name,
                             const std::filesystem::path& base_dir,
                             const std::vector<std::string>& overrides);

// The file LoadConfig should read when the user gave no --config: "./fleet.toml" if it exists,
// else empty (defaults).
std::filesystem::path DefaultConfigPath();

}  // namespace fleet
