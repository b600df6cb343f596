// examples/ctr_dnn as users run it, on data its make_data.py writes: 26 variable-length id slots
// as sequence tensors. It learns (AUC well above 0.5) in one process, under `launch --nproc 2`
// and under `launch --servers 2 --workers 2`; two ranks on halves of each batch take the steps of
// one process on the whole batch, sequences split whole between them and each rank's capacity
// grown at the same step. The example's [eval] runs on held-out lines in every mode; the two
// ranks' evaluation, combined, is one process's. Every wait has a deadline.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "rank_process.h"

namespace fleet::dist_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const std::string kHost = FLEET_HOST_EXE;
const fs::path kExample = fs::path(FLEET_EXAMPLES_DIR) / "ctr_dnn";

std::vector<nlohmann::json> Records(const fs::path& metrics) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

void ExpectLearns(const std::vector<nlohmann::json>& records, const std::string& what) {
  ASSERT_GE(records.size(), 2u) << what;
  const double auc = records.back()["auc"].get<double>();
  EXPECT_GT(auc, 0.7) << what;
  EXPECT_LT(records.back()["loss"].get<double>(), records.front()["loss"].get<double>()) << what;
  // Held-out lines: the model generalises, if less well than it fits.
  ASSERT_TRUE(records.back().contains("eval_auc")) << what;
  EXPECT_GT(records.back()["eval_auc"].get<double>(), 0.62) << what;
}

// No process of a launched job (its logs under `logs`) fell back to dense gradients.
void ExpectNoDenseFallback(const fs::path& logs, size_t processes = 4) {
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(logs)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".json") continue;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("dense gradients"), std::string::npos) << entry.path() << ":\n" << text;
    ++files;
  }
  EXPECT_GE(files, processes) << logs;
}

// How many of the log files under `logs` say `text`.
size_t LogsSaying(const fs::path& logs, const std::string& text) {
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(logs)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".json") continue;
    std::ifstream in(entry.path());
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (all.find(text) != std::string::npos) ++files;
  }
  return files;
}

class CtrDnnTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = fs::temp_directory_path() / ("fleet_ctr_dnn_" + std::to_string(getpid()));
    fs::remove_all(data_);
    const std::string cmd = std::string(FLEET_PYTHON3) + " '" + (kExample / "make_data.py").string() +
                            "' '" + data_.string() +
                            "' --files 2 --lines 1500 --eval-lines 1000 > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() { fs::remove_all(data_); }

  void SetUp() override {
    dir_ = data_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }

  // fleet-host with the example's config, its data here, and `sets`.
  std::vector<std::string> Host(std::vector<std::string> sets) const {
    std::vector<std::string> args = {kHost, "--config", (kExample / "fleet.toml").string()};
    sets.push_back("data.filelist=[\"" + (data_ / "part-*.txt").string() + "\"]");
    sets.push_back("eval.filelist=[\"" + (data_ / "eval" / "part-*.txt").string() + "\"]");
    sets.push_back("train.log_every=10");
    for (const auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return args;
  }

  // The example, with is_sparse=False unless `sparse`, and `optimizer` in place of its Adam
  // when given.
  fs::path Copy(bool sparse, const std::string& optimizer = "") const {
    std::ifstream in(kExample / "ctr_dnn.fleet");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t at; !sparse && (at = text.find("is_sparse=True")) != std::string::npos;) {
      text.replace(at, 14, "is_sparse=False");
    }
    const std::string adam = "adam(learning_rate=0.001)";
    if (!optimizer.empty()) text.replace(text.find(adam), adam.size(), optimizer);
    const fs::path out = dir_ / (std::string(sparse ? "sparse" : "dense") + ".fleet");
    std::ofstream(out) << text;
    return out;
  }
  fs::path DenseCopy() const { return Copy(false); }

  // Two ranks on halves of every batch against one process on whole batches, step by step;
  // with `learns`, the two ranks' job also reaches ExpectLearns' AUC (Adam does in 300 steps).
  // The ranks are `launch`'s (two collective trainers unless told otherwise), with the
  // settings `two_sets` as well.
  void ExpectTwoRanksMatchOne(const fs::path& program, const std::string& name, double tol,
                              bool learns,
                              const std::vector<std::string>& launch = {"--nproc", "2"},
                              const std::vector<std::string>& two_sets = {}) {
    // Every rank reads every file and keeps its half of each global batch, so the two ranks
    // take the steps of one process on batches of 64.
    const std::vector<std::string> sets = {"train.steps=300", "data.shard=false"};
    // Evaluations of 5 batches of 200 held-out lines: split 100 and 100 between the two ranks.
    std::vector<std::string> whole = sets;
    whole.push_back("eval.batch_size=200");
    std::vector<nlohmann::json> one = Run({}, whole, name + "_one", program);
    std::vector<std::string> half = sets;
    half.push_back("train.batch_size=32");
    half.push_back("eval.batch_size=100");
    half.insert(half.end(), two_sets.begin(), two_sets.end());
    std::vector<nlohmann::json> two = Run(launch, half, name + "_two", program);
    if (learns) ExpectLearns(two, "launch " + launch.front());
    ASSERT_EQ(one.size(), two.size());
    for (size_t i = 0; i < one.size(); ++i) {
      const double want = one[i]["loss"].get<double>();
      EXPECT_NEAR(two[i]["loss"].get<double>(), want, tol * std::max(1.0, std::abs(want)))
          << "step " << one[i]["step"];
      ASSERT_EQ(one[i].contains("eval_loss"), two[i].contains("eval_loss")) << one[i]["step"];
      if (!one[i].contains("eval_loss")) continue;
      const double eval_loss = one[i]["eval_loss"].get<double>();
      EXPECT_NEAR(two[i]["eval_loss"].get<double>(), eval_loss, tol * std::max(1.0, eval_loss))
          << "step " << one[i]["step"];
      // From the statistics summed over the ranks: one process's, but for a prediction a
      // rounding apart that lands in the next of 4096 buckets.
      EXPECT_NEAR(two[i]["eval_auc"].get<double>(), one[i]["eval_auc"].get<double>(), 1e-3)
          << "step " << one[i]["step"];
    }
  }

  // Two devices of one process (single_process_multi_thread) on halves of every batch against
  // one process on whole batches, `steps` steps: the same evaluation (every 100 steps) within
  // `tol`. The runs are "<name>_one" and "<name>_two".
  void ExpectDevicesEvaluateAsOne(const fs::path& program, const std::string& name, int steps,
                                  double tol) {
    const std::vector<std::string> sets = {"train.steps=" + std::to_string(steps),
                                           "data.shard=false", "eval.batch_size=200"};
    std::vector<nlohmann::json> one = Run({}, sets, name + "_one", program);
    std::vector<std::string> devices = sets;
    devices.insert(devices.end(), {"train.batch_size=32", "strategy.mode=collective",
                                   "strategy.collective_mode=single_process_multi_thread",
                                   "strategy.devices=2"});
    std::vector<nlohmann::json> two = Run({}, devices, name + "_two", program);
    ASSERT_EQ(one.size(), two.size());
    size_t evaluations = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_EQ(one[i].contains("eval_loss"), two[i].contains("eval_loss")) << one[i]["step"];
      if (!one[i].contains("eval_loss")) continue;
      ++evaluations;
      const double eval_loss = one[i]["eval_loss"].get<double>();
      EXPECT_NEAR(two[i]["eval_loss"].get<double>(), eval_loss, tol * std::max(1.0, eval_loss))
          << "step " << one[i]["step"];
      EXPECT_NEAR(two[i]["eval_auc"].get<double>(), one[i]["eval_auc"].get<double>(), 1e-3)
          << "step " << one[i]["step"];
    }
    EXPECT_EQ(evaluations, static_cast<size_t>(steps / 100));  // every 100 steps
  }

  // Two runs' training losses, step by step, within `tol` (relative above 1).
  static void ExpectSameLosses(const std::vector<nlohmann::json>& got,
                               const std::vector<nlohmann::json>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    ASSERT_GE(got.size(), 20u);
    for (size_t i = 0; i < got.size(); ++i) {
      const double w = want[i]["loss"].get<double>();
      EXPECT_NEAR(got[i]["loss"].get<double>(), w, tol * std::max(1.0, std::abs(w)))
          << "step " << want[i]["step"];
    }
  }

  std::vector<nlohmann::json> Run(const std::vector<std::string>& launch,
                                  const std::vector<std::string>& sets, const std::string& name,
                                  const fs::path& program = kExample / "ctr_dnn.fleet") {
    std::vector<std::string> all = sets;
    all.push_back("train.metrics_file=" + (dir_ / (name + ".jsonl")).string());
    std::vector<std::string> args = Host(all);
    if (!launch.empty()) {
      args.push_back("launch");
      args.insert(args.end(), launch.begin(), launch.end());
      args.insert(args.end(), {"--log-dir", (dir_ / (name + "_logs")).string(), "--"});
    }
    args.insert(args.end(), {"run", program.string()});
    RankProcess p(args, {}, dir_ / (name + ".log"));
    EXPECT_EQ(p.Wait(milliseconds(150000)), 0) << p.Output();
    return Records(dir_ / (name + ".jsonl"));
  }

  static fs::path data_;
  fs::path dir_;
};

