// Collective training across real processes: fleet-host ranks over the comm_gloo plugin, with
// the rendezvous store in a directory (no ports to collide when tests run in parallel) except
// where the TCP store itself is under test. Every wait has a deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "data/npy.h"
#include "launch/flight_recorder.h"
#include "rank_process.h"

namespace fleet::dist_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const std::string kHost = FLEET_HOST_EXE;
const fs::path kExamples = FLEET_EXAMPLES_DIR;

// Public, so helpers shared by several tests can drive the fixture.
class CollectiveTest : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fleet_collective_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    ranks_.clear();  // kills anything still running
    fs::remove_all(dir_);
  }

  // `fleet-host run` of `program` (default: the quick-start MLP) with its config and `sets`.
  std::vector<std::string> RunArgs(const std::vector<std::string>& sets,
                                   fs::path program = kExamples / "mlp" / "mlp.fleet") const {
    std::vector<std::string> args = {kHost, "run", program.string(), "--config",
                                     (kExamples / "mlp" / "fleet.toml").string()};
    for (const auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return args;
  }

  // Starts ranks 0..n-1 of `world` (all of them unless `only` lists some) with a file store,
  // each with `env` added to its environment.
  void StartRanks(int world, const std::vector<std::string>& sets, std::vector<int> only = {},
                  fs::path program = kExamples / "mlp" / "mlp.fleet",
                  const std::map<std::string, std::string>& extra_env = {}) {
    if (only.empty()) {
      for (int r = 0; r < world; ++r) only.push_back(r);
    }
    std::vector<std::string> all = sets;
    all.push_back("comm.store=file");
    all.push_back("comm.store_dir=" + (dir_ / "store").string());
    for (int r : only) {
      std::map<std::string, std::string> env = {{"PADDLE_TRAINER_ID", std::to_string(r)},
                                                {"PADDLE_TRAINERS_NUM", std::to_string(world)},
                                                {"LOCAL_WORLD_SIZE", std::to_string(world)},
                                                {"FLEET_JOB_ID", "test"}};
      env.insert(extra_env.begin(), extra_env.end());
      ranks_.push_back(std::make_unique<RankProcess>(RunArgs(all, program), env,
                                                     dir_ / ("rank" + std::to_string(r) + ".log")));
      ASSERT_TRUE(ranks_.back()->started());
    }
  }

  static std::vector<double> Losses(const fs::path& metrics) { return Column(metrics, "loss"); }
  // The value of `key` in every record.
  static std::vector<double> Column(const fs::path& metrics, const std::string& key) {
    std::vector<double> out;
    std::ifstream in(metrics);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)[key].get<double>());
    return out;
  }

  static std::map<std::string, data::NpyArray> Params(const fs::path& dir) {
    std::map<std::string, data::NpyArray> out;
    for (const auto& e : fs::directory_iterator(dir)) {
      auto a = data::ReadNpy(e.path());
      EXPECT_TRUE(a.ok()) << a.status().ToString();
      if (a.ok()) out[e.path().stem().string()] = std::move(*a);
    }
    return out;
  }

  // One rank on the global batch: its per-step losses, and its parameters in dir_/one.
  std::vector<double> TrainOneRank(const std::vector<std::string>& sets,
                                   fs::path program = kExamples / "mlp" / "mlp.fleet") {
    std::vector<std::string> all = sets;
    all.push_back("train.metrics_file=" + (dir_ / "one.jsonl").string());
    all.push_back("train.save_params_dir=" + (dir_ / "one").string());
    RankProcess one(RunArgs(all, program), {}, dir_ / "one.log");
    EXPECT_EQ(one.Wait(milliseconds(60000)), 0) << one.Output();
    return Losses(dir_ / "one.jsonl");
  }

  void ExpectSameParams(const fs::path& a_dir, const fs::path& b_dir, double tol) {
    auto a = Params(a_dir), b = Params(b_dir);
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, pa] : a) {
      const data::NpyArray& pb = b.at(name);
      ASSERT_EQ(pa.dims, pb.dims) << name;
      ASSERT_EQ(pa.dtype, ir::DataType::kFloat32);
      const float* x = reinterpret_cast<const float*>(pa.bytes.data());
      const float* y = reinterpret_cast<const float*>(pb.bytes.data());
      double worst = 0;
      for (size_t i = 0; i < pa.bytes.size() / 4; ++i) {
        worst = std::max(worst, std::abs(static_cast<double>(x[i]) - y[i]));
      }
      EXPECT_LE(worst, tol) << name;
    }
  }

  fs::path dir_;
  std::vector<std::unique_ptr<RankProcess>> ranks_;
};

