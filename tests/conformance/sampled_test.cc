// Conformance of the large-vocabulary losses hierarchical_sigmoid and nce: forward against NumPy
// (ref/ref_sampled.py, which also reproduces nce's seeded negative draws), gradients against
// finite differences in float64, float32 against float64, and the refusals (custom tree,
// custom sampler, labels out of range, bad shapes) naming the op and slot.
#include <set>

#include "harness.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"

namespace fleet::conformance {
namespace {

using Attrs = ir::AttrMap;
using Ints = std::vector<int32_t>;

HostTensor Labels(std::vector<int64_t> dims, std::vector<int64_t> values) {
  return MakeTensor<int64_t>(std::move(dims), values);
}

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

// ---- hierarchical_sigmoid -------------------------------------------------------------------

ir::Op Hsigmoid(int32_t num_classes, bool bias) {
  std::map<std::string, std::vector<std::string>> in{{"X", {"x"}}, {"W", {"w"}}, {"Label", {"l"}}};
  if (bias) in["Bias"] = {"b"};
  return MakeOp("hierarchical_sigmoid", in, {{"Out", {"out"}}, {"PreOut", {"pre"}}},
                {{"num_classes", num_classes}});
}

// Inputs for num_classes classes over a batch of the given labels.
VarMap HsVars(int64_t num_classes, const std::vector<int64_t>& labels, int64_t dim,
              uint64_t seed, double scale = 1.0) {
  const int64_t n = static_cast<int64_t>(labels.size());
  return {{"x", RandomTensor<double>({n, dim}, seed, -scale, scale)},
          {"w", RandomTensor<double>({num_classes - 1, dim}, seed + 1, -scale, scale)},
          {"b", RandomTensor<double>({num_classes - 1, 1}, seed + 2, -scale, scale)},
          {"l", Labels({n, 1}, labels)}};
}

TEST(SampledConformance, HsigmoidMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // 6 classes: leaves 6..11, paths of length 2 (labels 0, 1) and 3, PreOut 3 wide, so short
  // paths leave a zero column (log 2 in Out, as Paddle).
  VarMap v6 = HsVars(6, {0, 1, 2, 3, 4, 5, 3}, 4, 1);
  ExpectFloatsMatchNumpy(*runner, Hsigmoid(6, true), v6, 1e-5, 1e-5);
  ExpectFloatsMatchNumpy(*runner, Hsigmoid(6, false), v6, 1e-5, 1e-5);
  // Two classes: one inner node, one column. A power of two: every path the same length.
  ExpectFloatsMatchNumpy(*runner, Hsigmoid(2, true), HsVars(2, {1, 0, 1}, 3, 4), 1e-5, 1e-5);
  ExpectFloatsMatchNumpy(*runner, Hsigmoid(8, true), HsVars(8, {7, 0, 5, 2}, 5, 7), 1e-5, 1e-5);
  // Large logits are clipped to [-40, 40] before the softrelu.
  ExpectFloatsMatchNumpy(*runner, Hsigmoid(5, true), HsVars(5, {4, 0, 2}, 6, 10, 6.0), 1e-5,
                         1e-4);
}

TEST(SampledConformance, HsigmoidGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions o;
  o.outputs = {"Out"};
  // Repeated labels and shared inner nodes accumulate into one W / Bias row.
  EXPECT_TRUE(CheckGradients(*runner, Hsigmoid(6, true), HsVars(6, {0, 5, 2, 3, 5, 1}, 3, 11), o));
  EXPECT_TRUE(CheckGradients(*runner, Hsigmoid(7, false), HsVars(7, {6, 0, 3}, 4, 14), o));
  ExpectFloat32GradsMatchFloat64(*runner, Hsigmoid(6, true), HsVars(6, {0, 5, 2, 3, 5, 1}, 3, 17));
}

TEST(SampledConformance, HsigmoidWOutIsW) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = Hsigmoid(6, true);
  op.outputs["W_Out"] = {"wout"};
  VarMap v = HsVars(6, {0, 5, 2}, 3, 19);
  ASSERT_TRUE(runner->Run(op, v).ok());
  EXPECT_TRUE(AllClose(v.at("wout"), v.at("w"), 0, 0));
}

TEST(SampledConformance, HsigmoidRefusals) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap bad = HsVars(6, {0, 1, 6}, 4, 21);
  EXPECT_TRUE(FailsWith(*runner, Hsigmoid(6, true), bad,
                        {"hierarchical_sigmoid", "Label[2] = 6", "[0, 6)"}));
  bad.at("l") = Labels({3, 1}, {0, -1, 2});
  EXPECT_TRUE(FailsWith(*runner, Hsigmoid(6, false), bad, {"Label[1] = -1"}));
  // A custom tree is refused.
  ir::Op custom = MakeOp("hierarchical_sigmoid",
                         {{"X", {"x"}}, {"W", {"w"}}, {"Label", {"l"}}, {"PathTable", {"pt"}},
                          {"PathCode", {"pc"}}},
                         {{"Out", {"out"}}, {"PreOut", {"pre"}}}, {{"num_classes", int32_t{6}}});
  VarMap cv = HsVars(6, {0, 1, 2}, 4, 23);
  cv["pt"] = Labels({3, 3}, {0, 1, 2, 0, 1, 2, 0, 1, 2});
  cv["pc"] = Labels({3, 3}, {0, 1, 0, 0, 1, 0, 0, 1, 0});
  EXPECT_TRUE(FailsWith(*runner, custom, cv, {"hierarchical_sigmoid", "custom tree"}));
  // W must have num_classes - 1 rows.
  EXPECT_TRUE(FailsWith(*runner, Hsigmoid(7, true), HsVars(6, {0, 1}, 4, 25),
                        {"hierarchical_sigmoid", "W must be [num_classes - 1, D] = [6, 4]"}));
}

