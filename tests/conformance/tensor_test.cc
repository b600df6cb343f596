// Conformance of the tensor ops: layout ops (reshape2, transpose2, flatten_contiguous_range,
// concat, split, slice), cast, assign, fills, increment and the random initializers. Forward
// results against NumPy (ref/ref_tensor.py), gradients against finite differences, random ops
// against an independent NumPy implementation of the documented stream and against sample
// statistics.
#include <algorithm>
#include <cmath>

#include "harness.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"

namespace fleet::conformance {
namespace {

using Ints = std::vector<int32_t>;

// Runs `op` and its NumPy reference; every output slot of the op must match.
void ExpectMatchesNumpy(OpRunner& runner, const ir::Op& op, VarMap vars,
                        const std::string& ref_name = "", double tol = 0.0) {
  Status s = runner.Run(op, vars);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto ref = NumpyReference(ref_name.empty() ? op.type : ref_name, op, vars);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (const auto& [slot, names] : op.outputs) {
    ASSERT_TRUE(ref->count(slot)) << "reference gives no " << slot;
    const auto& expected = ref->at(slot);
    ASSERT_EQ(expected.size(), names.size()) << slot;
    for (size_t i = 0; i < names.size(); ++i) {
      const HostTensor& actual = vars.at(names[i]);
      EXPECT_EQ(actual.dtype, expected[i].dtype)
          << op.type << " " << slot << "[" << i << "]: " << ir::DataTypeName(actual.dtype)
          << " vs " << ir::DataTypeName(expected[i].dtype);
      EXPECT_TRUE(AllClose(actual, expected[i], tol, tol)) << op.type << " " << slot << "[" << i
                                                           << "]";
    }
  }
}

// The error text of running `op`, or "" when it succeeds.
std::string RunError(OpRunner& runner, const ir::Op& op, VarMap vars) {
  Status s = runner.Run(op, vars);
  return s.ok() ? std::string() : s.ToString();
}

HostTensor IotaTensor(std::vector<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i * 3 - 7;
  return MakeTensor<int64_t>(std::move(dims), v);
}

// ---- reshape2 -------------------------------------------------------------------------------

TEST(TensorConformance, Reshape2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const Ints& shape : {Ints{4, -1}, Ints{0, -1}, Ints{-1}, Ints{2, 0, 2, 2}, Ints{3, 8},
                            Ints{0, 0, 4}, Ints{1, -1, 1}}) {
    SCOPED_TRACE(testing::Message() << "shape size " << shape.size() << " first " << shape[0]);
    ir::Op op = MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                       {{"shape", shape}});
    ExpectMatchesNumpy(*runner, op, {{"x", RandomTensor<float>({2, 3, 4}, 1)}});
  }
  ir::Op op = MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                     {{"shape", Ints{6, -1}}});
  ExpectMatchesNumpy(*runner, op, {{"x", IotaTensor({3, 4})}});
}

TEST(TensorConformance, Reshape2ShapeInferenceWithUnknownBatch) {
  ir::Program p;
  ir::Var x;
  x.name = "x";
  x.dtype = ir::DataType::kFloat32;
  x.shape = {-1, 3, 4};
  ASSERT_TRUE(p.global().AddVar(x).ok());
  struct Case {
    Ints shape;
    std::vector<int64_t> out;
  };
  for (const Case& c : {Case{{-1, 12}, {-1, 12}}, Case{{0, -1}, {-1, 12}},
                        Case{{0, 3, 2, 2}, {-1, 3, 2, 2}}, Case{{-1, 2, 6}, {-1, 2, 6}},
                        Case{{0, 4, -1}, {-1, 4, 3}}}) {
    ir::Op op = MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                       {{"shape", c.shape}});
    auto infos = ops::InferOpShapes(ops::BuiltinOps(), p, 0, op);
    ASSERT_TRUE(infos.ok()) << infos.status().ToString();
    EXPECT_EQ(infos->at("Out")[0].dims, c.out);
    EXPECT_EQ(infos->at("Out")[0].dtype, ir::DataType::kFloat32);
    EXPECT_EQ(infos->at("XShape")[0].dims, (std::vector<int64_t>{0, -1, 3, 4}));
  }
  // A fully known target whose size is not a multiple of X's known part is rejected.
  ir::Op bad = MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"shape", Ints{5, 5}}});
  auto infos = ops::InferOpShapes(ops::BuiltinOps(), p, 0, bad);
  ASSERT_FALSE(infos.ok());
  EXPECT_NE(infos.status().ToString().find("cannot reshape"), std::string::npos)
      << infos.status().ToString();
}

