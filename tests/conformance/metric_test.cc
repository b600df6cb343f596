// Conformance of the auc op: runs of batches through the op, its statistics fed from one run to
// the next as a program does, against scikit-learn's roc_auc_score (ref/ref_metric.py) over the
// same rows: exactly when the rows are scored by bucket, and within the bucket resolution over
// the raw probabilities. Also the documented layout of the statistics, the one-class value,
// ties, sliding windows, and the errors for bad labels, probabilities and statistics.
#include <cmath>
#include <string>
#include <vector>

#include "harness.h"

namespace fleet::conformance {
namespace {

using Attrs = ir::AttrMap;

struct Batch {
  HostTensor predict;
  HostTensor label;
};

ir::Op AucOp(Attrs attrs) {
  // Outputs named as the inputs: each run leaves the statistics the next one reads, as the
  // persistable vars of a program do (the harness still hands the kernel separate buffers).
  return MakeOp("auc",
                {{"Predict", {"predict"}}, {"Label", {"label"}}, {"StatPos", {"pos"}},
                 {"StatNeg", {"neg"}}},
                {{"AUC", {"auc"}}, {"StatPosOut", {"pos"}}, {"StatNegOut", {"neg"}}},
                std::move(attrs));
}

int64_t StatSize(int64_t thresholds, int64_t steps) {
  return steps > 0 ? (steps + 1) * (thresholds + 1) : thresholds + 1;
}

VarMap ZeroStats(int64_t thresholds, int64_t steps) {
  const int64_t n = StatSize(thresholds, steps);
  std::vector<int64_t> zeros(static_cast<size_t>(n), 0);
  return {{"pos", MakeTensor<int64_t>({n}, zeros)}, {"neg", MakeTensor<int64_t>({n}, zeros)}};
}

// Rows of probabilities in [0, 1] as Predict [rows, width] (column 0 = 1 - p when width is 2),
// labels in {0, 1} drawn so that a higher p is more often positive, so the AUC is far from 0.5.
template <typename T>
Batch RandomBatch(int64_t rows, int64_t width, uint64_t seed, bool label32 = false) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<T> pred;
  std::vector<int64_t> lab;
  for (int64_t i = 0; i < rows; ++i) {
    const double p = u(gen);
    if (width == 2) pred.push_back(static_cast<T>(1.0 - p));
    pred.push_back(static_cast<T>(p));
    lab.push_back(u(gen) < 0.2 + 0.6 * p ? 1 : 0);
  }
  HostTensor l = MakeTensor<int64_t>({rows, 1}, lab);
  return {MakeTensor<T>({rows, width}, pred), label32 ? Cast(l, ir::DataType::kInt32) : l};
}

// Predict [rows, 1] from explicit probabilities and labels.
template <typename T>
Batch FixedBatch(const std::vector<double>& probs, const std::vector<int64_t>& labels) {
  std::vector<T> p(probs.begin(), probs.end());
  const int64_t rows = static_cast<int64_t>(probs.size());
  return {MakeTensor<T>({rows, 1}, p), MakeTensor<int64_t>({rows, 1}, labels)};
}

struct RunResult {
  std::vector<double> auc;  // after each batch
  VarMap vars;              // the statistics after the last batch
};

::testing::AssertionResult RunBatches(OpRunner& runner, const Attrs& attrs,
                                      const std::vector<Batch>& batches, RunResult* out) {
  const ir::Op op = AucOp(attrs);
  const int64_t thresholds = std::get<int32_t>(attrs.at("num_thresholds"));
  const int64_t steps = std::get<int32_t>(attrs.at("slide_steps"));
  out->vars = ZeroStats(thresholds, steps);
  out->auc.clear();
  for (size_t k = 0; k < batches.size(); ++k) {
    out->vars["predict"] = batches[k].predict;
    out->vars["label"] = batches[k].label;
    if (Status s = runner.Run(op, out->vars); !s.ok()) {
      return ::testing::AssertionFailure() << "batch " << k << ": " << s.ToString();
    }
    const HostTensor& auc = out->vars.at("auc");
    if (auc.dtype != ir::DataType::kFloat64 || auc.numel() != 1) {
      return ::testing::AssertionFailure() << "AUC is not one float64";
    }
    out->auc.push_back(Values<double>(auc)[0]);
  }
  return ::testing::AssertionSuccess();
}

// The AUC after each batch against scikit-learn: to rounding when scored by bucket, and within
// the bucket resolution over the raw probabilities.
::testing::AssertionResult MatchesSklearn(OpRunner& runner, const Attrs& attrs,
                                          const std::vector<Batch>& batches) {
  RunResult run;
  if (auto r = RunBatches(runner, attrs, batches, &run); !r) return r;
  VarMap vars;
  std::vector<std::string> preds, labels;
  for (size_t k = 0; k < batches.size(); ++k) {
    preds.push_back("p" + std::to_string(k));
    labels.push_back("l" + std::to_string(k));
    vars[preds.back()] = batches[k].predict;
    vars[labels.back()] = batches[k].label;
  }
  const ir::Op ref_op = MakeOp("auc", {{"Predict", preds}, {"Label", labels}}, {}, attrs);
  auto ref = NumpyReference("auc_over_batches", ref_op, vars);
  if (!ref.ok()) return ::testing::AssertionFailure() << ref.status().ToString();
  const auto exact = Values<double>(ref->at("AUC")[0]);
  const auto raw = Values<double>(ref->at("AUCRaw")[0]);
  const auto bound = Values<double>(ref->at("Bound")[0]);
  for (size_t k = 0; k < batches.size(); ++k) {
    if (std::abs(run.auc[k] - exact[k]) > 1e-12) {
      return ::testing::AssertionFailure() << "batch " << k << ": AUC " << run.auc[k]
                                           << ", scikit-learn over buckets " << exact[k];
    }
    if (std::abs(run.auc[k] - raw[k]) > bound[k] + 1e-12) {
      return ::testing::AssertionFailure()
             << "batch " << k << ": AUC " << run.auc[k] << ", scikit-learn over probabilities "
             << raw[k] << ", more than the bucket resolution " << bound[k] << " apart";
    }
  }
  return ::testing::AssertionSuccess();
}

Attrs AucAttrs(int32_t thresholds, int32_t steps) {
  return {{"num_thresholds", thresholds}, {"slide_steps", steps}};
}

TEST(MetricConformance, GlobalAucMatchesSklearn) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Paddle's defaults: 4095 thresholds; slide_steps 0 accumulates every batch (global AUC).
  std::vector<Batch> b64, b32;
  for (uint64_t k = 0; k < 4; ++k) {
    b64.push_back(RandomBatch<double>(200, 2, 10 + k));
    b32.push_back(RandomBatch<float>(150, 2, 20 + k, /*label32=*/true));
  }
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(4095, 0), b64));
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(4095, 0), b32));
  // Coarse buckets: many rows share a bucket, so the raw AUC is further away, but never more
  // than the resolution allows.
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(7, 0), b64));
}

