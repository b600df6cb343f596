// Kill and resume, with real processes: a job SIGKILLed in the middle of training and restarted
// with --resume ends with exactly the state, bit for bit, of the same job run without a break,
// and logs exactly the same losses for the steps it ran again. One process, two collective
// ranks over Gloo, and a sync parameter-server job of two servers and two trainers over gRPC.
// The model has dropout (a random stream per step), Adam (moment accumulators, beta powers)
// and a decaying learning rate (a step counter), so every kind of state must survive.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/free_ports.h"
#include "rank_process.h"

namespace fleet::dist_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const std::string kHost = FLEET_HOST_EXE;

constexpr const char* kProgram = R"(x = data("x", shape=[-1, 32], dtype="float32")
y = data("y", shape=[-1, 1], dtype="int64")
h = fc(x, size=256, act="relu")
h = dropout(h, dropout_prob=0.2)
h = fc(h, size=256, act="tanh")
prediction = fc(h, size=2, act="softmax")
avg_cost = mean(cross_entropy(prediction, y))
lr = exponential_decay(learning_rate=0.002, gamma=0.5, decay_steps=200)
minimize(avg_cost, optimizer=adam(learning_rate=lr))
)";

constexpr int kSteps = 600;
constexpr int kEvery = 20;

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The step of the newest committed checkpoint under `root` (its `latest`), or 0.
int LatestStep(const fs::path& root) {
  const std::string text = ReadText(root / "latest");
  if (text.rfind("step_", 0) != 0) return 0;
  return std::atoi(text.c_str() + 5);
}

// step -> loss of a metrics file.
std::map<int, double> Losses(const fs::path& metrics) {
  std::map<int, double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(out.emplace(j["step"].get<int>(), j["loss"].get<double>()).second)
        << metrics << ": step " << j["step"] << " is logged twice";
  }
  return out;
}

// The step a log says its run resumed from ("... resumed from DIR (step N)"), or 0.
int LatestResumedStep(const std::string& log) {
  const size_t at = log.rfind("resumed from");
  if (at == std::string::npos) return 0;
  const size_t step = log.find("(step ", at);
  return step == std::string::npos ? 0 : std::atoi(log.c_str() + step + 6);
}

