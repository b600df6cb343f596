// Parameter-server training across real processes: fleet-host pservers serving over the
// transport_rpc plugin (gRPC on loopback) and fleet-host trainers, each started with the
// PaddleCloud variables launch_ps sets. Every wait has a deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/free_ports.h"
#include "data/npy.h"
#include "fleet/fleet_plugin.h"
#include "plugin/registry.h"
#include "plugin/transport.h"
#include "rank_process.h"

namespace fleet::dist_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const std::string kHost = FLEET_HOST_EXE;
const fs::path kExamples = FLEET_EXAMPLES_DIR;
const fs::path kMlp = kExamples / "mlp" / "mlp.fleet";

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// Public, so the helpers below can drive the fixture.
class PserverTest : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fleet_pserver_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    servers_.clear();  // kills anything still running
    trainers_.clear();
    fs::remove_all(dir_);
  }

  std::vector<std::string> RunArgs(const std::vector<std::string>& sets,
                                   const fs::path& program = kMlp) const {
    std::vector<std::string> args = {kHost, "run", program.string(), "--config",
                                     (kExamples / "mlp" / "fleet.toml").string()};
    for (const auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return args;
  }

  // Starts `servers` pservers and `trainers` trainers on fresh loopback ports. Every process
  // gets `sets`; server i also gets server_sets(i) and trainer t trainer_sets(t).
  void StartJob(int servers, int trainers, const std::vector<std::string>& sets,
                const fs::path& program = kMlp,
                std::function<std::vector<std::string>(int)> server_sets = nullptr,
                std::function<std::vector<std::string>(int)> trainer_sets = nullptr,
                bool start_trainers = true) {
    endpoints_.clear();
    const std::vector<int> ports = fleet::testing::FreeLoopbackPorts(servers);
    ASSERT_EQ(ports.size(), static_cast<size_t>(servers)) << "no free loopback ports";
    for (const int port : ports) endpoints_.push_back("127.0.0.1:" + std::to_string(port));
    const std::string list = Joined(endpoints_);
    const std::string local = std::to_string(servers + trainers);
    for (int i = 0; i < servers; ++i) {
      std::map<std::string, std::string> env = {
          {"TRAINING_ROLE", "PSERVER"},
          {"PADDLE_PSERVERS_IP_PORT_LIST", list},
          {"PADDLE_PSERVER_ID", std::to_string(i)},
          {"POD_IP", "127.0.0.1"},
          {"PADDLE_PORT", endpoints_[i].substr(endpoints_[i].rfind(':') + 1)},
          {"PADDLE_TRAINERS_NUM", std::to_string(trainers)},
          {"LOCAL_WORLD_SIZE", local}};
      std::vector<std::string> all = sets;
      if (server_sets) all = With(all, server_sets(i));
      servers_.push_back(std::make_unique<RankProcess>(
          RunArgs(all, program), env, dir_ / ("server" + std::to_string(i) + ".log")));
      ASSERT_TRUE(servers_.back()->started());
    }
    if (!start_trainers) return;
    for (int t = 0; t < trainers; ++t) StartTrainer(t, trainers, sets, program, trainer_sets);
  }

  void StartTrainer(int t, int trainers, const std::vector<std::string>& sets,
                    const fs::path& program = kMlp,
                    std::function<std::vector<std::string>(int)> trainer_sets = nullptr) {
    std::map<std::string, std::string> env = {
        {"TRAINING_ROLE", "TRAINER"},
        {"PADDLE_PSERVERS_IP_PORT_LIST", Joined(endpoints_)},
        {"PADDLE_TRAINERS_NUM", std::to_string(trainers)},
        {"PADDLE_TRAINER_ID", std::to_string(t)},
        {"LOCAL_WORLD_SIZE", std::to_string(trainers + static_cast<int>(endpoints_.size()))}};
    std::vector<std::string> all = sets;
    if (trainer_sets) all = With(all, trainer_sets(t));
    trainers_.push_back(std::make_unique<RankProcess>(
        RunArgs(all, program), env, dir_ / ("trainer" + std::to_string(t) + ".log")));
    ASSERT_TRUE(trainers_.back()->started());
  }

  // Every process of the job exits 0 within `deadline`.
  void ExpectJobSucceeds(milliseconds deadline = milliseconds(120000)) {
    for (auto& t : trainers_) EXPECT_EQ(t->Wait(deadline), 0) << t->Output();
    // Servers leave by themselves once every trainer said it completed.
    for (auto& s : servers_) EXPECT_EQ(s->Wait(milliseconds(20000)), 0) << s->Output();
  }

  static std::vector<double> Losses(const fs::path& metrics) {
    std::vector<double> out;
    std::ifstream in(metrics);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
    return out;
  }

  static std::map<std::string, data::NpyArray> Params(const fs::path& dir) {
    std::map<std::string, data::NpyArray> out;
    if (!fs::is_directory(dir)) return out;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".npy") continue;  // the servers' pserver.N/ directories
      auto a = data::ReadNpy(e.path());
      EXPECT_TRUE(a.ok()) << a.status().ToString();
      if (a.ok()) out[e.path().stem().string()] = std::move(*a);
    }
    return out;
  }

  // One process on the global batch: its per-step losses; its parameters land in dir_/one.
  std::vector<double> TrainOneProcess(const std::vector<std::string>& sets,
                                      const fs::path& program = kMlp) {
    fs::remove_all(dir_ / "one");
    std::vector<std::string> all =
        With(sets, {"train.metrics_file=" + (dir_ / "one.jsonl").string(),
                    "train.save_params_dir=" + (dir_ / "one").string()});
    fs::remove(dir_ / "one.jsonl");
    RankProcess one(RunArgs(all, program), {}, dir_ / "one.log");
    EXPECT_EQ(one.Wait(milliseconds(60000)), 0) << one.Output();
    return Losses(dir_ / "one.jsonl");
  }

  static void ExpectSameParams(const std::map<std::string, data::NpyArray>& a,
                               const std::map<std::string, data::NpyArray>& b, double tol) {
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, pa] : a) {
      ASSERT_EQ(b.count(name), 1u) << name;
      const data::NpyArray& pb = b.at(name);
      ASSERT_EQ(pa.dims, pb.dims) << name;
      ASSERT_EQ(pa.dtype, ir::DataType::kFloat32) << name;
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
  std::vector<std::string> endpoints_;
  std::vector<std::unique_ptr<RankProcess>> servers_;
  std::vector<std::unique_ptr<RankProcess>> trainers_;
};