// ---- nce --------------------------------------------------------------------------------------

ir::Op Nce(Attrs attrs, bool bias, bool weight) {
  std::map<std::string, std::vector<std::string>> in{
      {"Input", {"x"}}, {"Label", {"l"}}, {"Weight", {"w"}}};
  if (bias) in["Bias"] = {"b"};
  if (weight) in["SampleWeight"] = {"sw"};
  return MakeOp("nce", in,
                {{"Cost", {"cost"}}, {"SampleLogits", {"logits"}}, {"SampleLabels", {"labels"}}},
                std::move(attrs));
}

VarMap NceVars(int64_t n, int64_t num_true, int64_t total, int64_t dim, uint64_t seed) {
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n * num_true; ++i) labels.push_back((i * 5 + 3) % total);
  return {{"x", RandomTensor<double>({n, dim}, seed)},
          {"w", RandomTensor<double>({total, dim}, seed + 1)},
          {"b", RandomTensor<double>({total, 1}, seed + 2)},
          {"sw", RandomTensor<double>({n, 1}, seed + 3, 0.5, 2.0)},
          {"l", Labels({n, num_true}, labels)}};
}

Attrs Custom(int32_t sampler) {
  return {{"num_total_classes", int32_t{7}},
          {"num_neg_samples", int32_t{3}},
          {"sampler", sampler},
          {"custom_neg_classes", Ints{0, 3, 5}}};
}

TEST(SampledConformance, NceCustomNegativesMatchNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (int32_t sampler : {0, 1}) {
    SCOPED_TRACE(sampler);
    VarMap v = NceVars(4, 2, 7, 3, 31);
    ExpectFloatsMatchNumpy(*runner, Nce(Custom(sampler), true, true), v, 1e-5, 1e-5);
    ExpectFloatsMatchNumpy(*runner, Nce(Custom(sampler), false, false), NceVars(3, 1, 7, 5, 35),
                           1e-5, 1e-5);
  }
}

TEST(SampledConformance, NceSeededDrawsMatchNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (int32_t sampler : {0, 1}) {
    SCOPED_TRACE(sampler);
    Attrs a{{"num_total_classes", int32_t{20}},
            {"num_neg_samples", int32_t{6}},
            {"sampler", sampler},
            {"seed", int32_t{5}}};
    VarMap v = NceVars(5, 1, 20, 4, 41);
    // The sampled classes themselves are the CPU's stream: compared only where promised.
    if (runner->bitwise_random()) {
      ExpectFloatsMatchNumpy(*runner, Nce(a, true, false), v, 1e-5, 1e-5);
    }
    // The draws span the range (not one class over and over) and repeat for the same seed.
    VarMap r1 = v, r2 = v;
    ASSERT_TRUE(runner->Run(Nce(a, true, false), r1).ok());
    ASSERT_TRUE(runner->Run(Nce(a, true, false), r2).ok());
    EXPECT_TRUE(AllClose(r1.at("labels"), r2.at("labels"), 0, 0));
    std::set<int64_t> seen;
    const HostTensor& labels = r1.at("labels");
    for (int64_t i = 0; i < labels.numel(); ++i) seen.insert(labels.data<int64_t>()[i]);
    EXPECT_GE(seen.size(), 8u);
  }
}