class CheckpointResumeTest : public ::testing::Test {
 protected:
  // One role's process of a job: its environment and extra --set values.
  struct Proc {
    std::string name;
    std::map<std::string, std::string> env;
    std::vector<std::string> sets;
  };

  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fleet_ckpt_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "model.fleet") << kProgram;
    std::ofstream(dir_ / "fleet.toml") << "[train]\nsteps = " << kSteps
                                       << "\nbatch_size = 32\nlog_every = 1\nthreads = 1\n"
                                       << "[checkpoint]\nevery_steps = " << kEvery
                                       << "\nkeep = 2\n";
  }
  void TearDown() override {
    procs_.clear();
    fs::remove_all(dir_);
  }

  void Start(const std::vector<Proc>& job, const std::string& run, bool resume) {
    procs_.clear();
    for (const Proc& p : job) {
      std::vector<std::string> args = {kHost, "run", (dir_ / "model.fleet").string()};
      if (resume) args.push_back("--resume");
      args.insert(args.end(), {"--config", (dir_ / "fleet.toml").string(), "--set",
                               "checkpoint.dir=" + (dir_ / run / "ckpt").string(), "--set",
                               "train.metrics_file=" + (dir_ / run / "metrics.jsonl").string()});
      for (const std::string& s : p.sets) args.insert(args.end(), {"--set", s});
      procs_.push_back(std::make_unique<RankProcess>(
          args, p.env, dir_ / (run + "." + p.name + (resume ? ".resumed" : "") + ".log")));
      ASSERT_TRUE(procs_.back()->started());
    }
  }

  void ExpectAllSucceed() {
    for (auto& p : procs_) EXPECT_EQ(p->Wait(milliseconds(180000)), 0) << p->Output();
  }

  // Runs `job` without a break into `run`/.
  void RunThrough(const std::vector<Proc>& job, const std::string& run) {
    fs::create_directories(dir_ / run);
    Start(job, run, false);
    ExpectAllSucceed();
  }

  // Runs `job` into `run`/, SIGKILLs every process once a checkpoint past `kill_after` steps
  // is committed, then restarts it with --resume and lets it finish. Returns the step the
  // resumed job started from. `restarted` is the job to restart, when it differs (a
  // collective job's fresh rendezvous store).
  int KillAndResume(const std::vector<Proc>& job, const std::string& run, int kill_after,
                    const std::vector<Proc>* restarted = nullptr) {
    fs::create_directories(dir_ / run);
    Start(job, run, false);
    const fs::path root = dir_ / run / "ckpt";
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (LatestStep(root) < kill_after && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    for (auto& p : procs_) ::kill(p->pid(), SIGKILL);
    int killed = 0;
    for (auto& p : procs_) killed += p->Wait(milliseconds(10000)) == 128 + SIGKILL;
    EXPECT_EQ(killed, static_cast<int>(job.size())) << "a process finished before the kill";
    const int at = LatestStep(root);
    EXPECT_GE(at, kill_after);
    EXPECT_LT(at, kSteps) << "the job ended before it was killed; make it longer";
    Start(restarted != nullptr ? *restarted : job, run, true);
    ExpectAllSucceed();
    return at;
  }

  // The final state of both runs is the same, byte for byte (every shard of it, for a pserver
  // job), and the broken run's metrics (the killed part up to its checkpoint, then the resumed
  // part) hold every step, each with the uninterrupted run's loss. In a pserver job servers
  // commit a step before its trainers have logged it, so that one step may be missing.
  void ExpectSameEnd(const std::string& a, const std::string& b, int from,
                     const std::vector<std::string>& parts, const std::string& metrics,
                     bool servers_save = false) {
    const std::string last = "step_" + std::string(7 - std::to_string(kSteps).size(), '0') +
                             std::to_string(kSteps);
    for (const std::string& part : parts) {
      const fs::path pa = dir_ / a / "ckpt" / last / part / "persistables.safetensors";
      const fs::path pb = dir_ / b / "ckpt" / last / part / "persistables.safetensors";
      const std::string sa = ReadText(pa), sb = ReadText(pb);
      ASSERT_GT(sa.size(), 1000u) << pa;
      EXPECT_TRUE(sa == sb) << pa << " and " << pb << " differ";
    }
    const auto la = Losses(dir_ / a / metrics), lb = Losses(dir_ / b / metrics);
    ASSERT_EQ(la.size(), static_cast<size_t>(kSteps));
    for (int step = 1; step <= kSteps; ++step) {
      if (servers_save && step == from) continue;
      EXPECT_EQ(lb.count(step), 1u) << "step " << step << " is missing";
    }
    for (const auto& [step, loss] : lb) {
      ASSERT_EQ(la.count(step), 1u) << step;
      EXPECT_EQ(loss, la.at(step)) << "step " << step << (step > from ? " (resumed)" : "");
    }
  }

  // Two servers and two sync trainers on free loopback ports, every process with `sets`.
  static std::vector<Proc> PserverJob(std::vector<std::string> sets) {
    const std::vector<int> ports = fleet::testing::FreeLoopbackPorts(2);
    EXPECT_EQ(ports.size(), 2u) << "no free loopback ports";
    if (ports.size() != 2) return {};
    std::vector<std::string> endpoints = {"127.0.0.1:" + std::to_string(ports[0]),
                                          "127.0.0.1:" + std::to_string(ports[1])};
    const std::string list = endpoints[0] + "," + endpoints[1];
    sets.push_back("transport.timeout_s=30");
    std::vector<Proc> out;
    for (int i = 0; i < 2; ++i) {
      out.push_back({"server" + std::to_string(i),
                     {{"TRAINING_ROLE", "PSERVER"},
                      {"PADDLE_PSERVERS_IP_PORT_LIST", list},
                      {"PADDLE_PSERVER_ID", std::to_string(i)},
                      {"POD_IP", "127.0.0.1"},
                      {"PADDLE_PORT", endpoints[i].substr(endpoints[i].rfind(':') + 1)},
                      {"PADDLE_TRAINERS_NUM", "2"},
                      {"LOCAL_WORLD_SIZE", "4"}},
                     sets});
    }
    for (int t = 0; t < 2; ++t) {
      out.push_back({"trainer" + std::to_string(t),
                     {{"TRAINING_ROLE", "TRAINER"},
                      {"PADDLE_PSERVERS_IP_PORT_LIST", list},
                      {"PADDLE_TRAINERS_NUM", "2"},
                      {"PADDLE_TRAINER_ID", std::to_string(t)},
                      {"LOCAL_WORLD_SIZE", "4"}},
                     sets});
    }
    return out;
  }

  // Two files of 2000 lines in ids/, four ids per line drawn from a skewed range of 5000 and
  // moved up by `base`; the label says whether the first two (before the move) add up to an
  // even number.
  fs::path WriteIds(uint64_t base) const {
    const fs::path data = dir_ / "ids";
    fs::create_directories(data);
    uint64_t state = 7;
    auto next = [&](uint64_t n) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return (state >> 33) % n;
    };
    for (int f = 0; f < 2; ++f) {
      std::ofstream out(data / ("part-" + std::to_string(f) + ".txt"));
      for (int i = 0; i < 2000; ++i) {
        uint64_t ids[4];
        for (uint64_t& id : ids) id = next(1 + next(5000));
        out << "4 " << base + ids[0] << " " << base + ids[1] << " " << base + ids[2] << " "
            << base + ids[3] << " 1 " << ((ids[0] + ids[1]) % 2) << "\n";
      }
    }
    return data;
  }

  using Clock = std::chrono::steady_clock;
  fs::path dir_;
  std::vector<std::unique_ptr<RankProcess>> procs_;
};

