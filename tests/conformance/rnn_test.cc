// Conformance of the rnn op (LSTM, GRU, RNN_TANH, RNN_RELU; stacked, bidirectional, with and
// without sequence lengths): forward against NumPy (ref/ref_rnn.py, one sequence and one step at
// a time), gradients of Input, PreState and every weight and bias against finite differences in
// float64, float32 gradients against float64, and the errors of bad shapes and lengths.
#include <string>
#include <vector>

#include "harness.h"

namespace fleet::conformance {
namespace {

using Attrs = ir::AttrMap;

struct RnnCase {
  std::string mode;
  int64_t layers = 1;
  bool bidirec = false;
  int64_t seq = 3, batch = 2, input = 3, hidden = 3;
  std::vector<int64_t> lengths;  // empty: no SequenceLength
  bool lengths_int64 = false;
};

int64_t GatesOf(const std::string& mode) {
  return mode == "LSTM" ? 4 : mode == "GRU" ? 3 : 1;
}

// The op and its float64 inputs: Input x, PreState h0 (c0), WeightList w0..., SequenceLength len.
ir::Op RnnOp(const RnnCase& c, VarMap* vars, uint64_t seed) {
  const int64_t dirs = c.bidirec ? 2 : 1, cells = c.layers * dirs, g = GatesOf(c.mode);
  std::vector<std::string> pre = {"h0"}, post = {"hT"};
  (*vars)["x"] = RandomTensor<double>({c.seq, c.batch, c.input}, ++seed);
  (*vars)["h0"] = RandomTensor<double>({cells, c.batch, c.hidden}, ++seed);
  if (c.mode == "LSTM") {
    pre.push_back("c0");
    post.push_back("cT");
    (*vars)["c0"] = RandomTensor<double>({cells, c.batch, c.hidden}, ++seed);
  }
  std::vector<std::string> weights;
  for (int64_t i = 0; i < 4 * cells; ++i) {
    const std::string name = "w" + std::to_string(i);
    weights.push_back(name);
    const int64_t cell = (i / 2) % cells;
    const int64_t in = cell < dirs ? c.input : dirs * c.hidden;
    std::vector<int64_t> dims = {g * c.hidden};
    if (i < 2 * cells) dims.push_back(i % 2 == 0 ? in : c.hidden);
    (*vars)[name] = RandomTensor<double>(dims, ++seed, -0.8, 0.8);
  }
  std::map<std::string, std::vector<std::string>> inputs = {
      {"Input", {"x"}}, {"PreState", pre}, {"WeightList", weights}};
  if (!c.lengths.empty()) {
    inputs["SequenceLength"] = {"len"};
    if (c.lengths_int64) {
      (*vars)["len"] = MakeTensor<int64_t>({c.batch}, c.lengths);
    } else {
      (*vars)["len"] = MakeTensor<int32_t>(
          {c.batch}, std::vector<int32_t>(c.lengths.begin(), c.lengths.end()));
    }
  }
  Attrs attrs = {{"mode", c.mode},
                 {"num_layers", static_cast<int32_t>(c.layers)},
                 {"is_bidirec", c.bidirec},
                 {"input_size", static_cast<int32_t>(c.input)},
                 {"hidden_size", static_cast<int32_t>(c.hidden)}};
  return MakeOp("rnn", inputs, {{"Out", {"y"}}, {"State", post}, {"Reserve", {"res"}}},
                std::move(attrs));
}

std::vector<RnnCase> Cases() {
  std::vector<RnnCase> cases;
  cases.push_back({"LSTM", 1, false, 4, 3, 5, 4, {}});
  cases.push_back({"LSTM", 2, true, 3, 3, 2, 3, {3, 1, 2}});
  cases.push_back({"GRU", 1, false, 4, 2, 3, 4, {}});
  cases.push_back({"GRU", 2, true, 4, 3, 3, 2, {2, 4, 1}, true});
  cases.push_back({"RNN_TANH", 1, true, 3, 2, 2, 3, {}});
  cases.push_back({"RNN_RELU", 2, false, 3, 3, 3, 2, {1, 3, 2}});
  return cases;
}

std::string Label(const RnnCase& c) {
  return c.mode + " layers " + std::to_string(c.layers) + (c.bidirec ? " bidirectional" : "") +
         (c.lengths.empty() ? "" : " with lengths");
}

TEST(RnnConformance, ForwardMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 900;
  for (const RnnCase& c : Cases()) {
    SCOPED_TRACE(Label(c));
    VarMap v;
    const ir::Op op = RnnOp(c, &v, seed += 50);
    ExpectFloatsMatchNumpy(*runner, op, v, 1e-5, 1e-5);
  }
}

TEST(RnnConformance, GradientsMatchFiniteDifferences) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  opt.outputs = {"Out", "State"};
  opt.atol = 1e-7;
  uint64_t seed = 1900;
  for (const RnnCase& c : Cases()) {
    SCOPED_TRACE(Label(c));
    VarMap v;
    const ir::Op op = RnnOp(c, &v, seed += 50);
    EXPECT_TRUE(CheckGradients(*runner, op, v, opt));
  }
}

TEST(RnnConformance, Float32GradientsMatchFloat64) {
  FLEET_CONFORMANCE_RUNNER(runner);
  uint64_t seed = 2900;
  for (const RnnCase& c : Cases()) {
    SCOPED_TRACE(Label(c));
    VarMap v;
    const ir::Op op = RnnOp(c, &v, seed += 50);
    ExpectFloat32GradsMatchFloat64(*runner, op, v, 1e-4, 1e-5, seed + 7);
  }
}

// Padded steps of a sequence must not touch its result: the same sequences padded with other
// values past their lengths give the same Out (zeros there) and State.
TEST(RnnConformance, PaddingIsIgnored) {
  FLEET_CONFORMANCE_RUNNER(runner);
  RnnCase c{"LSTM", 2, true, 5, 3, 2, 3, {5, 2, 3}};
  VarMap a;
  const ir::Op op = RnnOp(c, &a, 4000);
  VarMap b = a;
  double* xb = b["x"].data<double>();
  for (int64_t t = 0; t < c.seq; ++t) {
    for (int64_t s = 0; s < c.batch; ++s) {
      if (t < c.lengths[s]) continue;
      for (int64_t k = 0; k < c.input; ++k) xb[(t * c.batch + s) * c.input + k] = 9.0 - k;
    }
  }
  ASSERT_TRUE(runner->Run(op, a).ok());
  Status s = runner->Run(op, b);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const char* name : {"y", "hT", "cT"}) {
    EXPECT_TRUE(AllClose(b.at(name), a.at(name), 0, 0)) << name;
  }
  const std::vector<double> y = Values<double>(a.at("y"));
  const int64_t width = 2 * c.hidden;
  for (int64_t k = 0; k < width; ++k) EXPECT_EQ(y[(2 * c.batch + 1) * width + k], 0.0);
}

