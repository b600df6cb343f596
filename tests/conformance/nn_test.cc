// Conformance of the nn ops: forward against NumPy (ref/ref_nn.py), gradient rules against
// finite differences in float64, float32 (oneDNN) gradients against the float64 loops, and
// shape-function errors.
#include <cmath>

#include "harness.h"
#include "ops/op_registry.h"

namespace fleet::conformance {
namespace {

using Attrs = ir::AttrMap;
using Ints = std::vector<int32_t>;

// Rows of positive values summing to 1 (probabilities over the last dim).
template <typename T>
HostTensor Probabilities(std::vector<int64_t> dims, uint64_t seed) {
  HostTensor t = RandomTensor<T>(dims, seed, 0.1, 1.0);
  const int64_t c = dims.back();
  T* p = t.data<T>();
  for (int64_t r = 0; r < t.numel() / c; ++r) {
    T sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += p[r * c + j];
    for (int64_t j = 0; j < c; ++j) p[r * c + j] /= sum;
  }
  return t;
}

HostTensor Labels(std::vector<int64_t> dims, uint64_t seed, int64_t classes,
                  std::vector<std::pair<int64_t, int64_t>> overrides = {}) {
  HostTensor t = RandomInts(std::move(dims), seed, 0, classes);
  for (auto [pos, value] : overrides) t.data<int64_t>()[pos] = value;
  return t;
}

// ---- losses -------------------------------------------------------------------------------

TEST(NnConformance, CrossEntropyMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op hard = MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"y"}}},
                       {{"ignore_index", int32_t{2}}});
  VarMap v32{{"x", Probabilities<float>({6, 5}, 1)}, {"l", Labels({6, 1}, 2, 5, {{0, 2}})}};
  EXPECT_TRUE(MatchesNumpy(*runner, hard, v32, {"Y"}, 1e-5, 1e-6));
  VarMap v64{{"x", Probabilities<double>({2, 3, 4}, 3)}, {"l", Labels({2, 3, 1}, 4, 4)}};
  EXPECT_TRUE(MatchesNumpy(*runner, hard, v64, {"Y"}, 1e-10, 1e-10));

  ir::Op soft = MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"y"}}},
                       {{"soft_label", true}});
  VarMap vs{{"x", Probabilities<float>({4, 6}, 5)}, {"l", Probabilities<float>({4, 6}, 6)}};
  EXPECT_TRUE(MatchesNumpy(*runner, soft, vs, {"Y"}, 1e-5, 1e-6));
}

TEST(NnConformance, CrossEntropyGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op hard = MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"y"}}},
                       {{"ignore_index", int32_t{-1}}});
  VarMap vars{{"x", Probabilities<double>({5, 4}, 7)}, {"l", Labels({5, 1}, 8, 4, {{1, -1}})}};
  EXPECT_TRUE(CheckGradients(*runner, hard, vars, {}));
  ir::Op soft = MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"y"}}},
                       {{"soft_label", true}});
  VarMap vs{{"x", Probabilities<double>({3, 4}, 9)}, {"l", Probabilities<double>({3, 4}, 10)}};
  EXPECT_TRUE(CheckGradients(*runner, soft, vs, {}));
}

TEST(NnConformance, CrossEntropyRejectsBadLabels) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"y"}}});
  VarMap vars{{"x", Probabilities<float>({3, 4}, 1)}, {"l", Labels({3, 1}, 2, 4, {{2, 7}})}};
  Status s = runner->Run(op, vars);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("Label[2] = 7"), std::string::npos) << s.ToString();
  VarMap wrong{{"x", Probabilities<float>({3, 4}, 1)}, {"l", Labels({3, 2}, 2, 4)}};
  s = runner->Run(op, wrong);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("Label"), std::string::npos) << s.ToString();
}

ir::Op SoftmaxCE(Attrs attrs) {
  return MakeOp("softmax_with_cross_entropy", {{"Logits", {"z"}}, {"Label", {"l"}}},
                {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}, std::move(attrs));
}

