// Conformance of the comparison, logic and selection ops and of the extended reductions:
// forward against NumPy (ref/ref_compare.py) in every dtype each op takes (bool and integer
// results exactly), gradients against finite differences in float64, float32 grads against
// float64, Paddle's edge cases (broadcast at axis, float equality within 1e-8, the sign rule of
// mod, ties in arg_max / argsort / reduce_max's gradient, empty dims) and the shape functions.
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"

namespace fleet::conformance {
namespace {

using ir::DataType;

ir::Op Unary(std::string type, ir::AttrMap attrs = {}) {
  return MakeOp(std::move(type), {{"X", {"x"}}}, {{"Out", {"out"}}}, std::move(attrs));
}

ir::Op Binary(std::string type, ir::AttrMap attrs = {}) {
  return MakeOp(std::move(type), {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}},
                std::move(attrs));
}

bool IsFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64; }

// Runs `op` on `vars` and compares every output the NumPy reference `ref` (the op type unless
// given) computes from the same inputs: floats within a tolerance fit for the dtype, bool and
// integer results exactly.
void ExpectRef(OpRunner& runner, const ir::Op& op, VarMap vars, std::string ref = "") {
  if (ref.empty()) ref = op.type;
  // The kernel first: a device without it fails here without paying for the reference.
  const VarMap inputs = vars;
  Status s = runner.Run(op, vars);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto expected = NumpyReference(ref, op, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  for (const auto& [slot, tensors] : *expected) {
    const auto& names = op.Output(slot);
    ASSERT_EQ(names.size(), tensors.size()) << slot;
    for (size_t i = 0; i < names.size(); ++i) {
      const HostTensor& got = vars.at(names[i]);
      EXPECT_EQ(got.dtype, tensors[i].dtype) << op.type << " " << slot;
      const bool f32 = got.dtype == DataType::kFloat32;
      const double tol = IsFloat(got.dtype) ? (f32 ? 1e-5 : 1e-12) : 0.0;
      EXPECT_TRUE(AllClose(got, tensors[i], tol, tol)) << op.type << " " << slot;
    }
  }
}

// Small integers (so that equal values and ties are common), halved for float dtypes.
HostTensor SmallValues(std::vector<int64_t> dims, uint64_t seed, DataType dtype,
                       int64_t lo = -3, int64_t hi = 3) {
  HostTensor ints = RandomInts(std::move(dims), seed, lo, hi);
  if (!IsFloat(dtype)) return Cast(ints, dtype);
  HostTensor f = Cast(ints, DataType::kFloat64);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<double>()[i] *= 0.5;
  return Cast(f, dtype);
}

const DataType kNumeric[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                             DataType::kInt64};

struct BroadcastCase {
  std::vector<int64_t> x, y;
  int32_t axis;
};

const std::vector<BroadcastCase>& BroadcastCases() {
  static const std::vector<BroadcastCase> cases = {
      {{3, 4}, {3, 4}, -1},        // same shape
      {{5, 4}, {4}, -1},           // trailing
      {{5, 4}, {5}, 0},            // per-row, axis 0
      {{2, 3, 4}, {3}, 1},         // middle axis
      {{2, 3, 4}, {3, 1}, 1},      // a trailing 1 broadcasts
      {{2, 3, 4}, {4, 1}, 2},      // a trailing 1 past the end is dropped
      {{3}, {2, 3, 4}, 1},         // X smaller than Y
      {{2, 1, 4}, {2, 3, 1}, -1},  // both broadcast
      {{0, 3}, {3}, -1},           // empty
  };
  return cases;
}

// Every case for float64 and int32; the first few for float32 and int64, which share those
// code paths (each case costs a NumPy run).
std::vector<BroadcastCase> CasesFor(DataType dtype) {
  const auto& all = BroadcastCases();
  if (dtype == DataType::kFloat64 || dtype == DataType::kInt32) return all;
  return {all.begin(), all.begin() + 3};
}

const char* const kCompareOps[] = {"equal",        "not_equal",    "less_than",
                                   "less_equal",   "greater_than", "greater_equal"};

// ---- comparisons ----------------------------------------------------------------------------

TEST(CompareConformance, ComparisonsMatchNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1;
  for (const char* type : kCompareOps) {
    // equal and less_than take every case; the others share their broadcast path.
    const bool full = type == std::string("equal") || type == std::string("less_than");
    for (DataType dtype : kNumeric) {
      std::vector<BroadcastCase> cases = CasesFor(dtype);
      if (!full) cases.resize(cases.size() > 3 ? 3 : 1);
      for (const auto& c : cases) {
        SCOPED_TRACE(std::string(type) + " " + std::string(ir::DataTypeName(dtype)) + " axis " +
                     std::to_string(c.axis) + " seed " + std::to_string(seed + 1));
        ir::Op op = Binary(type, {{"axis", c.axis}});
        ++seed;
        ExpectRef(*runner, op,
                  {{"x", SmallValues(c.x, seed, dtype)}, {"y", SmallValues(c.y, seed + 500, dtype)}});
      }
    }
  }
}

// equal and not_equal also take bool tensors.
TEST(CompareConformance, BoolEquality) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const char* type : {"equal", "not_equal"}) {
    ExpectRef(*runner, Binary(type), {{"x", SmallValues({3, 4}, 21, DataType::kBool, 0, 2)},
                                      {"y", SmallValues({4}, 22, DataType::kBool, 0, 2)}});
  }
}

