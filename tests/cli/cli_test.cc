#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs fleet-host with `args` (already shell-quoted where needed) in `cwd`, with `env` prefixed
// (e.g. "FLEET_PLUGIN_PATH=/x"). stdout and stderr are captured separately.
Result RunHost(const std::string& args, const std::string& env = "", const fs::path& cwd = {}) {
  fs::path dir = fs::temp_directory_path() / ("fleet_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path out = dir / "out", err = dir / "err";
  std::string cmd;
  if (!cwd.empty()) cmd += "cd '" + cwd.string() + "' && ";
  cmd += "env -u FLEET_PLUGIN_PATH " + env + " timeout 60 " FLEET_HOST_EXE " " + args + " >'" +
         out.string() + "' 2>'" + err.string() + "'";
  int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  fs::remove_all(dir);
  return r;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/fleet_cli_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  fs::path Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return path_ / name;
  }

 private:
  fs::path path_;
};

TEST(CliTest, HelpAndVersion) {
  Result help = RunHost("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(Contains(help.out, "Usage: fleet-host")) << help.out;
  EXPECT_TRUE(Contains(help.out, "plugins [--json]")) << help.out;

  Result version = RunHost("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(Contains(version.out, "(plugin ABI 1.0)")) << version.out;
}

TEST(CliTest, UsageErrorsExitWithTwo) {
  Result none = RunHost("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(Contains(none.err, "Usage:"));

  Result typo = RunHost("plugns");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_TRUE(Contains(typo.err, "unknown command 'plugns' (did you mean 'plugins'?)"))
      << typo.err;

  Result option = RunHost("--frobnicate check");
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_TRUE(Contains(option.err, "unknown option '--frobnicate'")) << option.err;

  Result level = RunHost("--log-level loud check");
  EXPECT_EQ(level.exit_code, 2);
  EXPECT_TRUE(Contains(level.err, "unknown log level 'loud'")) << level.err;
}

TEST(CliTest, PluginsListsTheCpuDevice) {
  Result r = RunHost("plugins --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& p : doc["plugins"]) {
    if (p["name"] != "cpu") continue;
    found = true;
    EXPECT_EQ(p["abi"], "1.0");
    EXPECT_EQ(fs::path(p["file"].get<std::string>()).parent_path(),
              fs::path(FLEET_BUILD_PLUGIN_DIR));
    // The device, then the kernels component that carries every CPU kernel.
    ASSERT_EQ(p["components"].size(), 2u);
    EXPECT_EQ(p["components"][0]["kind"], "device");
    EXPECT_EQ(p["components"][0]["name"], "cpu");
    EXPECT_EQ(p["components"][1]["kind"], "kernels");
    EXPECT_EQ(p["components"][1]["name"], "cpu");
  }
  EXPECT_TRUE(found) << r.out;
  EXPECT_TRUE(doc["rejected"].empty()) << r.out;
}

TEST(CliTest, PluginDetailAsksTheDevice) {
  Result r = RunHost("plugins cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "device        cpu")) << r.out;
  EXPECT_TRUE(Contains(r.out, "#0 ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "caps host-memory,sync-streams")) << r.out;
}

TEST(CliTest, UnknownPluginSuggestsTheClosestName) {
  Result r = RunHost("plugins cpux");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "plugin 'cpux' not found: no libfleet_cpux.so in")) << r.err;
  EXPECT_TRUE(Contains(r.err, "(did you mean 'cpu'?)")) << r.err;
}

TEST(CliTest, CheckPassesOnDefaults) {
  TempDir cwd;  // no fleet.toml here: built-in defaults
  Result r = RunHost("check", "", cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "config:    <defaults>")) << r.out;
  EXPECT_TRUE(Contains(r.out, "device:    cpu from plugin 'cpu' (1 present")) << r.out;
  EXPECT_TRUE(Contains(r.out, "plugins:   cpu 0.1.0\n")) << r.out;  // nothing else initialised
  EXPECT_TRUE(Contains(r.out, "check passed")) << r.out;
}

TEST(CliTest, CheckReadsFleetTomlFromTheWorkingDirectory) {
  TempDir cwd;
  cwd.Write("fleet.toml", "[log]\nlevel = \"warn\"\n[device]\nbackend = \"cpu\"\n");
  Result r = RunHost("check", "", cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "config:    fleet.toml")) << r.out;
}

TEST(CliTest, CheckReportsConfigErrorsWithPositions) {
  TempDir dir;
  fs::path file = dir.Write("bad.toml", "[device]\nbackend = \"cpu\"\nbakend = \"x\"\n");
  Result r = RunHost("--config '" + file.string() + "' check");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, file.string() + ":3:")) << r.err;
  EXPECT_TRUE(Contains(r.err, "device.bakend: unknown key (did you mean 'device.backend'?)"))
      << r.err;
}