fs::path CtrDnnTest::data_;


TEST_F(CtrDnnTest, OneProcessLearns) {
  ExpectLearns(Run({}, {"train.steps=300"}, "one"), "fleet-host run");
}

// The table's sparse gradient (26 lookups' entries, the padding rows of each slot's sequences
// left out) moves the table as the dense gradient does: with SGD the two runs agree to float
// rounding over 200 steps, within 1e-4 (Adam would amplify that rounding, see below).
TEST_F(CtrDnnTest, SparseGradientsTrainAsDenseOnes) {
  const std::string sgd = "sgd(learning_rate=0.05)";
  const std::vector<std::string> sets = {"train.steps=200"};
  std::vector<nlohmann::json> sparse = Run({}, sets, "sparse", Copy(true, sgd));
  std::vector<nlohmann::json> dense = Run({}, sets, "dense", Copy(false, sgd));
  ExpectSameLosses(sparse, dense, 1e-4);
}

// With dense gradients (all-reduced) the two ranks follow one process within 1e-4 over 300 SGD
// steps. With Adam they learn as well; they are not held to one process's steps there, since
// Adam amplifies the other order in which the two ranks' gradients add up: how far depends on
// the CPU's kernels, and on some CPUs it passes 1e-3 within 100 steps.
TEST_F(CtrDnnTest, LaunchNproc2LearnsAndMatchesOneProcess) {
  ExpectTwoRanksMatchOne(Copy(false, "sgd(learning_rate=0.05)"), "dense", 1e-4, false);
  const std::vector<nlohmann::json> adam =
      Run({"--nproc", "2"},
          {"train.steps=300", "data.shard=false", "train.batch_size=32", "eval.batch_size=100"},
          "dense_adam", DenseCopy());
  ExpectLearns(adam, "launch --nproc 2 with Adam");
}

// With the table's sparse gradient, gathered from both ranks (grad_allreduce's c_allgather), the
// same, with SGD: Adam amplifies the other order in which the gathered entries add up (a drift of
// 1e-2 within 150 steps here), as it amplifies any change in the order of a gradient's sums.
// Each rank says it gathered: 2 ranks' entries are far fewer than twice the table's 10 000 rows.
TEST_F(CtrDnnTest, LaunchNproc2WithSparseGradientsMatchesOneProcess) {
  ExpectTwoRanksMatchOne(Copy(true, "sgd(learning_rate=0.05)"), "sparse", 1e-4, false);
  EXPECT_EQ(LogsSaying(dir_ / "sparse_two_logs",
                       "c_allgather (ring 0) of 'SparseFeatFactors@GRAD': gathered (rows and "
                       "slices): 2 ranks x "),
            2u);
}