TEST(MetricConformance, SlidingWindowMatchesSklearn) {
  FLEET_CONFORMANCE_RUNNER(runner);
  std::vector<Batch> batches;
  for (uint64_t k = 0; k < 7; ++k) batches.push_back(RandomBatch<double>(40 + 10 * k, 1, 30 + k));
  // The default slide_steps 1 is the AUC of the last batch alone; 3 the last three together;
  // a window longer than the run covers every batch so far.
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(4095, 1), batches));
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(4095, 3), batches));
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(50, 3), batches));
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(4095, 10), batches));
}

TEST(MetricConformance, TiesAndEdgesMatchSklearn) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Probabilities on bucket boundaries, 0 and 1 included: with num_thresholds 4 every value
  // k / 4 is its own bucket, so the bucketed AUC is the exact one, ties counting half.
  std::vector<Batch> batches = {
      FixedBatch<double>({0.0, 0.25, 0.25, 0.5, 1.0, 1.0, 0.75, 0.5}, {0, 0, 1, 1, 1, 0, 1, 0}),
      FixedBatch<double>({0.5, 0.5, 0.5, 0.5}, {1, 0, 1, 0}),
      FixedBatch<double>({1.0, 0.0, 0.75}, {1, 0, 0})};
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(4, 0), batches));
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(4, 2), batches));
  RunResult run;
  ASSERT_TRUE(RunBatches(*runner, AucAttrs(4, 1), batches, &run));
  EXPECT_EQ(run.auc[1], 0.5);  // every row tied
  // float32 probabilities bucket in float32, as Paddle's kernel does.
  std::vector<Batch> f32 = {FixedBatch<float>({0.1f, 0.3f, 0.7f, 0.9f, 0.7f, 0.2f},
                                              {0, 0, 1, 1, 0, 1})};
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(10, 1), f32));
}

TEST(MetricConformance, OneClassGivesZero) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Paddle's AUC of statistics holding one class only is 0; the global AUC recovers once the
  // other class arrives, while a one-batch window shows 0 for each one-class batch.
  std::vector<Batch> batches = {FixedBatch<double>({0.9, 0.6, 0.7}, {1, 1, 1}),
                                FixedBatch<double>({0.1, 0.4}, {0, 0}),
                                FixedBatch<double>({0.2, 0.3}, {0, 0})};
  RunResult run;
  ASSERT_TRUE(RunBatches(*runner, AucAttrs(4095, 1), batches, &run));
  EXPECT_EQ(run.auc, (std::vector<double>{0.0, 0.0, 0.0}));
  ASSERT_TRUE(RunBatches(*runner, AucAttrs(4095, 0), batches, &run));
  EXPECT_EQ(run.auc, (std::vector<double>{0.0, 1.0, 1.0}));
  EXPECT_TRUE(MatchesSklearn(*runner, AucAttrs(4095, 2), batches));
  // An empty batch counts nothing and still moves the window on.
  std::vector<Batch> empty = {FixedBatch<double>({0.9, 0.1}, {1, 0}), FixedBatch<double>({}, {})};
  ASSERT_TRUE(RunBatches(*runner, AucAttrs(4095, 1), empty, &run));
  EXPECT_EQ(run.auc, (std::vector<double>{1.0, 0.0}));
}

