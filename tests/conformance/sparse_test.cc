// Conformance of the kernels that take or make SelectedRows tensors (sparse gradients): each
// op with a sparse input against the same op's dense kernel on the dense tensor that input
// stands for (the dense kernels are checked against NumPy in their own suites), or against
// values worked out here by hand. Rows repeat, and an entry is empty (-1), in every gradient.
// On a device other than the CPU the harness also compares every output, rows included, with
// the CPU plugin's.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "fleet/fleet_kernels.h"
#include "harness.h"
#include "optimizer_ops.h"

namespace fleet::conformance {
namespace {

constexpr int64_t kHeight = 12, kWidth = 3;
// Row 5 three times, row 0 twice, one empty entry, row 11 (the last) once.
const std::vector<int64_t> kRows = {5, 0, 5, -1, 11, 0, 5};

template <typename T>
double Tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

// A sparse gradient of the [kHeight, kWidth] table: kRows and random slices.
template <typename T>
HostTensor Slices(uint64_t seed) {
  return RandomTensor<T>({static_cast<int64_t>(kRows.size()), kWidth}, seed);
}

// The dense tensor entries `rows` with slices `values` stand for: zero, then each entry added
// to its row in entry order.
template <typename T>
HostTensor Densify(const std::vector<int64_t>& rows, const HostTensor& values, int64_t height) {
  const std::vector<T> v = Values<T>(values);
  const int64_t width = values.dims[1];
  std::vector<T> dense(static_cast<size_t>(height * width), T(0));
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0) continue;
    for (int64_t j = 0; j < width; ++j) {
      dense[static_cast<size_t>(rows[i] * width + j)] += v[i * static_cast<size_t>(width) + j];
    }
  }
  return MakeTensor<T>({height, width}, dense);
}

template <typename T>
HostTensor Scalar(double v) {
  return MakeTensor<T>({1}, {static_cast<T>(v)});
}

// Runs `op` with Grad sparse (kRows) and with Grad the dense tensor it stands for, and compares
// the outputs `slots`; `touched_only` outputs keep their inputs' values off kRows (lazy adam).
template <typename T>
void ExpectSparseUpdateIsDense(OpRunner& runner, const ir::Op& op, const VarMap& inputs,
                               const std::vector<std::string>& outputs,
                               bool touched_only = false) {
  VarMap sparse_vars = inputs;
  SparseMap sparse{{"g", {kHeight, kRows}}};
  Status s = runner.Run(op, sparse_vars, 1234, {}, &sparse);
  ASSERT_TRUE(s.ok()) << s.ToString();
  VarMap dense_vars = inputs;
  dense_vars["g"] = Densify<T>(kRows, inputs.at("g"), kHeight);
  s = runner.Run(op, dense_vars);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const std::string& out : outputs) {
    HostTensor want = dense_vars.at(out);
    if (touched_only) {
      // Output "<x>_out" keeps input "<x>" off the listed rows.
      const std::vector<T> in = Values<T>(inputs.at(out.substr(0, out.size() - 4)));
      std::vector<T> w = Values<T>(want);
      for (int64_t r = 0; r < kHeight; ++r) {
        if (std::find(kRows.begin(), kRows.end(), r) != kRows.end()) continue;
        for (int64_t j = 0; j < kWidth; ++j) w[r * kWidth + j] = in[r * kWidth + j];
      }
      want = MakeTensor<T>(want.dims, w);
    }
    EXPECT_TRUE(AllClose(sparse_vars.at(out), want, Tol<T>(), Tol<T>())) << op.type << " " << out;
  }
}

template <typename T>
VarMap UpdateInputs() {
  return {{"p", RandomTensor<T>({kHeight, kWidth}, 1)}, {"g", Slices<T>(2)},
          {"lr", Scalar<T>(0.1)}};
}