// The same with sparse_exchange = "dense": the ranks gather the rows alone, all-reduce their
// table-sized sum and hand the update the same rows, so the job still takes one process's steps
// within 1e-4, and each rank says which way it took.
TEST_F(CtrDnnTest, LaunchNproc2WithADenseSparseExchangeMatchesOneProcess) {
  ExpectTwoRanksMatchOne(Copy(true, "sgd(learning_rate=0.05)"), "sparse_dense", 1e-4, false,
                         {"--nproc", "2"}, {"strategy.sparse_exchange=dense"});
  EXPECT_EQ(LogsSaying(dir_ / "sparse_dense_two_logs", "exchanged dense (rows gathered"), 2u);
}

// Two devices of one process (single_process_multi_thread) hold the same parameters after
// every step, and the first evaluates for both: the same evaluations as one process training
// on the same global batches, within 1e-4 with SGD (Adam: see above).
TEST_F(CtrDnnTest, DevicesOfOneProcessEvaluateAsOneProcess) {
  ExpectDevicesEvaluateAsOne(Copy(false, "sgd(learning_rate=0.05)"), "devices", 200, 1e-4);
}

// local_sgd averages parameters, never gradients, so each rank's sparse gradient stays its own:
// with SGD two ranks take the steps the same job takes with dense gradients, within 1e-4 over
// 200 steps, and neither falls back to dense ones.
TEST_F(CtrDnnTest, LocalSgdWithSparseGradientsTrainsAsWithDenseOnes) {
  const std::string sgd = "sgd(learning_rate=0.05)";
  const std::vector<std::string> sets = {"train.steps=200", "train.batch_size=32",
                                         "strategy.collective_mode=local_sgd"};
  std::vector<nlohmann::json> sparse = Run({"--nproc", "2"}, sets, "lsgd_sparse", Copy(true, sgd));
  std::vector<nlohmann::json> dense = Run({"--nproc", "2"}, sets, "lsgd_dense", Copy(false, sgd));
  ExpectSameLosses(sparse, dense, 1e-4);
  ExpectNoDenseFallback(dir_ / "lsgd_sparse_logs", 2);
}

// Two devices of one process (single_process_multi_thread) gather their sparse gradients as two
// processes do: with SGD their evaluations are one process's on the whole batches, within 1e-4.
TEST_F(CtrDnnTest, DevicesOfOneProcessWithSparseGradientsEvaluateAsOneProcess) {
  ExpectDevicesEvaluateAsOne(Copy(true, "sgd(learning_rate=0.05)"), "devices_sparse", 200, 1e-4);
  std::ifstream in(dir_ / "devices_sparse_two.log");
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(log.find("dense gradients"), std::string::npos) << log;
  EXPECT_NE(log.find("gathered (rows and slices): 2 ranks x "), std::string::npos) << log;
}

// Two servers and two workers, sync, with the table's sparse gradient: each worker cuts it at
// the servers' row blocks (split_selected_rows) and sends the entries of each block; a server
// sums the two workers' entries, scales them by 1/2 and updates the rows they touch. With SGD
// that is one process's step on the whole batch, within 1e-4 over 300 steps, evaluations
// included. No process fell back to dense gradients.
TEST_F(CtrDnnTest, LaunchServersWorkersWithSparseGradientsMatchesOneProcess) {
  ExpectTwoRanksMatchOne(Copy(true, "sgd(learning_rate=0.05)"), "ps_sparse", 1e-4, false,
                         {"--servers", "2", "--workers", "2"});
  ExpectNoDenseFallback(dir_ / "ps_sparse_two_logs");
}

// Asynchronous servers (sync_mode = false) apply each worker's sparse blocks as they arrive:
// the example with its Adam still learns.
TEST_F(CtrDnnTest, LaunchServersWorkersAsyncWithSparseGradientsLearns) {
  ExpectLearns(Run({"--servers", "2", "--workers", "2"},
                   {"train.steps=300", "strategy.sync_mode=false"}, "ps_async", Copy(true)),
               "launch --servers 2 --workers 2, async");
  ExpectNoDenseFallback(dir_ / "ps_async_logs");
}

