// Sparse gradients in one process: an embedding with is_sparse=True gets a SelectedRows gradient
// (one entry per id), and every optimizer that takes one moves the table as the dense gradient
// would (sgd, momentum, adam, adagrad; clipping by global norm), while lazy adam and the
// regularization of a sparse gradient move only the rows a batch touched, checked against
// updates computed here by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "autodiff/backward.h"
#include "executor/executor.h"
#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "job/pipeline.h"
#include "ops/shape_inference.h"
#include "ops/verifier.h"
#include "optim/optimizer.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

constexpr int64_t kVocab = 12, kDim = 3, kBatch = 4, kSlots = 2;

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

struct Model {
  ir::Program main, startup;
  std::vector<autodiff::ParamGrad> pairs;
};

// W [kVocab, kDim] looked up twice (ids and ids2, [kBatch, kSlots] each): loss =
// mean((e1 + e2 - target)^2), or mean(e1) with `linear`. With `dense_use`, W also feeds a
// dense op (its mean is added), so its gradient is a sum of sparse and dense parts.
Model Build(bool sparse, const optim::OptimizerSpec& spec, bool linear = false,
            bool dense_use = false) {
  Model m;
  ir::Block& g = m.main.global();
  EXPECT_TRUE(g.AddVar(MakeVar("ids", {-1, kSlots}, false, ir::DataType::kInt64)).ok());
  EXPECT_TRUE(g.AddVar(MakeVar("ids2", {-1, kSlots}, false, ir::DataType::kInt64)).ok());
  EXPECT_TRUE(g.AddVar(MakeVar("target", {-1, kSlots, kDim}, false)).ok());
  EXPECT_TRUE(g.AddVar(MakeVar("W", {kVocab, kDim}, true)).ok());
  EXPECT_TRUE(m.startup.global().AddVar(MakeVar("W", {kVocab, kDim}, true)).ok());
  m.startup.global().ops.push_back(ir::MakeOp(
      "uniform_random", {}, {{"Out", {"W"}}},
      {{"shape", std::vector<int64_t>{kVocab, kDim}}, {"min", -1.0f}, {"max", 1.0f},
       {"seed", int32_t{7}}}));
  const ir::AttrMap lookup = {{"is_sparse", sparse}};
  std::vector<ir::Op> forward;
  forward.push_back(ir::MakeOp("lookup_table_v2", {{"W", {"W"}}, {"Ids", {"ids"}}},
                               {{"Out", {"e1"}}}, lookup));
  if (linear) {
    forward.push_back(ir::MakeOp("mean", {{"X", {"e1"}}}, {{"Out", {"loss"}}}));
  } else {
    forward.push_back(ir::MakeOp("lookup_table_v2", {{"W", {"W"}}, {"Ids", {"ids2"}}},
                                 {{"Out", {"e2"}}}, lookup));
    forward.push_back(
        ir::MakeOp("elementwise_add", {{"X", {"e1"}}, {"Y", {"e2"}}}, {{"Out", {"s"}}}));
    forward.push_back(
        ir::MakeOp("elementwise_sub", {{"X", {"s"}}, {"Y", {"target"}}}, {{"Out", {"d"}}}));
    forward.push_back(ir::MakeOp("square", {{"X", {"d"}}}, {{"Out", {"sq"}}}));
    forward.push_back(ir::MakeOp("mean", {{"X", {"sq"}}}, {{"Out", {"fit"}}}));
    if (dense_use) {
      forward.push_back(ir::MakeOp("mean", {{"X", {"W"}}}, {{"Out", {"wmean"}}}));
      forward.push_back(ir::MakeOp("elementwise_add", {{"X", {"fit"}}, {"Y", {"wmean"}}},
                                   {{"Out", {"loss"}}}));
    } else {
      forward.push_back(ir::MakeOp("scale", {{"X", {"fit"}}}, {{"Out", {"loss"}}}));
    }
  }
  for (const ir::Op& o : forward) {
    Status s = ops::InferAndDeclareOutputs(ops::BuiltinOps(), m.main, 0, o);
    EXPECT_TRUE(s.ok()) << s.ToString();
    g.ops.push_back(o);
  }
  autodiff::BackwardOptions options;
  options.sparse_gradients = sparse;
  auto pairs = autodiff::AppendBackward(m.main, "loss", options);
  EXPECT_TRUE(pairs.ok()) << pairs.status().ToString();
  if (!pairs.ok()) return m;
  m.pairs = *pairs;
  Status applied = optim::ApplyOptimizer(m.main, m.startup, m.pairs, spec);
  EXPECT_TRUE(applied.ok()) << applied.ToString();
  const std::vector<std::string> errors = ir::VerifyProgramErrors(m.main, ops::BuiltinOps());
  EXPECT_TRUE(errors.empty()) << errors.front();
  return m;
}