// Paddle's float equality: within 1e-8, an infinity equals only itself, NaN nothing.
TEST(CompareConformance, FloatEqualityRule) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> x = {1.0, 1.0, inf, inf, nan, 0.0, -inf};
  const std::vector<double> y = {1.0 + 5e-9, 1.0 + 5e-8, inf, -inf, nan, -0.0, -inf};
  const std::vector<uint8_t> want = {1, 0, 1, 0, 0, 1, 1};
  for (const char* type : {"equal", "not_equal"}) {
    VarMap vars{{"x", MakeTensor<double>({7}, x)}, {"y", MakeTensor<double>({7}, y)}};
    ASSERT_TRUE(runner->Run(Binary(type), vars).ok());
    std::vector<uint8_t> got = Values<uint8_t>(vars.at("out"));
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i], type == std::string("equal") ? want[i] : 1 - want[i])
          << type << " at " << i;
    }
    ExpectRef(*runner, Binary(type), {{"x", MakeTensor<double>({7}, x)},
                                      {"y", MakeTensor<double>({7}, y)}});
  }
}

// ---- logic, where, isfinite ------------------------------------------------------------------

TEST(CompareConformance, LogicMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}}, {{0, 2}, {2}}};
  uint64_t seed = 3000;
  for (const char* type : {"logical_and", "logical_or", "logical_xor"}) {
    for (const auto& [xs, ys] : shapes) {
      SCOPED_TRACE(std::string(type) + " seed " + std::to_string(seed + 1));
      ++seed;
      ExpectRef(*runner, Binary(type), {{"x", SmallValues(xs, seed, DataType::kBool, 0, 2)},
                                        {"y", SmallValues(ys, seed + 7, DataType::kBool, 0, 2)}});
    }
  }
  ExpectRef(*runner, Unary("logical_not"),
            {{"x", SmallValues({3, 5}, 3100, DataType::kBool, 0, 2)}});
}

TEST(CompareConformance, IsFiniteMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor x = MakeTensor<double>({2, 3}, {1.0, inf, -inf, nan, 0.0, -2.5});
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    ExpectRef(*runner, Unary("isfinite_v2"), {{"x", Cast(x, dtype)}});
  }
  for (DataType dtype : {DataType::kInt32, DataType::kInt64}) {
    ExpectRef(*runner, Unary("isfinite_v2"), {{"x", SmallValues({4, 2}, 7, dtype)}});
  }
}

ir::Op WhereOp() {
  return MakeOp("where", {{"Condition", {"c"}}, {"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
}

TEST(CompareConformance, WhereMatchesNumpyAndDifferentiates) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 4000;
  for (DataType dtype : kNumeric) {
    SCOPED_TRACE(std::string(ir::DataTypeName(dtype)));
    ++seed;
    ExpectRef(*runner, WhereOp(),
              {{"c", SmallValues({3, 4}, seed, DataType::kBool, 0, 2)},
               {"x", SmallValues({3, 4}, seed + 1, dtype)},
               {"y", SmallValues({3, 4}, seed + 2, dtype)}});
  }
  VarMap vars{{"c", SmallValues({2, 3, 2}, 4100, DataType::kBool, 0, 2)},
              {"x", RandomTensor<double>({2, 3, 2}, 4101)},
              {"y", RandomTensor<double>({2, 3, 2}, 4102)}};
  EXPECT_TRUE(CheckGradients(*runner, WhereOp(), vars, {}));
  ir::Op g = MakeOp("where_grad", {{"Condition", {"c"}}, {"X", {"x"}}, {"Y", {"y"}},
                                   {"Out@GRAD", {"g"}}},
                    {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}});
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    ExpectRef(*runner, g,
              {{"c", vars.at("c")},
               {"x", Cast(vars.at("x"), dtype)},
               {"y", Cast(vars.at("y"), dtype)},
               {"g", Cast(RandomTensor<double>({2, 3, 2}, 4103), dtype)}});
  }
}

