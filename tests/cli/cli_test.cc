#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fleet/fleet_abi.h"

namespace {

namespace fs = std::filesystem;

// The ABI this build speaks ("1.5"), as the version line and listings print it.
const std::string kAbi = std::to_string(FLEET_ABI_MAJOR) + "." + std::to_string(FLEET_ABI_MINOR);

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
// `shell_prefix` runs before fleet-host in the same shell (e.g. "ulimit -f 8 && ").
Result RunHost(const std::string& args, const std::string& env = "", const fs::path& cwd = {},
               const std::string& shell_prefix = "") {
  fs::path dir = fs::temp_directory_path() / ("fleet_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path out = dir / "out", err = dir / "err";
  std::string cmd = shell_prefix;
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
  EXPECT_TRUE(Contains(version.out, "(plugin ABI " + kAbi + ")")) << version.out;
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
    EXPECT_EQ(p["abi"], kAbi);
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
  // Thousands of stray keys: ten named, one line for the rest.
  std::string many;
  for (int i = 0; i < 3000; ++i) many += " --set plugins.config.cpu.k" + std::to_string(i) + "=1";
  r = RunHost(many + " check");
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  EXPECT_TRUE(Contains(r.out, "2990 more keys of [plugins.config.cpu] are not used by this "
                              "plugin"))
      << r.out.substr(0, 2000);
  EXPECT_LT(r.out.size(), 4000u) << r.out.substr(0, 2000);
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

// From CMake, not __FILE__: a compiler launcher may hand the compiler relative source paths.
const fs::path kExamples = fs::path(FLEET_EXAMPLES_DIR).lexically_normal();

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
    EXPECT_GT(j["ips"].get<double>(), 0);
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

TEST(CliRunTest, TrainsOnAMultiSlotFileList) {
  // Four MultiSlot files of a separable problem (y = 1 when x0 + x1 > 0), with an id slot the
  // model does not read and one malformed line; the config names them by a relative pattern.
  TempDir dir;
  uint64_t state = 12345;
  auto uniform = [&]() {  // in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53) * 2 - 1;
  };
  for (int file = 0; file < 4; ++file) {
    std::string text;
    for (int i = 0; i < 256; ++i) {
      std::string x;
      double x0 = 0, x1 = 0;
      for (int k = 0; k < 32; ++k) {
        double v = uniform();
        if (k == 0) x0 = v;
        if (k == 1) x1 = v;
        x += " " + std::to_string(v);
      }
      text += "1 " + std::to_string(file * 256 + i) + " 32" + x + " 1 " +
              (x0 + x1 > 0 ? "1" : "0") + "\n";
      if (file == 2 && i == 100) text += "1 0 32 1 2 3\n";  // truncated
    }
    dir.Write("part-" + std::to_string(file) + ".txt", text);
  }
  fs::path config = dir.Write("fleet.toml", R"([data]
source = "multislot"
filelist = ["part-*.txt"]
slots = ["id", "x", "y"]
dataset = "queue"
bad_lines = "skip"
)");
  Result r = RunHost(MlpRun("--config '" + config.string() +
                            "' --set train.steps=120 --set train.log_every=10"));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::vector<double> losses = Losses(r.out);
  ASSERT_EQ(losses.size(), 12u) << r.out;
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << r.out;
  EXPECT_TRUE(Contains(r.out, "skipped 1 malformed line of data")) << r.out;
  EXPECT_TRUE(Contains(r.err, "part-2.txt:102: the line ends inside slot 'x'")) << r.err;

  // Without bad_lines = "skip" the same line stops the run, named.
  Result strict = RunHost(MlpRun("--config '" + config.string() +
                                 "' --set train.steps=120 --set data.bad_lines=error"));
  EXPECT_NE(strict.exit_code, 0);
  EXPECT_TRUE(Contains(strict.err, "part-2.txt:102: the line ends inside slot 'x': 3 of its 32 "
                                   "values"))
      << strict.err;
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

// In a distributed job `check` loads what the role's strategy needs and verifies the
// transpiled programs: a trainer of a pserver job gets the transport and six programs (its
// two and each server's two), a collective trainer the communicator and two.
TEST(CliCheckTest, ChecksTheTranspiledJobOfTheRole) {
  const std::string check = "--config " + (kExamples / "mlp/fleet.toml").string() + " check " +
                            (kExamples / "mlp/mlp.fleet").string();
  Result ps = RunHost(check, CleanRoleEnv("PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.1:6170,"
                                          "127.0.0.1:6171 PADDLE_TRAINERS_NUM=2"));
  ASSERT_EQ(ps.exit_code, 0) << ps.err;
  EXPECT_TRUE(Contains(ps.out, "transport: rpc from plugin 'transport_rpc'")) << ps.out;
  EXPECT_TRUE(Contains(ps.out, "strategy:  pserver")) << ps.out;
  EXPECT_TRUE(Contains(ps.out, "transpile: pserver for trainer 0 of a job of 2 trainers and 2 "
                               "pservers: 6 programs verified"))
      << ps.out;
  Result coll = RunHost(check, CleanRoleEnv("PADDLE_TRAINERS_NUM=2 PADDLE_TRAINER_ID=1"));
  ASSERT_EQ(coll.exit_code, 0) << coll.err;
  EXPECT_TRUE(Contains(coll.out, "comm:      gloo from plugin 'comm_gloo'")) << coll.out;
  EXPECT_TRUE(Contains(coll.out, "transpile: collective for trainer 1 of a job of 2 trainers: "
                                 "2 programs verified"))
      << coll.out;
  // A job the pass cannot transpile fails the check, naming why.
  Result bad = RunHost("--set strategy.mode=pserver " + check, CleanRoleEnv(""));
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_TRUE(Contains(bad.err, "pserver_endpoints")) << bad.err;
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


// ---- show for parameter-server jobs -----------------------------------------------------------

// The text of program `name` in a printed program set ("program NAME {" up to the next program),
// or "" when it is not there.
std::string ProgramText(const std::string& set, const std::string& name) {
  const std::string header = "program " + name + " {\n";
  size_t at = set.rfind(header, 0) == 0 ? 0 : set.find("\n" + header);
  if (at == std::string::npos) return "";
  if (at != 0) ++at;
  size_t end = set.find("\nprogram ", at);
  return set.substr(at, end == std::string::npos ? std::string::npos : end + 1 - at);
}

// The names after "program " at the start of a line, in order.
std::vector<std::string> ProgramNames(const std::string& set) {
  std::vector<std::string> names;
  std::istringstream in(set);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("program ", 0) == 0 && line.size() > 10) {
      names.push_back(line.substr(8, line.size() - 10));  // drop "program " and " {"
    }
  }
  return names;
}

// The first line of `text` that contains `needle`, or "".
std::string LineWith(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (Contains(line, needle)) return line;
  }
  return "";
}

// `show` of the MLP example at the transpiled stage under strategy pserver with two servers, in an
// empty directory and an environment without role variables, plus `extra` options.
Result ShowPserverMlp(const std::string& extra, const std::string& env = "") {
  TempDir cwd;
  return RunHost("show " + (kExamples / "mlp/mlp.fleet").string() +
                     " --stage transpiled --set strategy.mode=pserver " + extra,
                 CleanRoleEnv(env), cwd.path());
}

const char* const kTwoServers = "--pservers 127.0.0.1:6170,127.0.0.1:6171";

// The MLP's parameters, sorted by name as Paddle's params_grads are: fc_0.b_0 [128],
// fc_0.w_0 [32, 128] (4096 elements), fc_1.b_0 [128], fc_1.w_0 [128, 128] (16384), fc_2.b_0 [2],
// fc_2.w_0 [128, 2]. With two servers and min_block_size 8192 only fc_1.w_0 reaches two blocks
// (max_ps = 16384 / 8192 = 2, 8192 elements = 64 rows each). Round robin over the flattened
// blocks [fc_0.b_0, fc_0.w_0, fc_1.b_0, fc_1.w_0.block0, fc_1.w_0.block1, fc_2.b_0, fc_2.w_0]
// puts fc_0.w_0, fc_1.w_0.block0 and fc_2.b_0 on server 1, the rest on server 0.
TEST(CliShowPserverTest, TheExampleHasTheShapesThePlacementAssumes) {
  Result r = RunHost("show " + (kExamples / "mlp/mlp.fleet").string() +
                     " --stage optimized --program main");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* param :
       {"param fc_0.b_0 : float32[128]", "param fc_0.w_0 : float32[32, 128]",
        "param fc_1.b_0 : float32[128]", "param fc_1.w_0 : float32[128, 128]",
        "param fc_2.b_0 : float32[2]", "param fc_2.w_0 : float32[128, 2]"}) {
    EXPECT_TRUE(Contains(r.out, param)) << param << "\n" << r.out;
  }
  EXPECT_TRUE(Contains(r.out, "LearningRate=[learning_rate_0]")) << r.out;
}

TEST(CliShowPserverTest, OneServersPrograms) {
  Result r = ShowPserverMlp(std::string(kTwoServers) + " --world-size 2 --role pserver --index 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ProgramNames(r.out), (std::vector<std::string>{"pserver.1", "pserver.1.startup"}))
      << r.out;
  const std::string server = ProgramText(r.out, "pserver.1");
  const std::string startup = ProgramText(r.out, "pserver.1.startup");
  ASSERT_FALSE(server.empty()) << r.out;
  ASSERT_FALSE(startup.empty()) << r.out;

  // Exactly one listen_and_serv, at this server's endpoint, waiting for both trainers.
  const std::string listen = LineWith(server, "op listen_and_serv(");
  EXPECT_EQ(server.find("op listen_and_serv("), server.rfind("op listen_and_serv(")) << server;
  EXPECT_TRUE(Contains(listen, "endpoint=\"127.0.0.1:6171\"")) << listen;
  EXPECT_TRUE(Contains(listen, "Fanin=2,")) << listen;
  EXPECT_TRUE(Contains(listen, "pserver_id=1,")) << listen;
  EXPECT_TRUE(Contains(listen, "distributed_mode=0,")) << listen;
  EXPECT_TRUE(Contains(listen, "lr_decay_block_id=-1,")) << listen;  // constant learning rate
  EXPECT_TRUE(Contains(listen, "optimize_blocks=[1, 2, 3]")) << listen;
  EXPECT_TRUE(Contains(listen, "grad_to_block_id=[\"fc_0.w_0@GRAD:1\", "
                               "\"fc_1.w_0@GRAD.block0:2\", \"fc_2.b_0@GRAD:3\"]"))
      << listen;
  for (const char* received :
       {"fc_0.w_0@GRAD.trainer_0", "fc_0.w_0@GRAD.trainer_1", "fc_1.w_0@GRAD.block0.trainer_0",
        "fc_1.w_0@GRAD.block0.trainer_1", "fc_2.b_0@GRAD.trainer_0", "fc_2.b_0@GRAD.trainer_1"}) {
    EXPECT_TRUE(Contains(listen, received)) << received << "\n" << listen;
  }

  // The first 64 rows of the 128x128 weight live here, persistable, and are updated by the
  // mean of the two trainers' gradients.
  EXPECT_TRUE(Contains(server, "var fc_1.w_0.block0 : float32[64, 128] persistable\n")) << server;
  EXPECT_TRUE(Contains(server, "var fc_1.w_0@GRAD.block0 : float32[64, 128] persistable\n"))
      << server;
  EXPECT_TRUE(Contains(server,
                       "op sum(X=[fc_1.w_0@GRAD.block0.trainer_0, fc_1.w_0@GRAD.block0.trainer_1]) "
                       "-> (Out=[fc_1.w_0@GRAD.block0])"))
      << server;
  EXPECT_TRUE(Contains(server, "op scale(X=[fc_1.w_0@GRAD.block0]) -> (Out=[fc_1.w_0@GRAD.block0])"
                               " {op_role=2, scale=0.5f}"))
      << server;
  EXPECT_TRUE(Contains(server, "op sgd(Grad=[fc_1.w_0@GRAD.block0], "
                               "LearningRate=[learning_rate_0], Param=[fc_1.w_0.block0]) -> "
                               "(ParamOut=[fc_1.w_0.block0])"))
      << server;
  EXPECT_TRUE(Contains(server, "op sgd(Grad=[fc_0.w_0@GRAD], LearningRate=[learning_rate_0], "
                               "Param=[fc_0.w_0]) -> (ParamOut=[fc_0.w_0])"))
      << server;
  // Server 0's blocks are not served here.
  EXPECT_FALSE(Contains(server, "fc_1.w_0.block1")) << server;
  EXPECT_FALSE(Contains(server, "fc_0.b_0")) << server;
  EXPECT_FALSE(Contains(server, "fc_2.w_0")) << server;
  EXPECT_FALSE(Contains(server, "block 4 ")) << server;
  // No trainer ops on a server.
  for (const char* op : {"op send(", "op recv(", "op mul(", "op mul_grad(", "op c_"}) {
    EXPECT_FALSE(Contains(r.out, op)) << op << "\n" << r.out;
  }

  // The server's startup runs the whole original initialisation, then cuts the weight into its
  // two 64-row blocks; only block 0 stays in this server's scope.
  EXPECT_TRUE(Contains(startup, "op uniform_random() -> (Out=[fc_1.w_0])")) << startup;
  EXPECT_TRUE(Contains(startup, "op split_byref(X=[fc_1.w_0]) -> "
                                "(Out=[fc_1.w_0.block0, fc_1.w_0.block1]) {op_role=8, "
                                "sections=[64, 64]}"))
      << startup;
  EXPECT_TRUE(Contains(startup, "var fc_1.w_0.block0 : float32[64, 128] persistable\n"))
      << startup;
  EXPECT_TRUE(Contains(startup, "var fc_1.w_0.block1 : float32[64, 128]\n")) << startup;
}

TEST(CliShowPserverTest, TheOtherServerAndTheDefaultIndex) {
  // --role pserver without --index is server 0: the complement of server 1's placement.
  Result r = ShowPserverMlp(std::string(kTwoServers) + " --world-size 2 --role pserver");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ProgramNames(r.out), (std::vector<std::string>{"pserver.0", "pserver.0.startup"}))
      << r.out;
  const std::string listen = LineWith(ProgramText(r.out, "pserver.0"), "op listen_and_serv(");
  EXPECT_TRUE(Contains(listen, "endpoint=\"127.0.0.1:6170\"")) << listen;
  EXPECT_TRUE(Contains(listen, "pserver_id=0,")) << listen;
  EXPECT_TRUE(Contains(listen, "grad_to_block_id=[\"fc_0.b_0@GRAD:1\", \"fc_1.b_0@GRAD:2\", "
                               "\"fc_1.w_0@GRAD.block1:3\", \"fc_2.w_0@GRAD:4\"]"))
      << listen;

  // A pserver process told by the environment which server it is (POD_IP:PADDLE_PORT) and how
  // many trainers there are.
  Result env = ShowPserverMlp("", "TRAINING_ROLE=PSERVER PADDLE_PSERVERS_IP_PORT_LIST="
                                  "127.0.0.1:6170,127.0.0.1:6171 POD_IP=127.0.0.1 "
                                  "PADDLE_PORT=6171 PADDLE_TRAINERS_NUM=3");
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_EQ(ProgramNames(env.out), (std::vector<std::string>{"pserver.1", "pserver.1.startup"}))
      << env.out;
  const std::string from_env = LineWith(env.out, "op listen_and_serv(");
  EXPECT_TRUE(Contains(from_env, "endpoint=\"127.0.0.1:6171\"")) << from_env;
  EXPECT_TRUE(Contains(from_env, "Fanin=3,")) << from_env;
  EXPECT_TRUE(Contains(env.out, "fc_1.w_0@GRAD.block0.trainer_2")) << env.out;

  // One trainer: Fanin 1, the gradient received as it is (no suffix, no sum or scale).
  Result one =
      ShowPserverMlp(std::string(kTwoServers) + " --world-size 1 --role pserver --index 1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(Contains(one.out, "Fanin=1,")) << one.out;
  EXPECT_TRUE(Contains(one.out, "op listen_and_serv(X=[fc_0.w_0@GRAD, fc_1.w_0@GRAD.block0, "
                                "fc_2.b_0@GRAD]) -> ()"))
      << one.out;
  EXPECT_FALSE(Contains(one.out, ".trainer_")) << one.out;
  EXPECT_FALSE(Contains(one.out, "op sum(")) << one.out;
}

TEST(CliShowPserverTest, OneTrainersPrograms) {
  Result r = ShowPserverMlp(std::string(kTwoServers) + " --world-size 2 --role trainer --rank 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ProgramNames(r.out), (std::vector<std::string>{"main", "startup"})) << r.out;
  const std::string main = ProgramText(r.out, "main");
  const std::string startup = ProgramText(r.out, "startup");

  // The optimizer moved to the servers; the trainer sends, waits, and receives.
  EXPECT_FALSE(Contains(r.out, "op sgd(")) << r.out;
  EXPECT_FALSE(Contains(r.out, "listen_and_serv")) << r.out;
  EXPECT_TRUE(Contains(main, "op mul_grad(")) << main;
  const size_t send = main.find("op send("), barrier = main.find("op send_barrier(");
  const size_t recv = main.find("op recv("), fetch = main.find("op fetch_barrier(");
  ASSERT_NE(send, std::string::npos) << main;
  ASSERT_NE(barrier, std::string::npos) << main;
  ASSERT_NE(recv, std::string::npos) << main;
  ASSERT_NE(fetch, std::string::npos) << main;
  EXPECT_LT(send, barrier);
  EXPECT_LT(main.rfind("op send("), barrier);
  EXPECT_LT(barrier, recv);
  EXPECT_LT(main.rfind("op recv("), fetch);
  EXPECT_EQ(main.find("op send_barrier("), main.rfind("op send_barrier(")) << main;
  EXPECT_EQ(main.find("op fetch_barrier("), main.rfind("op fetch_barrier(")) << main;
  EXPECT_TRUE(Contains(LineWith(main, "op send_barrier("),
                       "endpoints=[\"127.0.0.1:6170\", \"127.0.0.1:6171\"], half_async=false"))
      << main;
  EXPECT_TRUE(Contains(LineWith(main, "op send_barrier("), "trainer_id=1}")) << main;
  EXPECT_TRUE(Contains(LineWith(main, "op fetch_barrier("), "trainer_id=1}")) << main;

  // Sync with two trainers: every gradient sent carries this trainer's suffix.
  EXPECT_TRUE(Contains(main, "op split_byref(X=[fc_1.w_0@GRAD]) -> "
                             "(Out=[fc_1.w_0@GRAD.block0.trainer_1, "
                             "fc_1.w_0@GRAD.block1.trainer_1]) {op_role=8, sections=[64, 64]}"))
      << main;
  EXPECT_TRUE(Contains(LineWith(main, "op send(X=[fc_1.w_0@GRAD.block0.trainer_1, "
                                      "fc_1.w_0@GRAD.block1.trainer_1])"),
                       "epmap=[\"127.0.0.1:6171\", \"127.0.0.1:6170\"]"))
      << main;
  EXPECT_TRUE(Contains(LineWith(main, "op send(X=[fc_0.w_0@GRAD.trainer_1])"),
                       "epmap=[\"127.0.0.1:6171\"]"))
      << main;
  EXPECT_TRUE(Contains(LineWith(main, "op send(X=[fc_0.b_0@GRAD.trainer_1])"),
                       "epmap=[\"127.0.0.1:6170\"]"))
      << main;
  for (const char* g : {"fc_0.b_0@GRAD.trainer_1", "fc_1.b_0@GRAD.trainer_1",
                        "fc_2.b_0@GRAD.trainer_1", "fc_2.w_0@GRAD.trainer_1"}) {
    EXPECT_TRUE(Contains(main, "op send(X=[" + std::string(g) + "])")) << g << "\n" << main;
  }
  // A whole gradient is renamed in place everywhere, so its old name is gone.
  EXPECT_FALSE(Contains(main, "fc_0.w_0@GRAD]")) << main;
  EXPECT_FALSE(Contains(main, "fc_0.w_0@GRAD ")) << main;
  EXPECT_FALSE(Contains(main, "\"fc_0.w_0@GRAD\"")) << main;  // op_role_var too
  EXPECT_FALSE(Contains(r.out, ".trainer_0")) << r.out;
  EXPECT_TRUE(Contains(main, "op concat(X=[fc_1.w_0.block0, fc_1.w_0.block1]) -> "
                             "(Out=[fc_1.w_0]) {axis=0, op_role=8}"))
      << main;

  // The trainer's startup fetches the servers' initial values.
  EXPECT_TRUE(Contains(startup, "op recv(X=[]) -> (Out=[fc_1.w_0.block0, fc_1.w_0.block1]) "
                                "{epmap=[\"127.0.0.1:6171\", \"127.0.0.1:6170\"]"))
      << startup;
  EXPECT_TRUE(Contains(startup, "op fetch_barrier(X=[]) -> (Out=[])")) << startup;
  EXPECT_FALSE(Contains(startup, "learning_rate_0")) << startup;  // the servers own it

  // Without --role a pserver job shows every program of the set.
  Result all = ShowPserverMlp(std::string(kTwoServers) + " --world-size 2");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(ProgramNames(all.out),
            (std::vector<std::string>{"main", "pserver.0", "pserver.0.startup", "pserver.1",
                                      "pserver.1.startup", "startup"}))
      << all.out;
}

TEST(CliShowPserverTest, ServersFromConfigOrEnvironment) {
  // [role] pserver_endpoints and PADDLE_PSERVERS_IP_PORT_LIST stand in for --pservers.
  Result config = ShowPserverMlp(
      "--world-size 2 --role pserver --index 1 "
      "--set 'role.pserver_endpoints=[\"127.0.0.1:6170\", \"127.0.0.1:6171\"]'");
  ASSERT_EQ(config.exit_code, 0) << config.err;
  EXPECT_TRUE(Contains(config.out, "endpoint=\"127.0.0.1:6171\"")) << config.out;

  Result env = ShowPserverMlp("--world-size 2 --role pserver --index 1",
                              "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.1:7000,10.0.0.2:7000");
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_TRUE(Contains(env.out, "endpoint=\"10.0.0.2:7000\"")) << env.out;

  // --pservers wins over the environment.
  Result flag = ShowPserverMlp(std::string(kTwoServers) + " --world-size 2 --role pserver "
                               "--index 1",
                               "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.1:7000,10.0.0.2:7000");
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_TRUE(Contains(flag.out, "endpoint=\"127.0.0.1:6171\"")) << flag.out;
  EXPECT_FALSE(Contains(flag.out, "10.0.0.")) << flag.out;
}

TEST(CliShowPserverTest, Errors) {
  // A pserver job with no servers anywhere.
  Result none = ShowPserverMlp("--world-size 2");
  EXPECT_EQ(none.exit_code, 2) << none.out;
  EXPECT_TRUE(Contains(none.err, "--pservers")) << none.err;
  EXPECT_TRUE(Contains(none.err, "[role] pserver_endpoints")) << none.err;
  EXPECT_TRUE(Contains(none.err, "PADDLE_PSERVERS_IP_PORT_LIST")) << none.err;
  EXPECT_EQ(none.out, "");
  Result none_trainer = ShowPserverMlp("--world-size 2 --role trainer --rank 1");
  EXPECT_EQ(none_trainer.exit_code, 2) << none_trainer.out;
  EXPECT_TRUE(Contains(none_trainer.err, "--pservers")) << none_trainer.err;

  // Server 2 of two.
  Result index = ShowPserverMlp(std::string(kTwoServers) + " --world-size 2 --role pserver "
                                "--index 2");
  EXPECT_EQ(index.exit_code, 2) << index.out;
  EXPECT_TRUE(Contains(index.err, "pserver index 2 is outside the 2 servers")) << index.err;
  EXPECT_EQ(index.out, "");

  Result role = ShowPserverMlp(std::string(kTwoServers) + " --role bogus");
  EXPECT_EQ(role.exit_code, 2);
  EXPECT_TRUE(Contains(role.err, "--role: expected trainer or pserver, got 'bogus'")) << role.err;
  EXPECT_EQ(role.out, "");

  Result bad_index = ShowPserverMlp(std::string(kTwoServers) + " --role pserver --index -1");
  EXPECT_EQ(bad_index.exit_code, 2);
  EXPECT_TRUE(Contains(bad_index.err, "--index: expected an integer from 0 to 65535, got '-1'"))
      << bad_index.err;

  // A server has an index, not a rank; a trainer has a rank, not an index.
  Result rank = ShowPserverMlp(std::string(kTwoServers) + " --role pserver --rank 1");
  EXPECT_EQ(rank.exit_code, 2);
  EXPECT_TRUE(Contains(rank.err, "use --index for a pserver")) << rank.err;
  Result trainer_index = ShowPserverMlp(std::string(kTwoServers) + " --role trainer --index 1");
  EXPECT_EQ(trainer_index.exit_code, 2);
  EXPECT_TRUE(Contains(trainer_index.err, "--index needs --role pserver")) << trainer_index.err;
  Result outside = ShowPserverMlp(std::string(kTwoServers) + " --world-size 2 --rank 2");
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_TRUE(Contains(outside.err, "rank 2 is outside a world of 2")) << outside.err;

  Result value = ShowPserverMlp("--pservers");
  EXPECT_EQ(value.exit_code, 2);
  EXPECT_TRUE(Contains(value.err, "--pservers needs a value")) << value.err;
}

TEST(CliShowPserverTest, SetAfterTheProgramIsHonoured) {
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  TempDir cwd;
  // With servers given, the default strategy (auto) is pserver; a --set after the program
  // switches it to collective.
  Result by_default = RunHost("show " + mlp + " --stage transpiled --world-size 2 " +
                                  kTwoServers,
                              CleanRoleEnv(""), cwd.path());
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_TRUE(Contains(by_default.out, "op listen_and_serv(")) << by_default.out;
  Result collective = RunHost("show " + mlp + " --stage transpiled --world-size 2 " +
                                  kTwoServers + " --set strategy.mode=collective",
                              CleanRoleEnv(""), cwd.path());
  ASSERT_EQ(collective.exit_code, 0) << collective.err;
  EXPECT_TRUE(Contains(collective.out, "op c_allreduce_sum(")) << collective.out;
  EXPECT_FALSE(Contains(collective.out, "listen_and_serv")) << collective.out;
  EXPECT_FALSE(Contains(collective.out, "op send(")) << collective.out;

  // strategy.sync_mode=false after the program: asynchronous training, so no barriers, no
  // trainer suffixes, no merging on the server, and distributed_mode 1.
  Result async = ShowPserverMlp(std::string(kTwoServers) +
                                " --world-size 2 --set strategy.sync_mode=false");
  ASSERT_EQ(async.exit_code, 0) << async.err;
  const std::string main = ProgramText(async.out, "main");
  EXPECT_TRUE(Contains(main, "op send(")) << main;
  EXPECT_TRUE(Contains(main, "op recv(")) << main;
  EXPECT_FALSE(Contains(main, "op send_barrier(")) << main;
  EXPECT_FALSE(Contains(main, "op fetch_barrier(")) << main;
  EXPECT_FALSE(Contains(async.out, ".trainer_")) << async.out;
  const std::string server = ProgramText(async.out, "pserver.1");
  EXPECT_TRUE(Contains(server, "distributed_mode=1,")) << server;
  EXPECT_TRUE(Contains(server, "op listen_and_serv(X=[fc_0.w_0@GRAD, fc_1.w_0@GRAD.block0, "
                               "fc_2.b_0@GRAD]) -> ()"))
      << server;
  EXPECT_FALSE(Contains(server, "op sum(")) << server;

  // A --config after the program is read too, and a --set after it overrides the file.
  cwd.Write("ps.toml", "[strategy]\nmode = \"pserver\"\nmin_block_size = 4096\n"
                       "[role]\npserver_endpoints = [\"127.0.0.1:6170\", \"127.0.0.1:6171\"]\n");
  Result file = RunHost("show " + mlp + " --stage transpiled --world-size 2 --role pserver "
                        "--config ps.toml --set strategy.min_block_size=16384",
                        CleanRoleEnv(""), cwd.path());
  ASSERT_EQ(file.exit_code, 0) << file.err;
  // 16384 / 16384 = 1 block for fc_1.w_0: whole parameters go round robin [fc_0.b_0 -> 0,
  // fc_0.w_0 -> 1, fc_1.b_0 -> 0, fc_1.w_0 -> 1, fc_2.b_0 -> 0, fc_2.w_0 -> 1].
  EXPECT_TRUE(Contains(file.out, "grad_to_block_id=[\"fc_0.b_0@GRAD:1\", \"fc_1.b_0@GRAD:2\", "
                                 "\"fc_2.b_0@GRAD:3\"]"))
      << file.out;
  EXPECT_FALSE(Contains(file.out, ".block0")) << file.out;
}


TEST(CliShowPserverTest, ShardInitAndOneProgramOfTheRole) {
  // pserver_init = shard: only the initialisers of this server's vars, each block's drawn at the
  // block's shape; nothing to cut afterwards.
  Result r = ShowPserverMlp(std::string(kTwoServers) + " --world-size 2 --role pserver --index 1 "
                            "--set strategy.pserver_init=shard --program pserver.1.startup");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "op uniform_random() -> (Out=[fc_1.w_0.block0])")) << r.out;
  EXPECT_TRUE(Contains(LineWith(r.out, "(Out=[fc_1.w_0.block0])"), "shape=[64L, 128L]"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "op uniform_random() -> (Out=[fc_0.w_0])")) << r.out;
  EXPECT_TRUE(Contains(r.out, "op fill_constant() -> (Out=[fc_2.b_0])")) << r.out;
  EXPECT_FALSE(Contains(r.out, "op split_byref(")) << r.out;
  EXPECT_FALSE(Contains(r.out, "(Out=[fc_1.w_0])")) << r.out;
  EXPECT_FALSE(Contains(r.out, "fc_0.b_0")) << r.out;  // server 0's
  EXPECT_FALSE(Contains(r.out, "listen_and_serv")) << r.out;  // just the one program

  // The trainer's programs are not among a server's.
  Result main = ShowPserverMlp(std::string(kTwoServers) + " --role pserver --index 1 "
                               "--program main");
  EXPECT_EQ(main.exit_code, 2);
  EXPECT_TRUE(Contains(main.err, "no program 'main'")) << main.err;
}

// --pservers is checked as PADDLE_PSERVERS_IP_PORT_LIST and [role] pserver_endpoints are.
TEST(CliShowPserverTest, PserversFlagIsCheckedLikeTheEnvironment) {
  Result r = ShowPserverMlp("--pservers foo --role pserver");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Contains(r.err, "'foo' is not host:port")) << r.err;
  EXPECT_TRUE(Contains(r.err, "--pservers")) << r.err;
}