TEST(TensorConformance, Reshape2Errors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({2, 3}, 1)}};
  auto reshape = [](Ints shape) {
    return MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"shape", shape}});
  };
  std::string e = RunError(*runner, reshape({4, 2}), vars);
  EXPECT_NE(e.find("reshape2"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot reshape X of shape [2, 3] to [4, 2]"), std::string::npos) << e;
  e = RunError(*runner, reshape({-1, -1}), vars);
  EXPECT_NE(e.find("more than one -1"), std::string::npos) << e;
  e = RunError(*runner, reshape({4, -1}), vars);
  EXPECT_NE(e.find("do not divide"), std::string::npos) << e;
  e = RunError(*runner, reshape({0, 0, 0}), vars);
  EXPECT_NE(e.find("rank 2"), std::string::npos) << e;
  e = RunError(*runner, reshape({-2, 3}), vars);
  EXPECT_NE(e.find("shape[0] is -2"), std::string::npos) << e;
}

TEST(TensorConformance, Reshape2Gradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                     {{"shape", Ints{0, -1}}});
  EXPECT_TRUE(CheckGradients(*runner, op, {{"x", RandomTensor<double>({2, 3, 2}, 3)}}, {}));
  // Without XShape the grad op reads X for the shape.
  ir::Op no_xshape = MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"out"}}},
                            {{"shape", Ints{-1}}});
  EXPECT_TRUE(
      CheckGradients(*runner, no_xshape, {{"x", RandomTensor<double>({3, 2}, 4)}}, {}));
}

// ---- transpose2 -----------------------------------------------------------------------------

TEST(TensorConformance, Transpose2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const Ints& axis : {Ints{1, 0, 2}, Ints{2, 0, 1}, Ints{-1, 0, 1}, Ints{0, 1, 2},
                           Ints{2, 1, 0}}) {
    ir::Op op = MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                       {{"axis", axis}});
    ExpectMatchesNumpy(*runner, op, {{"x", RandomTensor<float>({2, 3, 4}, 5)}});
  }
  ir::Op op4 = MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                      {{"axis", Ints{0, 2, 3, 1}}});
  ExpectMatchesNumpy(*runner, op4, {{"x", RandomTensor<double>({2, 3, 4, 5}, 6)}});
  ExpectMatchesNumpy(*runner, op4, {{"x", IotaTensor({3, 1, 2, 4})}});
  ir::Op op2 = MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"axis", Ints{1, 0}}});
  ExpectMatchesNumpy(*runner, op2, {{"x", RandomTensor<float>({37, 19}, 7)}});
}

TEST(TensorConformance, Transpose2ErrorsAndGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<double>({2, 3, 4}, 8)}};
  std::string e = RunError(
      *runner, MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"axis", Ints{0, 1}}}),
      vars);
  EXPECT_NE(e.find("rank 3"), std::string::npos) << e;
  e = RunError(*runner,
               MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"axis", Ints{0, 1, 1}}}),
               vars);
  EXPECT_NE(e.find("not a permutation"), std::string::npos) << e;
  ir::Op op = MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                     {{"axis", Ints{2, 0, 1}}});
  EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
}

// ---- flatten_contiguous_range ---------------------------------------------------------------

TEST(TensorConformance, FlattenMatchesNumpyAndGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (auto [start, stop] : {std::pair{1, 2}, std::pair{0, -1}, std::pair{-2, -1},
                             std::pair{1, 1}, std::pair{0, 1}}) {
    ir::Op op = MakeOp("flatten_contiguous_range", {{"X", {"x"}}},
                       {{"Out", {"out"}}, {"XShape", {"xs"}}},
                       {{"start_axis", int32_t{start}}, {"stop_axis", int32_t{stop}}});
    ExpectMatchesNumpy(*runner, op, {{"x", RandomTensor<float>({2, 3, 4, 2}, 9)}});
  }
  ir::Op bad = MakeOp("flatten_contiguous_range", {{"X", {"x"}}}, {{"Out", {"out"}}},
                      {{"start_axis", int32_t{2}}, {"stop_axis", int32_t{1}}});
  std::string e = RunError(*runner, bad, {{"x", RandomTensor<float>({2, 3, 4}, 9)}});
  EXPECT_NE(e.find("start_axis (2) is after stop_axis (1)"), std::string::npos) << e;
  ir::Op op = MakeOp("flatten_contiguous_range", {{"X", {"x"}}},
                     {{"Out", {"out"}}, {"XShape", {"xs"}}},
                     {{"start_axis", int32_t{1}}, {"stop_axis", int32_t{-1}}});
  EXPECT_TRUE(CheckGradients(*runner, op, {{"x", RandomTensor<double>({2, 2, 3}, 10)}}, {}));
}

TEST(TensorConformance, Flatten2MatchesNumpyAndGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (int32_t axis : {0, 1, 2, 4}) {
    ir::Op op = MakeOp("flatten2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                       {{"axis", axis}});
    ExpectMatchesNumpy(*runner, op, {{"x", RandomTensor<float>({2, 3, 4, 2}, 19)}});
  }
  ir::Op bad = MakeOp("flatten2", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"axis", int32_t{4}}});
  std::string e = RunError(*runner, bad, {{"x", RandomTensor<float>({2, 3, 4}, 9)}});
  EXPECT_NE(e.find("axis 4 must be in [0, 3]"), std::string::npos) << e;
  ir::Op op = MakeOp("flatten2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                     {{"axis", int32_t{2}}});
  EXPECT_TRUE(CheckGradients(*runner, op, {{"x", RandomTensor<double>({2, 2, 3}, 10)}}, {}));
}

// ---- concat / split -------------------------------------------------------------------------