TEST_F(CheckpointResumeTest, OneProcessKilledAndResumedEndsBitForBitAsWithoutABreak) {
  const std::vector<Proc> job = {{"trainer", {}, {}}};
  RunThrough(job, "whole");
  const int from = KillAndResume(job, "broken", 200);
  ExpectSameEnd("whole", "broken", from, {""}, "metrics.jsonl");
}

TEST_F(CheckpointResumeTest, TwoRanksKilledAndResumedEndBitForBitAsWithoutABreak) {
  // The store lives in a directory per start: a restarted job rendezvouses afresh.
  auto job = [&](const std::string& store) {
    std::vector<Proc> out;
    for (int r = 0; r < 2; ++r) {
      out.push_back({"rank" + std::to_string(r),
                     {{"PADDLE_TRAINER_ID", std::to_string(r)},
                      {"PADDLE_TRAINERS_NUM", "2"},
                      {"LOCAL_WORLD_SIZE", "2"},
                      {"FLEET_JOB_ID", "ckpt"}},
                     {"comm.store=file", "comm.store_dir=" + (dir_ / store).string(),
                      "comm.timeout_s=60"}});
    }
    return out;
  };
  RunThrough(job("store_whole"), "whole");
  const std::vector<Proc> restarted = job("store_b");
  const int from = KillAndResume(job("store_a"), "broken", 200, &restarted);
  // Only rank 0 saves and writes metrics; both ranks resumed from the same step.
  for (auto& p : procs_) {
    EXPECT_NE(p->Output().find("resumed from"), std::string::npos) << p->Output();
  }
  ExpectSameEnd("whole", "broken", from, {""}, "metrics.jsonl");
}

TEST_F(CheckpointResumeTest, PserverJobKilledAndResumedEndsBitForBitAsWithoutABreak) {
  const std::vector<std::string> sets = {"strategy.min_block_size=1024"};
  RunThrough(PserverJob(sets), "whole");
  const int from = KillAndResume(PserverJob(sets), "broken", 200);
  // Each server's shard is the same; trainer 0 logged the same losses.
  ExpectSameEnd("whole", "broken", from, {"pserver.0", "pserver.1"}, "metrics.jsonl",
                /*servers_save=*/true);
}

