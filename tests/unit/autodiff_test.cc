// append_backward on small programs over a local registry of test ops, so these tests depend on
// nothing but the autodiff itself. Emitted programs are compared op by op (type, slots, vars).
#include <gtest/gtest.h>

#include "op_summary.h"
#include "autodiff/backward.h"

#include <cmath>
#include <random>

#include "executor/executor.h"
#include "ops/shape_inference.h"

namespace fleet::autodiff {
namespace {

using ir::DataType;

// Test ops: unary "t_act" (X -> Out), binary "t_add"/"t_mul" (X, Y -> Out), "t_loss"
// (X, Label[no_grad] -> Out [1]), "t_split" (X -> A, B), "t_frozen" (X -> Out, no grad rule).
ops::OpRegistry TestRegistry() {
  ops::OpRegistry r;
  auto same_as_x = [](ops::ShapeContext& c) {
    for (auto& [slot, infos] : c.outputs) {
      for (auto& info : infos) info = c.Input("X");
    }
    return OkStatus();
  };
  auto add = [&](std::string type, std::vector<ops::SlotSpec> in, std::vector<ops::SlotSpec> out,
                 bool differentiable, ops::ShapeFn fn) {
    ops::OpSchema s;
    s.type = type;
    s.inputs = std::move(in);
    s.outputs = std::move(out);
    s.infer_shape = std::move(fn);
    if (differentiable) s.grad = ops::DefaultGrad(s);
    EXPECT_TRUE(r.Register(s).ok());
    if (differentiable) {
      ops::OpSchema g;
      g.type = type + "_grad";
      g.infer_shape = [](ops::ShapeContext&) { return OkStatus(); };
      EXPECT_TRUE(r.Register(g).ok());
    }
  };
  add("t_act", {{"X"}}, {{"Out"}}, true, same_as_x);
  add("t_add", {{"X"}, {"Y"}}, {{"Out"}}, true, same_as_x);
  add("t_mul", {{"X"}, {"Y"}}, {{"Out"}}, true, same_as_x);
  add("t_split", {{"X"}}, {{"A"}, {"B"}}, true, same_as_x);
  add("t_frozen", {{"X"}}, {{"Out"}}, false, same_as_x);
  add("t_loss", {{"X"}, {"Label", false, false, /*no_grad=*/true}}, {{"Out"}}, true,
      [](ops::ShapeContext& c) {
        c.Output("Out") = {c.Input("X").dtype, {1}};
        return OkStatus();
      });
  return r;
}

ir::Var Data(std::string name, std::vector<int64_t> shape = {-1, 4}) {
  ir::Var v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.stop_gradient = true;
  return v;
}

ir::Var Param(std::string name, std::vector<int64_t> shape = {4, 4}, bool trainable = true) {
  ir::Var v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.persistable = true;
  v.param = ir::ParamInfo{};
  v.param->trainable = trainable;
  return v;
}

ir::Var Tmp(std::string name, std::vector<int64_t> shape = {-1, 4}) {
  ir::Var v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  return v;
}

ir::Op Op(std::string type, ir::SlotMap in, ir::SlotMap out) {
  ir::Op op;
  op.type = std::move(type);
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  return op;
}

void Declare(ir::Program& p, std::vector<ir::Var> vars) {
  for (auto& v : vars) ASSERT_TRUE(p.global().AddVar(std::move(v)).ok());
}

using fleet::testing::DescribeOps;

std::vector<std::string> Names(const std::vector<ParamGrad>& pgs) {
  std::vector<std::string> out;
  for (const auto& pg : pgs) out.push_back(pg.param + ":" + pg.grad);
  return out;
}

// x -> mul(w) -> act -> loss(label)
ir::Program Chain() {
  ir::Program p;
  Declare(p, {Data("x"), Data("label", {-1, 1}), Param("w"), Tmp("h"), Tmp("a"),
              Tmp("loss", {1})});
  p.global().ops = {Op("t_mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"h"}}}),
                    Op("t_act", {{"X", {"h"}}}, {{"Out", {"a"}}}),
                    Op("t_loss", {{"X", {"a"}}, {"Label", {"label"}}}, {{"Out", {"loss"}}})};
  return p;
}

TEST(AutodiffTest, ChainEmitsGradOpsInReverseAndDeclaresGrads) {
  ir::Program p = Chain();
  auto r = AppendBackward(p, "loss", {}, TestRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"w:w@GRAD"}));
  // x and label need no gradient: X@GRAD of t_mul_grad is pruned, Label has no_grad.
  EXPECT_EQ(DescribeOps(p, 3),
            (std::vector<std::string>{
                "fill_constant()->(Out=loss@GRAD)",
                "t_loss_grad(Label=label Out=loss Out@GRAD=loss@GRAD X=a)->(X@GRAD=a@GRAD)",
                "t_act_grad(Out=a Out@GRAD=a@GRAD X=h)->(X@GRAD=h@GRAD)",
                "t_mul_grad(Out=h Out@GRAD=h@GRAD X=x Y=w)->(Y@GRAD=w@GRAD)"}));
  const ir::Op& seed = p.global().ops[3];
  EXPECT_EQ(std::get<std::vector<int64_t>>(seed.attrs.at("shape")), std::vector<int64_t>{1});
  EXPECT_EQ(std::get<float>(seed.attrs.at("value")), 1.0f);
  EXPECT_EQ(std::get<int32_t>(seed.attrs.at("dtype")), FLEET_DTYPE_FLOAT32);
  // Gradients take their forward var's dtype and shape, -1 included; none is persistable.
  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"loss@GRAD", {1}}, {"a@GRAD", {-1, 4}}, {"h@GRAD", {-1, 4}}, {"w@GRAD", {4, 4}}}) {
    const ir::Var* v = p.global().FindVar(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->shape, shape) << name;
    EXPECT_EQ(v->dtype, DataType::kFloat32);
    EXPECT_FALSE(v->persistable);
  }
  EXPECT_EQ(p.global().FindVar("x@GRAD"), nullptr);
  EXPECT_EQ(p.global().FindVar("label@GRAD"), nullptr);
}

