// The AUC a 2-trainer job reports is the AUC of the whole data: the auc op's statistics summed
// over the trainers (host/job/global_auc.h), checked against one process that trains on the
// same global batches, in a collective job and on parameter servers (whose trainers sum over a
// ring of their own).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rank_process.h"

namespace fleet::dist_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const std::string kHost = FLEET_HOST_EXE;

// A small classifier with the global AUC reported as itself and as a var computed from it: the
// second is no auc output, so a collective job reports it as the mean of the trainers' AUCs
// (the rule every other metric keeps), which is what the AUC would be without the summing.
constexpr char kProgram[] =
    "x = data(\"x\", shape=[-1, 4], dtype=\"float32\")\n"
    "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
    "h = fc(x, size=16, act=\"tanh\")\n"
    "prediction = fc(h, size=2, act=\"softmax\")\n"
    "avg_cost = mean(cross_entropy(prediction, y))\n"
    "a = auc(prediction, y)\n"
    "metric(\"auc\", a)\n"
    "metric(\"auc_mean\", scale(a, scale=1.0))\n"
    "minimize(avg_cost, optimizer=adam(learning_rate=0.05))\n";

constexpr char kConfig[] =
    "[train]\n"
    "steps = 8\n"
    "seed = 3\n"
    "log_every = 1\n"
    "[data]\n"
    "source = \"synthetic\"\n";

class GlobalAucTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fleet_global_auc_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()
                                            ->current_test_info()
                                            ->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "auc.fleet") << kProgram;
    std::ofstream(dir_ / "fleet.toml") << kConfig;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> RunArgs(const std::vector<std::string>& sets) const {
    std::vector<std::string> args = {kHost, "run", (dir_ / "auc.fleet").string(), "--config",
                                     (dir_ / "fleet.toml").string()};
    for (const std::string& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return args;
  }

  // The baseline: one process on the global batch of 64, its records in one.jsonl.
  void RunOneProcess(const std::vector<std::string>& sets) const {
    std::vector<std::string> all = {"train.batch_size=64",
                                    "train.metrics_file=" + (dir_ / "one.jsonl").string()};
    all.insert(all.end(), sets.begin(), sets.end());
    RankProcess one(RunArgs(all), {}, dir_ / "one.log");
    ASSERT_EQ(one.Wait(milliseconds(60000)), 0) << one.Output();
  }

  // The value of `key` in every record of a metrics file.
  static std::vector<double> Column(const fs::path& metrics, const std::string& key) {
    std::vector<double> out;
    std::ifstream in(metrics);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)[key].get<double>());
    return out;
  }

  fs::path dir_;
};

// The batch AUC (auc_0.tmp_1, a window of one batch) is fetched too: its op has slide_steps 1,
// so the sum histogram of its window is what gets summed.
TEST_F(GlobalAucTest, TwoTrainersReportTheAucOfTheWholeData) {
  const std::string fetch = "train.fetch=[\"auc_0.tmp_1\"]";
  ASSERT_NO_FATAL_FAILURE(RunOneProcess({fetch}));
  std::vector<std::unique_ptr<RankProcess>> ranks;
  for (int r = 0; r < 2; ++r) {
    const std::map<std::string, std::string> env = {{"PADDLE_TRAINER_ID", std::to_string(r)},
                                                    {"PADDLE_TRAINERS_NUM", "2"},
                                                    {"LOCAL_WORLD_SIZE", "2"},
                                                    {"FLEET_JOB_ID", "test"}};
    ranks.push_back(std::make_unique<RankProcess>(
        RunArgs({"train.batch_size=32", fetch, "comm.store=file",
                 "comm.store_dir=" + (dir_ / "store").string(), "comm.timeout_s=30",
                 "train.metrics_file=" + (dir_ / "two.jsonl").string()}),
        env, dir_ / ("rank" + std::to_string(r) + ".log")));
    ASSERT_TRUE(ranks.back()->started());
  }
  for (auto& r : ranks) ASSERT_EQ(r->Wait(milliseconds(60000)), 0) << r->Output();

  for (const char* key : {"auc", "auc_0.tmp_1"}) {
    const std::vector<double> one = Column(dir_ / "one.jsonl", key);
    const std::vector<double> two = Column(dir_ / "two.jsonl", key);
    ASSERT_EQ(one.size(), 8u) << key;
    ASSERT_EQ(two.size(), one.size()) << key;
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_NEAR(two[i], one[i], 1e-12) << key << " at step " << i + 1;
    }
    // The classifier learns the teacher: an AUC well inside (0.5, 1), not a degenerate 0.
    EXPECT_GT(one.back(), 0.8) << key;
    EXPECT_LT(one.back(), 1.0) << key;
  }
  // The mean of the trainers' own AUCs (the rule of every other metric) misses the whole
  // data's (here by about 1e-3), so the equality above is no accident of the data.
  const double whole = Column(dir_ / "one.jsonl", "auc").back();
  const double mean = Column(dir_ / "two.jsonl", "auc_mean").back();
  EXPECT_GT(std::abs(mean - whole), 1e-4) << "mean " << mean << " whole " << whole;
  // One process has no trainers to average over: its "auc_mean" is its AUC.
  EXPECT_EQ(Column(dir_ / "one.jsonl", "auc_mean").back(), whole);
}