// MultiSlot files written here: `files` files of `lines` samples, x of 32 values and a label
// y = [x0 + x1 > 0]. Returns the --set values that read them as `dataset`.
std::vector<std::string> MultiSlotData(const fs::path& dir, int files, int lines,
                                       const std::string& dataset) {
  uint64_t state = 99;
  auto uniform = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53) * 2 - 1;
  };
  fs::create_directories(dir);
  for (int f = 0; f < files; ++f) {
    std::ofstream out(dir / ("part-" + std::to_string(f) + ".txt"));
    for (int i = 0; i < lines; ++i) {
      double x0 = 0, x1 = 0;
      out << "32";
      for (int k = 0; k < 32; ++k) {
        const double v = uniform();
        if (k == 0) x0 = v;
        if (k == 1) x1 = v;
        out << " " << v;
      }
      out << " 1 " << (x0 + x1 > 0 ? 1 : 0) << "\n";
    }
  }
  return {"data.source=multislot", "data.filelist=[\"" + (dir / "part-*.txt").string() + "\"]",
          "data.slots=[\"x\", \"y\"]", "data.dataset=" + dataset};
}

// A sparse table on the servers: each trainer fetches its batch's rows
// (distributed_lookup_table) and sends their gradient's entries; the servers' shards hold the
// table's blocks and lazy Adam's moments, and resume them bit for bit.
TEST_F(CheckpointResumeTest, PserverJobWithASparseTableResumesBitForBit) {
  std::ofstream(dir_ / "model.fleet") << R"(ids = data("ids", shape=[-1, 4], dtype="int64")
y = data("y", shape=[-1, 1], dtype="int64")
e = embedding(ids, size=[5000, 8], is_sparse=True)
h = fc(e, size=64, act="relu")
prediction = fc(h, size=2, act="softmax")
avg_cost = mean(cross_entropy(prediction, y))
minimize(avg_cost, optimizer=adam(learning_rate=0.01, lazy_mode=True))
)";
  const fs::path data = WriteIds(0);
  const std::vector<std::string> sets = {
      "data.source=multislot", "data.filelist=[\"" + (data / "part-*.txt").string() + "\"]",
      "data.slots=[\"ids\", \"y\"]", "strategy.min_block_size=1024"};
  RunThrough(PserverJob(sets), "whole");
  for (int t = 0; t < 2; ++t) {
    const std::string log = ReadText(dir_ / ("whole.trainer" + std::to_string(t) + ".log"));
    EXPECT_EQ(log.find("dense gradients"), std::string::npos) << log;
  }
  const int from = KillAndResume(PserverJob(sets), "broken", 200);
  ExpectSameEnd("whole", "broken", from, {"pserver.0", "pserver.1"}, "metrics.jsonl",
                /*servers_save=*/true);

  // export gathers the servers' blocks into whole parameters: every exported tensor holds
  // exactly the bytes of the shard that holds it whole, or of its blocks in order.
  const fs::path step = dir_ / "whole" / "ckpt" / "step_0000600";
  auto host = [&](std::vector<std::string> args, const std::string& name) {
    args.insert(args.begin(), kHost);
    RankProcess p(args, {}, dir_ / (name + ".log"));
    EXPECT_EQ(p.Wait(milliseconds(60000)), 0) << p.Output();
  };
  host({"export", (dir_ / "model.fleet").string(), "--fetch", "prediction", "--out",
        (dir_ / "export").string(), "--checkpoint", (dir_ / "whole" / "ckpt").string()},
       "export");
  host({"convert", (dir_ / "export").string(), "--out", (dir_ / "export_npy").string()},
       "convert_export");
  std::vector<fs::path> shards;
  for (int i = 0; i < 2; ++i) {
    shards.push_back(dir_ / ("shard" + std::to_string(i)));
    host({"convert", (step / ("pserver." + std::to_string(i))).string(), "--out",
          shards.back().string()},
         "convert_shard" + std::to_string(i));
  }
  auto npy_data = [](const fs::path& p) {
    const std::string b = ReadText(p);
    if (b.size() < 12) return std::string();
    const size_t header = b[6] == 1 ? 10 + (static_cast<uint8_t>(b[8]) |
                                            static_cast<uint8_t>(b[9]) << 8)
                                    : 12 + (static_cast<uint8_t>(b[8]) |
                                            static_cast<uint8_t>(b[9]) << 8 |
                                            static_cast<uint8_t>(b[10]) << 16);
    return b.substr(std::min(header, b.size()));
  };
  auto held = [&](const std::string& name) {
    for (const fs::path& s : shards) {
      if (fs::exists(s / (name + ".npy"))) return npy_data(s / (name + ".npy"));
    }
    return std::string();
  };
  size_t checked = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "export_npy")) {
    const std::string name = e.path().stem().string();
    std::string want = held(name);
    for (int k = 0; want.empty() || k > 0; ++k) {
      const std::string block = held(name + ".block" + std::to_string(k));
      if (block.empty()) break;
      want += block;
    }
    ASSERT_FALSE(want.empty()) << name << " is in no shard";
    EXPECT_TRUE(npy_data(e.path()) == want) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 5u);  // the table, two fc weights and biases
  EXPECT_TRUE(fs::exists(dir_ / "export_npy" / "embedding_0.w_0.npy"));

  // A server whose newest shard is damaged: export takes the newest step at which every
  // server's shard is intact (one checkpoint earlier), saying why, rather than mixing steps.
  for (const auto& e : fs::directory_iterator(step / "pserver.1")) {
    if (e.is_regular_file()) fs::resize_file(e.path(), 0);
  }
  RankProcess older({kHost, "export", (dir_ / "model.fleet").string(), "--fetch", "prediction",
                     "--out", (dir_ / "export_older").string(), "--checkpoint",
                     (dir_ / "whole" / "ckpt").string()},
                    {}, dir_ / "export_older.log");
  ASSERT_EQ(older.Wait(milliseconds(60000)), 0) << older.Output();
  EXPECT_NE(older.Output().find("step_0000600: pserver.1: "), std::string::npos)
      << older.Output();
  EXPECT_NE(older.Output().find("trying an older checkpoint"), std::string::npos)
      << older.Output();
  EXPECT_NE(older.Output().find("step_0000580 (2 servers' shards)"), std::string::npos)
      << older.Output();
}