TEST(AutodiffTest, FanOutAccumulatesRenamedPartialGradients) {
  // h = x*w; a = act(h); s = a + h; loss(s): h feeds two ops, w feeds two ops.
  ir::Program p;
  Declare(p, {Data("x"), Data("label", {-1, 1}), Param("w"), Tmp("h"), Tmp("a"), Tmp("s"),
              Tmp("t"), Tmp("loss", {1})});
  p.global().ops = {Op("t_mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"h"}}}),
                    Op("t_act", {{"X", {"h"}}}, {{"Out", {"a"}}}),
                    Op("t_add", {{"X", {"a"}}, {"Y", {"h"}}}, {{"Out", {"s"}}}),
                    Op("t_mul", {{"X", {"s"}}, {"Y", {"w"}}}, {{"Out", {"t"}}}),
                    Op("t_loss", {{"X", {"t"}}, {"Label", {"label"}}}, {{"Out", {"loss"}}})};
  auto r = AppendBackward(p, "loss", {}, TestRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"w:w@GRAD"}));
  EXPECT_EQ(
      DescribeOps(p, 5),
      (std::vector<std::string>{
          "fill_constant()->(Out=loss@GRAD)",
          "t_loss_grad(Label=label Out=loss Out@GRAD=loss@GRAD X=t)->(X@GRAD=t@GRAD)",
          "t_mul_grad(Out=t Out@GRAD=t@GRAD X=s Y=w)->"
          "(X@GRAD=s@GRAD Y@GRAD=w@GRAD@RENAME@block0@0)",
          "t_add_grad(Out=s Out@GRAD=s@GRAD X=a Y=h)->"
          "(X@GRAD=a@GRAD Y@GRAD=h@GRAD@RENAME@block0@0)",
          "t_act_grad(Out=a Out@GRAD=a@GRAD X=h)->(X@GRAD=h@GRAD@RENAME@block0@1)",
          "sum(X=h@GRAD@RENAME@block0@0,h@GRAD@RENAME@block0@1)->(Out=h@GRAD)",
          "t_mul_grad(Out=h Out@GRAD=h@GRAD X=x Y=w)->(Y@GRAD=w@GRAD@RENAME@block0@1)",
          "sum(X=w@GRAD@RENAME@block0@0,w@GRAD@RENAME@block0@1)->(Out=w@GRAD)"}));
  for (const char* name : {"h@GRAD@RENAME@block0@0", "h@GRAD@RENAME@block0@1", "h@GRAD",
                           "w@GRAD@RENAME@block0@1", "w@GRAD"}) {
    EXPECT_NE(p.global().FindVar(name), nullptr) << name;
  }
  EXPECT_EQ(p.global().FindVar("w@GRAD@RENAME@block0@0")->shape, (std::vector<int64_t>{4, 4}));
}