// The ids of step `step`: a few rows, different from step to step, some repeated in a batch.
std::vector<int64_t> StepIds(int step, int which) {
  std::vector<int64_t> ids(static_cast<size_t>(kBatch * kSlots));
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>((step * 5 + which * 3 + static_cast<int>(i % 3)) % kVocab);
  }
  return ids;
}

class SparseGradTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    plugins_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(plugins_->Load("cpu").ok());
  }

  // W after each of `steps` steps.
  std::vector<std::vector<float>> Train(const Model& m, int steps, Status* error = nullptr) {
    std::unique_ptr<exec::Executor> ex = Started(m);
    if (ex == nullptr) return {};
    exec::Executor& e = *ex;
    std::vector<exec::HostTensor> out;
    std::vector<std::vector<float>> tables;
    std::mt19937 gen(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int step = 0; step < steps; ++step) {
      exec::FeedMap feeds;
      for (int which = 0; which < 2; ++which) {
        const char* name = which == 0 ? "ids" : "ids2";
        if (m.main.global().FindVar(name) == nullptr) continue;
        exec::HostTensor& t = feeds[name];
        t.Reshape(ir::DataType::kInt64, {kBatch, kSlots});
        const std::vector<int64_t> ids = StepIds(step, which);
        std::copy(ids.begin(), ids.end(), t.data<int64_t>());
      }
      feeds["target"].Reshape(ir::DataType::kFloat32, {kBatch, kSlots, kDim});
      for (int64_t i = 0; i < kBatch * kSlots * kDim; ++i) {
        feeds["target"].data<float>()[i] = u(gen);
      }
      std::erase_if(feeds, [&](const auto& kv) {
        return !std::any_of(m.main.global().ops.begin(), m.main.global().ops.end(),
                            [&](const ir::Op& op) {
                              const auto in = op.InputVars();
                              return std::find(in.begin(), in.end(), kv.first) != in.end();
                            });
      });
      Status r = e.Run(m.main, feeds, {"W"}, out);
      if (error != nullptr && !r.ok()) {
        *error = r;
        return tables;
      }
      EXPECT_TRUE(r.ok()) << r.ToString();
      if (!r.ok()) break;
      const float* w = out[0].data<float>();
      tables.emplace_back(w, w + kVocab * kDim);
    }
    return tables;
  }

  // A fresh executor on the CPU with `m`'s startup run.
  std::unique_ptr<exec::Executor> Started(const Model& m) {
    exec::ExecutorOptions eo;
    eo.num_threads = 1;
    auto ex = exec::Executor::Create(*plugins_, "cpu", eo);
    EXPECT_TRUE(ex.ok()) << ex.status().ToString();
    if (!ex.ok()) return nullptr;
    std::vector<exec::HostTensor> out;
    Status s = (*ex)->Run(m.startup, {}, {}, out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return std::move(*ex);
  }

  // W as the startup program makes it.
  std::vector<float> InitialTable(const Model& m) {
    std::unique_ptr<exec::Executor> e = Started(m);
    std::vector<exec::HostTensor> out;
    if (e == nullptr || !e->Run(m.startup, {}, {"W"}, out).ok()) return {};
    const float* w = out[0].data<float>();
    return std::vector<float>(w, w + kVocab * kDim);
  }

  std::unique_ptr<PluginRegistry> plugins_;
};

optim::OptimizerSpec Spec(const std::string& type) {
  optim::OptimizerSpec spec;
  spec.type = type;
  spec.lr.learning_rate = 0.1;
  return spec;
}