template <typename T>
void UpdateCases(OpRunner& runner) {
  {
    SCOPED_TRACE("sgd");
    ExpectSparseUpdateIsDense<T>(runner, SgdOp(), UpdateInputs<T>(), {"p_out"});
  }
  {
    SCOPED_TRACE("adagrad");
    VarMap in = UpdateInputs<T>();
    in["m"] = RandomTensor<T>({kHeight, kWidth}, 3, 0.1, 1.0);
    ir::Op op = MakeOp("adagrad",
                       {{"Param", {"p"}}, {"Grad", {"g"}}, {"Moment", {"m"}},
                        {"LearningRate", {"lr"}}},
                       {{"ParamOut", {"p_out"}}, {"MomentOut", {"m_out"}}}, {{"epsilon", 1e-6f}});
    ExpectSparseUpdateIsDense<T>(runner, op, in, {"p_out", "m_out"});
  }
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "momentum, nesterov" : "momentum");
    VarMap in = UpdateInputs<T>();
    in["v"] = RandomTensor<T>({kHeight, kWidth}, 4);
    const ir::Op op = MomentumOp({{"mu", 0.9f}, {"use_nesterov", nesterov}});
    ExpectSparseUpdateIsDense<T>(runner, op, in, {"p_out", "v_out"});
  }
  for (bool lazy : {false, true}) {
    SCOPED_TRACE(lazy ? "adam, lazy_mode" : "adam");
    VarMap in = UpdateInputs<T>();
    in["m1"] = RandomTensor<T>({kHeight, kWidth}, 5);
    in["m2"] = RandomTensor<T>({kHeight, kWidth}, 6, 0.1, 1.0);
    in["b1p"] = Scalar<T>(0.9 * 0.9);
    in["b2p"] = Scalar<T>(0.999 * 0.999);
    const ir::Op op = AdamOp("adam", {{"lazy_mode", lazy}});
    ExpectSparseUpdateIsDense<T>(runner, op, in, {"p_out", "m1_out", "m2_out"}, lazy);
    // The powers advance either way.
    ExpectSparseUpdateIsDense<T>(runner, op, in, {"b1p_out", "b2p_out"});
  }
}

TEST(SparseConformance, UpdatesOfASparseGradientEqualThoseOfTheDenseOneItStandsFor) {
  FLEET_CONFORMANCE_RUNNER(runner);
  {
    SCOPED_TRACE("float32");
    UpdateCases<float>(*runner);
  }
  SCOPED_TRACE("float64");
  UpdateCases<double>(*runner);
}

template <typename T>
void NormAndScaleCases(OpRunner& runner) {
  const HostTensor values = Slices<T>(7);
  {
    SCOPED_TRACE("squared_l2_norm");
    ir::Op op = MakeOp("squared_l2_norm", {{"X", {"g"}}}, {{"Out", {"n"}}});
    VarMap sparse_vars{{"g", values}};
    SparseMap sparse{{"g", {kHeight, kRows}}};
    Status s = runner.Run(op, sparse_vars, 1234, {}, &sparse);
    ASSERT_TRUE(s.ok()) << s.ToString();
    VarMap dense_vars{{"g", Densify<T>(kRows, values, kHeight)}};
    s = runner.Run(op, dense_vars);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(AllClose(sparse_vars.at("n"), dense_vars.at("n"), Tol<T>(), Tol<T>()));
  }
  // scale and elementwise_mul by a one-element Y: the same entries, each slice scaled.
  const std::vector<T> v = Values<T>(values);
  std::vector<T> scaled(v.size());
  for (size_t i = 0; i < v.size(); ++i) scaled[i] = v[i] * T(-2.5);
  for (const char* type : {"scale", "elementwise_mul"}) {
    SCOPED_TRACE(type);
    const bool mul = std::string(type) == "elementwise_mul";
    ir::Op op = mul ? MakeOp(type, {{"X", {"g"}}, {"Y", {"y"}}}, {{"Out", {"out"}}})
                    : MakeOp(type, {{"X", {"g"}}}, {{"Out", {"out"}}}, {{"scale", -2.5f}});
    VarMap vars{{"g", values}, {"y", Scalar<T>(-2.5)}};
    if (!mul) vars.erase("y");
    SparseMap sparse{{"g", {kHeight, kRows}}};
    Status s = runner.Run(op, vars, 1234, {}, &sparse);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(sparse["out"].rows, kRows);
    EXPECT_EQ(sparse["out"].height, kHeight);
    EXPECT_TRUE(AllClose(vars.at("out"), MakeTensor<T>(values.dims, scaled), Tol<T>(), 0));
  }
}

