// The rnn op inside a training program: autodiff through rnn_grad (duplicable WeightList
// gradients, fill_zeros_like for the unused Out and cell-state gradients), SGD on every weight,
// and the loss of a small sequence-regression task falling, with and without sequence lengths.
#include <gtest/gtest.h>

#include <random>

#include "autodiff/backward.h"
#include "executor/executor.h"
#include "ops/shape_inference.h"
#include "optim/emit.h"
#include "optim/optimizer.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

constexpr int64_t kSteps = 5, kBatch = 8, kIn = 3, kHidden = 6;

ir::Var MakeVar(std::string name, std::vector<int64_t> shape, bool param,
                ir::DataType dtype = ir::DataType::kFloat32) {
  ir::Var v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.dtype = dtype;
  if (param) {
    v.persistable = true;
    v.param = ir::ParamInfo{};
  } else {
    v.stop_gradient = true;
  }
  return v;
}

// Predicts y = sum over a sequence's valid steps of feature 0 from the LSTM's final hidden state
// through a [H, 1] projection; returns the loss of every step of SGD.
std::vector<float> Train(PluginRegistry& plugins, const std::string& mode, bool lengths,
                         int steps) {
  ir::Program main, startup;
  ir::Block& g = main.global();
  const bool lstm = mode == "LSTM";
  const int64_t gates = lstm ? 4 : 3;
  EXPECT_TRUE(g.AddVar(MakeVar("x", {kSteps, -1, kIn}, false)).ok());
  EXPECT_TRUE(g.AddVar(MakeVar("y", {-1, 1}, false)).ok());
  EXPECT_TRUE(g.AddVar(MakeVar("h0", {1, -1, kHidden}, false)).ok());
  EXPECT_TRUE(g.AddVar(MakeVar("c0", {1, -1, kHidden}, false)).ok());
  EXPECT_TRUE(g.AddVar(MakeVar("len", {-1}, false, ir::DataType::kInt32)).ok());
  const std::vector<std::pair<std::string, std::vector<int64_t>>> params = {
      {"w_ih", {gates * kHidden, kIn}}, {"w_hh", {gates * kHidden, kHidden}},
      {"b_ih", {gates * kHidden}},      {"b_hh", {gates * kHidden}},
      {"proj", {kHidden, 1}}};
  int32_t seed = 11;
  for (const auto& [name, shape] : params) {
    EXPECT_TRUE(g.AddVar(MakeVar(name, shape, true)).ok());
    EXPECT_TRUE(startup.global().AddVar(MakeVar(name, shape, true)).ok());
    startup.global().ops.push_back(ir::MakeOp("uniform_random", {}, {{"Out", {name}}},
                                              {{"shape", shape},
                                               {"min", -0.4f},
                                               {"max", 0.4f},
                                               {"seed", seed++}}));
  }
  ir::SlotMap rnn_in = {{"Input", {"x"}},
                        {"PreState", lstm ? std::vector<std::string>{"h0", "c0"}
                                          : std::vector<std::string>{"h0"}},
                        {"WeightList", {"w_ih", "w_hh", "b_ih", "b_hh"}}};
  if (lengths) rnn_in["SequenceLength"] = {"len"};
  const std::vector<ir::Op> forward = {
      ir::MakeOp("rnn", rnn_in,
                 {{"Out", {"out"}},
                  {"State", lstm ? std::vector<std::string>{"hT", "cT"}
                                 : std::vector<std::string>{"hT"}},
                  {"Reserve", {"reserve"}}},
                 {{"mode", mode},
                  {"input_size", static_cast<int32_t>(kIn)},
                  {"hidden_size", static_cast<int32_t>(kHidden)}}),
      ir::MakeOp("reshape2", {{"X", {"hT"}}}, {{"Out", {"h"}}, {"XShape", {"h_shape"}}},
                 {{"shape", std::vector<int32_t>{-1, static_cast<int32_t>(kHidden)}}}),
      ir::MakeOp("mul", {{"X", {"h"}}, {"Y", {"proj"}}}, {{"Out", {"pred"}}}),
      ir::MakeOp("elementwise_sub", {{"X", {"pred"}}, {"Y", {"y"}}}, {{"Out", {"d"}}}),
      ir::MakeOp("square", {{"X", {"d"}}}, {{"Out", {"sq"}}}),
      ir::MakeOp("mean", {{"X", {"sq"}}}, {{"Out", {"loss"}}})};
  for (const ir::Op& o : forward) {
    Status s = ops::InferAndDeclareOutputs(ops::BuiltinOps(), main, 0, o);
    EXPECT_TRUE(s.ok()) << s.ToString();
    g.ops.push_back(o);
  }
  auto pairs = autodiff::AppendBackward(main, "loss");
  EXPECT_TRUE(pairs.ok()) << pairs.status().ToString();
  if (!pairs.ok()) return {};
  EXPECT_EQ(pairs->size(), params.size());
  optim::OptimizerSpec spec;
  spec.type = "adam";
  spec.lr.learning_rate = 0.05;
  Status applied = optim::ApplyOptimizer(main, startup, *pairs, spec);
  EXPECT_TRUE(applied.ok()) << applied.ToString();
  if (!applied.ok()) return {};

  exec::ExecutorOptions eo;
  eo.num_threads = 1;
  auto ex = exec::Executor::Create(plugins, "cpu", eo);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  if (!ex.ok()) return {};
  exec::Executor& e = **ex;
  std::vector<exec::HostTensor> out;
  Status s = e.Run(startup, {}, {}, out);
  EXPECT_TRUE(s.ok()) << s.ToString();

  exec::FeedMap feeds;
  feeds["x"].Reshape(ir::DataType::kFloat32, {kSteps, kBatch, kIn});
  feeds["y"].Reshape(ir::DataType::kFloat32, {kBatch, 1});
  feeds["h0"].Reshape(ir::DataType::kFloat32, {1, kBatch, kHidden});
  feeds["c0"].Reshape(ir::DataType::kFloat32, {1, kBatch, kHidden});
  feeds["len"].Reshape(ir::DataType::kInt32, {kBatch});
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < kSteps * kBatch * kIn; ++i) feeds["x"].data<float>()[i] = u(gen);
  for (int64_t i = 0; i < kBatch * kHidden; ++i) {
    feeds["h0"].data<float>()[i] = 0.0f;
    feeds["c0"].data<float>()[i] = 0.0f;
  }
  for (int64_t b = 0; b < kBatch; ++b) {
    const int32_t n = lengths ? static_cast<int32_t>(1 + b % kSteps) : kSteps;
    feeds["len"].data<int32_t>()[b] = n;
    float sum = 0;
    for (int32_t t = 0; t < n; ++t) sum += feeds["x"].data<float>()[(t * kBatch + b) * kIn];
    feeds["y"].data<float>()[b] = 0.5f * sum;
  }
  if (!lengths) feeds.erase("len");
  if (!lstm) feeds.erase("c0");
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) {
    Status r = e.Run(main, feeds, {"loss"}, out);
    EXPECT_TRUE(r.ok()) << r.ToString();
    if (!r.ok()) break;
    losses.push_back(out[0].data<float>()[0]);
  }
  return losses;
}

TEST(RnnTraining, LstmAndGruLearnASequenceSum) {
  LoadOptions load;
  load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
  PluginRegistry plugins(load);
  ASSERT_TRUE(plugins.Load("cpu").ok());
  for (const char* mode : {"LSTM", "GRU"}) {
    for (bool lengths : {false, true}) {
      SCOPED_TRACE(std::string(mode) + (lengths ? " with lengths" : ""));
      const std::vector<float> losses = Train(plugins, mode, lengths, 60);
      ASSERT_EQ(losses.size(), 60u);
      EXPECT_LT(losses.back(), 0.1f * losses.front());
    }
  }
}

}  // namespace
}  // namespace fleet