// A server's programs exist only in a parameter-server job.
TEST(CliShowPserverTest, PserverRoleOutsideAPserverJobIsRefused) {
  Result r = ShowPserverMlp("--role pserver --set strategy.mode=collective");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(Contains(r.err, "--role pserver needs a parameter-server job")) << r.err;
  EXPECT_TRUE(Contains(r.err, "\"collective\"")) << r.err;
}

// An error that echoes input escapes what would drive the terminal.
TEST(CliRunTest, EchoedInputCannotDriveTheTerminal) {
  TempDir dir;
  fs::path program = dir.Write("esc.fleet",
                               "x = data('x', shape=[-1, 2], dtype='\x1b[2J\x1b[31mred')\n");
  Result r = RunHost("check " + program.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_TRUE(Contains(r.err, "\\x1b[2J\\x1b[31mred")) << r.err;
}

// Under a file-size limit a checkpoint write fails with EFBIG: a clear error naming the file,
// exit 1, and no temporary left, where SIGXFSZ used to kill the process mid-write.
TEST(CliRunTest, AFileSizeLimitIsAnErrorNotADeath) {
  TempDir dir;
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  const std::string ckpt = (dir.path() / "ckpt").string();
  Result r = RunHost("--config " + (kExamples / "mlp/fleet.toml").string() + " run " + mlp +
                         " --set train.steps=4 --set checkpoint.every_steps=2 "
                         "--set checkpoint.dir=" + ckpt,
                     "", {}, "ulimit -f 8 && ");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "File too large")) << r.err;
  for (const auto& e : fs::recursive_directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

// More kernel threads than the address-space limit has room for: the OpenMP runtime would end
// the process naming nothing of ours; the job is refused first, naming train.threads.
TEST(CliRunTest, ThreadsTheAddressSpaceCannotHoldAreRefusedNamingTheKey) {
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  Result r = RunHost("--config " + (kExamples / "mlp/fleet.toml").string() + " run " + mlp +
                         " --set train.steps=2 --set train.threads=4096",
                     "", {}, "ulimit -v 4194304 && ");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "train.threads = 4096")) << r.err;
  EXPECT_TRUE(Contains(r.err, "ulimit -v")) << r.err;
  EXPECT_FALSE(Contains(r.err, "libgomp")) << r.err;
}