TEST(AutodiffTest, StopGradientAndNoGradSetPrune) {
  // loss(act(h1 + h2)), h1 = x*w1, h2 = x*w2: w2 in the no-grad set, then w1 stop_gradient.
  auto build = [] {
    ir::Program p;
    Declare(p, {Data("x"), Data("label", {-1, 1}), Param("w1"), Param("w2"), Tmp("h1"),
                Tmp("h2"), Tmp("s"), Tmp("a"), Tmp("loss", {1})});
    p.global().ops = {Op("t_mul", {{"X", {"x"}}, {"Y", {"w1"}}}, {{"Out", {"h1"}}}),
                      Op("t_mul", {{"X", {"x"}}, {"Y", {"w2"}}}, {{"Out", {"h2"}}}),
                      Op("t_add", {{"X", {"h1"}}, {"Y", {"h2"}}}, {{"Out", {"s"}}}),
                      Op("t_act", {{"X", {"s"}}}, {{"Out", {"a"}}}),
                      Op("t_loss", {{"X", {"a"}}, {"Label", {"label"}}}, {{"Out", {"loss"}}})};
    return p;
  };
  {
    ir::Program p = build();
    BackwardOptions opts;
    opts.no_grad_set = {"w2"};
    auto r = AppendBackward(p, "loss", opts, TestRegistry());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Names(*r), (std::vector<std::string>{"w1:w1@GRAD"}));
    EXPECT_EQ(DescribeOps(p, 5),
              (std::vector<std::string>{
                  "fill_constant()->(Out=loss@GRAD)",
                  "t_loss_grad(Label=label Out=loss Out@GRAD=loss@GRAD X=a)->(X@GRAD=a@GRAD)",
                  "t_act_grad(Out=a Out@GRAD=a@GRAD X=s)->(X@GRAD=s@GRAD)",
                  "t_add_grad(Out=s Out@GRAD=s@GRAD X=h1 Y=h2)->(X@GRAD=h1@GRAD)",
                  "t_mul_grad(Out=h1 Out@GRAD=h1@GRAD X=x Y=w1)->(Y@GRAD=w1@GRAD)"}));
  }
  {
    // A stop_gradient intermediate cuts everything above it.
    ir::Program p = build();
    p.global().FindVar("h1")->stop_gradient = true;
    BackwardOptions opts;
    opts.no_grad_set = {"h2"};
    auto r = AppendBackward(p, "loss", opts, TestRegistry());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->empty());
    // Only the seed: nothing between the loss and a parameter remains.
    EXPECT_EQ(DescribeOps(p, 5), (std::vector<std::string>{"fill_constant()->(Out=loss@GRAD)"}));
  }
}

