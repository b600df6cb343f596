// The run-time desync check (collective/desync.h): where a rank checks, how the first
// difference is found and named, and, over real Gloo communicators of ranks in threads, that
// ranks whose calls part all fail with the same FAILED_PRECONDITION before the mismatched call
// reaches Gloo (which would abort the process), within a bound far below the timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective/communicator.h"
#include "collective/desync.h"
#include "collective/job.h"
#include "fleet/fleet_comm.h"
#include "plugin/registry.h"
#include "rendezvous/memory_store.h"

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;

CollectiveCall Call(std::string_view var, int64_t numel, bool program) {
  CollectiveCall c;
  c.kind = CollectiveKind::kAllReduce;
  c.from_program = program;
  c.dtype = FLEET_DTYPE_FLOAT32;
  c.arg = FLEET_REDUCE_SUM;
  c.numel = numel;
  c.bytes = numel * 4;
  c.var = var;
  return c;
}

TEST(DesyncCheckTest, ModesParse) {
  EXPECT_EQ(*ParseDesyncCheck(""), DesyncCheck::kStep);
  EXPECT_EQ(*ParseDesyncCheck("step"), DesyncCheck::kStep);
  EXPECT_EQ(*ParseDesyncCheck("every"), DesyncCheck::kEvery);
  EXPECT_EQ(*ParseDesyncCheck("1"), DesyncCheck::kEvery);
  EXPECT_EQ(*ParseDesyncCheck("off"), DesyncCheck::kOff);
  EXPECT_EQ(*ParseDesyncCheck("0"), DesyncCheck::kOff);
  auto bad = ParseDesyncCheck("sometimes\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("FLEET_COLLECTIVE_CHECK='sometimes?'"), std::string::npos);
}

TEST(DesyncCheckTest, CheckPointsFollowTheMode) {
  CallLedger step(DesyncCheck::kStep, nullptr);
  EXPECT_TRUE(step.Enter(Call("", 2, false), false).check);   // the host's own call
  EXPECT_FALSE(step.Enter(Call("g", 8, true), false).check);  // a program op's first run
  EXPECT_TRUE(step.Enter(Call("g", 8, true), true).check);    // its next run: a new step
  CallLedger every(DesyncCheck::kEvery, nullptr);
  EXPECT_TRUE(every.Enter(Call("g", 8, true), false).check);
  CallLedger off(DesyncCheck::kOff, nullptr);
  EXPECT_FALSE(off.Enter(Call("", 2, false), true).check);
}

// Rows as the all-gathers make them: every rank's row, rank by rank.
std::vector<int64_t> GatherRows(const std::vector<CallLedger*>& ranks, size_t words,
                             const std::function<void(CallLedger&, int64_t*)>& fill) {
  std::vector<int64_t> rows(ranks.size() * words, 0);
  for (size_t r = 0; r < ranks.size(); ++r) fill(*ranks[r], rows.data() + r * words);
  return rows;
}

TEST(DesyncCheckTest, TheFirstDifferenceIsNamedWithEveryRanksCall) {
  CallLedger a(DesyncCheck::kStep, nullptr), b(DesyncCheck::kStep, nullptr),
      c(DesyncCheck::kStep, nullptr);
  std::vector<CallLedger*> ranks = {&a, &b, &c};
  for (CallLedger* l : ranks) {
    l->Enter(Call("", 2, false), false);
    l->Agreed();  // agreed after #1
    l->Enter(Call("w@GRAD", 16, true), false);
  }
  a.Enter(Call("", 2, false), false);
  b.Enter(Call("w@GRAD", 16, true), true);  // rank 1 went on to the next step
  c.Enter(Call("", 2, false), false);

  const auto fingerprints =
      GatherRows(ranks, CallLedger::kFingerprintWords, [](CallLedger& l, int64_t* row) {
        const auto mine = l.FingerprintRow();
        std::copy(mine.begin(), mine.end(), row);
      });
  EXPECT_EQ(CallLedger::Judge(fingerprints, 3), CallLedger::Verdict::kCallsDiffer);

  const auto windows = GatherRows(ranks, CallLedger::kWindowWords,
                               [](CallLedger& l, int64_t* row) { l.WindowRow(row); });
  const size_t first = FirstDifference(windows, 3);
  EXPECT_EQ(first, 1u);
  const auto entries = GatherRows(ranks, CallLedger::kEntryWords,
                               [&](CallLedger& l, int64_t* row) { l.EntryRow(first, row); });
  const std::string text = DescribeDesync(windows, entries, 3, 2, 0, first);
  EXPECT_EQ(text,
            "the ranks' collectives went out of step at collective #3 on ring 0 (the first that "
            "differs since they last agreed, after #1): rank 1 differs from ranks 0 and 2: "
            "ranks 0 and 2 run host all_reduce_sum(2 float32); rank 1 runs "
            "c_allreduce_sum(w@GRAD: 16 float32). Every rank must issue the same collectives in "
            "the same order: do all ranks run the same program with the same config, data and "
            "number of steps? (this is rank 2)");
}

TEST(DesyncCheckTest, EqualLedgersAgreeAndDifferentModesAreTold) {
  auto fingerprints = [](std::vector<CallLedger*> ranks) {
    return GatherRows(ranks, CallLedger::kFingerprintWords, [](CallLedger& l, int64_t* row) {
      const auto mine = l.FingerprintRow();
      std::copy(mine.begin(), mine.end(), row);
    });
  };
  CallLedger a(DesyncCheck::kStep, nullptr), b(DesyncCheck::kStep, nullptr);
  for (CallLedger* l : {&a, &b}) l->Enter(Call("w", 4, true), false);
  EXPECT_EQ(CallLedger::Judge(fingerprints({&a, &b}), 2), CallLedger::Verdict::kAgree);

  CallLedger off(DesyncCheck::kOff, nullptr), every(DesyncCheck::kEvery, nullptr);
  const auto rows = fingerprints({&every, &off, &every});
  EXPECT_EQ(CallLedger::Judge(rows, 3), CallLedger::Verdict::kModesDiffer);
  EXPECT_EQ(DescribeModes(rows, 3),
            "the ranks run with different comm.check / FLEET_COLLECTIVE_CHECK settings (ranks 0 "
            "and 2 every; rank 1 off), so they would compare their collectives at different "
            "points: set it alike on every rank");
}

// ---- over Gloo ----

class DesyncGlooTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    auto loaded = registry_->Load("comm_gloo");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    gloo_ = registry_->Find(FLEET_COMPONENT_COMMUNICATOR, "gloo");
    ASSERT_NE(gloo_, nullptr);
  }

  // Runs `body(rank, comm)` on `world` ranks in threads over one store, each with its check
  // mode; returns each rank's status (Create's when it failed).
  std::vector<Status> RunRanks(int world, const std::vector<DesyncCheck>& modes,
                               const std::function<Status(int, Communicator&)>& body) {
    MemoryStore store;
    std::vector<Status> out(static_cast<size_t>(world), OkStatus());
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        CommunicatorOptions o;
        o.rank = r;
        o.world_size = world;
        o.timeout = std::chrono::milliseconds(20000);
        o.options = {{"hostname", "127.0.0.1"}};
        o.desync_check = modes[static_cast<size_t>(r)];
        auto comm = Communicator::Create(*gloo_, &store, "desync", o);
        out[static_cast<size_t>(r)] = comm.ok() ? body(r, **comm) : comm.status();
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  // A program op's call on `buffer` (numel elements), repeating when it ran since the last
  // agreement, as the runtime's kernels do.
  static Status ProgramAllReduce(Communicator& comm, std::vector<float>& buffer,
                                 uint64_t& agreed_after_last, std::string_view var) {
    int64_t n = static_cast<int64_t>(buffer.size());
    FleetTensor t{};
    t.struct_size = sizeof(FleetTensor);
    t.data = buffer.data();
    t.dtype = FLEET_DTYPE_FLOAT32;
    t.ndim = 1;
    t.dims = &n;
    CallSite site;
    site.from_program = true;
    site.var = var;
    site.repeat = agreed_after_last == comm.agreements();
    Status s = comm.AllReduce(t, t, FLEET_REDUCE_SUM, nullptr, site);
    agreed_after_last = comm.agreements();
    return s;
  }

  std::unique_ptr<PluginRegistry> registry_;
  const ComponentRecord* gloo_ = nullptr;
};