// ---- export, infer, convert ------------------------------------------------------------------

// Train the quick-start MLP with checkpoints, export its prediction from the newest one, infer
// on inputs numpy wrote, and move the checkpoint to .npy files and back: the user's path from
// training to serving, each step as its own process.
TEST(CliExportTest, TrainExportInferConvert) {
  TempDir dir;
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  const std::string config = "--config " + (kExamples / "mlp/fleet.toml").string();
  const std::string ckpt = (dir.path() / "ckpt").string();
  Result run = RunHost(config + " run " + mlp + " --set train.steps=30 --set checkpoint.dir=" +
                       ckpt);
  ASSERT_EQ(run.exit_code, 0) << run.err;

  const std::string model = (dir.path() / "model").string();
  Result ex = RunHost(config + " export " + mlp + " --feed x --fetch prediction --out " + model +
                      " --checkpoint " + ckpt);
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  EXPECT_TRUE(Contains(ex.out, "exported 9 ops and 6 parameters (from " + ckpt +
                                   "/step_0000030) to " + model + ": feeds x; fetches prediction"))
      << ex.out;
  for (const char* f : {"model.ir", "params.safetensors", "model.json"}) {
    EXPECT_TRUE(fs::exists(dir.path() / "model" / f)) << f;
  }
  EXPECT_FALSE(Contains(ReadFile(dir.path() / "model/model.ir"), "cross_entropy"));

  const std::string input = (dir.path() / "x.npy").string();
  const std::string script = "import numpy; numpy.save('" + input +
                             "', numpy.linspace(-1, 1, 5 * 32, dtype=numpy.float32)"
                             ".reshape(5, 32))";
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"" + script + "\"").c_str()), 0);
  const std::string out = (dir.path() / "out").string();
  Result inf = RunHost("infer " + model + " --input x=" + input + " --out " + out);
  ASSERT_EQ(inf.exit_code, 0) << inf.err;
  EXPECT_TRUE(Contains(inf.out, "prediction: float32[5, 2] [")) << inf.out;
  // The predictions are a softmax's: rows of two probabilities that sum to one.
  const std::string check = "import numpy; p = numpy.load('" + out + "/prediction.npy'); "
                            "assert p.shape == (5, 2) and p.dtype == numpy.float32, p; "
                            "assert abs(p.sum(axis=1) - 1).max() < 1e-5, p";
  EXPECT_EQ(std::system(("/usr/bin/python3 -c \"" + check + "\"").c_str()), 0);

  // Exported from the same weights as .npy files, the model predicts the same.
  const std::string npy = (dir.path() / "npy").string();
  Result cv = RunHost("convert " + ckpt + "/step_0000030 --out " + npy);
  ASSERT_EQ(cv.exit_code, 0) << cv.err;
  EXPECT_TRUE(Contains(cv.out, "tensors to " + npy)) << cv.out;
  EXPECT_TRUE(fs::exists(dir.path() / "npy/fc_0.w_0.npy"));
  Result ex2 = RunHost(config + " export " + mlp + " --fetch prediction --out " + model +
                       "2 --params " + npy);
  ASSERT_EQ(ex2.exit_code, 0) << ex2.err;
  Result inf2 = RunHost("infer " + model + "2 --input " + input + " --out " + out + "2");
  ASSERT_EQ(inf2.exit_code, 0) << inf2.err;
  EXPECT_EQ(ReadFile(out + "/prediction.npy"), ReadFile(out + "2/prediction.npy"));
  Result back = RunHost("convert " + npy + " --out " + (dir.path() / "w.safetensors").string());
  ASSERT_EQ(back.exit_code, 0) << back.err;
}

