// Conformance of the shape and indexing ops: unsqueeze2, squeeze2, tril_triu, gather,
// expand_v2, tile, stack, unstack, index_select, one_hot_v2, flip, roll, expand_as_v2,
// gather_nd, scatter, strided_slice, pad3d and pad. Forward results against NumPy
// (ref/ref_index.py), every gradient against finite differences in float64, float32 against
// float64 for the summing grads, bad shapes and attributes refused at shape inference or
// prepare, and out-of-range indices refused at launch with the op, the index slot, the
// position, the value and the bound named.
#include <string>

#include "harness.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"

namespace fleet::conformance {
namespace {

using Ints = std::vector<int32_t>;
using Longs = std::vector<int64_t>;

// Runs `op` and its NumPy reference; every output slot of the op must match within `tol`.
void ExpectMatchesNumpy(OpRunner& runner, const ir::Op& op, VarMap vars, double tol = 0.0) {
  Status s = runner.Run(op, vars);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto ref = NumpyReference(op.type, op, vars);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (const auto& [slot, names] : op.outputs) {
    ASSERT_TRUE(ref->count(slot)) << "reference gives no " << slot;
    const auto& expected = ref->at(slot);
    ASSERT_EQ(expected.size(), names.size()) << slot;
    for (size_t i = 0; i < names.size(); ++i) {
      const HostTensor& actual = vars.at(names[i]);
      EXPECT_EQ(actual.dtype, expected[i].dtype) << op.type << " " << slot << "[" << i << "]";
      EXPECT_EQ(actual.dims, expected[i].dims) << op.type << " " << slot << "[" << i << "]";
      EXPECT_TRUE(AllClose(actual, expected[i], tol, tol))
          << op.type << " " << slot << "[" << i << "]";
    }
  }
}

// The error text of running `op`, or "" when it succeeds.
std::string RunError(OpRunner& runner, const ir::Op& op, VarMap vars) {
  Status s = runner.Run(op, vars);
  return s.ok() ? std::string() : s.ToString();
}

#define EXPECT_MENTIONS(text, what) \
  EXPECT_NE((text).find(what), std::string::npos) << "expected \"" << (what) << "\" in: " << (text)

HostTensor Iota(std::vector<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i * 3 - 7;
  return MakeTensor<int64_t>(std::move(dims), v);
}

HostTensor Ids32(std::vector<int64_t> dims, const std::vector<int32_t>& v) {
  return MakeTensor<int32_t>(std::move(dims), v);
}
HostTensor Ids64(std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  return MakeTensor<int64_t>(std::move(dims), v);
}

struct VarDecl {
  std::string name;
  ir::DataType dtype;
  std::vector<int64_t> dims;
};

// Output shapes inferred for `op` over the declared vars, or the error.
StatusOr<ops::SlotInfos> InferWith(const ir::Op& op, const std::vector<VarDecl>& vars) {
  ir::Program p;
  for (const VarDecl& d : vars) {
    ir::Var v;
    v.name = d.name;
    v.dtype = d.dtype;
    v.shape = d.dims;
    FLEET_RETURN_IF_ERROR(p.global().AddVar(v).status());
  }
  return ops::InferOpShapes(ops::BuiltinOps(), p, 0, op);
}

// Output shapes inferred for `op` over x with dims `x_dims` (float32), or the error.
StatusOr<ops::SlotInfos> Infer(const ir::Op& op, std::vector<int64_t> x_dims) {
  return InferWith(op, {{"x", ir::DataType::kFloat32, std::move(x_dims)}});
}

// Runs grad op `grad` (from the schema's rule for `fwd`) with float64 and with float32 inputs;
// the two X@GRADs must agree within float32 rounding.
void ExpectGradFloat32MatchesFloat64(OpRunner& runner, const ir::Op& fwd, VarMap vars,
                                     const std::string& out_grad_var,
                                     const std::string& in_grad_var) {
  const auto grads = ops::BuiltinOps().Find(fwd.type)->grad(fwd);
  ASSERT_EQ(grads.size(), 1u);
  VarMap v64 = vars, v32;
  for (const auto& [name, t] : vars) {
    v32[name] = t.dtype == ir::DataType::kFloat64 ? Cast(t, ir::DataType::kFloat32) : t;
  }
  Status s = runner.Run(grads[0], v64);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = runner.Run(grads[0], v32);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(v32.count(in_grad_var)) << in_grad_var;
  EXPECT_EQ(v32.at(in_grad_var).dtype, ir::DataType::kFloat32);
  EXPECT_TRUE(AllClose(Cast(v32.at(in_grad_var), ir::DataType::kFloat64), v64.at(in_grad_var),
                       1e-5, 1e-5))
      << grads[0].type << " from " << out_grad_var;
}

// ---- unsqueeze2 / squeeze2 ------------------------------------------------------------------

ir::Op Unsqueeze(Ints axes) {
  return MakeOp("unsqueeze2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                {{"axes", axes}});
}
ir::Op Squeeze(Ints axes) {
  return MakeOp("squeeze2", {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xs"}}},
                {{"axes", axes}});
}

TEST(IndexConformance, Unsqueeze2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const Ints& axes : {Ints{0}, Ints{1}, Ints{-1}, Ints{0, 0}, Ints{0, 3}, Ints{-1, -1},
                           Ints{2, 0, -2}}) {
    SCOPED_TRACE(testing::Message() << "axes " << axes.size() << " first " << axes[0]);
    ExpectMatchesNumpy(*runner, Unsqueeze(axes), {{"x", RandomTensor<float>({2, 3}, 1)}});
  }
  ExpectMatchesNumpy(*runner, Unsqueeze({1}), {{"x", Iota({4, 2})}});
  ExpectMatchesNumpy(*runner, Unsqueeze({0}), {{"x", RandomTensor<double>({0, 3}, 2)}});
}

TEST(IndexConformance, Squeeze2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({1, 3, 1, 2, 1}, 3)}};
  for (const Ints& axes : {Ints{}, Ints{0}, Ints{2}, Ints{-1}, Ints{0, -1}, Ints{1}, Ints{1, 2}}) {
    SCOPED_TRACE(testing::Message() << "axes size " << axes.size());
    ExpectMatchesNumpy(*runner, Squeeze(axes), vars);
  }
  ExpectMatchesNumpy(*runner, Squeeze({}), {{"x", Iota({1, 1})}});
}

TEST(IndexConformance, SqueezeUnsqueezeShapesAndErrors) {
  auto out = Infer(Unsqueeze({0, -1}), {-1, 4});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("Out")[0].dims, (Longs{1, -1, 4, 1}));
  EXPECT_EQ(out->at("XShape")[0].dims, (Longs{0, -1, 4}));
  out = Infer(Squeeze({}), {-1, 1, 4});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at("Out")[0].dims, (Longs{-1, 4}));
  // Whether an unknown dim is 1 cannot be known before run time.
  out = Infer(Squeeze({0}), {-1, 1, 4});
  ASSERT_FALSE(out.ok());
  EXPECT_MENTIONS(out.status().ToString(), "squeeze2");
  EXPECT_MENTIONS(out.status().ToString(), "unknown before run time");
  out = Infer(Unsqueeze({4}), {2, 3});
  ASSERT_FALSE(out.ok());
  EXPECT_MENTIONS(out.status().ToString(), "unsqueeze2: axes[0] = 4 is out of range");
  out = Infer(Squeeze({-4}), {2, 3});
  ASSERT_FALSE(out.ok());
  EXPECT_MENTIONS(out.status().ToString(), "squeeze2: axes[0] = -4 is out of range");
}