const std::vector<std::string> kSteps = {"train.steps=6", "train.log_every=1"};

// A parameter-server trainer reports for itself: trainer 0 into train.metrics_file, trainer t
// into the same name with ".trainer<t>" before the extension.
fs::path MetricsOf(const fs::path& file, int t) {
  if (t == 0) return file;
  return file.parent_path() /
         (file.stem().string() + ".trainer" + std::to_string(t) + file.extension().string());
}

// Runs one process on batches of `global` rows, then a job of `servers` x `trainers` on shares
// of the same batches, and checks that the trainers' mean loss matches step by step (each
// trainer's loss is the mean over its share, and the shares are equal) and that trainer 0 ends
// with the single process's parameters.
void ExpectMatchesOneProcess(PserverTest& test, int servers, int trainers,
                             const std::vector<std::string>& sets, const fs::path& program,
                             const fs::path& dir, double tol) {
  const int global = 64;
  std::vector<double> one =
      test.TrainOneProcess(With(With(kSteps, sets), {"train.batch_size=" + std::to_string(global)}),
                           program);
  ASSERT_EQ(one.size(), 6u);
  fs::remove_all(dir / "ps");
  test.StartJob(servers, trainers,
                With(With(kSteps, sets), {"train.batch_size=" + std::to_string(global / trainers),
                                          "transport.timeout_s=60"}),
                program,
                [&](int) {
                  return std::vector<std::string>{"train.save_params_dir=" +
                                                  (dir / "ps").string()};
                },
                [&](int t) {
                  // Every trainer is given the same files and writes its own (see MetricsOf),
                  // with a fetched var: its own loss again.
                  std::vector<std::string> s = {"train.metrics_file=" + (dir / "m.jsonl").string(),
                                                "train.tensorboard_dir=" + (dir / "tb").string(),
                                                "train.fetch=[\"avg_cost\"]"};
                  if (t == 0) s.push_back("train.save_params_dir=" + (dir / "ps").string());
                  return s;
                });
  test.ExpectJobSucceeds();
  std::vector<double> mean(one.size(), 0.0);
  for (int t = 0; t < trainers; ++t) {
    std::vector<double> losses = PserverTest::Losses(MetricsOf(dir / "m.jsonl", t));
    ASSERT_EQ(losses.size(), one.size()) << "trainer " << t;
    for (size_t i = 0; i < one.size(); ++i) mean[i] += losses[i] / trainers;
    std::ifstream in(MetricsOf(dir / "m.jsonl", t));
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      EXPECT_EQ(j["avg_cost"], j["loss"]) << "trainer " << t << ": " << line;
      // The servers hold the learning rate.
      EXPECT_TRUE(j.contains("lr") && j["lr"].is_null()) << "trainer " << t << ": " << line;
      EXPECT_GT(j["ips"].get<double>(), 0.0) << line;
    }
    const fs::path events = t == 0 ? dir / "tb" : dir / "tb" / ("trainer" + std::to_string(t));
    int files = 0;
    for (const auto& e : fs::directory_iterator(events)) files += e.is_regular_file();
    EXPECT_EQ(files, 1) << "trainer " << t;
  }
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_NEAR(mean[i], one[i], tol * std::max(1.0, std::abs(one[i]))) << "step " << i + 1;
  }
  PserverTest::ExpectSameParams(PserverTest::Params(dir / "one"), PserverTest::Params(dir / "ps"),
                                tol);
  // The servers' own blocks (ps/pserver.N/NAME[.block<k>].npy), put back together along dim 0,
  // are the same parameters: what the trainers fetched is what the servers hold.
  std::map<std::string, std::map<int, data::NpyArray>> blocks;
  for (int i = 0; i < servers; ++i) {
    for (auto& [name, array] :
         PserverTest::Params(dir / "ps" / ("pserver." + std::to_string(i)))) {
      const size_t at = name.rfind(".block");
      if (at == std::string::npos) {
        blocks[name][0] = std::move(array);
      } else {
        blocks[name.substr(0, at)][std::stoi(name.substr(at + 6))] = std::move(array);
      }
    }
  }
  std::map<std::string, data::NpyArray> joined;
  for (auto& [name, parts] : blocks) {
    data::NpyArray whole = parts.begin()->second;
    whole.bytes.clear();
    whole.dims[0] = 0;
    int expect = 0;
    for (auto& [k, part] : parts) {
      EXPECT_EQ(k, expect++) << name << ": a block is missing";
      whole.dims[0] += part.dims.empty() ? 1 : part.dims[0];
      whole.bytes.insert(whole.bytes.end(), part.bytes.begin(), part.bytes.end());
    }
    joined[name] = std::move(whole);
  }
  PserverTest::ExpectSameParams(PserverTest::Params(dir / "one"), joined, tol);
}

}  // namespace

