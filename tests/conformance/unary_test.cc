// Conformance of the unary math ops, the activations of math_unary_ops.cc, prelu and cumsum:
// forward against NumPy (ref/ref_unary.py) in float64 and float32, every gradient against
// central finite differences in float64 with inputs kept away from each op's kinks, float32
// grads (the oneDNN paths) against float64 ones, Paddle's edge conventions (round's ties,
// hard_swish's gradient above its threshold, clip's at the bounds), and the shape functions.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"

namespace fleet::conformance {
namespace {

ir::Op Unary(std::string type, ir::AttrMap attrs = {}) {
  return MakeOp(std::move(type), {{"X", {"x"}}}, {{"Out", {"out"}}}, std::move(attrs));
}

ir::Op Prelu(ir::AttrMap attrs) {
  return MakeOp("prelu", {{"X", {"x"}}, {"Alpha", {"alpha"}}}, {{"Out", {"out"}}},
                std::move(attrs));
}

// Uniform values in [lo, hi), none within `margin` of a point in `kinks` (where the op or its
// derivative jumps, so a central difference across it would be meaningless).
HostTensor AwayFrom(std::vector<int64_t> dims, uint64_t seed, double lo, double hi,
                    const std::vector<double>& kinks, double margin = 0.02) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    do {
      x = dist(gen);
    } while (std::any_of(kinks.begin(), kinks.end(),
                         [&](double k) { return std::abs(x - k) < margin; }));
  }
  return MakeTensor<double>(std::move(dims), v);
}

// The shared checks with this family's float32 tolerances (its formulas go through more
// transcendental calls than the basic ops').
void ExpectUnaryMatchesNumpy(OpRunner& runner, const ir::Op& op, const VarMap& vars64,
                             double rtol32 = 2e-5, double atol32 = 2e-5) {
  ExpectFloatsMatchNumpy(runner, op, vars64, rtol32, atol32);
}

void ExpectUnaryGradsAgree(OpRunner& runner, const ir::Op& fwd, const VarMap& vars64,
                           double rtol = 1e-4, double atol = 2e-5) {
  ExpectFloat32GradsMatchFloat64(runner, fwd, vars64, rtol, atol, /*seed=*/700);
}

// ---- element-wise ops -----------------------------------------------------------------------

struct UnaryCase {
  const char* type;
  ir::AttrMap attrs;
  double lo, hi;
  std::vector<double> kinks;
};

std::vector<double> Integers(int from, int to, double shift = 0.0) {
  std::vector<double> v;
  for (int i = from; i <= to; ++i) v.push_back(i + shift);
  return v;
}

const std::vector<UnaryCase>& UnaryCases() {
  static const std::vector<UnaryCase> cases = {
      {"rsqrt", {}, 0.2, 3, {}},
      {"abs", {}, -2, 2, {0}},
      {"sin", {}, -3, 3, {}},
      {"cos", {}, -3, 3, {}},
      {"floor", {}, -3, 3, Integers(-3, 3)},
      {"ceil", {}, -3, 3, Integers(-3, 3)},
      {"round", {}, -3, 3, Integers(-3, 2, 0.5)},
      {"reciprocal", {}, 0.3, 3, {}},
      {"reciprocal", {}, -3, -0.3, {}},
      {"log1p", {}, -0.5, 3, {}},
      {"erf", {}, -2, 2, {}},
      {"pow", {}, -2, 2, {}},
      {"pow", {{"factor", 2.5f}}, 0.2, 3, {}},
      {"pow", {{"factor", 3.0f}}, -2, 2, {}},
      {"pow", {{"factor", -1.5f}}, 0.3, 3, {}},
      {"clip", {{"min", -0.5f}, {"max", 0.8f}}, -2, 2, {-0.5, 0.8}},
      {"relu6", {}, -2, 8, {0, 6}},
      {"relu6", {{"threshold", 2.0f}}, -1, 3, {0, 2}},
      {"swish", {}, -4, 4, {}},
      {"swish", {{"beta", 2.5f}}, -4, 4, {}},
      {"silu", {}, -4, 4, {}},
      {"elu", {}, -3, 3, {0}},
      {"elu", {{"alpha", 0.5f}}, -3, 3, {0}},
      {"elu", {{"alpha", -0.3f}}, -3, 3, {0}},
      {"selu", {}, -3, 3, {0}},
      {"selu", {{"scale", 1.25f}, {"alpha", 0.75f}}, -3, 3, {0}},
      {"hard_swish", {}, -5, 5, {-3, 3}},
      // Below the threshold only: above it Paddle's gradient is 1, not threshold / scale
      // (HardSwishGradKeepsPaddlesSlopeAboveThreshold).
      {"hard_swish", {{"threshold", 4.0f}, {"scale", 5.0f}, {"offset", 2.0f}}, -3, 1.9, {-2}},
      {"hard_sigmoid", {}, -4, 4, {-2.5, 2.5}},
      {"hard_sigmoid", {{"slope", 0.5f}, {"offset", 0.25f}}, -3, 3, {-0.5, 1.5}},
      {"softplus", {}, -5, 25, {20}},
      {"softplus", {{"beta", 2.0f}, {"threshold", 5.0f}}, -3, 5, {2.5}},
      {"softsign", {}, -3, 3, {}},
      {"mish", {}, -5, 25, {20}},
      // Below the threshold only: above it Paddle's gradient takes softplus' slope as
      // 1 - exp(-x) rather than 1 (negligible at the default threshold of 20).
      {"mish", {{"threshold", 3.0f}}, -4, 2.98, {}},
      {"logsigmoid", {}, -5, 5, {}},
  };
  return cases;
}