// ---- elementwise_pow / mod / floordiv --------------------------------------------------------

// X and Y for an arithmetic op: bases of pow positive for floats, exponents of integer pow
// non-negative, divisors of mod / floordiv non-zero (both signs).
VarMap ArithInputs(const std::string& type, const BroadcastCase& c, DataType dtype,
                   uint64_t seed) {
  if (type == "elementwise_pow") {
    if (IsFloat(dtype)) {
      return {{"x", Cast(RandomTensor<double>(c.x, seed, 0.5, 2.0), dtype)},
              {"y", Cast(RandomTensor<double>(c.y, seed + 1, -2.0, 2.0), dtype)}};
    }
    return {{"x", SmallValues(c.x, seed, dtype, -4, 5)},
            {"y", SmallValues(c.y, seed + 1, dtype, 0, 5)}};
  }
  HostTensor y = IsFloat(dtype) ? RandomTensor<double>(c.y, seed + 1, 0.5, 3.0)
                                : RandomInts(c.y, seed + 1, 1, 5);
  HostTensor sign = RandomInts(c.y, seed + 2, 0, 2);
  HostTensor x = IsFloat(dtype) ? RandomTensor<double>(c.x, seed, -10.0, 10.0)
                                : RandomInts(c.x, seed, -20, 20);
  for (int64_t i = 0; i < y.numel(); ++i) {
    if (sign.data<int64_t>()[i] == 0) {
      if (IsFloat(dtype)) {
        y.data<double>()[i] = -y.data<double>()[i];
      } else {
        y.data<int64_t>()[i] = -y.data<int64_t>()[i];
      }
    }
  }
  return {{"x", Cast(x, dtype)}, {"y", Cast(y, dtype)}};
}

TEST(CompareConformance, ArithmeticMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 5000;
  for (const char* type : {"elementwise_pow", "elementwise_mod", "elementwise_floordiv"}) {
    for (DataType dtype : kNumeric) {
      for (const auto& c : CasesFor(dtype)) {
        seed += 3;
        SCOPED_TRACE(std::string(type) + " " + std::string(ir::DataTypeName(dtype)) + " axis " +
                     std::to_string(c.axis) + " seed " + std::to_string(seed));
        ExpectRef(*runner, Binary(type, {{"axis", c.axis}}), ArithInputs(type, c, dtype, seed));
      }
    }
  }
}

// Python's sign rules, and integer division by zero defined as 0 rather than a trap.
TEST(CompareConformance, ModAndFloorDivSignsAndZeroDivisor) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<int64_t> x = {7, -7, 7, -7, 6, 5, std::numeric_limits<int64_t>::min()};
  const std::vector<int64_t> y = {3, 3, -3, -3, 3, 0, -1};
  const std::vector<int64_t> mod = {1, 2, -2, -1, 0, 0, 0};
  const std::vector<int64_t> div = {2, -3, -3, 2, 2, 0, std::numeric_limits<int64_t>::min()};
  for (const char* type : {"elementwise_mod", "elementwise_floordiv"}) {
    VarMap vars{{"x", MakeTensor<int64_t>({7}, x)}, {"y", MakeTensor<int64_t>({7}, y)}};
    Status s = runner->Run(Binary(type), vars);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(Values<int64_t>(vars.at("out")),
              type == std::string("elementwise_mod") ? mod : div)
        << type;
  }
  VarMap fv{{"x", MakeTensor<double>({4}, {7.5, -7.5, 7.5, -7.5})},
            {"y", MakeTensor<double>({4}, {2.0, 2.0, -2.0, -2.0})}};
  ASSERT_TRUE(runner->Run(Binary("elementwise_mod"), fv).ok());
  EXPECT_EQ(Values<double>(fv.at("out")), (std::vector<double>{1.5, 0.5, -0.5, -1.5}));
  ASSERT_TRUE(runner->Run(Binary("elementwise_floordiv"), fv).ok());
  EXPECT_EQ(Values<double>(fv.at("out")), (std::vector<double>{3.0, -4.0, -4.0, 3.0}));
}