// Fleet 2.x's a_sync: asynchronous servers, and trainers that hand their gradients to the
// background communicator. With its defaults (one gradient per send, a queue of one) and with
// eight gradients merged per send, the example learns; merging shows in the sends the trainer
// reports.
TEST_F(CtrDnnTest, LaunchServersWorkersThroughTheAsyncCommunicatorLearns) {
  struct Case {
    std::string name;
    std::vector<std::string> sets;
    bool merges;
  };
  const std::vector<Case> cases = {
      {"a_sync", {"train.steps=300", "strategy.a_sync=true"}, false},
      {"a_sync_merge",
       {"train.steps=300", "strategy.a_sync=true", "strategy.a_sync_configs.max_merge_var_num=8",
        "strategy.a_sync_configs.send_queue_size=8"},
       true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectLearns(Run({"--servers", "2", "--workers", "2"}, c.sets, c.name, Copy(true)),
                 "launch --servers 2 --workers 2, " + c.name);
    ExpectNoDenseFallback(dir_ / (c.name + "_logs"));
    std::ifstream log(dir_ / (c.name + "_logs") / "fleet" / "workerlog.0");
    const std::string worker((std::istreambuf_iterator<char>(log)),
                             std::istreambuf_iterator<char>());
    std::smatch m;
    ASSERT_TRUE(std::regex_search(worker, m,
                                  std::regex(R"(communicator: (\d+) gradients in (\d+) sends)")))
        << worker;
    const long gradients = std::stol(m[1]), sends = std::stol(m[2]);
    EXPECT_GT(gradients, 300) << worker;
    if (c.merges) {
      EXPECT_LT(sends * 2, gradients) << worker;
    } else {
      EXPECT_EQ(sends, gradients) << worker;
    }
  }
}

// GEO-SGD (a_sync with k_steps > 0): each worker trains the whole model locally, the table
// included, and every 10 steps exchanges its parameters' changes with the servers; the job
// learns as the other modes do.
TEST_F(CtrDnnTest, LaunchServersWorkersWithGeoSgdLearns) {
  ExpectLearns(Run({"--servers", "2", "--workers", "2"},
                   {"train.steps=300", "strategy.a_sync=true",
                    "strategy.a_sync_configs.k_steps=10"},
                   "geo", Copy(true)),
               "launch --servers 2 --workers 2, GEO-SGD every 10 steps");
  ExpectNoDenseFallback(dir_ / "geo_logs");
}

// A table declared is_distributed lives only on the servers: with [8e6, 10] (320 MB of floats)
// the trainer fetches the rows of each batch and never holds the table, as its peak resident
// memory shows (the servers hold half each).
TEST_F(CtrDnnTest, ADistributedTableStaysOutOfTheTrainersMemory) {
  std::ifstream in(kExample / "ctr_dnn.fleet");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string sparse = "size=[10000, 10], is_sparse=True";
  for (size_t at; (at = text.find(sparse)) != std::string::npos;) {
    text.replace(at, sparse.size(), "size=[8000000, 10], is_distributed=True");
  }
  const std::string adam = "adam(learning_rate=0.001)";
  text.replace(text.find(adam), adam.size(), "sgd(learning_rate=0.05)");
  const fs::path program = dir_ / "distributed.fleet";
  std::ofstream(program) << text;
  Run({"--servers", "2", "--workers", "1"}, {"train.steps=20"},
      "distributed", program);
  ExpectNoDenseFallback(dir_ / "distributed_logs", 3);
  std::ifstream log(dir_ / "distributed_logs" / "fleet" / "workerlog.0");
  const std::string worker((std::istreambuf_iterator<char>(log)),
                           std::istreambuf_iterator<char>());
  const size_t at = worker.find("peak resident memory ");
  ASSERT_NE(at, std::string::npos) << worker;
  const long mib = std::stol(worker.substr(at + 21));
  const long table_mib = 8000000L * 10 * 4 / (1 << 20);
  EXPECT_LT(mib, table_mib / 3) << worker;
  EXPECT_GT(mib, 0);
  std::cout << "trainer peak resident memory " << mib << " MiB, table " << table_mib << " MiB\n";
}

// The example with its table declared `table` (the size and flags of every embedding), its
// rows initialised to 0.01 (a growable table draws each row alone, so only a constant start is
// the same for a fixed one), trained with `optimizer`.
fs::path TableVariant(const fs::path& dir, const std::string& name, const std::string& table) {
  std::ifstream in(kExample / "ctr_dnn.fleet");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string sparse = "size=[10000, 10], is_sparse=True";
  for (size_t at; (at = text.find(sparse)) != std::string::npos;) {
    text.replace(at, sparse.size(), table);
  }
  const std::string attr = "ParamAttr(name=\"SparseFeatFactors\")";
  text.replace(text.find(attr), attr.size(),
               "ParamAttr(name=\"SparseFeatFactors\", initializer=Constant(0.01))");
  const fs::path out = dir / (name + ".fleet");
  std::ofstream(out) << text;
  return out;
}

// Calls `visit` on each id of the 26 id slots of every line of the files directly in `dir`
// (MultiSlot: a count, then that many values, per slot; 13 dense features first, the label
// last), then `done` with the line's words, ids as `visit` left them.
void ForEachId(const fs::path& dir, const std::function<void(std::string&)>& visit,
               const std::function<void(const fs::path&, const std::vector<std::string>&)>& done) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::vector<std::string> w((std::istream_iterator<std::string>(words)),
                                 std::istream_iterator<std::string>());
      size_t at = 0;
      for (int slot = 0; slot < 28 && at < w.size(); ++slot) {
        const size_t n = std::stoul(w[at++]);
        for (size_t k = 0; k < n && at < w.size(); ++k, ++at) {
          if (slot >= 1 && slot <= 26) visit(w[at]);
        }
      }
      done(e.path(), w);
    }
  }
}