std::string CaseName(const UnaryCase& c) {
  std::string s = c.type;
  for (const auto& [name, value] : c.attrs) s += " " + name;
  return s + " [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + ")";
}

TEST(UnaryConformance, MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1000;
  std::vector<UnaryCase> cases = UnaryCases();
  // The ranges the gradient cases leave out.
  cases.push_back({"hard_swish", {{"threshold", 4.0f}, {"scale", 5.0f}, {"offset", 2.0f}}, -5, 6,
                   {}});
  cases.push_back({"mish", {{"threshold", 3.0f}}, -4, 6, {}});
  for (const auto& c : cases) {
    SCOPED_TRACE(CaseName(c));
    ExpectUnaryMatchesNumpy(*runner, Unary(c.type, c.attrs),
                       {{"x", AwayFrom({6, 37}, ++seed, c.lo, c.hi, c.kinks)}});
  }
}

TEST(UnaryConformance, Gradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1100;
  for (const auto& c : UnaryCases()) {
    SCOPED_TRACE(CaseName(c));
    ir::Op op = Unary(c.type, c.attrs);
    EXPECT_TRUE(CheckGradients(*runner, op, {{"x", AwayFrom({3, 5}, ++seed, c.lo, c.hi, c.kinks)}},
                               {}));
    ExpectUnaryGradsAgree(*runner, op,
                                   {{"x", AwayFrom({7, 19}, ++seed, c.lo, c.hi, c.kinks)}});
  }
}

TEST(UnaryConformance, RoundsHalvesAwayFromZero) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<double> in = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.0, -3.7};
  const std::vector<double> want = {-3, -2, -1, 1, 2, 3, 0, -1, 3, -4};
  HostTensor x = MakeTensor<double>({2, 5}, in);
  ExpectUnaryMatchesNumpy(*runner, Unary("round"), {{"x", x}}, 0, 0);
  VarMap vars{{"x", Cast(x, ir::DataType::kFloat32)}};
  ASSERT_TRUE(runner->Run(Unary("round"), vars).ok());
  EXPECT_TRUE(AllClose(vars.at("out"), Cast(MakeTensor<double>({2, 5}, want),
                                            ir::DataType::kFloat32), 0, 0));
}

TEST(UnaryConformance, ZeroGradientOpsReadOnlyOutGrad) {
  for (const char* type : {"floor", "ceil", "round"}) {
    SCOPED_TRACE(type);
    const ops::OpSchema* schema = ops::BuiltinOps().Find(type);
    ASSERT_NE(schema, nullptr);
    const std::vector<ir::Op> grads = schema->grad(Unary(type));
    ASSERT_EQ(grads.size(), 1u);
    EXPECT_EQ(grads[0].InputVars(), std::vector<std::string>{"out@GRAD"});
  }
}