TEST(CompareConformance, PowGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 6000;
  for (const auto& c : BroadcastCases()) {
    seed += 2;
    SCOPED_TRACE("axis " + std::to_string(c.axis) + " seed " + std::to_string(seed));
    ir::Op op = Binary("elementwise_pow", {{"axis", c.axis}});
    VarMap vars = ArithInputs("elementwise_pow", c, DataType::kFloat64, seed);
    EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
    // float32 grads against float64 ones.
    VarMap env64 = vars;
    ASSERT_TRUE(runner->Run(op, env64).ok());
    env64["out@GRAD"] = RandomTensor<double>(env64.at("out").dims, seed + 100);
    const ops::OpSchema* schema = ops::BuiltinOps().Find(op.type);
    for (const ir::Op& g : schema->grad(op)) {
      VarMap e64 = env64;
      VarMap e32;
      for (const auto& [name, t] : env64) e32[name] = Cast(t, DataType::kFloat32);
      ASSERT_TRUE(runner->Run(g, e64).ok());
      ASSERT_TRUE(runner->Run(g, e32).ok());
      for (const auto& name : g.OutputVars()) {
        EXPECT_TRUE(AllClose(e32.at(name), Cast(e64.at(name), DataType::kFloat32), 1e-4, 1e-4))
            << name;
      }
    }
  }
}

// ---- reductions ------------------------------------------------------------------------------

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
      {{2, 3, 4}, {{"dim", std::vector<int32_t>{-2}}, {"keep_dim", true}}},
      {{2, 3, 4}, {{"reduce_all", true}}},
      {{2, 3, 4}, {{"reduce_all", true}, {"keep_dim", true}}},
      {{2, 1, 3, 1}, {{"dim", std::vector<int32_t>{1, 2}}}},
      {{40, 70}, {{"dim", std::vector<int32_t>{0}}}},  // longer than a warp
  };
  return cases;
}

TEST(CompareConformance, ReductionsMatchNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 7000;
  for (const char* type : {"reduce_max", "reduce_min", "reduce_prod"}) {
    for (DataType dtype : kNumeric) {
      for (size_t ci = 0; ci < ReduceCases().size(); ++ci) {
        // Every case for float64 and int32, a few for the dtypes sharing their code paths.
        if (ci % 3 != 0 && dtype != DataType::kFloat64 && dtype != DataType::kInt32) continue;
        const ReduceCase& c = ReduceCases()[ci];
        ++seed;
        SCOPED_TRACE(std::string(type) + " " + std::string(ir::DataTypeName(dtype)) + " seed " +
                     std::to_string(seed));
        // Products of many factors stay within range with factors near 1 (floats) or +-1, 2.
        HostTensor x = SmallValues(c.x, seed, dtype, -3, 4);
        if (type == std::string("reduce_prod")) {
          x = IsFloat(dtype) ? Cast(RandomTensor<double>(c.x, seed, 0.9, 1.1), dtype)
                             : SmallValues(c.x, seed, dtype, -1, 3);
        }
        ExpectRef(*runner, Unary(type, c.attrs), {{"x", x}});
      }
    }
  }
  for (const char* type : {"reduce_any", "reduce_all"}) {
    for (const auto& c : ReduceCases()) {
      ++seed;
      SCOPED_TRACE(std::string(type) + " seed " + std::to_string(seed));
      // Mostly true for all, mostly false for any, so both answers occur.
      const bool any = type == std::string("reduce_any");
      HostTensor x = RandomInts(c.x, seed, 0, 8);
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t& v = x.data<int64_t>()[i];
        v = any ? (v == 0) : (v != 0);
      }
      ExpectRef(*runner, Unary(type, c.attrs), {{"x", Cast(x, DataType::kBool)}});
    }
  }
  // Empty reductions give the identity; an empty kept dim gives an empty Out.
  VarMap e{{"x", MakeTensor<double>({2, 0}, {})}};
  ASSERT_TRUE(runner->Run(Unary("reduce_prod", {{"dim", std::vector<int32_t>{1}}}), e).ok());
  EXPECT_EQ(Values<double>(e.at("out")), (std::vector<double>{1.0, 1.0}));
  ExpectRef(*runner, Unary("reduce_max", {{"dim", std::vector<int32_t>{1}}}),
            {{"x", MakeTensor<double>({0, 3}, {})}});
}

TEST(CompareConformance, ReductionGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 8000;
  for (const char* type : {"reduce_max", "reduce_min", "reduce_prod"}) {
    for (const auto& c : ReduceCases()) {
      if (c.x[0] == 40) continue;  // finite differences over 2800 elements: too slow
      ++seed;
      SCOPED_TRACE(std::string(type) + " seed " + std::to_string(seed));
      // Distinct values, so the extreme is unique and finite differences see a smooth max.
      HostTensor x = RandomTensor<double>(c.x, seed, 0.5, 1.5);
      EXPECT_TRUE(CheckGradients(*runner, Unary(type, c.attrs), {{"x", x}}, {}));
    }
  }
}