void ExpectError(OpRunner& runner, const ir::Op& op, VarMap v, const std::string& want) {
  Status s = runner.Run(op, v);
  ASSERT_FALSE(s.ok()) << "expected an error containing: " << want;
  EXPECT_NE(s.ToString().find("rnn"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find(want), std::string::npos) << s.ToString();
}

TEST(RnnConformance, BadInputIsRefused) {
  FLEET_CONFORMANCE_RUNNER(runner);
  const RnnCase base{"LSTM", 2, true, 3, 2, 3, 4, {}};
  {
    VarMap v;
    ir::Op op = RnnOp(base, &v, 1);
    op.inputs["WeightList"].pop_back();
    ExpectError(*runner, op, CastAll(v, ir::DataType::kFloat32), "WeightList must hold 4 * num_layers * D = 16");
  }
  {
    VarMap v;
    const ir::Op op = RnnOp(base, &v, 2);
    v["w2"] = RandomTensor<double>({16, 5}, 3);  // layer 0 reverse weight_ih
    ExpectError(*runner, op, v, "WeightList[2] (weight_ih of layer 0 direction 1) must be [16, 3]");
  }
  {
    VarMap v;
    const ir::Op op = RnnOp(base, &v, 3);
    v["c0"] = RandomTensor<double>({4, 2, 3}, 4);
    ExpectError(*runner, op, v, "PreState[1] must be [4, 2, 4], got [4, 2, 3]");
  }
  {
    VarMap v;
    ir::Op op = RnnOp(base, &v, 4);
    op.attrs["mode"] = std::string("LSTMP");
    ExpectError(*runner, op, v, "mode must be LSTM, GRU, RNN_TANH or RNN_RELU, got 'LSTMP'");
  }
  {
    VarMap v;
    ir::Op op = RnnOp(base, &v, 5);
    op.attrs["dropout_prob"] = 0.5f;
    ExpectError(*runner, op, v, "dropout_prob > 0 between stacked layers is not supported");
  }
  {
    VarMap v;
    ir::Op op = RnnOp(base, &v, 6);
    op.attrs["input_size"] = int32_t{4};
    ExpectError(*runner, op, v, "Input must be [T, B, input_size] = [T, B, 4], got [3, 2, 3]");
  }
  for (int64_t bad : {int64_t{0}, int64_t{4}, int64_t{-1}}) {
    RnnCase c = base;
    c.lengths = {2, bad};
    VarMap v;
    const ir::Op op = RnnOp(c, &v, 7);
    ExpectError(*runner, op, v,
                "SequenceLength[1] = " + std::to_string(bad) + " is outside [1, 3]");
  }
}

}  // namespace
}  // namespace fleet::conformance