TEST(NnConformance, SoftmaxWithCrossEntropyMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap hard{{"z", RandomTensor<float>({8, 10}, 11, -4, 4)},
              {"l", Labels({8, 1}, 12, 10, {{3, -100}})}};
  EXPECT_TRUE(MatchesNumpy(*runner, SoftmaxCE({}), hard, {"Softmax", "Loss"}, 1e-5, 1e-6));
  VarMap ignore5{{"z", RandomTensor<double>({6, 5}, 13, -3, 3)},
                 {"l", Labels({6, 1}, 14, 5, {{0, 4}, {2, 4}})}};
  EXPECT_TRUE(MatchesNumpy(*runner, SoftmaxCE({{"ignore_index", int32_t{4}}}), ignore5,
                           {"Softmax", "Loss"}, 1e-10, 1e-10));
  VarMap soft{{"z", RandomTensor<float>({4, 7}, 15, -3, 3)},
              {"l", Probabilities<float>({4, 7}, 16)}};
  EXPECT_TRUE(MatchesNumpy(*runner, SoftmaxCE({{"soft_label", true}}), soft,
                           {"Softmax", "Loss"}, 1e-5, 1e-6));
  VarMap axis1{{"z", RandomTensor<float>({2, 4, 3}, 17, -3, 3)}, {"l", Labels({2, 1, 3}, 18, 4)}};
  EXPECT_TRUE(MatchesNumpy(*runner, SoftmaxCE({{"axis", int32_t{1}}}), axis1,
                           {"Softmax", "Loss"}, 1e-5, 1e-6));
  // Large logits stay finite (the kernel subtracts the row maximum).
  VarMap big{{"z", RandomTensor<float>({3, 4}, 19, 500, 800)}, {"l", Labels({3, 1}, 20, 4)}};
  EXPECT_TRUE(MatchesNumpy(*runner, SoftmaxCE({}), big, {"Softmax", "Loss"}, 1e-5, 1e-5));
}

TEST(NnConformance, SoftmaxWithCrossEntropyGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  opt.outputs = {"Loss"};  // Paddle's grad rule propagates Loss only
  VarMap hard{{"z", RandomTensor<double>({5, 4}, 21, -2, 2)},
              {"l", Labels({5, 1}, 22, 4, {{2, -100}})}};
  EXPECT_TRUE(CheckGradients(*runner, SoftmaxCE({}), hard, opt));
  VarMap soft{{"z", RandomTensor<double>({3, 5}, 23, -2, 2)},
              {"l", Probabilities<double>({3, 5}, 24)}};
  EXPECT_TRUE(CheckGradients(*runner, SoftmaxCE({{"soft_label", true}}), soft, opt));
  VarMap axis1{{"z", RandomTensor<double>({2, 3, 2}, 25, -2, 2)},
               {"l", Labels({2, 1, 2}, 26, 3)}};
  EXPECT_TRUE(CheckGradients(*runner, SoftmaxCE({{"axis", int32_t{1}}}), axis1, opt));
}

// ---- conv2d -------------------------------------------------------------------------------

ir::Op Conv(Attrs attrs) {
  return MakeOp("conv2d", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", {"y"}}},
                std::move(attrs));
}

struct ConvCase {
  std::vector<int64_t> x, f;
  Attrs attrs;
};

std::vector<ConvCase> ConvCases() {
  return {
      {{2, 3, 7, 7}, {4, 3, 3, 3}, {}},
      {{2, 3, 8, 7}, {5, 3, 3, 3}, {{"strides", Ints{2, 2}}, {"paddings", Ints{1, 1}}}},
      {{1, 4, 6, 6}, {6, 2, 3, 2},
       {{"groups", int32_t{2}}, {"paddings", Ints{1, 0, 2, 1}}, {"strides", Ints{1, 2}}}},
      {{2, 2, 9, 9}, {3, 2, 3, 3}, {{"dilations", Ints{2, 2}}, {"paddings", Ints{2, 1}}}},
      {{1, 3, 7, 6}, {2, 3, 3, 3},
       {{"padding_algorithm", std::string("SAME")}, {"strides", Ints{2, 2}}}},
      {{1, 3, 7, 6}, {2, 3, 2, 2},
       {{"padding_algorithm", std::string("VALID")}, {"paddings", Ints{3, 3}},
        {"strides", Ints{2, 2}}}},
      {{1, 6, 5, 5}, {6, 1, 3, 3}, {{"groups", int32_t{6}}, {"paddings", Ints{1, 1}}}},
  };
}