TEST(TensorConformance, ConcatMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("concat", {{"X", {"a", "b", "c"}}}, {{"Out", {"out"}}},
                     {{"axis", int32_t{1}}});
  ExpectMatchesNumpy(*runner, op,
                     {{"a", RandomTensor<float>({2, 1, 3}, 11)},
                      {"b", RandomTensor<float>({2, 4, 3}, 12)},
                      {"c", RandomTensor<float>({2, 2, 3}, 13)}});
  op.attrs["axis"] = int32_t{-1};
  ExpectMatchesNumpy(*runner, op,
                     {{"a", RandomTensor<double>({2, 3, 1}, 14)},
                      {"b", RandomTensor<double>({2, 3, 2}, 15)},
                      {"c", RandomTensor<double>({2, 3, 5}, 16)}});
  op.attrs["axis"] = int32_t{0};
  ExpectMatchesNumpy(*runner, op,
                     {{"a", IotaTensor({1, 3})},
                      {"b", IotaTensor({2, 3})},
                      {"c", IotaTensor({4, 3})}});
}

TEST(TensorConformance, ConcatErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("concat", {{"X", {"a", "b"}}}, {{"Out", {"out"}}}, {{"axis", int32_t{0}}});
  std::string e = RunError(*runner, op,
                           {{"a", RandomTensor<float>({2, 3}, 1)},
                            {"b", RandomTensor<float>({2, 3, 1}, 2)}});
  EXPECT_NE(e.find("X[1] has rank 3 [2, 3, 1] but X[0] has rank 2 [2, 3]"), std::string::npos)
      << e;
  e = RunError(*runner, op,
               {{"a", RandomTensor<float>({2, 3}, 1)}, {"b", RandomTensor<float>({2, 4}, 2)}});
  EXPECT_NE(e.find("in dim 1"), std::string::npos) << e;
  op.attrs["axis"] = int32_t{2};
  e = RunError(*runner, op,
               {{"a", RandomTensor<float>({2, 3}, 1)}, {"b", RandomTensor<float>({2, 3}, 2)}});
  EXPECT_NE(e.find("axis 2 is out of range"), std::string::npos) << e;
}

TEST(TensorConformance, ConcatGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("concat", {{"X", {"a", "b"}}}, {{"Out", {"out"}}}, {{"axis", int32_t{1}}});
  EXPECT_TRUE(CheckGradients(*runner, op,
                             {{"a", RandomTensor<double>({2, 1, 2}, 17)},
                              {"b", RandomTensor<double>({2, 3, 2}, 18)}},
                             {}));
}

TEST(TensorConformance, SplitMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op by_num = MakeOp("split", {{"X", {"x"}}}, {{"Out", {"o0", "o1", "o2"}}},
                         {{"num", int32_t{3}}, {"axis", int32_t{1}}});
  ExpectMatchesNumpy(*runner, by_num, {{"x", RandomTensor<float>({2, 6, 4}, 19)}});
  ir::Op by_sections = MakeOp("split", {{"X", {"x"}}}, {{"Out", {"o0", "o1", "o2"}}},
                              {{"sections", Ints{1, -1, 2}}, {"axis", int32_t{-1}}});
  ExpectMatchesNumpy(*runner, by_sections, {{"x", RandomTensor<double>({2, 3, 5}, 20)}});
  ExpectMatchesNumpy(*runner, by_sections, {{"x", IotaTensor({3, 4})}});
  ir::Op axis0 = MakeOp("split", {{"X", {"x"}}}, {{"Out", {"o0", "o1"}}},
                        {{"sections", Ints{3, 1}}});
  ExpectMatchesNumpy(*runner, axis0, {{"x", RandomTensor<float>({4, 3}, 21)}});

  std::string e = RunError(*runner, by_num, {{"x", RandomTensor<float>({2, 5, 4}, 19)}});
  EXPECT_NE(e.find("does not split into 3 equal parts"), std::string::npos) << e;
  e = RunError(*runner, axis0, {{"x", RandomTensor<float>({5, 3}, 19)}});
  EXPECT_NE(e.find("sum to 4 but dim 0"), std::string::npos) << e;
}

TEST(TensorConformance, SplitGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("split", {{"X", {"x"}}}, {{"Out", {"o0", "o1"}}},
                     {{"sections", Ints{2, -1}}, {"axis", int32_t{1}}});
  EXPECT_TRUE(CheckGradients(*runner, op, {{"x", RandomTensor<double>({2, 5}, 22)}}, {}));
  ir::Op by_num = MakeOp("split", {{"X", {"x"}}}, {{"Out", {"o0", "o1"}}},
                         {{"num", int32_t{2}}, {"axis", int32_t{0}}});
  EXPECT_TRUE(CheckGradients(*runner, by_num, {{"x", RandomTensor<double>({4, 3}, 23)}}, {}));
}