// The example's files with every id of the 26 id slots moved up by `by`.
void ShiftIds(const fs::path& from, const fs::path& to, uint64_t by) {
  fs::create_directories(to);
  std::map<fs::path, std::ofstream> outs;
  ForEachId(
      from, [&](std::string& id) { id = std::to_string(std::stoull(id) + by); },
      [&](const fs::path& file, const std::vector<std::string>& w) {
        std::ofstream& out = outs[file];
        if (!out.is_open()) out.open(to / file.filename());
        for (size_t k = 0; k < w.size(); ++k) out << (k ? " " : "") << w[k];
        out << "\n";
      });
}

// The distinct ids of the 26 id slots in the files directly in `dir`.
size_t DistinctIds(const fs::path& dir) {
  std::set<std::string> ids;
  ForEachId(
      dir, [&](std::string& id) { ids.insert(id); },
      [](const fs::path&, const std::vector<std::string>&) {});
  return ids.size();
}

// A growable table (size [-1, 10]) keeps each id's row on the server its hash names and makes
// it on first touch; from the same constant start it trains exactly as a fixed table on the
// servers does, step for step, 2 servers x 2 workers, Adam. So it does with every id moved to
// just below 2^63 (other servers hold them, each row is the same).
TEST_F(CtrDnnTest, AGrowableTableTrainsAsAFixedOneWithIdsAnywhereBelow2To63) {
  const std::vector<std::string> launch = {"--servers", "2", "--workers", "2"};
  const std::vector<std::string> sets = {"train.steps=150"};
  const auto fixed = Run(launch, sets, "fixed",
                         TableVariant(dir_, "fixed", "size=[10000, 10], is_distributed=True"));
  const fs::path growable = TableVariant(dir_, "growable", "size=[-1, 10], is_distributed=True");
  const auto grown = Run(launch, sets, "growable", growable);
  ShiftIds(data_, dir_ / "far", uint64_t{INT64_MAX} - 20000);
  ShiftIds(data_ / "eval", dir_ / "far" / "eval", uint64_t{INT64_MAX} - 20000);
  std::vector<std::string> far_sets = sets;
  far_sets.push_back("data.filelist=[\"" + (dir_ / "far" / "part-*.txt").string() + "\"]");
  far_sets.push_back("eval.filelist=[\"" + (dir_ / "far" / "eval" / "part-*.txt").string() +
                     "\"]");
  const auto far = Run(launch, far_sets, "far", growable);
  ASSERT_EQ(fixed.size(), grown.size());
  ASSERT_EQ(fixed.size(), far.size());
  ASSERT_GE(fixed.size(), 10u);
  for (size_t i = 0; i < fixed.size(); ++i) {
    EXPECT_EQ(grown[i]["loss"].get<double>(), fixed[i]["loss"].get<double>())
        << "step " << fixed[i]["step"];
    EXPECT_EQ(far[i]["loss"].get<double>(), fixed[i]["loss"].get<double>())
        << "step " << fixed[i]["step"];
  }
  EXPECT_EQ(grown.back()["eval_auc"].get<double>(), fixed.back()["eval_auc"].get<double>());
  // Each server reports its rows: between them, one per distinct id of the training files (every
  // line is read within 150 steps); the evaluation's held-out ids read without making rows.
  const size_t distinct = DistinctIds(data_);
  for (const std::string run : {"growable", "far"}) {
    long rows = 0;
    for (int i = 0; i < 2; ++i) {
      std::ifstream log(dir_ / (run + "_logs") / "fleet" / ("serverlog." + std::to_string(i)));
      const std::string text((std::istreambuf_iterator<char>(log)),
                             std::istreambuf_iterator<char>());
      std::smatch m;
      ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(growable table '\S+': (\d+) rows)")))
          << text;
      EXPECT_GT(std::stol(m[1]), 1000) << text;
      rows += std::stol(m[1]);
    }
    EXPECT_EQ(static_cast<size_t>(rows), distinct) << run;
  }
}

