// Conformance of the sequence ops whose output has offsets of its own (sequence_concat,
// sequence_slice, sequence_unpad) and of sequence_expand: the output's rows and offsets against
// NumPy (ref/ref_sequence.py) with empty sequences, a batch of one and padding rows; gradients
// against central finite differences in float64; and the refusals, naming op and sequence.
#include "harness.h"
#include "ops/op_registry.h"
#include "sequence_util.h"

namespace fleet::conformance {
namespace {

// Compares `out` (rows and offsets, as the runner gives them) with NumPy's Out and OutLod,
// computed in float64 from the same values. These ops only move rows, so Out cast to out's dtype
// must equal out exactly.
::testing::AssertionResult OutMatches(const VarMap& vars,
                                      const std::map<std::string, std::vector<HostTensor>>& ref) {
  const std::vector<int64_t> lod = Values<int64_t>(ref.at("OutLod")[0]);
  if (Values<int64_t>(vars.at("out.lod")) != lod) {
    return ::testing::AssertionFailure() << "offsets differ from NumPy's";
  }
  const HostTensor& out = vars.at("out");
  return AllClose(FirstRows(out, lod.back()), Cast(ref.at("Out")[0], out.dtype), 0, 0);
}

ir::Op Concat(size_t n) {
  std::vector<std::string> xs;
  for (size_t k = 0; k < n; ++k) xs.push_back("x" + std::to_string(k));
  return MakeOp("sequence_concat", {{"X", xs}}, {{"Out", {"out"}}});
}

TEST(SequenceOffsetConformance, SequenceConcatMatchesNumpyAndItsGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Three inputs of 4 sequences (empty ones among them, one with padding rows), then one input
  // of a single sequence.
  const std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{0, 2, 2, 5, 9}, {0, 0, 1, 1, 3}, {0, 1, 2, 3, 4}}, {{0, 3}}};
  uint64_t seed = 2000;
  for (const auto& lods : cases) {
    const ir::Op op = Concat(lods.size());
    VarMap vars;
    LodMap lod_map;
    ir::Op ref_op = op;
    VarMap ref_vars;
    for (size_t k = 0; k < lods.size(); ++k) {
      const std::string x = "x" + std::to_string(k);
      vars[x] = WithPadding(RandomTensor<double>({lods[k].back(), 2, 3}, ++seed), k == 0 ? 2 : 0);
      lod_map[x] = lods[k];
      ref_op.inputs["Lods"].push_back(x + ".lod");
      ref_vars[x] = vars[x];
      ref_vars[x + ".lod"] = Offsets(lods[k]);
    }
    auto ref = NumpyReference("sequence_concat", ref_op, ref_vars);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (ir::DataType t : {ir::DataType::kFloat64, ir::DataType::kFloat32, ir::DataType::kInt64}) {
      VarMap v;
      for (const auto& [name, tensor] : vars) v[name] = Cast(tensor, t);
      ASSERT_TRUE(runner->Run(op, v, 1, lod_map).ok()) << ir::DataTypeName(t);
      EXPECT_TRUE(OutMatches(v, *ref))
          << ir::DataTypeName(t);
    }
    // Each input's gradient, out@GRAD carrying the joined offsets.
    VarMap run = vars;
    ASSERT_TRUE(runner->Run(op, run, 1, lod_map).ok());
    const std::vector<int64_t> out_lod = Values<int64_t>(run.at("out.lod"));
    LodMap grad_lods = lod_map;
    grad_lods["out@GRAD"] = out_lod;
    for (size_t k = 0; k < lods.size(); ++k) {
      const std::string x = "x" + std::to_string(k);
      EXPECT_TRUE(GradMatchesFiniteDifferences(*runner, op, vars, lod_map, grad_lods, x, "out",
                                               lods[k].back(), out_lod.back()))
          << x;
    }
  }
}

TEST(SequenceOffsetConformance, SequenceConcatRefusals) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x0", RandomTensor<float>({3, 2}, 1)}, {"x1", RandomTensor<float>({4, 2}, 2)}};
  Status s = runner->Run(Concat(2), vars, 1, {{"x0", {0, 1, 3}}, {"x1", {0, 4}}});
  EXPECT_NE(s.message().find("input X 'x1' holds 1 sequences but the first holds 2"),
            std::string::npos)
      << s.ToString();
  s = runner->Run(Concat(2), vars, 1, {{"x0", {0, 3}}});
  EXPECT_NE(s.message().find("input X 'x1' is dense; sequence_concat joins sequences"),
            std::string::npos)
      << s.ToString();
  vars["x1"] = RandomTensor<float>({4, 3}, 3);
  s = runner->Run(Concat(2), vars, 1, {{"x0", {0, 3}}, {"x1", {0, 4}}});
  EXPECT_NE(s.message().find("the dims after the first must agree"), std::string::npos)
      << s.ToString();
}