// The issue's equivalence: 2 pservers and 2 trainers in sync mode, each trainer on half of the
// batch, match one process on the whole batch step by step. The MLP's 128x128 weight is split
// in two blocks, one per server; the rest is placed whole.
TEST_F(PserverTest, SyncTwoByTwoMatchesOneProcessStepByStep) {
  ExpectMatchesOneProcess(*this, 2, 2, {}, kMlp, dir_, 1e-5);
}

// The same for the other shapes of the transpile, one test each (every test has its own
// deadline): whole variables (no slicing), a stateful optimizer whose velocity is sliced with
// its parameter under a learning-rate schedule that the servers run, and one server for four
// trainers.
TEST_F(PserverTest, WholeVariablesMatchOneProcess) {
  ExpectMatchesOneProcess(*this, 2, 2, {"strategy.slice_var_up=false"}, kMlp, dir_, 1e-5);
}

TEST_F(PserverTest, MomentumUnderAScheduleMatchesOneProcess) {
  const fs::path momentum = dir_ / "momentum.fleet";
  {
    std::ofstream f(momentum);
    f << "x = data(\"x\", shape=[-1, 32], dtype=\"float32\")\n"
         "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
         "h = fc(x, size=128, act=\"tanh\")\n"
         "h = fc(h, size=128, act=\"tanh\")\n"
         "prediction = fc(h, size=2, act=\"softmax\")\n"
         "avg_cost = mean(cross_entropy(prediction, y))\n"
         "minimize(avg_cost, optimizer=momentum(learning_rate=exponential_decay("
         "learning_rate=0.05, gamma=0.8, decay_steps=2), momentum=0.9))\n";
  }
  ExpectMatchesOneProcess(*this, 2, 2, {}, momentum, dir_, 1e-5);
}

// [train] init_from in a pserver job: each server loads its share (whole vars it holds, the
// rows of its blocks, velocities cut like their parameters, the schedule's state) of weights
// made elsewhere (here a checkpoint of another run, with another seed), and the job matches
// one process started from the same weights.
TEST_F(PserverTest, InitFromMatchesOneProcess) {
  const fs::path momentum = dir_ / "momentum.fleet";
  std::ofstream(momentum)
      << "x = data(\"x\", shape=[-1, 32], dtype=\"float32\")\n"
         "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
         "h = fc(x, size=128, act=\"tanh\")\n"
         "prediction = fc(h, size=2, act=\"softmax\")\n"
         "avg_cost = mean(cross_entropy(prediction, y))\n"
         "minimize(avg_cost, optimizer=momentum(learning_rate=exponential_decay("
         "learning_rate=0.05, gamma=0.8, decay_steps=2), momentum=0.9))\n";
  RankProcess made(RunArgs({"train.steps=3", "train.seed=7",
                            "checkpoint.dir=" + (dir_ / "made").string()},
                           momentum),
                   {}, dir_ / "made.log");
  ASSERT_EQ(made.Wait(milliseconds(60000)), 0) << made.Output();
  const fs::path weights = dir_ / "made" / "step_0000003";
  ExpectMatchesOneProcess(*this, 2, 2, {"train.init_from=" + weights.string()}, momentum, dir_,
                          1e-5);
  for (auto& s : servers_) {
    EXPECT_NE(s->Output().find("init_from: loaded its share of"), std::string::npos)
        << s->Output();
  }
}

TEST_F(PserverTest, OneServerFourTrainersMatchOneProcess) {
  ExpectMatchesOneProcess(*this, 1, 4, {}, kMlp, dir_, 1e-5);
}

// Async mode applies each gradient as it arrives: no equivalence, but on the learnable synthetic
// data the loss must still fall well below where it started. Single batches are noisy, so the
// first ten steps' mean is compared with the last ten's.
TEST_F(PserverTest, AsyncTrainingConverges) {
  StartJob(2, 2,
           {"train.steps=150", "train.log_every=1", "train.batch_size=32",
            "strategy.sync_mode=false", "transport.timeout_s=60"},
           kMlp, nullptr, [&](int) {
             return std::vector<std::string>{"train.metrics_file=" + (dir_ / "m.jsonl").string()};
           });
  ExpectJobSucceeds();
  for (int t = 0; t < 2; ++t) {
    std::vector<double> losses = Losses(MetricsOf(dir_ / "m.jsonl", t));
    ASSERT_EQ(losses.size(), 150u) << "trainer " << t;
    double first = 0, last = 0;
    for (size_t i = 0; i < 10; ++i) {
      first += losses[i] / 10;
      last += losses[losses.size() - 1 - i] / 10;
    }
    EXPECT_LT(last, 0.75 * first) << "trainer " << t;
  }
}