TEST(SampledConformance, NceGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions o;
  o.outputs = {"Cost"};
  // Custom negatives that repeat a true label accumulate into one Weight / Bias row.
  EXPECT_TRUE(CheckGradients(*runner, Nce(Custom(0), true, true), NceVars(4, 2, 7, 3, 51), o));
  EXPECT_TRUE(CheckGradients(*runner, Nce(Custom(1), false, false), NceVars(3, 1, 7, 2, 55), o));
  // Seeded draws are the same on every finite-difference rerun.
  Attrs seeded{{"num_total_classes", int32_t{9}},
               {"num_neg_samples", int32_t{4}},
               {"sampler", int32_t{1}},
               {"seed", int32_t{3}}};
  EXPECT_TRUE(CheckGradients(*runner, Nce(seeded, true, false), NceVars(3, 1, 9, 3, 57), o));
  ExpectFloat32GradsMatchFloat64(*runner, Nce(Custom(0), true, true), NceVars(4, 2, 7, 3, 59));
  ExpectFloat32GradsMatchFloat64(*runner, Nce(seeded, true, false), NceVars(3, 1, 9, 3, 61));
}

TEST(SampledConformance, NceRefusals) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v = NceVars(4, 1, 7, 3, 71);
  v.at("l") = Labels({4, 1}, {1, 2, 3, 7});
  EXPECT_TRUE(FailsWith(*runner, Nce(Custom(0), true, false), v, {"nce", "Label[3] = 7", "[0, 7)"}));
  Attrs a = Custom(2);
  EXPECT_TRUE(FailsWith(*runner, Nce(a, true, false), NceVars(4, 1, 7, 3, 73),
                        {"nce", "sampler 2 (custom distribution) is not supported"}));
  a = Custom(0);
  a["custom_neg_classes"] = Ints{0, 9, 1};
  EXPECT_TRUE(FailsWith(*runner, Nce(a, true, false), NceVars(4, 1, 7, 3, 75),
                        {"nce", "custom_neg_classes holds 9, outside [0, 7)"}));
  a["custom_neg_classes"] = Ints{0, 1};
  EXPECT_TRUE(FailsWith(*runner, Nce(a, true, false), NceVars(4, 1, 7, 3, 77),
                        {"nce", "custom_neg_classes has 2 classes but num_neg_samples is 3"}));
  VarMap wide = NceVars(4, 1, 7, 3, 79);
  wide.at("b") = RandomTensor<double>({6, 1}, 80);
  EXPECT_TRUE(FailsWith(*runner, Nce(Custom(0), true, false), wide,
                        {"nce", "Bias must be [num_total_classes, 1] = [7, 1]"}));
}

// ---- shape functions ---------------------------------------------------------------------------

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
ops::TensorInfo I64(std::vector<int64_t> dims) { return {ir::DataType::kInt64, dims}; }

TEST(SampledShapes, UnknownBatchPropagates) {
  using Dims = std::vector<int64_t>;
  auto out = Infer(Hsigmoid(6, true), {{"X", {F32({-1, 4})}},
                                       {"W", {F32({5, 4})}},
                                       {"Label", {I64({-1, 1})}},
                                       {"Bias", {F32({5, 1})}}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("Out")[0].dims, (Dims{-1, 1}));
  EXPECT_EQ(out->at("PreOut")[0].dims, (Dims{-1, 3}));
  out = Infer(Nce(Custom(0), false, false),
              {{"Input", {F32({-1, 3})}}, {"Label", {I64({-1, 2})}}, {"Weight", {F32({7, 3})}}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("Cost")[0].dims, (Dims{-1, 1}));
  EXPECT_EQ(out->at("SampleLogits")[0].dims, (Dims{-1, 5}));
  EXPECT_EQ(out->at("SampleLabels")[0].dtype, ir::DataType::kInt64);
}

TEST(SampledShapes, ErrorsNameTheOpAndSlot) {
  auto r = Infer(Hsigmoid(6, false),
                 {{"X", {F32({-1, 4})}}, {"W", {F32({5, 4})}}, {"Label", {F32({-1, 1})}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hierarchical_sigmoid"), std::string::npos);
  EXPECT_NE(r.status().message().find("Label must be int64"), std::string::npos)
      << r.status().ToString();
  r = Infer(Hsigmoid(6, false),
            {{"X", {F32({2, 4, 1})}}, {"W", {F32({5, 4})}}, {"Label", {I64({2, 1})}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("X must be 2-D [N, D], got [2, 4, 1]"), std::string::npos)
      << r.status().ToString();
  r = Infer(Nce(Custom(0), false, false),
            {{"Input", {F32({2, 3})}}, {"Label", {I64({3, 1})}}, {"Weight", {F32({7, 3})}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nce"), std::string::npos);
  EXPECT_NE(r.status().message().find("Label must be [N, num_true]"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace fleet::conformance
