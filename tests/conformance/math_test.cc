// Conformance of the math ops: forward against NumPy (ref/ref_math.py), gradients against
// finite differences in float64, float32 grad kernels against the float64 ones, and the shape
// functions (mismatches rejected with a clear message, unknown batch dims carried through).
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

ir::Op Binary(std::string type, ir::AttrMap attrs = {}) {
  return MakeOp(std::move(type), {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}},
                std::move(attrs));
}

// ---- mul / matmul_v2 ------------------------------------------------------------------------

struct MulCase {
  std::vector<int64_t> x, y;
  int32_t xnc, ync;
};

const std::vector<MulCase>& MulCases() {
  static const std::vector<MulCase> cases = {
      {{4, 6}, {6, 5}, 1, 1},
      {{2, 3, 4}, {4, 5}, 2, 1},
      {{2, 3, 4}, {4, 3, 5}, 1, 2},
      {{2, 3, 2}, {6, 2}, 1, 1},
  };
  return cases;
}

TEST(MathConformance, MulMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 10;
  for (const auto& c : MulCases()) {
    ir::Op op = Binary("mul", {{"x_num_col_dims", c.xnc}, {"y_num_col_dims", c.ync}});
    VarMap vars{{"x", RandomTensor<double>(c.x, ++seed)}, {"y", RandomTensor<double>(c.y, ++seed)}};
    ExpectFloatsMatchNumpy(*runner, op, vars);
  }
  // The MLP benchmark's layers.
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{128, 32, 128}, {256, 784, 64}}) {
    ir::Op op = Binary("mul");
    VarMap vars{{"x", RandomTensor<double>({m, k}, ++seed)},
                {"y", RandomTensor<double>({k, n}, ++seed)}};
    ExpectFloatsMatchNumpy(*runner, op, vars, 1e-4, 1e-4);
  }
}

TEST(MathConformance, MulGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 20;
  for (const auto& c : MulCases()) {
    ir::Op op = Binary("mul", {{"x_num_col_dims", c.xnc}, {"y_num_col_dims", c.ync}});
    VarMap vars{{"x", RandomTensor<double>(c.x, ++seed)}, {"y", RandomTensor<double>(c.y, ++seed)}};
    EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
  }
}

TEST(MathConformance, MulGradFloat32) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 30;
  for (const auto& c : MulCases()) {
    ir::Op op = Binary("mul", {{"x_num_col_dims", c.xnc}, {"y_num_col_dims", c.ync}});
    VarMap vars{{"x", RandomTensor<double>(c.x, ++seed)}, {"y", RandomTensor<double>(c.y, ++seed)}};
    ExpectFloat32GradsMatchFloat64(*runner, op, vars);
  }
  // mul_grad against the hand-derived NumPy gradient at the benchmark's shapes.
  ir::Op g = MakeOp("mul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                    {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}});
  VarMap vars{{"x", RandomTensor<double>({128, 32}, 41)},
              {"y", RandomTensor<double>({32, 128}, 42)},
              {"g", RandomTensor<double>({128, 128}, 43)}};
  ExpectFloatsMatchNumpy(*runner, g, vars, 1e-4, 1e-4);
}

struct MatmulCase {
  std::vector<int64_t> x, y;
  bool tx, ty;
};

const std::vector<MatmulCase>& MatmulCases() {
  static const std::vector<MatmulCase> cases = {
      {{3, 4}, {4, 5}, false, false},
      {{4, 3}, {4, 5}, true, false},
      {{3, 4}, {5, 4}, false, true},
      {{4, 3}, {5, 4}, true, true},
      {{2, 3, 4}, {2, 4, 2}, false, false},
      {{2, 4, 3}, {2, 2, 4}, true, true},
      {{2, 1, 2, 3}, {3, 3, 2}, false, false},  // batch dims broadcast both ways
      {{2, 2, 3}, {3, 2}, false, false},        // Y without batch dims
      {{2, 3}, {2, 3, 2}, false, false},        // X without batch dims
      {{4}, {4, 3}, false, false},              // vector . matrix
      {{2, 3, 4}, {4}, false, false},           // batched matrix . vector
      {{5}, {5}, false, false},                 // dot product, shape [1]
  };
  return cases;
}