TEST(SparseConformance, NormAndScalesOfASparseTensor) {
  FLEET_CONFORMANCE_RUNNER(runner);
  {
    SCOPED_TRACE("float32");
    NormAndScaleCases<float>(*runner);
  }
  SCOPED_TRACE("float64");
  NormAndScaleCases<double>(*runner);
}

// coeff * Param[r] (l2) or coeff * sign(Param[r]) (l1) lands on the first entry of each row r
// the gradient lists, once however many entries list it.
template <typename T>
void DecayCases(OpRunner& runner) {
  const HostTensor values = Slices<T>(8);
  const HostTensor param = RandomTensor<T>({kHeight, kWidth}, 9);
  for (const char* kind : {"l2", "l1"}) {
    SCOPED_TRACE(kind);
    ir::Op op = MakeOp("sparse_weight_decay", {{"Grad", {"g"}}, {"Param", {"p"}}},
                       {{"Out", {"out"}}}, {{"coeff", 0.25f}, {"regularizer", std::string(kind)}});
    VarMap vars{{"g", values}, {"p", param}};
    SparseMap sparse{{"g", {kHeight, kRows}}};
    Status s = runner.Run(op, vars, 1234, {}, &sparse);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<T> want = Values<T>(values);
    const std::vector<T> p = Values<T>(param);
    for (size_t i = 0; i < kRows.size(); ++i) {
      const int64_t r = kRows[i];
      if (r < 0 || std::find(kRows.begin(), kRows.begin() + static_cast<ptrdiff_t>(i), r) !=
                       kRows.begin() + static_cast<ptrdiff_t>(i)) {
        continue;  // empty, or not the row's first entry
      }
      for (int64_t j = 0; j < kWidth; ++j) {
        const T x = p[static_cast<size_t>(r * kWidth + j)];
        const T decay = std::string(kind) == "l1" ? T((x > 0) - (x < 0)) : x;
        want[i * kWidth + static_cast<size_t>(j)] += T(0.25) * decay;
      }
    }
    EXPECT_EQ(sparse["out"].rows, kRows);
    EXPECT_TRUE(AllClose(vars.at("out"), MakeTensor<T>(values.dims, want), Tol<T>(), Tol<T>()));
  }
}

TEST(SparseConformance, WeightDecayTouchesEachListedRowOnce) {
  FLEET_CONFORMANCE_RUNNER(runner);
  DecayCases<float>(*runner);
  DecayCases<double>(*runner);
}