TEST(AutodiffTest, ParamNotReachingLossIsNotReturned) {
  ir::Program p = Chain();
  // w_side feeds an op whose output the loss never reads; w_frozen is not trainable.
  Declare(p, {Param("w_side"), Param("w_frozen", {4, 4}, false), Tmp("side"), Tmp("h2")});
  auto& ops = p.global().ops;
  ops.insert(ops.begin(), Op("t_mul", {{"X", {"x"}}, {"Y", {"w_side"}}}, {{"Out", {"side"}}}));
  ops.insert(ops.begin() + 2,
             Op("t_mul", {{"X", {"h"}}, {"Y", {"w_frozen"}}}, {{"Out", {"h2"}}}));
  ops[3].inputs["X"] = {"h2"};  // t_act reads h2 now
  auto r = AppendBackward(p, "loss", {}, TestRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"w:w@GRAD"}));
  EXPECT_EQ(p.global().FindVar("w_side@GRAD"), nullptr);
  EXPECT_EQ(p.global().FindVar("w_frozen@GRAD"), nullptr);
  EXPECT_EQ(DescribeOps(p, 5),
            (std::vector<std::string>{
                "fill_constant()->(Out=loss@GRAD)",
                "t_loss_grad(Label=label Out=loss Out@GRAD=loss@GRAD X=a)->(X@GRAD=a@GRAD)",
                "t_act_grad(Out=a Out@GRAD=a@GRAD X=h2)->(X@GRAD=h2@GRAD)",
                "t_mul_grad(Out=h2 Out@GRAD=h2@GRAD X=h Y=w_frozen)->(X@GRAD=h@GRAD)",
                "t_mul_grad(Out=h Out@GRAD=h@GRAD X=x Y=w)->(Y@GRAD=w@GRAD)"}));
}

