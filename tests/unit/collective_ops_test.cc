// The collective ops as the executor runs them: host kernels over a real Gloo communicator, one
// rank per thread, each with its own executor, all sharing one in-process store. Results are
// checked against closed forms of what every rank contributed.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective/collective_runtime.h"
#include "collective/sparse_exchange.h"
#include "rendezvous/memory_store.h"
#include "executor/executor.h"
#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

using exec::HostTensor;

constexpr char kStartup[] = R"(program {
  block 0 {
    op c_comm_init() -> () {nranks=NRANKS, rank=RANK, ring_id=0}
  }
})";

// Every rank feeds x[4, 2] with x[i][j] = 10 * rank + 2 * i + j.
constexpr char kMain[] = R"(program {
  block 0 {
    var x : float32[4, 2]
    var sum : float32[4, 2]
    var mx : float32[4, 2]
    var mn : float32[4, 2]
    var prod : float32[4, 2]
    var both0 : float32[4, 2]
    var both1 : float32[4, 2]
    var bcast : float32[4, 2]
    var gathered : float32[GATHERED, 2]
    var scattered : float32[SCATTERED, 2]
    op c_allreduce_sum(X=[x]) -> (Out=[sum])
    op c_allreduce_max(X=[x]) -> (Out=[mx])
    op c_allreduce_min(X=[x]) -> (Out=[mn])
    op c_allreduce_prod(X=[x]) -> (Out=[prod])
    op scale(X=[x]) -> (Out=[both0]) {scale=1.0f}
    op scale(X=[x]) -> (Out=[both1]) {scale=2.0f}
    op c_sync_calc_stream(X=[both0, both1]) -> (Out=[both0, both1])
    op c_allreduce_sum(X=[both0, both1]) -> (Out=[both0, both1])
    op c_sync_comm_stream(X=[both0, both1]) -> (Out=[both0, both1]) {ring_id=0}
    op scale(X=[x]) -> (Out=[bcast]) {scale=1.0f}
    op c_broadcast(X=[bcast]) -> (Out=[bcast]) {root=ROOT}
    op c_allgather(X=[x]) -> (Out=[gathered]) {nranks=NRANKS}
    op c_reducescatter(X=[x]) -> (Out=[scattered]) {nranks=NRANKS}
  }
})";

// Rank `rank` of `n` over Gloo on the loopback, with a deadline far beyond a test's needs.
CommunicatorOptions RankOptions(int rank, int n) {
  CommunicatorOptions co;
  co.rank = rank;
  co.world_size = n;
  co.timeout = std::chrono::milliseconds(20000);
  co.options = {{"hostname", "127.0.0.1"}};
  return co;
}

std::string Fill(std::string text, const std::map<std::string, int>& values) {
  for (const auto& [key, value] : values) {
    for (size_t at; (at = text.find(key)) != std::string::npos;) {
      text.replace(at, key.size(), std::to_string(value));
    }
  }
  return text;
}

float X(int rank, int i, int j) { return static_cast<float>(10 * rank + 2 * i + j); }

class CollectiveOpsTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    for (const char* p : {"cpu", "comm_gloo"}) {
      auto loaded = registry_->Load(p);
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    }
    gloo_ = registry_->Find(FLEET_COMPONENT_COMMUNICATOR, "gloo");
    ASSERT_NE(gloo_, nullptr);
  }

  // Runs `main` (kMain-style text, its placeholders filled per rank) on n ranks, a thread each,
  // after the startup program: `feed(r)` is rank r's feed, and the fetches of every run of
  // `runs` land in results[r] one after the other.
  std::vector<Status> OnRanks(int n, const std::map<std::string, int>& values,
                              const std::string& main_text,
                              const std::function<exec::FeedMap(int)>& feed,
                              const std::vector<std::string>& fetch, int runs,
                              std::vector<std::vector<HostTensor>>& results) {
    MemoryStore store;
    results.assign(static_cast<size_t>(n), {});
    std::vector<Status> status(static_cast<size_t>(n));
    auto rank_main = [&](int r) {
      Status& s = status[static_cast<size_t>(r)];
      CollectiveRuntime runtime(*gloo_, &store, RankOptions(r, n));
      exec::ExecutorOptions eo;
      eo.num_threads = 1;
      eo.host_kernels = &runtime;
      auto ex = exec::Executor::Create(*registry_, "cpu", eo);
      if (!ex.ok()) { s = ex.status(); return; }
      std::map<std::string, int> mine = values;
      mine["NRANKS"] = n;
      mine["RANK"] = r;
      auto startup = ir::ParseProgram(Fill(kStartup, mine), "startup");
      auto main = ir::ParseProgram(Fill(main_text, mine), "main");
      if (!startup.ok() || !main.ok()) {
        s = startup.ok() ? main.status() : startup.status();
        return;
      }
      std::vector<HostTensor> out;
      s = (*ex)->Run(*startup, {}, {}, out);
      for (int k = 0; k < runs && s.ok(); ++k) {
        s = (*ex)->Run(*main, feed(r), fetch, out);
        auto& all = results[static_cast<size_t>(r)];
        all.insert(all.end(), out.begin(), out.end());
      }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
    for (auto& t : threads) t.join();
    return status;
  }

  std::unique_ptr<PluginRegistry> registry_;
  const ComponentRecord* gloo_ = nullptr;
};

TEST_P(CollectiveOpsTest, EveryOpAgreesWithItsClosedForm) {
  const int n = GetParam();
  const int root = n - 1;
  std::vector<std::vector<HostTensor>> results;
  const std::vector<std::string> fetch = {"sum", "mx", "mn", "prod", "both0", "both1",
                                          "bcast", "gathered", "scattered"};
  auto feed = [](int r) {
    exec::FeedMap feeds;
    HostTensor& x = feeds["x"];
    x.Reshape(ir::DataType::kFloat32, {4, 2});
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 2; ++j) x.data<float>()[i * 2 + j] = X(r, i, j);
    }
    return feeds;
  };
  std::vector<Status> status =
      OnRanks(n, {{"ROOT", root}, {"GATHERED", 4 * n}, {"SCATTERED", 4 / n}}, kMain, feed, fetch,
              1, results);
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].ToString();
    const auto& out = results[static_cast<size_t>(r)];
    auto at = [&](size_t k, int i, int j) { return out[k].data<float>()[i * 2 + j]; };
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 2; ++j) {
        float sum = 0, prod = 1;
        for (int q = 0; q < n; ++q) {
          sum += X(q, i, j);
          prod *= X(q, i, j);
        }
        EXPECT_FLOAT_EQ(at(0, i, j), sum);
        EXPECT_FLOAT_EQ(at(1, i, j), X(n - 1, i, j));
        EXPECT_FLOAT_EQ(at(2, i, j), X(0, i, j));
        EXPECT_FLOAT_EQ(at(3, i, j), prod);
        EXPECT_FLOAT_EQ(at(4, i, j), sum);          // a bucket of two, packed into one call
        EXPECT_FLOAT_EQ(at(5, i, j), 2 * sum);
        EXPECT_FLOAT_EQ(at(6, i, j), X(root, i, j));
      }
    }
    ASSERT_EQ(out[7].dims, (std::vector<int64_t>{4 * n, 2}));
    for (int q = 0; q < n; ++q) {
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 2; ++j) EXPECT_FLOAT_EQ(at(7, 4 * q + i, j), X(q, i, j));
      }
    }
    const int rows = 4 / n;
    ASSERT_EQ(out[8].dims, (std::vector<int64_t>{rows, 2}));
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < 2; ++j) {
        float sum = 0;
        for (int q = 0; q < n; ++q) sum += X(q, r * rows + i, j);
        EXPECT_FLOAT_EQ(at(8, i, j), sum);
      }
    }
  }
}