// split_byref (the pserver pass's row split) is split along axis 0 by sections: the NumPy
// reference is split's.
TEST(TensorConformance, SplitByrefMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("split_byref", {{"X", {"x"}}}, {{"Out", {"o0", "o1", "o2"}}},
                     {{"sections", std::vector<int32_t>{3, 3, 1}}});
  ExpectMatchesNumpy(*runner, op, {{"x", RandomTensor<float>({7, 5}, 24)}}, "split");
  ExpectMatchesNumpy(*runner, op, {{"x", RandomTensor<double>({7, 2, 3}, 25)}}, "split");
  ExpectMatchesNumpy(*runner, op, {{"x", IotaTensor({7})}}, "split");
  ir::Op two = MakeOp("split_byref", {{"X", {"x"}}}, {{"Out", {"o0", "o1"}}},
                      {{"sections", std::vector<int32_t>{64, 64}}});
  ExpectMatchesNumpy(*runner, two, {{"x", RandomTensor<float>({128, 256}, 26)}}, "split");

  std::string e = RunError(*runner, op, {{"x", RandomTensor<float>({8, 5}, 27)}});
  EXPECT_NE(e.find("split_byref: sections add up to 7 rows but X has 8"), std::string::npos)
      << e;
}

// ---- slice ----------------------------------------------------------------------------------

ir::Op SliceOp(Ints axes, Ints starts, Ints ends, Ints decrease = {}) {
  ir::AttrMap attrs{{"axes", axes}, {"starts", starts}, {"ends", ends}};
  if (!decrease.empty()) attrs["decrease_axis"] = decrease;
  return MakeOp("slice", {{"Input", {"x"}}}, {{"Out", {"out"}}}, attrs);
}

TEST(TensorConformance, SliceMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({3, 4, 5}, 24)}};
  ExpectMatchesNumpy(*runner, SliceOp({0, 2}, {1, -3}, {100, -1}), vars);  // clamped end
  ExpectMatchesNumpy(*runner, SliceOp({1}, {-100}, {2}), vars);            // clamped start
  ExpectMatchesNumpy(*runner, SliceOp({-1, 0}, {1, 0}, {4, 1}), vars);     // negative axis
  ExpectMatchesNumpy(*runner, SliceOp({1}, {2}, {3}, {1}), vars);          // decrease
  ExpectMatchesNumpy(*runner, SliceOp({0, 1, 2}, {2, 1, 4}, {3, 2, 5}, {0, 1, 2}), vars);
  ExpectMatchesNumpy(*runner, SliceOp({0, 2}, {0, 1}, {2, 4}),
                     {{"x", IotaTensor({3, 4, 5})}});
  ExpectMatchesNumpy(*runner, SliceOp({1}, {3}, {3}), vars);  // empty slice

  std::string e = RunError(*runner, SliceOp({1}, {3}, {1}), vars);
  EXPECT_NE(e.find("start 3 comes after end 1"), std::string::npos) << e;
  e = RunError(*runner, SliceOp({1}, {0}, {2}, {1}), vars);
  EXPECT_NE(e.find("must be 1"), std::string::npos) << e;
  e = RunError(*runner, SliceOp({3}, {0}, {1}), vars);
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  e = RunError(*runner, SliceOp({0, 1}, {0}, {1}), vars);
  EXPECT_NE(e.find("same length"), std::string::npos) << e;
}

TEST(TensorConformance, SliceGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<double>({3, 4, 2}, 25)}};
  EXPECT_TRUE(CheckGradients(*runner, SliceOp({0, 1}, {1, -3}, {100, 3}), vars, {}));
  EXPECT_TRUE(CheckGradients(*runner, SliceOp({1}, {2}, {3}, {1}), vars, {}));
}

// ---- cast -----------------------------------------------------------------------------------

ir::Op CastOp(ir::DataType in, ir::DataType out) {
  return MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"out"}}},
                {{"in_dtype", static_cast<int32_t>(in)}, {"out_dtype", static_cast<int32_t>(out)}});
}

TEST(TensorConformance, CastMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  using D = ir::DataType;
  HostTensor f32 = RandomTensor<float>({3, 5}, 26, -4.0, 4.0);
  f32.data<float>()[0] = 0.0f;  // a false for the bool cases
  HostTensor f64 = Cast(f32, D::kFloat64);
  HostTensor i64 = IotaTensor({3, 5});
  HostTensor i32 = MakeTensor<int32_t>({2, 3}, {0, -1, 2, 7, -100, 65536});
  HostTensor b = MakeTensor<uint8_t>({2, 2}, {0, 1, 1, 0});
  b.dtype = D::kBool;
  struct Case {
    HostTensor x;
    D in, out;
  };
  for (const Case& c : {Case{f32, D::kFloat32, D::kFloat64}, Case{f64, D::kFloat64, D::kFloat32},
                        Case{f64, D::kFloat64, D::kInt64}, Case{f32, D::kFloat32, D::kInt32},
                        Case{i64, D::kInt64, D::kFloat32}, Case{i64, D::kInt64, D::kInt32},
                        Case{i32, D::kInt32, D::kInt64}, Case{i32, D::kInt32, D::kFloat64},
                        Case{f32, D::kFloat32, D::kBool}, Case{i64, D::kInt64, D::kBool},
                        Case{b, D::kBool, D::kInt32}, Case{b, D::kBool, D::kFloat32},
                        Case{f32, D::kFloat32, D::kFloat32}}) {
    SCOPED_TRACE(testing::Message() << ir::DataTypeName(c.in) << " -> "
                                    << ir::DataTypeName(c.out));
    ExpectMatchesNumpy(*runner, CastOp(c.in, c.out), {{"x", c.x}});
  }
  std::string e = RunError(*runner, CastOp(D::kFloat64, D::kFloat32), {{"x", f32}});
  EXPECT_NE(e.find("in_dtype is float64 (10) but X is float32 (9)"), std::string::npos) << e;
  ir::Op bad = CastOp(D::kFloat32, D::kFloat32);
  bad.attrs["out_dtype"] = int32_t{42};
  e = RunError(*runner, bad, {{"x", f32}});
  EXPECT_NE(e.find("out_dtype = 42 is not a FLEET_DTYPE_* value"), std::string::npos) << e;
}