ir::Op Slice() {
  return MakeOp("sequence_slice", {{"X", {"x"}}, {"Offset", {"offset"}}, {"Length", {"length"}}},
                {{"Out", {"out"}}});
}

TEST(SequenceOffsetConformance, SequenceSliceMatchesNumpyAndItsGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  struct Case {
    std::vector<int64_t> lod, offset, length;
  };
  const std::vector<Case> cases = {
      {{0, 2, 2, 5, 9}, {1, 0, 0, 2}, {1, 0, 3, 2}},  // a whole sequence, an empty one
      {{0, 4}, {0}, {0}},                              // one sequence, an empty slice
      {{0, 0, 1}, {0, 1}, {0, 0}}};                    // slices at the end of their sequence
  uint64_t seed = 2100;
  for (const Case& c : cases) {
    const int64_t n = static_cast<int64_t>(c.offset.size());
    VarMap vars{{"x", WithPadding(RandomTensor<double>({c.lod.back(), 3}, ++seed), 2)},
                {"offset", MakeTensor<int64_t>({n, 1}, c.offset)},
                {"length", MakeTensor<int64_t>({n, 1}, c.length)}};
    ir::Op ref_op = Slice();
    ref_op.inputs["Lod"] = {"x.lod"};
    VarMap ref_vars = vars;
    ref_vars["x.lod"] = Offsets(c.lod);
    auto ref = NumpyReference("sequence_slice", ref_op, ref_vars);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (ir::DataType t : {ir::DataType::kFloat64, ir::DataType::kFloat32, ir::DataType::kInt32}) {
      VarMap v = vars;
      v["x"] = Cast(vars.at("x"), t);
      ASSERT_TRUE(runner->Run(Slice(), v, 1, {{"x", c.lod}}).ok()) << ir::DataTypeName(t);
      EXPECT_TRUE(OutMatches(v, *ref))
          << ir::DataTypeName(t);
    }
    VarMap run = vars;
    ASSERT_TRUE(runner->Run(Slice(), run, 1, {{"x", c.lod}}).ok());
    const std::vector<int64_t> out_lod = Values<int64_t>(run.at("out.lod"));
    EXPECT_TRUE(GradMatchesFiniteDifferences(*runner, Slice(), vars, {{"x", c.lod}},
                                             {{"x", c.lod}, {"out@GRAD", out_lod}}, "x", "out",
                                             c.lod.back(), out_lod.back()));
  }
}

TEST(SequenceOffsetConformance, SequenceSliceRefusesASlicePastItsSequence) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({5, 2}, 1)},
              {"offset", MakeTensor<int64_t>({2, 1}, {0, 1})},
              {"length", MakeTensor<int64_t>({2, 1}, {2, 2})}};
  Status s = runner->Run(Slice(), vars, 1, {{"x", {0, 2, 5}}});
  EXPECT_TRUE(s.ok()) << s.ToString();
  vars["length"] = MakeTensor<int64_t>({2, 1}, {2, 4});
  s = runner->Run(Slice(), vars, 1, {{"x", {0, 2, 5}}});
  EXPECT_NE(s.message().find("sequence 1 of X 'x' has 3 rows, so Offset 1 and Length 4 do not "
                             "give a slice of it"),
            std::string::npos)
      << s.ToString();
  vars["offset"] = MakeTensor<int64_t>({2, 1}, {-1, 0});
  vars["length"] = MakeTensor<int64_t>({2, 1}, {1, 1});
  s = runner->Run(Slice(), vars, 1, {{"x", {0, 2, 5}}});
  EXPECT_NE(s.message().find("sequence 0 of X 'x' has 2 rows, so Offset -1"), std::string::npos)
      << s.ToString();
  vars["offset"] = MakeTensor<int32_t>({2, 1}, {0, 0});
  s = runner->Run(Slice(), vars, 1, {{"x", {0, 2, 5}}});
  EXPECT_NE(s.message().find("Offset must be int64, got int32"), std::string::npos)
      << s.ToString();
}

ir::Op Unpad() {
  return MakeOp("sequence_unpad", {{"X", {"x"}}, {"Length", {"length"}}}, {{"Out", {"out"}}});
}