TEST(MathConformance, MatmulV2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 50;
  for (const auto& c : MatmulCases()) {
    SCOPED_TRACE(std::to_string(seed));
    ir::Op op = Binary("matmul_v2", {{"trans_x", c.tx}, {"trans_y", c.ty}});
    VarMap vars{{"x", RandomTensor<double>(c.x, ++seed)}, {"y", RandomTensor<double>(c.y, ++seed)}};
    ExpectFloatsMatchNumpy(*runner, op, vars);
  }
}

TEST(MathConformance, MatmulV2Gradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 70;
  for (const auto& c : MatmulCases()) {
    SCOPED_TRACE(std::to_string(seed));
    ir::Op op = Binary("matmul_v2", {{"trans_x", c.tx}, {"trans_y", c.ty}});
    VarMap vars{{"x", RandomTensor<double>(c.x, ++seed)}, {"y", RandomTensor<double>(c.y, ++seed)}};
    EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
    ExpectFloat32GradsMatchFloat64(*runner, op, vars);
  }
}

// ---- elementwise ----------------------------------------------------------------------------

struct BroadcastCase {
  std::vector<int64_t> x, y;
  int32_t axis;
};

const std::vector<BroadcastCase>& BroadcastCases() {
  static const std::vector<BroadcastCase> cases = {
      {{3, 4}, {3, 4}, -1},           // same shape
      {{5, 4}, {4}, -1},              // bias add
      {{5, 4}, {4}, 1},               // bias add, explicit axis
      {{5, 4}, {5}, 0},               // per-row
      {{2, 3, 4}, {3}, 1},            // middle axis
      {{2, 3, 4}, {3, 4}, 1},
      {{2, 3, 4}, {2, 3}, 0},
      {{2, 3, 4}, {3, 1}, 1},         // trailing 1 broadcasts
      {{2, 3, 4}, {4, 1}, 2},         // trailing 1 past the end is dropped
      {{2, 3, 4}, {1}, -1},           // scalar-like
      {{3}, {2, 3, 4}, 1},            // X smaller than Y
      {{4}, {2, 3, 4}, -1},
      {{2, 1, 4}, {2, 3, 1}, -1},     // both broadcast, same rank
  };
  return cases;
}

const char* const kBinaryOps[] = {"elementwise_add", "elementwise_sub", "elementwise_mul",
                                  "elementwise_div", "elementwise_max", "elementwise_min"};

VarMap BinaryInputs(const std::string& type, const BroadcastCase& c, uint64_t seed) {
  // Divisors stay away from zero.
  const bool div = type == "elementwise_div";
  return {{"x", RandomTensor<double>(c.x, seed)},
          {"y", div ? RandomTensor<double>(c.y, seed + 1000, 0.5, 2.0)
                    : RandomTensor<double>(c.y, seed + 1000)}};
}

TEST(MathConformance, ElementwiseMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 100;
  for (const char* type : kBinaryOps) {
    for (const auto& c : BroadcastCases()) {
      SCOPED_TRACE(std::string(type) + " axis " + std::to_string(c.axis) + " seed " +
                   std::to_string(seed + 1));
      ir::Op op = Binary(type, {{"axis", c.axis}});
      ExpectFloatsMatchNumpy(*runner, op, BinaryInputs(type, c, ++seed));
    }
  }
  // The benchmark's bias add.
  ir::Op op = Binary("elementwise_add", {{"axis", int32_t{1}}});
  ExpectFloatsMatchNumpy(*runner, op, {{"x", RandomTensor<double>({128, 128}, 1)},
                                   {"y", RandomTensor<double>({128}, 2)}});
}