// Paddle's rule for ties: every element equal to the max (min) receives the whole gradient.
TEST(CompareConformance, ExtremeGradientGoesToEveryTie) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const char* type : {"reduce_max", "reduce_min"}) {
    const ir::AttrMap attrs = {{"dim", std::vector<int32_t>{1}}};
    ir::Op fwd = Unary(type, attrs);
    VarMap vars{{"x", MakeTensor<double>({2, 4}, {1, 3, 3, 0, 2, 2, 2, 2})}};
    ASSERT_TRUE(runner->Run(fwd, vars).ok());
    ir::Op g = MakeOp(std::string(type) + "_grad",
                      {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"g"}}},
                      {{"X@GRAD", {"dx"}}}, attrs);
    vars["g"] = MakeTensor<double>({2}, {10.0, 20.0});
    ExpectRef(*runner, g, vars);
    for (DataType dtype : {DataType::kFloat32}) {
      VarMap v32;
      for (const auto& [n, t] : vars) v32[n] = Cast(t, dtype);
      ExpectRef(*runner, g, v32);
    }
  }
  // A zero in a product: its gradient is the product of the others, the rest get 0.
  ir::Op prod = Unary("reduce_prod", {{"reduce_all", true}});
  VarMap pv{{"x", MakeTensor<double>({4}, {2.0, 0.0, 3.0, 4.0})}};
  ASSERT_TRUE(runner->Run(prod, pv).ok());
  ir::Op pg = MakeOp("reduce_prod_grad", {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"g"}}},
                     {{"X@GRAD", {"dx"}}}, {{"reduce_all", true}});
  pv["g"] = MakeTensor<double>({1}, {1.0});
  ASSERT_TRUE(runner->Run(pg, pv).ok());
  EXPECT_EQ(Values<double>(pv.at("dx")), (std::vector<double>{0.0, 24.0, 0.0, 0.0}));
}

// ---- arg_max / arg_min / argsort -------------------------------------------------------------

TEST(CompareConformance, ArgMatchesNumpyWithTies) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<std::pair<std::vector<int64_t>, ir::AttrMap>> cases = {
      {{3, 4}, {}},
      {{3, 4}, {{"axis", int64_t{1}}}},
      {{2, 3, 4}, {{"axis", int64_t{-1}}, {"keepdims", true}}},
      {{2, 3, 4}, {{"axis", int64_t{1}}}},
      {{2, 3, 4}, {{"flatten", true}}},
      {{5}, {}},
      {{3, 50}, {{"axis", int64_t{1}}, {"dtype", int32_t{FLEET_DTYPE_INT32}}}},
      {{70, 3}, {{"axis", int64_t{0}}, {"dtype", int32_t{FLEET_DTYPE_INT64}}}},
  };
  uint64_t seed = 9000;
  for (const char* type : {"arg_max", "arg_min"}) {
    for (DataType dtype : kNumeric) {
      for (size_t ci = 0; ci < cases.size(); ++ci) {
        if (ci % 3 != 0 && dtype != DataType::kFloat64 && dtype != DataType::kInt32) continue;
        const auto& [dims, attrs] = cases[ci];
        ++seed;
        SCOPED_TRACE(std::string(type) + " " + std::string(ir::DataTypeName(dtype)) + " seed " +
                     std::to_string(seed));
        // Few distinct values: ties everywhere, the first index must win.
        ExpectRef(*runner, Unary(type, attrs), {{"x", SmallValues(dims, seed, dtype, 0, 3)}});
      }
    }
  }
}

ir::Op ArgsortOp(ir::AttrMap attrs = {}) {
  return MakeOp("argsort", {{"X", {"x"}}}, {{"Out", {"out"}}, {"Indices", {"idx"}}},
                std::move(attrs));
}

TEST(CompareConformance, ArgsortIsStableAndMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<std::pair<std::vector<int64_t>, ir::AttrMap>> cases = {
      {{3, 5}, {}},
      {{3, 5}, {{"descending", true}}},
      {{3, 5}, {{"axis", int32_t{0}}}},
      {{2, 3, 4}, {{"axis", int32_t{1}}, {"descending", true}}},
      {{2, 3, 4}, {{"axis", int32_t{-3}}}},
      {{37}, {}},
      {{2, 0}, {}},
      // Rows long enough for a device to sort them another way (the CUDA plugin sorts rows up
      // to 2048 in a block, longer ones on a thread).
      {{2, 700}, {}},
      {{2048, 2}, {{"axis", int32_t{0}}, {"descending", true}}},
      {{1, 2500}, {{"descending", true}}},
  };
  uint64_t seed = 10000;
  for (DataType dtype : kNumeric) {
    for (const auto& [dims, attrs] : cases) {
      ++seed;
      SCOPED_TRACE(std::string(ir::DataTypeName(dtype)) + " seed " + std::to_string(seed));
      ExpectRef(*runner, ArgsortOp(attrs), {{"x", SmallValues(dims, seed, dtype, -2, 3)}});
    }
  }
  for (const auto& [dims, attrs] : cases) {
    ++seed;
    if (dims.size() == 2 && dims[0] * dims[1] > 100) continue;  // finite differences: small only
    SCOPED_TRACE("gradient seed " + std::to_string(seed));
    VarMap vars{{"x", RandomTensor<double>(dims, seed)}};
    GradCheckOptions opts;
    opts.outputs = {"Out"};
    EXPECT_TRUE(CheckGradients(*runner, ArgsortOp(attrs), vars, opts));
  }
}

