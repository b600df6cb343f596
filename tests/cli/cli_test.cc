#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

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
    ASSERT_EQ(p["components"].size(), 1u);
    EXPECT_EQ(p["components"][0]["kind"], "device");
    EXPECT_EQ(p["components"][0]["name"], "cpu");
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
  Result r = RunHost("--set strategy.mode=collective check");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "comm.backend = \"gloo\": plugin 'comm_gloo'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "provides no communicator named 'gloo'")) << r.err;
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

}  // namespace