TEST(NnConformance, Conv2dMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 30;
  for (const auto& c : ConvCases()) {
    VarMap v32{{"x", RandomTensor<float>(c.x, ++seed)}, {"f", RandomTensor<float>(c.f, ++seed)}};
    EXPECT_TRUE(MatchesNumpy(*runner, Conv(c.attrs), v32, {"Output"}, 1e-4, 1e-5))
        << "float32 case " << seed;
    VarMap v64{{"x", Cast(v32.at("x"), ir::DataType::kFloat64)},
               {"f", Cast(v32.at("f"), ir::DataType::kFloat64)}};
    EXPECT_TRUE(MatchesNumpy(*runner, Conv(c.attrs), v64, {"Output"}, 1e-10, 1e-10))
        << "float64 case " << seed;
  }
}

TEST(NnConformance, Conv2dGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  opt.atol = 1e-7;
  VarMap basic{{"x", RandomTensor<double>({2, 2, 5, 5}, 41)},
               {"f", RandomTensor<double>({3, 2, 3, 3}, 42)}};
  EXPECT_TRUE(CheckGradients(*runner, Conv({}), basic, opt));
  VarMap grouped{{"x", RandomTensor<double>({1, 4, 5, 5}, 43)},
                 {"f", RandomTensor<double>({4, 2, 3, 3}, 44)}};
  EXPECT_TRUE(CheckGradients(
      *runner,
      Conv({{"groups", int32_t{2}}, {"strides", Ints{2, 2}}, {"paddings", Ints{1, 0, 2, 1}}}),
      grouped, opt));
  VarMap dilated{{"x", RandomTensor<double>({1, 2, 6, 6}, 45)},
                 {"f", RandomTensor<double>({2, 2, 2, 2}, 46)}};
  EXPECT_TRUE(CheckGradients(
      *runner, Conv({{"dilations", Ints{2, 2}}, {"paddings", Ints{1, 1}}}), dilated, opt));
}

// The float32 gradient kernels (oneDNN) against the float64 loops the gradient check covers.
TEST(NnConformance, Conv2dFloat32GradMatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 50;
  for (const auto& c : ConvCases()) {
    ir::Op fwd = Conv(c.attrs);
    const ops::OpSchema* schema = ops::BuiltinOps().Find("conv2d");
    ir::Op grad = schema->grad(fwd)[0];
    VarMap v64{{"x", RandomTensor<double>(c.x, ++seed)}, {"f", RandomTensor<double>(c.f, ++seed)}};
    ASSERT_TRUE(runner->Run(fwd, v64).ok());
    v64["y@GRAD"] = RandomTensor<double>(v64.at("y").dims, ++seed);
    VarMap v32;
    for (const char* n : {"x", "f", "y@GRAD"}) v32[n] = Cast(v64.at(n), ir::DataType::kFloat32);
    Status s64 = runner->Run(grad, v64), s32 = runner->Run(grad, v32);
    ASSERT_TRUE(s64.ok()) << s64.ToString();
    ASSERT_TRUE(s32.ok()) << s32.ToString();
    for (const char* n : {"x@GRAD", "f@GRAD"}) {
      EXPECT_TRUE(AllClose(v32.at(n), v64.at(n), 1e-4, 1e-4)) << n << " case " << seed;
    }
  }
}

