// Data vars among the inputs of multi-input ops (fixtures/data_inputs.fleet: dense features
// concatenated with embeddings, as PaddleRec's CTR-DNN does, and the same data var in sum, stack,
// elementwise_mul and matmul) train as users run them: `fleet-host run`, `launch --nproc 2` and
// `launch --servers 2 --workers 2`. Their gradients leave the data var's entry uncomputed
// ("@EMPTY@"), which every stage must pass over; the collective and pserver jobs must match one
// process on the whole batch step by step. Every wait has a deadline.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "rank_process.h"

namespace fleet::dist_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const std::string kHost = FLEET_HOST_EXE;
const fs::path kProgram = fs::path(FLEET_DIST_FIXTURES_DIR) / "data_inputs.fleet";

constexpr int kVocab = 50;
constexpr int kSamples = 2048;

// A double in [-1, 1) from the generator's raw output (the distributions' algorithms are not
// fixed by the standard; mt19937's output is).
double Uniform(std::mt19937& gen) { return static_cast<double>(gen()) / 2147483648.0 - 1.0; }

// MultiSlot lines "4 d0 d1 d2 d3 2 id0 id1 1 label", the label from a fixed teacher over the
// dense features and a weight per id, so there is something to learn from both.
void WriteData(const fs::path& file) {
  std::mt19937 gen(18);
  std::vector<double> weight(kVocab);
  for (double& w : weight) w = 1.5 * Uniform(gen);
  std::ofstream out(file);
  for (int i = 0; i < kSamples; ++i) {
    double d[4];
    for (double& v : d) v = Uniform(gen);
    const int a = static_cast<int>(gen() % kVocab), b = static_cast<int>(gen() % kVocab);
    const double score = 2 * (d[0] - d[1] + 0.5 * d[2]) + weight[a] + weight[b];
    out << "4 " << d[0] << " " << d[1] << " " << d[2] << " " << d[3] << " 2 " << a << " " << b
        << " 1 " << (score > 0 ? 1 : 0) << "\n";
  }
}

std::vector<double> Losses(const fs::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

class DataInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fleet_data_inputs_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    WriteData(dir_ / "train.txt");
    std::ofstream(dir_ / "fleet.toml") << "[train]\nseed = 3\n"
                                       << "[data]\nsource = \"multislot\"\n"
                                       << "filelist = [\"train.txt\"]\n"
                                       << "slots = [\"dense\", \"ids\", \"label\"]\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `fleet-host [--config, --set ...]`: the options every command of a test shares.
  std::vector<std::string> Host(const std::vector<std::string>& sets) const {
    std::vector<std::string> args = {kHost, "--config", (dir_ / "fleet.toml").string()};
    for (const auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return args;
  }

  // One process, batches of `batch`: the loss of every step.
  std::vector<double> RunOne(int steps, int batch, const std::string& name) {
    std::vector<std::string> args =
        Host({"train.steps=" + std::to_string(steps), "train.log_every=1",
              "train.batch_size=" + std::to_string(batch),
              "train.metrics_file=" + (dir_ / (name + ".jsonl")).string()});
    args.insert(args.end(), {"run", kProgram.string()});
    RankProcess p(args, {}, dir_ / (name + ".log"));
    EXPECT_EQ(p.Wait(milliseconds(60000)), 0) << p.Output();
    return Losses(dir_ / (name + ".jsonl"));
  }

  // `launch LAUNCH... -- run PROGRAM` with batches of `batch` per trainer.
  std::string Launch(const std::vector<std::string>& launch, int steps, int batch,
                     const std::string& name) {
    std::vector<std::string> args =
        Host({"train.steps=" + std::to_string(steps), "train.log_every=1",
              "train.batch_size=" + std::to_string(batch),
              "train.metrics_file=" + (dir_ / (name + ".jsonl")).string()});
    args.push_back("launch");
    args.insert(args.end(), launch.begin(), launch.end());
    args.insert(args.end(), {"--log-dir", (dir_ / (name + "_logs")).string(), "--", "run",
                             kProgram.string()});
    RankProcess launcher(args, {}, dir_ / (name + ".log"));
    EXPECT_EQ(launcher.Wait(milliseconds(100000)), 0) << launcher.Output();
    return launcher.Output();
  }

  fs::path dir_;
};

void ExpectSameLosses(const std::vector<double>& want, const std::vector<double>& got,
                      const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i])))
        << what << ", step " << i + 1;
  }
}

// The mean of the last `n` losses.
double Tail(const std::vector<double>& l, size_t n) {
  double s = 0;
  for (size_t i = l.size() - n; i < l.size(); ++i) s += l[i];
  return s / static_cast<double>(n);
}

constexpr int kSteps = 60;        // steps compared with one process
constexpr int kLearnSteps = 250;  // steps to learn in

// One process learns.
TEST_F(DataInputsTest, OneProcessTrains) {
  std::vector<double> losses = RunOne(kLearnSteps, 64, "one");
  ASSERT_EQ(losses.size(), static_cast<size_t>(kLearnSteps));
  for (double l : losses) ASSERT_TRUE(std::isfinite(l));
  // It starts near chance (ln 2 for two balanced classes) and ends well below.
  EXPECT_GT(losses[0], 0.6);
  EXPECT_LT(Tail(losses, 20), 0.75 * losses[0])
      << "first " << losses[0] << ", last " << Tail(losses, 20);
}

// Two ranks on halves of each batch take the steps of one process on the whole batch.
TEST_F(DataInputsTest, LaunchNproc2MatchesOneProcess) {
  std::vector<double> one = RunOne(kSteps, 64, "one");
  std::string out = Launch({"--nproc", "2"}, kSteps, 32, "two");
  EXPECT_NE(out.find("collective job: 2 trainers"), std::string::npos) << out;
  ExpectSameLosses(one, Losses(dir_ / "two.jsonl"), "rank 0 of launch --nproc 2");
}

// Two servers and two sync trainers: the trainers' mean loss is one process's, step by step.
TEST_F(DataInputsTest, LaunchServersWorkersMatchesOneProcess) {
  std::vector<double> one = RunOne(kSteps, 64, "one");
  Launch({"--servers", "2", "--workers", "2"}, kSteps, 32, "ps");
  // The workers report the job's loss, the mean over them, and trainer 0 writes it.
  EXPECT_FALSE(fs::exists(dir_ / "ps.trainer1.jsonl"));
  ExpectSameLosses(one, Losses(dir_ / "ps.jsonl"), "launch --servers 2 --workers 2");
}

}  // namespace
}  // namespace fleet::dist_test