TEST(CliExportTest, BadArgumentsAndInputsAreRefused) {
  TempDir dir;
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  Result none = RunHost("export " + mlp + " --out " + (dir.path() / "m").string());
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(Contains(none.err, "--fetch and --out are needed")) << none.err;
  Result bad = RunHost("export " + mlp + " --fetch prediction --out x --bogus");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(Contains(bad.err, "unknown option '--bogus'")) << bad.err;
  Result typo = RunHost("export " + mlp + " --fetch predictoin --out " +
                        (dir.path() / "m").string());
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_TRUE(Contains(typo.err, "fetch 'predictoin' is not a var of the program")) << typo.err;
  Result label = RunHost("export " + mlp + " --feed x --feed y --fetch prediction --out " +
                         (dir.path() / "m").string());
  EXPECT_EQ(label.exit_code, 1);
  EXPECT_TRUE(Contains(label.err, "feed 'y' is not needed to compute the fetches")) << label.err;

  const std::string model = (dir.path() / "m").string();
  ASSERT_EQ(RunHost("export " + mlp + " --fetch prediction --out " + model).exit_code, 0);
  const std::string wrong = (dir.path() / "wrong.npy").string();
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"import numpy; numpy.save('" + wrong +
                         "', numpy.zeros((3, 31), dtype=numpy.float32))\"")
                            .c_str()),
            0);
  Result shape = RunHost("infer " + model + " --input " + wrong);
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_TRUE(Contains(shape.err, "feed 'x' is float32[-1, 32] but '" + wrong +
                                      "' holds float32[3, 31]"))
      << shape.err;
  Result missing = RunHost("infer " + (dir.path() / "nowhere").string() + " --input " + wrong);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(Contains(missing.err, "model.json")) << missing.err;
  Result cv = RunHost("convert " + (dir.path() / "nowhere").string() + " --out " +
                      (dir.path() / "o").string());
  EXPECT_EQ(cv.exit_code, 1);
  EXPECT_TRUE(Contains(cv.err, "does not exist")) << cv.err;
}

}  // namespace