TEST(CliTest, CheckNamesAComponentThePluginDoesNotProvide) {
  Result r = RunHost(
      "--set strategy.mode=collective --set comm.backend=mpi --set comm.plugin=comm_gloo check");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "comm.backend = \"mpi\": plugin 'comm_gloo'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "provides no communicator named 'mpi'")) << r.err;
}

TEST(CliTest, CheckNamesAMissingPlugin) {
  Result r = RunHost("--set device.backend=tpu check");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "device.backend = \"tpu\" needs plugin 'tpu'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "no libfleet_tpu.so in")) << r.err;
}

TEST(CliTest, UnusedPluginConfigKeysAreReported) {
  Result r = RunHost("--set plugins.config.cpu.threadz=4 check");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "'plugins.config.cpu.threadz' (--set plugins.config.cpu.threadz) "
                              "is not used by this plugin"))
      << r.out;
}

TEST(CliTest, FleetPluginPathComesBeforeTheInstallDirectory) {
  TempDir extra;
  Result r = RunHost("plugins --json", "FLEET_PLUGIN_PATH=" + extra.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_GE(doc["search_path"].size(), 2u);
  EXPECT_EQ(doc["search_path"][0], extra.path().string());
  EXPECT_EQ(doc["search_path"][1], FLEET_BUILD_PLUGIN_DIR);
}

TEST(CliTest, OptionalPluginFailureIsAWarning) {
  Result r = RunHost("--set 'plugins.optional=[\"nope\"]' check");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "warning:   optional plugin 'nope' was not loaded")) << r.out;

  Result required = RunHost("--set 'plugins.load=[\"nope\"]' check");
  EXPECT_EQ(required.exit_code, 1);
  EXPECT_TRUE(Contains(required.err, "plugins.load: plugin 'nope' not found")) << required.err;
}

// ---- run and show -----------------------------------------------------------------------------

const fs::path kExamples = (fs::path(__FILE__).parent_path() / "../../examples").lexically_normal();

// The losses of the "step N/M loss L ..." lines, in order.
std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find(" loss ");
    if (line.rfind("step ", 0) == 0 && at != std::string::npos) {
      losses.push_back(std::stod(line.substr(at + 6)));
    }
  }
  return losses;
}

std::string MlpRun(const std::string& sets) {
  return "run " + (kExamples / "mlp/mlp.fleet").string() +
         " --set train.threads=1 --set train.batch_size=64 " + sets;
}