TEST(UnaryConformance, ClipAndRelu6GradientsAreZeroAtTheBounds) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Paddle passes the gradient only strictly inside (min, max) / (0, threshold).
  ir::Op clip = MakeOp("clip_grad", {{"X", {"x"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}},
                       {{"min", -0.5f}, {"max", 0.75f}});
  ir::Op relu6 = MakeOp("relu6_grad", {{"Out", {"x"}}, {"Out@GRAD", {"g"}}},
                        {{"X@GRAD", {"dx"}}}, {{"threshold", 6.0f}});
  for (ir::DataType dtype : {ir::DataType::kFloat64, ir::DataType::kFloat32}) {
    SCOPED_TRACE(std::string(ir::DataTypeName(dtype)));
    VarMap vars{{"x", Cast(MakeTensor<double>({5}, {-0.5, 0.75, 0.0, -1.0, 1.0}), dtype)},
                {"g", Cast(MakeTensor<double>({5}, {1, 1, 1, 1, 1}), dtype)}};
    ASSERT_TRUE(runner->Run(clip, vars).ok());
    EXPECT_TRUE(AllClose(vars.at("dx"), Cast(MakeTensor<double>({5}, {0, 0, 1, 0, 0}), dtype),
                         0, 0));
    vars["x"] = Cast(MakeTensor<double>({5}, {0.0, 6.0, 3.0, 5.999, 0.001}), dtype);
    ASSERT_TRUE(runner->Run(relu6, vars).ok());
    EXPECT_TRUE(AllClose(vars.at("dx"), Cast(MakeTensor<double>({5}, {0, 0, 1, 1, 1}), dtype),
                         0, 0));
  }
}

TEST(UnaryConformance, HardSwishGradKeepsPaddlesSlopeAboveThreshold) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op g = MakeOp("hard_swish_grad", {{"X", {"x"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}},
                    {{"threshold", 4.0f}, {"scale", 5.0f}, {"offset", 2.0f}});
  VarMap vars{{"x", AwayFrom({4, 9}, 1, -4, 6, {-2, 2})}, {"g", RandomTensor<double>({4, 9}, 2)}};
  ExpectUnaryMatchesNumpy(*runner, g, vars);
}

TEST(UnaryConformance, AbsOfIntegers) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (ir::DataType dtype : {ir::DataType::kInt32, ir::DataType::kInt64}) {
    SCOPED_TRACE(std::string(ir::DataTypeName(dtype)));
    VarMap vars{{"x", RandomInts({3, 7}, 5, -50, 50)}};
    if (dtype == ir::DataType::kInt32) {
      std::vector<int32_t> v;
      for (int64_t e : Values<int64_t>(vars.at("x"))) v.push_back(static_cast<int32_t>(e));
      vars["x"] = MakeTensor<int32_t>({3, 7}, v);
    }
    ASSERT_EQ(vars.at("x").dtype, dtype);
    auto expected = NumpyReference("abs", Unary("abs"), vars);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    ASSERT_TRUE(runner->Run(Unary("abs"), vars).ok());
    EXPECT_TRUE(AllClose(vars.at("out"), expected->at("Out")[0], 0, 0));
  }
}

TEST(UnaryConformance, MissingDtypeIsAPrepareErrorNamingOpAndDtype) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomInts({4}, 1, 0, 5)}};
  Status s = runner->Run(Unary("sin"), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sin"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("int64"), std::string::npos) << s.ToString();
}

// ---- prelu ----------------------------------------------------------------------------------

struct PreluCase {
  std::string mode, format;
  std::vector<int64_t> x, alpha;
};

const std::vector<PreluCase>& PreluCases() {
  static const std::vector<PreluCase> cases = {
      {"all", "NCHW", {2, 3, 4}, {1}},
      {"channel", "NCHW", {2, 3, 2, 4}, {3}},
      {"channel", "NCHW", {2, 3, 2, 2}, {1, 3, 1, 1}},
      {"channel", "NHWC", {2, 2, 4, 3}, {3}},
      {"channel", "NCHW", {5, 3}, {3}},
      {"element", "NCHW", {2, 3, 4}, {3, 4}},
      {"element", "NCHW", {3, 2, 2}, {1, 2, 2}},
  };
  return cases;
}