// A sparse gradient of a table of 8 rows, 5 entries per rank with a row repeated within each
// rank (1) and rows every rank has (1, 7), gathered each way c_allgather knows: densified,
// Out holds the same sum in every rank. Run twice, so the dense way's sum must come back to
// zeros between exchanges. "auto" gathers on 2 ranks (2 * 8 rows >= 2 * 5 entries) and goes
// dense on 4 (1.5 * 8 < 3 * 5), see SparseExchangePlanTest.
constexpr char kSparseMain[] = R"(program {
  block 0 {
    var ids : int64[5]
    var dout : float32[5, 2]
    var g : selected_rows float32[8, 2]
    var all : selected_rows float32[8, 2]
    var zeros : float32[8, 2]
    var dense : float32[8, 2]
    op lookup_table_v2_grad(Ids=[ids], Out@GRAD=[dout]) -> (W@GRAD=[g]) {is_sparse=true, table_height=8L}
    op c_allgather(X=[g]) -> (Out=[all]) {nranks=NRANKS, sparse_exchange="MODE"}
    op fill_constant() -> (Out=[zeros]) {shape=[8L, 2L], value=0.0f}
    op sum(X=[zeros, all]) -> (Out=[dense])
  }
})";

TEST_P(CollectiveOpsTest, ASparseGradientSumsTheSameEveryWayItIsExchanged) {
  const int n = GetParam();
  auto ids = [](int r) { return std::vector<int64_t>{(3 * r) % 8, 1, (r + 2) % 8, 1, 7}; };
  auto value = [](int r, int i, int j) { return static_cast<float>(100 * r + 10 * i + j + 1); };
  auto feed = [&](int r) {
    exec::FeedMap feeds;
    feeds["ids"].Reshape(ir::DataType::kInt64, {5});
    std::vector<int64_t> mine = ids(r);
    std::copy(mine.begin(), mine.end(), feeds["ids"].data<int64_t>());
    feeds["dout"].Reshape(ir::DataType::kFloat32, {5, 2});
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < 2; ++j) feeds["dout"].data<float>()[i * 2 + j] = value(r, i, j);
    }
    return feeds;
  };
  std::vector<float> want(16, 0.0f);
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < 2; ++j) want[static_cast<size_t>(ids(r)[i] * 2 + j)] += value(r, i, j);
    }
  }
  for (const std::string mode : {"gather", "dense", "auto"}) {
    SCOPED_TRACE("sparse_exchange " + mode);
    std::string text = kSparseMain;
    text.replace(text.find("MODE"), 4, mode);
    std::vector<std::vector<HostTensor>> results;
    std::vector<Status> status = OnRanks(n, {}, text, feed, {"dense"}, 2, results);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].ToString();
      ASSERT_EQ(results[static_cast<size_t>(r)].size(), 2u);
      for (const HostTensor& got : results[static_cast<size_t>(r)]) {
        EXPECT_EQ(std::vector<float>(got.data<float>(), got.data<float>() + 16), want)
            << "rank " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveOpsTest, ::testing::Values(1, 2, 4));