TEST(NnConformance, Conv2dShapeErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({1, 4, 5, 5}, 1)},
              {"f", RandomTensor<float>({4, 4, 3, 3}, 2)}};
  Status s = runner->Run(Conv({{"groups", int32_t{2}}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("groups=2"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("needs dim 1 = 2"), std::string::npos) << s.ToString();
  s = runner->Run(Conv({{"groups", int32_t{3}}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("not divisible by groups 3"), std::string::npos) << s.ToString();
  VarMap small{{"x", RandomTensor<float>({1, 4, 2, 2}, 1)},
               {"f", RandomTensor<float>({4, 4, 3, 3}, 2)}};
  s = runner->Run(Conv({}), small);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("smaller than"), std::string::npos) << s.ToString();
  s = runner->Run(Conv({{"paddings", Ints{1, 1, 1}}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("paddings needs 2 or 4"), std::string::npos) << s.ToString();
  s = runner->Run(Conv({{"data_format", std::string("NHWC")}}), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("NCHW only"), std::string::npos) << s.ToString();
}

// ---- pool2d -------------------------------------------------------------------------------

ir::Op Pool(Attrs attrs) {
  return MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"y"}}}, std::move(attrs));
}

std::vector<Attrs> PoolCases() {
  const std::string max = "max", avg = "avg";
  return {
      {{"pooling_type", max}, {"ksize", Ints{2, 2}}, {"strides", Ints{2, 2}}},
      {{"pooling_type", max}, {"ksize", Ints{3, 3}}, {"strides", Ints{2, 2}},
       {"paddings", Ints{1, 1}}},
      {{"pooling_type", avg}, {"ksize", Ints{3, 3}}, {"strides", Ints{2, 2}},
       {"paddings", Ints{1, 1}}},
      {{"pooling_type", avg}, {"ksize", Ints{3, 3}}, {"strides", Ints{2, 2}},
       {"paddings", Ints{1, 1}}, {"exclusive", false}},
      {{"pooling_type", avg}, {"ksize", Ints{3, 2}}, {"strides", Ints{1, 2}},
       {"paddings", Ints{1, 0, 0, 1}}},
      {{"pooling_type", avg}, {"global_pooling", true}},
      {{"pooling_type", max}, {"global_pooling", true}},
      {{"pooling_type", max}, {"ksize", Ints{3, 3}}, {"strides", Ints{2, 2}},
       {"ceil_mode", true}},
      {{"pooling_type", avg}, {"ksize", Ints{2, 2}}, {"strides", Ints{2, 2}},
       {"ceil_mode", true}},
      {{"pooling_type", max}, {"ksize", Ints{3, 3}}, {"strides", Ints{2, 2}},
       {"padding_algorithm", std::string("SAME")}},
  };
}

TEST(NnConformance, Pool2dMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 60;
  for (const auto& attrs : PoolCases()) {
    VarMap v32{{"x", RandomTensor<float>({2, 3, 7, 8}, ++seed)}};
    EXPECT_TRUE(MatchesNumpy(*runner, Pool(attrs), v32, {"Out"}, 1e-5, 1e-6))
        << "float32 case " << seed;
    VarMap v64{{"x", Cast(v32.at("x"), ir::DataType::kFloat64)}};
    EXPECT_TRUE(MatchesNumpy(*runner, Pool(attrs), v64, {"Out"}, 1e-10, 1e-10))
        << "float64 case " << seed;
  }
}

TEST(NnConformance, Pool2dGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 70;
  for (const auto& attrs : PoolCases()) {
    VarMap vars{{"x", RandomTensor<double>({1, 2, 7, 6}, ++seed)}};
    EXPECT_TRUE(CheckGradients(*runner, Pool(attrs), vars, {})) << "case " << seed;
  }
}

TEST(NnConformance, Pool2dFloat32GradMatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 80;
  for (const auto& attrs : PoolCases()) {
    ir::Op fwd = Pool(attrs);
    ir::Op grad = ops::BuiltinOps().Find("pool2d")->grad(fwd)[0];
    VarMap v64{{"x", RandomTensor<double>({2, 3, 7, 8}, ++seed)}};
    ASSERT_TRUE(runner->Run(fwd, v64).ok());
    v64["y@GRAD"] = RandomTensor<double>(v64.at("y").dims, ++seed);
    VarMap v32;
    for (const char* n : {"x", "y", "y@GRAD"}) v32[n] = Cast(v64.at(n), ir::DataType::kFloat32);
    Status s64 = runner->Run(grad, v64), s32 = runner->Run(grad, v32);
    ASSERT_TRUE(s64.ok()) << s64.ToString();
    ASSERT_TRUE(s32.ok()) << s32.ToString();
    EXPECT_TRUE(AllClose(v32.at("x@GRAD"), v64.at("x@GRAD"), 1e-5, 1e-6)) << "case " << seed;
  }
}

TEST(NnConformance, Pool2dRejectsBadAttributes) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({1, 1, 4, 4}, 1)}};
  Status s = runner->Run(Pool({{"pooling_type", std::string("min")}, {"ksize", Ints{2, 2}}}),
                         vars);
  EXPECT_NE(s.ToString().find("pooling_type"), std::string::npos) << s.ToString();
  s = runner->Run(Pool({{"ksize", Ints{0, 2}}, {"adaptive", true}}), vars);
  EXPECT_NE(s.ToString().find("adaptive"), std::string::npos) << s.ToString();
  s = runner->Run(Pool({{"ksize", Ints{2}}}), vars);
  EXPECT_NE(s.ToString().find("2 kernel sizes"), std::string::npos) << s.ToString();
}