void ExpectClose(const std::vector<std::vector<float>>& a,
                 const std::vector<std::vector<float>>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) {
    for (size_t i = 0; i < a[s].size(); ++i) {
      ASSERT_NEAR(a[s][i], b[s][i], tol * (1 + std::fabs(b[s][i])))
          << "step " << s + 1 << ", element " << i;
    }
  }
}

TEST_F(SparseGradTest, SparseUpdatesFollowTheDenseTrajectory) {
  std::vector<optim::OptimizerSpec> specs = {Spec("sgd"), Spec("momentum"), Spec("adam"),
                                             Spec("adagrad")};
  optim::OptimizerSpec clipped = Spec("sgd");
  clipped.clip_global_norm = 0.05;  // below the gradients' norm, so it scales them
  specs.push_back(clipped);
  for (const optim::OptimizerSpec& spec : specs) {
    SCOPED_TRACE(spec.type + (spec.clip_global_norm > 0 ? " clipped" : ""));
    const Model sparse = Build(true, spec);
    const Model dense = Build(false, spec);
    const ir::Var* g = sparse.main.global().FindVar("W@GRAD");
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(g->selected_rows);
    EXPECT_EQ(g->shape, (std::vector<int64_t>{kVocab, kDim}));
    EXPECT_FALSE(dense.main.global().FindVar("W@GRAD")->selected_rows);
    const auto a = Train(sparse, 6);
    const auto b = Train(dense, 6);
    ExpectClose(a, b, 1e-5);
    // The table moved at all.
    ASSERT_FALSE(a.empty());
    EXPECT_NE(a.back(), Train(dense, 1).front());
  }
}

TEST_F(SparseGradTest, SparseAndDenseUsesOfOneTableSumToADenseGradient) {
  const Model sparse = Build(true, Spec("sgd"), false, true);
  const Model dense = Build(false, Spec("sgd"), false, true);
  EXPECT_FALSE(sparse.main.global().FindVar("W@GRAD")->selected_rows);
  ExpectClose(Train(sparse, 4), Train(dense, 4), 1e-5);
}

// Lazy adam on loss = mean(lookup(W, ids)): every id adds 1 / (kBatch * kSlots * kDim) to each
// element of its row's gradient. Rows a step does not touch keep their values and moments.
TEST_F(SparseGradTest, LazyAdamMovesOnlyTouchedRowsAsComputedByHand) {
  optim::OptimizerSpec spec = Spec("adam");
  spec.options["lazy_mode"] = true;
  const Model m = Build(true, spec, /*linear=*/true);
  Status error;
  const auto tables = Train(m, 4, &error);
  ASSERT_TRUE(error.ok()) << error.ToString();
  ASSERT_EQ(tables.size(), 4u);

  std::vector<double> w(kVocab * kDim), m1(kVocab * kDim, 0), m2(kVocab * kDim, 0);
  const std::vector<float> w0 = InitialTable(m);
  ASSERT_EQ(w0.size(), w.size());
  std::copy(w0.begin(), w0.end(), w.begin());

  const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  double b1p = b1, b2p = b2;
  for (int step = 0; step < 4; ++step) {
    const std::vector<int64_t> ids = StepIds(step, 0);
    std::map<int64_t, double> grad;
    for (int64_t id : ids) grad[id] += 1.0 / (kBatch * kSlots * kDim);
    const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
    const double eps_t = eps * std::sqrt(1 - b2p);
    for (const auto& [row, gv] : grad) {
      for (int64_t j = 0; j < kDim; ++j) {
        const size_t i = static_cast<size_t>(row * kDim + j);
        m1[i] = b1 * m1[i] + (1 - b1) * gv;
        m2[i] = b2 * m2[i] + (1 - b2) * gv * gv;
        w[i] -= lr_t * m1[i] / (std::sqrt(m2[i]) + eps_t);
      }
    }
    b1p *= b1;
    b2p *= b2;
    for (int64_t r = 0; r < kVocab; ++r) {
      for (int64_t j = 0; j < kDim; ++j) {
        const size_t i = static_cast<size_t>(r * kDim + j);
        EXPECT_NEAR(tables[static_cast<size_t>(step)][i], w[i], 1e-5)
            << "step " << step + 1 << ", row " << r << (grad.count(r) ? " (touched)" : "");
        if (step > 0 && grad.count(r) == 0) {  // untouched: exactly as before
          EXPECT_EQ(tables[static_cast<size_t>(step)][i], tables[static_cast<size_t>(step - 1)][i]);
        }
      }
    }
  }

  // Without lazy_mode, rows with momentum keep moving when a step does not touch them.
  const auto eager = Train(Build(true, Spec("adam"), true), 4);
  ASSERT_EQ(eager.size(), 4u);
  EXPECT_NE(eager[3], tables[3]);
}