// GEO-SGD with one trainer: the exchange every k steps moves the servers to the trainer's
// parameters and leaves the trainer where local training took it, so the job matches one
// process step by step, and the trainer ends with its parameters. The 128x128 weight is cut
// into blocks on both servers.
TEST_F(PserverTest, GeoSgdWithOneTrainerMatchesOneProcess) {
  const std::vector<std::string> sets = {"train.steps=12", "train.log_every=1",
                                         "train.batch_size=32"};
  const std::vector<double> one = TrainOneProcess(sets);
  ASSERT_EQ(one.size(), 12u);
  StartJob(2, 1,
           With(sets, {"strategy.a_sync=true", "strategy.a_sync_configs.k_steps=3",
                       "transport.timeout_s=60"}),
           kMlp, nullptr, [&](int) {
             return std::vector<std::string>{"train.metrics_file=" + (dir_ / "m.jsonl").string(),
                                             "train.save_params_dir=" + (dir_ / "geo").string()};
           });
  ExpectJobSucceeds();
  const std::vector<double> geo = Losses(dir_ / "m.jsonl");
  ASSERT_EQ(geo.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_NEAR(geo[i], one[i], 1e-5 * std::max(1.0, std::abs(one[i]))) << "step " << i + 1;
  }
  ExpectSameParams(Params(dir_ / "one"), Params(dir_ / "geo"), 1e-5);
  const std::string log = trainers_[0]->Output();
  EXPECT_NE(log.find("GEO-SGD: each trainer trains locally and exchanges its parameters' "
                     "changes with the servers every 3 steps"),
            std::string::npos)
      << log;
}

// GEO-SGD with a table whose gradient is sparse: each exchange sends only the rows that changed
// since the last (a sparse delta; the server's receive var is sparse and refuses a dense one)
// and fetches only those rows back. With one trainer the trainer ends where local training took
// it, and the servers, after the exchange at the start of step 31, hold what it held after step
// 30: every changed row reached them.
TEST_F(PserverTest, GeoSgdWithASparseTableSendsChangedRowsAndMatchesOneProcess) {
  const fs::path program = dir_ / "table.fleet";
  std::ofstream(program) << R"(ids = data("ids", shape=[-1, 4], dtype="int64")
y = data("y", shape=[-1, 1], dtype="int64")
e = embedding(ids, size=[5000, 8], is_sparse=True)
prediction = fc(e, size=2, act="softmax")
minimize(mean(cross_entropy(prediction, y)), optimizer=sgd(learning_rate=0.5))
)";
  {
    std::ofstream data(dir_ / "ids.txt");
    uint64_t state = 3;
    for (int i = 0; i < 2000; ++i) {
      data << "4";
      uint64_t first = 0;
      for (int k = 0; k < 4; ++k) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t id = (state >> 33) % 5000;
        if (k == 0) first = id;
        data << " " << id;
      }
      data << " 1 " << first % 2 << "\n";
    }
  }
  const std::vector<std::string> sets = {
      "data.source=multislot", "data.filelist=[\"" + (dir_ / "ids.txt").string() + "\"]",
      "data.slots=[\"ids\", \"y\"]", "train.batch_size=32", "train.log_every=1",
      "data.shuffle=false"};
  const std::vector<double> one = TrainOneProcess(With(sets, {"train.steps=30"}), program);
  ASSERT_EQ(one.size(), 30u);
  StartJob(2, 1,
           With(sets, {"train.steps=31", "strategy.a_sync=true",
                       "strategy.a_sync_configs.k_steps=3", "transport.timeout_s=60",
                       "train.save_params_dir=" + (dir_ / "geo").string()}),
           program, nullptr, [&](int) {
             return std::vector<std::string>{"train.metrics_file=" + (dir_ / "m.jsonl").string()};
           });
  ExpectJobSucceeds();
  const std::vector<double> geo = Losses(dir_ / "m.jsonl");
  ASSERT_EQ(geo.size(), 31u);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_NEAR(geo[i], one[i], 1e-5 * std::max(1.0, std::abs(one[i]))) << "step " << i + 1;
  }
  // The servers' blocks, joined: the table is cut in two, the fc's weights and bias are whole.
  std::map<std::string, data::NpyArray> served;
  for (int i = 0; i < 2; ++i) {
    for (auto& [name, a] : Params(dir_ / "geo" / ("pserver." + std::to_string(i)))) {
      const size_t at = name.find(".block");
      const std::string whole = name.substr(0, at);
      if (at == std::string::npos || name.substr(at) == ".block0") {
        served[whole] = std::move(a);
      } else {
        served[whole].dims[0] += a.dims[0];
        served[whole].bytes.insert(served[whole].bytes.end(), a.bytes.begin(), a.bytes.end());
      }
    }
  }
  ASSERT_EQ(served.count("embedding_0.w_0"), 1u);
  ExpectSameParams(Params(dir_ / "one"), served, 1e-5);
}