// ---- batch_norm / layer_norm --------------------------------------------------------------

ir::Op BatchNorm(Attrs attrs, bool in_place) {
  return MakeOp("batch_norm",
                {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}, {"Mean", {"m"}},
                 {"Variance", {"v"}}},
                {{"Y", {"y"}},
                 {"MeanOut", {in_place ? "m" : "m_out"}},
                 {"VarianceOut", {in_place ? "v" : "v_out"}},
                 {"SavedMean", {"saved_m"}},
                 {"SavedVariance", {"saved_v"}}},
                std::move(attrs));
}

template <typename T>
VarMap BatchNormInputs(std::vector<int64_t> x_dims, uint64_t seed) {
  const int64_t c = x_dims[1];
  return {{"x", RandomTensor<T>(x_dims, seed, -2, 3)},
          {"s", RandomTensor<T>({c}, seed + 1, 0.5, 1.5)},
          {"b", RandomTensor<T>({c}, seed + 2)},
          {"m", RandomTensor<T>({c}, seed + 3)},
          {"v", RandomTensor<T>({c}, seed + 4, 0.5, 2)}};
}

TEST(NnConformance, BatchNormMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<std::string> all = {"Y", "MeanOut", "VarianceOut", "SavedMean",
                                        "SavedVariance"};
  for (bool in_place : {false, true}) {
    EXPECT_TRUE(MatchesNumpy(*runner, BatchNorm({}, in_place),
                             BatchNormInputs<float>({4, 3, 5, 6}, 90), all, 1e-4, 1e-5));
    EXPECT_TRUE(MatchesNumpy(*runner, BatchNorm({{"momentum", 0.8f}}, in_place),
                             BatchNormInputs<float>({16, 5}, 91), all, 1e-4, 1e-5));
    EXPECT_TRUE(MatchesNumpy(*runner, BatchNorm({{"is_test", true}}, in_place),
                             BatchNormInputs<float>({2, 3, 4, 4}, 92), all, 1e-5, 1e-6));
    EXPECT_TRUE(MatchesNumpy(*runner, BatchNorm({{"use_global_stats", true}}, in_place),
                             BatchNormInputs<double>({3, 4}, 93), all, 1e-10, 1e-10));
    EXPECT_TRUE(MatchesNumpy(*runner, BatchNorm({{"epsilon", 1e-3f}}, in_place),
                             BatchNormInputs<double>({2, 3, 3, 2}, 94), all, 1e-10, 1e-10));
  }
}

TEST(NnConformance, BatchNormGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  opt.outputs = {"Y"};  // running/saved statistics are not differentiated (as in Paddle)
  opt.atol = 1e-7;
  EXPECT_TRUE(CheckGradients(*runner, BatchNorm({}, true), BatchNormInputs<double>({3, 2, 3, 2}, 95),
                             opt));
  EXPECT_TRUE(CheckGradients(*runner, BatchNorm({}, false), BatchNormInputs<double>({6, 3}, 96),
                             opt));
  EXPECT_TRUE(CheckGradients(*runner, BatchNorm({{"use_global_stats", true}}, false),
                             BatchNormInputs<double>({2, 3, 2, 2}, 97), opt));
}

TEST(NnConformance, BatchNormShapeErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars = BatchNormInputs<float>({2, 3, 4, 4}, 1);
  vars["s"] = RandomTensor<float>({4}, 2);
  Status s = runner->Run(BatchNorm({}, false), vars);
  EXPECT_NE(s.ToString().find("Scale must be [3]"), std::string::npos) << s.ToString();
}

ir::Op LayerNorm(Attrs attrs) {
  return MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}},
                {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}}, std::move(attrs));
}