TEST(CliRunTest, MlpLossFalls) {
  TempDir dir;
  fs::path metrics = dir.path() / "metrics.jsonl";
  Result r = RunHost(MlpRun("--set train.steps=150 --set train.log_every=1 "
                            "--set train.metrics_file=" + metrics.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> losses = Losses(r.out);
  ASSERT_EQ(losses.size(), 150u) << r.out;
  EXPECT_TRUE(Contains(r.out, "step 150/150 loss ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "trained 150 steps in ")) << r.out;
  // Labels come from a fixed teacher, so the model learns: the last ten steps average well
  // under the first step's loss (about ln 2 for two balanced classes).
  double tail = 0;
  for (size_t i = losses.size() - 10; i < losses.size(); ++i) tail += losses[i] / 10;
  EXPECT_LT(tail, 0.6 * losses.front()) << r.out;

  // One JSON object per logged step, with the printed loss.
  std::ifstream in(metrics);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    ++n;
    EXPECT_EQ(j["step"], n);
    EXPECT_NEAR(j["loss"].get<double>(), losses[n - 1], 1e-6);
    EXPECT_GT(j["samples_per_sec"].get<double>(), 0);
    EXPECT_GE(j["elapsed_s"].get<double>(), 0);
  }
  EXPECT_EQ(n, 150u);
}

TEST(CliRunTest, ProfileSaysWhereTheTimeGoes) {
  Result r = RunHost(MlpRun("--set train.steps=20 --set train.profile=true"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "profile: ")) << r.out;
  EXPECT_TRUE(Contains(r.out, " ops (mean over 20 steps)")) << r.out;
  // Every op type of the MLP's main program shows up in the per-type totals.
  for (const char* type : {" mul_grad ", " mul ", " tanh ", " softmax ", " sgd "}) {
    EXPECT_TRUE(Contains(r.out, type)) << type << "\n" << r.out;
  }
  Result plain = RunHost(MlpRun("--set train.steps=5"));
  EXPECT_FALSE(Contains(plain.out, "profile: ")) << plain.out;
}

TEST(CliRunTest, SameSeedSameLosses) {
  const std::string sets = "--set train.steps=20 --set train.log_every=5 --config " +
                           (kExamples / "mlp/fleet.toml").string();
  Result a = RunHost(MlpRun(sets + " --set train.seed=9"));
  Result b = RunHost(MlpRun(sets + " --set train.seed=9"));
  Result c = RunHost(MlpRun(sets + " --set train.seed=10"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_EQ(c.exit_code, 0) << c.err;
  ASSERT_EQ(Losses(a.out).size(), 4u) << a.out;
  EXPECT_EQ(Losses(a.out), Losses(b.out));
  EXPECT_NE(Losses(a.out), Losses(c.out));
}

TEST(CliRunTest, FitALineFromCsv) {
  // y = 2 x0 - x1 + 0.5 exactly; a linear model fits it.
  TempDir dir;
  std::string csv;
  for (int i = 0; i < 64; ++i) {
    double x0 = (i % 8) / 4.0 - 1, x1 = (i / 8) / 4.0 - 1;
    csv += std::to_string(x0) + "," + std::to_string(x1) + "," +
           std::to_string(2 * x0 - x1 + 0.5) + "\n";
  }
  fs::path data = dir.Write("line.csv", csv);
  fs::path program = dir.Write("line.fleet", R"(x = data("x", shape=[-1, 2], dtype="float32")
y = data("y", shape=[-1, 1], dtype="float32")
avg = mean(square_error_cost(fc(x, size=1), y))
minimize(avg, optimizer=sgd(learning_rate=0.1))
)");
  Result r = RunHost("run " + program.string() +
                     " --set data.source=csv --set data.csv.path=" + data.string() +
                     " --set train.steps=200 --set train.batch_size=16 --set train.log_every=200 "
                     "--set train.threads=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> losses = Losses(r.out);
  ASSERT_EQ(losses.size(), 1u) << r.out;
  EXPECT_LT(losses.back(), 1e-3) << r.out;
}

TEST(CliRunTest, Errors) {
  Result none = RunHost("run");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(Contains(none.err, "which program?")) << none.err;

  Result missing = RunHost("run /nonexistent/x.fleet");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(Contains(missing.err, "/nonexistent/x.fleet")) << missing.err;

  Result bad = RunHost(MlpRun("--set train.steps=0"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(Contains(bad.err, "--set train.steps: expected an integer >= 1, got 0")) << bad.err;

  TempDir dir;
  fs::path program = dir.Write("nominimize.fleet",
                               "x = data(\"x\", shape=[-1, 2], dtype=\"float32\")\n");
  Result noloss = RunHost("run " + program.string());
  EXPECT_EQ(noloss.exit_code, 1);
  EXPECT_TRUE(Contains(noloss.err, "run needs a loss")) << noloss.err;

  Result metrics = RunHost(MlpRun("--set train.steps=2 --set train.metrics_file=" +
                                  (dir.path() / "no/such/dir/m.jsonl").string()));
  EXPECT_EQ(metrics.exit_code, 1);
  EXPECT_TRUE(Contains(metrics.err, "train.metrics_file: cannot open")) << metrics.err;

  // A learning rate that makes the loss overflow stops the run at the step it happens.
  std::ifstream line_fit(kExamples / "fit_a_line/fit_a_line.fleet");
  std::string text((std::istreambuf_iterator<char>(line_fit)), std::istreambuf_iterator<char>());
  const size_t at = text.find("learning_rate=0.01");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("learning_rate=0.01").size(), "learning_rate=1e30");
  fs::path diverging = dir.Write("diverging.fleet", text);
  Result diverged = RunHost("run " + diverging.string() + " --set train.steps=50");
  EXPECT_EQ(diverged.exit_code, 1);
  EXPECT_TRUE(Contains(diverged.err, "(try a smaller learning rate)")) << diverged.err;
  EXPECT_TRUE(Contains(diverged.err, ": step ")) << diverged.err;

  Result npy = RunHost(MlpRun("--set data.source=npy --set data.files.x=x.npy"));
  EXPECT_EQ(npy.exit_code, 1);
  EXPECT_TRUE(Contains(npy.err, "no file for feed 'y'")) << npy.err;
}

TEST(CliCheckTest, PreparesAProgram) {
  Result ok = RunHost("--config " + (kExamples / "mlp/fleet.toml").string() + " check " +
                      (kExamples / "mlp/mlp.fleet").string());
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(Contains(ok.out, "prepared for batch 128 on cpu")) << ok.out;

  // A batch the data var cannot take is caught before any job starts.
  TempDir dir;
  fs::path program = dir.Write(
      "fixed.fleet",
      "x = data(\"x\", shape=[8, 4], dtype=\"float32\")\n"
      "y = data(\"y\", shape=[8, 1], dtype=\"int64\")\n"
      "p = fc(x, size=3, act=\"softmax\")\n"
      "minimize(mean(cross_entropy(p, y)), optimizer=sgd(learning_rate=0.1))\n");
  Result bad = RunHost("--set train.batch_size=16 check " + program.string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(Contains(bad.err, "feed 'x' is declared with batch dimension 8")) << bad.err;

  Result usage = RunHost("check a.fleet b.fleet");
  EXPECT_EQ(usage.exit_code, 2);
}

TEST(CliShowTest, Stages) {
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  Result parsed = RunHost("show " + mlp + " --stage parsed --program main");
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  for (const char* op : {"op mul(X=[x], Y=[fc_0.w_0])", "op elementwise_add(", "op tanh(",
                         "op softmax(", "op cross_entropy(", "op mean("}) {
    EXPECT_TRUE(Contains(parsed.out, op)) << op << "\n" << parsed.out;
  }
  EXPECT_FALSE(Contains(parsed.out, "_grad(")) << parsed.out;
  EXPECT_FALSE(Contains(parsed.out, "program startup")) << parsed.out;

  Result backward = RunHost("show " + mlp + " --stage backward --program main");
  ASSERT_EQ(backward.exit_code, 0) << backward.err;
  EXPECT_TRUE(Contains(backward.out, "op mul_grad(")) << backward.out;
  EXPECT_FALSE(Contains(backward.out, "op sgd(")) << backward.out;

  Result optimized = RunHost("show " + mlp);
  ASSERT_EQ(optimized.exit_code, 0) << optimized.err;
  EXPECT_TRUE(Contains(optimized.out, "program main {")) << optimized.out;
  EXPECT_TRUE(Contains(optimized.out, "program startup {")) << optimized.out;
  EXPECT_TRUE(Contains(optimized.out, "op sgd(")) << optimized.out;
  EXPECT_TRUE(Contains(optimized.out, "op uniform_random(")) << optimized.out;

  // Trainer 1 of 2 under the default strategy (auto: collective with several trainers).
  Result transpiled = RunHost("show " + mlp + " --stage transpiled --world-size 2 --rank 1");
  ASSERT_EQ(transpiled.exit_code, 0) << transpiled.err;
  EXPECT_TRUE(Contains(transpiled.out, "op c_comm_init() -> () {nranks=2, rank=1, ring_id=0}"))
      << transpiled.out;
  EXPECT_TRUE(Contains(transpiled.out, "op c_broadcast(X=[fc_0.w_0]) -> (Out=[fc_0.w_0])"))
      << transpiled.out;
  EXPECT_TRUE(Contains(transpiled.out, "scale=0.5f")) << transpiled.out;
  EXPECT_TRUE(Contains(transpiled.out, "op c_allreduce_sum(")) << transpiled.out;
  Result alone = RunHost("show " + mlp + " --stage transpiled --world-size 1");
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_FALSE(Contains(alone.out, "c_allreduce_sum")) << alone.out;  // auto: no strategy
  Result outside = RunHost("show " + mlp + " --stage transpiled --world-size 2 --rank 2");
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_TRUE(Contains(outside.err, "rank 2 is outside a world of 2")) << outside.err;

  Result stage = RunHost("show " + mlp + " --stage linked");
  EXPECT_EQ(stage.exit_code, 2);
  EXPECT_TRUE(Contains(stage.err, "unknown stage 'linked'")) << stage.err;
  Result program = RunHost("show " + mlp + " --program pserver");
  EXPECT_EQ(program.exit_code, 2);
}

TEST(CliRunTest, ExamplesParse) {
  for (const char* file : {"mlp/mlp.fleet", "fit_a_line/fit_a_line.fleet", "cnn/cnn.fleet"}) {
    Result r = RunHost("show " + (kExamples / file).string());
    EXPECT_EQ(r.exit_code, 0) << file << ": " << r.err;
  }
  for (const char* file : {"mlp/fleet.toml", "fit_a_line/fleet.toml", "cnn/fleet.toml"}) {
    Result r = RunHost("--config " + (kExamples / file).string() + " check");
    EXPECT_EQ(r.exit_code, 0) << file << ": " << r.err;
  }
}

// ---- env --------------------------------------------------------------------------------------

// `env` options that clear every variable the role is resolved from, so a test sees only what it
// sets even when the test itself runs under a launcher (mpirun, srun, torchrun).
std::string CleanRoleEnv(const std::string& assignments) {
  std::string out;
  for (const char* name :
       {"TRAINING_ROLE", "PADDLE_TRAINING_ROLE", "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM",
        "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT", "PADDLE_PSERVERS_IP_PORT_LIST",
        "PADDLE_PSERVER_ID", "POD_IP", "PADDLE_PORT", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE",
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
        "MASTER_ADDR", "MASTER_PORT"}) {
    out += std::string("-u ") + name + " ";
  }
  return out + assignments;
}

TEST(CliEnvTest, DefaultsToASingleTrainer) {
  TempDir cwd;
  Result r = RunHost("env", CleanRoleEnv(""), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "config: <defaults>\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "role               trainer  (default)\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "rank               0  (default)\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "world_size         1  (default)\n")) << r.out;
}

TEST(CliEnvTest, ShowsValuesAndSourcesFromTheEnvironment) {
  TempDir cwd;
  Result r = RunHost("env",
                     CleanRoleEnv("PADDLE_TRAINER_ID=1 PADDLE_TRAINER_ENDPOINTS=h0:6170,h1:6170 "
                                  "RANK=1 LOCAL_RANK=0 MASTER_ADDR=h0 MASTER_PORT=29500"),
                     cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "rank               1  (env PADDLE_TRAINER_ID)\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "world_size         2  (number of trainer_endpoints")) << r.out;
  EXPECT_TRUE(Contains(r.out, "current_endpoint   h1:6170  (trainer_endpoints[1]")) << r.out;
  EXPECT_TRUE(Contains(r.out, "master_port        29500  (env MASTER_PORT)\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "local_rank         0  (env LOCAL_RANK)\n")) << r.out;
}

TEST(CliEnvTest, JsonAndConfigAndPserver) {
  TempDir cwd;
  cwd.Write("fleet.toml", "[role]\nworld_size = 3\n");
  Result r = RunHost("env --json",
                     CleanRoleEnv("TRAINING_ROLE=PSERVER PADDLE_PSERVERS_IP_PORT_LIST=s0:7000,s1:7000 "
                                  "POD_IP=s1 PADDLE_PORT=7000"),
                     cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"], "fleet.toml");
  EXPECT_EQ(j["role"], "pserver");
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["world_size"], 3);
  EXPECT_EQ(j["current_endpoint"], "s1:7000");
  EXPECT_EQ(j["pserver_endpoints"], nlohmann::json({"s0:7000", "s1:7000"}));
  EXPECT_EQ(j["source"]["world_size"], "fleet.toml:2:14 role.world_size");
  EXPECT_EQ(j["source"]["role"], "env TRAINING_ROLE");
}

TEST(CliEnvTest, ConflictExitsOneNamingBothSources) {
  TempDir cwd;
  Result r = RunHost("env", CleanRoleEnv("PADDLE_TRAINER_ID=1 RANK=0 WORLD_SIZE=2"), cwd.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "fleet-host: rank: PADDLE_TRAINER_ID=1 but RANK=0\n");
  EXPECT_EQ(r.out, "");
  Result set = RunHost("--set role.rank=2 env", CleanRoleEnv("SLURM_PROCID=0 SLURM_NTASKS=4"),
                       cwd.path());
  EXPECT_EQ(set.exit_code, 1);
  EXPECT_EQ(set.err, "fleet-host: rank: --set role.rank=2 but SLURM_PROCID=0\n");
  Result bad = RunHost("env", CleanRoleEnv("OMPI_COMM_WORLD_SIZE=two"), cwd.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(Contains(bad.err, "OMPI_COMM_WORLD_SIZE='two': expected an integer")) << bad.err;
  Result usage = RunHost("env --yaml", CleanRoleEnv(""), cwd.path());
  EXPECT_EQ(usage.exit_code, 2);
}

}  // namespace