// ---- GPU plugins on any machine ----------------------------------------------------------------
// The CUDA and NCCL plugins build wherever the toolkit is installed; with or without a GPU they
// are listed, and a communicator that cannot reduce the device's memory is refused at check.

bool Built(const std::string& plugin) {
  return fs::exists(fs::path(FLEET_BUILD_PLUGIN_DIR) / ("libfleet_" + plugin + ".so"));
}

TEST(CliGpuPluginsTest, PluginsListsTheCudaAndNcclPlugins) {
  if (!Built("cuda") || !Built("comm_nccl")) GTEST_SKIP() << "built without the CUDA toolkit";
  Result r = RunHost("plugins --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  std::map<std::string, std::vector<std::string>> components;
  for (const auto& p : doc["plugins"]) {
    for (const auto& c : p["components"]) {
      components[p["name"].get<std::string>()].push_back(c["kind"].get<std::string>() + ":" +
                                                         c["name"].get<std::string>());
    }
  }
  EXPECT_EQ(components["cuda"], (std::vector<std::string>{"device:cuda", "kernels:cuda"}));
  EXPECT_EQ(components["comm_nccl"], (std::vector<std::string>{"communicator:nccl"}));
  // The detail asks the device; on a machine without a GPU it says so instead of failing.
  Result detail = RunHost("plugins --json cuda");
  ASSERT_EQ(detail.exit_code, 0) << detail.err;
  Result text = RunHost("plugins cuda");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  if (Contains(detail.out, "\"count\": 0") || Contains(detail.out, "\"count\":0")) {
    EXPECT_TRUE(Contains(text.out, "no device present")) << text.out;
  }
}

TEST(CliGpuPluginsTest, CheckRefusesGlooWithTheCudaDeviceUnlessStaging) {
  if (!Built("cuda")) GTEST_SKIP() << "built without the CUDA toolkit";
  Result r = RunHost("--set device.backend=cuda --set strategy.mode=collective check");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "communicator 'gloo' (plugin 'comm_gloo') reduces memory of cpu, "
                              "not of device 'cuda'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "[comm] staging = true")) << r.err;
  // With staging the pairing is accepted; what remains is whether a GPU is present.
  Result staged = RunHost("--set device.backend=cuda --set strategy.mode=collective "
                          "--set comm.staging=true check");
  EXPECT_FALSE(Contains(staged.err, "communicator 'gloo'")) << staged.err;
  if (staged.exit_code != 0) {
    EXPECT_TRUE(Contains(staged.err, "no device of this kind is present")) << staged.err;
  }
}

TEST(CliGpuPluginsTest, CheckRefusesNcclWithTheCpuDevice) {
  if (!Built("comm_nccl")) GTEST_SKIP() << "built without NCCL";
  for (const char* staging : {"false", "true"}) {
    Result r = RunHost(std::string("--set comm.backend=nccl --set strategy.mode=collective "
                                   "--set comm.staging=") + staging + " check");
    EXPECT_NE(r.exit_code, 0) << staging;
    EXPECT_TRUE(Contains(r.err, "communicator 'nccl' (plugin 'comm_nccl') reduces memory of "
                                "cuda, not of device 'cpu'")) << r.err;
    EXPECT_TRUE(Contains(r.err, "cannot stage through host memory")) << r.err;
  }
}

// ---- [passes.NAME]: a plugin pass's options --------------------------------------------------

// A program whose last op has a single Out (what the edit_pass fixture appends to), run by the
// C99 pass plugin edit_pass (tests/ir/fixtures) as a [strategy] pass.
class CliPassOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    program_ = dir_.Write("net.fleet",
                          "x = data(\"x\", shape=[-1, 4], dtype=\"float32\")\n"
                          "h = fc(x, size=3)\n"
                          "m = mean(h)\n");
  }
  std::string Base() const {
    return "--set 'plugins.dirs=[\"" FLEET_PASS_FIXTURE_DIR "\"]' "
           "--set 'plugins.load=[\"edit_pass\"]' --set 'strategy.passes=[\"edit_pass\"]' ";
  }
  TempDir dir_;
  fs::path program_;
};

TEST_F(CliPassOptionsTest, OptionsFromSetReachThePassAndShowSaysSo) {
  Result r = RunHost(Base() + "--set passes.edit_pass.count=2 --set passes.edit_pass.note=hi " +
                     "show '" + program_.string() + "' --stage transpiled --program main");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "# passes run:\n#   edit_pass {count = 2")) << r.out;
  EXPECT_TRUE(Contains(r.out, "note = \"hi\"")) << r.out;
  // Two chained scales were appended, named after the note.
  EXPECT_TRUE(Contains(r.out, ".hi_0")) << r.out;
  EXPECT_TRUE(Contains(r.out, ".hi_1")) << r.out;
  EXPECT_FALSE(Contains(r.out, ".hi_2")) << r.out;
  // Without options the pass runs with its defaults (count 1, note "edited").
  Result d = RunHost(Base() + "show '" + program_.string() + "' --stage transpiled");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(Contains(d.out, ".edited_0")) << d.out;
  EXPECT_FALSE(Contains(d.out, ".edited_1")) << d.out;
}

