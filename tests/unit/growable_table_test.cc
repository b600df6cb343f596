// A growable table's index (pserver/growable_table.h): slots by id, admission, eviction, its
// checkpoint form, the row initializer, and the shard function trainers route ids by.
#include "pserver/growable_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "fleet/fleet_kernels.h"

namespace fleet {
namespace {

constexpr int64_t kMaxId = INT64_MAX - 1;  // the largest id a growable table takes

using Created = std::vector<std::pair<int64_t, int64_t>>;

std::vector<int64_t> Resolve(GrowableTable& t, std::vector<int64_t> ids, bool lookup,
                             Created* created = nullptr) {
  std::vector<int64_t> slots(ids.size());
  Created local;
  t.Resolve(ids.data(), static_cast<int64_t>(ids.size()), lookup, slots.data(),
            created != nullptr ? created : &local);
  return slots;
}

TEST(GrowableTable, FirstTouchMakesOneRowPerIdAnywhereIn63Bits) {
  GrowableTable t({});
  Created created;
  const std::vector<int64_t> ids = {kMaxId, 0, kMaxId - 1, kMaxId, int64_t{1} << 62, 0};
  const std::vector<int64_t> slots = Resolve(t, ids, /*lookup=*/true, &created);
  EXPECT_EQ(slots, (std::vector<int64_t>{0, 1, 2, 0, 3, 1}));
  EXPECT_EQ(created, (Created{{kMaxId, 0}, {0, 1}, {kMaxId - 1, 2}, {int64_t{1} << 62, 3}}));
  EXPECT_EQ(t.rows(), 4);
  EXPECT_EQ(t.slots_used(), 4);
  // A second touch finds the same rows and makes none.
  created.clear();
  EXPECT_EQ(Resolve(t, {0, kMaxId}, /*lookup=*/false, &created),
            (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(created.empty());
  // A gradient for an id never looked up makes its row too when admission is immediate.
  EXPECT_EQ(Resolve(t, {77}, /*lookup=*/false, &created), (std::vector<int64_t>{4}));
  EXPECT_EQ(created, (Created{{77, 4}}));
}

// Looked up in a third update, an id gets its row; lookups within one update (two trainers'
// batches) count once, and gradients not at all.
TEST(GrowableTable, AnIdGetsItsRowInTheNthUpdateThatLooksItUp) {
  GrowableTable t({.admit_after = 3, .evict_after = 0});
  EXPECT_EQ(Resolve(t, {5, 5}, true), (std::vector<int64_t>{-1, -1}));  // update 0
  EXPECT_EQ(Resolve(t, {5}, true), (std::vector<int64_t>{-1}));         // still update 0
  EXPECT_EQ(t.waiting(), 1);
  t.EndUpdate();
  EXPECT_EQ(Resolve(t, {5}, false), (std::vector<int64_t>{-1}));  // a gradient: no count
  EXPECT_EQ(Resolve(t, {5}, true), (std::vector<int64_t>{-1}));   // update 1
  t.EndUpdate();
  EXPECT_EQ(t.rows(), 0);
  Created created;
  EXPECT_EQ(Resolve(t, {9, 5}, true, &created), (std::vector<int64_t>{-1, 0}));  // update 2
  EXPECT_EQ(created, (Created{{5, 0}}));
  EXPECT_EQ(t.rows(), 1);
  EXPECT_EQ(t.waiting(), 1);  // 9, seen once
  EXPECT_EQ(Resolve(t, {5}, false), (std::vector<int64_t>{0}));  // now its gradient lands
}

TEST(GrowableTable, ARowUnseenForKUpdatesIsDroppedAtTheEndOfTheKth) {
  GrowableTable t({.admit_after = 1, .evict_after = 2});
  Resolve(t, {10, 20}, true);  // update 0
  EXPECT_EQ(t.EndUpdate(), 0);
  Resolve(t, {20}, false);     // update 1: 10 unseen once
  EXPECT_EQ(t.EndUpdate(), 0);
  EXPECT_EQ(t.rows(), 2);
  // Update 2: 10 unseen twice, dropped at its end; 20 (seen at 1) stays.
  EXPECT_EQ(t.EndUpdate(), 1);
  EXPECT_EQ(t.rows(), 1);
  EXPECT_EQ(t.evicted(), 1);
  // 10's slot (0) is handed out first, to a new id; 10 returning starts afresh.
  Created created;
  EXPECT_EQ(Resolve(t, {30, 10}, true, &created), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(created, (Created{{30, 0}, {10, 2}}));
  EXPECT_EQ(t.EndUpdate(), 1);  // update 3: 20 (last seen at 1) goes
  EXPECT_EQ(t.rows(), 2);
}

TEST(GrowableTable, WaitingIdsAreForgottenLikeRows) {
  GrowableTable t({.admit_after = 2, .evict_after = 1});
  Resolve(t, {7}, true);  // update 0
  EXPECT_EQ(t.waiting(), 1);
  t.EndUpdate();
  EXPECT_EQ(t.waiting(), 1);
  t.EndUpdate();  // update 1 went without it: its count is gone
  EXPECT_EQ(t.waiting(), 0);
  EXPECT_EQ(Resolve(t, {7}, true), (std::vector<int64_t>{-1}));  // counts from one again
}

TEST(GrowableTable, ASavedIndexRestoresToTheSameFuture) {
  GrowableTableOptions o{.admit_after = 2, .evict_after = 3};
  GrowableTable live(o);
  for (int64_t step = 0; step < 6; ++step) {
    Resolve(live, {step, step + 1, kMaxId - step % 2, kMaxId - step % 2}, true);
    Resolve(live, {step}, false);
    live.EndUpdate();
  }
  const auto saved = live.Save();
  ASSERT_EQ(saved.size(), 4u);
  GrowableTable restored(o);
  ASSERT_TRUE(restored.Restore(saved[0].second, saved[1].second, saved[2].second,
                               saved[3].second[0], "test").ok());
  EXPECT_EQ(restored.rows(), live.rows());
  EXPECT_EQ(restored.waiting(), live.waiting());
  EXPECT_EQ(restored.Save(), saved);
  // Both go on identically: same slots, same admissions, same evictions.
  for (int64_t step = 6; step < 12; ++step) {
    Created a, b;
    const std::vector<int64_t> ids = {step, 3, step * 1000, kMaxId};
    EXPECT_EQ(Resolve(live, ids, true, &a), Resolve(restored, ids, true, &b)) << step;
    EXPECT_EQ(a, b) << step;
    EXPECT_EQ(live.EndUpdate(), restored.EndUpdate()) << step;
  }
  EXPECT_EQ(restored.Save(), live.Save());
}

TEST(GrowableTable, AMalformedIndexIsRefusedNamingTheEntry) {
  GrowableTable t({.admit_after = 2, .evict_after = 0});
  Status s = t.Restore({4, 4}, {0, 0}, {}, 1, "ckpt");
  EXPECT_EQ(s.code(), Code::kDataLoss);
  EXPECT_NE(s.message().find("id 4 is in two slots"), std::string::npos) << s.ToString();
  s = t.Restore({-5}, {0}, {}, 1, "ckpt");
  EXPECT_NE(s.message().find("slot 0 holds id -5"), std::string::npos) << s.ToString();
  s = t.Restore({1}, {0}, {9, 5, 0}, 1, "ckpt");  // a count past admit_after
  EXPECT_NE(s.message().find("waiting id 9 (count 5"), std::string::npos) << s.ToString();
  s = t.Restore({1}, {0, 0}, {}, 1, "ckpt");
  EXPECT_NE(s.message().find("malformed"), std::string::npos) << s.ToString();
  EXPECT_EQ(t.rows(), 0);  // a refused index changes nothing
}

TEST(RowInitializer, EachIdDrawsItsOwnRowWhateverTheOrder) {
  RowInitializer u{RowInitializer::Kind::kUniform, -0.5, 0.25, 7};
  std::vector<float> a(16), b(16), c(16);
  u.Fill(kMaxId, ir::DataType::kFloat32, 16, a.data());
  u.Fill(3, ir::DataType::kFloat32, 16, c.data());
  u.Fill(kMaxId, ir::DataType::kFloat32, 16, b.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (float v : a) {
    EXPECT_GE(v, -0.5f);
    EXPECT_LT(v, 0.25f);
  }
  RowInitializer other_seed = u;
  other_seed.seed = 8;
  other_seed.Fill(kMaxId, ir::DataType::kFloat32, 16, b.data());
  EXPECT_NE(a, b);
  RowInitializer k{RowInitializer::Kind::kConstant, 0.125, 0, 1};
  std::vector<double> d(5);
  k.Fill(9, ir::DataType::kFloat64, 5, d.data());
  EXPECT_EQ(d, std::vector<double>(5, 0.125));
}

TEST(RowInitializer, UniformAndGaussianRowsHaveTheirDistributions) {
  // 4000 rows of 8: the moments of 32000 draws.
  auto moments = [](const RowInitializer& init) {
    double sum = 0, sq = 0;
    std::vector<float> row(8);
    for (int64_t id = 0; id < 4000; ++id) {
      init.Fill(id * 7919, ir::DataType::kFloat32, 8, row.data());
      for (float v : row) {
        sum += v;
        sq += static_cast<double>(v) * v;
      }
    }
    const double mean = sum / 32000, var = sq / 32000 - mean * mean;
    return std::make_pair(mean, std::sqrt(var));
  };
  const auto [um, us] = moments({RowInitializer::Kind::kUniform, -1.0, 3.0, 5});
  EXPECT_NEAR(um, 1.0, 0.03);
  EXPECT_NEAR(us, 4.0 / std::sqrt(12.0), 0.02);
  const auto [gm, gs] = moments({RowInitializer::Kind::kGaussian, 2.0, 0.5, 5});
  EXPECT_NEAR(gm, 2.0, 0.01);
  EXPECT_NEAR(gs, 0.5, 0.01);
}

TEST(RowInitializer, FoundThroughTheStartupsCopies) {
  ir::Program startup;
  ir::Block& b = startup.global();
  b.ops.push_back(ir::MakeOp("uniform_random", {}, {{"Out", {"emb"}}},
                             {{"min", -0.1f}, {"max", 0.1f}, {"seed", int32_t{11}}}));
  b.ops.push_back(ir::MakeOp("assign", {{"X", {"emb"}}}, {{"Out", {"emb.block1"}}}, {}));
  b.ops.push_back(ir::MakeOp("fill_constant", {}, {{"Out", {"m1"}}}, {{"value", 0.5f}}));
  b.ops.push_back(ir::MakeOp("assign_value", {}, {{"Out", {"odd"}}}, {}));
  auto init = FindRowInitializer(startup, "emb.block1", "emb");
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  EXPECT_EQ(init->kind, RowInitializer::Kind::kUniform);
  EXPECT_NEAR(init->a, -0.1, 1e-7);
  EXPECT_NEAR(init->b, 0.1, 1e-7);
  EXPECT_EQ(init->seed, 11u);
  auto constant = FindRowInitializer(startup, "m1", "emb");
  ASSERT_TRUE(constant.ok());
  EXPECT_EQ(constant->a, 0.5);
  auto odd = FindRowInitializer(startup, "odd", "emb");
  EXPECT_EQ(odd.status().code(), Code::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("growable table 'emb': 'odd' is initialised by "
                                        "assign_value"),
            std::string::npos)
      << odd.status().ToString();
  EXPECT_FALSE(FindRowInitializer(startup, "missing", "emb").ok());
}

// The shard of an id is part of the contract between trainers (which route by it), the kernels
// that split gradients by it and the servers: fixed values, computed independently (SplitMix64's
// finaliser of id + 0x9E3779B97F4A7C15, in Python), and an even spread.
TEST(RowShard, IsSplitMix64OfTheIdModuloTheShards) {
  const std::map<int64_t, std::vector<int32_t>> expect = {
      {0, {1, 1, 2}},
      {1, {1, 2, 2}},
      {42, {1, 1, 5}},
      {INT64_MAX - 1, {0, 2, 3}},
      {INT64_MAX - 999, {1, 1, 5}}};
  for (const auto& [id, shards] : expect) {
    EXPECT_EQ(fleet_row_shard(id, 2), shards[0]) << id;
    EXPECT_EQ(fleet_row_shard(id, 3), shards[1]) << id;
    EXPECT_EQ(fleet_row_shard(id, 7), shards[2]) << id;
    EXPECT_EQ(fleet_row_shard(id, 1), 0);
  }
  std::vector<int64_t> count(4, 0);
  for (int64_t id = 0; id < 40000; ++id) ++count[static_cast<size_t>(fleet_row_shard(id, 4))];
  for (int64_t c : count) EXPECT_NEAR(static_cast<double>(c), 10000.0, 300.0);
}

}  // namespace
}  // namespace fleet