// A send whose reply is lost is retried by the trainer's client under the same request id, and
// the server answers the retry from its delivery log instead of applying the gradient again.
// One server and one trainer in async mode are deterministic (each send is applied before the
// trainer's recv), so the job whose server drops its first replies (the rpc transport's hook,
// FLEET_RPC_LOSE_SEND_REPLIES) must train exactly as the job whose server drops none.
TEST_F(PserverTest, AnAsyncSendWhoseReplyIsLostIsAppliedOnce) {
  const std::vector<std::string> sets = {"train.steps=8", "train.log_every=1",
                                         "train.batch_size=16", "strategy.sync_mode=false",
                                         "transport.timeout_s=60"};
  auto run = [&](const std::string& name, int lose) {
    if (lose > 0) ::setenv("FLEET_RPC_LOSE_SEND_REPLIES", std::to_string(lose).c_str(), 1);
    StartJob(1, 1, sets, kMlp, nullptr, nullptr, /*start_trainers=*/false);
    ::unsetenv("FLEET_RPC_LOSE_SEND_REPLIES");
    StartTrainer(0, 1, sets, kMlp, [&](int) {
      return std::vector<std::string>{"train.metrics_file=" + (dir_ / (name + ".jsonl")).string()};
    });
    ExpectJobSucceeds();
    const std::string server_log = servers_.back()->Output();
    servers_.clear();
    trainers_.clear();
    return std::make_pair(Losses(dir_ / (name + ".jsonl")), server_log);
  };
  const auto [clean, clean_log] = run("clean", 0);
  const auto [lossy, lossy_log] = run("lossy", 3);
  ASSERT_EQ(clean.size(), 8u);
  ASSERT_EQ(lossy.size(), 8u);
  for (size_t i = 0; i < clean.size(); ++i) EXPECT_EQ(lossy[i], clean[i]) << "step " << i + 1;
  // The hook fired, and each of its three lost replies brought one retry that was answered from
  // the log.
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(lossy_log, "its reply dropped on purpose"), 3u) << lossy_log;
  EXPECT_EQ(count(lossy_log, "answered from the delivery log"), 3u) << lossy_log;
  EXPECT_EQ(count(clean_log, "answered from the delivery log"), 0u) << clean_log;
}

// A growable table whose rows the server's memory cannot hold: 256 KiB rows, 64 new ids a step,
// and a server under `ulimit -v` (about 0.8 GiB above what it starts with). The server fails
// with an error naming the table, its rows and the size it could not reach, and exits with a
// code, not a signal; the trainer fails too, rather than waiting.
TEST_F(PserverTest, AServerOutOfMemoryForAGrowableTableSaysWhichAndHowBig) {
  const fs::path program = dir_ / "wide.fleet";
  std::ofstream(program) << R"(ids = data("ids", shape=[-1, 4], dtype="int64")
y = data("y", shape=[-1, 1], dtype="int64")
e = embedding(ids, size=[-1, 65536], is_distributed=True,
              param_attr=ParamAttr(name="wide", initializer=Constant(0.0)))
prediction = fc(e, size=2, act="softmax")
minimize(mean(cross_entropy(prediction, y)), optimizer=sgd(learning_rate=0.01))
)";
  {
    std::ofstream data(dir_ / "ids.txt");
    for (int i = 0; i < 4000; ++i) {  // every id new
      data << "4 " << 4 * i << " " << 4 * i + 1 << " " << 4 * i + 2 << " " << 4 * i + 3 << " 1 "
           << i % 2 << "\n";
    }
  }
  const std::vector<std::string> sets = {
      "data.source=multislot", "data.filelist=[\"" + (dir_ / "ids.txt").string() + "\"]",
      "data.slots=[\"ids\", \"y\"]", "train.batch_size=16", "train.steps=240",
      "transport.timeout_s=30", "train.threads=1"};
  const std::vector<int> ports = fleet::testing::FreeLoopbackPorts(1);
  ASSERT_EQ(ports.size(), 1u);
  endpoints_ = {"127.0.0.1:" + std::to_string(ports[0])};
  std::vector<std::string> args = {"/bin/sh", "-c", "ulimit -v 1800000 && exec \"$@\"", "sh"};
  for (const std::string& a : RunArgs(sets, program)) args.push_back(a);
  servers_.push_back(std::make_unique<RankProcess>(
      args,
      std::map<std::string, std::string>{{"TRAINING_ROLE", "PSERVER"},
                                         {"PADDLE_PSERVERS_IP_PORT_LIST", endpoints_[0]},
                                         {"PADDLE_PSERVER_ID", "0"},
                                         {"POD_IP", "127.0.0.1"},
                                         {"PADDLE_PORT", std::to_string(ports[0])},
                                         {"PADDLE_TRAINERS_NUM", "1"},
                                         {"LOCAL_WORLD_SIZE", "2"}},
      dir_ / "server0.log"));
  ASSERT_TRUE(servers_.back()->started());
  StartTrainer(0, 1, sets, program);
  const int server = servers_[0]->Wait(milliseconds(120000));
  const std::string out = servers_[0]->Output();
  EXPECT_EQ(server, 1) << out;
  EXPECT_NE(out.find("growable table 'wide' holds "), std::string::npos) << out;
  EXPECT_NE(out.find(" rows in "), std::string::npos) << out;
  EXPECT_NE(out.find("and cannot grow to "), std::string::npos) << out;
  const int trainer = trainers_[0]->Wait(milliseconds(60000));
  EXPECT_NE(trainer, 0) << trainers_[0]->Output();
  EXPECT_LT(trainer, 128) << trainers_[0]->Output();  // an exit code, not a signal
}