TEST(MathConformance, ElementwiseGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 200;
  for (const char* type : kBinaryOps) {
    for (const auto& c : BroadcastCases()) {
      SCOPED_TRACE(std::string(type) + " axis " + std::to_string(c.axis) + " seed " +
                   std::to_string(seed + 1));
      ir::Op op = Binary(type, {{"axis", c.axis}});
      VarMap vars = BinaryInputs(type, c, ++seed);
      EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
      ExpectFloat32GradsMatchFloat64(*runner, op, vars);
    }
  }
}

// The hot bias add of the benchmark MLP (large enough to split across threads), forward and
// backward, against NumPy.
TEST(MathConformance, BiasAddAtBenchmarkShape) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (int32_t axis : {-1, 1}) {
    ExpectFloatsMatchNumpy(*runner, Binary("elementwise_add", {{"axis", axis}}),
                       {{"x", RandomTensor<double>({256, 1024}, 7)},
                        {"y", RandomTensor<double>({1024}, 8)}});
    ir::Op g = MakeOp("elementwise_add_grad",
                      {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                      {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, {{"axis", axis}});
    ExpectFloatsMatchNumpy(*runner, g,
                       {{"x", RandomTensor<double>({256, 1024}, 9)},
                        {"y", RandomTensor<double>({1024}, 10)},
                        {"g", RandomTensor<double>({256, 1024}, 11)}},
                       1e-5, 1e-4);
  }
  // A general broadcast gradient against the same NumPy rule.
  ir::Op g = MakeOp("elementwise_add_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                    {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, {{"axis", int32_t{1}}});
  ExpectFloatsMatchNumpy(*runner, g,
                     {{"x", RandomTensor<double>({2, 3, 4}, 12)},
                      {"y", RandomTensor<double>({3, 1}, 13)},
                      {"g", RandomTensor<double>({2, 3, 4}, 14)}});
}

// ---- sum / mean / reductions ----------------------------------------------------------------

TEST(MathConformance, SumAndMean) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op sum = MakeOp("sum", {{"X", {"a", "b", "c"}}}, {{"Out", {"out"}}});
  VarMap vars{{"a", RandomTensor<double>({3, 4}, 1)},
              {"b", RandomTensor<double>({3, 4}, 2)},
              {"c", RandomTensor<double>({3, 4}, 3)}};
  ExpectFloatsMatchNumpy(*runner, sum, vars);
  EXPECT_TRUE(CheckGradients(*runner, sum, vars, {}));

  // Out may be one of the inputs (gradient accumulation in place).
  ir::Op inplace = MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"a"}}});
  VarMap v2 = vars;
  ASSERT_TRUE(runner->Run(inplace, v2).ok());
  auto ref = NumpyReference("sum", MakeOp("sum", {{"X", {"a", "b"}}}, {}), vars);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  EXPECT_TRUE(AllClose(v2.at("a"), ref->at("Out")[0], 1e-12, 1e-12));

  ir::Op mean = Unary("mean");
  VarMap mv{{"x", RandomTensor<double>({3, 5}, 4)}};
  ExpectFloatsMatchNumpy(*runner, mean, mv);
  EXPECT_TRUE(CheckGradients(*runner, mean, mv, {}));
  ExpectFloat32GradsMatchFloat64(*runner, mean, mv);
}

struct ReduceCase {
  std::vector<int64_t> x;
  ir::AttrMap attrs;
};

const std::vector<ReduceCase>& ReduceCases() {
  static const std::vector<ReduceCase> cases = {
      {{3, 4}, {}},  // default dim {0}
      {{3, 4}, {{"dim", std::vector<int32_t>{1}}}},
      {{2, 3, 4}, {{"dim", std::vector<int32_t>{0, 2}}, {"keep_dim", true}}},
      {{2, 3, 4}, {{"dim", std::vector<int32_t>{-1}}}},
      {{2, 3, 4}, {{"dim", std::vector<int32_t>{1}}, {"keep_dim", true}}},
      {{2, 3, 4}, {{"reduce_all", true}}},
      {{2, 3, 4}, {{"reduce_all", true}, {"keep_dim", true}}},
  };
  return cases;
}