TEST(PreluConformance, MatchesNumpyAndGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1300;
  for (const auto& c : PreluCases()) {
    SCOPED_TRACE(c.mode + " " + c.format + " X " + ir::ShapeText(c.x));
    ir::Op op = Prelu({{"mode", c.mode}, {"data_format", c.format}});
    VarMap vars{{"x", AwayFrom(c.x, ++seed, -2, 2, {0})},
                {"alpha", RandomTensor<double>(c.alpha, ++seed, -0.5, 0.8)}};
    ExpectUnaryMatchesNumpy(*runner, op, vars);
    EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
    ExpectUnaryGradsAgree(*runner, op, vars);
  }
}

// ---- cumsum ---------------------------------------------------------------------------------

TEST(CumsumConformance, MatchesNumpyAndGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1400;
  for (int32_t axis : {-1, 0, 1, 2, -3}) {
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + (exclusive ? " exclusive" : "") +
                     (reverse ? " reverse" : ""));
        ir::Op op = Unary("cumsum",
                          {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
        VarMap vars{{"x", RandomTensor<double>({3, 4, 5}, ++seed)}};
        ExpectUnaryMatchesNumpy(*runner, op, vars);
        EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
        ExpectUnaryGradsAgree(*runner, op, vars);
      }
    }
  }
}

// Lines long enough for a device to scan them another way (the CUDA plugin scans lines of 512
// or more in a block), along the last axis and along a strided one, both directions.
TEST(CumsumConformance, LongLinesMatchNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1500;
  for (const auto& [dims, axis] : std::vector<std::pair<std::vector<int64_t>, int32_t>>{
           {{3, 1000}, 1}, {{600, 2}, 0}, {{2, 5000}, -1}}) {
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + " of " + ir::ShapeText(dims) +
                     (exclusive ? " exclusive" : "") + (reverse ? " reverse" : ""));
        ir::Op op = Unary("cumsum",
                          {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
        ExpectUnaryMatchesNumpy(*runner, op, {{"x", RandomTensor<double>(dims, ++seed)}});
        VarMap ints{{"x", RandomInts(dims, ++seed, -100, 100)}};
        auto expected = NumpyReference("cumsum", op, ints);
        ASSERT_TRUE(expected.ok()) << expected.status().ToString();
        ASSERT_TRUE(runner->Run(op, ints).ok());
        EXPECT_TRUE(AllClose(ints.at("out"), expected->at("Out")[0], 0, 0));
      }
    }
  }
}

TEST(CumsumConformance, FlattenGivesOneDimAndAGradientShapedLikeX) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (bool reverse : {false, true}) {
    ir::Op op = Unary("cumsum", {{"flatten", true}, {"reverse", reverse}, {"axis", int32_t{1}}});
    VarMap vars{{"x", RandomTensor<double>({2, 3, 4}, 7)}};
    ExpectUnaryMatchesNumpy(*runner, op, vars);
    VarMap run = vars;
    ASSERT_TRUE(runner->Run(op, run).ok());
    EXPECT_EQ(run.at("out").dims, std::vector<int64_t>{24});
    EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
  }
}

TEST(CumsumConformance, IntegersAndEmptyTensors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap ints{{"x", RandomInts({4, 6}, 3, -100, 100)}};
  for (int32_t axis : {0, 1}) {
    ir::Op op = Unary("cumsum", {{"axis", axis}, {"exclusive", true}});
    auto expected = NumpyReference("cumsum", op, ints);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    VarMap vars = ints;
    ASSERT_TRUE(runner->Run(op, vars).ok());
    EXPECT_TRUE(AllClose(vars.at("out"), expected->at("Out")[0], 0, 0));
  }
  VarMap empty{{"x", MakeTensor<double>({0, 3}, {})}};
  Status s = runner->Run(Unary("cumsum", {{"axis", int32_t{0}}}), empty);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(empty.at("out").dims, (std::vector<int64_t>{0, 3}));
}

// ---- shape functions ------------------------------------------------------------------------

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

void ExpectShapeError(const ir::Op& op,
                      const std::map<std::string, std::vector<ops::TensorInfo>>& in,
                      const std::string& needle) {
  auto r = Infer(op, in);
  ASSERT_FALSE(r.ok()) << op.type << " accepted bad input";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(op.type), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
}

