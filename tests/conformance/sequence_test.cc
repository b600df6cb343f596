// Conformance of the sequence ops over sequence tensors: forward against NumPy
// (ref/ref_sequence.py) with empty sequences, a batch of one and padding rows past the last
// sequence; gradients against central finite differences in float64; float32 against float64;
// the refusals of the shape functions and the kernels; and the row-by-row ops that take
// sequences through OpSchema::lod_share.
#include <cmath>
#include <set>

#include "harness.h"
#include "sequence_util.h"
#include "ops/op_registry.h"
#include "ops/shape_inference.h"

namespace fleet::conformance {
namespace {

const std::vector<std::string> kPoolTypes = {"AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST"};

ir::Op Pool(const std::string& type, float pad_value = 0.0f) {
  return MakeOp("sequence_pool", {{"X", {"x"}}}, {{"Out", {"out"}}, {"MaxIndex", {"index"}}},
                {{"pooltype", type}, {"pad_value", pad_value}});
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


// ---- sequence_softmax, sequence_reverse, sequence_pad, sequence_mask, sequence_expand_as ------

struct SeqCase {
  ir::Op op;
  VarMap vars;
  LodMap lods;
  std::string lod_var;                      // whose offsets the reference gets
  std::map<std::string, std::string> outs;  // output slot -> var
  std::set<std::string> sequence_outs;      // slots compared on the rows before the padding
};

// Runs the case and compares each output with NumPy.
::testing::AssertionResult SeqMatchesNumpy(OpRunner& runner, const SeqCase& c, double tol) {
  VarMap vars = c.vars;
  if (Status s = runner.Run(c.op, vars, 1234, c.lods); !s.ok()) {
    return ::testing::AssertionFailure() << "run: " << s.ToString();
  }
  const std::vector<int64_t>& lod = c.lods.at(c.lod_var);
  ir::Op ref_op = c.op;
  ref_op.inputs["Lod"] = {c.lod_var + ".lod"};
  VarMap ref_vars = c.vars;
  ref_vars[c.lod_var + ".lod"] = Offsets(lod);
  auto ref = NumpyReference(c.op.type, ref_op, ref_vars);
  if (!ref.ok()) return ::testing::AssertionFailure() << ref.status().ToString();
  for (const auto& [slot, var] : c.outs) {
    HostTensor actual = vars.at(var), expected = ref->at(slot)[0];
    if (c.sequence_outs.count(slot) != 0) {
      actual = FirstRows(actual, lod.back());
      expected = FirstRows(expected, lod.back());
    }
    auto close = AllClose(actual, expected, tol, tol);
    if (!close) return ::testing::AssertionFailure() << slot << ": " << close.message();
  }
  return ::testing::AssertionSuccess();
}

const std::vector<std::vector<int64_t>> kLods = {{0, 2, 2, 5, 9}, {0, 4}, {0, 0, 1}};

TEST(SequenceConformance, SequenceSoftmaxMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1000;
  for (const auto& lod : kLods) {
    for (bool rank1 : {false, true}) {
      const std::vector<int64_t> dims =
          rank1 ? std::vector<int64_t>{lod.back()} : std::vector<int64_t>{lod.back(), 1};
      const HostTensor x = RandomTensor<double>(dims, ++seed, -3, 3);
      for (ir::DataType t : {ir::DataType::kFloat64, ir::DataType::kFloat32}) {
        SeqCase c{MakeOp("sequence_softmax", {{"X", {"x"}}}, {{"Out", {"out"}}}),
                  {{"x", Cast(x, t)}}, {{"x", lod}}, "x", {{"Out", "out"}}, {"Out"}};
        EXPECT_TRUE(SeqMatchesNumpy(*runner, c, t == ir::DataType::kFloat64 ? 1e-12 : 1e-6))
            << lod.size() - 1 << " sequences, rank " << dims.size();
      }
    }
  }
  // Large values: the largest is taken out before exp.
  VarMap big{{"x", MakeTensor<double>({3, 1}, {1000.0, 1001.0, -1000.0})}};
  ASSERT_TRUE(runner->Run(MakeOp("sequence_softmax", {{"X", {"x"}}}, {{"Out", {"out"}}}), big, 1,
                          {{"x", {0, 2, 3}}})
                  .ok());
  const std::vector<double> out = Values<double>(big.at("out"));
  EXPECT_NEAR(out[0], 1 / (1 + std::exp(1.0)), 1e-12);
  EXPECT_NEAR(out[2], 1.0, 1e-12);
}

TEST(SequenceConformance, SequenceSoftmaxGradientMatchesFiniteDifferences) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const auto& lod : kLods) {
    const ir::Op fwd = MakeOp("sequence_softmax", {{"X", {"x"}}}, {{"Out", {"out"}}});
    VarMap vars{{"x", WithPadding(RandomTensor<double>({lod.back(), 1}, 11, -2, 2), 2)}};
    EXPECT_TRUE(GradMatchesFiniteDifferences(*runner, fwd, vars, {{"x", lod}},
                                             {{"out", lod}, {"out@GRAD", lod}}, "x", "out",
                                             lod.back(), lod.back()))
        << lod.size() - 1 << " sequences";
  }
}

TEST(SequenceConformance, SequenceReverseMatchesNumpyAndItsGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const ir::Op op = MakeOp("sequence_reverse", {{"X", {"x"}}}, {{"Y", {"y"}}});
  uint64_t seed = 1100;
  for (const auto& lod : kLods) {
    const HostTensor x = WithPadding(RandomTensor<double>({lod.back(), 2, 3}, ++seed), 3);
    for (ir::DataType t :
         {ir::DataType::kFloat64, ir::DataType::kFloat32, ir::DataType::kInt64}) {
      SeqCase c{op, {{"x", Cast(x, t)}}, {{"x", lod}}, "x", {{"Y", "y"}}, {"Y"}};
      EXPECT_TRUE(SeqMatchesNumpy(*runner, c, 0)) << lod.size() - 1 << " sequences";
    }
    EXPECT_TRUE(GradMatchesFiniteDifferences(*runner, op, {{"x", x}}, {{"x", lod}},
                                             {{"y@GRAD", lod}}, "x", "y", lod.back(),
                                             lod.back()));
  }
}

ir::Op Pad(int32_t length) {
  return MakeOp("sequence_pad", {{"X", {"x"}}, {"PadValue", {"pad"}}},
                {{"Out", {"out"}}, {"Length", {"length"}}}, {{"padded_length", length}});
}

TEST(SequenceConformance, SequencePadMatchesNumpyAndItsGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1200;
  for (const auto& lod : kLods) {
    const HostTensor x = WithPadding(RandomTensor<double>({lod.back(), 2, 3}, ++seed), 2);
    const HostTensor one = MakeTensor<double>({1}, {-7.5});
    const HostTensor row = RandomTensor<double>({2, 3}, ++seed);
    for (const HostTensor& pad : {one, row}) {
      for (ir::DataType t : {ir::DataType::kFloat64, ir::DataType::kFloat32}) {
        SeqCase c{Pad(5), {{"x", Cast(x, t)}, {"pad", Cast(pad, t)}}, {{"x", lod}}, "x",
                  {{"Out", "out"}, {"Length", "length"}}, {}};
        EXPECT_TRUE(SeqMatchesNumpy(*runner, c, 0))
            << lod.size() - 1 << " sequences, PadValue of " << pad.dims.size() << " dims";
      }
    }
    // padded_length equal to the longest sequence.
    const int32_t longest = lod.size() == 5 ? 4 : static_cast<int32_t>(lod.back());
    SeqCase c{Pad(longest), {{"x", x}, {"pad", one}}, {{"x", lod}}, "x", {{"Out", "out"}}, {}};
    EXPECT_TRUE(SeqMatchesNumpy(*runner, c, 0));
    EXPECT_TRUE(GradMatchesFiniteDifferences(*runner, Pad(5), {{"x", x}, {"pad", row}},
                                             {{"x", lod}}, {{"x", lod}}, "x", "out", lod.back(),
                                             static_cast<int64_t>(lod.size()) - 1));
  }
}

TEST(SequenceConformance, SequencePadRefusesALongerSequenceAndAnUnknownLength) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({9, 2}, 1)}, {"pad", MakeTensor<float>({1}, {0.0f})}};
  Status s = runner->Run(Pad(3), vars, 1, {{"x", {0, 2, 2, 5, 9}}});
  EXPECT_NE(s.message().find("sequence_pad: sequence 3 has 4 rows, more than padded_length 3"),
            std::string::npos)
      << s.ToString();
  s = runner->Run(Pad(-1), vars, 1, {{"x", {0, 2, 2, 5, 9}}});
  EXPECT_NE(s.message().find("padded_length must be > 0, got -1"), std::string::npos)
      << s.ToString();
  vars["pad"] = MakeTensor<float>({3}, {1, 2, 3});
  s = runner->Run(Pad(4), vars, 1, {{"x", {0, 2, 2, 5, 9}}});
  EXPECT_NE(s.message().find("PadValue must hold one value or one row of X [2], got [3]"),
            std::string::npos)
      << s.ToString();
}