TEST(MathConformance, ReduceMatchesNumpyAndGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 300;
  for (const char* type : {"reduce_sum", "reduce_mean"}) {
    for (const auto& c : ReduceCases()) {
      SCOPED_TRACE(std::string(type) + " seed " + std::to_string(seed + 1));
      ir::Op op = Unary(type, c.attrs);
      VarMap vars{{"x", RandomTensor<double>(c.x, ++seed)}};
      ExpectFloatsMatchNumpy(*runner, op, vars);
      EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
      ExpectFloat32GradsMatchFloat64(*runner, op, vars);
    }
  }
}

// ---- activations ----------------------------------------------------------------------------

struct ActCase {
  const char* type;
  ir::AttrMap attrs;
  double lo, hi;  // input range (positive for sqrt and log)
};

const std::vector<ActCase>& ActCases() {
  static const std::vector<ActCase> cases = {
      {"relu", {}, -2, 2},
      {"tanh", {}, -2, 2},
      {"sigmoid", {}, -3, 3},
      {"sqrt", {}, 0.2, 3},
      {"exp", {}, -2, 2},
      {"gelu", {}, -3, 3},
      {"gelu", {{"approximate", true}}, -3, 3},
      {"leaky_relu", {}, -2, 2},
      {"leaky_relu", {{"alpha", 0.1f}}, -2, 2},
      {"square", {}, -2, 2},
      {"log", {}, 0.2, 3},
  };
  return cases;
}

TEST(MathConformance, SignMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Exact zeros included: sign(0) is 0.
  HostTensor x = MakeTensor<double>({2, 5}, {-2.5, -1e-9, 0.0, 1e-9, 3.0, 0.0, -0.0, 7.0, -7.0, 0.5});
  ExpectFloatsMatchNumpy(*runner, Unary("sign"), {{"x", x}});
  const ops::OpSchema* schema = ops::BuiltinOps().Find("sign");
  ASSERT_NE(schema, nullptr);
  EXPECT_FALSE(schema->grad) << "sign is not differentiated";
}

TEST(MathConformance, ActivationsMatchNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 400;
  for (const auto& c : ActCases()) {
    SCOPED_TRACE(c.type);
    ExpectFloatsMatchNumpy(*runner, Unary(c.type, c.attrs),
                       {{"x", RandomTensor<double>({6, 33}, ++seed, c.lo, c.hi)}});
  }
}

TEST(MathConformance, ActivationGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 450;
  for (const auto& c : ActCases()) {
    SCOPED_TRACE(c.type);
    ir::Op op = Unary(c.type, c.attrs);
    VarMap small{{"x", RandomTensor<double>({3, 5}, ++seed, c.lo, c.hi)}};
    EXPECT_TRUE(CheckGradients(*runner, op, small, {}));
    ExpectFloat32GradsMatchFloat64(*runner, op,
                                   {{"x", RandomTensor<double>({7, 19}, ++seed, c.lo, c.hi)}});
  }
}

TEST(MathConformance, SoftmaxMatchesNumpyAndGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 500;
  struct Case {
    std::vector<int64_t> x;
    int32_t axis;
  };
  const Case cases[] = {{{4, 7}, -1}, {{2, 3, 4}, 1}, {{3, 5}, 0}, {{2, 3, 4}, -1}, {{6}, 0}};
  for (const char* type : {"softmax", "log_softmax"}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string(type) + " axis " + std::to_string(c.axis));
      ir::Op op = Unary(type, {{"axis", c.axis}});
      VarMap vars{{"x", RandomTensor<double>(c.x, ++seed, -3, 3)}};
      ExpectFloatsMatchNumpy(*runner, op, vars);
      EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
      ExpectFloat32GradsMatchFloat64(*runner, op, vars);
    }
  }
  // The benchmark's output layer, and softmax_grad against its NumPy formula.
  ExpectFloatsMatchNumpy(*runner, Unary("softmax"), {{"x", RandomTensor<double>({128, 2}, 1, -3, 3)}});
  ir::Op g = MakeOp("softmax_grad", {{"Out", {"o"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}},
                    {{"axis", int32_t{-1}}});
  VarMap gv{{"o", RandomTensor<double>({16, 10}, 2, 0.0, 1.0)},
            {"g", RandomTensor<double>({16, 10}, 3)}};
  ExpectFloatsMatchNumpy(*runner, g, gv, 1e-4, 1e-5);
}