// A trainer killed mid-run: in sync mode the servers wait for its batch barrier until
// transport.timeout_s and then fail naming it; the surviving trainer fails too (its servers
// went away), and nothing hangs.
TEST_F(PserverTest, KilledTrainerIsNamedByTheServers) {
  StartJob(2, 2, {"train.steps=100000", "train.log_every=1", "transport.timeout_s=3"});
  // The killed trainer is named alone ("trainer 1") or, when the survivor was also late on a
  // loaded machine, in the list ("trainers 0, 1").
  const std::regex names_trainer_1(R"(trainers? (\d+, )*1\b)");
  // Let training get going, then kill trainer 1.
  std::this_thread::sleep_for(milliseconds(2500));
  kill(trainers_[1]->pid(), SIGKILL);
  for (auto& s : servers_) {
    const int code = s->Wait(milliseconds(20000));
    EXPECT_NE(code, 0) << s->Output();
    EXPECT_NE(code, -1) << "a server hung: " << s->Output();
    EXPECT_TRUE(std::regex_search(s->Output(), names_trainer_1)) << s->Output();
  }
  const int code = trainers_[0]->Wait(milliseconds(20000));
  EXPECT_NE(code, 0) << trainers_[0]->Output();
  EXPECT_NE(code, -1) << "trainer 0 hung: " << trainers_[0]->Output();
}

// A pserver killed mid-run: every trainer fails within its RPC deadline (plus retries). The
// ones that were talking to it name its endpoint; one that was waiting on the other server may
// instead hear that server's own failure (a trainer that went away), which names the trainer.
TEST_F(PserverTest, KilledServerIsNamedByTheTrainers) {
  StartJob(2, 2, {"train.steps=100000", "train.log_every=1", "transport.timeout_s=3",
                  "transport.retries=1"});
  std::this_thread::sleep_for(milliseconds(2500));
  kill(servers_[1]->pid(), SIGKILL);
  int named = 0;
  for (auto& t : trainers_) {
    const int code = t->Wait(milliseconds(20000));
    EXPECT_NE(code, 0) << t->Output();
    EXPECT_NE(code, -1) << "a trainer hung: " << t->Output();
    const std::string out = t->Output();
    if (out.find(endpoints_[1]) != std::string::npos) {
      ++named;
    } else {
      EXPECT_NE(out.find("did not reach the batch barrier"), std::string::npos) << out;
    }
  }
  EXPECT_GE(named, 1) << "no trainer named the killed server " << endpoints_[1];
  const int code = servers_[0]->Wait(milliseconds(20000));
  EXPECT_NE(code, -1) << "server 0 hung: " << servers_[0]->Output();
}

// A trainer whose data turns bad mid-run fails, and tells the servers why: they fail at once
// naming it, and the other trainer hears it from them, far inside transport.timeout_s (60 s).
TEST_F(PserverTest, AFailingTrainerTellsTheServers) {
  const int rows = 32 * 40;
  data::NpyArray x;
  x.dtype = ir::DataType::kFloat32;
  x.dims = {rows, 32};
  x.bytes.resize(static_cast<size_t>(rows) * 32 * 4);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 7) / 7.0f;
  data::NpyArray good;
  good.dtype = ir::DataType::kInt64;
  good.dims = {rows, 1};
  good.bytes.resize(static_cast<size_t>(rows) * 8);
  for (int64_t i = 0; i < rows; ++i) good.data<int64_t>()[i] = i % 2;
  data::NpyArray bad = good;
  for (int64_t i = rows / 4; i < rows; ++i) bad.data<int64_t>()[i] = 9;  // two classes
  ASSERT_TRUE(data::WriteNpy(dir_ / "x.npy", x).ok());
  ASSERT_TRUE(data::WriteNpy(dir_ / "good.npy", good).ok());
  ASSERT_TRUE(data::WriteNpy(dir_ / "bad.npy", bad).ok());
  const auto start = std::chrono::steady_clock::now();
  StartJob(2, 2,
           {"train.steps=40", "train.batch_size=32", "transport.timeout_s=60"}, kMlp, nullptr,
           [&](int t) {
             return std::vector<std::string>{
                 "data.source=npy", "data.files.x=" + (dir_ / "x.npy").string(),
                 "data.files.y=" + (dir_ / (t == 1 ? "bad.npy" : "good.npy")).string()};
           });
  const int failed = trainers_[1]->Wait(milliseconds(30000));
  EXPECT_EQ(failed, 1) << trainers_[1]->Output();
  EXPECT_NE(trainers_[1]->Output().find("is outside [0, 2)"), std::string::npos)
      << trainers_[1]->Output();
  for (auto& server : servers_) {
    const int code = server->Wait(milliseconds(20000));
    EXPECT_NE(code, 0) << server->Output();
    EXPECT_NE(code, -1) << "a server waited: " << server->Output();
    EXPECT_NE(server->Output().find("trainer 1 failed: "), std::string::npos)
        << server->Output();
    EXPECT_NE(server->Output().find("is outside [0, 2)"), std::string::npos)
        << server->Output();
  }
  const int code = trainers_[0]->Wait(milliseconds(20000));
  EXPECT_NE(code, 0) << trainers_[0]->Output();
  EXPECT_NE(code, -1) << "trainer 0 waited: " << trainers_[0]->Output();
  EXPECT_NE(trainers_[0]->Output().find("trainer 1 failed"), std::string::npos)
      << trainers_[0]->Output();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            45.0)
      << "the job ran into the 60 s deadline";
}