TEST_F(CliPassOptionsTest, TableInAFileWithPositionsForBadValues) {
  fs::path good = dir_.Write("good.toml", "[passes.edit_pass]\ncount = 3\nfactor = 2\n");
  Result r = RunHost(Base() + "--config '" + good.string() + "' show '" + program_.string() +
                     "' --stage transpiled --program main");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // An integer is accepted for a real option (factor), as for every fleet.toml number.
  EXPECT_TRUE(Contains(r.out, "edit_pass {count = 3, dangle = false, factor = 2.0")) << r.out;

  fs::path bad = dir_.Write("bad.toml", "[passes.edit_pass]\ncount = 1\nnote = 7\n");
  Result b = RunHost(Base() + "--config '" + bad.string() + "' show '" + program_.string() +
                     "' --stage transpiled");
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_TRUE(Contains(b.err, bad.string() + ":3:8: passes.edit_pass.note: ")) << b.err;
  EXPECT_TRUE(Contains(b.err, "string")) << b.err;
}

TEST_F(CliPassOptionsTest, UnknownKeysPassesAndStrategyOwnedOptionsAreRefused) {
  Result r = RunHost(Base() + "--set passes.edit_pass.cuont=2 check");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "--set passes.edit_pass.cuont: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "no option 'cuont'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "it accepts count, dangle")) << r.err;

  Result p = RunHost(Base() + "--set passes.edit_pas.count=2 check");
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_TRUE(Contains(p.err, "no pass 'edit_pas' is registered (did you mean 'edit_pass'?)"))
      << p.err;

  // The built-in passes take these from [strategy]: one place per setting.
  Result s = RunHost("--set passes.grad_allreduce.nrings=2 check");
  EXPECT_EQ(s.exit_code, 1);
  EXPECT_TRUE(Contains(s.err, "--set passes.grad_allreduce.nrings is set by strategy.nrings"))
      << s.err;
}

// sync_batch_norm all-reduces batch statistics between trainers, which a parameter-server job
// cannot do: refused there, naming where it was set.
TEST(CliCheckTest, SyncBatchNormIsRefusedInAParameterServerJob) {
  TempDir dir;
  const fs::path toml = dir.Write(
      "fleet.toml", "[strategy]\nmode = \"pserver\"\nsync_batch_norm = true\n[role]\n"
                    "pserver_endpoints = [\"127.0.0.1:6170\"]\n");
  Result r = RunHost("--config " + toml.string() + " check " +
                     (kExamples / "cnn/cnn.fleet").string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, toml.string() + ":3:19: strategy.sync_batch_norm = true needs a "
                              "collective job"))
      << r.err;
}

// strategy.passes is checked by the code Transpile runs, whatever the job's mode: `check`
// accepted an unknown pass in a job of one trainer (which does not transpile) while `run`
// refused it. The error names the key where it was set, the pass and every registered pass.
TEST(CliCheckTest, AnUnknownStrategyPassIsRefusedByCheckAsByRun) {
  TempDir dir;
  const fs::path toml = dir.Write("fleet.toml", "[train]\nsteps = 1\n[strategy]\n"
                                                "passes = [\"grad_allreduce\", \"no_such\"]\n");
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  for (const std::string& command : {std::string("check"), "check " + mlp, "run " + mlp}) {
    SCOPED_TRACE(command);
    Result r = RunHost("--config " + toml.string() + " " + command);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(Contains(r.err, toml.string() + ":4:10: strategy.passes: no pass 'no_such' is "
                                "registered; registered: fuse_allreduce, grad_allreduce, "
                                "local_sgd, pserver, sync_batch_norm; a plugin's pass needs "
                                "its plugin in [plugins] load"))
        << r.err;
    EXPECT_FALSE(Contains(r.out, "check passed")) << r.out;
  }
  Result set = RunHost("--set 'strategy.passes=[\"grad_allreduc\"]' check");
  EXPECT_EQ(set.exit_code, 1) << set.err;
  EXPECT_TRUE(Contains(set.err, "--set strategy.passes: no pass 'grad_allreduc' is registered "
                                "(did you mean 'grad_allreduce'?)"))
      << set.err;
}

// ---- listing ----------------------------------------------------------------------------------

TEST(CliTest, DevicesListsEveryUnit) {
  Result r = RunHost("devices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "Available devices:\n  cpu:0 ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "host-memory,sync-streams,cpu-random-streams  (plugin cpu)"))
      << r.out;
  Result j = RunHost("devices --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["schema_version"], 1);
  ASSERT_FALSE(doc["devices"].empty());
  const auto& cpu = doc["devices"][0];
  EXPECT_EQ(cpu["device"], "cpu");
  EXPECT_EQ(cpu["ordinal"], 0);
  EXPECT_GT(cpu["total_memory"].get<uint64_t>(), 0u);
  EXPECT_GE(cpu["compute_units"].get<int>(), 1);
  // Every device component is either listed by unit or said to be absent, with why.
  std::set<std::string> seen;
  for (const auto& d : doc["devices"]) seen.insert(d["device"].get<std::string>());
  for (const auto& a : doc["absent"]) {
    seen.insert(a["device"].get<std::string>());
    EXPECT_FALSE(a["reason"].get<std::string>().empty());
  }
  if (Built("cuda")) {
    EXPECT_TRUE(seen.count("cuda")) << j.out;
  }
  EXPECT_EQ(RunHost("devices --bogus").exit_code, 2);
}