// ---- shape functions ------------------------------------------------------------------------

// Runs `op`'s shape function on the given input infos.
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
  ASSERT_FALSE(r.ok()) << op.type << " accepted mismatched shapes";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(op.type), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
}

TEST(MathShapes, MismatchedShapesAreRejected) {
  ExpectShapeError(Binary("mul"), {{"X", {F32({4, 6})}}, {"Y", {F32({5, 3})}}}, "[5, 3]");
  ExpectShapeError(Binary("mul", {{"x_num_col_dims", int32_t{2}}}),
                   {{"X", {F32({4, 6})}}, {"Y", {F32({6, 3})}}}, "x_num_col_dims");
  ExpectShapeError(Binary("matmul_v2"), {{"X", {F32({3, 4})}}, {"Y", {F32({5, 2})}}},
                   "contraction");
  ExpectShapeError(Binary("matmul_v2"), {{"X", {F32({2, 3, 4})}}, {"Y", {F32({3, 4, 2})}}},
                   "batch");
  ExpectShapeError(Binary("elementwise_add"), {{"X", {F32({5, 4})}}, {"Y", {F32({3})}}},
                   "do not broadcast");
  ExpectShapeError(Binary("elementwise_mul", {{"axis", int32_t{2}}}),
                   {{"X", {F32({5, 4})}}, {"Y", {F32({4})}}}, "axis 2");
  ExpectShapeError(MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"o"}}}),
                   {{"X", {F32({3, 4}), F32({4, 3})}}}, "X[1]");
  ExpectShapeError(Unary("reduce_sum", {{"dim", std::vector<int32_t>{3}}}), {{"X", {F32({3, 4})}}},
                   "dim 3");
  ExpectShapeError(Unary("softmax", {{"axis", int32_t{2}}}), {{"X", {F32({3, 4})}}}, "axis 2");
}

// Declares `vars` in a program, infers `op`'s outputs, and returns the output var's shape.
std::vector<int64_t> InferredShape(const ir::Op& op,
                                   const std::vector<std::pair<std::string, std::vector<int64_t>>>&
                                       vars,
                                   const std::string& out) {
  ir::Program p;
  for (const auto& [name, shape] : vars) {
    ir::Var v;
    v.name = name;
    v.shape = shape;
    EXPECT_TRUE(p.global().AddVar(v).ok());
  }
  Status s = ops::InferAndDeclareOutputs(ops::BuiltinOps(), p, 0, op);
  EXPECT_TRUE(s.ok()) << s.ToString();
  const ir::Var* v = p.global().FindVar(out);
  return v != nullptr ? v->shape : std::vector<int64_t>{-99};
}

using Shape = std::vector<int64_t>;

TEST(MathShapes, UnknownBatchPropagates) {
  EXPECT_EQ(InferredShape(Binary("mul"), {{"x", {-1, 32}}, {"y", {32, 128}}}, "out"),
            Shape({-1, 128}));
  EXPECT_EQ(InferredShape(Binary("matmul_v2", {{"trans_y", true}}),
                          {{"x", {-1, 3, 4}}, {"y", {5, 4}}}, "out"),
            Shape({-1, 3, 5}));
  EXPECT_EQ(InferredShape(Binary("elementwise_add"), {{"x", {-1, 128}}, {"y", {128}}}, "out"),
            Shape({-1, 128}));
  EXPECT_EQ(InferredShape(Binary("elementwise_mul", {{"axis", int32_t{0}}}),
                          {{"x", {-1, 4}}, {"y", {-1}}}, "out"),
            Shape({-1, 4}));
  EXPECT_EQ(InferredShape(Unary("reduce_mean", {{"dim", std::vector<int32_t>{1}}}),
                          {{"x", {-1, 4}}}, "out"),
            Shape({-1}));
  EXPECT_EQ(InferredShape(Unary("mean"), {{"x", {-1, 4}}}, "out"), Shape({1}));
  EXPECT_EQ(InferredShape(Unary("softmax"), {{"x", {-1, 10}}}, "out"), Shape({-1, 10}));
  EXPECT_EQ(InferredShape(MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"out"}}}),
                          {{"a", {-1, 3}}, {"b", {-1, 3}}}, "out"),
            Shape({-1, 3}));
}