// A row outside the table, sent by the last rank only, stops the dense exchange on every rank
// with the same error naming that rank's entry, before the all-reduce: no rank waits for
// another, and the sum is never written.
TEST_P(CollectiveOpsTest, ADenseExchangeRefusesAnOutOfRangeRowOnEveryRank) {
  const int n = GetParam();
  MemoryStore store;
  std::vector<Status> status(static_cast<size_t>(n));
  auto rank_main = [&](int r) {
    CollectiveRuntime runtime(*gloo_, &store, RankOptions(r, n));
    Status s = runtime.InitRing(0, n, r);
    auto ring = runtime.Ring(0);
    auto exchange = DenseSparseExchange::Create(8, 2, ir::DataType::kFloat32, "test");
    if (!s.ok() || !ring.ok() || !exchange.ok()) {
      status[static_cast<size_t>(r)] = !s.ok() ? s : !ring.ok() ? ring.status()
                                                                 : exchange.status();
      return;
    }
    std::vector<int64_t> rows = {1, 7, r == n - 1 ? 99 : 3}, all_rows(3 * static_cast<size_t>(n));
    std::vector<float> values(6, 1.0f), all_values(6 * static_cast<size_t>(n));
    int64_t dims[] = {3, 2}, all_dims[] = {3 * n, 2};
    FleetTensor x{};
    x.struct_size = sizeof(FleetTensor);
    x.dtype = FLEET_DTYPE_FLOAT32;
    x.ndim = 2;
    x.dims = dims;
    x.device_type = FLEET_DEVICE_TYPE_HOST;
    x.data = values.data();
    x.rows = rows.data();
    x.height = 8;
    FleetTensor out = x;
    out.dims = all_dims;
    out.data = all_values.data();
    out.rows = all_rows.data();
    status[static_cast<size_t>(r)] = (*exchange)->Run(**ring, x, out, CallSite{}, CallSite{});
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (const Status& s : status) {
    EXPECT_EQ(s.message(),
              "rank " + std::to_string(n - 1) + "'s entry 2 has row 99, outside the table's 8 rows")
        << s.ToString();
  }
}

// What each way moves per rank (sparse_exchange.h): 2 ranks of 5 entries of 2 float32s in 8 rows
// receive 40 bytes of rows plus 40 of slices gathering, or 40 plus a 64-byte ring all-reduce
// dense, so "auto" gathers; on 4 ranks 240 against 120 + 96, so it goes dense.
TEST(SparseExchangePlanTest, AutoTakesTheWayThatMovesFewerBytes) {
  const auto f32 = ir::DataType::kFloat32;
  auto two = PlanSparseExchange("auto", 2, 5, 8, 2, f32, true);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_FALSE(two->dense);
  EXPECT_DOUBLE_EQ(two->gather_bytes, 80);
  EXPECT_DOUBLE_EQ(two->dense_bytes, 104);
  auto four = PlanSparseExchange("auto", 4, 5, 8, 2, f32, true);
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  EXPECT_TRUE(four->dense);
  EXPECT_DOUBLE_EQ(four->gather_bytes, 240);
  EXPECT_DOUBLE_EQ(four->dense_bytes, 216);
  EXPECT_EQ(four->Describe(4, 5, 8),
            "exchanged dense (rows gathered, their sum all-reduced): 4 ranks x 5 entries of a "
            "8-row table, 216 bytes received per rank, where gathering would take 240 bytes "
            "(sparse_exchange \"auto\")");
  // One rank moves nothing either way: it gathers.
  EXPECT_FALSE(PlanSparseExchange("auto", 1, 5, 8, 2, f32, true)->dense);
  // Forced either way.
  EXPECT_FALSE(PlanSparseExchange("gather", 4, 5, 8, 2, f32, true)->dense);
  EXPECT_TRUE(PlanSparseExchange("dense", 2, 5, 8, 2, ir::DataType::kFloat64, true)->dense);
}

// The dense way sums float32 or float64 in host memory, in a buffer the table's size: without
// those, "auto" gathers and "dense" says what is missing.
TEST(SparseExchangePlanTest, DenseIsRefusedNamingWhatItLacks) {
  const auto f32 = ir::DataType::kFloat32;
  EXPECT_FALSE(PlanSparseExchange("auto", 4, 5, 8, 2, f32, false)->dense);
  EXPECT_FALSE(PlanSparseExchange("auto", 4, 5, 8, 2, ir::DataType::kFloat16, true)->dense);
  const int64_t huge = int64_t{1} << 62;
  EXPECT_FALSE(PlanSparseExchange("auto", 4, huge, huge, 2, f32, true)->dense);
  auto message = [&](auto plan) { return plan.status().message(); };
  EXPECT_NE(message(PlanSparseExchange("dense", 4, 5, 8, 2, f32, false)).find("host memory"),
            std::string::npos);
  EXPECT_NE(message(PlanSparseExchange("dense", 4, 5, 8, 2, ir::DataType::kFloat16, true))
                .find("float32 or float64 slices, not float16"),
            std::string::npos);
  EXPECT_NE(message(PlanSparseExchange("dense", 4, 5, huge, 2, f32, true))
                .find("a sum of 4611686018427387904 rows of 2 elements does not fit in memory"),
            std::string::npos);
  EXPECT_NE(message(PlanSparseExchange("often", 4, 5, 8, 2, f32, true))
                .find("sparse_exchange must be \"auto\", \"gather\" or \"dense\", not "
                      "\"often\""),
            std::string::npos);
}

TEST(CollectiveOpsErrors, CollectiveWithoutACommunicatorIsExplained) {
  LoadOptions options;
  options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
  PluginRegistry registry(options);
  ASSERT_TRUE(registry.Load("cpu").ok());
  auto ex = exec::Executor::Create(registry, "cpu", {});
  ASSERT_TRUE(ex.ok());
  auto main = ir::ParseProgram(
      "program { block 0 { var x : float32[2]\n op c_allreduce_sum(X=[x]) -> (Out=[x]) } }", "m");
  ASSERT_TRUE(main.ok()) << main.status().ToString();
  auto prepared = (*ex)->Prepare(*main, {{"x", {2}}}, {"x"});
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.status().message().find("a collective op needs a communicator"),
            std::string::npos)
      << prepared.status().ToString();
}