TEST(NnConformance, LayerNormMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<std::string> all = {"Y", "Mean", "Variance"};
  VarMap a{{"x", RandomTensor<float>({4, 10}, 100, -2, 3)},
           {"s", RandomTensor<float>({10}, 101)},
           {"b", RandomTensor<float>({10}, 102)}};
  EXPECT_TRUE(MatchesNumpy(*runner, LayerNorm({}), a, all, 1e-4, 1e-5));
  VarMap b{{"x", RandomTensor<double>({2, 3, 4, 2}, 103)},
           {"s", RandomTensor<double>({8}, 104)},
           {"b", RandomTensor<double>({8}, 105)}};
  EXPECT_TRUE(MatchesNumpy(*runner, LayerNorm({{"begin_norm_axis", int32_t{2}}}), b, all, 1e-10,
                           1e-10));
  ir::Op plain = MakeOp("layer_norm", {{"X", {"x"}}},
                        {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}});
  VarMap c{{"x", RandomTensor<float>({3, 2, 5}, 106)}};
  EXPECT_TRUE(MatchesNumpy(*runner, plain, c, all, 1e-4, 1e-5));
}

TEST(NnConformance, LayerNormGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  opt.outputs = {"Y"};
  opt.atol = 1e-7;
  VarMap a{{"x", RandomTensor<double>({3, 5}, 110)},
           {"s", RandomTensor<double>({5}, 111)},
           {"b", RandomTensor<double>({5}, 112)}};
  EXPECT_TRUE(CheckGradients(*runner, LayerNorm({}), a, opt));
  VarMap b{{"x", RandomTensor<double>({2, 2, 3}, 113)},
           {"s", RandomTensor<double>({3}, 114)},
           {"b", RandomTensor<double>({3}, 115)}};
  EXPECT_TRUE(CheckGradients(*runner, LayerNorm({{"begin_norm_axis", int32_t{2}}}), b, opt));
}

// The float32 kernels (oneDNN's layer normalization on the CPU) against the float64 ones the
// gradient check covers, with and without Scale and Bias, and with only some gradients asked.
TEST(NnConformance, LayerNormFloat32MatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap a{{"x", RandomTensor<double>({6, 33}, 116, -2, 3)},
           {"s", RandomTensor<double>({33}, 117)},
           {"b", RandomTensor<double>({33}, 118)}};
  ExpectFloatsMatchNumpy(*runner, LayerNorm({}), a, 1e-5, 1e-5);
  ExpectFloat32GradsMatchFloat64(*runner, LayerNorm({}), a, 1e-4, 1e-5, 119);
  ir::Op plain = MakeOp("layer_norm", {{"X", {"x"}}},
                        {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}},
                        {{"begin_norm_axis", int32_t{2}}});
  VarMap b{{"x", RandomTensor<double>({3, 4, 5, 2}, 120)}};
  ExpectFloatsMatchNumpy(*runner, plain, b, 1e-5, 1e-5, "layer_norm");
  ExpectFloat32GradsMatchFloat64(*runner, plain, b, 1e-4, 1e-5, 121);
  // Scale without Bias, and a grad op asked for X@GRAD only.
  ir::Op scaled = MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}},
                         {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}});
  ExpectFloat32GradsMatchFloat64(*runner, scaled, a, 1e-4, 1e-5, 122);
  VarMap v = CastAll(a, ir::DataType::kFloat32);
  ASSERT_TRUE(runner->Run(LayerNorm({}), v).ok());
  v["y@GRAD"] = RandomTensor<float>({6, 33}, 123);
  ir::Op dx_only = MakeOp("layer_norm_grad",
                          {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}, {"Mean", {"mean"}},
                           {"Variance", {"var"}}, {"Y@GRAD", {"y@GRAD"}}},
                          {{"X@GRAD", {"dx"}}});
  Status dx_status = runner->Run(dx_only, v);
  ASSERT_TRUE(dx_status.ok()) << dx_status.ToString();
  ir::Op all = dx_only;
  all.outputs = {{"X@GRAD", {"dx2"}}, {"Scale@GRAD", {"ds"}}, {"Bias@GRAD", {"db"}}};
  ASSERT_TRUE(runner->Run(all, v).ok());
  EXPECT_TRUE(AllClose(v.at("dx"), v.at("dx2"), 0, 0));
}

// ---- dropout ------------------------------------------------------------------------------

ir::Op Dropout(Attrs attrs) {
  return MakeOp("dropout", {{"X", {"x"}}}, {{"Out", {"out"}}, {"Mask", {"mask"}}},
                std::move(attrs));
}

