// Two "hosts": network namespaces joined by a veth pair, one trainer in each, talking over
// 10.231.0.1 <-> 10.231.0.2 only (no loopback between them). Rank 0 serves the rendezvous store
// on its own address, rank 1 reaches it across the link, and Gloo connects across it too. Needs
// root and iproute2's `ip netns`; skips with the reason when the machine does not allow it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rank_process.h"

namespace fleet::dist_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const std::string kHost = FLEET_HOST_EXE;
const fs::path kExamples = FLEET_EXAMPLES_DIR;

// Runs a shell command; true when it exits 0. Output goes to `log`.
bool Sh(const std::string& cmd, const fs::path& log) {
  return std::system((cmd + " >>'" + log.string() + "' 2>&1").c_str()) == 0;
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tag_ = std::to_string(getpid() % 100000);
    dir_ = fs::temp_directory_path() / ("fleet_netns_" + tag_);
    fs::create_directories(dir_);
    log_ = dir_ / "setup.log";
    const std::string a = "fleet_a" + tag_, b = "fleet_b" + tag_;
    ns_ = {a, b};
    const std::vector<std::string> steps = {
        "ip netns add " + a,
        "ip netns add " + b,
        "ip link add va" + tag_ + " type veth peer name vb" + tag_,
        "ip link set va" + tag_ + " netns " + a,
        "ip link set vb" + tag_ + " netns " + b,
        "ip -n " + a + " addr add 10.231.0.1/24 dev va" + tag_,
        "ip -n " + b + " addr add 10.231.0.2/24 dev vb" + tag_,
        "ip -n " + a + " link set va" + tag_ + " up",
        "ip -n " + b + " link set vb" + tag_ + " up",
        "ip -n " + a + " link set lo up",
        "ip -n " + b + " link set lo up",
    };
    for (const std::string& step : steps) {
      if (!Sh(step, log_)) {
        std::ifstream in(log_);
        std::string why((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        skip_ = "network namespaces are not available here (`" + step + "` failed: " + why +
                "); the two-host test needs root and iproute2";
        return;
      }
    }
  }
  void TearDown() override {
    for (const std::string& ns : ns_) Sh("ip netns del " + ns, log_);  // also drops the veth
    fs::remove_all(dir_);
  }

  std::vector<std::string> Run(const std::string& ns, const std::vector<std::string>& sets) {
    std::vector<std::string> args = {"/usr/sbin/ip", "netns", "exec", ns, kHost, "run",
                                     (kExamples / "mlp" / "mlp.fleet").string(), "--config",
                                     (kExamples / "mlp" / "fleet.toml").string()};
    if (!fs::exists(args[0])) args[0] = "/sbin/ip";
    for (const auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return args;
  }

  std::string tag_, skip_;
  fs::path dir_, log_;
  std::vector<std::string> ns_;
};

std::vector<double> Losses(const fs::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

TEST_F(NetnsTest, TwoHostsTrainLikeOne) {
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  const std::vector<std::string> common = {"train.steps=5", "train.log_every=1",
                                           "comm.timeout_s=20"};
  std::vector<std::string> one_sets = common;
  one_sets.push_back("train.batch_size=64");
  one_sets.push_back("train.metrics_file=" + (dir_ / "one.jsonl").string());
  RankProcess one({kHost, "run", (kExamples / "mlp" / "mlp.fleet").string(), "--config",
                   (kExamples / "mlp" / "fleet.toml").string(), "--set", one_sets[0], "--set",
                   one_sets[1], "--set", one_sets[2], "--set", one_sets[3], "--set",
                   one_sets[4]},
                  {}, dir_ / "one.log");
  ASSERT_EQ(one.Wait(milliseconds(60000)), 0) << one.Output();

  std::vector<std::string> sets = common;
  sets.push_back("train.batch_size=32");
  sets.push_back("train.check_replicas=true");
  std::vector<std::unique_ptr<RankProcess>> ranks;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> rs = sets;
    if (r == 0) rs.push_back("train.metrics_file=" + (dir_ / "two.jsonl").string());
    ranks.push_back(std::make_unique<RankProcess>(
        Run(ns_[static_cast<size_t>(r)], rs),
        std::map<std::string, std::string>{{"PADDLE_TRAINER_ID", std::to_string(r)},
                                           {"PADDLE_TRAINERS_NUM", "2"},
                                           {"MASTER_ADDR", "10.231.0.1"},
                                           {"MASTER_PORT", "29555"}},
        dir_ / ("rank" + std::to_string(r) + ".log")));
  }
  for (auto& r : ranks) ASSERT_EQ(r->Wait(milliseconds(60000)), 0) << r->Output();
  EXPECT_NE(ranks[0]->Output().find("store tcp 10.231.0.1:29555 (served here)"), std::string::npos)
      << ranks[0]->Output();
  std::vector<double> a = Losses(dir_ / "one.jsonl"), b = Losses(dir_ / "two.jsonl");
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
}

}  // namespace
}  // namespace fleet::dist_test