TEST(SequenceConformance, SequenceMaskMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const HostTensor lengths = MakeTensor<int64_t>({2, 3}, {0, 1, 4, 6, 2, 3});
  for (int32_t dtype : {FLEET_DTYPE_FLOAT32, FLEET_DTYPE_FLOAT64, FLEET_DTYPE_INT64,
                        FLEET_DTYPE_INT32, FLEET_DTYPE_BOOL}) {
    for (ir::DataType t : {ir::DataType::kInt64, ir::DataType::kInt32}) {
      const ir::Op op = MakeOp("sequence_mask", {{"X", {"x"}}}, {{"Y", {"y"}}},
                               {{"maxlen", int32_t{5}}, {"out_dtype", dtype}});
      VarMap vars{{"x", Cast(lengths, t)}};
      EXPECT_TRUE(MatchesNumpy(*runner, op, vars, {"Y"}, 0, 0)) << "out_dtype " << dtype;
    }
  }
  VarMap vars{{"x", lengths}};
  Status s = runner->Run(MakeOp("sequence_mask", {{"X", {"x"}}}, {{"Y", {"y"}}}), vars);
  EXPECT_NE(s.message().find("maxlen must be > 0, got -1"), std::string::npos) << s.ToString();
}

ir::Op ExpandAs() {
  return MakeOp("sequence_expand_as", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
}

TEST(SequenceConformance, SequenceExpandAsMatchesNumpyAndItsGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 1300;
  for (const auto& lod : kLods) {
    const int64_t sequences = static_cast<int64_t>(lod.size()) - 1;
    const HostTensor x = RandomTensor<double>({sequences, 2, 2}, ++seed);
    const HostTensor y = WithPadding(RandomTensor<double>({lod.back(), 5}, ++seed), 3);
    for (ir::DataType t : {ir::DataType::kFloat64, ir::DataType::kFloat32}) {
      SeqCase c{ExpandAs(), {{"x", Cast(x, t)}, {"y", y}}, {{"y", lod}}, "y",
                {{"Out", "out"}}, {"Out"}};
      EXPECT_TRUE(SeqMatchesNumpy(*runner, c, 0)) << sequences << " sequences";
    }
    EXPECT_TRUE(GradMatchesFiniteDifferences(*runner, ExpandAs(), {{"x", x}, {"y", y}},
                                             {{"y", lod}}, {{"y", lod}, {"out@GRAD", lod}}, "x",
                                             "out", sequences, lod.back()));
  }
}

TEST(SequenceConformance, SequenceExpandAsRefusals) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({3, 2}, 1)}, {"y", RandomTensor<float>({5, 1}, 2)}};
  Status s = runner->Run(ExpandAs(), vars, 1, {{"y", {0, 2, 5}}});
  EXPECT_NE(s.message().find("X has 3 rows but Y holds 2 sequences"), std::string::npos)
      << s.ToString();
  s = runner->Run(ExpandAs(), vars, 1, {{"y", {0, 1, 2, 5}}, {"x", {0, 3}}});
  EXPECT_NE(s.message().find("input X 'x' holds sequences, but sequence_expand_as takes it "
                             "dense"),
            std::string::npos)
      << s.ToString();
  s = runner->Run(ExpandAs(), vars);
  EXPECT_NE(s.message().find("input Y 'y' is dense; sequence_expand_as"), std::string::npos)
      << s.ToString();
}