// A growable table (size [-1, 8]) keyed by ids just below 2^63, with admission after two
// lookups and eviction after 30 unseen updates: each server's shard holds its rows by slot and
// the index that says whose (ids, last updates, waiting counts, clock); a job killed and resumed
// ends with the same shards, byte for byte, and the same losses as one without a break.
TEST_F(CheckpointResumeTest, PserverJobWithAGrowableTableResumesBitForBit) {
  std::ofstream(dir_ / "model.fleet") << R"(ids = data("ids", shape=[-1, 4], dtype="int64")
y = data("y", shape=[-1, 1], dtype="int64")
e = embedding(ids, size=[-1, 8], is_distributed=True,
              param_attr=ParamAttr(initializer=Uniform(-0.05, 0.05)))
h = fc(e, size=64, act="relu")
prediction = fc(h, size=2, act="softmax")
avg_cost = mean(cross_entropy(prediction, y))
minimize(avg_cost, optimizer=adam(learning_rate=0.01, lazy_mode=True))
)";
  const fs::path data = WriteIds(uint64_t{INT64_MAX} - 5000);  // ids up to 2^63 - 2
  const std::vector<std::string> sets = {
      "data.source=multislot", "data.filelist=[\"" + (data / "part-*.txt").string() + "\"]",
      "data.slots=[\"ids\", \"y\"]", "strategy.growable_tables.admit_after=2",
      "strategy.growable_tables.evict_after=30"};
  RunThrough(PserverJob(sets), "whole");
  // Both servers made rows, kept ids waiting and evicted some: every part of the index is in
  // play when the job is killed.
  for (int i = 0; i < 2; ++i) {
    const std::string log = ReadText(dir_ / ("whole.server" + std::to_string(i) + ".log"));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        log, m, std::regex(R"(growable table '\S+': (\d+) rows \((\d+) ids waiting for )"
                           R"(admission, (\d+) rows evicted\))")))
        << log;
    EXPECT_GT(std::stol(m[1]), 100) << log;
    EXPECT_GT(std::stol(m[2]), 0) << log;
    EXPECT_GT(std::stol(m[3]), 0) << log;
  }
  const int from = KillAndResume(PserverJob(sets), "broken", 200);
  ExpectSameEnd("whole", "broken", from, {"pserver.0", "pserver.1"}, "metrics.jsonl",
                /*servers_save=*/true);
  const std::string last = ReadText(dir_ / "whole.trainer0.log");
  EXPECT_LT(Losses(dir_ / "whole" / "metrics.jsonl").at(kSteps),
            Losses(dir_ / "whole" / "metrics.jsonl").at(1))
      << last;
}