TEST(CliTest, PluginsJsonHasASchemaVersionAndLoadTimes) {
  Result r = RunHost("plugins --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  ASSERT_FALSE(doc["plugins"].empty());
  for (const auto& p : doc["plugins"]) {
    ASSERT_TRUE(p.contains("load_ms")) << p.dump();
    EXPECT_GE(p["load_ms"].get<double>(), 0.0);
  }
}

// ---- secure mode --------------------------------------------------------------------------------

// A setuid copy of fleet-host must not let its caller choose the code it loads: as root, a copy
// owned by nobody with the setuid bit runs with another effective user (AT_SECURE), and then
// FLEET_PLUGIN_PATH, plugins.dirs and plugins.allow_insecure are ignored.
TEST(CliSecureModeTest, SetuidHostIgnoresThePathAndAllowInsecure) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a setuid copy owned by another user needs root";
  TempDir dir;
  const fs::path bin = dir.path() / "bin", plugins = dir.path() / "lib/fleet/plugins";
  const fs::path other = dir.path() / "other";
  for (const fs::path& d : {bin, plugins, other}) fs::create_directories(d);
  for (const fs::path& d : {dir.path(), bin, dir.path() / "lib", dir.path() / "lib/fleet", plugins,
                            other}) {
    ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  }
  fs::copy_file(FLEET_HOST_EXE, bin / "fleet-host");
  fs::copy_file(fs::path(FLEET_BUILD_PLUGIN_DIR) / "libfleet_cpu.so", plugins / "libfleet_cpu.so");
  fs::copy_file(fs::path(FLEET_BUILD_PLUGIN_DIR) / "libfleet_comm_gloo.so",
                other / "libfleet_comm_gloo.so");
  // An installed plugin others can write: refused even with allow_insecure.
  fs::copy_file(fs::path(FLEET_BUILD_PLUGIN_DIR) / "libfleet_comm_gloo.so",
                plugins / "libfleet_comm_gloo.so");
  ASSERT_EQ(::chmod((plugins / "libfleet_comm_gloo.so").c_str(), 0757), 0);
  ASSERT_EQ(::chown((bin / "fleet-host").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod((bin / "fleet-host").c_str(), 04755), 0);

  const std::string cmd = "cd '" + dir.path().string() + "' && FLEET_PLUGIN_PATH='" +
                          other.string() + "' timeout 60 '" + (bin / "fleet-host").string() +
                          "' --set 'plugins.dirs=[\"" + other.string() +
                          "\"]' --set plugins.allow_insecure=true plugins --json > out.json "
                          "2> err.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(dir.path() / "err.txt");
  auto doc = nlohmann::json::parse(ReadFile(dir.path() / "out.json"));
  ASSERT_EQ(doc["search_path"].size(), 1u) << doc.dump(1);
  EXPECT_EQ(doc["search_path"][0], plugins.string());
  ASSERT_EQ(doc["plugins"].size(), 1u) << doc.dump(1);
  EXPECT_EQ(doc["plugins"][0]["name"], "cpu");
  ASSERT_EQ(doc["rejected"].size(), 1u) << doc.dump(1);
  EXPECT_TRUE(Contains(doc["rejected"][0]["reason"], "writable by others")) << doc.dump(1);
  EXPECT_TRUE(Contains(ReadFile(dir.path() / "err.txt"), "secure mode"));
}

// Each plugin is loaded in a child process for the listing: one whose entry crashes is a
// rejection naming the signal, and the others are still listed.
TEST(CliTest, PluginsListsACrashingPluginAsRejected) {
  Result r = RunHost("plugins --json", "FLEET_PLUGIN_PATH=" FLEET_CLI_FIXTURE_DIR);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  bool crash_listed = false, cpu_listed = false;
  for (const auto& rj : doc["rejected"]) {
    if (rj["plugin"] == "crash_entry") {
      crash_listed = true;
      EXPECT_TRUE(Contains(rj["reason"], "was killed by SIGSEGV while loading")) << rj.dump();
    }
  }
  for (const auto& p : doc["plugins"]) cpu_listed |= p["name"] == "cpu";
  EXPECT_TRUE(crash_listed) << r.out;
  EXPECT_TRUE(cpu_listed) << r.out;
  Result one = RunHost("plugins crash_entry", "FLEET_PLUGIN_PATH=" FLEET_CLI_FIXTURE_DIR);
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_TRUE(Contains(one.err, "killed by SIGSEGV")) << one.err;
}

// Hostile configs are refused with a message, not a crash or a hang: a 200000-part dotted key
// used to overflow the stack (SIGSEGV), a 60000-part --set key too, and a FIFO blocked forever.
TEST(CliTest, CheckRefusesDeepKeysAndNonRegularConfigs) {
  std::string key = "k";
  for (int i = 1; i < 200000; ++i) key += ".k";
  TempDir dir;
  fs::path deep = dir.Write("deep.toml", "[plugins.config.cpu]\n" + key + " = 1\n");
  Result r = RunHost("--config '" + deep.string() + "' check");
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 300);
  EXPECT_TRUE(Contains(r.err, deep.string() + ":2:1: key nested 200003 levels deep; at most 64"))
      << r.err.substr(0, 300);

  Result set = RunHost("--set 'plugins.config.cpu." + key.substr(0, 2 * 60000 - 1) + "=1' check");
  EXPECT_EQ(set.exit_code, 1) << set.err.substr(0, 300);
  EXPECT_TRUE(Contains(set.err, "--set: key 'plugins.config...' has 60003 parts; at most 64"))
      << set.err.substr(0, 300);

  fs::path fifo = dir.path() / "fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result from_fifo = RunHost("--config '" + fifo.string() + "' check");
  EXPECT_EQ(from_fifo.exit_code, 1) << from_fifo.err;
  EXPECT_TRUE(Contains(from_fifo.err, "'" + fifo.string() + "': it is a FIFO")) << from_fifo.err;
  Result zero = RunHost("--config /dev/zero check");
  EXPECT_EQ(zero.exit_code, 1) << zero.err;
  EXPECT_TRUE(Contains(zero.err, "'/dev/zero': it is a character device")) << zero.err;
}

// ---- hostile input files ------------------------------------------------------------------

// A FIFO nobody writes to, or a device, given where the host reads an input file, is refused at
// once naming what it is: opening it blocking (or reading /dev/zero whole) would never end.
TEST(CliHostileInputTest, AFifoOrADeviceAsTheProgramIsRefused) {
  TempDir dir;
  const fs::path fifo = dir.path() / "prog.fleet";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result r = RunHost("check " + fifo.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "is a FIFO, not a regular file")) << r.err;
  Result z = RunHost("check /dev/zero");
  EXPECT_EQ(z.exit_code, 1) << z.err;
  EXPECT_TRUE(Contains(z.err, "'/dev/zero' is a character device")) << z.err;
}

// Trains the quick-start MLP for `steps` steps with checkpoints in `ckpt` and exports its
// prediction from the newest one to `model`.
void TrainAndExport(int steps, const std::string& ckpt, const std::string& model) {
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  const std::string config = "--config " + (kExamples / "mlp/fleet.toml").string();
  Result run = RunHost(config + " run " + mlp + " --set train.steps=" + std::to_string(steps) +
                       " --set checkpoint.dir=" + ckpt);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Result ex = RunHost(config + " export " + mlp + " --feed x --fetch prediction --out " + model +
                      " --checkpoint " + ckpt);
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
}

TEST(CliHostileInputTest, AFifoInACheckpointOrAnExportIsRefused) {
  TempDir dir;
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  const std::string config = "--config " + (kExamples / "mlp/fleet.toml").string();
  const std::string ckpt = (dir.path() / "ckpt").string();
  const std::string model = (dir.path() / "model").string();
  ASSERT_NO_FATAL_FAILURE(TrainAndExport(3, ckpt, model));

  // The step's manifest.json a FIFO.
  const fs::path step = fs::path(ckpt) / "step_0000003";
  const fs::path manifest = step / "manifest.json";
  const std::string manifest_text = ReadFile(manifest);
  fs::remove(manifest);
  ASSERT_EQ(::mkfifo(manifest.c_str(), 0600), 0);
  Result r1 = RunHost(config + " run " + mlp + " --resume --set train.steps=4 --set checkpoint.dir=" +
                      ckpt);
  // The step is refused (resuming falls back to an older one, or fails), naming the FIFO.
  EXPECT_NE(r1.exit_code, 124) << "hung";
  EXPECT_TRUE(Contains(r1.err, "FIFO")) << r1.err;
  fs::remove(manifest);
  fs::remove_all(fs::path(ckpt) / "step_0000004");

  // A FIFO named in the manifest's files.
  auto doc = nlohmann::json::parse(manifest_text);
  ASSERT_TRUE(doc.contains("files")) << manifest_text;
  std::string name;
  if (doc["files"].is_object()) {
    name = doc["files"].begin().key();
  } else {
    name = doc["files"][0]["name"].get<std::string>();
  }
  std::ofstream(manifest) << manifest_text;
  fs::remove(step / name);
  ASSERT_EQ(::mkfifo((step / name).c_str(), 0600), 0);
  Result r2 = RunHost(config + " run " + mlp + " --resume --set train.steps=4 --set checkpoint.dir=" +
                      ckpt);
  EXPECT_NE(r2.exit_code, 124) << "hung";
  EXPECT_TRUE(Contains(r2.err, "FIFO")) << r2.err;

  // An export whose program is a FIFO.
  const fs::path mj = fs::path(model) / "model.json";
  auto m = nlohmann::json::parse(ReadFile(mj));
  m["program"] = "fifo";
  std::ofstream(mj) << m.dump();
  ASSERT_EQ(::mkfifo((fs::path(model) / "fifo").c_str(), 0600), 0);
  const std::string input = (dir.path() / "x.npy").string();
  Result inf = RunHost("infer " + model + " --input x=" + input);
  EXPECT_NE(inf.exit_code, 0);
  EXPECT_NE(inf.exit_code, 124) << "hung";
  EXPECT_TRUE(Contains(inf.err, "FIFO")) << inf.err;
}

// A manifest's data.batches beyond what the job's steps read is refused at once, naming the
// manifest and the value: the source skipped it batch by batch, forever.
TEST(CliHostileInputTest, AnImpossibleBatchCountInACheckpointIsRefused) {
  TempDir dir;
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  const std::string config = "--config " + (kExamples / "mlp/fleet.toml").string();
  const std::string ckpt = (dir.path() / "ckpt").string();
  Result run = RunHost(config + " run " + mlp + " --set train.steps=3 --set checkpoint.dir=" +
                       ckpt);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const auto& e : fs::directory_iterator(ckpt)) {
    if (e.path().filename() != "step_0000003") fs::remove_all(e.path());
  }
  const fs::path manifest = fs::path(ckpt) / "step_0000003/manifest.json";
  auto doc = nlohmann::json::parse(ReadFile(manifest));
  doc["data"]["batches"] = int64_t{4611686018427387904};
  std::ofstream(manifest) << doc.dump();
  Result r = RunHost(config + " run " + mlp + " --resume --set train.steps=4 --set checkpoint.dir=" +
                     ckpt);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "data.batches = 4611686018427387904")) << r.err;
  EXPECT_TRUE(Contains(r.err, manifest.string())) << r.err;
}