TEST(SequenceOffsetConformance, SequenceUnpadMatchesNumpyAndItsGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  struct Case {
    std::vector<int64_t> dims, length;
  };
  const std::vector<Case> cases = {{{4, 3, 2}, {2, 0, 3, 1}},  // an empty and a full sequence
                                   {{1, 5}, {5}},              // rank 2: Out is [rows, 1]
                                   {{2, 2, 2, 3}, {1, 2}}};
  uint64_t seed = 2200;
  for (const Case& c : cases) {
    const int64_t n = c.dims[0];
    VarMap vars{{"x", RandomTensor<double>(c.dims, ++seed)},
                {"length", MakeTensor<int64_t>({n}, c.length)}};
    auto ref = NumpyReference("sequence_unpad", Unpad(), vars);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (ir::DataType t : {ir::DataType::kFloat64, ir::DataType::kFloat32, ir::DataType::kInt64}) {
      VarMap v = vars;
      v["x"] = Cast(vars.at("x"), t);
      ASSERT_TRUE(runner->Run(Unpad(), v, 1).ok()) << ir::DataTypeName(t);
      EXPECT_TRUE(OutMatches(v, *ref))
          << ir::DataTypeName(t);
    }
    VarMap run = vars;
    ASSERT_TRUE(runner->Run(Unpad(), run, 1).ok());
    const std::vector<int64_t> out_lod = Values<int64_t>(run.at("out.lod"));
    EXPECT_TRUE(GradMatchesFiniteDifferences(*runner, Unpad(), vars, {},
                                             {{"out@GRAD", out_lod}}, "x", "out", n,
                                             out_lod.back()));
  }
}

TEST(SequenceOffsetConformance, SequenceUnpadRefusesALengthOverThePaddedLength) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({2, 3, 1}, 1)},
              {"length", MakeTensor<int64_t>({2}, {3, 4})}};
  Status s = runner->Run(Unpad(), vars);
  EXPECT_NE(s.message().find("Length[1] of 'length' is 4, outside [0, 3]"), std::string::npos)
      << s.ToString();
  vars["length"] = MakeTensor<int64_t>({3}, {1, 1, 1});
  s = runner->Run(Unpad(), vars);
  EXPECT_NE(s.message().find("Length must be [2] or [2, 1]"), std::string::npos) << s.ToString();
}

ir::Op Expand(int32_t ref_level = -1) {
  return MakeOp("sequence_expand", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}},
                {{"ref_level", ref_level}});
}

TEST(SequenceOffsetConformance, SequenceExpandMatchesNumpyAndItsGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 2300;
  for (const std::vector<int64_t>& lod :
       std::vector<std::vector<int64_t>>{{0, 2, 2, 5, 9}, {0, 4}, {0, 0, 1}}) {
    const int64_t sequences = static_cast<int64_t>(lod.size()) - 1;
    const HostTensor x = RandomTensor<double>({sequences, 3}, ++seed);
    const HostTensor y = WithPadding(RandomTensor<double>({lod.back(), 1}, ++seed), 2);
    VarMap vars{{"x", x}, {"y", y}};
    ASSERT_TRUE(runner->Run(Expand(), vars, 1, {{"y", lod}}).ok());
    ir::Op ref_op = Expand();
    ref_op.inputs["Lod"] = {"y.lod"};
    auto ref =
        NumpyReference("sequence_expand", ref_op, {{"x", x}, {"y", y}, {"y.lod", Offsets(lod)}});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    EXPECT_EQ(Values<int64_t>(vars.at("out.lod")), lod);
    EXPECT_TRUE(AllClose(FirstRows(vars.at("out"), lod.back()),
                         FirstRows(ref->at("Out")[0], lod.back()), 0, 0));
    EXPECT_TRUE(GradMatchesFiniteDifferences(*runner, Expand(), {{"x", x}, {"y", y}},
                                             {{"y", lod}}, {{"y", lod}, {"out@GRAD", lod}}, "x",
                                             "out", sequences, lod.back()));
  }
}

TEST(SequenceOffsetConformance, SequenceExpandRefusals) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"x", RandomTensor<float>({2, 2}, 1)}, {"y", RandomTensor<float>({5, 1}, 2)}};
  Status s = runner->Run(Expand(), vars, 1, {{"y", {0, 2, 5}}, {"x", {0, 1, 2}}});
  EXPECT_NE(s.message().find("input X 'x' holds sequences, but sequence_expand takes it dense: "
                             "Out would hold one sequence per row of Y"),
            std::string::npos)
      << s.ToString();
  s = runner->Run(Expand(1), vars, 1, {{"y", {0, 2, 5}}});
  EXPECT_NE(s.message().find("ref_level 1 names no level of Y"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace fleet::conformance