// lookup_table_v2_grad with is_sparse: one entry per id, rows the ids, slices the rows of
// Out@GRAD; padding_idx and the padding rows past a sequence batch's last offset are empty.
template <typename T>
void LookupGradCases(OpRunner& runner) {
  const std::vector<int64_t> ids = {3, 7, 3, 0, 7, 9};
  const HostTensor dout = RandomTensor<T>({6, kWidth}, 10);
  ir::Op op = MakeOp("lookup_table_v2_grad",
                     {{"W", {"w"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"dout"}}},
                     {{"W@GRAD", {"dw"}}}, {{"is_sparse", true}, {"padding_idx", int64_t{0}}});
  for (bool sequences : {false, true}) {
    SCOPED_TRACE(sequences ? "a sequence batch of 5 ids in room for 6" : "plain ids");
    VarMap vars{{"w", RandomTensor<T>({kHeight, kWidth}, 11)},
                {"ids", MakeTensor<int64_t>({6}, ids)},
                {"dout", dout}};
    LodMap lods;
    if (sequences) lods["ids"] = {0, 2, 5};
    SparseMap sparse;
    Status s = runner.Run(op, vars, 1234, lods, &sparse);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<int64_t> want_rows = {3, 7, 3, -1, 7, sequences ? -1 : 9};
    std::vector<T> want = Values<T>(dout);
    for (size_t i = 0; i < want_rows.size(); ++i) {
      if (want_rows[i] >= 0) continue;
      for (int64_t j = 0; j < kWidth; ++j) want[i * kWidth + static_cast<size_t>(j)] = T(0);
    }
    EXPECT_EQ(sparse["dw"].rows, want_rows);
    EXPECT_EQ(sparse["dw"].height, kHeight);
    EXPECT_TRUE(AllClose(vars.at("dw"), MakeTensor<T>(dout.dims, want), 0, 0));
  }
  VarMap bad{{"w", RandomTensor<T>({kHeight, kWidth}, 11)},
             {"ids", MakeTensor<int64_t>({6}, {3, 7, kHeight, 0, 7, 9})},
             {"dout", dout}};
  SparseMap sparse;
  Status s = runner.Run(op, bad, 1234, {}, &sparse);
  EXPECT_NE(s.message().find("Ids[2] = 12 is outside the vocabulary [0, 12)"), std::string::npos)
      << s.ToString();
}

TEST(SparseConformance, ASparseLookupGradientHasOneEntryPerId) {
  FLEET_CONFORMANCE_RUNNER(runner);
  LookupGradCases<float>(*runner);
  LookupGradCases<double>(*runner);
}

// sum of sparse gradients: their entries one after another; with a dense one, the dense sum.
template <typename T>
void SumCases(OpRunner& runner) {
  const HostTensor a = Slices<T>(12), b = Slices<T>(13);
  const std::vector<int64_t> b_rows = {1, 1, 11, -1, 4, 5, 0};
  ir::Op op = MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"out"}}});
  {
    VarMap vars{{"a", a}, {"b", b}};
    SparseMap sparse{{"a", {kHeight, kRows}}, {"b", {kHeight, b_rows}}};
    Status s = runner.Run(op, vars, 1234, {}, &sparse);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<int64_t> rows = kRows;
    rows.insert(rows.end(), b_rows.begin(), b_rows.end());
    std::vector<T> values = Values<T>(a);
    const std::vector<T> bv = Values<T>(b);
    values.insert(values.end(), bv.begin(), bv.end());
    EXPECT_EQ(sparse["out"].rows, rows);
    EXPECT_TRUE(AllClose(vars.at("out"),
                         MakeTensor<T>({static_cast<int64_t>(rows.size()), kWidth}, values), 0,
                         0));
  }
  {
    SCOPED_TRACE("a dense X among sparse ones");
    ir::Op mixed = MakeOp("sum", {{"X", {"a", "d", "b"}}}, {{"Out", {"out"}}});
    const HostTensor d = RandomTensor<T>({kHeight, kWidth}, 14);
    VarMap vars{{"a", a}, {"b", b}, {"d", d}};
    SparseMap sparse{{"a", {kHeight, kRows}}, {"b", {kHeight, b_rows}}};
    Status s = runner.Run(mixed, vars, 1234, {}, &sparse);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<T> want = Values<T>(d);
    const std::vector<T> da = Values<T>(Densify<T>(kRows, a, kHeight));
    const std::vector<T> db = Values<T>(Densify<T>(b_rows, b, kHeight));
    for (size_t i = 0; i < want.size(); ++i) want[i] += da[i] + db[i];
    EXPECT_TRUE(AllClose(vars.at("out"), MakeTensor<T>(d.dims, want), Tol<T>(), Tol<T>()));
  }
}