TEST(NnConformance, DropoutMaskAndScaling) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (std::string impl : {"downgrade_in_infer", "upscale_in_train"}) {
    const float p = 0.3f;
    VarMap vars{{"x", RandomTensor<float>({100, 200}, 120, 0.5, 1.5)}};
    ASSERT_TRUE(runner->Run(Dropout({{"dropout_prob", p}, {"dropout_implementation", impl}}),
                            vars, 77)
                    .ok());
    const HostTensor& mask = vars.at("mask");
    ASSERT_EQ(mask.dtype, ir::DataType::kUInt8);
    const auto m = Values<uint8_t>(mask);
    const auto x = Values<float>(vars.at("x"));
    const auto out = Values<float>(vars.at("out"));
    int64_t kept = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      ASSERT_TRUE(m[i] == 0 || m[i] == 1);
      kept += m[i];
      const float want = m[i] == 0 ? 0.0f
                                   : (impl == "upscale_in_train" ? x[i] / (1.0f - p) : x[i]);
      ASSERT_EQ(out[i], want) << impl << " at " << i;
    }
    // 20000 Bernoulli(0.7) draws: the kept fraction is within 5 standard deviations of 0.7.
    const double frac = static_cast<double>(kept) / static_cast<double>(m.size());
    EXPECT_NEAR(frac, 0.7, 5 * std::sqrt(0.7 * 0.3 / 20000.0)) << impl;
    // Neighbouring elements are not correlated (a broken generator often repeats patterns).
    int64_t both = 0;
    for (size_t i = 0; i + 1 < m.size(); ++i) both += m[i] & m[i + 1];
    EXPECT_NEAR(static_cast<double>(both) / static_cast<double>(m.size() - 1), 0.49, 0.02);
  }
}

TEST(NnConformance, DropoutIsDeterministicPerSeed) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = Dropout({});
  VarMap a{{"x", RandomTensor<float>({50, 40}, 121)}}, b = a, c = a;
  ASSERT_TRUE(runner->Run(op, a, 5).ok());
  ASSERT_TRUE(runner->Run(op, b, 5).ok());
  ASSERT_TRUE(runner->Run(op, c, 6).ok());
  EXPECT_EQ(a.at("mask").bytes, b.at("mask").bytes);
  EXPECT_EQ(a.at("out").bytes, b.at("out").bytes);
  EXPECT_NE(a.at("mask").bytes, c.at("mask").bytes);
  // fix_seed: the attribute decides, not the host's seed.
  ir::Op fixed = Dropout({{"fix_seed", true}, {"seed", int32_t{9}}});
  VarMap d{{"x", a.at("x")}}, e = d;
  ASSERT_TRUE(runner->Run(fixed, d, 5).ok());
  ASSERT_TRUE(runner->Run(fixed, e, 6).ok());
  EXPECT_EQ(d.at("mask").bytes, e.at("mask").bytes);
  EXPECT_NE(d.at("mask").bytes, a.at("mask").bytes);
}

TEST(NnConformance, DropoutInference) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (std::string impl : {"downgrade_in_infer", "upscale_in_train"}) {
    VarMap vars{{"x", RandomTensor<double>({4, 5}, 122)}};
    ASSERT_TRUE(runner->Run(Dropout({{"is_test", true}, {"dropout_prob", 0.25f},
                                     {"dropout_implementation", impl}}),
                            vars)
                    .ok());
    const auto x = Values<double>(vars.at("x"));
    const auto out = Values<double>(vars.at("out"));
    const double factor = impl == "upscale_in_train" ? 1.0 : 1.0 - static_cast<double>(0.25f);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_DOUBLE_EQ(out[i], x[i] * factor);
  }
}

TEST(NnConformance, DropoutGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  // The harness's differencing forwards run with OpRunner's default seed; use it for the first
  // forward too so the grad op sees the same mask.
  opt.seed = 1234;
  for (std::string impl : {"downgrade_in_infer", "upscale_in_train"}) {
    VarMap vars{{"x", RandomTensor<double>({6, 7}, 123)}};
    EXPECT_TRUE(CheckGradients(
        *runner, Dropout({{"dropout_prob", 0.4f}, {"dropout_implementation", impl}}), vars, opt))
        << impl;
  }
}

// ---- lookup_table_v2 ----------------------------------------------------------------------

ir::Op Lookup(Attrs attrs) {
  return MakeOp("lookup_table_v2", {{"W", {"w"}}, {"Ids", {"ids"}}}, {{"Out", {"out"}}},
                std::move(attrs));
}