TEST(AutodiffTest, UnusedOutputGradientIsZeros) {
  // t_split(h) -> (a, b); only a reaches the loss, so b@GRAD is filled with zeros.
  ir::Program p;
  Declare(p, {Data("x"), Data("label", {-1, 1}), Param("w"), Tmp("h"), Tmp("a"), Tmp("b"),
              Tmp("loss", {1})});
  p.global().ops = {Op("t_mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"h"}}}),
                    Op("t_split", {{"X", {"h"}}}, {{"A", {"a"}}, {"B", {"b"}}}),
                    Op("t_loss", {{"X", {"a"}}, {"Label", {"label"}}}, {{"Out", {"loss"}}})};
  auto r = AppendBackward(p, "loss", {}, TestRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(DescribeOps(p, 3),
            (std::vector<std::string>{
                "fill_constant()->(Out=loss@GRAD)",
                "t_loss_grad(Label=label Out=loss Out@GRAD=loss@GRAD X=a)->(X@GRAD=a@GRAD)",
                "fill_zeros_like(X=b)->(Out=b@GRAD)",
                "t_split_grad(A=a A@GRAD=a@GRAD B=b B@GRAD=b@GRAD X=h)->(X@GRAD=h@GRAD)",
                "t_mul_grad(Out=h Out@GRAD=h@GRAD X=x Y=w)->(Y@GRAD=w@GRAD)"}));
  EXPECT_EQ(p.global().FindVar("b@GRAD")->shape, (std::vector<int64_t>{-1, 4}));
}

TEST(AutodiffTest, PartiallyPrunedDuplicableSlotKeepsPositions) {
  ops::OpRegistry r = TestRegistry();
  ops::OpSchema s;
  s.type = "t_sum";
  s.inputs = {{"X", false, /*duplicable=*/true}};
  s.outputs = {{"Out"}};
  s.infer_shape = [](ops::ShapeContext& c) {
    c.Output("Out") = c.Input("X");
    return OkStatus();
  };
  s.grad = ops::DefaultGrad(s);
  ASSERT_TRUE(r.Register(s).ok());
  ir::Program p;
  Declare(p, {Data("x"), Data("label", {-1, 1}), Param("w"), Tmp("h"), Tmp("s"),
              Tmp("loss", {1})});
  p.global().ops = {Op("t_mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"h"}}}),
                    Op("t_sum", {{"X", {"x", "h"}}}, {{"Out", {"s"}}}),
                    Op("t_loss", {{"X", {"s"}}, {"Label", {"label"}}}, {{"Out", {"loss"}}})};
  auto res = AppendBackward(p, "loss", {}, r);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(DescribeOps(p, 5)[0],
            "t_sum_grad(Out=s Out@GRAD=s@GRAD X=x,h)->(X@GRAD=@EMPTY@,h@GRAD)");
  EXPECT_EQ(p.global().FindVar("@EMPTY@"), nullptr);
}

TEST(AutodiffTest, MissingGradRuleNamesTheOp) {
  ir::Program p = Chain();
  p.global().ops[1].type = "t_frozen";
  auto r = AppendBackward(p, "loss", {}, TestRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("op #1 (t_frozen)"), std::string::npos) << m;
  EXPECT_NE(m.find("'h'"), std::string::npos) << m;
  // A failed call leaves the program as it was.
  EXPECT_EQ(p.global().ops.size(), 3u);
  EXPECT_EQ(p.global().FindVar("loss@GRAD"), nullptr);
}

// A bool or integer var carries no gradient, so an op without a grad rule that only produces
// one (a comparison, arg_max) may sit between a parameter and the loss.
TEST(AutodiffTest, IntegralResultsStopTheGradient) {
  ir::Program p = Chain();
  ir::Var mask = Tmp("mask");
  mask.dtype = DataType::kBool;
  Declare(p, {mask, Tmp("b")});
  auto& ops = p.global().ops;
  ops.insert(ops.begin() + 1, Op("t_frozen", {{"X", {"h"}}}, {{"Out", {"mask"}}}));
  ops.insert(ops.begin() + 2, Op("t_add", {{"X", {"h"}}, {"Y", {"mask"}}}, {{"Out", {"b"}}}));
  ops[3].inputs["X"] = {"b"};
  auto r = AppendBackward(p, "loss", {}, TestRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"w:w@GRAD"}));
  EXPECT_EQ(p.global().FindVar("mask@GRAD"), nullptr);
}

TEST(AutodiffTest, LossChecks) {
  {
    ir::Program p = Chain();
    p.global().FindVar("loss")->shape = {-1, 2};
    auto r = AppendBackward(p, "loss", {}, TestRegistry());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("must hold one element"), std::string::npos)
        << r.status().ToString();
  }
  {
    // [-1] and [] losses are accepted; the seed takes shape [1] and [].
    for (auto shape : {std::vector<int64_t>{-1}, std::vector<int64_t>{}}) {
      ir::Program p = Chain();
      p.global().FindVar("loss")->shape = shape;
      auto r = AppendBackward(p, "loss", {}, TestRegistry());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::vector<int64_t> want = shape.empty() ? shape : std::vector<int64_t>{1};
      EXPECT_EQ(std::get<std::vector<int64_t>>(p.global().ops[3].attrs.at("shape")), want);
    }
  }
  {
    ir::Program p = Chain();
    auto r = AppendBackward(p, "no_such_loss", {}, TestRegistry());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kNotFound);
  }
  {
    ir::Program p = Chain();
    ASSERT_TRUE(AppendBackward(p, "loss", {}, TestRegistry()).ok());
    auto again = AppendBackward(p, "loss", {}, TestRegistry());
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  }
}