void ExpectSameLosses(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-5 * std::max(1.0, std::abs(a[i]))) << "step " << i + 1;
  }
}

const std::vector<std::string> kSteps = {"train.steps=6", "train.log_every=1"};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The issue's equivalence: two ranks with grad_allreduce on half batches match one rank on the
// full batch, step by step; check_replicas makes every rank compare parameters every step.
// A fetched var is reported as its mean over the ranks: the mean of the halves' avg_cost is the
// whole batch's; rank 0 alone writes the records and the event file.
TEST_F(CollectiveTest, TwoRanksOnHalfBatchesMatchOneRankStepByStep) {
  const std::string fetch = "train.fetch=[\"avg_cost\"]";
  std::vector<double> one = TrainOneRank(With(kSteps, {"train.batch_size=64", fetch}));
  ASSERT_EQ(one.size(), 6u);
  StartRanks(2, With(kSteps, {"train.batch_size=32", "train.check_replicas=true", fetch,
                              "train.metrics_file=" + (dir_ / "two.jsonl").string(),
                              "train.tensorboard_dir=" + (dir_ / "tb").string(),
                              "train.save_params_dir=" + (dir_ / "two").string(),
                              "comm.timeout_s=30"}));
  for (auto& r : ranks_) EXPECT_EQ(r->Wait(milliseconds(60000)), 0) << r->Output();
  ExpectSameLosses(one, Losses(dir_ / "two.jsonl"));
  ExpectSameLosses(Column(dir_ / "one.jsonl", "avg_cost"),
                   Column(dir_ / "two.jsonl", "avg_cost"));
  for (double lr : Column(dir_ / "two.jsonl", "lr")) EXPECT_EQ(lr, static_cast<double>(0.01f));
  ExpectSameParams(dir_ / "one", dir_ / "two", 1e-6);
  int event_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "tb")) {
    event_files += e.is_regular_file();
  }
  EXPECT_EQ(event_files, 1);
}

// The same with every variant of the collective transpile: one all-reduce per gradient (no
// buckets), two rings, an optimizer with state (Adam), and four ranks.
TEST_F(CollectiveTest, EquivalenceHoldsForEveryVariant) {
  const fs::path adam = dir_ / "adam.fleet";
  {
    std::ofstream f(adam);
    f << "x = data(\"x\", shape=[-1, 16], dtype=\"float32\")\n"
         "y = data(\"y\", shape=[-1, 1], dtype=\"float32\")\n"
         "h = fc(x, size=24, act=\"relu\")\n"
         "p = fc(h, size=1)\n"
         "loss = mean(square_error_cost(p, y))\n"
         "minimize(loss, optimizer=adam(learning_rate=0.01))\n";
  }
  struct Variant {
    std::string name;
    int world;
    std::vector<std::string> sets;
    fs::path program;
  };
  const std::vector<Variant> variants = {
      {"unfused", 2, {"strategy.fuse_grad_size_mb=0"}, kExamples / "mlp" / "mlp.fleet"},
      {"two rings", 2, {"strategy.nrings=2", "strategy.fuse_grad_size_mb=0"},
       kExamples / "mlp" / "mlp.fleet"},
      {"adam", 2, {}, adam},
      {"four ranks", 4, {}, kExamples / "mlp" / "mlp.fleet"},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const int global = 64;
    std::vector<double> one =
        TrainOneRank(With(kSteps, {"train.batch_size=" + std::to_string(global)}), v.program);
    ranks_.clear();
    fs::remove_all(dir_ / "store");
    fs::remove_all(dir_ / "two");
    StartRanks(v.world,
               With(With(kSteps, v.sets),
                    {"train.batch_size=" + std::to_string(global / v.world),
                     "train.check_replicas=true",
                     "train.metrics_file=" + (dir_ / "two.jsonl").string(),
                     "train.save_params_dir=" + (dir_ / "two").string(), "comm.timeout_s=30"}),
               {}, v.program);
    for (auto& r : ranks_) ASSERT_EQ(r->Wait(milliseconds(90000)), 0) << r->Output();
    ExpectSameLosses(one, Losses(dir_ / "two.jsonl"));
    ExpectSameParams(dir_ / "one", dir_ / "two", 1e-5);
    fs::remove_all(dir_ / "one");
  }
}