// Every math op's gradient ops have schemas whose shape functions give each input gradient its
// input's shape, unknown batch included.
TEST(MathShapes, GradOpsInferShapesWithUnknownBatch) {
  struct Case {
    ir::Op op;
    std::vector<std::pair<std::string, std::vector<int64_t>>> vars;
  };
  std::vector<Case> cases = {
      {Binary("mul"), {{"x", {-1, 32}}, {"y", {32, 8}}}},
      {Binary("matmul_v2"), {{"x", {-1, 3, 4}}, {"y", {4, 5}}}},
      {MakeOp("sum", {{"X", {"x", "y"}}}, {{"Out", {"out"}}}), {{"x", {-1, 3}}, {"y", {-1, 3}}}},
      {Unary("mean"), {{"x", {-1, 3}}}},
      {Unary("reduce_sum", {{"dim", std::vector<int32_t>{1}}}), {{"x", {-1, 3}}}},
      {Unary("reduce_mean", {{"reduce_all", true}}), {{"x", {-1, 3}}}},
      {Unary("softmax"), {{"x", {-1, 3}}}},
      {Unary("log_softmax"), {{"x", {-1, 3}}}},
  };
  for (const char* t : kBinaryOps) cases.push_back({Binary(t), {{"x", {-1, 4}}, {"y", {4}}}});
  for (const auto& a : ActCases()) cases.push_back({Unary(a.type, a.attrs), {{"x", {-1, 3}}}});

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
    for (const auto& name : c.op.OutputVars()) {
      ir::Var g = *p.global().FindVar(name);
      g.name = ir::GradVarName(name);
      ASSERT_TRUE(p.global().AddVar(g).ok());
    }
    const ops::OpSchema* schema = ops::BuiltinOps().Find(c.op.type);
    for (const ir::Op& g : schema->grad(c.op)) {
      SCOPED_TRACE(g.type);
      ASSERT_NE(ops::BuiltinOps().Find(g.type), nullptr) << "no schema for " << g.type;
      s = ops::InferAndDeclareOutputs(ops::BuiltinOps(), p, 0, g);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    for (const auto& [name, shape] : c.vars) {
      const ir::Var* g = p.global().FindVar(ir::GradVarName(name));
      ASSERT_NE(g, nullptr) << "no gradient for " << name;
      EXPECT_EQ(g->shape, shape) << name;
    }
  }
}

// ---- scale (the pattern every group follows) ------------------------------------------------

TEST(MathConformance, ScaleMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (bool after : {true, false}) {
    ir::Op op = MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"out"}}},
                       {{"scale", 2.5f}, {"bias", -0.5f}, {"bias_after_scale", after}});
    VarMap vars{{"x", RandomTensor<float>({3, 7}, 1)}};
    ASSERT_TRUE(runner->Run(op, vars).ok());
    auto ref = NumpyReference("scale", op, vars);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    EXPECT_TRUE(AllClose(vars.at("out"), ref->at("Out")[0], 1e-6, 1e-6));
  }
}

TEST(MathConformance, ScaleGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"scale", -1.5f}});
  VarMap vars{{"x", RandomTensor<double>({4, 3}, 2)}};
  EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
}

}  // namespace
}  // namespace fleet::conformance
