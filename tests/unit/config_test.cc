#include "config/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

namespace fleet {
namespace {

namespace fs = std::filesystem;

const fs::path kDataDir = fs::path(FLEET_TEST_DATA_DIR "/config").lexically_normal();
const fs::path kExample =
    fs::path(FLEET_TEST_DATA_DIR "/../../../examples/fleet.toml").lexically_normal();

StatusOr<Config> Parse(std::string_view text, const std::vector<std::string>& overrides = {}) {
  return ParseConfig(text, "fleet.toml", "/etc/fleet", overrides);
}

// The error message for `text`, or a note that there was none.
std::string ErrorOf(std::string_view text, const std::vector<std::string>& overrides = {}) {
  StatusOr<Config> config = Parse(text, overrides);
  if (config.ok()) return "<no error>";
  EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
  return config.status().message();
}

void ExpectDefaults(const Config& config) {
  EXPECT_TRUE(config.plugins.dirs.empty());
  EXPECT_FALSE(config.plugins.allow_insecure);
  EXPECT_TRUE(config.plugins.load.empty());
  EXPECT_TRUE(config.plugins.optional.empty());
  EXPECT_TRUE(config.plugins.config.empty());
  EXPECT_EQ(config.device.backend, "cpu");
  EXPECT_EQ(config.device.plugin, "cpu");
  EXPECT_EQ(config.comm.backend, "gloo");
  EXPECT_EQ(config.comm.plugin, "comm_gloo");
  EXPECT_EQ(config.comm_timeout_s, 300.0);
  EXPECT_EQ(config.comm_hostname, "");
  EXPECT_EQ(config.comm_store, "tcp");
  EXPECT_TRUE(config.comm_store_dir.empty());
  EXPECT_EQ(config.comm_check, "step");
  EXPECT_EQ(config.transport.backend, "rpc");
  EXPECT_EQ(config.transport.plugin, "transport_rpc");
  EXPECT_EQ(config.rpc.timeout_s, 300.0);
  EXPECT_EQ(config.rpc.retries, 3);
  EXPECT_EQ(config.rpc.max_message_mb, 4.0);
  EXPECT_EQ(config.rpc.token, "");
  EXPECT_FALSE(config.rpc.tls);
  EXPECT_TRUE(config.rpc.tls_cert.empty());
  EXPECT_TRUE(config.rpc.tls_key.empty());
  EXPECT_TRUE(config.rpc.tls_ca.empty());
  EXPECT_TRUE(config.rpc.tls_client_cert.empty());
  EXPECT_TRUE(config.rpc.tls_client_key.empty());
  EXPECT_EQ(config.log_level, "info");
  EXPECT_EQ(config.strategy_mode, "auto");
  EXPECT_EQ(config.collective.mode, "grad_allreduce");
  EXPECT_EQ(config.collective.devices, 1);
  EXPECT_EQ(config.collective.nrings, 1);
  EXPECT_EQ(config.collective.local_sgd_k_steps, 1);
  EXPECT_EQ(config.collective.fuse_grad_size_mb, 32.0);
  EXPECT_TRUE(config.collective.passes.empty());
  EXPECT_TRUE(config.pserver.sync_mode);
  EXPECT_TRUE(config.pserver.slice_var_up);
  EXPECT_EQ(config.pserver.min_block_size, 8192);
  EXPECT_EQ(config.pserver.split_method, "round_robin");
  EXPECT_EQ(config.pserver.init, "full");
  EXPECT_EQ(config.train.steps, 100);
  EXPECT_EQ(config.train.batch_size, 64);
  EXPECT_EQ(config.train.seed, 1);
  EXPECT_EQ(config.train.threads, 0);
  EXPECT_EQ(config.train.log_every, 10);
  EXPECT_EQ(config.train.metrics_file, "");
  EXPECT_FALSE(config.train.profile);
  EXPECT_TRUE(config.train.save_params_dir.empty());
  EXPECT_TRUE(config.train.init_from.empty());
  EXPECT_FALSE(config.train.check_replicas);
  EXPECT_TRUE(config.checkpoint.dir.empty());
  EXPECT_EQ(config.checkpoint.every_steps, 100);
  EXPECT_EQ(config.checkpoint.keep, 3);
  EXPECT_FALSE(config.checkpoint.resume);
  EXPECT_EQ(config.data.source, "synthetic");
  EXPECT_EQ(config.data.label, "");
  EXPECT_EQ(config.data.classes, 0);
  EXPECT_TRUE(config.data.files.empty());
  EXPECT_TRUE(config.data.csv_path.empty());
  EXPECT_FALSE(config.data.csv_header);
  EXPECT_TRUE(config.data.csv_columns.empty());
  EXPECT_TRUE(config.data.filelist.empty());
  EXPECT_TRUE(config.data.slots.empty());
  EXPECT_EQ(config.data.dataset, "memory");
  EXPECT_FALSE(config.data.shuffle);
  EXPECT_EQ(config.data.last_batch, "wrap");
  EXPECT_EQ(config.data.bad_lines, "error");
  EXPECT_EQ(config.data.queue_batches, 4);
  EXPECT_EQ(config.data.shard, "auto");
  EXPECT_TRUE(config.eval.filelist.empty());
  EXPECT_EQ(config.eval.every_steps, 0);
  EXPECT_EQ(config.eval.batch_size, 0);
  EXPECT_EQ(config.eval.batches, 0);
  EXPECT_EQ(config.eval.where, "");
  EXPECT_EQ(config.role.role, "");
  EXPECT_EQ(config.role.rank, -1);
  EXPECT_EQ(config.role.world_size, 0);
  EXPECT_TRUE(config.role.trainer_endpoints.empty());
  EXPECT_EQ(config.role.current_endpoint, "");
  EXPECT_TRUE(config.role.pserver_endpoints.empty());
  EXPECT_EQ(config.role.master, "");
  EXPECT_EQ(config.role.local_rank, -1);
  EXPECT_TRUE(config.role.where.empty());
}

// ---- whole files ------------------------------------------------------------------------------

TEST(ConfigTest, NoFileGivesDefaults) {
  StatusOr<Config> config = LoadConfig("", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, "<defaults>");
  ExpectDefaults(*config);
}

TEST(ConfigTest, EmptyFileGivesDefaults) {
  StatusOr<Config> config = Parse("# nothing but a comment\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, "fleet.toml");
  ExpectDefaults(*config);
}

TEST(ConfigTest, ExampleFileParsesToTheDefaults) {
  StatusOr<Config> config = LoadConfig(kExample, {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, kExample.string());
  ExpectDefaults(*config);
}

TEST(ConfigTest, ExampleFileShowsEveryKey) {
  std::ifstream in(kExample);
  std::stringstream text;
  text << in.rdbuf();
  std::string example = text.str();
  // In schema order: each table header, then its keys.
  size_t at = 0;
  for (const char* line : {"[plugins]", "dirs = ", "allow_insecure = ", "load = ", "optional = ",
                           "[plugins.config.", "[device]", "backend = ", "plugin = ", "[comm]",
                           "backend = ", "plugin = ", "timeout_s = ", "hostname = ", "store = ",
                           "store_dir = ", "check = ", "secret_file = ", "[transport]", "backend = ",
                           "plugin = ", "timeout_s = ", "retries = ", "max_message_mb = ",
                           "token = ", "secret_file = ", "tls = ",
                           "tls_cert = ", "tls_key = ", "tls_ca = ", "tls_client_cert = ",
                           "tls_client_key = ", "[log]", "level = ", "[strategy]", "mode = ",
                           "collective_mode = ", "devices = ", "nrings = ", "local_sgd_k_steps = ",
                           "fuse_grad_size_mb = ", "passes = ", "sync_mode = ", "slice_var_up = ",
                           "min_block_size = ", "split_method = ", "pserver_init = ", "a_sync = ",
                           "[strategy.a_sync_configs]", "k_steps = ", "max_merge_var_num = ",
                           "send_queue_size = ", "independent_recv_thread = ",
                           "thread_pool_size = ", "send_wait_times = ",
                           "runtime_split_send_recv = ", "[train]",
                           "steps = ", "batch_size = ", "seed = ", "threads = ", "log_every = ",
                           "metrics_file = ", "profile = ", "save_params_dir = ",
                           "init_from = ", "check_replicas = ", "[eval]", "filelist = ",
                           "every_steps = ", "batch_size = ", "batches = ", "[data]", "source = ",
                           "label = ", "classes = ",
                           "filelist = ", "slots = ", "dataset = ", "shuffle = ", "last_batch = ",
                           "bad_lines = ", "queue_batches = ", "shard = ",
                           "[data.files]", "[data.csv]", "path = ", "header = ",
                           "[data.csv.columns]", "[role]", "role = ", "rank = ",
                           "world_size = ", "trainer_endpoints = ", "current_endpoint = ",
                           "pserver_endpoints = ", "master = ", "local_rank = ",
                           "mpi_symmetric = "}) {
    size_t found = example.find(line, at);
    ASSERT_NE(found, std::string::npos) << "no '" << line << "' after offset " << at;
    at = found + 1;
  }
  for (const char* mention : {"--config FILE", "--set", "FLEET_PLUGIN_PATH"}) {
    EXPECT_NE(example.find(mention), std::string::npos) << mention;
  }
}

TEST(ConfigTest, ReadsEveryKey) {
  StatusOr<Config> config = Parse(R"(
[plugins]
dirs = ["/opt/fleet/plugins"]
allow_insecure = true
load = ["profiler"]
optional = ["profiler", "cuda"]
[device]
backend = "cuda"
[comm]
backend = "nccl"
timeout_s = 60
[transport]
backend = "grpc.v2"
plugin = "grpc"
[log]
level = "debug"
[strategy]
mode = "collective"
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->plugins.dirs, std::vector<fs::path>{"/opt/fleet/plugins"});
  EXPECT_TRUE(config->plugins.allow_insecure);
  EXPECT_EQ(config->plugins.load, std::vector<std::string>{"profiler"});
  EXPECT_EQ(config->plugins.optional, (std::vector<std::string>{"profiler", "cuda"}));
  EXPECT_EQ(config->device.backend, "cuda");
  EXPECT_EQ(config->device.plugin, "cuda");  // derived from the backend
  EXPECT_EQ(config->comm.backend, "nccl");
  EXPECT_EQ(config->comm.plugin, "comm_nccl");
  EXPECT_EQ(config->comm_timeout_s, 60.0);  // an integer is a number too
  EXPECT_EQ(config->transport.backend, "grpc.v2");
  EXPECT_EQ(config->transport.plugin, "grpc");
  EXPECT_EQ(config->log_level, "debug");
  EXPECT_EQ(config->strategy_mode, "collective");
}

TEST(ConfigTest, ReadsTheCollectiveKeys) {
  StatusOr<Config> config = Parse(R"(
[comm]
hostname = "10.0.0.7"
store = "file"
store_dir = "/shared/rdzv"
[strategy]
mode = "collective"
collective_mode = "local_sgd"
nrings = 2
local_sgd_k_steps = 4
fuse_grad_size_mb = 0
passes = ["my_pass"]
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->comm_hostname, "10.0.0.7");
  EXPECT_EQ(config->comm_store, "file");
  EXPECT_EQ(config->comm_store_dir, fs::path("/shared/rdzv"));
  EXPECT_EQ(config->collective.mode, "local_sgd");
  EXPECT_EQ(config->collective.nrings, 2);
  EXPECT_EQ(config->collective.local_sgd_k_steps, 4);
  EXPECT_EQ(config->collective.fuse_grad_size_mb, 0.0);
  EXPECT_EQ(config->collective.passes, std::vector<std::string>{"my_pass"});
  EXPECT_EQ(config->collective.passes_where, "fleet.toml:12:10");
  auto set = Parse("", {"strategy.passes=[\"my_pass\"]"});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->collective.passes_where, "--set strategy.passes");
}

// [comm] check: when the ranks compare their collectives (collective/desync.h).
TEST(ConfigTest, ReadsTheCollectiveCheck) {
  for (const char* mode : {"step", "every", "off"}) {
    StatusOr<Config> config = Parse(std::string("[comm]\ncheck = \"") + mode + "\"\n");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->comm_check, mode);
  }
}

TEST(ConfigTest, ReadsTheTransportAndPserverKeys) {
  StatusOr<Config> config = Parse(R"(
[transport]
timeout_s = 12.5
retries = 0
max_message_mb = 64
token = "s3cret"
tls = true
tls_cert = "certs/server.pem"
tls_key = "/keys/server.key"
tls_ca = "certs/ca.pem"
[strategy]
mode = "pserver"
sync_mode = false
slice_var_up = false
min_block_size = 1048576
split_method = "hash_name"
pserver_init = "shard"
[role]
mpi_symmetric = true
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->rpc.timeout_s, 12.5);
  EXPECT_EQ(config->rpc.retries, 0);
  EXPECT_EQ(config->rpc.max_message_mb, 64.0);
  EXPECT_EQ(config->rpc.token, "s3cret");
  EXPECT_TRUE(config->rpc.tls);
  EXPECT_EQ(config->rpc.tls_cert, fs::path("/etc/fleet/certs/server.pem"));  // by the file
  EXPECT_EQ(config->rpc.tls_key, fs::path("/keys/server.key"));
  EXPECT_EQ(config->rpc.tls_ca, fs::path("/etc/fleet/certs/ca.pem"));
  EXPECT_TRUE(config->rpc.tls_client_cert.empty());
  EXPECT_FALSE(config->pserver.sync_mode);
  EXPECT_FALSE(config->pserver.slice_var_up);
  EXPECT_EQ(config->pserver.min_block_size, 1048576);
  EXPECT_EQ(config->pserver.split_method, "hash_name");
  EXPECT_EQ(config->pserver.init, "shard");
  EXPECT_TRUE(config->role.mpi_symmetric);
  EXPECT_EQ(config->role.where.count("mpi_symmetric"), 1u);
}

TEST(ConfigTest, RejectsBadTransportAndPserverKeys) {
  StatusOr<Config> config = Parse(R"([transport]
timeout_s = 0
retries = -1
max_message_mb = 0
tls = "yes"
[strategy]
sync_mode = 1
min_block_size = 0
split_method = "hash"
pserver_init = "lazy"
)");
  ASSERT_FALSE(config.ok());
  const std::string& m = config.status().message();
  for (const char* want :
       {"fleet.toml:2:13: transport.timeout_s: expected a number >= 0.001, got 0",
        "transport.retries: expected an integer in [0, 1000], got -1",
        "transport.max_message_mb: expected a number in [0.125, 2047], got 0",
        "transport.tls: expected a boolean, got a string",
        "strategy.sync_mode: expected a boolean, got an integer",
        "strategy.min_block_size: expected an integer >= 1, got 0",
        "strategy.split_method: expected one of round_robin or hash_name, got 'hash'",
        "strategy.pserver_init: expected one of full or shard, got 'lazy'"}) {
    EXPECT_NE(m.find(want), std::string::npos) << want << "\n" << m;
  }
}

// Fleet 2.x's a_sync: true is sync_mode = false with the communicator's settings; a
// disagreeing sync_mode, GEO-SGD and values out of range are refused by name.
TEST(ConfigTest, ASyncAndItsConfigs) {
  StatusOr<Config> config = Parse(R"([strategy]
a_sync = true
[strategy.a_sync_configs]
k_steps = 0
max_merge_var_num = 8
send_queue_size = 8
independent_recv_thread = true
thread_pool_size = 2
send_wait_times = 0
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->pserver.a_sync);
  EXPECT_FALSE(config->pserver.sync_mode);
  const Config::Pserver::AsyncConfigs& a = config->pserver.a_sync_configs;
  EXPECT_EQ(a.max_merge_var_num, 8);
  EXPECT_EQ(a.send_queue_size, 8);
  EXPECT_TRUE(a.independent_recv_thread);
  EXPECT_EQ(a.thread_pool_size, 2);
  EXPECT_EQ(a.send_wait_times, 0);
  EXPECT_EQ(config->strategy_where.count("a_sync_configs.max_merge_var_num"), 1u);
  StatusOr<Config> sync = Parse("[strategy]\na_sync = false\n");
  ASSERT_TRUE(sync.ok());
  EXPECT_TRUE(sync->pserver.sync_mode);
  EXPECT_FALSE(sync->pserver.a_sync);

  const std::string m = ErrorOf(R"([strategy]
sync_mode = true
a_sync = true
[strategy.a_sync_configs]
k_steps = 1000001
max_merge_var_num = 0
send_queue_size = 1025
flush = true
)");
  for (const char* want :
       {"fleet.toml:3:10: strategy.a_sync: a_sync = true means sync_mode = false, but "
        "sync_mode = true is set at fleet.toml:2:13; keep one",
        "strategy.a_sync_configs.k_steps: expected an integer in [-1, 1000000], got 1000001",
        "strategy.a_sync_configs.max_merge_var_num: expected an integer in [1, 1024], got 0",
        "strategy.a_sync_configs.send_queue_size: expected an integer in [1, 1024], got 1025",
        "strategy.a_sync_configs.flush: unknown key"}) {
    EXPECT_NE(m.find(want), std::string::npos) << want << "\n" << m;
  }
}

TEST(ConfigTest, TransportLimitsAreTheTransports) {
  EXPECT_NE(ErrorOf("[transport]\nretries = 101\n")
                .find("transport.retries: expected an integer in [0, 100], got 101"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[transport]\nmax_message_mb = 0.1\n")
                .find("transport.max_message_mb: expected a number in [0.125, 2047], got 0.1"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("[transport]\nmax_message_mb = 0.125\nretries = 100\n"), "<no error>");
}

TEST(ConfigTest, RejectsBadCollectiveKeys) {
  StatusOr<Config> config = Parse(R"([strategy]
collective_mode = "ring"
nrings = 0
fuse_grad_size_mb = -1
[comm]
store = "redis"
)");
  ASSERT_FALSE(config.ok());
  const std::string& m = config.status().message();
  EXPECT_NE(m.find("fleet.toml:2:19: strategy.collective_mode: expected one of grad_allreduce, "
                   "local_sgd or single_process_multi_thread, got 'ring'"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("strategy.nrings: expected an integer in [1, 64], got 0"), std::string::npos) << m;
  EXPECT_NE(m.find("strategy.fuse_grad_size_mb: expected a number >= 0, got -1"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("comm.store: expected one of tcp or file, got 'redis'"), std::string::npos)
      << m;
}

TEST(ConfigTest, EmptyPluginMeansTheDerivedName) {
  StatusOr<Config> config = Parse("[comm]\nbackend = \"mpi\"\nplugin = \"\"\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->comm.plugin, "comm_mpi");
}

// ---- error messages ---------------------------------------------------------------------------

TEST(ConfigTest, UnknownKeySuggestsTheClosestKnownKey) {
  EXPECT_EQ(ErrorOf("[device]\nbackend = \"cpu\"\nbackendd = \"cuda\"\n"),
            "fleet.toml:3:1: device.backendd: unknown key (did you mean 'device.backend'?)");
  EXPECT_EQ(ErrorOf("[comm]\n  timeout = 5\n"),
            "fleet.toml:2:3: comm.timeout: unknown key (did you mean 'comm.timeout_s'?)");
}

TEST(ConfigTest, UnknownKeyFarFromEveryKnownOneHasNoSuggestion) {
  EXPECT_EQ(ErrorOf("[log]\ncolour = true\n"), "fleet.toml:2:1: log.colour: unknown key");
}

TEST(ConfigTest, UnknownTopLevelTable) {
  EXPECT_EQ(ErrorOf("[devices]\nbackend = \"cpu\"\n"),
            "fleet.toml:1:1: devices: unknown table (did you mean 'device'?)");
  EXPECT_EQ(ErrorOf("\n[network]\nport = 1\n"), "fleet.toml:2:1: network: unknown table");
  EXPECT_EQ(ErrorOf("verbose = true\n"), "fleet.toml:1:1: verbose: unknown key");
  EXPECT_EQ(ErrorOf("[device.extra]\n"), "fleet.toml:1:1: device.extra: unknown table");
}

TEST(ConfigTest, WrongTypes) {
  EXPECT_EQ(ErrorOf("[plugins]\nallow_insecure = \"yes\"\n"),
            "fleet.toml:2:18: plugins.allow_insecure: expected a boolean, got a string");
  EXPECT_EQ(ErrorOf("[plugins]\ndirs = \"/opt\"\n"),
            "fleet.toml:2:8: plugins.dirs: expected an array of strings, got a string");
  EXPECT_EQ(ErrorOf("[plugins]\nload = [\"a\", 2]\n"),
            "fleet.toml:2:14: plugins.load[1]: expected a string, got an integer");
  EXPECT_EQ(ErrorOf("[device]\nbackend = 3\n"),
            "fleet.toml:2:11: device.backend: expected a string, got an integer");
  EXPECT_EQ(ErrorOf("[comm]\ntimeout_s = \"10\"\n"),
            "fleet.toml:2:13: comm.timeout_s: expected a number >= 0.001, got a string");
  EXPECT_EQ(ErrorOf("[log]\nlevel = 1.5\n"),
            "fleet.toml:2:9: log.level: expected one of trace, debug, info, warn or error, got a "
            "float");
  EXPECT_EQ(ErrorOf("device = \"cpu\"\n"),
            "fleet.toml:1:10: device: expected a table, got a string");
  EXPECT_EQ(ErrorOf("[plugins]\nconfig = [1]\n"),
            "fleet.toml:2:10: plugins.config: expected a table, got an array");
}

TEST(ConfigTest, BadEnumValues) {
  EXPECT_EQ(ErrorOf("[log]\nlevel = \"loud\"\n"),
            "fleet.toml:2:9: log.level: expected one of trace, debug, info, warn or error, got "
            "'loud'");
  EXPECT_EQ(ErrorOf("[comm]\ncheck = \"1\"\n"),
            "fleet.toml:2:9: comm.check: expected one of step, every or off, got '1'");
  EXPECT_EQ(ErrorOf("[strategy]\nmode = \"Collective\"\n"),
            "fleet.toml:2:8: strategy.mode: expected one of auto, none, collective or pserver, got "
            "'Collective'");
}

TEST(ConfigTest, BadNumbers) {
  EXPECT_EQ(ErrorOf("[comm]\ntimeout_s = -1\n"),
            "fleet.toml:2:13: comm.timeout_s: expected a number >= 0.001, got -1");
  EXPECT_EQ(ErrorOf("[comm]\ntimeout_s = 0.0\n"),
            "fleet.toml:2:13: comm.timeout_s: expected a number >= 0.001, got 0.0");
  EXPECT_EQ(ErrorOf("[comm]\ntimeout_s = nan\n"),
            "fleet.toml:2:13: comm.timeout_s: expected a number >= 0.001, got nan");
  EXPECT_EQ(ErrorOf("[comm]\ntimeout_s = inf\n"),
            "fleet.toml:2:13: comm.timeout_s: expected a number >= 0.001, got inf");
  EXPECT_EQ(ErrorOf("[comm]\ntimeout_s = 0.0001\n"),
            "fleet.toml:2:13: comm.timeout_s: expected a number >= 0.001, got 0.0001");
  EXPECT_EQ(ErrorOf("[strategy]\nfuse_grad_size_mb = inf\n"),
            "fleet.toml:2:21: strategy.fuse_grad_size_mb: expected a number >= 0, got inf");
}

// Values that size memory, threads or peers have caps: 2^40 once reached oneDNN as a batch
// (SIGFPE) and truncated a world size to 0.
TEST(ConfigTest, ValuesPastAnyMachineAreRefused) {
  EXPECT_EQ(ErrorOf("[train]\nbatch_size = 1099511627776\n"),
            "fleet.toml:2:14: train.batch_size: expected an integer in [1, 2147483647], got "
            "1099511627776");
  EXPECT_EQ(ErrorOf("[train]\nthreads = 100000000\n"),
            "fleet.toml:2:11: train.threads: expected an integer in [0, 4096], got 100000000");
  EXPECT_EQ(ErrorOf("[role]\nworld_size = 1099511627776\n"),
            "fleet.toml:2:14: role.world_size: expected an integer in [0, 65536], got "
            "1099511627776");
  EXPECT_EQ(ErrorOf("[data]\nqueue_batches = 1099511627776\n"),
            "fleet.toml:2:17: data.queue_batches: expected an integer in [0, 65536], got "
            "1099511627776");
  EXPECT_EQ(ErrorOf("[strategy]\nnrings = 65\n"),
            "fleet.toml:2:10: strategy.nrings: expected an integer in [1, 64], got 65");
}

// strategy.devices ranks of one process are all connected to each other: 1024 of them needed a
// million sockets and never connected, so more than 64 are refused where they are written.
TEST(ConfigTest, DevicesOfOneProcessAreCapped) {
  EXPECT_EQ(ErrorOf("[strategy]\ndevices = 1024\n"),
            "fleet.toml:2:11: strategy.devices: expected an integer in [1, 64], got 1024");
  EXPECT_EQ(ErrorOf("", {"strategy.devices=65"}),
            "--set strategy.devices: expected an integer in [1, 64], got 65");
  StatusOr<Config> most = Parse("[strategy]\ndevices = 64\n");
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  EXPECT_EQ(most->collective.devices, 64);
}

TEST(ConfigTest, BadNames) {
  EXPECT_EQ(ErrorOf("[device]\nbackend = \"\"\n"),
            "fleet.toml:2:11: device.backend: expected a component name ([A-Za-z0-9_.-]+), got "
            "''");
  EXPECT_EQ(ErrorOf("[comm]\nplugin = \"comm-x\"\n"),
            "fleet.toml:2:10: comm.plugin: expected a plugin name ([A-Za-z0-9_]+), got 'comm-x'");
  EXPECT_EQ(ErrorOf("[plugins]\noptional = [\"ok\", \"lib/x\"]\n"),
            "fleet.toml:2:19: plugins.optional[1]: expected a plugin name ([A-Za-z0-9_]+), got "
            "'lib/x'");
  // A valid component name that cannot be a plugin name needs its plugin named.
  EXPECT_EQ(ErrorOf("[comm]\nbackend = \"nccl-2\"\n"),
            "fleet.toml:2:11: comm.backend: the default plugin name 'comm_nccl-2' is not a plugin "
            "name ([A-Za-z0-9_]+); set comm.plugin");
  EXPECT_EQ(ErrorOf("[comm]\nbackend = \"nccl-2\"\nplugin = \"nccl2\"\n"), "<no error>");
}

TEST(ConfigTest, SyntaxErrorHasItsPosition) {
  StatusOr<Config> config = Parse("[device]\nbackend = = \"cpu\"\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(config.status().message(),
            "fleet.toml:2:11: syntax error: Error while parsing value: could not determine value "
            "type");
  EXPECT_EQ(ErrorOf("[log]\n[log]\n"),
            "fleet.toml:2:1: syntax error: Error while parsing table header: cannot redefine "
            "existing table 'log'");
}

TEST(ConfigTest, ReportsEveryErrorInFileOrder) {
  // Tables are stored sorted by name; the report must still follow the file.
  EXPECT_EQ(
      ErrorOf(R"([strategy]
mode = "all"
[comm]
timeout_s = -5
backend = 7
[device]
backendd = "cpu"
[wat]
)"),
      "fleet.toml:2:8: strategy.mode: expected one of auto, none, collective or pserver, got 'all'\n"
      "fleet.toml:4:13: comm.timeout_s: expected a number >= 0.001, got -5\n"
      "fleet.toml:5:11: comm.backend: expected a string, got an integer\n"
      "fleet.toml:7:1: device.backendd: unknown key (did you mean 'device.backend'?)\n"
      "fleet.toml:8:1: wat: unknown table");
}

// ---- plugin dirs ------------------------------------------------------------------------------

TEST(ConfigTest, RelativePluginDirsResolveAgainstTheBaseDir) {
  StatusOr<Config> config =
      Parse("[plugins]\ndirs = [\"plugins\", \"../lib/fleet/\", \"/abs/dir\", \"./a/../b\"]\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->plugins.dirs, (std::vector<fs::path>{"/etc/fleet/plugins", "/etc/lib/fleet",
                                                         "/abs/dir", "/etc/fleet/b"}));
  EXPECT_EQ(ErrorOf("[plugins]\ndirs = [\"\"]\n"),
            "fleet.toml:2:9: plugins.dirs[0]: expected a directory path, got ''");
}

TEST(ConfigTest, RelativePluginDirsInAFileResolveAgainstItsDirectory) {
  StatusOr<Config> config = LoadConfig(kDataDir / "relative_dirs.toml", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->plugins.dirs,
            (std::vector<fs::path>{kDataDir / "plugins", kDataDir.parent_path() / "shared",
                                   "/opt/fleet/plugins"}));
  ASSERT_EQ(config->plugins.config["cpu"].size(), 1u);
  EXPECT_EQ(config->plugins.config["cpu"][0].where,
            (kDataDir / "relative_dirs.toml").string() + ":6:11");
}

TEST(ConfigTest, ErrorsInALoadedFileNameThePathAsGiven) {
  fs::path path = kDataDir / "two_errors.toml";
  StatusOr<Config> config = LoadConfig(path, {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(config.status().message(),
            path.string() +
                ":2:1: device.backendd: unknown key (did you mean 'device.backend'?)\n" +
                path.string() +
                ":5:9: log.level: expected one of trace, debug, info, warn or error, got 'loud'");
}

TEST(ConfigTest, MissingFileIsNotFound) {
  StatusOr<Config> config = LoadConfig(kDataDir / "no_such_file.toml", {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Code::kNotFound);
  EXPECT_EQ(config.status().message(), "cannot read config '" +
                                           (kDataDir / "no_such_file.toml").string() +
                                           "': No such file or directory");
}

TEST(ConfigTest, DirectoryIsNotReadable) {
  StatusOr<Config> config = LoadConfig(kDataDir, {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Code::kNotFound);
  EXPECT_EQ(config.status().message(),
            "cannot read config '" + kDataDir.string() + "': Is a directory");
}

TEST(ConfigTest, DefaultConfigPathIsTheCurrentDirectorysFleetToml) {
  fs::path old_cwd = fs::current_path();
  fs::path dir = fs::temp_directory_path() / ("fleet_config_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::current_path(dir);
  EXPECT_EQ(DefaultConfigPath(), fs::path());
  std::ofstream("fleet.toml") << "[plugins]\ndirs = [\"here\"]\n";
  EXPECT_EQ(DefaultConfigPath(), fs::path("fleet.toml"));
  StatusOr<Config> config = LoadConfig(DefaultConfigPath(), {});
  fs::path cwd = fs::current_path();
  fs::current_path(old_cwd);
  fs::remove_all(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, "fleet.toml");
  EXPECT_EQ(config->plugins.dirs, std::vector<fs::path>{cwd / "here"});
}

// ---- --set overrides --------------------------------------------------------------------------

TEST(ConfigOverrideTest, TomlValuesAndBareStrings) {
  StatusOr<Config> config =
      Parse("[comm]\nbackend = \"gloo\"\n",
            {"comm.timeout_s=60.5", "comm.backend=nccl", "log.level = \"debug\"",
             "plugins.allow_insecure=true", "plugins.load=[\"a\", \"b\"]", "device.backend=2"});
  // "2" is a TOML integer, not a bare string, so the last one is an error.
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "--set device.backend: expected a string, got an integer");

  config = Parse("[comm]\nbackend = \"gloo\"\n",
                 {"comm.timeout_s=60.5", "comm.backend=nccl", "log.level = \"debug\"",
                  "plugins.allow_insecure=true", "plugins.load=[\"a\", \"b\"]",
                  "device.backend='2'", "strategy.mode=pserver"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->comm_timeout_s, 60.5);
  EXPECT_EQ(config->comm.backend, "nccl");
  EXPECT_EQ(config->comm.plugin, "comm_nccl");
  EXPECT_EQ(config->log_level, "debug");
  EXPECT_TRUE(config->plugins.allow_insecure);
  EXPECT_EQ(config->plugins.load, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(config->device.backend, "2");
  EXPECT_EQ(config->strategy_mode, "pserver");
}

TEST(ConfigOverrideTest, BareStringsKeepTheirText) {
  StatusOr<Config> config =
      Parse("", {"plugins.config.x.path=/opt/a \"b\"\\c", "plugins.config.x.empty="});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const std::vector<ConfigValue>& values = config->plugins.config["x"];
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].key, "empty");
  EXPECT_EQ(std::get<std::string>(values[0].value), "");
  EXPECT_EQ(values[1].key, "path");
  EXPECT_EQ(std::get<std::string>(values[1].value), "/opt/a \"b\"\\c");
}

TEST(ConfigOverrideTest, ReplacesTheFileValue) {
  // The file's bad value is gone, so it is not reported.
  StatusOr<Config> config =
      Parse("[log]\nlevel = \"loud\"\n", {"log.level=warn", "log.level=error"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->log_level, "error");  // the last one wins
}

TEST(ConfigOverrideTest, CreatesPluginConfig) {
  StatusOr<Config> config =
      Parse("[plugins.config.cpu]\npin = true\n",
            {"plugins.config.cpu.threads=4", "plugins.config.nccl.ring=[0,1]"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const std::vector<ConfigValue>& cpu = config->plugins.config["cpu"];
  ASSERT_EQ(cpu.size(), 2u);
  EXPECT_EQ(cpu[0].key, "pin");
  EXPECT_EQ(cpu[0].where, "fleet.toml:2:7");
  EXPECT_EQ(cpu[1].key, "threads");
  EXPECT_EQ(std::get<int64_t>(cpu[1].value), 4);
  EXPECT_EQ(cpu[1].where, "--set plugins.config.cpu.threads");
  const std::vector<ConfigValue>& nccl = config->plugins.config["nccl"];
  ASSERT_EQ(nccl.size(), 1u);
  EXPECT_EQ(std::get<std::vector<int64_t>>(nccl[0].value), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(nccl[0].where, "--set plugins.config.nccl.ring");
}

TEST(ConfigOverrideTest, UnknownKeysAndBadValues) {
  EXPECT_EQ(ErrorOf("", {"device.backendd=cpu"}),
            "--set device.backendd: unknown key (did you mean 'device.backend'?)");
  EXPECT_EQ(ErrorOf("", {"devcie.backend=cpu"}),
            "--set devcie: unknown table (did you mean 'device'?)");
  EXPECT_EQ(ErrorOf("", {"log.level=loud"}),
            "--set log.level: expected one of trace, debug, info, warn or error, got 'loud'");
  EXPECT_EQ(ErrorOf("", {"plugins.load=[\"ok\", 3]"}),
            "--set plugins.load[1]: expected a string, got an integer");
}

TEST(ConfigOverrideTest, Malformed) {
  EXPECT_EQ(ErrorOf("", {"device.backend"}), "--set device.backend: expected KEY=VALUE");
  EXPECT_EQ(ErrorOf("", {"=cpu"}), "--set =cpu: expected KEY=VALUE");
  EXPECT_EQ(ErrorOf("", {" =cpu"}), "--set  =cpu: expected KEY=VALUE");
  EXPECT_EQ(ErrorOf("", {"device..backend=cpu"}), "--set device..backend=cpu: expected KEY=VALUE");
}

TEST(ConfigOverrideTest, TablesAndScalarsDoNotMix) {
  // Without a [device] table in the file there is nothing to replace, only a wrong type.
  EXPECT_EQ(ErrorOf("", {"device=cpu"}), "--set device: expected a table, got a string");
  EXPECT_EQ(ErrorOf("[device]\n", {"device=cpu"}),
            "--set device: cannot replace a table with a string");
  EXPECT_EQ(ErrorOf("[log]\nlevel = \"info\"\n", {"log.level.x=1"}),
            "--set log.level.x: 'log.level' is a string, not a table");
  // Replacing a table with a table is fine.
  StatusOr<Config> config = Parse("[device]\nbackendd = 1\n", {"device={backend=\"cuda\"}"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->device.backend, "cuda");
}

TEST(ConfigOverrideTest, ErrorsFollowTheFileErrorsInOverrideOrder) {
  EXPECT_EQ(
      ErrorOf("[log]\nlevel = \"x\"\n[device]\nbackend = 1\n",
              {"strategy.mode=all", "bad", "comm.timeout_s=0"}),
      "fleet.toml:2:9: log.level: expected one of trace, debug, info, warn or error, got 'x'\n"
      "fleet.toml:4:11: device.backend: expected a string, got an integer\n"
      "--set strategy.mode: expected one of auto, none, collective or pserver, got 'all'\n"
      "--set bad: expected KEY=VALUE\n"
      "--set comm.timeout_s: expected a number >= 0.001, got 0");
}

TEST(ConfigOverrideTest, PluginDirsResolveAgainstTheCurrentDirectory) {
  StatusOr<Config> config =
      Parse("[plugins]\ndirs = [\"from_file\"]\n", {"plugins.dirs=[\"from_file\", \"/abs\"]"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->plugins.dirs,
            (std::vector<fs::path>{fs::current_path() / "from_file", "/abs"}));
  config = LoadConfig("", {"plugins.dirs=[\"p\"]"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->plugins.dirs, std::vector<fs::path>{fs::current_path() / "p"});
}

// ---- [plugins.config.NAME] values -------------------------------------------------------------

TEST(ConfigPluginValuesTest, ScalarsAndArrays) {
  StatusOr<Config> config = Parse(R"([plugins.config.cpu]
a_int = -3
b_float = 0.25
c_bool = false
d_string = "x"
e_ints = [1, 2]
f_floats = [1.5, 2]
g_bools = [true, false]
h_strings = ["p", "q"]
i_empty = []
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const std::vector<ConfigValue>& v = config->plugins.config["cpu"];
  ASSERT_EQ(v.size(), 9u);
  EXPECT_EQ(std::get<int64_t>(v[0].value), -3);
  EXPECT_EQ(std::get<double>(v[1].value), 0.25);
  EXPECT_EQ(std::get<bool>(v[2].value), false);
  EXPECT_EQ(std::get<std::string>(v[3].value), "x");
  EXPECT_EQ(std::get<std::vector<int64_t>>(v[4].value), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(std::get<std::vector<double>>(v[5].value), (std::vector<double>{1.5, 2.0}));
  EXPECT_EQ(std::get<std::vector<bool>>(v[6].value), (std::vector<bool>{true, false}));
  EXPECT_EQ(std::get<std::vector<std::string>>(v[7].value), (std::vector<std::string>{"p", "q"}));
  EXPECT_TRUE(std::get<std::vector<std::string>>(v[8].value).empty());
  std::vector<std::string> keys, wheres;
  for (const ConfigValue& value : v) {
    keys.push_back(value.key);
    wheres.push_back(value.where);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a_int", "b_float", "c_bool", "d_string", "e_ints",
                                            "f_floats", "g_bools", "h_strings", "i_empty"}));
  EXPECT_EQ(wheres,
            (std::vector<std::string>{"fleet.toml:2:9", "fleet.toml:3:11", "fleet.toml:4:10",
                                      "fleet.toml:5:12", "fleet.toml:6:10", "fleet.toml:7:12",
                                      "fleet.toml:8:11", "fleet.toml:9:13", "fleet.toml:10:11"}));
}

TEST(ConfigPluginValuesTest, IntegersAmongFloatsBecomeDoubles) {
  StatusOr<Config> config = Parse("[plugins.config.x]\nv = [0.5, 9007199254740993, -2]\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->plugins.config["x"].size(), 1u);
  EXPECT_EQ(std::get<std::vector<double>>(config->plugins.config["x"][0].value),
            (std::vector<double>{0.5, 9007199254740992.0, -2.0}));
}

TEST(ConfigPluginValuesTest, InlineTablesAndDottedKeysWork) {
  StatusOr<Config> config =
      Parse("[plugins]\nconfig.gloo.iface = \"eth0\"\nconfig.mpi = { np = 4 }\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->plugins.config["gloo"].size(), 1u);
  EXPECT_EQ(config->plugins.config["gloo"][0].where, "fleet.toml:2:21");
  ASSERT_EQ(config->plugins.config["mpi"].size(), 1u);
  EXPECT_EQ(config->plugins.config["mpi"][0].where, "fleet.toml:3:21");
}

TEST(ConfigPluginValuesTest, BadValues) {
  EXPECT_EQ(
      ErrorOf(R"([plugins.config.cpu]
mixed = [1, "a", 2.0, true]
nested = { a = 1 }
tables = [{ a = 1 }, { a = 2 }]
arrays = [[1], 2]
when = 1979-05-27
[plugins.config.cpu.sub]
[plugins.config.bad-name]
x = 1
[plugins.config]
plain = 3
)"),
      "fleet.toml:2:9: plugins.config.cpu.mixed: expected an array of one type, got integers, "
      "strings, floats and booleans\n"
      "fleet.toml:3:10: plugins.config.cpu.nested: expected an integer, float, boolean, "
      "string or array, got a table\n"
      "fleet.toml:4:10: plugins.config.cpu.tables: expected an array of integers, floats, "
      "booleans or strings, got an array of tables\n"
      "fleet.toml:5:10: plugins.config.cpu.arrays: expected an array of integers, floats, "
      "booleans or strings, got an array of arrays and integers\n"
      "fleet.toml:6:8: plugins.config.cpu.when: expected an integer, float, boolean, string "
      "or array, got a date\n"
      "fleet.toml:7:1: plugins.config.cpu.sub: expected an integer, float, boolean, string "
      "or array, got a table\n"
      "fleet.toml:8:17: plugins.config.bad-name: expected a plugin name ([A-Za-z0-9_]+), got "
      "'bad-name'\n"
      "fleet.toml:11:9: plugins.config.plain: expected a table, got an integer");
}

}  // namespace
}  // namespace fleet

namespace fleet {
namespace {

// ---- [train] and [data] -----------------------------------------------------------------------

TEST(ConfigTrainDataTest, ReadsEveryKey) {
  StatusOr<Config> config = ParseConfig(R"(
[train]
steps = 7
batch_size = 3
seed = 42
threads = 2
log_every = 1
metrics_file = "m.jsonl"

[data]
source = "csv"
label = "y"
classes = 5

[data.files]
x = "x.npy"
y = "/abs/y.npy"

[data.csv]
path = "train.csv"
header = true

[data.csv.columns]
x = "0:3"
y = 3
z = [5, 4]
)",
                                        "fleet.toml", "/etc/fleet", {"train.steps=9"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->train.steps, 9);
  EXPECT_EQ(config->train.batch_size, 3);
  EXPECT_EQ(config->train.seed, 42);
  EXPECT_EQ(config->train.threads, 2);
  EXPECT_EQ(config->train.log_every, 1);
  EXPECT_EQ(config->train.metrics_file, "m.jsonl");
  EXPECT_EQ(config->data.source, "csv");
  EXPECT_EQ(config->data.where, "fleet.toml:11:10");
  EXPECT_EQ(config->data.label, "y");
  EXPECT_EQ(config->data.classes, 5);
  EXPECT_EQ(config->data.files.at("x"), std::filesystem::path("/etc/fleet/x.npy"));
  EXPECT_EQ(config->data.files.at("y"), std::filesystem::path("/abs/y.npy"));
  EXPECT_EQ(config->data.csv_path, std::filesystem::path("/etc/fleet/train.csv"));
  EXPECT_TRUE(config->data.csv_header);
  EXPECT_EQ(config->data.csv_columns.at("x"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(config->data.csv_columns.at("y"), (std::vector<int64_t>{3}));
  EXPECT_EQ(config->data.csv_columns.at("z"), (std::vector<int64_t>{5, 4}));
}

TEST(ConfigTrainDataTest, InitFromIsAPathLikeSaveParamsDir) {
  // In a file: relative to the file's directory; with --set: relative to the current one.
  StatusOr<Config> config = ParseConfig("[train]\ninit_from = \"weights\"\n", "fleet.toml",
                                        "/etc/fleet", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->train.init_from, fs::path("/etc/fleet/weights"));
  config = ParseConfig("[train]\ninit_from = \"/abs/w\"\n", "fleet.toml", "/etc/fleet", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->train.init_from, fs::path("/abs/w"));
  config = ParseConfig("", "fleet.toml", "/etc/fleet", {"train.init_from=w2"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->train.init_from, fs::current_path() / "w2");
  config = ParseConfig("[train]\ninit_from = \"\"\n", "fleet.toml", "/etc/fleet", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->train.init_from.empty());
  config = ParseConfig("[train]\ninit_from = 3\n", "fleet.toml", "/etc/fleet", {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("fleet.toml:2:13: train.init_from: "),
            std::string::npos)
      << config.status().message();
}

TEST(ConfigTrainDataTest, CheckpointKeysAndTheirErrors) {
  StatusOr<Config> config = ParseConfig(
      "[checkpoint]\ndir = \"ckpt\"\nevery_steps = 25\nkeep = 0\nresume = true\n",
      "fleet.toml", "/etc/fleet", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->checkpoint.dir, fs::path("/etc/fleet/ckpt"));
  EXPECT_EQ(config->checkpoint.every_steps, 25);
  EXPECT_EQ(config->checkpoint.keep, 0);
  EXPECT_TRUE(config->checkpoint.resume);
  config = ParseConfig(
      "[checkpoint]\nevery_steps = 0\nkeep = -1\nresume = true\nevery_step = 2\n",
      "fleet.toml", "/etc/fleet", {});
  ASSERT_FALSE(config.ok());
  const std::string m = config.status().message();
  EXPECT_NE(m.find("fleet.toml:2:15: checkpoint.every_steps: expected an integer >= 1, got 0"),
            std::string::npos) << m;
  EXPECT_NE(m.find("fleet.toml:3:8: checkpoint.keep: expected an integer >= 0, got -1"),
            std::string::npos) << m;
  EXPECT_NE(m.find("fleet.toml:4:10: checkpoint.resume: needs checkpoint.dir"),
            std::string::npos) << m;
  EXPECT_NE(m.find("fleet.toml:5:1: checkpoint.every_step: unknown key (did you mean "
                   "'checkpoint.every_steps'?)"),
            std::string::npos) << m;
}

TEST(ConfigTest, EvalKeys) {
  auto config = ParseConfig(
      "[eval]\nfilelist = [\"test/*.txt\"]\nevery_steps = 50\nbatch_size = 128\nbatches = 4\n",
      "fleet.toml", "/etc/fleet", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->eval.filelist, std::vector<std::string>{"/etc/fleet/test/*.txt"});
  EXPECT_EQ(config->eval.every_steps, 50);
  EXPECT_EQ(config->eval.batch_size, 128);
  EXPECT_EQ(config->eval.batches, 4);
  EXPECT_EQ(config->eval.where, "fleet.toml:2:12");
  config = ParseConfig("[eval]\nevery_steps = -1\nbatches = 2\nevry_steps = 1\n", "fleet.toml",
                       "/etc/fleet", {});
  ASSERT_FALSE(config.ok());
  const std::string m = config.status().message();
  EXPECT_NE(m.find("fleet.toml:2:15: eval.every_steps: expected an integer >= 0, got -1"),
            std::string::npos) << m;
  EXPECT_NE(m.find("fleet.toml:3:11: eval.batches: needs eval.filelist"), std::string::npos) << m;
  EXPECT_NE(m.find("fleet.toml:4:1: eval.evry_steps: unknown key (did you mean "
                   "'eval.every_steps'?)"),
            std::string::npos) << m;
}

TEST(ConfigTrainDataTest, BadValuesHavePositions) {
  StatusOr<Config> config = ParseConfig(R"([train]
steps = 0
batch_size = "big"
stepz = 1
[data]
source = "hdf5"
classes = -1
[data.csv.columns]
x = "3:1"
y = [1, "a"]
)",
                                        "fleet.toml", "/etc/fleet", {"train.seed=-2"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "fleet.toml:2:9: train.steps: expected an integer >= 1, got 0\n"
            "fleet.toml:3:14: train.batch_size: expected an integer in [1, 2147483647], got a string\n"
            "fleet.toml:4:1: train.stepz: unknown key (did you mean 'train.steps'?)\n"
            "fleet.toml:6:10: data.source: expected one of synthetic, csv, multislot or npy, got "
            "'hdf5'\n"
            "fleet.toml:7:11: data.classes: expected an integer in [0, 2147483647], got -1\n"
            "fleet.toml:9:5: data.csv.columns.x: expected a column index in [0, 1048576), an "
            "array of them or a \"start:end\" range, got '3:1'\n"
            "fleet.toml:10:5: data.csv.columns.y: expected a column index in [0, 1048576), an "
            "array of them or a \"start:end\" range, got an array that is not one\n"
            "--set train.seed: expected an integer >= 0, got -2");
}

// A column index or range sizes the CSV parser's column table: a huge one is refused at its
// place in the file, not allocated.
TEST(ConfigTrainDataTest, HugeCsvColumnsAreRefused) {
  for (const char* value : {"4611686018427387904", "[0, 1048576]", "\"0:4000000000\""}) {
    StatusOr<Config> config =
        ParseConfig(std::string("[data.csv.columns]\ny = ") + value + "\n", "fleet.toml", "/", {});
    ASSERT_FALSE(config.ok()) << value;
    EXPECT_NE(config.status().message().find(
                  "fleet.toml:2:5: data.csv.columns.y: expected a column index in [0, 1048576)"),
              std::string::npos)
        << config.status().ToString();
  }
}

TEST(ConfigTrainDataTest, FileSourcesNeedTheirFiles) {
  StatusOr<Config> csv = ParseConfig("[data]\nsource = \"csv\"\n", "fleet.toml", "/", {});
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().message(),
            "fleet.toml:2:10: data.source: 'csv' needs data.csv.path or data.filelist");
  StatusOr<Config> npy = ParseConfig("", "fleet.toml", "/", {"data.source=npy"});
  ASSERT_FALSE(npy.ok());
  EXPECT_EQ(npy.status().message(),
            "--set data.source: 'npy' needs a file per feed in [data.files]");
}

TEST(ConfigTrainDataTest, ReadsTheDatasetKeys) {
  StatusOr<Config> config = ParseConfig(R"([data]
source = "multislot"
filelist = ["part-*", "/abs/extra.txt"]
slots = ["x", "click", "y"]
dataset = "queue"
last_batch = "pad"
bad_lines = "skip"
queue_batches = 0
shard = false
)",
                                        "fleet.toml", "/etc/fleet", {"data.filelist=[\"more\"]"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  // An override replaces the list; relative entries resolve against the current directory.
  EXPECT_EQ(config->data.filelist, std::vector<std::string>{(fs::current_path() / "more").string()});
  EXPECT_EQ(config->data.slots, (std::vector<std::string>{"x", "click", "y"}));
  EXPECT_EQ(config->data.dataset, "queue");
  EXPECT_FALSE(config->data.shuffle);
  EXPECT_EQ(config->data.last_batch, "pad");
  EXPECT_EQ(config->data.bad_lines, "skip");
  EXPECT_EQ(config->data.queue_batches, 0);
  EXPECT_EQ(config->data.shard, "false");

  config = ParseConfig("[data]\nsource = \"csv\"\nfilelist = [\"d/*.csv\"]\nshuffle = true\n"
                       "shard = true\n",
                       "fleet.toml", "/etc/fleet", {});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->data.filelist, std::vector<std::string>{"/etc/fleet/d/*.csv"});
  EXPECT_TRUE(config->data.shuffle);
  EXPECT_EQ(config->data.shard, "true");
  config = ParseConfig("", "fleet.toml", "/", {"data.shard=auto"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->data.shard, "auto");
}

TEST(ConfigTrainDataTest, BadDatasetValuesHavePositions) {
  StatusOr<Config> config = ParseConfig(R"([data]
source = "multislot"
filelist = "a.txt"
slots = ["x", "x", ""]
dataset = "disk"
shuffle = 1
last_batch = "keep"
bad_lines = "warn"
queue_batches = -1
shard = "yes"
filelists = []
)",
                                        "fleet.toml", "/etc/fleet", {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "fleet.toml:2:10: data.source: 'multislot' needs data.filelist\n"
            "fleet.toml:3:12: data.filelist: expected an array of strings, got a string\n"
            "fleet.toml:4:15: data.slots[1]: slot 'x' is named twice\n"
            "fleet.toml:4:20: data.slots[2]: expected a slot name, got ''\n"
            "fleet.toml:5:11: data.dataset: expected one of memory or queue, got 'disk'\n"
            "fleet.toml:6:11: data.shuffle: expected a boolean, got an integer\n"
            "fleet.toml:7:14: data.last_batch: expected one of wrap, drop or pad, got 'keep'\n"
            "fleet.toml:8:13: data.bad_lines: expected one of error or skip, got 'warn'\n"
            "fleet.toml:9:17: data.queue_batches: expected an integer in [0, 65536], got -1\n"
            "fleet.toml:10:9: data.shard: expected true, false or 'auto', got 'yes'\n"
            "fleet.toml:11:1: data.filelists: unknown key (did you mean 'data.filelist'?)");

  config = ParseConfig("[data]\nsource = \"multislot\"\nfilelist = [\"a\"]\n", "fleet.toml",
                       "/", {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "fleet.toml:2:10: data.source: 'multislot' needs data.slots (the files' slots in "
            "order)");
  config = ParseConfig("[data]\ndataset = \"queue\"\nshuffle = true\n", "fleet.toml", "/", {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "fleet.toml:3:11: data.shuffle: needs data.dataset = 'memory' (a queue dataset "
            "streams its files in order)");
}

// A key of `parts` bare parts, "k.k.k...".
std::string LongKey(size_t parts) {
  std::string key = "k";
  for (size_t i = 1; i < parts; ++i) key += ".k";
  return key;
}

// Deep nesting is refused by position before TOML++ builds (recursively) one table per level:
// 200000 parts used to overflow the stack.
TEST(ConfigTest, RefusesDeepDottedKeysAndHeaders) {
  std::string key = ErrorOf("[plugins.config.cpu]\n" + LongKey(200000) + " = 1\n");
  EXPECT_NE(key.find("fleet.toml:2:1: key nested"), std::string::npos) << key.substr(0, 300);
  EXPECT_NE(key.find("at most 64"), std::string::npos) << key.substr(0, 300);

  std::string known = ErrorOf("[plugins.config.cpu." + LongKey(200000) + "]\nx = 1\n");
  EXPECT_NE(known.find("fleet.toml:1:2: table header nested"), std::string::npos)
      << known.substr(0, 300);
  std::string unknown = ErrorOf("\n[" + LongKey(200000) + "]\n");
  EXPECT_NE(unknown.find("fleet.toml:2:2: table header nested"), std::string::npos)
      << unknown.substr(0, 300);
  std::string array_of_tables = ErrorOf("[[" + LongKey(200000) + "]]\n");
  EXPECT_NE(array_of_tables.find("fleet.toml:1:3: table header nested"), std::string::npos)
      << array_of_tables.substr(0, 300);

  std::string arrays = ErrorOf("[plugins.config.cpu]\nx = " + std::string(200000, '[') + "\n");
  EXPECT_NE(arrays.find("fleet.toml:2:"), std::string::npos) << arrays.substr(0, 300);
  EXPECT_NE(arrays.find("array nested"), std::string::npos) << arrays.substr(0, 300);
  std::string inline_key = ErrorOf("[plugins.config.cpu]\nx = { " + LongKey(100) + " = 1 }\n");
  EXPECT_NE(inline_key.find("fleet.toml:2:7: key nested"), std::string::npos) << inline_key;

  // Within the limit, nesting is the schema's business as before.
  EXPECT_EQ(ErrorOf("[plugins.config.cpu]\n" + LongKey(20) + " = 1\n").find("nested"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("[plugins.config.cpu]\nx = \"" + std::string(1000, '[') + "\"\n")
                .find("nested"),
            std::string::npos);
}

TEST(ConfigTest, RefusesAnOverrideWithTooManyKeyParts) {
  std::string error = ErrorOf("", {"plugins.config.cpu." + LongKey(60000) + "=1"});
  EXPECT_NE(error.find("--set: key 'plugins.config...' has 60003 parts; at most 64"),
            std::string::npos)
      << error.substr(0, 300);
}

// The config must be a regular file: a FIFO used to block forever, /dev/zero to be read until
// memory ran out.
TEST(ConfigTest, RefusesConfigsThatAreNotRegularFiles) {
  fs::path dir = fs::temp_directory_path() / ("fleet_config_fifo_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path fifo = dir / "fleet.toml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  StatusOr<Config> from_fifo = LoadConfig(fifo, {});
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_NE(from_fifo.status().message().find("'" + fifo.string() + "': it is a FIFO"),
            std::string::npos)
      << from_fifo.status().message();
  fs::remove_all(dir);

  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    StatusOr<Config> config = LoadConfig(device, {});
    ASSERT_FALSE(config.ok()) << device;
    EXPECT_NE(config.status().message().find("it is a character device"), std::string::npos)
        << config.status().message();
  }
  StatusOr<Config> from_null = LoadConfig("/dev/null", {});  // an empty config, as before
  ASSERT_TRUE(from_null.ok()) << from_null.status().message();
  ExpectDefaults(*from_null);
  StatusOr<Config> from_dir = LoadConfig(fs::temp_directory_path(), {});
  ASSERT_FALSE(from_dir.ok());
  EXPECT_NE(from_dir.status().message().find("Is a directory"), std::string::npos);
}

TEST(ConfigTest, RefusesAConfigOverSixteenMebibytes) {
  fs::path file = fs::temp_directory_path() / ("fleet_config_big_" + std::to_string(getpid()));
  {
    std::ofstream out(file);
    out << "# " << std::string((16u << 20), 'x') << "\n";
  }
  StatusOr<Config> config = LoadConfig(file, {});
  fs::remove(file);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("it is 16777219 bytes; a config may be at most "
                                           "16777216 bytes"),
            std::string::npos)
      << config.status().message();
}

}  // namespace
}  // namespace fleet