// End to end with the built-in ops and the cpu plugin, in float64: the gradients the emitted
// program computes match central differences of the forward program's loss. z feeds two ops,
// so its gradient goes through the renamed partials and their sum.
TEST(AutodiffEndToEnd, GradientsMatchFiniteDifferences) {
  const ops::OpRegistry& reg = ops::BuiltinOps();
  for (const char* t : {"mul", "elementwise_add", "tanh", "elementwise_mul", "mean", "sum",
                        "fill_constant"}) {
    if (reg.Find(t) == nullptr) GTEST_SKIP() << "op " << t << " is not built in yet";
  }
  ir::Program p;
  ir::Var x = Data("x", {-1, 4});
  x.dtype = DataType::kFloat64;
  ir::Var w = Param("w", {4, 3});
  w.dtype = DataType::kFloat64;
  ir::Var b = Param("b", {3});
  b.dtype = DataType::kFloat64;
  Declare(p, {x, w, b});
  std::vector<ir::Op> fwd = {
      Op("mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"h"}}}),
      Op("elementwise_add", {{"X", {"h"}}, {"Y", {"b"}}}, {{"Out", {"z"}}}),
      Op("tanh", {{"X", {"z"}}}, {{"Out", {"a"}}}),
      Op("elementwise_mul", {{"X", {"a"}}, {"Y", {"z"}}}, {{"Out", {"s"}}}),
      Op("mean", {{"X", {"s"}}}, {{"Out", {"loss"}}})};
  fwd[1].attrs["axis"] = int32_t{1};
  for (const auto& op : fwd) {
    Status s = ops::InferAndDeclareOutputs(reg, p, 0, op);
    ASSERT_TRUE(s.ok()) << s.ToString();
    p.global().ops.push_back(op);
  }
  const ir::Program forward = p;
  auto pairs = AppendBackward(p, "loss");
  ASSERT_TRUE(pairs.ok()) << pairs.status().ToString();
  ASSERT_EQ(Names(*pairs), (std::vector<std::string>{"b:b@GRAD", "w:w@GRAD"}));
  bool accumulated = false;
  for (const auto& op : p.global().ops) {
    accumulated |= op.type == "sum" && op.Output("Out")[0] == "z@GRAD";
  }
  EXPECT_TRUE(accumulated);

  LoadOptions load;
  load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
  PluginRegistry plugins(load);
  ASSERT_TRUE(plugins.Load("cpu").ok());
  exec::ExecutorOptions eo;
  eo.num_threads = 1;
  auto ex = exec::Executor::Create(plugins, "cpu", eo);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  exec::Executor& e = **ex;

  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  auto random = [&](std::vector<int64_t> dims) {
    exec::HostTensor t;
    t.Reshape(DataType::kFloat64, dims);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = dist(gen);
    return t;
  };
  std::map<std::string, exec::HostTensor> params = {{"w", random({4, 3})}, {"b", random({3})}};
  for (const auto& [n, t] : params) ASSERT_TRUE(e.scope().Write(n, t).ok());
  exec::FeedMap feeds = {{"x", random({5, 4})}};
  std::vector<exec::HostTensor> out;
  Status run = e.Run(p, feeds, {"loss", "b@GRAD", "w@GRAD"}, out);
  ASSERT_TRUE(run.ok()) << run.ToString();
  std::map<std::string, exec::HostTensor> grads = {{"b", out[1]}, {"w", out[2]}};

  const double eps = 1e-6;
  for (auto& [name, value] : params) {
    for (int64_t i = 0; i < value.numel(); ++i) {
      double loss[2];
      for (int k = 0; k < 2; ++k) {
        exec::HostTensor moved = value;
        moved.data<double>()[i] += k == 0 ? eps : -eps;
        ASSERT_TRUE(e.scope().Write(name, moved).ok());
        ASSERT_TRUE(e.Run(forward, feeds, {"loss"}, out).ok());
        loss[k] = out[0].data<double>()[0];
      }
      ASSERT_TRUE(e.scope().Write(name, value).ok());
      double numeric = (loss[0] - loss[1]) / (2 * eps);
      EXPECT_NEAR(grads[name].data<double>()[i], numeric, 1e-7) << name << "[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace fleet::autodiff