// A network through the newer ops (shape, indexing, comparison and selection ops, reductions,
// activations, lamb) trains, and two ranks on half batches follow one rank on the full batch:
// their grads go through autodiff, the collective transpile and the all-reduce like any other.
TEST_F(CollectiveTest, NetworkOfTheNewerOpsTrainsAndTwoRanksMatchOne) {
  const fs::path program = dir_ / "op_mix.fleet";
  {
    std::ofstream f(program);
    f << "x = data(\"x\", shape=[-1, 32], dtype=\"float32\")\n"
         "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
         "h = fc(x, size=64, act=\"silu\")\n"
         "t = tile(unsqueeze2(h, axes=[1]), repeat_times=[1, 4, 1])\n"
         "s = reduce_max(tril_triu(t, diagonal=0, lower=True), dim=[1])\n"
         "c = clip(softplus(elementwise_add(s, h)), min=0.0, max=5.0)\n"
         "mask = greater_than(c, scale(c, scale=0.0, bias=0.5))\n"
         "w = where(mask, c, scale(c, scale=0.5))\n"
         "h2 = fc(w, size=32, act=\"mish\")\n"
         "prediction = fc(h2, size=2, act=\"softmax\")\n"
         "loss = mean(cross_entropy(prediction, y))\n"
         "minimize(loss, optimizer=lamb(learning_rate=0.01))\n";
  }
  std::vector<double> long_run =
      TrainOneRank({"train.steps=80", "train.log_every=1", "train.batch_size=64"}, program);
  ASSERT_EQ(long_run.size(), 80u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += long_run[i] / 5;
  for (int i = 70; i < 80; ++i) last += long_run[i] / 10;
  EXPECT_LT(last, 0.7 * first) << "the loss did not fall";
  fs::remove_all(dir_ / "one");

  std::vector<double> one = TrainOneRank(With(kSteps, {"train.batch_size=64"}), program);
  StartRanks(2, With(kSteps, {"train.batch_size=32", "train.check_replicas=true",
                              "train.metrics_file=" + (dir_ / "two.jsonl").string(),
                              "train.save_params_dir=" + (dir_ / "two").string(),
                              "comm.timeout_s=30"}),
             {}, program);
  for (auto& r : ranks_) ASSERT_EQ(r->Wait(milliseconds(90000)), 0) << r->Output();
  ExpectSameLosses(one, Losses(dir_ / "two.jsonl"));
  ExpectSameParams(dir_ / "one", dir_ / "two", 1e-5);
}

// What the README shows: `fleet-host launch --nproc 2 -- run mlp.fleet`, through the launcher's
// TCP store, trains the same model as one process on the global batch.
TEST_F(CollectiveTest, LaunchTrainsDataParallel) {
  std::vector<double> one = TrainOneRank(With(kSteps, {"train.batch_size=64"}));
  std::vector<std::string> args = {kHost, "--config", (kExamples / "mlp" / "fleet.toml").string()};
  for (const auto& s : With(kSteps, {"train.batch_size=32", "train.check_replicas=true",
                                      "train.metrics_file=" + (dir_ / "two.jsonl").string(),
                                      "train.save_params_dir=" + (dir_ / "two").string()})) {
    args.push_back("--set");
    args.push_back(s);
  }
  for (const std::string& a : {std::string("launch"), std::string("--nproc"), std::string("2"),
                               std::string("--log-dir"), (dir_ / "logs").string(),
                               std::string("--"), std::string("run"),
                               (kExamples / "mlp" / "mlp.fleet").string()}) {
    args.push_back(a);
  }
  RankProcess launcher(args, {}, dir_ / "launch.log");
  ASSERT_EQ(launcher.Wait(milliseconds(90000)), 0) << launcher.Output();
  EXPECT_NE(launcher.Output().find("[trainer.0] collective job: 2 trainers"), std::string::npos)
      << launcher.Output();
  ExpectSameLosses(one, Losses(dir_ / "two.jsonl"));
  ExpectSameParams(dir_ / "one", dir_ / "two", 1e-6);
  EXPECT_TRUE(fs::exists(dir_ / "logs" / "fleet" / "trainer.1.log"));
}

// Paddle's ParallelExecutor mode: one process, three CPU devices as three ranks of a Gloo group,
// the same results as one rank on the whole batch.
TEST_F(CollectiveTest, SingleProcessMultiThreadMatchesOneRank) {
  std::vector<double> one = TrainOneRank(With(kSteps, {"train.batch_size=48"}));
  RankProcess p(RunArgs(With(kSteps, {"train.batch_size=16",
                                      "strategy.collective_mode=single_process_multi_thread",
                                      "strategy.devices=3",
                                      "train.metrics_file=" + (dir_ / "spmt.jsonl").string(),
                                      "train.save_params_dir=" + (dir_ / "spmt").string()})),
                {}, dir_ / "spmt.log");
  ASSERT_EQ(p.Wait(milliseconds(60000)), 0) << p.Output();
  EXPECT_NE(p.Output().find("(3 devices)"), std::string::npos) << p.Output();
  ExpectSameLosses(one, Losses(dir_ / "spmt.jsonl"));
  ExpectSameParams(dir_ / "one", dir_ / "spmt", 1e-6);
}

// As many devices as one process takes (strategy.devices at its cap, 64): 2016 Gloo pairs
// between them. Closing each used to wait for a tick of Gloo's event loop (10 ms), so the job
// ended 21 s after its last step; the wait's deadline is below that. The results are one
// rank's on the whole batch.
TEST_F(CollectiveTest, SixtyFourDevicesTrainAndEnd) {
  const std::vector<std::string> steps = {"train.steps=2", "train.log_every=1"};
  std::vector<double> one = TrainOneRank(With(steps, {"train.batch_size=128"}));
  RankProcess p(RunArgs(With(steps, {"train.batch_size=2",
                                     "strategy.collective_mode=single_process_multi_thread",
                                     "strategy.devices=64",
                                     "train.metrics_file=" + (dir_ / "spmt.jsonl").string(),
                                     "train.save_params_dir=" + (dir_ / "spmt").string()})),
                {}, dir_ / "spmt.log");
  ASSERT_EQ(p.Wait(milliseconds(15000)), 0) << p.Output();
  EXPECT_NE(p.Output().find("trained 2 steps"), std::string::npos) << p.Output();
  EXPECT_NE(p.Output().find("over 64 devices"), std::string::npos) << p.Output();
  ExpectSameLosses(one, Losses(dir_ / "spmt.jsonl"));
  ExpectSameParams(dir_ / "one", dir_ / "spmt", 1e-6);
}

// Local SGD with plain SGD and averaging every step is the same update as grad_allreduce
// (p - lr * mean(g)); with k_steps = 3 the replicas drift between averagings and meet again
// at each (and at the last step, whatever its number), and the loss still falls.
TEST_F(CollectiveTest, LocalSgdAveragesAndConverges) {
  std::vector<double> one = TrainOneRank(With(kSteps, {"train.batch_size=64"}));
  StartRanks(2, With(kSteps, {"train.batch_size=32", "strategy.collective_mode=local_sgd",
                              "train.check_replicas=true",
                              "train.metrics_file=" + (dir_ / "two.jsonl").string(),
                              "train.save_params_dir=" + (dir_ / "two").string()}));
  for (auto& r : ranks_) ASSERT_EQ(r->Wait(milliseconds(60000)), 0) << r->Output();
  ExpectSameLosses(one, Losses(dir_ / "two.jsonl"));
  ExpectSameParams(dir_ / "one", dir_ / "two", 1e-5);

  ranks_.clear();
  fs::remove_all(dir_ / "store");
  // Logged every 2 steps, averaged every 3 and on the last (121): replicas are compared on the
  // logged steps that averaged, the last one included.
  StartRanks(2, {"train.steps=121", "train.log_every=2", "train.batch_size=32",
                 "strategy.collective_mode=local_sgd", "strategy.local_sgd_k_steps=3",
                 "train.check_replicas=true",
                 "train.metrics_file=" + (dir_ / "k3.jsonl").string()});
  for (auto& r : ranks_) ASSERT_EQ(r->Wait(milliseconds(90000)), 0) << r->Output();
  std::vector<double> losses = Losses(dir_ / "k3.jsonl");
  ASSERT_EQ(losses.size(), 61u);
  double first = 0, last = 0;
  for (size_t i = 0; i < 5; ++i) first += losses[i] / 5;
  for (size_t i = losses.size() - 5; i < losses.size(); ++i) last += losses[i] / 5;
  EXPECT_LT(last, 0.9 * first) << "first " << first << " last " << last;
}

// Three ranks training with `timeout_s`; once rank 0 is under way, `victim` gets `signal`. The
// two others must fail within [min_s, max_s] after it, each naming the victim.
void ExpectSurvivorsNameTheVictim(CollectiveTest& t, int victim, int signal, double timeout_s,
                                  double min_s, double max_s);

// A rank killed mid-training: every other rank fails, naming it, well within twice the timeout.
TEST_F(CollectiveTest, KilledRankMakesTheOthersFailNamingIt) {
  ExpectSurvivorsNameTheVictim(*this, 1, SIGKILL, 4, 0, 2 * 4);
}

// A rank that freezes (SIGSTOP) keeps its connections open, so only the deadline can end the
// others' wait: they fail after the timeout (half of it at least), not long after it.
TEST_F(CollectiveTest, FrozenRankIsNamedAfterTheTimeout) {
  ExpectSurvivorsNameTheVictim(*this, 2, SIGSTOP, 3, 0.5 * 3, 2 * 3 + 1);
}

void ExpectSurvivorsNameTheVictim(CollectiveTest& t, int victim, int signal, double timeout_s,
                                  double min_s, double max_s) {
  t.StartRanks(3, {"train.steps=1000000", "train.log_every=20", "train.batch_size=16",
                   "comm.timeout_s=" + std::to_string(timeout_s)});
  auto& ranks = t.ranks_;
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (ranks[0]->Output().find("step 20/") == std::string::npos && Clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_NE(ranks[0]->Output().find("step 20/"), std::string::npos) << ranks[0]->Output();
  const auto hit_at = Clock::now();
  kill(ranks[static_cast<size_t>(victim)]->pid(), signal);
  const std::string named = "rank " + std::to_string(victim) + " stopped beating";
  for (int r = 0; r < 3; ++r) {
    if (r == victim) continue;
    auto& rank = *ranks[static_cast<size_t>(r)];
    const int code = rank.Wait(milliseconds(static_cast<int64_t>(4 * timeout_s * 1000)));
    const double after = std::chrono::duration<double>(Clock::now() - hit_at).count();
    const std::string out = rank.Output();
    EXPECT_NE(code, -1) << "rank " << r << " still running " << after << " s after the signal";
    EXPECT_NE(code, 0) << out;
    EXPECT_GE(after, min_s) << out;
    EXPECT_LT(after, max_s) << out;
    EXPECT_NE(out.find(named), std::string::npos) << "rank " << r << ":\n" << out;
  }
  kill(ranks[static_cast<size_t>(victim)]->pid(), SIGKILL);  // a stopped one too
}

// train.check_replicas catches trainers that drift apart: rank 1 runs the same network with
// another learning rate, so every collective matches but the parameters differ after step 1.
TEST_F(CollectiveTest, CheckReplicasNamesParametersThatDiffer) {
  const fs::path other = dir_ / "mlp_lr.fleet";
  {
    std::ifstream in(kExamples / "mlp" / "mlp.fleet");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("learning_rate=0.01");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, std::string("learning_rate=0.01").size(), "learning_rate=0.02");
    std::ofstream(other) << text;
  }
  const std::vector<std::string> sets = {"train.steps=3", "train.log_every=1",
                                         "train.check_replicas=true", "comm.timeout_s=20"};
  StartRanks(2, sets, {0});
  StartRanks(2, sets, {1}, other);
  for (auto& r : ranks_) {
    const int code = r->Wait(milliseconds(60000));
    const std::string out = r->Output();
    EXPECT_EQ(code, 1) << out;
    EXPECT_NE(out.find("train.check_replicas: after step 1 the trainers hold different values "
                       "of fc_0.b_0, fc_0.w_0"),
              std::string::npos)
        << out;
  }
}

// Ranks that would run different collectives (another program; another number of steps) fail
// together before the first one, naming where their schedules part, instead of meeting inside
// Gloo with mismatched buffers (which aborted the receiving rank).
TEST_F(CollectiveTest, RanksWithDifferentSchedulesFailBeforeTheFirstCollective) {
  const fs::path other = dir_ / "mlp_wide.fleet";
  {
    std::ifstream in(kExamples / "mlp" / "mlp.fleet");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("size=128");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, std::string("size=128").size(), "size=96");
    std::ofstream(other) << text;
  }
  const std::vector<std::string> sets = {"train.steps=3", "comm.timeout_s=20"};
  StartRanks(2, sets, {0});
  StartRanks(2, sets, {1}, other);
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const int code = ranks_[r]->Wait(milliseconds(60000));
    const std::string out = ranks_[r]->Output();
    EXPECT_EQ(code, 1) << out;
    EXPECT_LT(ranks_[r]->seconds(), 15.0) << out;
    EXPECT_NE(out.find("the ranks would run different collectives: at entry #"),
              std::string::npos) << out;
    EXPECT_NE(out.find("rank 1 differs from rank 0; here (rank " + std::to_string(r) + ")"),
              std::string::npos) << out;
    EXPECT_NE(out.find(r == 0 ? "float32[32, 128]" : "float32[32, 96]"), std::string::npos)
        << out;
  }
  ranks_.clear();
  fs::remove_all(dir_ / "store");  // a fresh rendezvous for the second job
  // Same program, a different number of steps: the last entry differs.
  StartRanks(2, {"train.steps=3", "comm.timeout_s=20"}, {0});
  StartRanks(2, {"train.steps=2", "comm.timeout_s=20"}, {1});
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const int code = ranks_[r]->Wait(milliseconds(60000));
    const std::string out = ranks_[r]->Output();
    EXPECT_EQ(code, 1) << out;
    EXPECT_NE(out.find(r == 0 ? "it is 'steps: 3'" : "it is 'steps: 2'"), std::string::npos)
        << out;
  }
}

