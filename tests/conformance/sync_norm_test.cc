// Conformance of the sync_batch_norm ops: X cut into shards along the batch as ranks hold it,
// each shard's Stats and GradStats summed as c_allreduce_sum would, must give, shard by shard,
// what batch_norm gives on the whole batch: Y and the statistics against NumPy's batch_norm,
// X@GRAD and the summed Scale@GRAD / Bias@GRAD against NumPy's batch_norm gradient. Shards of
// unequal size check that the count is every rank's. Then the shape errors.
#include <string>
#include <vector>

#include "harness.h"

namespace fleet::conformance {
namespace {

using Attrs = ir::AttrMap;

// Rows [begin, end) of dim 0.
HostTensor Rows(const HostTensor& t, int64_t begin, int64_t end) {
  HostTensor out = t;
  const size_t row = t.bytes.size() / static_cast<size_t>(t.dims[0]);
  out.dims[0] = end - begin;
  out.bytes.assign(t.bytes.begin() + static_cast<ptrdiff_t>(row * begin),
                   t.bytes.begin() + static_cast<ptrdiff_t>(row * end));
  return out;
}

HostTensor Concat(const std::vector<HostTensor>& parts) {
  HostTensor out = parts.at(0);
  for (size_t i = 1; i < parts.size(); ++i) {
    out.dims[0] += parts[i].dims[0];
    out.bytes.insert(out.bytes.end(), parts[i].bytes.begin(), parts[i].bytes.end());
  }
  return out;
}

// The element-wise sum of float64 tensors: what c_allreduce_sum leaves on every rank.
HostTensor Sum(const std::vector<HostTensor>& parts) {
  std::vector<double> total = Values<double>(parts.at(0));
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::vector<double> v = Values<double>(parts[i]);
    for (size_t k = 0; k < total.size(); ++k) total[k] += v[k];
  }
  return MakeTensor<double>(parts[0].dims, total);
}

HostTensor SumAs(const std::vector<HostTensor>& parts, ir::DataType dtype) {
  std::vector<HostTensor> wide;
  for (const HostTensor& p : parts) wide.push_back(Cast(p, ir::DataType::kFloat64));
  return Cast(Sum(wide), dtype);
}

const ir::Op kStats = MakeOp("sync_batch_norm_stats", {{"X", {"x"}}}, {{"Stats", {"st"}}}, {});
const ir::Op kGradStats = MakeOp(
    "sync_batch_norm_grad_stats",
    {{"X", {"x"}}, {"Y@GRAD", {"dy"}}, {"SavedMean", {"sm"}}, {"SavedVariance", {"sv"}}},
    {{"GradStats", {"gst"}}, {"Scale@GRAD", {"ds"}}, {"Bias@GRAD", {"db"}}}, {});
const ir::Op kGrad = MakeOp("sync_batch_norm_grad",
                            {{"X", {"x"}},
                             {"Scale", {"s"}},
                             {"SavedMean", {"sm"}},
                             {"SavedVariance", {"sv"}},
                             {"Y@GRAD", {"dy"}},
                             {"Stats", {"st"}},
                             {"GradStats", {"gst"}}},
                            {{"X@GRAD", {"dx"}}}, {});

ir::Op Forward(Attrs attrs) {
  return MakeOp("sync_batch_norm",
                {{"X", {"x"}},
                 {"Scale", {"s"}},
                 {"Bias", {"b"}},
                 {"Mean", {"m"}},
                 {"Variance", {"v"}},
                 {"Stats", {"st"}}},
                {{"Y", {"y"}},
                 {"MeanOut", {"m"}},
                 {"VarianceOut", {"v"}},
                 {"SavedMean", {"sm"}},
                 {"SavedVariance", {"sv"}}},
                std::move(attrs));
}

ir::Op WholeBatchNorm(Attrs attrs) {
  return MakeOp("batch_norm",
                {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}, {"Mean", {"m"}},
                 {"Variance", {"v"}}},
                {{"Y", {"y"}},
                 {"MeanOut", {"m_out"}},
                 {"VarianceOut", {"v_out"}},
                 {"SavedMean", {"sm"}},
                 {"SavedVariance", {"sv"}}},
                std::move(attrs));
}