TEST(CollectiveOpsErrors, RingUsedBeforeItsInitIsNamed) {
  LoadOptions options;
  options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
  PluginRegistry registry(options);
  ASSERT_TRUE(registry.Load("cpu").ok());
  ASSERT_TRUE(registry.Load("comm_gloo").ok());
  MemoryStore store;
  CollectiveRuntime runtime(*registry.Find(FLEET_COMPONENT_COMMUNICATOR, "gloo"), &store, {});
  exec::ExecutorOptions eo;
  eo.host_kernels = &runtime;
  auto ex = exec::Executor::Create(registry, "cpu", eo);
  ASSERT_TRUE(ex.ok());
  auto main = ir::ParseProgram(
      "program { block 0 { var x : float32[2]\n op c_allreduce_sum(X=[x]) -> (Out=[x]) "
      "{ring_id=3} } }",
      "m");
  ASSERT_TRUE(main.ok()) << main.status().ToString();
  HostTensor x;
  x.Reshape(ir::DataType::kFloat32, {2});
  std::vector<HostTensor> out;
  Status s = (*ex)->Run(*main, {{"x", x}}, {"x"}, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ring 3 has no communicator"), std::string::npos) << s.ToString();

  // c_comm_init whose rank disagrees with the process's is refused before any rendezvous.
  auto init = ir::ParseProgram(
      "program { block 0 { op c_comm_init() -> () {nranks=2, rank=1, ring_id=0} } }", "s");
  ASSERT_TRUE(init.ok());
  s = (*ex)->Run(*init, {}, {}, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("was the program transpiled for another rank?"), std::string::npos)
      << s.ToString();
}

// A peer that fails before joining must not leave the others in their rendezvous until the
// deadline: AbortAll releases a ring that is still joining.
TEST(CollectiveOpsErrors, AbortReleasesARingStillJoining) {
  LoadOptions options;
  options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
  PluginRegistry registry(options);
  ASSERT_TRUE(registry.Load("comm_gloo").ok());
  MemoryStore store;
  // Rank 1 never comes.
  CollectiveRuntime runtime(*registry.Find(FLEET_COMPONENT_COMMUNICATOR, "gloo"), &store,
                            RankOptions(0, 2));
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    runtime.AbortAll();
  });
  const auto start = std::chrono::steady_clock::now();
  Status s = runtime.InitRing(0, 2, 0);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  EXPECT_FALSE(s.ok());
  EXPECT_LT(took, 3.0) << s.ToString();
  // And nothing joins after an abort.
  EXPECT_EQ(runtime.InitRing(1, 2, 0).code(), Code::kAborted);
}

}  // namespace
}  // namespace fleet