// A server killed and started again at its endpoint holds none of the job's state: the trainer
// must not go on with it. It fails at once, naming the server, instead of stalling into
// transport.timeout_s (60 s): a retried send or get that reaches the new server is refused
// as a restart, and a barrier in flight fails on the dropped connection.
TEST_F(PserverTest, ARestartedServerIsNoticedAtOnce) {
  StartJob(1, 1, {"train.steps=100000", "train.log_every=1", "transport.timeout_s=60",
                  "transport.retries=8"});
  std::this_thread::sleep_for(milliseconds(2500));
  const auto start = std::chrono::steady_clock::now();
  kill(servers_[0]->pid(), SIGKILL);
  EXPECT_EQ(servers_[0]->Wait(milliseconds(5000)), 128 + SIGKILL);
  std::map<std::string, std::string> env = {
      {"TRAINING_ROLE", "PSERVER"},
      {"PADDLE_PSERVERS_IP_PORT_LIST", endpoints_[0]},
      {"PADDLE_PSERVER_ID", "0"},
      {"POD_IP", "127.0.0.1"},
      {"PADDLE_PORT", endpoints_[0].substr(endpoints_[0].rfind(':') + 1)},
      {"PADDLE_TRAINERS_NUM", "1"},
      {"LOCAL_WORLD_SIZE", "2"}};
  servers_.push_back(std::make_unique<RankProcess>(
      RunArgs({"train.steps=100000", "transport.timeout_s=60"}), env, dir_ / "server0b.log"));
  ASSERT_TRUE(servers_.back()->started());
  const int code = trainers_[0]->Wait(milliseconds(30000));
  EXPECT_NE(code, 0) << trainers_[0]->Output();
  EXPECT_NE(code, -1) << "the trainer stalled: " << trainers_[0]->Output();
  EXPECT_NE(trainers_[0]->Output().find(endpoints_[0]), std::string::npos)
      << trainers_[0]->Output();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            30.0);
  // The new server may never hear of the trainer (its notice can go out before the new
  // server listens); TearDown stops it.
}

// A server whose endpoint is taken refuses to start, naming the address.
TEST_F(PserverTest, ServerOnAPortInUseSaysSo) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string endpoint = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  std::map<std::string, std::string> env = {{"TRAINING_ROLE", "PSERVER"},
                                            {"PADDLE_PSERVERS_IP_PORT_LIST", endpoint},
                                            {"POD_IP", "127.0.0.1"},
                                            {"PADDLE_PORT", std::to_string(ntohs(addr.sin_port))},
                                            {"PADDLE_TRAINERS_NUM", "1"}};
  RankProcess server(RunArgs({}), env, dir_ / "server.log");
  const int code = server.Wait(milliseconds(15000));
  close(fd);
  EXPECT_NE(code, 0);
  EXPECT_NE(code, -1) << "the server hung";
  EXPECT_NE(server.Output().find(endpoint), std::string::npos) << server.Output();
}