TEST(SequenceConformance, GradsOfFloat32MatchFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<int64_t> lod = {0, 1, 5, 5, 8};
  struct Case {
    ir::Op fwd;
    VarMap vars;
    LodMap lods, grad_lods;
    std::string out, grad;
  };
  const std::vector<Case> cases = {
      {MakeOp("sequence_softmax", {{"X", {"x"}}}, {{"Out", {"out"}}}),
       {{"x", RandomTensor<double>({8, 1}, 1)}}, {{"x", lod}}, {{"out", lod}, {"out@GRAD", lod}},
       "out", "x@GRAD"},
      {Pad(6), {{"x", RandomTensor<double>({8, 3}, 2)}, {"pad", MakeTensor<double>({1}, {0})}},
       {{"x", lod}}, {{"x", lod}}, "out", "x@GRAD"},
      {ExpandAs(), {{"x", RandomTensor<double>({4, 3}, 3)}, {"y", RandomTensor<double>({8, 1}, 4)}},
       {{"y", lod}}, {{"y", lod}, {"out@GRAD", lod}}, "out", "x@GRAD"},
  };
  for (const Case& c : cases) {
    VarMap v64 = c.vars;
    ASSERT_TRUE(runner->Run(c.fwd, v64, 1, c.lods).ok()) << c.fwd.type;
    v64[c.out + "@GRAD"] = RandomTensor<double>(v64.at(c.out).dims, 5);
    VarMap v32 = CastAll(v64, ir::DataType::kFloat32);
    for (const ir::Op& g : ops::BuiltinOps().Find(c.fwd.type)->grad(c.fwd)) {
      ASSERT_TRUE(runner->Run(g, v64, 1, c.grad_lods).ok()) << g.type;
      ASSERT_TRUE(runner->Run(g, v32, 1, c.grad_lods).ok()) << g.type;
    }
    EXPECT_TRUE(AllClose(v32.at(c.grad), Cast(v64.at(c.grad), ir::DataType::kFloat32), 1e-5,
                         1e-6))
        << c.fwd.type;
  }
}