// Regularization of a sparse gradient decays the touched rows once each, and leaves the others:
// one sgd step of the regularized model is the unregularized step minus lr * coeff * W0 on the
// touched rows.
TEST_F(SparseGradTest, L2DecayTouchesOnlyTheBatchRows) {
  optim::OptimizerSpec reg = Spec("sgd");
  reg.l2_coeff = 0.5;
  const auto regularized = Train(Build(true, reg), 1);
  const Model plain_model = Build(true, Spec("sgd"));
  const auto plain = Train(plain_model, 1);
  const std::vector<float> w0 = InitialTable(plain_model);
  ASSERT_EQ(w0.size(), static_cast<size_t>(kVocab * kDim));
  ASSERT_EQ(regularized.size(), 1u);
  ASSERT_EQ(plain.size(), 1u);
  std::vector<int64_t> touched = StepIds(0, 0);
  const std::vector<int64_t> more = StepIds(0, 1);
  touched.insert(touched.end(), more.begin(), more.end());
  for (int64_t r = 0; r < kVocab; ++r) {
    const bool hit = std::find(touched.begin(), touched.end(), r) != touched.end();
    for (int64_t j = 0; j < kDim; ++j) {
      const size_t i = static_cast<size_t>(r * kDim + j);
      const double expected = plain[0][i] - (hit ? 0.1 * 0.5 * w0[i] : 0.0);
      EXPECT_NEAR(regularized[0][i], expected, 1e-6) << "row " << r;
    }
  }
}

TEST_F(SparseGradTest, AnIdOutsideTheTableIsRefusedNamingIt) {
  const Model m = Build(true, Spec("sgd"), true);
  std::unique_ptr<exec::Executor> ex = Started(m);
  ASSERT_NE(ex, nullptr);
  std::vector<exec::HostTensor> out;
  exec::FeedMap feeds;
  feeds["ids"].Reshape(ir::DataType::kInt64, {kBatch, kSlots});
  for (int64_t i = 0; i < kBatch * kSlots; ++i) feeds["ids"].data<int64_t>()[i] = i == 5 ? 99 : 1;
  Status s = ex->Run(m.main, feeds, {"W"}, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Ids[5] = 99 is outside the vocabulary [0, 12)"), std::string::npos)
      << s.ToString();
}

TEST_F(SparseGradTest, ASparseGradientIsNotFetchedAndOnlySomeOptimizersTakeIt) {
  const Model m = Build(true, Spec("sgd"), true);
  std::unique_ptr<exec::Executor> ex = Started(m);
  ASSERT_NE(ex, nullptr);
  auto p = ex->Prepare(m.main, {{"ids", {kBatch, kSlots}}}, {"W@GRAD"});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("fetch 'W@GRAD': a sparse gradient"), std::string::npos)
      << p.status().ToString();

  // Another optimizer on the same gradient: the sgd ops stripped, `spec` applied instead.
  auto reapply = [&](const optim::OptimizerSpec& spec) {
    ir::Program main = m.main, startup = m.startup;
    std::erase_if(main.global().ops,
                  [](const ir::Op& op) { return ir::OpRoleOf(op) & ir::op_role::kOptimize; });
    return optim::ApplyOptimizer(main, startup, m.pairs, spec);
  };
  // rmsprop has no sparse update: the build says which parameter and what to use.
  optim::OptimizerSpec rms = Spec("rmsprop");
  EXPECT_FALSE(optim::OptimizerTakesSparseGradients(rms));
  Status s = reapply(rms);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the gradient of 'W' is sparse (an embedding with is_sparse=True), "
                             "which rmsprop does not update"),
            std::string::npos)
      << s.ToString();

  // Nor does clipping each gradient by its own norm.
  optim::OptimizerSpec clipped = Spec("sgd");
  clipped.clip_norm = 1.0;
  s = reapply(clipped);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("which ClipGradByNorm does not take"), std::string::npos)
      << s.ToString();
}