// argsort_grad reads indices it did not make: one outside the axis is refused, naming the op,
// the index and where it sits, never written out of bounds.
TEST(CompareConformance, ArgsortGradRefusesAnIndexOutsideTheAxis) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op g = MakeOp("argsort_grad", {{"X", {"x"}}, {"Indices", {"idx"}}, {"Out@GRAD", {"g"}}},
                    {{"X@GRAD", {"dx"}}});
  VarMap vars{{"x", RandomTensor<double>({2, 3}, 1)},
              {"idx", MakeTensor<int64_t>({2, 3}, {2, 0, 1, 0, 7, 1})},
              {"g", RandomTensor<double>({2, 3}, 2)}};
  Status s = runner->Run(g, vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("argsort_grad"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("Indices holds 7 at element 4"), std::string::npos)
      << s.ToString();
}

// Max and min over contiguous rows long enough for the CPU's multi-lane loop (8 lanes and a tail):
// a NaN anywhere in a row, in the lanes or the tail, makes that row NaN; infinities win or lose
// as numbers; rows without either match NumPy.
TEST(CompareConformance, ContiguousExtremesPropagateNanAndInfinity) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  HostTensor x = RandomTensor<double>({6, 19}, 41, -5, 5);
  double* v = x.data<double>();
  v[0 * 19 + 3] = nan;    // in the lanes
  v[1 * 19 + 17] = nan;   // in the tail
  v[2 * 19 + 0] = inf;
  v[3 * 19 + 18] = -inf;
  v[4 * 19 + 5] = inf;
  v[4 * 19 + 6] = -inf;
  for (const char* type : {"reduce_max", "reduce_min"}) {
    for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
      SCOPED_TRACE(std::string(type) + " " + std::string(ir::DataTypeName(dtype)));
      ExpectRef(*runner, Unary(type, {{"dim", std::vector<int32_t>{1}}}), {{"x", Cast(x, dtype)}});
    }
  }
  ExpectRef(*runner, Unary("reduce_max", {{"dim", std::vector<int32_t>{-1}}}),
            {{"x", SmallValues({5, 37}, 42, DataType::kInt32, -100, 100)}});
}

// Sizes past the CPU plugin's grain, so the loops split over threads.
TEST(CompareConformance, LargeInputsMatchNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ExpectRef(*runner, Binary("less_equal"), {{"x", SmallValues({256, 300}, 31, DataType::kFloat32)},
                                            {"y", SmallValues({300}, 32, DataType::kFloat32)}});
  ExpectRef(*runner, Binary("elementwise_floordiv"),
            {{"x", SmallValues({256, 300}, 33, DataType::kInt64, -50, 50)},
             {"y", SmallValues({256, 300}, 34, DataType::kInt64, 1, 9)}});
  ExpectRef(*runner, Unary("reduce_max", {{"dim", std::vector<int32_t>{1}}}),
            {{"x", RandomTensor<double>({300, 256}, 35)}});
  ExpectRef(*runner, Unary("arg_min", {{"axis", int64_t{0}}}),
            {{"x", SmallValues({300, 256}, 36, DataType::kInt32, 0, 50)}});
}

// ---- p_norm ----------------------------------------------------------------------------------