TEST(TensorConformance, CastGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  using D = ir::DataType;
  // float64 -> float64, through the Paddle rule (a cast back) and through cast_grad.
  VarMap vars{{"x", RandomTensor<double>({2, 3}, 27)}};
  EXPECT_TRUE(CheckGradients(*runner, CastOp(D::kFloat64, D::kFloat64), vars, {}));
  ir::Op no_in = MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"out"}}},
                        {{"out_dtype", static_cast<int32_t>(D::kFloat64)}});
  EXPECT_TRUE(CheckGradients(*runner, no_in, vars, {}));

  // float32 -> float64: the gradient comes back as float32.
  for (const ir::Op& fwd :
       {CastOp(D::kFloat32, D::kFloat64),
        MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"out"}}},
               {{"out_dtype", static_cast<int32_t>(D::kFloat64)}})}) {
    const auto grads = ops::BuiltinOps().Find("cast")->grad(fwd);
    ASSERT_EQ(grads.size(), 1u);
    VarMap env{{"x", RandomTensor<float>({4}, 28)}, {"out@GRAD", RandomTensor<double>({4}, 29)}};
    Status s = runner->Run(grads[0], env);
    ASSERT_TRUE(s.ok()) << grads[0].type << ": " << s.ToString();
    ASSERT_TRUE(env.count("x@GRAD")) << grads[0].type;
    EXPECT_EQ(env.at("x@GRAD").dtype, D::kFloat32);
    EXPECT_TRUE(AllClose(env.at("x@GRAD"), Cast(env.at("out@GRAD"), D::kFloat32), 0, 0));
  }
}

// ---- assign, fills, increment ---------------------------------------------------------------

TEST(TensorConformance, AssignMatchesNumpyAndGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("assign", {{"X", {"x"}}}, {{"Out", {"out"}}});
  ExpectMatchesNumpy(*runner, op, {{"x", RandomTensor<float>({3, 4}, 30)}});
  ExpectMatchesNumpy(*runner, op, {{"x", IotaTensor({5})}});
  EXPECT_TRUE(CheckGradients(*runner, op, {{"x", RandomTensor<double>({2, 3}, 31)}}, {}));
}

ir::Op FillConstant(std::vector<int64_t> shape, ir::DataType dtype, float value,
                    std::string str_value = "") {
  ir::AttrMap attrs{{"shape", std::move(shape)},
                    {"dtype", static_cast<int32_t>(dtype)},
                    {"value", value}};
  if (!str_value.empty()) attrs["str_value"] = str_value;
  return MakeOp("fill_constant", {}, {{"Out", {"out"}}}, attrs);
}

TEST(TensorConformance, FillConstantMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  using D = ir::DataType;
  ExpectMatchesNumpy(*runner, FillConstant({2, 3}, D::kFloat32, 1.5f), {});
  ExpectMatchesNumpy(*runner, FillConstant({4}, D::kFloat64, -0.25f), {});
  ExpectMatchesNumpy(*runner, FillConstant({2, 2}, D::kInt32, 7.0f), {});
  ExpectMatchesNumpy(*runner, FillConstant({3}, D::kBool, 1.0f), {});
  ExpectMatchesNumpy(*runner, FillConstant({1}, D::kInt64, 0.0f), {});
  // 2^53 + 1 is not a float or double; str_value keeps it exact.
  VarMap vars;
  ir::Op big = FillConstant({2}, D::kInt64, 0.0f, "9007199254740993");
  ASSERT_TRUE(runner->Run(big, vars).ok());
  EXPECT_EQ(Values<int64_t>(vars.at("out")), (std::vector<int64_t>{9007199254740993LL,
                                                                   9007199254740993LL}));
  ExpectMatchesNumpy(*runner, FillConstant({2}, D::kFloat32, 0.0f, "-3.5"), {});

  std::string e = RunError(*runner, FillConstant({2, -1}, D::kFloat32, 0.0f), {});
  EXPECT_NE(e.find("negative entry"), std::string::npos) << e;
  e = RunError(*runner, FillConstant({2}, D::kFloat32, 0.0f, "abc"), {});
  EXPECT_NE(e.find("str_value 'abc' is not a number"), std::string::npos) << e;
  ir::Op bad_dtype = FillConstant({2}, D::kFloat32, 0.0f);
  bad_dtype.attrs["dtype"] = int32_t{0};
  e = RunError(*runner, bad_dtype, {});
  EXPECT_NE(e.find("dtype = 0 is not a FLEET_DTYPE_* value"), std::string::npos) << e;
}