// Ranks that agree on the schedule but part while running (rank 1 logs, and so exchanges the
// job's figures, every other step): at the first step boundary where they differ both fail
// together, naming the call where they part and what each rank runs there, in the default
// check mode and in the exact one; before the check, Gloo aborted the rank that received the
// bigger message.
TEST_F(CollectiveTest, RanksThatPartWhileRunningFailTogetherNamingTheCall) {
  for (const std::string mode : {"step", "every"}) {
    SCOPED_TRACE(mode);
    ranks_.clear();
    fs::remove_all(dir_ / "store");
    const std::map<std::string, std::string> env = {{"FLEET_COLLECTIVE_CHECK", mode}};
    const std::vector<std::string> sets = {"train.steps=4", "comm.timeout_s=30"};
    StartRanks(2, With(sets, {"train.log_every=1"}), {0}, kExamples / "mlp" / "mlp.fleet", env);
    StartRanks(2, With(sets, {"train.log_every=2"}), {1}, kExamples / "mlp" / "mlp.fleet", env);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const int code = ranks_[r]->Wait(milliseconds(60000));
      const std::string out = ranks_[r]->Output();
      EXPECT_EQ(code, 1) << out;
      EXPECT_LT(ranks_[r]->seconds(), 15.0) << out;  // far below the 30 s timeout
      EXPECT_NE(out.find("the ranks' collectives went out of step at collective #"),
                std::string::npos)
          << out;
      // After step 1, rank 0 exchanges the job's figures (loss, reader_cost, ips) while rank 1
      // starts step 2.
      EXPECT_NE(out.find("rank 1 differs from rank 0: rank 0 runs host all_reduce_sum(3 float64); "
                         "rank 1 runs c_allreduce_sum(fc_2.b_0@GRAD and 5 more: 20994 float32)"),
                std::string::npos)
          << out;
      EXPECT_NE(out.find("(this is rank " + std::to_string(r) + ")"), std::string::npos) << out;
      EXPECT_EQ(out.find("gloo::EnforceNotMet"), std::string::npos) << out;
    }
  }
}

