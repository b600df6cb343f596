// Conformance of conv2d_transpose: forward against NumPy (ref/ref_deconv.py, a scatter written
// independently of the kernels' gather form) in float32 and float64, the gradient rule against
// finite differences in float64, float32 gradients (oneDNN / cuDNN) against float64, and
// shape-function errors.
#include <string>

#include "harness.h"

namespace fleet::conformance {
namespace {

using Attrs = ir::AttrMap;
using Ints = std::vector<int32_t>;

ir::Op Deconv(Attrs attrs) {
  return MakeOp("conv2d_transpose", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", {"y"}}},
                std::move(attrs));
}

struct DeconvCase {
  std::vector<int64_t> x, f;  // Input [N, C_in, H, W], Filter [C_in, C_out/groups, kh, kw]
  Attrs attrs;
};

std::vector<DeconvCase> DeconvCases() {
  const std::string same = "SAME", valid = "VALID";
  return {
      {{2, 3, 4, 4}, {3, 2, 3, 3}, {}},
      {{2, 3, 4, 5}, {3, 4, 3, 3}, {{"strides", Ints{2, 2}}, {"paddings", Ints{1, 1}}}},
      // Asymmetric [top, bottom, left, right] paddings with groups.
      {{1, 4, 3, 4}, {4, 3, 3, 2},
       {{"groups", int32_t{2}}, {"strides", Ints{2, 1}}, {"paddings", Ints{1, 0, 0, 1}}}},
      {{2, 2, 4, 4}, {2, 3, 3, 3}, {{"dilations", Ints{2, 2}}, {"paddings", Ints{1, 1}}}},
      {{1, 2, 3, 3}, {2, 2, 3, 3},
       {{"strides", Ints{2, 2}}, {"paddings", Ints{1, 1}}, {"output_padding", Ints{1, 1}}}},
      {{1, 2, 3, 4}, {2, 3, 3, 3}, {{"strides", Ints{2, 2}}, {"output_size", Ints{8, 9}}}},
      {{1, 3, 5, 4}, {3, 2, 3, 3}, {{"strides", Ints{2, 2}}, {"padding_algorithm", same}}},
      {{1, 2, 3, 3}, {2, 2, 2, 2},
       {{"strides", Ints{2, 2}}, {"paddings", Ints{2, 2}}, {"padding_algorithm", valid}}},
      // output_padding at the stride, allowed because the dilation is larger.
      {{1, 2, 3, 3}, {2, 2, 3, 3}, {{"dilations", Ints{2, 2}}, {"output_padding", Ints{1, 0}}}},
      {{2, 4, 3, 3}, {4, 1, 3, 3}, {{"groups", int32_t{4}}, {"strides", Ints{2, 2}}}},
  };
}

TEST(DeconvConformance, Conv2dTransposeMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 700;
  for (const auto& c : DeconvCases()) {
    SCOPED_TRACE("case seed " + std::to_string(seed + 1));
    VarMap v64{{"x", RandomTensor<double>(c.x, ++seed)}, {"f", RandomTensor<double>(c.f, ++seed)}};
    ExpectFloatsMatchNumpy(*runner, Deconv(c.attrs), v64, 1e-4, 1e-5);
  }
}

TEST(DeconvConformance, Conv2dTransposeOutputShapes) {
  FLEET_CONFORMANCE_RUNNER(runner);
  struct Want {
    DeconvCase c;
    std::vector<int64_t> y;
  };
  const std::vector<Want> wants = {
      {{{2, 3, 4, 5}, {3, 4, 3, 3}, {{"strides", Ints{2, 2}}, {"paddings", Ints{1, 1}}}},
       {2, 4, 7, 9}},
      {{{1, 2, 3, 3}, {2, 2, 3, 3},
        {{"strides", Ints{2, 2}}, {"paddings", Ints{1, 1}}, {"output_padding", Ints{1, 0}}}},
       {1, 2, 6, 5}},
      {{{1, 2, 3, 4}, {2, 3, 3, 3}, {{"strides", Ints{2, 2}}, {"output_size", Ints{8, 9}}}},
       {1, 3, 8, 9}},
      {{{1, 3, 5, 4}, {3, 2, 3, 3},
        {{"strides", Ints{2, 2}}, {"padding_algorithm", std::string("SAME")}}},
       {1, 2, 9, 8}},
      {{{1, 4, 3, 3}, {4, 1, 3, 3}, {{"groups", int32_t{4}}}}, {1, 4, 5, 5}},
  };
  for (const auto& w : wants) {
    VarMap v{{"x", RandomTensor<float>(w.c.x, 1)}, {"f", RandomTensor<float>(w.c.f, 2)}};
    Status s = runner->Run(Deconv(w.c.attrs), v);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(v.at("y").dims, w.y);
  }
}

TEST(DeconvConformance, Conv2dTransposeGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  opt.atol = 1e-7;
  uint64_t seed = 740;
  for (const auto& c : DeconvCases()) {
    SCOPED_TRACE("case seed " + std::to_string(seed + 1));
    VarMap v{{"x", RandomTensor<double>(c.x, ++seed)}, {"f", RandomTensor<double>(c.f, ++seed)}};
    EXPECT_TRUE(CheckGradients(*runner, Deconv(c.attrs), v, opt));
  }
}

// The float32 gradient kernels against the float64 ones the gradient check covers.
TEST(DeconvConformance, Conv2dTransposeFloat32GradMatchesFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 780;
  for (const auto& c : DeconvCases()) {
    SCOPED_TRACE("case seed " + std::to_string(seed + 1));
    VarMap v{{"x", RandomTensor<double>(c.x, ++seed)}, {"f", RandomTensor<double>(c.f, ++seed)}};
    ExpectFloat32GradsMatchFloat64(*runner, Deconv(c.attrs), v, 1e-4, 1e-4, ++seed);
  }
}

void ExpectError(OpRunner& runner, std::vector<int64_t> x, std::vector<int64_t> f, Attrs attrs,
                 const std::string& want) {
  VarMap v{{"x", RandomTensor<float>(std::move(x), 1)}, {"f", RandomTensor<float>(std::move(f), 2)}};
  Status s = runner.Run(Deconv(std::move(attrs)), v);
  ASSERT_FALSE(s.ok()) << "expected an error containing: " << want;
  EXPECT_NE(s.ToString().find("conv2d_transpose"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find(want), std::string::npos) << s.ToString();
}

TEST(DeconvConformance, Conv2dTransposeShapeErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ExpectError(*runner, {1, 4, 3, 3}, {3, 2, 3, 3}, {}, "must equal the Input channels");
  ExpectError(*runner, {1, 4, 3, 3}, {4, 2, 3, 3}, {{"groups", int32_t{3}}},
              "not divisible by groups 3");
  ExpectError(*runner, {1, 2, 3, 3}, {2, 2, 3, 3},
              {{"strides", Ints{2, 2}}, {"output_size", Ints{20, 7}}},
              "output_size height 20 must be in [7, 9)");
  ExpectError(*runner, {1, 2, 3, 3}, {2, 2, 3, 3}, {{"output_padding", Ints{0, 1}}},
              "output_padding width 1 must be smaller than max(stride, dilation) = 1");
  ExpectError(*runner, {1, 2, 3, 3}, {2, 2, 3, 3}, {{"output_size", Ints{5}}},
              "output_size needs 2 values");
  ExpectError(*runner, {1, 2, 3, 3}, {2, 2, 3, 3}, {{"paddings", Ints{3, 3}}},
              "Output height would be -1");
  ExpectError(*runner, {2, 3, 3}, {2, 2, 3, 3}, {}, "Input must be 4-D NCHW, got [2, 3, 3]");
  ExpectError(*runner, {1, 2, 3, 3}, {2, 2, 3}, {}, "Filter must be 4-D");
  ExpectError(*runner, {1, 2, 3, 3}, {2, 2, 3, 3}, {{"data_format", std::string("NHWC")}},
              "NCHW only");
  ExpectError(*runner, {1, 2, 3, 3}, {2, 2, 3, 3}, {{"paddings", Ints{1, 1, 1}}},
              "paddings needs 2 or 4");
}

}  // namespace
}  // namespace fleet::conformance