TEST(TensorConformance, FillLikeMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const HostTensor& x : {RandomTensor<float>({2, 3}, 32), IotaTensor({4}),
                              RandomTensor<double>({3}, 33)}) {
    ExpectMatchesNumpy(*runner, MakeOp("fill_zeros_like", {{"X", {"x"}}}, {{"Out", {"out"}}}),
                       {{"x", x}});
    ExpectMatchesNumpy(*runner,
                       MakeOp("fill_any_like", {{"X", {"x"}}}, {{"Out", {"out"}}},
                              {{"value", 2.0f}}),
                       {{"x", x}});
  }
  ExpectMatchesNumpy(*runner,
                     MakeOp("fill_any_like", {{"X", {"x"}}}, {{"Out", {"out"}}},
                            {{"value", -1.5f},
                             {"dtype", static_cast<int32_t>(ir::DataType::kFloat64)}}),
                     {{"x", RandomTensor<float>({2, 2}, 34)}});
}

TEST(TensorConformance, IncrementMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("increment", {{"X", {"x"}}}, {{"Out", {"out"}}});
  ExpectMatchesNumpy(*runner, op, {{"x", MakeTensor<float>({1}, {2.5f})}});
  ExpectMatchesNumpy(*runner, op, {{"x", MakeTensor<int64_t>({1}, {41})}});
  op.attrs["step"] = -0.75f;
  ExpectMatchesNumpy(*runner, op, {{"x", MakeTensor<double>({1}, {10.0})}});
  op.attrs["step"] = 3.0f;
  ExpectMatchesNumpy(*runner, op, {{"x", MakeTensor<int64_t>({1}, {-7})}});
  std::string e = RunError(*runner, op, {{"x", MakeTensor<float>({2}, {1.0f, 2.0f})}});
  EXPECT_NE(e.find("exactly one element"), std::string::npos) << e;
}

// ---- random initializers --------------------------------------------------------------------

ir::Op Uniform(std::vector<int64_t> shape, ir::DataType dtype, float lo, float hi,
               int32_t seed) {
  return MakeOp("uniform_random", {}, {{"Out", {"out"}}},
                {{"shape", std::move(shape)},
                 {"dtype", static_cast<int32_t>(dtype)},
                 {"min", lo},
                 {"max", hi},
                 {"seed", seed}});
}

ir::Op Gaussian(std::vector<int64_t> shape, ir::DataType dtype, float mean, float std,
                int32_t seed) {
  return MakeOp("gaussian_random", {}, {{"Out", {"out"}}},
                {{"shape", std::move(shape)},
                 {"dtype", static_cast<int32_t>(dtype)},
                 {"mean", mean},
                 {"std", std},
                 {"seed", seed}});
}

HostTensor RunRandom(OpRunner& runner, const ir::Op& op, uint64_t kc_seed = 1234) {
  VarMap vars;
  Status s = runner.Run(op, vars, kc_seed);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? vars.at("out") : HostTensor{};
}

// Runs a random op; ends the calling test (with the failure RunRandom recorded) when it failed,
// so that no statistic is taken over an empty tensor.
#define FLEET_RUN_RANDOM(var, ...)                 \
  const HostTensor var = RunRandom(__VA_ARGS__);   \
  if (var.bytes.empty()) return

void Moments(const HostTensor& t, double* mean, double* sd) {
  std::vector<double> v = Values<double>(Cast(t, ir::DataType::kFloat64));
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  *mean = s / static_cast<double>(v.size());
  for (double x : v) s2 += (x - *mean) * (x - *mean);
  *sd = std::sqrt(s2 / static_cast<double>(v.size()));
}

