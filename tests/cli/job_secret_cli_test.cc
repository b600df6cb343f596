// The job secret from a file, as users give it: `fleet-host launch` with FLEET_JOB_SECRET_FILE,
// and ranks started by another launcher with [comm] secret_file, real processes on a real TCP
// store. Every wait has a deadline.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../dist/rank_process.h"
#include "common/free_ports.h"

namespace {

namespace fs = std::filesystem;
using fleet::dist_test::RankProcess;
using std::chrono::milliseconds;

const std::string kHost = FLEET_HOST_EXE;
const fs::path kExamples = FLEET_EXAMPLES_DIR;
const std::string kSecretA = "0123456789abcdef0123456789abcdef";
const std::string kSecretB = "fedcba9876543210fedcba9876543210";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A port nobody listens on at the moment (the rank that serves the store binds it again).
std::string FreePort() {
  const int port = fleet::testing::FreeLoopbackPort();
  return port == 0 ? "" : std::to_string(port);
}

class JobSecretCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_secret_cli_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path SecretFile(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text << "\n";
    ::chmod(p.c_str(), mode);
    return p;
  }

  // `fleet-host run` of the quick-start MLP as rank `rank` of a job of two on the TCP store at
  // 127.0.0.1:port, with `sets` and `env` on top.
  std::unique_ptr<RankProcess> StartRank(int rank, const std::string& port,
                                         const std::vector<std::string>& sets,
                                         std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {kHost, "run", (kExamples / "mlp" / "mlp.fleet").string(),
                                     "--config", (kExamples / "mlp" / "fleet.toml").string(),
                                     "--set", "train.steps=2", "--set", "comm.timeout_s=20"};
    for (const std::string& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    env["PADDLE_TRAINER_ID"] = std::to_string(rank);
    env["PADDLE_TRAINERS_NUM"] = "2";
    env["LOCAL_WORLD_SIZE"] = "2";
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = port;
    env.emplace("FLEET_JOB_SECRET", "");  // whatever the test's own environment holds
    env.emplace("FLEET_JOB_SECRET_FILE", "");
    auto p = std::make_unique<RankProcess>(args, env, dir_ / ("rank" + std::to_string(rank) +
                                                              ".log"));
    EXPECT_TRUE(p->started());
    return p;
  }

  fs::path dir_;
};

// Two ranks started by hand, each with its own way of naming the same file: they train.
TEST_F(JobSecretCliTest, RanksWithTheSameSecretFileTrainTogether) {
  const fs::path secret = SecretFile("secret", kSecretA);
  const std::string port = FreePort();
  ASSERT_FALSE(port.empty());
  auto rank0 = StartRank(0, port, {"comm.secret_file=" + secret.string()});
  auto rank1 = StartRank(1, port, {}, {{"FLEET_JOB_SECRET_FILE", secret.string()}});
  EXPECT_EQ(rank1->Wait(milliseconds(90000)), 0) << rank1->Output();
  EXPECT_EQ(rank0->Wait(milliseconds(90000)), 0) << rank0->Output();
}

// A rank holding another secret is refused by the store rank 0 serves, and says so; rank 0
// logs the refusal with the stranger's address.
TEST_F(JobSecretCliTest, TheStoreRefusesARankWithAnotherSecretFile) {
  const fs::path right = SecretFile("right", kSecretA);
  const fs::path wrong = SecretFile("wrong", kSecretB);
  const std::string port = FreePort();
  ASSERT_FALSE(port.empty());
  auto rank0 = StartRank(0, port, {"comm.secret_file=" + right.string(), "comm.timeout_s=5"});
  auto rank1 = StartRank(1, port, {"comm.secret_file=" + wrong.string(), "comm.timeout_s=5"});
  const int code1 = rank1->Wait(milliseconds(30000));
  const std::string out1 = rank1->Output();
  EXPECT_NE(code1, -1) << "still running: " << out1;
  EXPECT_NE(code1, 0) << out1;
  EXPECT_TRUE(Contains(out1, "wrong job secret")) << out1;
  EXPECT_TRUE(Contains(out1, "127.0.0.1:" + port)) << out1;
  // Rank 0 never hears from rank 1: it fails at its timeout, having logged the refusal.
  const int code0 = rank0->Wait(milliseconds(30000));
  const std::string out0 = rank0->Output();
  EXPECT_NE(code0, 0) << out0;
  EXPECT_TRUE(Contains(out0, "127.0.0.1")) << out0;
  EXPECT_TRUE(Contains(out0, "wrong job secret")) << out0;
}

// A secret file others may read is refused before the job waits for anyone, naming it.
TEST_F(JobSecretCliTest, RunRefusesASecretFileOthersMayRead) {
  const fs::path open = SecretFile("open", kSecretA, 0640);
  const std::string port = FreePort();
  auto rank0 = StartRank(0, port, {"comm.secret_file=" + open.string()});
  const int code = rank0->Wait(milliseconds(30000));
  const std::string out = rank0->Output();
  EXPECT_EQ(code, 1) << out;
  EXPECT_LT(rank0->seconds(), 15.0) << out;
  EXPECT_TRUE(Contains(out, "comm.secret_file: job secret file '" + open.string() + "'")) << out;
  EXPECT_TRUE(Contains(out, "mode 0640")) << out;
}

TEST_F(JobSecretCliTest, LaunchHandsTheFilesSecretToItsRanks) {
  const fs::path secret = SecretFile("secret", kSecretB);
  const fs::path seen = dir_ / "seen";
  RankProcess launch({kHost, "launch", "--nproc", "1", "--log-dir", (dir_ / "log").string(), "--",
                      "/bin/sh", "-c", "printf %s \"$FLEET_JOB_SECRET\" > '" + seen.string() + "'"},
                     {{"FLEET_JOB_SECRET", ""}, {"FLEET_JOB_SECRET_FILE", secret.string()}},
                     dir_ / "launch.log");
  ASSERT_TRUE(launch.started());
  EXPECT_EQ(launch.Wait(milliseconds(30000)), 0) << launch.Output();
  EXPECT_EQ(ReadFile(seen), kSecretB);
}

TEST_F(JobSecretCliTest, LaunchRefusesABadSecretFileBeforeStartingAnything) {
  const fs::path seen = dir_ / "seen";
  const std::vector<std::string> command = {"/bin/sh", "-c", "touch '" + seen.string() + "'"};
  struct Case {
    fs::path file;
    std::string says;
  };
  const std::vector<Case> cases = {{SecretFile("open", kSecretA, 0644), "mode 0644"},
                                   {SecretFile("short", "too short"), "holds 9 bytes"},
                                   {"/dev/zero", "a character device"}};
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {"--nnodes", "2", "--node-rank", "1", "--master",
                                     "127.0.0.1:" + FreePort()}}) {
    for (const Case& c : cases) {
      std::vector<std::string> args = {kHost, "launch", "--nproc", "1", "--log-dir",
                                       (dir_ / "log").string()};
      args.insert(args.end(), extra.begin(), extra.end());
      args.push_back("--");
      args.insert(args.end(), command.begin(), command.end());
      RankProcess launch(args,
                         {{"FLEET_JOB_SECRET", ""}, {"FLEET_JOB_SECRET_FILE", c.file.string()}},
                         dir_ / "launch.log");
      ASSERT_TRUE(launch.started());
      const int code = launch.Wait(milliseconds(30000));
      const std::string out = launch.Output();
      EXPECT_NE(code, 0) << out;
      EXPECT_NE(code, -1) << out;
      EXPECT_TRUE(Contains(out, "FLEET_JOB_SECRET_FILE: job secret file '" + c.file.string()))
          << out;
      EXPECT_TRUE(Contains(out, c.says)) << out;
      EXPECT_FALSE(fs::exists(seen)) << "a rank was started: " << out;
    }
  }
}

TEST_F(JobSecretCliTest, LaunchHelpSaysWhereTheSecretComesFrom) {
  RankProcess help({kHost, "launch", "--help"}, {}, dir_ / "help.log");
  ASSERT_EQ(help.Wait(milliseconds(30000)), 0);
  const std::string out = help.Output();
  EXPECT_TRUE(Contains(out, "FLEET_JOB_SECRET_FILE")) << out;
  EXPECT_TRUE(Contains(out, "chmod 600")) << out;
  EXPECT_TRUE(Contains(out, "secret_file")) << out;
}

}  // namespace