struct Case {
  std::vector<int64_t> dims;   // the whole batch
  std::vector<int64_t> cuts;   // shard boundaries along dim 0, from 0 to dims[0]
  Attrs attrs;
  ir::DataType dtype;
  double tol;
};

// Runs the four ops shard by shard and compares with NumPy's batch_norm on the whole batch.
void ExpectShardsMatchWholeBatch(OpRunner& runner, const Case& c, uint64_t seed) {
  const int64_t ch = c.dims[1];
  VarMap whole{{"x", Cast(RandomTensor<double>(c.dims, seed, -2, 3), c.dtype)},
               {"s", Cast(RandomTensor<double>({ch}, seed + 1, 0.5, 1.5), c.dtype)},
               {"b", Cast(RandomTensor<double>({ch}, seed + 2), c.dtype)},
               {"m", Cast(RandomTensor<double>({ch}, seed + 3), c.dtype)},
               {"v", Cast(RandomTensor<double>({ch}, seed + 4, 0.5, 2), c.dtype)},
               {"dy", Cast(RandomTensor<double>(c.dims, seed + 5), c.dtype)}};
  const ir::Op bn = WholeBatchNorm(c.attrs);
  auto fwd_ref = NumpyReference("batch_norm", bn, whole);
  ASSERT_TRUE(fwd_ref.ok()) << fwd_ref.status().ToString();
  ir::Op bn_grad = MakeOp("batch_norm_grad",
                          {{"X", {"x"}}, {"Scale", {"s"}}, {"Y@GRAD", {"dy"}}},
                          {{"X@GRAD", {"dx"}}}, c.attrs);
  auto grad_ref = NumpyReference("batch_norm_grad", bn_grad, whole);
  ASSERT_TRUE(grad_ref.ok()) << grad_ref.status().ToString();

  // Forward: every shard's Stats, summed, then sync_batch_norm on each shard.
  std::vector<VarMap> shards;
  std::vector<HostTensor> stats;
  for (size_t k = 0; k + 1 < c.cuts.size(); ++k) {
    VarMap v = whole;
    v["x"] = Rows(whole.at("x"), c.cuts[k], c.cuts[k + 1]);
    v["dy"] = Rows(whole.at("dy"), c.cuts[k], c.cuts[k + 1]);
    ASSERT_TRUE(runner.Run(kStats, v).ok()) << "stats of shard " << k;
    stats.push_back(v.at("st"));
    shards.push_back(std::move(v));
  }
  const HostTensor all_stats = Sum(stats);
  int64_t numel = 1;
  for (int64_t d : c.dims) numel *= d;
  EXPECT_EQ(Values<double>(all_stats).back(), static_cast<double>(numel / ch))
      << "the count is every shard's";
  std::vector<HostTensor> ys, dxs, dscales, dbiases, grad_stats;
  for (VarMap& v : shards) {
    v["st"] = all_stats;
    Status s = runner.Run(Forward(c.attrs), v);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ys.push_back(v.at("y"));
  }
  const std::map<std::string, std::string> outs = {
      {"Y", "y"}, {"MeanOut", "m"}, {"VarianceOut", "v"}, {"SavedMean", "sm"},
      {"SavedVariance", "sv"}};
  for (const auto& [slot, name] : outs) {
    const HostTensor got = slot == "Y" ? Concat(ys) : shards[0].at(name);
    EXPECT_TRUE(AllClose(got, fwd_ref->at(slot)[0], c.tol, c.tol)) << slot;
    // Every shard holds the same statistics.
    if (slot != "Y") {
      EXPECT_TRUE(AllClose(shards.back().at(name), got, 0, 0)) << slot;
    }
  }

  // Backward: every shard's GradStats, summed, then X@GRAD shard by shard.
  for (VarMap& v : shards) {
    ASSERT_TRUE(runner.Run(kGradStats, v).ok());
    grad_stats.push_back(v.at("gst"));
    dscales.push_back(v.at("ds"));
    dbiases.push_back(v.at("db"));
  }
  const HostTensor all_grad_stats = Sum(grad_stats);
  for (VarMap& v : shards) {
    v["gst"] = all_grad_stats;
    Status s = runner.Run(kGrad, v);
    ASSERT_TRUE(s.ok()) << s.ToString();
    dxs.push_back(v.at("dx"));
  }
  EXPECT_TRUE(AllClose(Concat(dxs), grad_ref->at("X@GRAD")[0], c.tol, c.tol)) << "X@GRAD";
  // Each rank's Scale@GRAD / Bias@GRAD is its own share: the data-parallel all-reduce sums them.
  EXPECT_TRUE(AllClose(SumAs(dscales, c.dtype), grad_ref->at("Scale@GRAD")[0], c.tol, c.tol))
      << "Scale@GRAD";
  EXPECT_TRUE(AllClose(SumAs(dbiases, c.dtype), grad_ref->at("Bias@GRAD")[0], c.tol, c.tol))
      << "Bias@GRAD";
}