// Pearson correlation of a and b (same size, at least 2 elements).
double Correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; ++i) ma += a[i], mb += b[i];
  ma /= static_cast<double>(n);
  mb /= static_cast<double>(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

// The independence part of the random-op contract (fleet_kernels.h): a tensor drawn with another
// seed, and each element and its neighbour, are uncorrelated. With n samples the correlation of
// independent draws has standard error 1/sqrt(n); 5 of them is the bound.
void ExpectIndependent(const HostTensor& a, const HostTensor& other_seed) {
  std::vector<double> x = Values<double>(Cast(a, ir::DataType::kFloat64));
  std::vector<double> y = Values<double>(Cast(other_seed, ir::DataType::kFloat64));
  ASSERT_GE(x.size(), 10000u);
  ASSERT_EQ(x.size(), y.size());
  const double bound = 5.0 / std::sqrt(static_cast<double>(x.size()));
  EXPECT_LT(std::fabs(Correlation(x, y)), bound) << "draws of two seeds are correlated";
  std::vector<double> head(x.begin(), x.end() - 1), tail(x.begin() + 1, x.end());
  EXPECT_LT(std::fabs(Correlation(head, tail)), bound) << "neighbouring elements are correlated";
}

// ---- the statistical level: what every device's random kernels must meet ----------------------

TEST(TensorConformance, UniformRandom) {
  FLEET_CONFORMANCE_RUNNER(runner);
  using D = ir::DataType;
  // min > max is rejected (by the host, before any kernel).
  {
    VarMap vars;
    Status s = runner->Run(Uniform({4}, D::kFloat32, 1.0f, -1.0f, 1), vars);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.ToString().find("greater than max"), std::string::npos) << s.ToString();
  }
  // seed 0 takes the executor's per-op seed, which differs between ops of one program.
  FLEET_RUN_RANDOM(s1, *runner, Uniform({20000}, D::kFloat32, -1, 1, 0), 77);
  FLEET_RUN_RANDOM(s2, *runner, Uniform({20000}, D::kFloat32, -1, 1, 0), 77);
  FLEET_RUN_RANDOM(s3, *runner, Uniform({20000}, D::kFloat32, -1, 1, 0), 78);
  EXPECT_EQ(s1.bytes, s2.bytes);
  EXPECT_NE(s1.bytes, s3.bytes);
  ExpectIndependent(s1, s3);
  FLEET_RUN_RANDOM(s4, *runner, Uniform({20000}, D::kFloat32, -1, 1, 77), 5);
  EXPECT_EQ(s1.bytes, s4.bytes) << "seed attr 77 and executor seed 77 should agree";
  for (D dtype : {D::kFloat32, D::kFloat64}) {
    SCOPED_TRACE(ir::DataTypeName(dtype));
    FLEET_RUN_RANDOM(a, *runner, Uniform({200, 500}, dtype, -0.5f, 2.0f, 7));
    FLEET_RUN_RANDOM(b, *runner, Uniform({200, 500}, dtype, -0.5f, 2.0f, 7));
    FLEET_RUN_RANDOM(c, *runner, Uniform({200, 500}, dtype, -0.5f, 2.0f, 8));
    ASSERT_EQ(a.dims, (std::vector<int64_t>{200, 500}));
    ASSERT_EQ(a.dtype, dtype);
    EXPECT_EQ(a.bytes, b.bytes) << "same seed, different values";
    EXPECT_NE(a.bytes, c.bytes) << "different seeds, same values";
    std::vector<double> v = Values<double>(Cast(a, D::kFloat64));
    EXPECT_GE(*std::min_element(v.begin(), v.end()), -0.5);
    EXPECT_LT(*std::max_element(v.begin(), v.end()), 2.0);
    double mean = 0, sd = 0;
    Moments(a, &mean, &sd);
    EXPECT_NEAR(mean, 0.75, 0.02);                     // standard error ~0.0023
    EXPECT_NEAR(sd, 2.5 / std::sqrt(12.0), 0.01);
    ExpectIndependent(a, c);
  }
}

TEST(TensorConformance, UniformRandomDiagonal) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = Uniform({3, 4}, ir::DataType::kFloat32, 5.0f, 6.0f, 3);
  op.attrs["diag_num"] = int32_t{3};
  op.attrs["diag_step"] = int32_t{4};
  op.attrs["diag_val"] = 1.0f;
  FLEET_RUN_RANDOM(t, *runner, op);
  std::vector<float> v = Values<float>(t);
  ASSERT_EQ(v.size(), 12u);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 5 == 0) EXPECT_EQ(v[i], 1.0f) << i;  // positions i * diag_step + i
    else EXPECT_TRUE(v[i] >= 5.0f && v[i] < 6.0f) << i << ": " << v[i];
  }
}

TEST(TensorConformance, GaussianRandom) {
  FLEET_CONFORMANCE_RUNNER(runner);
  using D = ir::DataType;
  for (D dtype : {D::kFloat32, D::kFloat64}) {
    SCOPED_TRACE(ir::DataTypeName(dtype));
    FLEET_RUN_RANDOM(a, *runner, Gaussian({100001}, dtype, 1.5f, 0.25f, 5));
    FLEET_RUN_RANDOM(b, *runner, Gaussian({100001}, dtype, 1.5f, 0.25f, 5));
    FLEET_RUN_RANDOM(c, *runner, Gaussian({100001}, dtype, 1.5f, 0.25f, 6));
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_NE(a.bytes, c.bytes);
    double mean = 0, sd = 0;
    Moments(a, &mean, &sd);
    EXPECT_NEAR(mean, 1.5, 0.005);  // standard error ~0.0008
    EXPECT_NEAR(sd, 0.25, 0.005);
    // Roughly 68.3% within one std.
    std::vector<double> v = Values<double>(Cast(a, D::kFloat64));
    const double inside = static_cast<double>(std::count_if(
        v.begin(), v.end(), [](double x) { return std::fabs(x - 1.5) < 0.25; }));
    EXPECT_NEAR(inside / static_cast<double>(v.size()), 0.6827, 0.01);
    ExpectIndependent(a, c);
  }
  VarMap vars;
  Status s = runner->Run(Gaussian({4}, D::kFloat32, 0, -1, 1), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("negative"), std::string::npos) << s.ToString();
  s = runner->Run(Gaussian({4}, D::kInt64, 0, 1, 1), vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("use float32 (9) or float64 (10)"), std::string::npos)
      << s.ToString();
}