// ---- row-by-row ops that take sequences (OpSchema::lod_share) ---------------------------------

// Each runs on a sequence X as on the same rows dense, and refuses what would mix rows.
TEST(SequenceConformance, RowwiseOpsTakeSequences) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const std::vector<int64_t> lod = {0, 2, 2, 5};
  const HostTensor x = RandomTensor<float>({5, 3}, 7);
  const std::vector<std::pair<ir::Op, VarMap>> cases = {
      {MakeOp("relu", {{"X", {"x"}}}, {{"Out", {"out"}}}), {{"x", x}}},
      {MakeOp("sigmoid", {{"X", {"x"}}}, {{"Out", {"out"}}}), {{"x", x}}},
      {MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"scale", 2.0f}, {"bias", 1.0f}}),
       {{"x", x}}},
      {MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"out"}}},
              {{"out_dtype", int32_t{FLEET_DTYPE_FLOAT64}}}),
       {{"x", x}}},
      {MakeOp("mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"out"}}}),
       {{"x", x}, {"w", RandomTensor<float>({3, 4}, 8)}}},
      {MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"b"}}}, {{"Out", {"out"}}},
              {{"axis", int32_t{1}}}),
       {{"x", x}, {"b", RandomTensor<float>({3}, 9)}}},
      {MakeOp("elementwise_mul", {{"X", {"x"}}, {"Y", {"b"}}}, {{"Out", {"out"}}}),
       {{"x", x}, {"b", RandomTensor<float>({1, 3}, 10)}}},
      {MakeOp("sum", {{"X", {"x", "x2"}}}, {{"Out", {"out"}}}),
       {{"x", x}, {"x2", RandomTensor<float>({5, 3}, 11)}}},
  };
  for (const auto& [op, inputs] : cases) {
    VarMap seq = inputs, dense = inputs;
    LodMap lods{{"x", lod}};
    if (inputs.count("x2") != 0) lods["x2"] = lod;
    ASSERT_TRUE(runner->Run(op, seq, 1, lods).ok()) << op.type;
    ASSERT_TRUE(runner->Run(op, dense).ok()) << op.type;
    EXPECT_TRUE(AllClose(seq.at("out"), dense.at("out"), 0, 0)) << op.type;
    // The output follows X's sequences.
    ops::ShapeContext shapes(*ops::BuiltinOps().Find(op.type), op);
    for (const auto& [slot, names] : op.inputs) {
      for (const auto& n : names) {
        ops::TensorInfo info{inputs.at(n).dtype, inputs.at(n).dims};
        if (lods.count(n) != 0) {
          info.lod_level = 1;
          info.sequences = 3;
        }
        shapes.inputs[slot].push_back(info);
      }
    }
    shapes.outputs["Out"].resize(1);
    ASSERT_TRUE(ops::BuiltinOps().Find(op.type)->infer_shape(shapes).ok()) << op.type;
    ASSERT_TRUE(ops::ApplyLodRules(*ops::BuiltinOps().Find(op.type), shapes).ok()) << op.type;
    EXPECT_EQ(shapes.outputs["Out"][0].lod_level, 1) << op.type;
    EXPECT_EQ(shapes.outputs["Out"][0].sequences, 3) << op.type;
  }

  // A Y that spans X's rows would pair rows of sequences with rows of something else.
  VarMap vars{{"x", x}, {"y", RandomTensor<float>({5, 3}, 12)}};
  Status s = runner->Run(MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}},
                                {{"Out", {"out"}}}),
                         vars, 1, {{"x", lod}});
  EXPECT_NE(s.message().find("X 'x' holds sequences, so Y [5, 3] must broadcast over its rows"),
            std::string::npos)
      << s.ToString();
  s = runner->Run(MakeOp("elementwise_add", {{"X", {"y"}}, {"Y", {"x"}}}, {{"Out", {"out"}}}),
                  vars, 1, {{"x", lod}});
  EXPECT_NE(s.message().find("input Y 'x' is a sequence tensor"), std::string::npos)
      << s.ToString();
  s = runner->Run(MakeOp("sum", {{"X", {"y", "x"}}}, {{"Out", {"out"}}}), vars, 1,
                  {{"x", lod}});
  EXPECT_NE(s.message().find("X[1] 'x' holds sequences but X[0] 'y' is dense"),
            std::string::npos)
      << s.ToString();
  vars["d"] = RandomTensor<float>({4, 5}, 13);
  s = runner->Run(MakeOp("mul", {{"X", {"d"}}, {"Y", {"x"}}}, {{"Out", {"out"}}}), vars, 1,
                  {{"x", lod}});
  EXPECT_NE(s.message().find("input Y 'x' is a sequence tensor"), std::string::npos)
      << s.ToString();
}
}  // namespace
}  // namespace fleet::conformance