// Misconfigured peers fail fast with the reason: a tensor chunk over the server's message cap,
// a wrong token, a plaintext trainer against a TLS server. The servers then give up on the
// trainers that never got through (transport.timeout_s) rather than waiting forever.
TEST_F(PserverTest, MisconfiguredPeersAreRefusedWithTheReason) {
  const fs::path certs = dir_ / "certs";
  fs::create_directories(certs);
  const std::string gen =
      "cd '" + certs.string() +
      "' && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=fleet-test-ca "
      "-keyout ca.key -out ca.pem >/dev/null 2>&1 && "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key "
      "-out server.csr >/dev/null 2>&1 && "
      "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && "
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile san.ext -out server.pem >/dev/null 2>&1";
  ASSERT_EQ(std::system(gen.c_str()), 0) << "openssl could not make test certificates";
  // A 512x512 weight kept whole is a 1 MiB gradient: one chunk under the trainer's 4 MiB cap,
  // eight times the server's.
  const fs::path wide = dir_ / "wide.fleet";
  {
    std::ofstream f(wide);
    f << "x = data(\"x\", shape=[-1, 512], dtype=\"float32\")\n"
         "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
         "h = fc(x, size=512, act=\"tanh\")\n"
         "prediction = fc(h, size=2, act=\"softmax\")\n"
         "minimize(mean(cross_entropy(prediction, y)), optimizer=sgd(learning_rate=0.01))\n";
  }
  struct Case {
    std::string name;
    std::vector<std::string> server_sets, trainer_sets;
    std::vector<std::string> expect_any;  // the trainer's error mentions one of these
    fs::path program = kMlp;
  };
  const std::vector<Case> cases = {
      {"message over the cap",
       {"transport.max_message_mb=0.125"},
       {"transport.max_message_mb=4"},
       {"max_message_mb"},
       wide},
      {"wrong token", {"transport.token=right"}, {"transport.token=wrong"}, {"token"}},
      {"plaintext trainer, TLS server",
       {"transport.tls=true", "transport.tls_cert=" + (certs / "server.pem").string(),
        "transport.tls_key=" + (certs / "server.key").string()},
       {},
       {"TLS", "tls"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    servers_.clear();
    trainers_.clear();
    StartJob(1, 1,
             {"train.steps=3", "train.batch_size=8", "strategy.slice_var_up=false",
              "transport.timeout_s=3", "transport.retries=1"},
             c.program, [&](int) { return c.server_sets; }, [&](int) { return c.trainer_sets; });
    const int code = trainers_[0]->Wait(milliseconds(20000));
    EXPECT_NE(code, 0) << trainers_[0]->Output();
    EXPECT_NE(code, -1) << "the trainer hung: " << trainers_[0]->Output();
    bool mentioned = false;
    for (const auto& word : c.expect_any) {
      mentioned |= trainers_[0]->Output().find(word) != std::string::npos;
    }
    EXPECT_TRUE(mentioned) << trainers_[0]->Output();
    EXPECT_NE(servers_[0]->Wait(milliseconds(20000)), -1) << "the server hung";
  }
}

// The user's way in: `fleet-host launch --servers 2 --workers 2 -- run mlp.fleet`.
TEST_F(PserverTest, LaunchRunsAServerWorkerJob) {
  RankProcess launcher({kHost, "launch", "--servers", "2", "--workers", "2", "--log-dir",
                        (dir_ / "log").string(), "--", kHost, "run", kMlp.string(), "--config",
                        (kExamples / "mlp" / "fleet.toml").string(), "--set", "train.steps=20",
                        "--set", "train.log_every=10"},
                       {}, dir_ / "launch.log");
  ASSERT_EQ(launcher.Wait(milliseconds(120000)), 0) << launcher.Output();
  for (const char* name : {"serverlog.0", "serverlog.1", "workerlog.0", "workerlog.1"}) {
    bool found = false;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "log")) {
      found |= e.path().filename() == name;
    }
    EXPECT_TRUE(found) << name;
  }
  EXPECT_NE(launcher.Output().find("step 20/20"), std::string::npos) << launcher.Output();
}

// `fleet-host launch` makes a secret for a job whose servers are all local, and the servers
// take calls only with the token derived from it: a stranger's Complete (which would end a
// server's wait for that trainer) is refused, logged with the stranger's address, and the job
// goes on.
TEST_F(PserverTest, ALaunchedJobsServersRefuseAStranger) {
  RankProcess launcher({kHost, "launch", "--servers", "1", "--workers", "1", "--log-dir",
                        (dir_ / "log").string(), "--", kHost, "run", kMlp.string(), "--config",
                        (kExamples / "mlp" / "fleet.toml").string(), "--set",
                        "train.steps=1000000", "--set", "transport.timeout_s=30"},
                       {}, dir_ / "launch.log");
  ASSERT_TRUE(launcher.started());
  auto server_log = [&]() -> std::string {
    if (!fs::is_directory(dir_ / "log")) return "";
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "log")) {
      if (e.path().filename() == "serverlog.0") {
        std::ifstream in(e.path());
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    }
    return "";
  };
  const std::regex listening(R"(listening on (127\.0\.0\.1:\d+))");
  std::smatch m;
  std::string log;
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(60000);
  while (!std::regex_search(log = server_log(), m, listening) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_FALSE(m.empty()) << "the server never listened: " << log << launcher.Output();
  const std::string endpoint = m[1];

  LoadOptions load;
  load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
  PluginRegistry registry(load);
  ASSERT_TRUE(registry.Load("transport_rpc").ok());
  const ComponentRecord* rpc = registry.Find(FLEET_COMPONENT_TRANSPORT, "rpc");
  ASSERT_NE(rpc, nullptr);
  TransportOptions stranger;
  stranger.timeout = milliseconds(5000);
  stranger.retries = 0;
  auto client = TransportClient::Connect(*rpc, endpoint, 0, stranger);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const Status s = (*client)->Complete();
  EXPECT_EQ(s.code(), Code::kUnauthenticated) << s.ToString();
  bool logged = false;
  for (int i = 0; i < 50 && !logged; ++i) {
    log = server_log();
    logged = log.find("refused a call from") != std::string::npos;
    if (!logged) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(logged) << log;
  EXPECT_NE(log.find("wrong or missing token"), std::string::npos) << log;
  // The job is still training.
  EXPECT_EQ(launcher.Wait(milliseconds(1000)), -1) << launcher.Output();
}

}  // namespace fleet::dist_test