TEST(MetricConformance, StatisticsLayout) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // num_thresholds 4 (5 buckets), slide_steps 2: histograms [older, newer, sum].
  std::vector<Batch> batches = {FixedBatch<double>({0.0, 0.5, 1.0}, {1, 0, 1}),
                                FixedBatch<double>({0.5, 0.75}, {1, 1}),
                                FixedBatch<double>({0.25}, {0})};
  RunResult run;
  ASSERT_TRUE(RunBatches(*runner, AucAttrs(4, 2), {batches[0]}, &run));
  EXPECT_EQ(Values<int64_t>(run.vars.at("pos")),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1}));
  EXPECT_EQ(Values<int64_t>(run.vars.at("neg")),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0}));
  ASSERT_TRUE(RunBatches(*runner, AucAttrs(4, 2), batches, &run));
  // The first batch has left the window; the sum holds batches 2 and 3.
  EXPECT_EQ(Values<int64_t>(run.vars.at("pos")),
            (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(Values<int64_t>(run.vars.at("neg")),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0}));
  // slide_steps 0: one histogram of every batch.
  ASSERT_TRUE(RunBatches(*runner, AucAttrs(4, 0), batches, &run));
  EXPECT_EQ(Values<int64_t>(run.vars.at("pos")), (std::vector<int64_t>{1, 0, 1, 1, 1}));
  EXPECT_EQ(Values<int64_t>(run.vars.at("neg")), (std::vector<int64_t>{0, 1, 1, 0, 0}));
}

// A run that must fail with every one of `needles` in its message.
::testing::AssertionResult FailsWith(OpRunner& runner, const ir::Op& op, VarMap vars,
                                     const std::vector<std::string>& needles) {
  Status s = runner.Run(op, vars);
  if (s.ok()) return ::testing::AssertionFailure() << op.type << " ran but should have failed";
  for (const auto& n : needles) {
    if (s.ToString().find(n) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << n << "' not in: " << s.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(MetricConformance, BadRowsAreErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const ir::Op op = AucOp(AucAttrs(4095, 1));
  VarMap v = ZeroStats(4095, 1);
  Batch b = FixedBatch<double>({0.1, 0.2, 0.3, 0.4}, {0, 1, 2, 0});
  v["predict"] = b.predict;
  v["label"] = b.label;
  EXPECT_TRUE(FailsWith(*runner, op, v, {"auc", "Label[2] = 2", "0 or 1"}));
  v["label"] = Cast(MakeTensor<int64_t>({4, 1}, {0, -1, 1, 0}), ir::DataType::kInt32);
  EXPECT_TRUE(FailsWith(*runner, op, v, {"auc", "Label[1] = -1"}));
  b = FixedBatch<double>({0.1, 1.5, 0.3, 0.4}, {0, 1, 1, 0});
  v["predict"] = b.predict;
  v["label"] = b.label;
  EXPECT_TRUE(FailsWith(*runner, op, v, {"auc", "Predict[1, 0]", "[0, 1]"}));
  b = FixedBatch<float>({0.1f, 0.2f, std::nanf(""), 0.4f}, {0, 1, 1, 0});
  v["predict"] = b.predict;
  v["label"] = b.label;
  EXPECT_TRUE(FailsWith(*runner, op, v, {"auc", "Predict[2, 0]"}));
}

TEST(MetricConformance, ShapeErrorsNameTheSlot) {
  FLEET_CONFORMANCE_RUNNER(runner);
  Batch b = RandomBatch<double>(5, 2, 40);
  VarMap v = ZeroStats(4095, 1);
  v["predict"] = b.predict;
  v["label"] = b.label;
  // Statistics sized for other attributes.
  EXPECT_TRUE(FailsWith(*runner, AucOp(AucAttrs(4095, 2)), v, {"auc", "StatPos", "12288"}));
  EXPECT_TRUE(FailsWith(*runner, AucOp({{"curve", std::string("PR")}}), v, {"curve", "ROC"}));
  VarMap wide = v;
  wide["predict"] = RandomTensor<double>({5, 3}, 41, 0, 1);
  EXPECT_TRUE(FailsWith(*runner, AucOp({}), wide, {"Predict", "[5, 3]"}));
  VarMap rows = v;
  rows["label"] = MakeTensor<int64_t>({4, 1}, {0, 1, 0, 1});
  EXPECT_TRUE(FailsWith(*runner, AucOp({}), rows, {"Label", "[4, 1]"}));
  VarMap flt = v;
  flt["label"] = Cast(b.label, ir::DataType::kFloat32);
  EXPECT_TRUE(FailsWith(*runner, AucOp({}), flt, {"Label", "int64"}));
  EXPECT_TRUE(FailsWith(*runner, AucOp(AucAttrs(0, 1)), v, {"num_thresholds"}));
}

}  // namespace
}  // namespace fleet::conformance
