// Conformance of the sequence ops (sequence_pool and its grad) over sequence tensors: forward
// against NumPy (ref/ref_sequence.py) for every pool type, with empty sequences and a batch of
// one; gradients against central finite differences in float64; float32 against float64; and the
// refusals of the shape function and the kernel choice.
#include <cmath>

#include "harness.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"

namespace fleet::conformance {
namespace {

const std::vector<std::string> kPoolTypes = {"AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST"};

ir::Op Pool(const std::string& type, float pad_value = 0.0f) {
  return MakeOp("sequence_pool", {{"X", {"x"}}}, {{"Out", {"out"}}, {"MaxIndex", {"index"}}},
                {{"pooltype", type}, {"pad_value", pad_value}});
}

HostTensor Offsets(const std::vector<int64_t>& lod) {
  return MakeTensor<int64_t>({static_cast<int64_t>(lod.size())}, lod);
}

// Runs sequence_pool on x with offsets `lod` and compares Out (and MaxIndex for MAX) with NumPy.
::testing::AssertionResult MatchesNumpy(OpRunner& runner, const ir::Op& op, const HostTensor& x,
                                        const std::vector<int64_t>& lod, double tol) {
  VarMap vars{{"x", x}};
  if (Status s = runner.Run(op, vars, 1234, {{"x", lod}}); !s.ok()) {
    return ::testing::AssertionFailure() << "run: " << s.ToString();
  }
  ir::Op ref_op = op;
  ref_op.inputs["Lod"] = {"x.lod"};
  auto ref = NumpyReference("sequence_pool", ref_op, {{"x", x}, {"x.lod", Offsets(lod)}});
  if (!ref.ok()) return ::testing::AssertionFailure() << ref.status().ToString();
  auto out = AllClose(vars.at("out"), ref->at("Out")[0], tol, tol);
  if (!out) return ::testing::AssertionFailure() << "Out: " << out.message();
  if (ref->count("MaxIndex") != 0) {
    auto index = AllClose(vars.at("index"), ref->at("MaxIndex")[0], 0, 0);
    if (!index) return ::testing::AssertionFailure() << "MaxIndex: " << index.message();
  }
  return ::testing::AssertionSuccess();
}

TEST(SequenceConformance, SequencePoolMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Sequences of 2, 0 (empty), 3 and 4 rows; then a batch of one sequence.
  const std::vector<std::vector<int64_t>> lods = {{0, 2, 2, 5, 9}, {0, 4}, {0, 0, 1}};
  uint64_t seed = 700;
  for (const auto& lod : lods) {
    for (const std::string& type : kPoolTypes) {
      HostTensor x64 = RandomTensor<double>({lod.back(), 2, 3}, ++seed);
      EXPECT_TRUE(MatchesNumpy(*runner, Pool(type, 0.5f), x64, lod, 1e-12))
          << type << " float64, lod of " << lod.size() - 1 << " sequences";
      EXPECT_TRUE(
          MatchesNumpy(*runner, Pool(type, -2.0f), Cast(x64, ir::DataType::kFloat32), lod, 1e-5))
          << type << " float32, lod of " << lod.size() - 1 << " sequences";
    }
  }
}

TEST(SequenceConformance, MaxKeepsTheFirstOfEqualRows) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", MakeTensor<double>({4, 1}, {3.0, 3.0, 1.0, 3.0})}};
  ASSERT_TRUE(runner->Run(Pool("MAX"), vars, 1, {{"x", {0, 3, 4}}}).ok());
  EXPECT_EQ(Values<int32_t>(vars.at("index")), (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(Values<double>(vars.at("out")), (std::vector<double>{3.0, 3.0}));
}

// L = sum(w * Out); sequence_pool_grad fed Out@GRAD = w must give dL/dX, measured by perturbing
// every element of X.
TEST(SequenceConformance, SequencePoolGradientMatchesFiniteDifferences) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<int64_t> lod = {0, 3, 3, 4, 7};
  uint64_t seed = 800;
  for (const std::string& type : kPoolTypes) {
    const ir::Op fwd = Pool(type, 0.25f);
    VarMap vars{{"x", RandomTensor<double>({lod.back(), 2}, ++seed)}};
    ASSERT_TRUE(runner->Run(fwd, vars, 1, {{"x", lod}}).ok()) << type;
    const HostTensor w = RandomTensor<double>(vars.at("out").dims, ++seed);
    auto loss = [&](const HostTensor& x) {
      VarMap v{{"x", x}};
      EXPECT_TRUE(runner->Run(fwd, v, 1, {{"x", lod}}).ok());
      const std::vector<double> out = Values<double>(v.at("out")), wv = Values<double>(w);
      double sum = 0;
      for (size_t i = 0; i < out.size(); ++i) sum += out[i] * wv[i];
      return sum;
    };
    vars["out@GRAD"] = w;
    const std::vector<ir::Op> grads = ops::BuiltinOps().Find("sequence_pool")->grad(fwd);
    ASSERT_EQ(grads.size(), 1u);
    ASSERT_TRUE(runner->Run(grads[0], vars, 1, {{"x", lod}}).ok()) << type;
    const std::vector<double> analytic = Values<double>(vars.at("x@GRAD"));
    std::vector<double> x = Values<double>(vars.at("x"));
    for (size_t i = 0; i < x.size(); ++i) {
      const double eps = 1e-6, saved = x[i];
      x[i] = saved + eps;
      const double up = loss(MakeTensor<double>(vars.at("x").dims, x));
      x[i] = saved - eps;
      const double down = loss(MakeTensor<double>(vars.at("x").dims, x));
      x[i] = saved;
      EXPECT_NEAR(analytic[i], (up - down) / (2 * eps), 1e-6) << type << " element " << i;
    }
  }
}

TEST(SequenceConformance, SequencePoolGradFloat32MatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<int64_t> lod = {0, 1, 5, 5, 8};
  uint64_t seed = 900;
  for (const std::string& type : kPoolTypes) {
    const ir::Op fwd = Pool(type);
    VarMap v64{{"x", RandomTensor<double>({lod.back(), 3}, ++seed)}};
    ASSERT_TRUE(runner->Run(fwd, v64, 1, {{"x", lod}}).ok());
    v64["out@GRAD"] = RandomTensor<double>(v64.at("out").dims, ++seed);
    VarMap v32;
    for (const auto& [n, t] : v64) {
      v32[n] = t.dtype == ir::DataType::kFloat64 ? Cast(t, ir::DataType::kFloat32) : t;
    }
    const ir::Op grad = ops::BuiltinOps().Find("sequence_pool")->grad(fwd)[0];
    ASSERT_TRUE(runner->Run(grad, v64, 1, {{"x", lod}}).ok());
    ASSERT_TRUE(runner->Run(grad, v32, 1, {{"x", lod}}).ok());
    EXPECT_TRUE(AllClose(v32.at("x@GRAD"), Cast(v64.at("x@GRAD"), ir::DataType::kFloat32), 1e-5,
                         1e-6))
        << type;
  }
}

TEST(SequenceConformance, RefusalsNameTheProblem) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap dense{{"x", RandomTensor<float>({4, 2}, 1)}};
  Status s = runner->Run(Pool("SUM"), dense);
  EXPECT_NE(s.message().find("input X 'x' is dense; sequence_pool pools sequences"),
            std::string::npos)
      << s.ToString();
  VarMap seq{{"x", RandomTensor<float>({4, 2}, 2)}};
  s = runner->Run(Pool("MEDIAN"), seq, 1, {{"x", {0, 4}}});
  EXPECT_NE(s.message().find("pooltype 'MEDIAN' is not one of"), std::string::npos)
      << s.ToString();
  // A sequence tensor into an op that does not take sequences.
  VarMap soft{{"x", RandomTensor<float>({4, 2}, 3)}};
  s = runner->Run(MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"y"}}}), soft, 1, {{"x", {0, 4}}});
  EXPECT_NE(s.message().find("input X 'x' is a sequence tensor (lod_level 1), which softmax "
                             "does not take"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace fleet::conformance