TEST_F(DesyncGlooTest, RanksInStepCheckOncePerStepAndGetTheRightSums) {
  const auto statuses = RunRanks(3, {DesyncCheck::kStep, DesyncCheck::kStep, DesyncCheck::kStep},
                                 [](int rank, Communicator& comm) -> Status {
    std::vector<float> g(64, static_cast<float>(rank + 1));
    uint64_t op = ~uint64_t{0};
    const uint64_t before = comm.agreements();
    for (int step = 0; step < 5; ++step) {
      for (float& v : g) v = static_cast<float>(rank + 1);
      FLEET_RETURN_IF_ERROR(ProgramAllReduce(comm, g, op, "g@GRAD"));
      if (g[0] != 6.0f) return Internal("wrong sum");
    }
    // Steps 2..5 each compared once; the first ran inside the window of the creation check.
    if (comm.agreements() - before != 4) {
      return Internal("agreements: " + std::to_string(comm.agreements() - before));
    }
    double figure = 1;
    return comm.AllReduceHost(&figure, FLEET_DTYPE_FLOAT64, 1, FLEET_REDUCE_SUM);
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(DesyncGlooTest, RanksPartingAtAStepBoundaryAllFailNamingTheCall) {
  const auto start = Clock::now();
  const auto statuses = RunRanks(3, {DesyncCheck::kStep, DesyncCheck::kStep, DesyncCheck::kStep},
                                 [](int rank, Communicator& comm) -> Status {
    std::vector<float> g(1000, 1.0f);
    uint64_t op = ~uint64_t{0};
    for (int step = 1; step <= 3; ++step) {
      FLEET_RETURN_IF_ERROR(ProgramAllReduce(comm, g, op, "fc_0.w_0@GRAD"));
      // Rank 1 reports figures at another step than the others (another log_every).
      if (step == (rank == 1 ? 2 : 1)) {
        double figures[2] = {0, 0};
        FLEET_RETURN_IF_ERROR(
            comm.AllReduceHost(figures, FLEET_DTYPE_FLOAT64, 2, FLEET_REDUCE_SUM));
      }
    }
    return OkStatus();
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  for (int r = 0; r < 3; ++r) {
    const Status& s = statuses[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    // Creation agreed after #0; #1 is step 1's all-reduce; #2 is where they part.
    EXPECT_NE(s.message().find("went out of step at collective #2 on ring 0"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("rank 1 differs from ranks 0 and 2"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("ranks 0 and 2 run host all_reduce_sum(2 float64)"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("rank 1 runs c_allreduce_sum(fc_0.w_0@GRAD: 1000 float32)"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("(this is rank " + std::to_string(r) + ")"), std::string::npos);
  }
}

TEST_F(DesyncGlooTest, EveryModeCatchesADifferenceInsideAStep) {
  const auto statuses =
      RunRanks(2, {DesyncCheck::kEvery, DesyncCheck::kEvery}, [](int rank, Communicator& comm) {
        std::vector<float> a(8, 1.0f), b(rank == 0 ? 4 : 8, 1.0f);
        uint64_t op_a = ~uint64_t{0}, op_b = ~uint64_t{0};
        Status s = ProgramAllReduce(comm, a, op_a, "a@GRAD");
        if (s.ok()) s = ProgramAllReduce(comm, b, op_b, "b@GRAD");
        // Once found, the desync is what every later call returns.
        Status later = comm.Barrier();
        if (s.ok() || later.message() != s.message()) return Internal("later: " + later.ToString());
        return s;
      });
  for (const Status& s : statuses) {
    ASSERT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find("at collective #2 on ring 0"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 0 runs c_allreduce_sum(b@GRAD: 4 float32); rank 1 runs "
                               "c_allreduce_sum(b@GRAD: 8 float32)"),
              std::string::npos)
        << s.message();
  }
}

TEST_F(DesyncGlooTest, DifferentModesFailWhenTheCommunicatorForms) {
  const auto statuses = RunRanks(2, {DesyncCheck::kStep, DesyncCheck::kOff},
                                 [](int, Communicator&) { return OkStatus(); });
  for (const Status& s : statuses) {
    ASSERT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find("different comm.check / FLEET_COLLECTIVE_CHECK settings (rank 0 "
                               "step; rank 1 off)"),
              std::string::npos)
        << s.message();
  }
}

// The mode comes from [comm] check of fleet.toml unless FLEET_COLLECTIVE_CHECK is set (not
// empty), which then overrides it; a bad variable is an error naming it.
TEST(DesyncCheckTest, TheConfigGivesTheModeUnlessTheVariableIsSet) {
  const std::map<std::string, std::string> none;
  EXPECT_EQ(*ResolveDesyncCheck("every", none), DesyncCheck::kEvery);
  EXPECT_EQ(*ResolveDesyncCheck("off", none), DesyncCheck::kOff);
  EXPECT_EQ(*ResolveDesyncCheck("step", {{"FLEET_COLLECTIVE_CHECK", ""}}), DesyncCheck::kStep);
  EXPECT_EQ(*ResolveDesyncCheck("every", {{"FLEET_COLLECTIVE_CHECK", "off"}}), DesyncCheck::kOff);
  EXPECT_EQ(*ResolveDesyncCheck("off", {{"FLEET_COLLECTIVE_CHECK", "1"}}), DesyncCheck::kEvery);
  auto bad_env = ResolveDesyncCheck("step", {{"FLEET_COLLECTIVE_CHECK", "sometimes"}});
  ASSERT_FALSE(bad_env.ok());
  EXPECT_NE(bad_env.status().message().find("FLEET_COLLECTIVE_CHECK='sometimes'"),
            std::string::npos)
      << bad_env.status().message();
  auto bad_key = ResolveDesyncCheck("1", none);
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find("comm.check = '1'"), std::string::npos)
      << bad_key.status().message();
}

// fleet.toml's [comm] check reaches the communicators of a job's collective runtime (and the
// variable still overrides it there).
TEST_F(DesyncGlooTest, CommCheckOfTheConfigReachesTheJobsCommunicators) {
  Config config;
  config.comm_check = "every";
  Role role;
  role.rank = 0;
  role.world_size = 1;
  struct Case {
    std::map<std::string, std::string> env;
    DesyncCheck want;
  };
  for (const Case& c : {Case{{}, DesyncCheck::kEvery},
                        Case{{{"FLEET_COLLECTIVE_CHECK", "off"}}, DesyncCheck::kOff}}) {
    auto job = Job::Open(config, role, gloo_, nullptr, c.env);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    ASSERT_NE((*job)->collectives(), nullptr);
    EXPECT_EQ((*job)->collectives()->options().desync_check, c.want);
  }
  config.comm_check = "off";
  auto bad = Job::Open(config, role, gloo_, nullptr, {{"FLEET_COLLECTIVE_CHECK", "x"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("FLEET_COLLECTIVE_CHECK='x'"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace fleet