TEST(UnaryShapes, BadInputIsRejected) {
  ExpectShapeError(Unary("cumsum", {{"axis", int32_t{3}}}), {{"X", {F32({2, 3, 4})}}}, "axis 3");
  ExpectShapeError(Unary("cumsum", {{"axis", int32_t{-4}}}), {{"X", {F32({2, 3, 4})}}},
                   "[2, 3, 4]");
  ExpectShapeError(Unary("clip", {{"min", 1.0f}, {"max", 0.5f}}), {{"X", {F32({3})}}}, "min");
  ExpectShapeError(Prelu({{"mode", std::string("bogus")}}),
                   {{"X", {F32({2, 3})}}, {"Alpha", {F32({1})}}}, "bogus");
  ExpectShapeError(Prelu({{"mode", std::string("channel")}}),
                   {{"X", {F32({2, 3, 4})}}, {"Alpha", {F32({4})}}}, "Alpha [4]");
  ExpectShapeError(Prelu({{"mode", std::string("channel")}}),
                   {{"X", {F32({6})}}, {"Alpha", {F32({6})}}}, "rank 2");
  ExpectShapeError(Prelu({{"mode", std::string("element")}}),
                   {{"X", {F32({2, 3, 4})}}, {"Alpha", {F32({3})}}}, "12 elements");
  ExpectShapeError(Prelu({{"mode", std::string("all")}}),
                   {{"X", {F32({2, 3})}}, {"Alpha", {F32({2})}}}, "Alpha [2]");
  ExpectShapeError(Prelu({{"data_format", std::string("NCDHW")}}),
                   {{"X", {F32({2, 3})}}, {"Alpha", {F32({1})}}}, "NCDHW");
}

// Every op of this family and its grad ops carry an unknown batch dim through, and give each
// input gradient its input's shape.
TEST(UnaryShapes, UnknownBatchPropagatesThroughOpsAndGrads) {
  struct Case {
    ir::Op op;
    std::vector<std::pair<std::string, std::vector<int64_t>>> vars;
    std::vector<int64_t> out;
  };
  std::vector<Case> cases;
  for (const auto& c : UnaryCases()) {
    cases.push_back({Unary(c.type, c.attrs), {{"x", {-1, 3}}}, {-1, 3}});
  }
  cases.push_back({Prelu({{"mode", std::string("channel")}}),
                   {{"x", {-1, 3, 4}}, {"alpha", {3}}},
                   {-1, 3, 4}});
  cases.push_back({Prelu({{"mode", std::string("element")}}),
                   {{"x", {-1, 3, 4}}, {"alpha", {1, 3, 4}}},
                   {-1, 3, 4}});
  cases.push_back({Unary("cumsum", {{"axis", int32_t{0}}}), {{"x", {-1, 4}}}, {-1, 4}});
  cases.push_back({Unary("cumsum", {{"flatten", true}}), {{"x", {-1, 4}}}, {-1}});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.op.type);
    ir::Program p;
    for (const auto& [name, shape] : c.vars) {
      ir::Var v;
      v.name = name;
      v.shape = shape;
      ASSERT_TRUE(p.global().AddVar(v).ok());
    }
    Status s = ops::InferAndDeclareOutputs(ops::BuiltinOps(), p, 0, c.op);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(p.global().FindVar("out")->shape, c.out);
    ir::Var g = *p.global().FindVar("out");
    g.name = ir::GradVarName("out");
    ASSERT_TRUE(p.global().AddVar(g).ok());
    const ops::OpSchema* schema = ops::BuiltinOps().Find(c.op.type);
    for (const ir::Op& gop : schema->grad(c.op)) {
      SCOPED_TRACE(gop.type);
      ASSERT_NE(ops::BuiltinOps().Find(gop.type), nullptr) << "no schema for " << gop.type;
      s = ops::InferAndDeclareOutputs(ops::BuiltinOps(), p, 0, gop);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    for (const auto& [name, shape] : c.vars) {
      const ir::Var* gv = p.global().FindVar(ir::GradVarName(name));
      ASSERT_NE(gv, nullptr) << "no gradient for " << name;
      EXPECT_EQ(gv->shape, shape) << name;
    }
  }
}

}  // namespace
}  // namespace fleet::conformance