// split_selected_rows {by_hash} (a growable table's gradient, whose rows are ids): each entry
// goes whole, row unchanged, to Out[fleet_row_shard(row, 2)]. The shards of ids 0..11 for two
// servers, computed independently (SplitMix64 in Python), are 1 1 0 1 0 0 0 1 0 0 0 1; each
// output is densified (sum with zeros) and compared with the gradient scattered by hand.
TEST_F(SparseGradTest, SplitByHashSendsEachIdToItsShard) {
  constexpr int64_t kRows = 16, kWidth = 2;
  const std::vector<int64_t> ids = {2, 0, 4, 2, 7, 9};
  const std::vector<int> shard = {1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
  ir::Program p;
  ir::Block& b = p.global();
  ASSERT_TRUE(b.AddVar(MakeVar("ids", {6}, false, ir::DataType::kInt64)).ok());
  ASSERT_TRUE(b.AddVar(MakeVar("dout", {6, kWidth}, false)).ok());
  ASSERT_TRUE(b.AddVar(MakeVar("zeros", {kRows, kWidth}, false)).ok());
  for (const char* name : {"g", "o0", "o1"}) {
    ir::Var v = MakeVar(name, {kRows, kWidth}, false);
    v.selected_rows = true;
    ASSERT_TRUE(b.AddVar(v).ok());
  }
  for (const char* name : {"d0", "d1"}) {
    ASSERT_TRUE(b.AddVar(MakeVar(name, {kRows, kWidth}, false)).ok());
  }
  b.ops.push_back(ir::MakeOp("lookup_table_v2_grad", {{"Ids", {"ids"}}, {"Out@GRAD", {"dout"}}},
                             {{"W@GRAD", {"g"}}},
                             {{"is_sparse", true}, {"table_height", kRows}}));
  b.ops.push_back(ir::MakeOp("split_selected_rows", {{"X", {"g"}}}, {{"Out", {"o0", "o1"}}},
                             {{"by_hash", true}}));
  b.ops.push_back(ir::MakeOp("fill_constant", {}, {{"Out", {"zeros"}}},
                             {{"shape", std::vector<int64_t>{kRows, kWidth}}, {"value", 0.0f}}));
  b.ops.push_back(ir::MakeOp("sum", {{"X", {"zeros", "o0"}}}, {{"Out", {"d0"}}}, {}));
  b.ops.push_back(ir::MakeOp("sum", {{"X", {"zeros", "o1"}}}, {{"Out", {"d1"}}}, {}));
  exec::ExecutorOptions eo;
  eo.num_threads = 1;
  auto ex = exec::Executor::Create(*plugins_, "cpu", eo);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  exec::FeedMap feeds;
  feeds["ids"].Reshape(ir::DataType::kInt64, {6});
  std::copy(ids.begin(), ids.end(), feeds["ids"].data<int64_t>());
  feeds["dout"].Reshape(ir::DataType::kFloat32, {6, kWidth});
  for (int64_t i = 0; i < 6 * kWidth; ++i) feeds["dout"].data<float>()[i] = 1.0f + i;
  std::vector<exec::HostTensor> out;
  Status s = (*ex)->Run(p, feeds, {"d0", "d1"}, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::vector<float>> want(2, std::vector<float>(kRows * kWidth, 0.0f));
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < kWidth; ++j) {
      want[static_cast<size_t>(shard[static_cast<size_t>(ids[i])])]
          [static_cast<size_t>(ids[i] * kWidth + j)] += 1.0f + static_cast<float>(i) * kWidth + j;
    }
  }
  for (size_t k = 0; k < 2; ++k) {
    const float* got = out[k].data<float>();
    EXPECT_EQ(std::vector<float>(got, got + kRows * kWidth), want[k]) << "Out[" << k << "]";
  }
}