// Data read from files resumes where it was too: two ranks on their own shards of a shuffled
// in-memory dataset whose epochs drop their last partial batch (the reader's position is in
// epochs, shuffles and rows), and one process streaming files through the reader thread.
TEST_F(CheckpointResumeTest, ShardedShuffledFilesResumeBitForBit) {
  std::vector<std::string> data = MultiSlotData(dir_ / "data", 4, 150, "memory");
  data.insert(data.end(), {"data.shuffle=true", "data.last_batch=drop", "data.shard=true"});
  auto job = [&](const std::string& store) {
    std::vector<Proc> out;
    for (int r = 0; r < 2; ++r) {
      std::vector<std::string> sets = data;
      sets.insert(sets.end(), {"comm.store=file", "comm.store_dir=" + (dir_ / store).string(),
                               "comm.timeout_s=60"});
      out.push_back({"rank" + std::to_string(r),
                     {{"PADDLE_TRAINER_ID", std::to_string(r)},
                      {"PADDLE_TRAINERS_NUM", "2"},
                      {"LOCAL_WORLD_SIZE", "2"},
                      {"FLEET_JOB_ID", "ckpt"}},
                     sets});
    }
    return out;
  };
  RunThrough(job("store_whole"), "whole");
  const std::vector<Proc> restarted = job("store_b");
  const int from = KillAndResume(job("store_a"), "broken", 200, &restarted);
  ExpectSameEnd("whole", "broken", from, {""}, "metrics.jsonl");
}

TEST_F(CheckpointResumeTest, StreamedFilesThroughTheReaderThreadResumeBitForBit) {
  std::vector<std::string> data = MultiSlotData(dir_ / "data", 3, 170, "queue");
  data.push_back("data.queue_batches=3");
  const std::vector<Proc> job = {{"trainer", {}, data}};
  RunThrough(job, "whole");
  const int from = KillAndResume(job, "broken", 200);
  ExpectSameEnd("whole", "broken", from, {""}, "metrics.jsonl");
}

