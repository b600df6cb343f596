// Conformance of the nn extension ops: adaptive pool2d, depthwise_conv2d, group_norm,
// instance_norm, bilinear_interp_v2 and nearest_interp_v2. Forward against NumPy
// (ref/ref_nn_ext.py), gradients against finite differences in float64, float32 against
// float64, and the shape functions' refusals.
#include <cmath>

#include "harness.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"

namespace fleet::conformance {
namespace {

using Attrs = ir::AttrMap;
using Ints = std::vector<int32_t>;

// Runs `op` and compares the output vars of `slots` with the NumPy reference `fn`.
::testing::AssertionResult MatchesRef(OpRunner& runner, const std::string& fn, const ir::Op& op,
                                      VarMap vars, const std::vector<std::string>& slots,
                                      double rtol, double atol) {
  VarMap inputs = vars;
  if (Status s = runner.Run(op, vars); !s.ok()) {
    return ::testing::AssertionFailure() << "run: " << s.ToString();
  }
  auto ref = NumpyReference(fn, op, inputs);
  if (!ref.ok()) return ::testing::AssertionFailure() << ref.status().ToString();
  for (const auto& slot : slots) {
    if (!ref->count(slot)) return ::testing::AssertionFailure() << "reference lacks " << slot;
    const auto& names = op.Output(slot);
    for (size_t i = 0; i < names.size(); ++i) {
      auto r = AllClose(vars.at(names[i]), ref->at(slot)[i], rtol, atol);
      if (!r) return ::testing::AssertionFailure() << slot << ": " << r.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs the grad ops of `fwd` on float64 inputs and on the same values in float32, with the same
// random output gradients, and compares every input gradient.
::testing::AssertionResult Float32GradMatchesFloat64(OpRunner& runner, const ir::Op& fwd,
                                                     VarMap v64, uint64_t seed, double rtol,
                                                     double atol) {
  if (Status s = runner.Run(fwd, v64); !s.ok()) {
    return ::testing::AssertionFailure() << "forward: " << s.ToString();
  }
  for (const auto& [slot, names] : fwd.outputs) {
    for (const auto& n : names) {
      if (v64.at(n).dtype != ir::DataType::kFloat64) continue;
      v64[ir::GradVarName(n)] = RandomTensor<double>(v64.at(n).dims, ++seed);
    }
  }
  VarMap v32;
  for (const auto& [n, t] : v64) {
    v32[n] = t.dtype == ir::DataType::kFloat64 ? Cast(t, ir::DataType::kFloat32) : t;
  }
  for (const ir::Op& grad : ops::BuiltinOps().Find(fwd.type)->grad(fwd)) {
    Status s64 = runner.Run(grad, v64), s32 = runner.Run(grad, v32);
    if (!s64.ok()) return ::testing::AssertionFailure() << "float64 grad: " << s64.ToString();
    if (!s32.ok()) return ::testing::AssertionFailure() << "float32 grad: " << s32.ToString();
    for (const auto& [slot, names] : grad.outputs) {
      for (const auto& n : names) {
        auto r = AllClose(v32.at(n), v64.at(n), rtol, atol);
        if (!r) return ::testing::AssertionFailure() << n << ": " << r.message();
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- adaptive / global pool2d --------------------------------------------------------------

ir::Op Pool(Attrs attrs) {
  return MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"y"}}}, std::move(attrs));
}

std::vector<Attrs> AdaptiveCases() {
  std::vector<Attrs> cases;
  for (const std::string type : {"max", "avg"}) {
    // 7x8 -> 3x3 and 2x5 have overlapping windows of different sizes; 7x8 -> 7x8 is the
    // identity, 1x1 the global pool; global_pooling makes the output the input's size.
    for (Ints k : {Ints{3, 3}, Ints{2, 5}, Ints{7, 8}, Ints{1, 1}, Ints{4, 2}}) {
      cases.push_back({{"pooling_type", type}, {"adaptive", true}, {"ksize", k}});
    }
    cases.push_back({{"pooling_type", type}, {"adaptive", true}, {"ksize", Ints{3, 3}},
                     {"exclusive", false}, {"paddings", Ints{1, 1}}, {"strides", Ints{2, 2}}});
    cases.push_back({{"pooling_type", type}, {"adaptive", true}, {"global_pooling", true},
                     {"ksize", Ints{2, 2}}});
  }
  return cases;
}

TEST(NnExtConformance, AdaptivePool2dMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 300;
  for (const auto& attrs : AdaptiveCases()) {
    VarMap v32{{"x", RandomTensor<float>({2, 3, 7, 8}, ++seed)}};
    EXPECT_TRUE(MatchesRef(*runner, "pool2d_adaptive", Pool(attrs), v32, {"Out"}, 1e-5, 1e-6))
        << "float32 case " << seed;
    VarMap v64{{"x", Cast(v32.at("x"), ir::DataType::kFloat64)}};
    EXPECT_TRUE(MatchesRef(*runner, "pool2d_adaptive", Pool(attrs), v64, {"Out"}, 1e-10, 1e-10))
        << "float64 case " << seed;
  }
}

TEST(NnExtConformance, AdaptivePool2dTiesGoToTheFirstMaximum) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // One 2x2 plane pooled to 1x1: the gradient goes to the first of the equal maxima.
  ir::Op fwd = Pool({{"pooling_type", std::string("max")}, {"adaptive", true},
                     {"ksize", Ints{1, 1}}});
  ir::Op grad = ops::BuiltinOps().Find("pool2d")->grad(fwd)[0];
  VarMap vars{{"x", MakeTensor<double>({1, 1, 2, 2}, {0.5, 2.0, 2.0, 1.0})},
              {"y", MakeTensor<double>({1, 1, 1, 1}, {2.0})},
              {"y@GRAD", MakeTensor<double>({1, 1, 1, 1}, {3.0})}};
  ASSERT_TRUE(runner->Run(grad, vars).ok());
  EXPECT_EQ(Values<double>(vars.at("x@GRAD")), (std::vector<double>{0, 3, 0, 0}));
}

TEST(NnExtConformance, AdaptivePool2dGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 400;
  for (const auto& attrs : AdaptiveCases()) {
    VarMap vars{{"x", RandomTensor<double>({1, 2, 7, 6}, ++seed)}};
    EXPECT_TRUE(CheckGradients(*runner, Pool(attrs), vars, {})) << "case " << seed;
  }
}

TEST(NnExtConformance, AdaptivePool2dFloat32GradMatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 500;
  for (const auto& attrs : AdaptiveCases()) {
    VarMap v64{{"x", RandomTensor<double>({2, 3, 7, 8}, ++seed)}};
    EXPECT_TRUE(Float32GradMatchesFloat64(*runner, Pool(attrs), v64, seed, 1e-5, 1e-6))
        << "case " << seed;
  }
}

TEST(NnExtConformance, AdaptivePool2dShapes) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({1, 1, 4, 4}, 1)}};
  Status s = runner->Run(Pool({{"ksize", Ints{0, 2}}, {"adaptive", true}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("positive output sizes"), std::string::npos) << s.ToString();
  s = runner->Run(Pool({{"ksize", Ints{2}}, {"adaptive", true}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("2 output sizes"), std::string::npos) << s.ToString();
  // An output larger than the input repeats input positions (windows of one element).
  ASSERT_TRUE(runner->Run(Pool({{"ksize", Ints{6, 5}}, {"adaptive", true}}), vars).ok());
  EXPECT_EQ(vars.at("y").dims, (std::vector<int64_t>{1, 1, 6, 5}));
}

// ---- depthwise_conv2d ----------------------------------------------------------------------

ir::Op Depthwise(Attrs attrs) {
  return MakeOp("depthwise_conv2d", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", {"y"}}},
                std::move(attrs));
}

std::vector<Attrs> DepthwiseCases() {
  return {
      {{"groups", int32_t{3}}},
      {{"groups", int32_t{3}}, {"strides", Ints{2, 1}}, {"paddings", Ints{1, 1}}},
      {{"groups", int32_t{3}}, {"paddings", Ints{2, 1}}, {"dilations", Ints{2, 2}}},
  };
}

TEST(NnExtConformance, DepthwiseConv2dMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 600;
  for (int64_t mult : {1, 2}) {
    for (const auto& attrs : DepthwiseCases()) {
      VarMap v32{{"x", RandomTensor<float>({2, 3, 7, 6}, ++seed)},
                 {"f", RandomTensor<float>({3 * mult, 1, 3, 3}, ++seed)}};
      EXPECT_TRUE(MatchesRef(*runner, "depthwise_conv2d", Depthwise(attrs), v32, {"Output"},
                             1e-5, 1e-5))
          << "float32 case " << seed;
      VarMap v64{{"x", Cast(v32.at("x"), ir::DataType::kFloat64)},
                 {"f", Cast(v32.at("f"), ir::DataType::kFloat64)}};
      EXPECT_TRUE(MatchesRef(*runner, "depthwise_conv2d", Depthwise(attrs), v64, {"Output"},
                             1e-10, 1e-10))
          << "float64 case " << seed;
    }
  }
}

TEST(NnExtConformance, DepthwiseConv2dGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  EXPECT_EQ(ops::BuiltinOps().Find("depthwise_conv2d")->grad(Depthwise({}))[0].type,
            "depthwise_conv2d_grad");
  uint64_t seed = 700;
  for (const auto& attrs : DepthwiseCases()) {
    VarMap vars{{"x", RandomTensor<double>({1, 3, 6, 5}, ++seed)},
                {"f", RandomTensor<double>({6, 1, 3, 3}, ++seed)}};
    EXPECT_TRUE(CheckGradients(*runner, Depthwise(attrs), vars, {})) << "case " << seed;
  }
}

TEST(NnExtConformance, DepthwiseConv2dFloat32GradMatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 800;
  for (const auto& attrs : DepthwiseCases()) {
    VarMap v64{{"x", RandomTensor<double>({2, 3, 7, 6}, ++seed)},
               {"f", RandomTensor<double>({3, 1, 3, 3}, ++seed)}};
    EXPECT_TRUE(Float32GradMatchesFloat64(*runner, Depthwise(attrs), v64, seed, 1e-4, 1e-5))
        << "case " << seed;
  }
}

TEST(NnExtConformance, DepthwiseConv2dShapes) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({1, 4, 5, 5}, 1)},
              {"f", RandomTensor<float>({4, 2, 3, 3}, 2)}};
  Status s = runner->Run(Depthwise({{"groups", int32_t{4}}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("depthwise_conv2d"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("needs dim 1 = 1"), std::string::npos) << s.ToString();
}

// ---- group_norm / instance_norm --------------------------------------------------------------

ir::Op GroupNorm(int32_t groups, bool affine, Attrs attrs = {}) {
  attrs["groups"] = groups;
  std::map<std::string, std::vector<std::string>> in = {{"X", {"x"}}};
  if (affine) in["Scale"] = {"s"}, in["Bias"] = {"b"};
  return MakeOp("group_norm", in, {{"Y", {"y"}}, {"Mean", {"m"}}, {"Variance", {"v"}}},
                std::move(attrs));
}

ir::Op InstanceNorm(bool affine, Attrs attrs = {}) {
  std::map<std::string, std::vector<std::string>> in = {{"X", {"x"}}};
  if (affine) in["Scale"] = {"s"}, in["Bias"] = {"b"};
  return MakeOp("instance_norm", in,
                {{"Y", {"y"}}, {"SavedMean", {"m"}}, {"SavedVariance", {"v"}}}, std::move(attrs));
}

template <typename T>
VarMap NormInputs(std::vector<int64_t> dims, uint64_t seed) {
  const int64_t c = dims[1];
  return {{"x", RandomTensor<T>(dims, seed, -2.0, 3.0)},
          {"s", RandomTensor<T>({c}, seed + 1, 0.5, 1.5)},
          {"b", RandomTensor<T>({c}, seed + 2)}};
}

struct NormCase {
  std::vector<int64_t> dims;
  int32_t groups;
};

std::vector<NormCase> NormCases() {
  return {{{2, 6, 4, 5}, 3}, {{3, 4, 5}, 2}, {{2, 4, 3, 2, 2}, 4}, {{4, 6}, 1}, {{2, 8, 3, 3}, 8}};
}

TEST(NnExtConformance, GroupNormMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 900;
  for (const auto& nc : NormCases()) {
    for (bool affine : {true, false}) {
      ir::Op op = GroupNorm(nc.groups, affine, {{"epsilon", 1e-3f}});
      VarMap v32 = NormInputs<float>(nc.dims, seed += 3);
      EXPECT_TRUE(MatchesRef(*runner, "group_norm", op, v32, {"Y", "Mean", "Variance"}, 1e-5,
                             1e-5))
          << "float32 case " << seed;
      VarMap v64 = NormInputs<double>(nc.dims, seed);
      EXPECT_TRUE(MatchesRef(*runner, "group_norm", op, v64, {"Y", "Mean", "Variance"}, 1e-10,
                             1e-10))
          << "float64 case " << seed;
    }
  }
}

TEST(NnExtConformance, InstanceNormMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1000;
  for (const auto& nc : NormCases()) {
    for (bool affine : {true, false}) {
      ir::Op op = InstanceNorm(affine);
      const std::vector<std::string> slots = {"Y", "SavedMean", "SavedVariance"};
      VarMap v32 = NormInputs<float>(nc.dims, seed += 3);
      EXPECT_TRUE(MatchesRef(*runner, "instance_norm", op, v32, slots, 1e-5, 1e-5))
          << "float32 case " << seed;
      VarMap v64 = NormInputs<double>(nc.dims, seed);
      EXPECT_TRUE(MatchesRef(*runner, "instance_norm", op, v64, slots, 1e-10, 1e-10))
          << "float64 case " << seed;
    }
  }
}

TEST(NnExtConformance, NormGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1100;
  GradCheckOptions opts;
  opts.outputs = {"Y"};  // Paddle's grads take no gradient through the saved statistics
  opts.rtol = 1e-5;
  opts.atol = 1e-7;
  for (const auto& nc : {NormCase{{2, 6, 3, 2}, 3}, NormCase{{2, 4, 5}, 2},
                         NormCase{{3, 2, 2, 2}, 1}}) {
    for (bool affine : {true, false}) {
      VarMap vars = NormInputs<double>(nc.dims, seed += 3);
      EXPECT_TRUE(CheckGradients(*runner, GroupNorm(nc.groups, affine), vars, opts))
          << "group_norm case " << seed;
      EXPECT_TRUE(CheckGradients(*runner, InstanceNorm(affine), vars, opts))
          << "instance_norm case " << seed;
    }
  }
}

TEST(NnExtConformance, NormFloat32GradMatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1200;
  for (const auto& nc : NormCases()) {
    VarMap v64 = NormInputs<double>(nc.dims, seed += 3);
    EXPECT_TRUE(Float32GradMatchesFloat64(*runner, GroupNorm(nc.groups, true), v64, seed, 1e-4,
                                          1e-4))
        << "group_norm case " << seed;
    EXPECT_TRUE(Float32GradMatchesFloat64(*runner, InstanceNorm(true), v64, seed, 1e-4, 1e-4))
        << "instance_norm case " << seed;
  }
}

TEST(NnExtConformance, NormShapes) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars = NormInputs<float>({2, 6, 3}, 1);
  Status s = runner->Run(GroupNorm(4, true), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("not divisible by groups 4"), std::string::npos) << s.ToString();
  s = runner->Run(GroupNorm(2, true, {{"data_layout", std::string("NHWC")}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("NCHW only"), std::string::npos) << s.ToString();
  vars["s"] = RandomTensor<float>({5}, 2);
  s = runner->Run(InstanceNorm(true), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("Scale must be [6]"), std::string::npos) << s.ToString();
  vars = NormInputs<float>({2, 6, 3}, 1);
  vars["x"] = RandomTensor<float>({6}, 3);
  s = runner->Run(InstanceNorm(false), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("X must have 2 to 5 dims"), std::string::npos) << s.ToString();
  // Shapes of the statistics.
  vars = NormInputs<float>({2, 6, 3}, 1);
  ASSERT_TRUE(runner->Run(GroupNorm(3, true), vars).ok());
  EXPECT_EQ(vars.at("m").dims, (std::vector<int64_t>{2, 3}));
  ASSERT_TRUE(runner->Run(InstanceNorm(true), vars).ok());
  EXPECT_EQ(vars.at("v").dims, (std::vector<int64_t>{12}));
}

// ---- bilinear_interp_v2 / nearest_interp_v2 --------------------------------------------------

ir::Op Interp(const std::string& type, Attrs attrs) {
  return MakeOp(type, {{"X", {"x"}}}, {{"Out", {"y"}}}, std::move(attrs));
}

// Every align_corners / align_mode combination, up- and down-sampling, sizes from `scale`
// (whose ratio 1 / scale differs from in / out) and an output of one row.
std::vector<Attrs> InterpCases() {
  std::vector<Attrs> cases;
  const std::vector<std::pair<bool, int32_t>> modes = {{true, 1}, {false, 0}, {false, 1}};
  for (auto [corners, mode] : modes) {
    for (Ints size : {Ints{9, 11}, Ints{3, 4}, Ints{1, 5}, Ints{5, 7}}) {
      cases.push_back({{"out_h", size[0]}, {"out_w", size[1]}, {"align_corners", corners},
                       {"align_mode", mode}});
    }
    cases.push_back({{"scale", std::vector<float>{1.5f, 0.6f}}, {"align_corners", corners},
                     {"align_mode", mode}});
  }
  return cases;
}

const char* kInterpTypes[] = {"bilinear_interp_v2", "nearest_interp_v2"};

Attrs WithMethod(Attrs attrs, const std::string& type) {
  attrs["interp_method"] = std::string(type == "bilinear_interp_v2" ? "bilinear" : "nearest");
  return attrs;
}

TEST(NnExtConformance, InterpMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1300;
  for (const std::string type : kInterpTypes) {
    for (const auto& attrs : InterpCases()) {
      ir::Op op = Interp(type, WithMethod(attrs, type));
      VarMap v32{{"x", RandomTensor<float>({2, 3, 5, 7}, ++seed)}};
      EXPECT_TRUE(MatchesRef(*runner, type, op, v32, {"Out"}, 1e-5, 1e-6))
          << type << " float32 case " << seed;
      VarMap v64{{"x", Cast(v32.at("x"), ir::DataType::kFloat64)}};
      EXPECT_TRUE(MatchesRef(*runner, type, op, v64, {"Out"}, 1e-10, 1e-12))
          << type << " float64 case " << seed;
    }
  }
}

TEST(NnExtConformance, BilinearInterpKnownValues) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // 2x2 -> 3x3 with aligned corners: the corners are kept, the centre is the mean.
  VarMap vars{{"x", MakeTensor<double>({1, 1, 2, 2}, {0, 1, 2, 3})}};
  ASSERT_TRUE(runner->Run(Interp("bilinear_interp_v2", {{"out_h", int32_t{3}},
                                                        {"out_w", int32_t{3}}}),
                          vars)
                  .ok());
  EXPECT_EQ(Values<double>(vars.at("y")),
            (std::vector<double>{0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3}));
  // Half-pixel centres (align_corners=false, align_mode=0): 2 -> 4 gives 0, .25, .75, 1.
  vars = {{"x", MakeTensor<double>({1, 1, 1, 2}, {0, 1})}};
  ASSERT_TRUE(runner->Run(Interp("bilinear_interp_v2",
                                 {{"out_h", int32_t{1}}, {"out_w", int32_t{4}},
                                  {"align_corners", false}, {"align_mode", int32_t{0}}}),
                          vars)
                  .ok());
  EXPECT_EQ(Values<double>(vars.at("y")), (std::vector<double>{0, 0.25, 0.75, 1}));
}

TEST(NnExtConformance, InterpGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1400;
  for (const std::string type : kInterpTypes) {
    for (const auto& attrs : InterpCases()) {
      VarMap vars{{"x", RandomTensor<double>({1, 2, 5, 7}, ++seed)}};
      EXPECT_TRUE(CheckGradients(*runner, Interp(type, WithMethod(attrs, type)), vars, {}))
          << type << " case " << seed;
    }
  }
}

TEST(NnExtConformance, InterpFloat32GradMatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1500;
  for (const std::string type : kInterpTypes) {
    for (const auto& attrs : InterpCases()) {
      VarMap v64{{"x", RandomTensor<double>({2, 3, 5, 7}, ++seed)}};
      EXPECT_TRUE(Float32GradMatchesFloat64(*runner, Interp(type, WithMethod(attrs, type)), v64,
                                            seed, 1e-5, 1e-6))
          << type << " case " << seed;
    }
  }
}

TEST(NnExtConformance, InterpShapes) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({1, 2, 4, 4}, 1)}};
  Status s = runner->Run(Interp("bilinear_interp_v2", {}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("out_h is -1"), std::string::npos) << s.ToString();
  s = runner->Run(Interp("nearest_interp_v2", {{"out_h", int32_t{2}},
                                               {"out_w", int32_t{2}},
                                               {"interp_method", std::string("bilinear")}}),
                  vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("interp_method must be 'nearest'"), std::string::npos)
      << s.ToString();
  s = runner->Run(Interp("bilinear_interp_v2", {{"scale", std::vector<float>{2, 2, 2}}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("scale needs 2 values"), std::string::npos) << s.ToString();
  s = runner->Run(Interp("bilinear_interp_v2", {{"scale", std::vector<float>{0.1f, 1}}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("output size must be positive"), std::string::npos)
      << s.ToString();
  vars["sz"] = MakeTensor<int32_t>({2}, {3, 3});
  s = runner->Run(MakeOp("bilinear_interp_v2", {{"X", {"x"}}, {"OutSize", {"sz"}}},
                         {{"Out", {"y"}}}, {{"out_h", int32_t{3}}, {"out_w", int32_t{3}}}),
                  vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("input OutSize is not supported"), std::string::npos)
      << s.ToString();
  VarMap v3{{"x", RandomTensor<float>({2, 4, 4}, 1)}};
  s = runner->Run(Interp("bilinear_interp_v2", {{"out_h", int32_t{3}}, {"out_w", int32_t{3}}}),
                  v3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("X must be 4-D"), std::string::npos) << s.ToString();
  // scale wins over out_h/out_w.
  ASSERT_TRUE(runner->Run(Interp("bilinear_interp_v2", {{"scale", std::vector<float>{1.5f, 2}},
                                                        {"out_h", int32_t{3}}}),
                          vars)
                  .ok());
  EXPECT_EQ(vars.at("y").dims, (std::vector<int64_t>{1, 2, 6, 8}));
}

// ---- shape functions with an unknown batch ---------------------------------------------------

StatusOr<ops::SlotInfos> Infer(const ir::Op& op,
                               const std::map<std::string, std::vector<ops::TensorInfo>>& in) {
  const ops::OpSchema* schema = ops::BuiltinOps().Find(op.type);
  if (schema == nullptr) return NotFound("no schema " + op.type);
  ops::ShapeContext ctx(*schema, op);
  ctx.inputs = in;
  for (const auto& [slot, names] : op.outputs) ctx.outputs[slot].resize(names.size());
  FLEET_RETURN_IF_ERROR(schema->infer_shape(ctx));
  return std::move(ctx.outputs);
}

ops::TensorInfo F32(std::vector<int64_t> dims) { return {ir::DataType::kFloat32, dims}; }

TEST(NnExtShapes, UnknownBatchPropagates) {
  using Dims = std::vector<int64_t>;
  auto out =
      Infer(Pool({{"adaptive", true}, {"ksize", Ints{3, 2}}}), {{"X", {F32({-1, 4, 9, 9})}}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("Out")[0].dims, (Dims{-1, 4, 3, 2}));
  out = Infer(Depthwise({{"groups", int32_t{4}}}),
              {{"Input", {F32({-1, 4, 9, 9})}}, {"Filter", {F32({8, 1, 3, 3})}}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("Output")[0].dims, (Dims{-1, 8, 7, 7}));
  out = Infer(GroupNorm(2, true), {{"X", {F32({-1, 4, 5})}}, {"Scale", {F32({4})}},
                                   {"Bias", {F32({4})}}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("Mean")[0].dims, (Dims{-1, 2}));
  out = Infer(InstanceNorm(false), {{"X", {F32({-1, 4, 5, 5})}}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("SavedVariance")[0].dims, (Dims{-1}));
  out = Infer(Interp("nearest_interp_v2", {{"scale", std::vector<float>{2, 0.5f}}}),
              {{"X", {F32({-1, 3, 4, -1})}}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("Out")[0].dims, (Dims{-1, 3, 8, -1}));
}

TEST(NnExtShapes, ErrorsNameTheOp) {
  auto r = Infer(GroupNorm(3, false), {{"X", {F32({-1, 4, 5})}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("group_norm"), std::string::npos) << r.status().ToString();
  r = Infer(Interp("bilinear_interp_v2", {{"out_h", int32_t{2}}, {"out_w", int32_t{0}}}),
            {{"X", {F32({-1, 3, 4, 4})}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bilinear_interp_v2"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("out_w is 0"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace fleet::conformance