TEST(IndexConformance, SqueezeUnsqueezeGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  EXPECT_TRUE(CheckGradients(*runner, Unsqueeze({1, -1}),
                             {{"x", RandomTensor<double>({2, 3}, 4)}}, {}));
  EXPECT_TRUE(CheckGradients(*runner, Squeeze({}), {{"x", RandomTensor<double>({2, 1, 3}, 5)}},
                             {}));
}

// ---- tril_triu ------------------------------------------------------------------------------

ir::Op Tril(int32_t diagonal, bool lower) {
  return MakeOp("tril_triu", {{"X", {"x"}}}, {{"Out", {"out"}}},
                {{"diagonal", diagonal}, {"lower", lower}});
}

TEST(IndexConformance, TrilTriuMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (bool lower : {true, false}) {
    for (int32_t k : {0, -1, 2, -5, 7}) {
      SCOPED_TRACE(testing::Message() << "lower " << lower << " diagonal " << k);
      ExpectMatchesNumpy(*runner, Tril(k, lower), {{"x", RandomTensor<float>({4, 5}, 6)}});
      ExpectMatchesNumpy(*runner, Tril(k, lower), {{"x", RandomTensor<double>({2, 3, 5, 4}, 7)}});
    }
  }
  ExpectMatchesNumpy(*runner, Tril(1, true), {{"x", Iota({3, 4})}});
  ExpectMatchesNumpy(*runner, Tril(0, false), {{"x", RandomTensor<float>({0, 3, 3}, 8)}});
  // A causal mask of ones, as attention builds it.
  HostTensor ones = MakeTensor<float>({4, 4}, std::vector<float>(16, 1.0f));
  ExpectMatchesNumpy(*runner, Tril(0, true), {{"x", ones}});
}

TEST(IndexConformance, TrilTriuGradientAndErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  EXPECT_TRUE(CheckGradients(*runner, Tril(0, true), {{"x", RandomTensor<double>({3, 4}, 9)}},
                             {}));
  EXPECT_TRUE(CheckGradients(*runner, Tril(1, false),
                             {{"x", RandomTensor<double>({2, 3, 3}, 10)}}, {}));
  const std::string e = RunError(*runner, Tril(0, true), {{"x", RandomTensor<float>({5}, 1)}});
  EXPECT_MENTIONS(e, "tril_triu");
  EXPECT_MENTIONS(e, "rank >= 2");
}

// ---- gather / index_select ------------------------------------------------------------------