// The launcher puts it together: `launch --max-restarts 1 -- run --resume`, one rank killed
// mid-run, the job restarted whole from its newest checkpoint, ending as one never broken.
TEST_F(CheckpointResumeTest, TheLauncherRestartsAKilledJobFromItsCheckpoint) {
  auto launch = [&](const std::string& run, int restarts) {
    fs::create_directories(dir_ / run);
    return std::vector<std::string>{
        kHost, "launch", "--nproc", "2", "--log-dir", (dir_ / run / "log").string(),
        "--max-restarts", std::to_string(restarts), "--", "run",
        (dir_ / "model.fleet").string(), "--resume", "--config", (dir_ / "fleet.toml").string(),
        "--set", "checkpoint.dir=" + (dir_ / run / "ckpt").string(), "--set",
        "train.metrics_file=" + (dir_ / run / "metrics.jsonl").string()};
  };
  RankProcess whole(launch("whole", 0), {}, dir_ / "whole.log");
  ASSERT_EQ(whole.Wait(milliseconds(180000)), 0) << whole.Output();

  RankProcess broken(launch("broken", 1), {}, dir_ / "broken.log");
  const fs::path root = dir_ / "broken" / "ckpt";
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (LatestStep(root) < 200 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  // The launcher's children are the ranks; kill one.
  const std::string children = ReadText("/proc/" + std::to_string(broken.pid()) + "/task/" +
                                        std::to_string(broken.pid()) + "/children");
  const pid_t rank = static_cast<pid_t>(std::atol(children.c_str()));
  ASSERT_GT(rank, 0) << "no rank running: '" << children << "'";
  const int from = LatestStep(root);
  ::kill(rank, SIGKILL);
  ASSERT_EQ(broken.Wait(milliseconds(180000)), 0) << broken.Output();
  const std::string out = broken.Output();
  EXPECT_NE(out.find("restarting the whole job (restart 1 of 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("killed by SIGKILL"), std::string::npos) << out;
  ASSERT_GE(from, 200);
  ASSERT_LT(from, kSteps) << "the job ended before the kill; make it longer";
  // It resumed at least where the kill found the checkpoints.
  const std::string rank0 = ReadText(dir_ / "broken" / "log" / "fleet" / "restart.1" /
                                     "trainer.0.log");
  EXPECT_NE(rank0.find("resumed from"), std::string::npos) << rank0;
  ExpectSameEnd("whole", "broken", LatestResumedStep(rank0), {""}, "metrics.jsonl");
}

TEST_F(CheckpointResumeTest, ResumeRefusesWhatCannotWork) {
  // --resume without a place to resume from.
  RankProcess none({kHost, "run", (dir_ / "model.fleet").string(), "--resume", "--config",
                    (dir_ / "fleet.toml").string()},
                   {}, dir_ / "none.log");
  EXPECT_EQ(none.Wait(milliseconds(30000)), 1);
  EXPECT_NE(none.Output().find("--resume needs checkpoint.dir"), std::string::npos)
      << none.Output();
  // A checkpoint of another model in checkpoint.dir.
  const std::string root = (dir_ / "ckpt").string();
  RankProcess first({kHost, "run", (dir_ / "model.fleet").string(), "--config",
                     (dir_ / "fleet.toml").string(), "--set", "train.steps=20", "--set",
                     "checkpoint.dir=" + root},
                    {}, dir_ / "first.log");
  ASSERT_EQ(first.Wait(milliseconds(60000)), 0) << first.Output();
  // check says where a resume would start, having verified it.
  RankProcess check({kHost, "--config", (dir_ / "fleet.toml").string(), "--set",
                     "checkpoint.dir=" + root, "check", (dir_ / "model.fleet").string()},
                    {}, dir_ / "check.log");
  EXPECT_EQ(check.Wait(milliseconds(30000)), 0) << check.Output();
  EXPECT_NE(check.Output().find(
                "step_0000020 is the newest intact one; a resumed run starts at step 21"),
            std::string::npos)
      << check.Output();
  std::ofstream(dir_ / "other.fleet") << std::string(kProgram).replace(
      std::string(kProgram).find("size=256"), 8, "size=128");
  RankProcess other({kHost, "run", (dir_ / "other.fleet").string(), "--resume", "--config",
                     (dir_ / "fleet.toml").string(), "--set", "checkpoint.dir=" + root},
                    {}, dir_ / "other.log");
  EXPECT_EQ(other.Wait(milliseconds(60000)), 1);
  EXPECT_NE(other.Output().find("was written by another program"), std::string::npos)
      << other.Output();
  // Asynchronous parameter-server jobs have no step every server agrees on.
  RankProcess async({kHost, "run", (dir_ / "model.fleet").string(), "--config",
                     (dir_ / "fleet.toml").string(), "--set", "checkpoint.dir=" + root, "--set",
                     "strategy.sync_mode=false", "--set", "strategy.mode=pserver"},
                    {{"TRAINING_ROLE", "TRAINER"},
                     {"PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:1"},
                     {"PADDLE_TRAINERS_NUM", "1"},
                     {"PADDLE_TRAINER_ID", "0"}},
                    dir_ / "async.log");
  EXPECT_EQ(async.Wait(milliseconds(30000)), 1);
  EXPECT_NE(async.Output().find("checkpoints need a sync parameter-server job"),
            std::string::npos)
      << async.Output();
}

}  // namespace
}  // namespace fleet::dist_test