// Where a job cannot use sparse gradients it trains with dense ones and says why: a transport
// built before ABI 1.7 (it would drop a gradient's rows), a device without sparse kernels. A 1.7
// transport and the CPU need no reason, in any strategy.
TEST_F(SparseGradTest, TheJobSaysWhyItsGradientsAreDense) {
  Config config;
  config.strategy_mode = "pserver";
  config.transport.backend = "old_rpc";
  ComponentRecord transport;
  transport.kind = FLEET_COMPONENT_TRANSPORT;
  transport.name = "old_rpc";
  transport.abi_minor = 6;
  EXPECT_EQ(DenseGradientsReason(config, *plugins_, "cpu", &transport),
            "transport 'old_rpc' predates ABI 1.7 and cannot send them");
  transport.abi_minor = 7;
  EXPECT_EQ(DenseGradientsReason(config, *plugins_, "cpu", &transport), "");
  EXPECT_EQ(DenseGradientsReason(config, *plugins_, "nowhere", &transport),
            "device 'nowhere' has no kernels that take sparse gradients");
  // The CUDA plugin has the kernels, but a parameter-server trainer sends from host memory.
  const bool cuda = plugins_->Load("cuda").ok();
  if (cuda) {
    EXPECT_EQ(DenseGradientsReason(config, *plugins_, "cuda", &transport),
              "a parameter-server trainer sends them from host memory, and device 'cuda' keeps "
              "its tensors elsewhere");
  }
  // Every collective mode takes them: grad_allreduce exchanges them, local_sgd keeps them local.
  config.strategy_mode = "collective";
  for (const char* mode : {"grad_allreduce", "local_sgd", "single_process_multi_thread"}) {
    config.collective.mode = mode;
    EXPECT_EQ(DenseGradientsReason(config, *plugins_, "cpu"), "") << mode;
    if (cuda) {
      EXPECT_EQ(DenseGradientsReason(config, *plugins_, "cuda"), "") << mode;
    }
  }
}

TEST(SparseGradIr, SelectedRowsVarsRoundTripAndParameterOnesAreRefused) {
  const std::string text =
      "program {\n"
      "block 0 {\n"
      "  var g : selected_rows float32[10, 4]\n"
      "}\n"
      "}\n";
  auto parsed = ir::ParseProgram(text, "t");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const ir::Var* g = parsed->global().FindVar("g");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->selected_rows);
  EXPECT_EQ(g->shape, (std::vector<int64_t>{10, 4}));
  auto again = ir::ParseProgram(ir::PrintProgram(*parsed), "t2");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *parsed);
  EXPECT_NE(ir::PrintProgram(*parsed).find("var g : selected_rows float32[10, 4]"),
            std::string::npos);

  // A parameter server's receive var is persistable; it round-trips.
  std::string received = text;
  received.replace(received.find("[10, 4]"), 7, "[10, 4] persistable");
  auto kept = ir::ParseProgram(received, "t3");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_TRUE(kept->global().FindVar("g")->persistable);
  auto kept_again = ir::ParseProgram(ir::PrintProgram(*kept), "t4");
  ASSERT_TRUE(kept_again.ok());
  EXPECT_EQ(*kept_again, *kept);

  std::string bad = text;
  bad.replace(bad.find("var g :"), 7, "param g :");
  auto refused = ir::ParseProgram(bad, "t5");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("selected_rows var 'g'"), std::string::npos)
      << refused.status().ToString();
}

// A sparse gradient handed to an op that does not take one is refused by name, before any kernel
// could misread its entries as a dense tensor.
TEST(SparseGradIr, AnOpThatTakesNoSparseGradientRefusesOne) {
  const std::string text =
      "program {\n"
      "block 0 {\n"
      "  var g : selected_rows float32[10, 4]\n"
      "  var y : float32[10, 4]\n"
      "  op relu (X=[g]) -> (Out=[y])\n"
      "}\n"
      "}\n";
  auto parsed = ir::ParseProgram(text, "t");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const std::vector<std::string> errors = ir::VerifyProgramErrors(*parsed, ops::BuiltinOps());
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.front().find("input X 'g' is a sparse gradient (selected_rows), which relu "
                                "does not take"),
            std::string::npos)
      << errors.front();
}

}  // namespace
}  // namespace fleet