TEST(SyncBatchNormConformance, ShardsMatchBatchNormOnTheWholeBatch) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<Case> cases = {
      {{6, 3, 2, 2}, {0, 4, 6}, {}, ir::DataType::kFloat64, 1e-10},
      {{7, 4, 3}, {0, 2, 5, 7}, {{"momentum", 0.8f}, {"epsilon", 1e-3f}}, ir::DataType::kFloat64,
       1e-10},
      {{5, 2}, {0, 5}, {}, ir::DataType::kFloat64, 1e-10},
      {{8, 5, 4, 4}, {0, 3, 8}, {}, ir::DataType::kFloat32, 1e-4},
  };
  uint64_t seed = 4000;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << ir::ShapeText(c.dims) << " in " << c.cuts.size() - 1
                                      << " shards, " << ir::DataTypeName(c.dtype));
    ExpectShardsMatchWholeBatch(*runner, c, seed += 10);
  }
}

TEST(SyncBatchNormConformance, ShapeErrorsNameTheSlot) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<float>({2, 3, 2}, 1)},
           {"s", RandomTensor<float>({3}, 2)},
           {"b", RandomTensor<float>({3}, 3)},
           {"m", RandomTensor<float>({3}, 4)},
           {"v", RandomTensor<float>({3}, 5, 0.5, 1)},
           {"st", RandomTensor<double>({6}, 6)}};
  Status s = runner->Run(Forward({}), v);
  EXPECT_NE(s.ToString().find("Stats must be float64 [7]"), std::string::npos) << s.ToString();
  v["st"] = RandomTensor<float>({7}, 6);
  s = runner->Run(Forward({}), v);
  EXPECT_NE(s.ToString().find("Stats must be float64 [7]"), std::string::npos) << s.ToString();
  v["st"] = RandomTensor<double>({7}, 6);
  s = runner->Run(Forward({{"is_test", true}}), v);
  EXPECT_NE(s.ToString().find("is_test and use_global_stats must be false"), std::string::npos)
      << s.ToString();
  v["dy"] = RandomTensor<float>({2, 3, 2}, 7);
  v["sm"] = RandomTensor<float>({3}, 8);
  v["sv"] = RandomTensor<float>({3}, 9);
  v["gst"] = RandomTensor<double>({7}, 10);
  s = runner->Run(kGrad, v);
  EXPECT_NE(s.ToString().find("GradStats must be float64 [6]"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace fleet::conformance