// A job under `fleet-host launch` whose rank 1 dies (SIGKILL) or hangs (SIGSTOP) mid-training:
// failure.json and the console summary carry each rank's last collectives from its flight
// recorder, which outlives the killed rank; when rank 1 was not in the call rank 0 failed in,
// the summary names it as the rank that never entered it.
TEST_F(CollectiveTest, LaunchReportsEachRanksLastCollectives) {
  for (const int signal : {SIGKILL, SIGSTOP}) {
    SCOPED_TRACE(signal == SIGKILL ? "SIGKILL" : "SIGSTOP");
    const fs::path logs = dir_ / ("logs" + std::to_string(signal));
    std::vector<std::string> args = {kHost, "--config", (kExamples / "mlp" / "fleet.toml").string()};
    for (const char* s : {"train.steps=1000000", "train.log_every=20",
                         "train.batch_size=16", "comm.timeout_s=3"}) {
      args.push_back("--set");
      args.push_back(s);
    }
    for (const std::string& a : {std::string("launch"), std::string("--nproc"), std::string("2"),
                                 std::string("--grace-s"), std::string("2"),
                                 std::string("--log-dir"), logs.string(), std::string("--"),
                                 std::string("run"), (kExamples / "mlp" / "mlp.fleet").string()}) {
      args.push_back(a);
    }
    RankProcess launcher(args, {}, dir_ / "launch.log");
    const fs::path job = logs / "fleet";
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (launcher.Output().find("step 60/") == std::string::npos && Clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_NE(launcher.Output().find("step 60/"), std::string::npos) << launcher.Output();
    // The recorder's header holds its rank's pid.
    auto before = ReadFlightRecord((job / "trainer.1.flight").string());
    ASSERT_TRUE(before.ok()) << before.status().ToString();
    ASSERT_GT(before->pid, 0);
    kill(before->pid, signal);
    const int code = launcher.Wait(milliseconds(40000));
    const std::string out = launcher.Output();
    ASSERT_NE(code, -1) << out;
    EXPECT_NE(code, 0) << out;
    kill(before->pid, SIGKILL);  // a stopped one the launcher could not reach

    EXPECT_NE(out.find("collectives (each rank's flight recorder):"), std::string::npos) << out;
    EXPECT_NE(out.find("  rank 0: last collective #"), std::string::npos) << out;
    EXPECT_NE(out.find("  rank 1: last collective #"), std::string::npos) << out;
    std::ifstream in(job / "failure.json");
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    ASSERT_TRUE(j.contains("collectives")) << j.dump(2);
    const auto& ranks = j["collectives"]["ranks"];
    ASSERT_EQ(ranks.size(), 2u) << j.dump(2);
    uint64_t last[2] = {0, 0};
    for (int r = 0; r < 2; ++r) {
      const auto& rank = ranks[static_cast<size_t>(r)];
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_EQ(rank["rank"], r);
      EXPECT_EQ(rank["recorder"], (job / ("trainer." + std::to_string(r) + ".flight")).string());
      ASSERT_TRUE(rank["last_enqueued"].is_object()) << rank.dump(2);
      const auto& e = rank["last_enqueued"];
      last[r] = e["seq"].get<uint64_t>();
      EXPECT_GT(last[r], 60u);  // a call per step at least, 60 steps in
      EXPECT_EQ(e["ring"], 0);
      const std::string op = e["op"];
      EXPECT_TRUE(op == "c_allreduce_sum" || op == "host all_reduce_sum") << op;
      if (op == "c_allreduce_sum") {
        EXPECT_EQ(e["var"], "fc_2.b_0@GRAD");
        EXPECT_EQ(e["numel"], 20994);
        EXPECT_EQ(e["dtype"], "float32");
      }
      ASSERT_TRUE(rank["last_completed"].is_object());
      EXPECT_LT(rank["last_completed"]["seq"].get<uint64_t>(), last[r] + 1);
      ASSERT_EQ(rank["tail"].size(), 32u);
      for (size_t i = 1; i < 32; ++i) {
        EXPECT_EQ(rank["tail"][i]["seq"].get<uint64_t>(),
                  rank["tail"][i - 1]["seq"].get<uint64_t>() + 1);
      }
    }
    // A hung rank 1 makes rank 0 fail in its last call after the timeout; a killed one may
    // have rank 0 stopped by the launcher first, wherever it was. Rank 1 never got further.
    if (signal == SIGSTOP) {
      EXPECT_EQ(ranks[0]["last_enqueued"]["state"], "failed") << j.dump(2);
    }
    EXPECT_NE(ranks[1]["last_enqueued"]["state"], "failed") << j.dump(2);
    EXPECT_GE(last[0], last[1]);
    if (last[0] > last[1]) {
      const std::string hint = "rank 1 never entered collective #" + std::to_string(last[0]);
      EXPECT_NE(out.find("=> " + hint), std::string::npos) << out;
      ASSERT_EQ(j["collectives"]["hint"].size(), 1u);
      EXPECT_NE(j["collectives"]["hint"][0].get<std::string>().find(hint), std::string::npos);
    }
  }
}

// A rank that never starts: the others' rendezvous fails naming it, bounded by the timeout.
TEST_F(CollectiveTest, RankThatNeverJoinsIsNamed) {
  StartRanks(3, {"train.steps=5", "comm.timeout_s=2"}, {0, 1});
  for (auto& r : ranks_) {
    const int code = r->Wait(milliseconds(15000));
    const std::string out = r->Output();
    EXPECT_NE(code, -1) << "still running";
    EXPECT_NE(code, 0) << out;
    EXPECT_LT(r->seconds(), 10.0) << out;
    EXPECT_NE(out.find("2"), std::string::npos) << out;
    EXPECT_NE(out.find("never joined"), std::string::npos) << out;
  }
}

// Rank 0 serves the TCP store at the master address; a port someone else holds is an error
// naming it, not a hang.
TEST_F(CollectiveTest, MasterPortInUseIsReported) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  RankProcess rank0(RunArgs({"train.steps=2", "comm.timeout_s=3"}),
                    {{"PADDLE_TRAINER_ID", "0"}, {"PADDLE_TRAINERS_NUM", "2"},
                     {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
                    dir_ / "rank0.log");
  const int code = rank0.Wait(milliseconds(10000));
  close(fd);
  const std::string out = rank0.Output();
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("127.0.0.1:" + port), std::string::npos) << out;
  EXPECT_NE(out.find("in use"), std::string::npos) << out;
}

// Jobs that cannot work are refused before anything waits, each saying why.
TEST_F(CollectiveTest, UnworkableJobsAreRefusedWithTheReason) {
  struct Case {
    std::vector<std::string> sets;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{}, "needs a rendezvous address: set MASTER_ADDR and MASTER_PORT"},
      {{"comm.store=file"}, "comm.store is \"file\" but comm.store_dir is not set"},
      {{"strategy.mode=none"}, "the job has 2 trainers (world_size from env PADDLE_TRAINERS_NUM) "
                               "but strategy.mode is \"none\""},
      {{"strategy.collective_mode=single_process_multi_thread"},
       "drives the devices of one process; this job has 2 trainers"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> sets = c.sets;
    sets.push_back("train.steps=2");
    sets.push_back("comm.timeout_s=5");
    RankProcess p(RunArgs(sets), {{"PADDLE_TRAINER_ID", "0"}, {"PADDLE_TRAINERS_NUM", "2"}},
                  dir_ / "p.log");
    const int code = p.Wait(milliseconds(10000));
    const std::string out = p.Output();
    EXPECT_EQ(code, 1) << out;
    EXPECT_LT(p.seconds(), 3.0) << out;
    EXPECT_NE(out.find(c.expected), std::string::npos) << out;
  }
}

// Two launchers' variables that disagree are refused, naming both.
TEST_F(CollectiveTest, ConflictingRoleSourcesAreRefused) {
  RankProcess p(RunArgs({"train.steps=2"}),
                {{"PADDLE_TRAINER_ID", "1"}, {"RANK", "0"}, {"PADDLE_TRAINERS_NUM", "2"}},
                dir_ / "p.log");
  const int code = p.Wait(milliseconds(10000));
  const std::string out = p.Output();
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("PADDLE_TRAINER_ID=1"), std::string::npos) << out;
  EXPECT_NE(out.find("RANK=0"), std::string::npos) << out;
}

}  // namespace
}  // namespace fleet::dist_test