TEST(CompareConformance, PNormMatchesNumpyAndDifferentiates) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<std::pair<std::vector<int64_t>, ir::AttrMap>> cases = {
      {{3, 4}, {}},
      {{3, 4}, {{"axis", int32_t{0}}, {"keepdim", true}}},
      {{2, 3, 4}, {{"axis", int32_t{1}}, {"porder", 1.0f}}},
      {{2, 3, 4}, {{"axis", int32_t{-1}}, {"porder", 3.0f}}},
      {{2, 3, 4}, {{"asvector", true}}},
      {{2, 3, 4}, {{"asvector", true}, {"keepdim", true}, {"porder", 1.5f}}},
      {{5}, {}},
      {{3, 100}, {}},
  };
  uint64_t seed = 11000;
  for (const auto& [dims, attrs] : cases) {
    ++seed;
    SCOPED_TRACE("seed " + std::to_string(seed));
    HostTensor x = RandomTensor<double>(dims, seed);
    for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
      ExpectRef(*runner, Unary("p_norm", attrs), {{"x", Cast(x, dtype)}});
    }
    if (dims[1 % dims.size()] != 100) {
      EXPECT_TRUE(CheckGradients(*runner, Unary("p_norm", attrs), {{"x", x}}, {}));
    }
  }
  // porder 0 counts non-zeros; +inf / -inf take the max / min magnitude, and their gradient
  // goes to the elements that attain it, with x's sign.
  HostTensor x = MakeTensor<double>({2, 3}, {1.0, -4.0, 0.0, -2.0, 2.0, 0.5});
  ExpectRef(*runner, Unary("p_norm", {{"porder", 0.0f}}), {{"x", x}});
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<float, std::vector<double>>> extremes = {{inf, {4.0, 2.0}},
                                                                       {-inf, {0.0, 0.5}}};
  for (const auto& [p, want] : extremes) {
    ir::Op op = Unary("p_norm", {{"porder", p}});
    VarMap vars{{"x", x}};
    ASSERT_TRUE(runner->Run(op, vars).ok());
    EXPECT_EQ(Values<double>(vars.at("out")), want);
    ir::Op g = MakeOp("p_norm_grad", {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"g"}}},
                      {{"X@GRAD", {"dx"}}}, {{"porder", p}});
    vars["g"] = MakeTensor<double>({2}, {1.0, 1.0});
    ASSERT_TRUE(runner->Run(g, vars).ok());
    EXPECT_EQ(Values<double>(vars.at("dx")),
              p > 0 ? (std::vector<double>{0, -1, 0, -1, 1, 0})
                    : (std::vector<double>{0, 0, 0, 0, 0, 1}));
  }
}

// ---- shape functions -------------------------------------------------------------------------

StatusOr<ops::SlotInfos> Infer(const ir::Op& op, const ops::SlotInfos& in) {
  const ops::OpSchema* schema = ops::BuiltinOps().Find(op.type);
  if (schema == nullptr) return NotFound("no schema " + op.type);
  FLEET_RETURN_IF_ERROR(ops::CheckOpSlots(*schema, op));
  ops::ShapeContext ctx(*schema, op);
  ctx.inputs = in;
  for (const auto& [slot, names] : op.outputs) ctx.outputs[slot].resize(names.size());
  FLEET_RETURN_IF_ERROR(schema->infer_shape(ctx));
  return std::move(ctx.outputs);
}

ops::TensorInfo Info(DataType dtype, std::vector<int64_t> dims) { return {dtype, std::move(dims)}; }

void ExpectShapeError(const ir::Op& op, const ops::SlotInfos& in, const std::string& needle) {
  auto r = Infer(op, in);
  ASSERT_FALSE(r.ok()) << op.type << " accepted bad input";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(op.type), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
}