TEST(SparseConformance, SumsOfSparseGradients) {
  FLEET_CONFORMANCE_RUNNER(runner);
  SumCases<float>(*runner);
  SumCases<double>(*runner);
}

// split_selected_rows: each entry goes to the block (rebased) or hash shard holding its row, in
// X's order; every Out's unused room is empty entries of zeros.
template <typename T>
void SplitCases(OpRunner& runner) {
  const HostTensor x = Slices<T>(15);
  const std::vector<T> xv = Values<T>(x);
  const size_t n = kRows.size();
  auto expect_out = [&](const VarMap& vars, SparseMap& sparse, const std::string& name,
                        const std::vector<size_t>& entries, const std::vector<int64_t>& rows) {
    std::vector<int64_t> want_rows(n, -1);
    std::vector<T> want(n * kWidth, T(0));
    for (size_t k = 0; k < entries.size(); ++k) {
      want_rows[k] = rows[k];
      for (int64_t j = 0; j < kWidth; ++j) {
        want[k * kWidth + static_cast<size_t>(j)] = xv[entries[k] * kWidth + static_cast<size_t>(j)];
      }
    }
    EXPECT_EQ(sparse[name].rows, want_rows) << name;
    EXPECT_TRUE(AllClose(vars.at(name), MakeTensor<T>(x.dims, want), 0, 0)) << name;
  };
  {
    SCOPED_TRACE("height_sections [5, 7]");
    ir::Op op = MakeOp("split_selected_rows", {{"X", {"x"}}}, {{"Out", {"o0", "o1"}}},
                       {{"height_sections", std::vector<int64_t>{5, 7}}});
    VarMap vars{{"x", x}};
    SparseMap sparse{{"x", {kHeight, kRows}}};
    Status s = runner.Run(op, vars, 1234, {}, &sparse);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(sparse["o0"].height, 5);
    EXPECT_EQ(sparse["o1"].height, 7);
    // Rows 5, 0, 5, -1, 11, 0, 5: block 0 holds rows 0..4, block 1 rows 5..11.
    expect_out(vars, sparse, "o0", {1, 5}, {0, 0});
    expect_out(vars, sparse, "o1", {0, 2, 4, 6}, {0, 0, 6, 0});
  }
  {
    SCOPED_TRACE("by_hash over 3 shards");
    ir::Op op = MakeOp("split_selected_rows", {{"X", {"x"}}}, {{"Out", {"o0", "o1", "o2"}}},
                       {{"by_hash", true}});
    VarMap vars{{"x", x}};
    SparseMap sparse{{"x", {kHeight, kRows}}};
    Status s = runner.Run(op, vars, 1234, {}, &sparse);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (int32_t k = 0; k < 3; ++k) {
      std::vector<size_t> entries;
      std::vector<int64_t> rows;
      for (size_t i = 0; i < n; ++i) {
        if (kRows[i] >= 0 && fleet_row_shard(kRows[i], 3) == k) {
          entries.push_back(i);
          rows.push_back(kRows[i]);
        }
      }
      expect_out(vars, sparse, "o" + std::to_string(k), entries, rows);
    }
  }
}

TEST(SparseConformance, SplitsCutAGradientAtRowBlocksOrHashShards) {
  FLEET_CONFORMANCE_RUNNER(runner);
  SplitCases<float>(*runner);
  SplitCases<double>(*runner);
}

// A row outside the tensor is refused naming the entry and the row, never read or written.
TEST(SparseConformance, ARowOutsideTheTableIsRefusedNamingTheEntry) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const ir::Op op = SgdOp();
  VarMap vars = UpdateInputs<float>();
  std::vector<int64_t> rows = kRows;
  rows[2] = 99;
  SparseMap sparse{{"g", {kHeight, rows}}};
  Status s = runner->Run(op, vars, 1234, {}, &sparse);
  EXPECT_NE(s.message().find("sgd: Grad entry 2 names row 99, outside the 12 rows of the tensor"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace fleet::conformance