// A checkpoint whose step is huge (here 2^60, in a directory named for it) is resumed as a job
// with nothing left to run, at once: moving the data source past its batches and counting the
// programs' launches went step by step, so the resume spun for ever. Below train.steps those
// loops are bounded by the job itself.
TEST(CliHostileInputTest, AHugeCheckpointStepDoesNotSpin) {
  TempDir dir;
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  const std::string config = "--config " + (kExamples / "mlp/fleet.toml").string();
  const fs::path ckpt = dir.path() / "ckpt";
  Result run = RunHost(config + " run " + mlp + " --set train.steps=2 --set checkpoint.dir=" +
                       ckpt.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const int64_t huge = int64_t{1} << 60;
  const fs::path step = ckpt / ("step_" + std::to_string(huge));
  fs::rename(ckpt / "step_0000002", step);
  auto doc = nlohmann::json::parse(ReadFile(step / "manifest.json"));
  doc["step"] = huge;
  doc["data"]["batches"] = huge;
  std::ofstream(step / "manifest.json") << doc.dump();
  const auto start = std::chrono::steady_clock::now();
  Result r = RunHost(config + " run " + mlp + " --resume --set train.steps=4 --set checkpoint.dir=" +
                     ckpt.string());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "the checkpoint is at step " + std::to_string(huge) +
                                  ": all 4 steps of train.steps are done"))
      << r.out << r.err;
}

// Var names in an export's model.json follow the program's name rule: a fetch named with a
// terminal escape or a path that leaves --out is refused, the name quoted escaped.
TEST(CliHostileInputTest, AnExportWithABadFetchNameIsRefused) {
  TempDir dir;
  const std::string mlp = (kExamples / "mlp/mlp.fleet").string();
  const std::string config = "--config " + (kExamples / "mlp/fleet.toml").string();
  const std::string ckpt = (dir.path() / "ckpt").string();
  const fs::path model = dir.path() / "a/b/model";
  ASSERT_NO_FATAL_FAILURE(TrainAndExport(2, ckpt, model.string()));
  const std::string input = (dir.path() / "x.npy").string();
  const std::string script = "import numpy; numpy.save('" + input +
                             "', numpy.zeros((5, 32), dtype=numpy.float32))";
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"" + script + "\"").c_str()), 0);
  const fs::path mj = model / "model.json";
  const std::string original = ReadFile(mj);
  for (const std::string& bad : {std::string("p\x1b[2J"), std::string("../../escaped")}) {
    auto m = nlohmann::json::parse(original);
    m["fetches"][0]["name"] = bad;
    std::ofstream(mj) << m.dump();
    const fs::path out = dir.path() / "a/b/out";
    Result r = RunHost("infer " + model.string() + " --input x=" + input + " --out " +
                       out.string());
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(Contains(r.err, mj.string())) << r.err;
    EXPECT_TRUE(Contains(r.err, "fetch name")) << r.err;
    EXPECT_FALSE(Contains(r.err + r.out, "\x1b")) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "escaped.npy"));
    EXPECT_FALSE(fs::exists(dir.path() / "a/escaped.npy"));
  }
}

namespace fleet {
namespace {

// A parameter-server script's a_sync and a_sync_configs merge with fleet.toml as the other
// keys do; a_sync also meets sync_mode, its opposite, and the communicator's configs need
// a_sync = true from one side or the other.
TEST(CliProgramStrategyTest, TheProgramsASyncMeetsSyncModeAndItsConfigs) {
  TempDir dir;
  const std::string model =
      "import paddle\n"
      "from paddle.distributed import fleet\n"
      "x = paddle.static.data(name='x', shape=[None, 32], dtype='float32')\n"
      "y = paddle.static.data(name='y', shape=[None, 1], dtype='int64')\n"
      "p = paddle.static.nn.fc(input=x, size=2, act='softmax')\n"
      "cost = paddle.fluid.layers.mean(paddle.fluid.layers.cross_entropy(p, y))\n"
      "strategy = fleet.DistributedStrategy()\n";
  const std::string minimize =
      "opt = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.1), strategy)\n"
      "opt.minimize(cost)\n";
  const fs::path a_sync = dir.Write(
      "a_sync.fleet", model + "strategy.a_sync = True\n"
                              "strategy.a_sync_configs = {'max_merge_var_num': 4}\n" + minimize);
  const std::string show =
      "show " + a_sync.string() + " --stage transpiled --pservers 127.0.0.1:6170";
  Result ok = RunHost(show + " --set strategy.a_sync_configs.send_queue_size=4",
                      CleanRoleEnv(""), dir.path());
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  Result clash = RunHost(show + " --set strategy.sync_mode=true", CleanRoleEnv(""), dir.path());
  EXPECT_NE(clash.exit_code, 0);
  EXPECT_TRUE(Contains(clash.err, "strategy.a_sync at " + a_sync.string() +
                                      ":8:10 = true means sync_mode = false, but --set "
                                      "strategy.sync_mode sets sync_mode = true; keep one"))
      << clash.err;
  Result merge = RunHost(show + " --set strategy.a_sync_configs.max_merge_var_num=2",
                         CleanRoleEnv(""), dir.path());
  EXPECT_NE(merge.exit_code, 0);
  EXPECT_TRUE(Contains(merge.err, "sets strategy.a_sync_configs.max_merge_var_num = 4, but "
                                      "--set strategy.a_sync_configs.max_merge_var_num sets it "
                                      "to 2; keep one"))
      << merge.err;
  const fs::path sync = dir.Write("sync.fleet", model + minimize);
  Result lone = RunHost("show " + sync.string() +
                            " --stage transpiled --pservers 127.0.0.1:6170 --set "
                            "strategy.a_sync_configs.max_merge_var_num=2",
                        CleanRoleEnv(""), dir.path());
  EXPECT_NE(lone.exit_code, 0);
  EXPECT_TRUE(Contains(lone.err, "--set strategy.a_sync_configs.max_merge_var_num: "
                                     "strategy.a_sync_configs.max_merge_var_num configures the "
                                     "communicator of strategy.a_sync = true, which is not set"))
      << lone.err;
}

// The quick start as a Paddle collective script writes it: the DistributedStrategy set in the
// program file reaches the transpiler, and merges with [strategy] of fleet.toml.
TEST(CliProgramStrategyTest, TheProgramsDistributedStrategyMergesWithFleetToml) {
  TempDir dir;
  const fs::path program = dir.Write(
      "mlp.fleet",
      "import paddle\n"
      "from paddle.distributed import fleet\n"
      "x = paddle.static.data(name='x', shape=[None, 32], dtype='float32')\n"
      "y = paddle.static.data(name='y', shape=[None, 1], dtype='int64')\n"
      "h = paddle.static.nn.fc(input=x, size=16, act='tanh')\n"
      "p = paddle.static.nn.fc(input=h, size=2, act='softmax')\n"
      "cost = paddle.fluid.layers.mean(paddle.fluid.layers.cross_entropy(p, y))\n"
      "fleet.init(is_collective=True)\n"
      "strategy = fleet.DistributedStrategy()\n"
      "strategy.nccl_comm_num = 2\n"
      "opt = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.1), strategy)\n"
      "opt.minimize(cost)\n");
  const std::string show = "show " + program.string() + " --stage transpiled --world-size 2";
  // Two rings: the gradients alternate between ring 0 and ring 1.
  Result two = RunHost(show, CleanRoleEnv(""), dir.path());
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_TRUE(Contains(two.out, "ring_id=1}")) << two.out;
  Result one = RunHost(show + " --set strategy.nrings=1", CleanRoleEnv(""), dir.path());
  EXPECT_NE(one.exit_code, 0);
  EXPECT_TRUE(Contains(one.err, "strategy.nccl_comm_num at " + program.string() +
                                    ":10:10 sets strategy.nrings = 2, but --set strategy.nrings "
                                    "sets it to 1; keep one"))
      << one.err;
  dir.Write("fleet.toml", "[strategy]\nnrings = 1\n");
  Result toml = RunHost(show, CleanRoleEnv(""), dir.path());
  EXPECT_NE(toml.exit_code, 0);
  EXPECT_TRUE(Contains(toml.err, "but fleet.toml:2:10 sets it to 1; keep one"))
      << toml.err;
  dir.Write("fleet.toml", "[strategy]\nnrings = 2\n");  // agreeing is fine
  Result agree = RunHost(show, CleanRoleEnv(""), dir.path());
  EXPECT_EQ(agree.exit_code, 0) << agree.err;
  // fleet.init(is_collective=True) in a parameter-server job.
  dir.Write("fleet.toml", "");
  Result ps = RunHost(show + " --pservers 127.0.0.1:6170", CleanRoleEnv(""), dir.path());
  EXPECT_NE(ps.exit_code, 0);
  EXPECT_TRUE(Contains(ps.err, "fleet.init at " + program.string() +
                                   ":8:1 asks for collective training (is_collective=True), but "
                                   "the job's strategy resolves to \"pserver\""))
      << ps.err;
}

}  // namespace
}  // namespace fleet