TEST(CompareShapes, BadInputsAreRejected) {
  const DataType f32 = DataType::kFloat32, b = DataType::kBool, i64 = DataType::kInt64;
  ExpectShapeError(Binary("less_than"), {{"X", {Info(f32, {5, 4})}}, {"Y", {Info(f32, {3})}}},
                   "do not broadcast");
  ExpectShapeError(Binary("equal"), {{"X", {Info(f32, {5, 4})}}, {"Y", {Info(i64, {4})}}}, "int64");
  ExpectShapeError(Binary("less_than"), {{"X", {Info(b, {4})}}, {"Y", {Info(b, {4})}}},
                   "X is bool");
  ExpectShapeError(Binary("greater_equal", {{"axis", int32_t{2}}}),
                   {{"X", {Info(f32, {5, 4})}}, {"Y", {Info(f32, {4})}}}, "axis 2");
  ExpectShapeError(Binary("logical_and"), {{"X", {Info(f32, {4})}}, {"Y", {Info(b, {4})}}},
                   "expected bool");
  ExpectShapeError(Unary("logical_not"), {{"X", {Info(i64, {4})}}}, "expected bool");
  ExpectShapeError(WhereOp(),
                   {{"Condition", {Info(b, {3, 4})}}, {"X", {Info(f32, {3, 4})}}, {"Y", {Info(f32, {4})}}},
                   "same shape");
  ExpectShapeError(WhereOp(),
                   {{"Condition", {Info(f32, {3})}}, {"X", {Info(f32, {3})}}, {"Y", {Info(f32, {3})}}},
                   "Condition");
  ExpectShapeError(Unary("reduce_max", {{"dim", std::vector<int32_t>{2}}}),
                   {{"X", {Info(f32, {3, 4})}}}, "dim 2");
  ExpectShapeError(Unary("reduce_any"), {{"X", {Info(f32, {3, 4})}}}, "expected bool");
  ExpectShapeError(Unary("arg_max", {{"axis", int64_t{2}}}), {{"X", {Info(f32, {3, 4})}}},
                   "axis 2 is out of range for X [3, 4]");
  ExpectShapeError(Unary("arg_min", {{"axis", int64_t{-3}}}), {{"X", {Info(f32, {3, 4})}}},
                   "axis -3");
  ExpectShapeError(Unary("arg_max", {{"axis", int64_t{1}}}), {{"X", {Info(f32, {3, 0})}}},
                   "empty");
  ExpectShapeError(Unary("arg_max", {{"dtype", int32_t{9}}}), {{"X", {Info(f32, {3})}}},
                   "dtype 9");
  ExpectShapeError(ArgsortOp({{"axis", int32_t{3}}}), {{"X", {Info(f32, {3, 4})}}}, "axis 3");
  ExpectShapeError(Unary("p_norm", {{"axis", int32_t{-3}}}), {{"X", {Info(f32, {3, 4})}}},
                   "axis -3");
  ExpectShapeError(Unary("p_norm"), {{"X", {Info(i64, {3, 4})}}}, "expected float32 or float64");
  ExpectShapeError(Binary("elementwise_mod"), {{"X", {Info(b, {3})}}, {"Y", {Info(b, {3})}}},
                   "X is bool");
}

TEST(CompareShapes, OutputsAndUnknownBatch) {
  const DataType f32 = DataType::kFloat32, b = DataType::kBool;
  auto out = [](const ir::Op& op, const ops::SlotInfos& in, const std::string& slot = "Out") {
    auto r = Infer(op, in);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->at(slot)[0] : ops::TensorInfo{};
  };
  EXPECT_EQ(out(Binary("equal"), {{"X", {Info(f32, {-1, 4})}}, {"Y", {Info(f32, {4})}}}),
            Info(b, {-1, 4}));
  EXPECT_EQ(out(Binary("less_than", {{"axis", int32_t{0}}}),
                {{"X", {Info(f32, {-1, 4})}}, {"Y", {Info(f32, {-1})}}}),
            Info(b, {-1, 4}));
  EXPECT_EQ(out(Binary("logical_or"), {{"X", {Info(b, {-1, 1})}}, {"Y", {Info(b, {3})}}}),
            Info(b, {-1, 3}));
  EXPECT_EQ(out(Unary("isfinite_v2"), {{"X", {Info(f32, {-1, 2})}}}), Info(b, {-1, 2}));
  EXPECT_EQ(out(WhereOp(), {{"Condition", {Info(b, {-1, 3})}}, {"X", {Info(f32, {4, 3})}},
                            {"Y", {Info(f32, {-1, 3})}}}),
            Info(f32, {4, 3}));
  EXPECT_EQ(out(Unary("reduce_any", {{"dim", std::vector<int32_t>{1}}}), {{"X", {Info(b, {-1, 5})}}}),
            Info(b, {-1}));
  EXPECT_EQ(out(Unary("arg_max", {{"axis", int64_t{1}}}), {{"X", {Info(f32, {-1, 5})}}}),
            Info(DataType::kInt64, {-1}));
  EXPECT_EQ(out(Unary("arg_min", {{"axis", int64_t{-1}}, {"keepdims", true},
                                  {"dtype", int32_t{FLEET_DTYPE_INT32}}}),
                {{"X", {Info(f32, {-1, 5})}}}),
            Info(DataType::kInt32, {-1, 1}));
  EXPECT_EQ(out(Unary("arg_max", {{"flatten", true}}), {{"X", {Info(f32, {2, 5})}}}),
            Info(DataType::kInt64, {1}));
  EXPECT_EQ(out(ArgsortOp(), {{"X", {Info(f32, {-1, 5})}}}, "Indices"), Info(DataType::kInt64, {-1, 5}));
  EXPECT_EQ(out(Unary("p_norm", {{"keepdim", true}}), {{"X", {Info(f32, {-1, 5})}}}),
            Info(f32, {-1, 1}));
  EXPECT_EQ(out(Unary("p_norm", {{"asvector", true}}), {{"X", {Info(f32, {-1, 5})}}}),
            Info(f32, {1}));
}

}  // namespace
}  // namespace fleet::conformance