// Admission after 3 updates and eviction after 20 unseen: the servers keep fewer rows, say how
// many ids wait and how many rows went, and the job still learns.
TEST_F(CtrDnnTest, AGrowableTableAdmitsAndEvictsAndStillLearns) {
  const fs::path growable = TableVariant(dir_, "growable", "size=[-1, 10], is_distributed=True");
  const auto records = Run({"--servers", "2", "--workers", "2"},
                           {"train.steps=300", "strategy.growable_tables.admit_after=3",
                            "strategy.growable_tables.evict_after=20"},
                           "admit", growable);
  ASSERT_GE(records.size(), 2u);
  EXPECT_GT(records.back()["auc"].get<double>(), 0.68);
  EXPECT_GT(records.back()["eval_auc"].get<double>(), 0.6);
  for (int i = 0; i < 2; ++i) {
    std::ifstream log(dir_ / "admit_logs" / "fleet" / ("serverlog." + std::to_string(i)));
    const std::string text((std::istreambuf_iterator<char>(log)),
                           std::istreambuf_iterator<char>());
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        text, m, std::regex(R"(growable table '\S+': (\d+) rows \((\d+) ids waiting for )"
                            R"(admission, (\d+) rows evicted\), capacity (\d+))")))
        << text;
    EXPECT_GT(std::stol(m[1]), 100) << text;
    EXPECT_GT(std::stol(m[2]), 100) << text;
    EXPECT_GT(std::stol(m[3]), 100) << text;
  }
}

// The workers report the job's figures (over the ring fleet-host launch gives them): trainer 0
// writes them all.
TEST_F(CtrDnnTest, LaunchServersWorkersLearns) {
  ExpectLearns(Run({"--servers", "2", "--workers", "2"}, {"train.steps=300"}, "ps"),
               "launch --servers 2 --workers 2");
  EXPECT_FALSE(fs::exists(dir_ / "ps.trainer1.jsonl"));
}

}  // namespace
}  // namespace fleet::dist_test