ir::Op Gather(int32_t axis) {
  return MakeOp("gather", {{"X", {"x"}}, {"Index", {"index"}}}, {{"Out", {"out"}}},
                {{"axis", axis}});
}
ir::Op IndexSelect(int32_t dim) {
  return MakeOp("index_select", {{"X", {"x"}}, {"Index", {"index"}}}, {{"Out", {"out"}}},
                {{"dim", dim}});
}

TEST(IndexConformance, GatherMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor x = RandomTensor<float>({5, 4, 3}, 11);
  ExpectMatchesNumpy(*runner, Gather(0), {{"x", x}, {"index", Ids64({4}, {4, 0, 4, 2})}});
  ExpectMatchesNumpy(*runner, Gather(1), {{"x", x}, {"index", Ids32({3}, {3, 3, 1})}});
  ExpectMatchesNumpy(*runner, Gather(-1), {{"x", x}, {"index", Ids64({2, 1}, {2, 0})}});
  ExpectMatchesNumpy(*runner, Gather(0), {{"x", Iota({6, 2})}, {"index", Ids32({2}, {5, 1})}});
  ExpectMatchesNumpy(*runner, Gather(1),
                     {{"x", RandomTensor<double>({2, 7}, 12)}, {"index", Ids64({0}, {})}});
}

TEST(IndexConformance, IndexSelectMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor x = RandomTensor<double>({3, 6, 2}, 13);
  ExpectMatchesNumpy(*runner, IndexSelect(1), {{"x", x}, {"index", Ids64({5}, {5, 0, 1, 0, 3})}});
  ExpectMatchesNumpy(*runner, IndexSelect(-3), {{"x", x}, {"index", Ids32({2}, {2, 2})}});
  ExpectMatchesNumpy(*runner, IndexSelect(0), {{"x", Iota({4})}, {"index", Ids32({3}, {3, 0, 1})}});
}

TEST(IndexConformance, GatherAndIndexSelectGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Repeated indices accumulate; rows never picked get zero.
  VarMap a{{"x", RandomTensor<double>({5, 3}, 14)}, {"index", Ids64({5}, {1, 3, 1, 1, 0})}};
  EXPECT_TRUE(CheckGradients(*runner, Gather(0), a, {}));
  VarMap b{{"x", RandomTensor<double>({2, 4, 3}, 15)}, {"index", Ids32({4}, {3, 0, 3, 2})}};
  EXPECT_TRUE(CheckGradients(*runner, Gather(1), b, {}));
  EXPECT_TRUE(CheckGradients(*runner, IndexSelect(-1), {{"x", RandomTensor<double>({3, 4}, 16)},
                                                        {"index", Ids64({3}, {0, 0, 3})}},
                             {}));
  VarMap c = b;
  c["out@GRAD"] = RandomTensor<double>({2, 4, 3}, 17);
  ExpectGradFloat32MatchesFloat64(*runner, Gather(1), c, "out@GRAD", "x@GRAD");
}

TEST(IndexConformance, GatherRefusesOutOfRangeIndices) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({5, 3}, 18)}, {"index", Ids64({3}, {1, 5, 0})}};
  std::string e = RunError(*runner, Gather(0), vars);
  EXPECT_MENTIONS(e, "gather: Index[1] = 5 is out of range [0, 5)");
  vars["index"] = Ids32({2}, {0, -1});
  e = RunError(*runner, IndexSelect(0), vars);
  EXPECT_MENTIONS(e, "index_select: Index[1] = -1 is out of range [0, 5)");
  // The grad checks its indices too.
  ir::Op grad = ops::BuiltinOps().Find("gather")->grad(Gather(1))[0];
  VarMap g{{"x", RandomTensor<float>({5, 3}, 19)}, {"index", Ids64({2}, {3, 0})},
           {"out@GRAD", RandomTensor<float>({5, 2}, 20)}};
  e = RunError(*runner, grad, g);
  EXPECT_MENTIONS(e, "gather_grad: Index[0] = 3 is out of range [0, 3)");
  // Shapes and dtypes are refused before anything runs.
  auto bad = Infer(MakeOp("gather", {{"X", {"x"}}, {"Index", {"x"}}}, {{"Out", {"out"}}}), {4});
  ASSERT_FALSE(bad.ok());
  EXPECT_MENTIONS(bad.status().ToString(), "gather: Index must be int32 or int64");
  e = RunError(*runner, Gather(2), {{"x", RandomTensor<float>({5, 3}, 18)},
                                     {"index", Ids64({1}, {0})}});
  EXPECT_MENTIONS(e, "gather: axis 2 is out of range");
}

// ---- expand_v2 / expand_as_v2 / tile --------------------------------------------------------

ir::Op Expand(Ints shape) {
  return MakeOp("expand_v2", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"shape", shape}});
}
ir::Op Tile(Ints reps) {
  return MakeOp("tile", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"repeat_times", reps}});
}