TEST(NnConformance, LookupTableV2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap a{{"w", RandomTensor<float>({10, 4}, 130)}, {"ids", RandomInts({3, 5}, 131, 0, 10)}};
  EXPECT_TRUE(MatchesNumpy(*runner, Lookup({}), a, {"Out"}, 0, 0));
  VarMap b{{"w", RandomTensor<double>({6, 3}, 132)},
           {"ids", Labels({8}, 133, 6, {{0, 2}, {5, 2}})}};
  EXPECT_TRUE(MatchesNumpy(*runner, Lookup({{"padding_idx", int64_t{2}}}), b, {"Out"}, 0, 0));
}

TEST(NnConformance, LookupTableV2Gradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Repeated ids accumulate; the padding row gets no gradient.
  VarMap vars{{"w", RandomTensor<double>({5, 3}, 134)},
              {"ids", MakeTensor<int64_t>({2, 4}, {1, 3, 1, 0, 4, 4, 1, 2})}};
  EXPECT_TRUE(CheckGradients(*runner, Lookup({}), vars, {}));
  EXPECT_TRUE(CheckGradients(*runner, Lookup({{"padding_idx", int64_t{4}}}), vars, {}));
}

TEST(NnConformance, LookupTableV2RejectsBadIds) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"w", RandomTensor<float>({5, 3}, 1)},
              {"ids", MakeTensor<int64_t>({3}, {1, 5, 0})}};
  Status s = runner->Run(Lookup({}), vars);
  EXPECT_NE(s.ToString().find("Ids[1] = 5 is outside the vocabulary [0, 5)"), std::string::npos)
      << s.ToString();
}

// ---- accuracy / top_k_v2 ------------------------------------------------------------------

TEST(NnConformance, AccuracyMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op topk = MakeOp("top_k_v2", {{"X", {"p"}}}, {{"Out", {"v"}}, {"Indices", {"i"}}},
                       {{"k", int32_t{2}}});
  ir::Op acc = MakeOp("accuracy", {{"Out", {"v"}}, {"Indices", {"i"}}, {"Label", {"l"}}},
                      {{"Accuracy", {"a"}}, {"Correct", {"c"}}, {"Total", {"t"}}});
  VarMap vars{{"p", RandomTensor<float>({12, 5}, 140)}, {"l", Labels({12, 1}, 141, 5)}};
  ASSERT_TRUE(runner->Run(topk, vars).ok());
  EXPECT_TRUE(MatchesNumpy(*runner, acc, vars, {"Accuracy", "Correct", "Total"}, 1e-6, 0));
}

ir::Op TopK(Attrs attrs) {
  return MakeOp("top_k_v2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"Indices", {"idx"}}},
                std::move(attrs));
}

TEST(NnConformance, TopKV2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap a{{"x", RandomTensor<float>({4, 9}, 150)}};
  EXPECT_TRUE(MatchesNumpy(*runner, TopK({{"k", int32_t{3}}}), a, {"Out", "Indices"}, 0, 0));
  VarMap b{{"x", RandomTensor<double>({5, 3, 2}, 151)}};
  EXPECT_TRUE(MatchesNumpy(*runner, TopK({{"k", int32_t{2}}, {"axis", int32_t{0}},
                                          {"largest", false}}),
                           b, {"Out", "Indices"}, 0, 0));
  VarMap ties{{"x", MakeTensor<float>({1, 5}, {1, 3, 3, 2, 3})}};
  EXPECT_TRUE(MatchesNumpy(*runner, TopK({{"k", int32_t{3}}}), ties, {"Out", "Indices"}, 0, 0));
  Status s = runner->Run(TopK({{"k", int32_t{10}}}), a);
  EXPECT_NE(s.ToString().find("k = 10"), std::string::npos) << s.ToString();
}

TEST(NnConformance, TopKV2Gradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  opt.outputs = {"Out"};
  VarMap vars{{"x", RandomTensor<double>({3, 6}, 152)}};
  EXPECT_TRUE(CheckGradients(*runner, TopK({{"k", int32_t{2}}}), vars, opt));
  EXPECT_TRUE(CheckGradients(*runner, TopK({{"k", int32_t{2}}, {"axis", int32_t{0}}}), vars, opt));
}

}  // namespace
}  // namespace fleet::conformance