// The devices of one process (single_process_multi_thread) sum their statistics on the host.
TEST_F(GlobalAucTest, DevicesOfOneProcessReportTheAucOfTheWholeBatch) {
  ASSERT_NO_FATAL_FAILURE(RunOneProcess({}));
  {
    RankProcess devices(RunArgs({"train.batch_size=32", "strategy.mode=collective",
                                 "strategy.collective_mode=single_process_multi_thread",
                                 "strategy.devices=2",
                                 "train.metrics_file=" + (dir_ / "devices.jsonl").string()}),
                        {}, dir_ / "devices.log");
    ASSERT_EQ(devices.Wait(milliseconds(60000)), 0) << devices.Output();
  }
  const std::vector<double> one = Column(dir_ / "one.jsonl", "auc");
  const std::vector<double> two = Column(dir_ / "devices.jsonl", "auc");
  ASSERT_EQ(one.size(), 8u);
  ASSERT_EQ(two.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_NEAR(two[i], one[i], 1e-12) << "step " << i + 1;
  }
  // The mean of the devices' own AUCs misses it.
  const double mean = Column(dir_ / "devices.jsonl", "auc_mean").back();
  EXPECT_GT(std::abs(mean - one.back()), 1e-4) << "mean " << mean << " whole " << one.back();
}

// Two workers of a synchronous parameter-server job take one process's steps on the global
// batch (the servers average their gradients), and over the ring fleet-host launch gives them
// report that process's AUC, not trainer 0's.
TEST_F(GlobalAucTest, ParameterServerTrainersReportTheAucOfTheWholeData) {
  ASSERT_NO_FATAL_FAILURE(RunOneProcess({}));
  std::vector<std::string> args = {kHost,   "launch", "--servers", "1",
                                   "--workers", "2",  "--log-dir", (dir_ / "logs").string(),
                                   "--"};
  for (const std::string& a : RunArgs({"train.batch_size=32", "transport.timeout_s=30",
                                       "comm.timeout_s=30",
                                       "train.metrics_file=" + (dir_ / "ps.jsonl").string()})) {
    if (a != kHost) args.push_back(a);
  }
  RankProcess ps(args, {}, dir_ / "ps.log");
  ASSERT_EQ(ps.Wait(milliseconds(90000)), 0) << ps.Output();
  // Trainer 0 writes the job's records; no trainer writes its own.
  EXPECT_FALSE(fs::exists(dir_ / "ps.trainer1.jsonl"));
  const std::vector<double> one = Column(dir_ / "one.jsonl", "auc");
  const std::vector<double> two = Column(dir_ / "ps.jsonl", "auc");
  ASSERT_EQ(one.size(), 8u);
  ASSERT_EQ(two.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    // The servers' averaged gradient rounds unlike one process's: a prediction may land in
    // the next of 4096 buckets.
    EXPECT_NEAR(two[i], one[i], 1e-4) << "step " << i + 1;
  }
  const double mean = Column(dir_ / "ps.jsonl", "auc_mean").back();
  EXPECT_GT(std::abs(mean - one.back()), 2e-4) << "mean " << mean << " whole " << one.back();
  const std::vector<double> loss_one = Column(dir_ / "one.jsonl", "loss");
  const std::vector<double> loss_two = Column(dir_ / "ps.jsonl", "loss");
  EXPECT_NEAR(loss_two.back(), loss_one.back(), 1e-4);
}

}  // namespace
}  // namespace fleet::dist_test