TEST(IndexConformance, ExpandV2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor x = RandomTensor<float>({3, 1}, 21);
  ExpectMatchesNumpy(*runner, Expand({3, 4}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Expand({-1, 5}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Expand({2, -1, 2}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Expand({2, 3, 1}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Expand({4, 2, 3}), {{"x", RandomTensor<double>({2, 1}, 22)}});
  ExpectMatchesNumpy(*runner, Expand({2, 3, 4}), {{"x", Iota({1, 4})}});
}

TEST(IndexConformance, TileMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor x = RandomTensor<float>({2, 3}, 23);
  for (const Ints& reps :
       {Ints{2, 1}, Ints{1, 3}, Ints{2, 2}, Ints{3}, Ints{2, 1, 2}, Ints{1, 1}}) {
    SCOPED_TRACE(testing::Message() << "repeat_times size " << reps.size());
    ExpectMatchesNumpy(*runner, Tile(reps), {{"x", x}});
  }
  ExpectMatchesNumpy(*runner, Tile({2, 1, 3}), {{"x", Iota({2, 1, 2})}});
}

TEST(IndexConformance, ExpandAsV2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op with_y = MakeOp("expand_as_v2", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
  ExpectMatchesNumpy(*runner, with_y, {{"x", RandomTensor<float>({1, 3}, 24)},
                                       {"y", RandomTensor<float>({2, 4, 3}, 25)}});
  ir::Op with_attr = MakeOp("expand_as_v2", {{"X", {"x"}}}, {{"Out", {"out"}}},
                            {{"target_shape", Ints{2, 3}}});
  ExpectMatchesNumpy(*runner, with_attr, {{"x", RandomTensor<double>({3}, 26)}});
  EXPECT_TRUE(CheckGradients(*runner, with_y,
                             {{"x", RandomTensor<double>({1, 3}, 27)},
                              {"y", RandomTensor<double>({2, 4, 3}, 28)}},
                             {}));
}

TEST(IndexConformance, RepeatGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  EXPECT_TRUE(CheckGradients(*runner, Expand({2, 3, 4}),
                             {{"x", RandomTensor<double>({3, 1}, 29)}}, {}));
  EXPECT_TRUE(CheckGradients(*runner, Expand({-1, 3}), {{"x", RandomTensor<double>({2, 1}, 30)}},
                             {}));
  EXPECT_TRUE(CheckGradients(*runner, Tile({2, 1, 3}), {{"x", RandomTensor<double>({2, 3}, 31)}},
                             {}));
  EXPECT_TRUE(CheckGradients(*runner, Tile({3}), {{"x", RandomTensor<double>({2, 2}, 32)}}, {}));
  // Long sums: float32 and float64 agree.
  VarMap e{{"x", RandomTensor<double>({1, 7}, 33)},
           {"out@GRAD", RandomTensor<double>({300, 7}, 34)}};
  ExpectGradFloat32MatchesFloat64(*runner, Expand({300, 7}), e, "out@GRAD", "x@GRAD");
  VarMap t{{"x", RandomTensor<double>({3, 2}, 35)},
           {"out@GRAD", RandomTensor<double>({150, 8}, 36)}};
  ExpectGradFloat32MatchesFloat64(*runner, Tile({50, 4}), t, "out@GRAD", "x@GRAD");
}

TEST(IndexConformance, RepeatErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({3, 2}, 37)}};
  std::string e = RunError(*runner, Expand({3, 4}), vars);
  EXPECT_MENTIONS(e, "expand_v2");
  EXPECT_MENTIONS(e, "cannot expand");
  e = RunError(*runner, Expand({2}), vars);
  EXPECT_MENTIONS(e, "fewer dims than X");
  e = RunError(*runner, Expand({-1, -1, 2}), vars);
  EXPECT_MENTIONS(e, "shape[0] is -1");
  e = RunError(*runner, Tile({0, 1}), vars);
  EXPECT_MENTIONS(e, "tile");
  EXPECT_MENTIONS(e, "must be positive");
  e = RunError(*runner, Tile({1, 1, 1, 1, 1, 1, 2}), vars);
  EXPECT_MENTIONS(e, "exceeds the supported rank 6");
  auto inferred = Infer(Tile({2, 3}), {-1, 2});
  ASSERT_TRUE(inferred.ok()) << inferred.status().ToString();
  EXPECT_EQ(inferred->at("Out")[0].dims, (Longs{-1, 6}));
  inferred = Infer(Expand({-1, 4, 2}), {-1, 1, 2});
  ASSERT_TRUE(inferred.ok()) << inferred.status().ToString();
  EXPECT_EQ(inferred->at("Out")[0].dims, (Longs{-1, 4, 2}));
}

// ---- stack / unstack ------------------------------------------------------------------------

ir::Op Stack(int32_t axis, size_t n) {
  std::vector<std::string> xs;
  for (size_t i = 0; i < n; ++i) xs.push_back("x" + std::to_string(i));
  return MakeOp("stack", {{"X", xs}}, {{"Y", {"y"}}}, {{"axis", axis}});
}
ir::Op Unstack(int32_t axis, int32_t num) {
  std::vector<std::string> ys;
  for (int32_t i = 0; i < num; ++i) ys.push_back("y" + std::to_string(i));
  return MakeOp("unstack", {{"X", {"x"}}}, {{"Y", ys}}, {{"axis", axis}, {"num", num}});
}

TEST(IndexConformance, StackAndUnstackMatchNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (int32_t axis : {0, 1, 2, -1, -3}) {
    SCOPED_TRACE(testing::Message() << "axis " << axis);
    ExpectMatchesNumpy(*runner, Stack(axis, 3),
                       {{"x0", RandomTensor<float>({2, 3}, 40)},
                        {"x1", RandomTensor<float>({2, 3}, 41)},
                        {"x2", RandomTensor<float>({2, 3}, 42)}});
  }
  ExpectMatchesNumpy(*runner, Stack(0, 1), {{"x0", Iota({4})}});
  const HostTensor x = RandomTensor<double>({2, 3, 4}, 43);
  ExpectMatchesNumpy(*runner, Unstack(0, 2), {{"x", x}});
  ExpectMatchesNumpy(*runner, Unstack(1, 3), {{"x", x}});
  ExpectMatchesNumpy(*runner, Unstack(-1, 4), {{"x", x}});
  ExpectMatchesNumpy(*runner, Unstack(1, 2), {{"x", Iota({3, 2})}});
}

TEST(IndexConformance, StackAndUnstackGradientsAndErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  EXPECT_TRUE(CheckGradients(*runner, Stack(1, 2),
                             {{"x0", RandomTensor<double>({2, 3}, 44)},
                              {"x1", RandomTensor<double>({2, 3}, 45)}},
                             {}));
  EXPECT_TRUE(CheckGradients(*runner, Unstack(-1, 3), {{"x", RandomTensor<double>({2, 3}, 46)}},
                             {}));
  std::string e = RunError(*runner, Stack(0, 2),
                           {{"x0", RandomTensor<float>({2, 3}, 47)},
                            {"x1", RandomTensor<float>({3, 2}, 48)}});
  EXPECT_MENTIONS(e, "stack: X[1] [3, 2] differs from X[0] [2, 3]");
  e = RunError(*runner, Stack(3, 1), {{"x0", RandomTensor<float>({2, 3}, 47)}});
  EXPECT_MENTIONS(e, "stack: axis 3 is out of range [-3, 2]");
  e = RunError(*runner, Unstack(0, 3), {{"x", RandomTensor<float>({2, 3}, 49)}});
  EXPECT_MENTIONS(e, "unstack: num = 3");
}

// ---- one_hot_v2 -----------------------------------------------------------------------------

ir::Op OneHot(int32_t depth, bool allow = false, int32_t dtype = FLEET_DTYPE_FLOAT32) {
  return MakeOp("one_hot_v2", {{"X", {"x"}}}, {{"Out", {"out"}}},
                {{"depth", depth}, {"allow_out_of_range", allow}, {"dtype", dtype}});
}

TEST(IndexConformance, OneHotV2MatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ExpectMatchesNumpy(*runner, OneHot(5), {{"x", RandomInts({3, 4}, 50, 0, 5)}});
  ExpectMatchesNumpy(*runner, OneHot(3), {{"x", Ids32({4, 1}, {2, 0, 1, 2})}});
  ExpectMatchesNumpy(*runner, OneHot(4, false, FLEET_DTYPE_FLOAT64),
                     {{"x", Ids64({3}, {3, 3, 0})}});
  ExpectMatchesNumpy(*runner, OneHot(3, true), {{"x", Ids64({4}, {0, 3, -1, 2})}});
}

TEST(IndexConformance, OneHotV2RefusesOutOfRange) {
  FLEET_CONFORMANCE_RUNNER(runner);
  std::string e = RunError(*runner, OneHot(3), {{"x", Ids64({4}, {0, 1, 3, 2})}});
  EXPECT_MENTIONS(e, "one_hot_v2: X[2] = 3 is out of range [0, 3)");
  e = RunError(*runner, OneHot(0), {{"x", Ids64({1}, {0})}});
  EXPECT_MENTIONS(e, "one_hot_v2: depth must be positive");
  e = RunError(*runner, OneHot(3), {{"x", RandomTensor<float>({2}, 51)}});
  EXPECT_MENTIONS(e, "one_hot_v2: X must be int32 or int64");
}

// ---- flip / roll ----------------------------------------------------------------------------

ir::Op Flip(Ints axis) {
  return MakeOp("flip", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"axis", axis}});
}
ir::Op Roll(Longs shifts, Longs axis) {
  return MakeOp("roll", {{"X", {"x"}}}, {{"Out", {"out"}}},
                {{"shifts", shifts}, {"axis", axis}});
}

TEST(IndexConformance, FlipMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor x = RandomTensor<float>({2, 3, 4}, 52);
  for (const Ints& axis : {Ints{0}, Ints{1}, Ints{-1}, Ints{0, 2}, Ints{0, 1, 2}, Ints{1, 2}}) {
    SCOPED_TRACE(testing::Message() << "axes " << axis.size() << " first " << axis[0]);
    ExpectMatchesNumpy(*runner, Flip(axis), {{"x", x}});
  }
  ExpectMatchesNumpy(*runner, Flip({0}), {{"x", Iota({5})}});
  ExpectMatchesNumpy(*runner, Flip({1}), {{"x", RandomTensor<double>({0, 3}, 53)}});
  EXPECT_TRUE(CheckGradients(*runner, Flip({0, -1}), {{"x", RandomTensor<double>({3, 2, 2}, 54)}},
                             {}));
  std::string e = RunError(*runner, Flip({0, -2}), {{"x", RandomTensor<float>({2, 3}, 55)}});
  EXPECT_MENTIONS(e, "flip: axis [0, -2] names dim 0 twice");
}

TEST(IndexConformance, RollMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor x = RandomTensor<float>({3, 4, 2}, 56);
  ExpectMatchesNumpy(*runner, Roll({1}, {0}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Roll({-1}, {1}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Roll({9}, {-2}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Roll({1, 3}, {0, 1}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Roll({2, 1}, {1, 1}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Roll({5}, {}), {{"x", x}});
  ExpectMatchesNumpy(*runner, Roll({-7}, {}), {{"x", Iota({2, 5})}});
  EXPECT_TRUE(CheckGradients(*runner, Roll({1, -2}, {0, 2}),
                             {{"x", RandomTensor<double>({3, 2, 4}, 57)}}, {}));
  EXPECT_TRUE(CheckGradients(*runner, Roll({3}, {}), {{"x", RandomTensor<double>({2, 3}, 58)}},
                             {}));
  std::string e = RunError(*runner, Roll({1, 2}, {0}), {{"x", x}});
  EXPECT_MENTIONS(e, "roll: shifts [1, 2] and axis [0] must have the same length");
}

// ---- gather_nd ------------------------------------------------------------------------------

ir::Op GatherNd() {
  return MakeOp("gather_nd", {{"X", {"x"}}, {"Index", {"index"}}}, {{"Out", {"out"}}});
}

TEST(IndexConformance, GatherNdMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor x = RandomTensor<float>({3, 4, 2}, 60);
  ExpectMatchesNumpy(*runner, GatherNd(), {{"x", x}, {"index", Ids64({2, 1}, {2, 0})}});
  ExpectMatchesNumpy(*runner, GatherNd(),
                     {{"x", x}, {"index", Ids32({3, 2}, {0, 3, 2, 1, 0, 3})}});
  ExpectMatchesNumpy(*runner, GatherNd(),
                     {{"x", x}, {"index", Ids64({2, 2, 3}, {0, 0, 1, 2, 3, 0, 1, 1, 1, 2, 0, 0})}});
  ExpectMatchesNumpy(*runner, GatherNd(), {{"x", Iota({3, 3})}, {"index", Ids64({2, 1}, {1, 1})}});
}

TEST(IndexConformance, GatherNdGradientAndErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  EXPECT_TRUE(CheckGradients(*runner, GatherNd(),
                             {{"x", RandomTensor<double>({3, 4, 2}, 61)},
                              {"index", Ids64({4, 2}, {0, 3, 2, 1, 0, 3, 0, 3})}},
                             {}));
  std::string e = RunError(*runner, GatherNd(),
                           {{"x", RandomTensor<float>({3, 4}, 62)},
                            {"index", Ids64({2, 2}, {0, 1, 1, 4})}});
  EXPECT_MENTIONS(e, "gather_nd: Index[3] = 4 is out of range [0, 4)");
  e = RunError(*runner, GatherNd(),
               {{"x", RandomTensor<float>({3, 4}, 62)}, {"index", Ids64({1, 3}, {0, 0, 0})}});
  EXPECT_MENTIONS(e, "gather_nd: Index [1, 3] addresses 3 dims but X [3, 4] has only 2");
}

// ---- scatter --------------------------------------------------------------------------------

ir::Op Scatter(bool overwrite) {
  return MakeOp("scatter", {{"X", {"x"}}, {"Ids", {"ids"}}, {"Updates", {"up"}}},
                {{"Out", {"out"}}}, {{"overwrite", overwrite}});
}

TEST(IndexConformance, ScatterMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (bool overwrite : {true, false}) {
    SCOPED_TRACE(testing::Message() << "overwrite " << overwrite);
    // Duplicates: the last wins (overwrite) or they add up.
    ExpectMatchesNumpy(*runner, Scatter(overwrite),
                       {{"x", RandomTensor<float>({5, 3}, 63)},
                        {"ids", Ids64({4}, {3, 1, 3, 0})},
                        {"up", RandomTensor<float>({4, 3}, 64)}},
                       1e-6);
    ExpectMatchesNumpy(*runner, Scatter(overwrite),
                       {{"x", RandomTensor<double>({4, 2, 2}, 65)},
                        {"ids", Ids32({2}, {2, 2})},
                        {"up", RandomTensor<double>({2, 2, 2}, 66)}},
                       1e-12);
    ExpectMatchesNumpy(*runner, Scatter(overwrite),
                       {{"x", Iota({4})}, {"ids", Ids64({3}, {0, 3, 0})}, {"up", Iota({3})}});
  }
}

TEST(IndexConformance, ScatterGradientAndErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Overwrite with distinct ids, and accumulation with repeated ones, are differentiable as
  // Paddle's rule says.
  EXPECT_TRUE(CheckGradients(*runner, Scatter(true),
                             {{"x", RandomTensor<double>({5, 3}, 67)},
                              {"ids", Ids64({3}, {4, 0, 2})},
                              {"up", RandomTensor<double>({3, 3}, 68)}},
                             {}));
  EXPECT_TRUE(CheckGradients(*runner, Scatter(false),
                             {{"x", RandomTensor<double>({4, 2}, 69)},
                              {"ids", Ids32({4}, {1, 3, 1, 1})},
                              {"up", RandomTensor<double>({4, 2}, 70)}},
                             {}));
  std::string e = RunError(*runner, Scatter(true),
                           {{"x", RandomTensor<float>({3, 2}, 71)},
                            {"ids", Ids64({2}, {0, 3})},
                            {"up", RandomTensor<float>({2, 2}, 72)}});
  EXPECT_MENTIONS(e, "scatter: Ids[1] = 3 is out of range [0, 3)");
  e = RunError(*runner, Scatter(true),
               {{"x", RandomTensor<float>({3, 2}, 71)},
                {"ids", Ids64({2}, {0, 1})},
                {"up", RandomTensor<float>({2, 3}, 72)}});
  EXPECT_MENTIONS(e, "scatter: Updates [2, 3] must be");
}

// ---- strided_slice --------------------------------------------------------------------------

ir::Op StridedSlice(Ints axes, Ints starts, Ints ends, Ints strides, Ints decrease = {}) {
  return MakeOp("strided_slice", {{"Input", {"x"}}}, {{"Out", {"out"}}},
                {{"axes", axes},
                 {"starts", starts},
                 {"ends", ends},
                 {"strides", strides},
                 {"decrease_axis", decrease}});
}

TEST(IndexConformance, StridedSliceMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({5, 6, 4}, 80)}};
  ExpectMatchesNumpy(*runner, StridedSlice({0}, {1}, {5}, {2}), vars);
  ExpectMatchesNumpy(*runner, StridedSlice({1, 2}, {0, 3}, {6, 0}, {3, -1}), vars);
  ExpectMatchesNumpy(*runner, StridedSlice({0}, {4}, {-1}, {-1}), vars);    // through index 0
  ExpectMatchesNumpy(*runner, StridedSlice({1}, {10}, {-1}, {-2}), vars);   // start clamped
  ExpectMatchesNumpy(*runner, StridedSlice({-1}, {-3}, {100}, {1}), vars);  // negative axis
  ExpectMatchesNumpy(*runner, StridedSlice({0, 1}, {2, -2}, {3, -7}, {1, -2}, {0}), vars);
  ExpectMatchesNumpy(*runner, StridedSlice({0}, {2}, {2}, {1}), vars);  // empty
  ExpectMatchesNumpy(*runner, StridedSlice({1}, {5}, {0}, {-2}), {{"x", Iota({2, 7})}});
  EXPECT_TRUE(CheckGradients(*runner, StridedSlice({0, 2}, {4, 1}, {-1, 4}, {-2, 2}),
                             {{"x", RandomTensor<double>({5, 2, 4}, 81)}}, {}));
  std::string e = RunError(*runner, StridedSlice({0}, {3}, {1}, {1}), vars);
  EXPECT_MENTIONS(e, "strided_slice");
  EXPECT_MENTIONS(e, "wrong sides");
  e = RunError(*runner, StridedSlice({0}, {0}, {3}, {0}), vars);
  EXPECT_MENTIONS(e, "strided_slice: strides[0] is 0");
}

// ---- pad3d ----------------------------------------------------------------------------------

ir::Op Pad3d(Ints paddings, const std::string& mode, float value = 0.0f,
             const std::string& format = "NCDHW") {
  return MakeOp("pad3d", {{"X", {"x"}}}, {{"Out", {"out"}}},
                {{"paddings", paddings},
                 {"mode", mode},
                 {"value", value},
                 {"data_format", format}});
}

TEST(IndexConformance, Pad3dMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor x = RandomTensor<float>({2, 3, 2, 3, 4}, 90);
  for (const char* mode : {"constant", "reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    ExpectMatchesNumpy(*runner, Pad3d({1, 2, 0, 2, 1, 1}, mode, 0.5f), {{"x", x}});
    ExpectMatchesNumpy(*runner, Pad3d({3, 0, 1, 1, 0, 1}, mode, 0.0f, "NDHWC"),
                       {{"x", RandomTensor<double>({1, 2, 3, 4, 2}, 91)}});
    EXPECT_TRUE(CheckGradients(*runner, Pad3d({2, 1, 1, 0, 1, 1}, mode),
                               {{"x", RandomTensor<double>({1, 2, 2, 2, 3}, 92)}}, {}));
  }
  std::string e = RunError(*runner, Pad3d({4, 0, 0, 0, 0, 0}, "reflect"), {{"x", x}});
  EXPECT_MENTIONS(e, "pad3d: reflect paddings [4, 0, 0, 0, 0, 0] must be smaller");
  e = RunError(*runner, Pad3d({1, 1, 1, 1}, "constant"), {{"x", x}});
  EXPECT_MENTIONS(e, "pad3d: paddings [1, 1, 1, 1] must have 6 entries");
  e = RunError(*runner, Pad3d({0, 0, 0, 0, 0, 0}, "edge"), {{"x", x}});
  EXPECT_MENTIONS(e, "pad3d: mode must be");
  e = RunError(*runner, Pad3d({0, 0, 0, 0, 0, 0}, "constant"),
               {{"x", RandomTensor<float>({2, 3, 4}, 93)}});
  EXPECT_MENTIONS(e, "pad3d: X must be 5-D");
}

// ---- pad ------------------------------------------------------------------------------------

ir::Op Pad(Ints paddings, float value = 0.0f) {
  return MakeOp("pad", {{"X", {"x"}}}, {{"Out", {"out"}}},
                {{"paddings", paddings}, {"pad_value", value}});
}

TEST(IndexConformance, PadMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ExpectMatchesNumpy(*runner, Pad({1, 2, 0, 3}, 1.5f), {{"x", RandomTensor<float>({2, 3}, 94)}});
  ExpectMatchesNumpy(*runner, Pad({0, 0, 2, 1, 1, 1}),
                     {{"x", RandomTensor<double>({2, 3, 2}, 95)}});
  ExpectMatchesNumpy(*runner, Pad({1, 1}, -2.0f), {{"x", RandomTensor<float>({0}, 96)}});
  EXPECT_TRUE(CheckGradients(*runner, Pad({1, 0, 2, 1}, 3.0f),
                             {{"x", RandomTensor<double>({3, 2}, 97)}}, {}));
  std::string e = RunError(*runner, Pad({1, 1}), {{"x", RandomTensor<float>({2, 3}, 98)}});
  EXPECT_MENTIONS(e, "pad: paddings [1, 1] must have 2 entries per dim of X [2, 3]");
  e = RunError(*runner, Pad({1, -1, 0, 0}), {{"x", RandomTensor<float>({2, 3}, 98)}});
  EXPECT_MENTIONS(e, "pad: paddings [1, -1, 0, 0] must not be negative");
}

// ---- the batch dim before run time ---------------------------------------------------------

// An unknown (-1) batch dim flows through every op whose output keeps it.
TEST(IndexConformance, UnknownBatchPropagates) {
  using D = ir::DataType;
  const std::vector<VarDecl> vars = {{"x", D::kFloat32, {-1, 4, 3}},
                                     {"y", D::kFloat32, {-1, 4, 3}},
                                     {"v", D::kFloat32, {-1, 2, 3, 4, 5}},
                                     {"index", D::kInt64, {5}},
                                     {"ids", D::kInt64, {-1}},
                                     {"nd", D::kInt32, {-1, 2}}};
  struct Case {
    ir::Op op;
    std::string slot;
    Longs dims;
  };
  auto take = [](const char* type, const char* index, ir::AttrMap attrs) {
    return MakeOp(type, {{"X", {"x"}}, {"Index", {index}}}, {{"Out", {"out"}}}, attrs);
  };
  const std::vector<Case> cases = {
      {take("gather", "index", {{"axis", int32_t{1}}}), "Out", {-1, 5, 3}},
      {take("gather", "ids", {}), "Out", {-1, 4, 3}},
      {take("index_select", "index", {{"dim", int32_t{-1}}}), "Out", {-1, 4, 5}},
      {take("gather_nd", "nd", {}), "Out", {-1, 3}},
      {MakeOp("one_hot_v2", {{"X", {"ids"}}}, {{"Out", {"out"}}}, {{"depth", int32_t{7}}}),
       "Out", {-1, 7}},
      {MakeOp("stack", {{"X", {"x", "y"}}}, {{"Y", {"out"}}}, {{"axis", int32_t{1}}}), "Y",
       {-1, 2, 4, 3}},
      {Tril(0, true), "Out", {-1, 4, 3}},
      {Flip({0, 2}), "Out", {-1, 4, 3}},
      {MakeOp("strided_slice", {{"Input", {"x"}}}, {{"Out", {"out"}}},
              {{"axes", Ints{0, 1}}, {"starts", Ints{0, 3}}, {"ends", Ints{2, 0}},
               {"strides", Ints{1, -1}}}),
       "Out", {-1, 3, 3}},
      {MakeOp("pad3d", {{"X", {"v"}}}, {{"Out", {"out"}}},
              {{"paddings", Ints{1, 1, 0, 2, 1, 0}}}),
       "Out", {-1, 2, 4, 6, 7}},
      {MakeOp("expand_as_v2", {{"X", {"y"}}, {"Y", {"x"}}}, {{"Out", {"out"}}}), "Out",
       {-1, 4, 3}},
  };
  for (const Case& c : cases) {
    auto out = InferWith(c.op, vars);
    ASSERT_TRUE(out.ok()) << c.op.type << ": " << out.status().ToString();
    EXPECT_EQ(out->at(c.slot)[0].dims, c.dims) << c.op.type;
  }
}

}  // namespace
}  // namespace fleet::conformance