ir::Op TruncatedGaussian(std::vector<int64_t> shape, ir::DataType dtype, int32_t seed) {
  ir::Op o = Gaussian(std::move(shape), dtype, -1.0f, 0.5f, seed);
  o.type = "truncated_gaussian_random";
  return o;
}

TEST(TensorConformance, TruncatedGaussianRandom) {
  FLEET_CONFORMANCE_RUNNER(runner);
  using D = ir::DataType;
  FLEET_RUN_RANDOM(a, *runner, TruncatedGaussian({50000}, D::kFloat64, 3));
  FLEET_RUN_RANDOM(b, *runner, TruncatedGaussian({50000}, D::kFloat64, 3));
  FLEET_RUN_RANDOM(c, *runner, TruncatedGaussian({50000}, D::kFloat64, 4));
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_NE(a.bytes, c.bytes);
  std::vector<double> v = Values<double>(a);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -2.0);
  EXPECT_LE(*std::max_element(v.begin(), v.end()), 0.0);
  double mean = 0, sd = 0;
  Moments(a, &mean, &sd);
  EXPECT_NEAR(mean, -1.0, 0.01);
  EXPECT_NEAR(sd, 0.5 * 0.8796, 0.01);  // std of a standard normal truncated to [-2, 2]
  ExpectIndependent(a, c);
}

// ---- the stream-exact level: only for devices that declare the CPU's streams ------------------

TEST(TensorConformance, RandomStreamsMatchTheCpuPlugin) {
  FLEET_CONFORMANCE_RUNNER(runner);
  FLEET_CONFORMANCE_REQUIRE_BITWISE_RANDOM(runner);
  using D = ir::DataType;
  // The documented streams (plugins/common/random_draws.h), computed independently in NumPy.
  for (D dtype : {D::kFloat32, D::kFloat64}) {
    SCOPED_TRACE(ir::DataTypeName(dtype));
    ExpectMatchesNumpy(*runner, Uniform({7, 9}, dtype, -0.5f, 2.0f, 11), {}, "", 0.0);
    ExpectMatchesNumpy(*runner, Gaussian({5, 7}, dtype, 1.5f, 0.25f, 9), {}, "",
                       dtype == D::kFloat32 ? 1e-6 : 1e-12);
  }
  ExpectMatchesNumpy(*runner, TruncatedGaussian({4, 9}, D::kFloat64, 12), {}, "", 1e-12);
  ExpectMatchesNumpy(*runner, TruncatedGaussian({3, 3}, D::kFloat32, 13), {}, "", 1e-6);
}

// ---- range ----------------------------------------------------------------------------------

ir::Op RangeOp() {
  return MakeOp("range", {{"Start", {"start"}}, {"End", {"end"}}, {"Step", {"step"}}},
                {{"Out", {"out"}}});
}

template <typename T>
VarMap RangeVars(T start, T end, T step) {
  return {{"start", MakeTensor<T>({1}, {start})},
          {"end", MakeTensor<T>({1}, {end})},
          {"step", MakeTensor<T>({1}, {step})}};
}

TEST(TensorConformance, RangeMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ExpectMatchesNumpy(*runner, RangeOp(), RangeVars<int64_t>(0, 10, 1));
  ExpectMatchesNumpy(*runner, RangeOp(), RangeVars<int64_t>(7, -8, -3));
  ExpectMatchesNumpy(*runner, RangeOp(), RangeVars<int32_t>(-5, 6, 4));
  ExpectMatchesNumpy(*runner, RangeOp(), RangeVars<float>(0.5f, 3.0f, 0.1f));
  ExpectMatchesNumpy(*runner, RangeOp(), RangeVars<double>(1.0, -2.0, -0.3));
  ExpectMatchesNumpy(*runner, RangeOp(), RangeVars<float>(1e6f, 1.0001e6f, 0.37f));
  // Start == End is an empty range.
  VarMap empty = RangeVars<int64_t>(3, 3, 1);
  ASSERT_TRUE(runner->Run(RangeOp(), empty).ok());
  EXPECT_EQ(empty.at("out").dims, std::vector<int64_t>{0});
  VarMap shape = RangeVars<float>(0.0f, 1.0f, 0.25f);
  ASSERT_TRUE(runner->Run(RangeOp(), shape).ok());
  EXPECT_EQ(shape.at("out").dims, std::vector<int64_t>{4});
}

TEST(TensorConformance, RangeRefusesBadBounds) {
  FLEET_CONFORMANCE_RUNNER(runner);
  EXPECT_NE(RunError(*runner, RangeOp(), RangeVars<int64_t>(0, 10, 0)).find("non-zero"),
            std::string::npos);
  EXPECT_NE(RunError(*runner, RangeOp(), RangeVars<int64_t>(0, 10, -1)).find("moves away"),
            std::string::npos);
  EXPECT_NE(RunError(*runner, RangeOp(), RangeVars<double>(0, 1e12, 1e-3)).find("more than"),
            std::string::npos);
  VarMap mixed = RangeVars<int64_t>(0, 4, 1);
  mixed["step"] = MakeTensor<int32_t>({1}, {1});
  EXPECT_NE(RunError(*runner, RangeOp(), mixed).find("Step must have Start's dtype"),
            std::string::npos);
}

}  // namespace
}  // namespace fleet::conformance
