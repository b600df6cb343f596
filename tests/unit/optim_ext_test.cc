// adagrad, rmsprop, lamb and adamax, the schedules polynomial/noam/natural_exp/inverse_time and
// per-tensor / per-value gradient clipping: from the program file through ApplyOptimizer's
// emitted ops to a few training steps that must lower the loss.
#include <gtest/gtest.h>

#include <cmath>

#include "executor/executor.h"
#include "frontend/frontend.h"
#include "op_summary.h"
#include "ops/shape_inference.h"
#include "optim/emit.h"
#include "optim/optimizer.h"

namespace fleet::optim {
namespace {

using fleet::testing::DescribeOps;

template <typename T>
T AttrOf(const ir::Op& op, const std::string& name) {
  auto it = op.attrs.find(name);
  EXPECT_NE(it, op.attrs.end()) << op.type << " lacks " << name;
  if (it == op.attrs.end()) return T{};
  const T* v = std::get_if<T>(&it->second);
  EXPECT_NE(v, nullptr) << op.type << "." << name << " has another type";
  return v ? *v : T{};
}

// One parameter w [4, 3] with its gradient, and a forward op in main.
struct Fixture {
  ir::Program main, startup;
  std::vector<autodiff::ParamGrad> pairs = {{"w", "w@GRAD"}};
  Fixture() {
    ir::Var p;
    p.name = "w";
    p.shape = {4, 3};
    p.persistable = true;
    p.param = ir::ParamInfo{};
    EXPECT_TRUE(main.global().AddVar(p).ok());
    EXPECT_TRUE(startup.global().AddVar(p).ok());
    ir::Var g;
    g.name = "w@GRAD";
    g.shape = {4, 3};
    EXPECT_TRUE(main.global().AddVar(g).ok());
    ir::Op fwd;
    fwd.type = "forward";
    main.global().ops.push_back(fwd);
  }
  Status Apply(const OptimizerSpec& spec) { return ApplyOptimizer(main, startup, pairs, spec); }
};

// The value startup's fill_constant gives `var`.
float StartValue(const ir::Program& startup, const std::string& var) {
  for (const ir::Op& op : startup.global().ops) {
    if (op.type == "fill_constant" && op.outputs.at("Out")[0] == var) {
      return AttrOf<float>(op, "value");
    }
  }
  ADD_FAILURE() << "no fill_constant for " << var;
  return NAN;
}

TEST(OptimExtTest, AdagradUpdateAndAccumulator) {
  Fixture f;
  OptimizerSpec spec;
  spec.type = "adagrad";
  spec.options = {{"epsilon", 1e-5}, {"initial_accumulator_value", 0.1}};
  ASSERT_TRUE(f.Apply(spec).ok());
  EXPECT_EQ(DescribeOps(f.main, 1),
            (std::vector<std::string>{"adagrad(Grad=w@GRAD LearningRate=learning_rate_0 "
                                      "Moment=w_moment_0 Param=w)->(MomentOut=w_moment_0 "
                                      "ParamOut=w)"}));
  EXPECT_FLOAT_EQ(AttrOf<float>(f.main.global().ops[1], "epsilon"), 1e-5f);
  EXPECT_FLOAT_EQ(StartValue(f.startup, "w_moment_0"), 0.1f);
  EXPECT_TRUE(f.startup.global().FindVar("w_moment_0")->persistable);
}

TEST(OptimExtTest, RmspropAccumulatorsPlainAndCentered) {
  for (bool centered : {false, true}) {
    Fixture f;
    OptimizerSpec spec;
    spec.type = "rmsprop";
    spec.options = {{"rho", 0.9}, {"momentum", 0.5}, {"centered", centered}};
    ASSERT_TRUE(f.Apply(spec).ok());
    const ir::Op& op = f.main.global().ops[1];
    EXPECT_EQ(op.type, "rmsprop");
    EXPECT_EQ(op.Input("Moment"), std::vector<std::string>{"w_momentum_0"});
    EXPECT_EQ(op.Input("MeanSquare"), std::vector<std::string>{"w_mean_square_0"});
    EXPECT_EQ(op.Output("MeanSquareOut"), std::vector<std::string>{"w_mean_square_0"});
    EXPECT_EQ(op.Input("MeanGrad").empty(), !centered);
    EXPECT_EQ(f.main.global().FindVar("w_mean_grad_0") != nullptr, centered);
    EXPECT_FLOAT_EQ(AttrOf<float>(op, "decay"), 0.9f);
    EXPECT_FLOAT_EQ(AttrOf<float>(op, "epsilon"), 1e-6f);  // Paddle 2.x's RMSProp default
    EXPECT_FLOAT_EQ(AttrOf<float>(op, "momentum"), 0.5f);
    EXPECT_EQ(AttrOf<bool>(op, "centered"), centered);
  }
}

TEST(OptimExtTest, LambSlotsAndDefaults) {
  Fixture f;
  OptimizerSpec spec;
  spec.type = "lamb";
  spec.options = {{"weight_decay", 0.02}};
  ASSERT_TRUE(f.Apply(spec).ok());
  const ir::Op& op = f.main.global().ops[1];
  EXPECT_EQ(op.type, "lamb");
  EXPECT_FLOAT_EQ(AttrOf<float>(op, "weight_decay"), 0.02f);
  EXPECT_FLOAT_EQ(AttrOf<float>(op, "epsilon"), 1e-6f);
  EXPECT_EQ(op.attrs.count("lazy_mode"), 0u);
  EXPECT_EQ(op.Output("Beta1PowOut"), op.Input("Beta1Pow"));
  EXPECT_FLOAT_EQ(StartValue(f.startup, op.Input("Beta1Pow")[0]), 0.9f);
  EXPECT_FLOAT_EQ(StartValue(f.startup, op.Input("Beta2Pow")[0]), 0.999f);
  // lamb has no lazy_mode; adagrad has no beta1.
  spec.options = {{"lazy_mode", true}};
  Fixture g;
  Status s = g.Apply(spec);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("lazy_mode"), std::string::npos) << s.message();
  spec.type = "adagrad";
  spec.options = {{"beta1", 0.5}};
  s = g.Apply(spec);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("beta1"), std::string::npos) << s.message();
}

TEST(OptimExtTest, AdamaxAdvancesItsBetaPowerWithScale) {
  Fixture f;
  OptimizerSpec spec;
  spec.type = "adamax";
  ASSERT_TRUE(f.Apply(spec).ok());
  EXPECT_EQ(DescribeOps(f.main, 1),
            (std::vector<std::string>{
                "adamax(Beta1Pow=w_beta1_pow_acc_0 Grad=w@GRAD InfNorm=w_inf_norm_0 "
                "LearningRate=learning_rate_0 Moment=w_moment_0 Param=w)->(InfNormOut="
                "w_inf_norm_0 MomentOut=w_moment_0 ParamOut=w)",
                "scale(X=w_beta1_pow_acc_0)->(Out=w_beta1_pow_acc_0)"}));
  EXPECT_FLOAT_EQ(AttrOf<float>(f.main.global().ops[2], "scale"), 0.9f);
  EXPECT_FLOAT_EQ(StartValue(f.startup, "w_beta1_pow_acc_0"), 0.9f);
  EXPECT_FLOAT_EQ(AttrOf<float>(f.main.global().ops[1], "epsilon"), 1e-8f);
}

TEST(OptimExtTest, ClipByNormAndByValue) {
  Fixture f;
  OptimizerSpec spec;
  spec.clip_norm = 2.0;
  ASSERT_TRUE(f.Apply(spec).ok());
  EXPECT_EQ(DescribeOps(f.main, 1)[0], "clip_by_norm(X=w@GRAD)->(Out=w@GRAD)");
  EXPECT_FLOAT_EQ(AttrOf<float>(f.main.global().ops[1], "max_norm"), 2.0f);

  Fixture g;
  spec = OptimizerSpec{};
  spec.clip_by_value = true;
  spec.clip_min = -0.5;
  spec.clip_max = 1.0;
  ASSERT_TRUE(g.Apply(spec).ok());
  const ir::Op& clip = g.main.global().ops[1];
  EXPECT_EQ(DescribeOps(g.main, 1)[0], "clip(X=w@GRAD)->(Out=w@GRAD)");
  EXPECT_FLOAT_EQ(AttrOf<float>(clip, "min"), -0.5f);
  EXPECT_FLOAT_EQ(AttrOf<float>(clip, "max"), 1.0f);

  // One kind of clipping at a time, and min <= max.
  Fixture h;
  spec.clip_norm = 1.0;
  Status s = h.Apply(spec);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("only one grad_clip"), std::string::npos) << s.message();
  spec.clip_norm = 0;
  spec.clip_min = 2.0;
  s = h.Apply(spec);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("min <= max"), std::string::npos) << s.message();
}

TEST(OptimExtTest, NewSchedulesPlanTheirAttributes) {
  LrSchedule poly;
  poly.type = "polynomial";
  poly.learning_rate = 0.1;
  poly.args = {{"decay_steps", int64_t{100}}, {"power", 2.0}, {"cycle", true}};
  auto p = internal::PlanLrSchedule(poly);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(std::get<std::string>(p->attrs.at("type")), "polynomial");
  EXPECT_EQ(std::get<int64_t>(p->attrs.at("decay_steps")), 100);
  EXPECT_FLOAT_EQ(std::get<float>(p->attrs.at("end_learning_rate")), 0.0001f);
  EXPECT_EQ(std::get<bool>(p->attrs.at("cycle")), true);
  EXPECT_DOUBLE_EQ(p->value, 0.1);

  LrSchedule noam;
  noam.type = "noam";
  noam.learning_rate = 1.0;
  noam.args = {{"d_model", 64.0}, {"warmup_steps", int64_t{4}}};
  p = internal::PlanLrSchedule(noam);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(std::get<int64_t>(p->attrs.at("noam_warmup_steps")), 4);
  EXPECT_NEAR(p->value, 1.0 / 8 / 8, 1e-12);  // 64^-0.5 * min(1, 4^-1.5 * 1)

  LrSchedule ne;
  ne.type = "natural_exp";
  ne.learning_rate = 0.5;
  ne.args = {{"decay_steps", int64_t{10}}};
  auto bad = internal::PlanLrSchedule(ne);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("decay_rate"), std::string::npos);
  ne.args["decay_rate"] = 0.1;
  ne.args["gamma"] = 0.1;
  bad = internal::PlanLrSchedule(ne);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gamma"), std::string::npos);
}

// ---- the program file -----------------------------------------------------------------------

const char* kHead =
    "x = data('x', shape=[-1, 3])\n"
    "l = mean(fc(x, size=1))\n";

StatusOr<frontend::ParsedProgram> Parse(const std::string& tail) {
  return frontend::ParseProgramText(kHead + tail, "t.fleet");
}

TEST(OptimExtFrontend, OptimizersAndSchedules) {
  auto r = Parse("minimize(l, optimizer=adagrad(learning_rate=0.1))\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->optimizer->type, "adagrad");
  EXPECT_DOUBLE_EQ(r->optimizer->lr.learning_rate, 0.1);
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(r->optimizer->options.at("epsilon")).value(), 1e-6);

  r = Parse("minimize(l, optimizer=RMSProp(learning_rate=polynomial_decay(0.1, decay_steps=50, "
            "power=2.0), centered=True))\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->optimizer->type, "rmsprop");
  EXPECT_EQ(r->optimizer->options.at("centered"), ir::Attribute(true));
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(r->optimizer->options.at("rho")).value(), 0.95);
  EXPECT_EQ(r->optimizer->lr.type, "polynomial");
  EXPECT_EQ(r->optimizer->lr.args.at("decay_steps"), ir::Attribute(int64_t{50}));

  r = Parse("minimize(l, optimizer=lamb(learning_rate=noam_decay(512, 4000), "
            "lamb_weight_decay=0.1))\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->optimizer->type, "lamb");
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(r->optimizer->options.at("weight_decay")).value(), 0.1);
  EXPECT_EQ(r->optimizer->lr.type, "noam");
  EXPECT_DOUBLE_EQ(r->optimizer->lr.learning_rate, 1.0);

  for (const char* kind : {"natural_exp_decay", "inverse_time_decay"}) {
    r = Parse(std::string("minimize(l, optimizer=sgd(learning_rate=") + kind +
              "(0.5, decay_steps=10, decay_rate=0.5, staircase=True)))\n");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->optimizer->lr.args.at("staircase"), ir::Attribute(true)) << kind;
  }
}

TEST(OptimExtFrontend, GradClipKinds) {
  auto r = Parse("minimize(l, optimizer=sgd(0.1), grad_clip=ClipGradByNorm(clip_norm=2.0))\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->optimizer->clip_norm, 2.0);
  EXPECT_DOUBLE_EQ(r->optimizer->clip_global_norm, 0.0);

  r = Parse("minimize(l, optimizer=adam(0.1, grad_clip=ClipGradByValue(0.5)))\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->optimizer->clip_by_value);
  EXPECT_DOUBLE_EQ(r->optimizer->clip_min, -0.5);
  EXPECT_DOUBLE_EQ(r->optimizer->clip_max, 0.5);

  r = Parse("minimize(l, optimizer=sgd(0.1), grad_clip=ClipGradByValue(max=1, min=-2))\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->optimizer->clip_min, -2.0);

  r = Parse("minimize(l, optimizer=sgd(0.1), grad_clip=ClipGradByValue(max=1, min=2))\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must not exceed max"), std::string::npos)
      << r.status().message();
  r = Parse("minimize(l, optimizer=sgd(0.1, grad_clip=ClipGradByNorm(1.0)), "
            "grad_clip=ClipGradByValue(1.0))\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("given both"), std::string::npos) << r.status().message();
  r = Parse("minimize(l, optimizer=sgd(0.1), grad_clip=0.5)\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ClipGradByNorm"), std::string::npos)
      << r.status().message();
}

// ---- training -------------------------------------------------------------------------------

// y = x . (1, -2, 0.5) fitted by w [3, 1] from 0.5, as OptimEndToEnd in optim_test.cc.
class OptimExtEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    plugins_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(plugins_->Load("cpu").ok());
  }

  std::vector<float> Train(const OptimizerSpec& spec, int steps, std::vector<float>* w_before,
                           std::vector<float>* w_after) {
    ir::Program main, startup;
    ir::Var x;
    x.name = "x";
    x.shape = {-1, 3};
    x.stop_gradient = true;
    ir::Var y = x;
    y.name = "y";
    y.shape = {-1, 1};
    ir::Var w;
    w.name = "w";
    w.shape = {3, 1};
    w.persistable = true;
    w.param = ir::ParamInfo{};
    EXPECT_TRUE(main.global().AddVar(x).ok());
    EXPECT_TRUE(main.global().AddVar(y).ok());
    EXPECT_TRUE(main.global().AddVar(w).ok());
    EXPECT_TRUE(startup.global().AddVar(w).ok());
    startup.global().ops.push_back(
        internal::FillConstant("w", {3, 1}, 0.5, ir::DataType::kFloat32));
    auto op = [](std::string type, ir::SlotMap in, std::string out) {
      ir::Op o;
      o.type = std::move(type);
      o.inputs = std::move(in);
      o.outputs["Out"] = {std::move(out)};
      return o;
    };
    for (const ir::Op& o : {op("mul", {{"X", {"x"}}, {"Y", {"w"}}}, "pred"),
                            op("elementwise_sub", {{"X", {"pred"}}, {"Y", {"y"}}}, "d"),
                            op("square", {{"X", {"d"}}}, "sq"),
                            op("mean", {{"X", {"sq"}}}, "loss")}) {
      Status s = ops::InferAndDeclareOutputs(ops::BuiltinOps(), main, 0, o);
      EXPECT_TRUE(s.ok()) << s.ToString();
      main.global().ops.push_back(o);
    }
    auto pairs = autodiff::AppendBackward(main, "loss");
    EXPECT_TRUE(pairs.ok()) << pairs.status().ToString();
    if (!pairs.ok()) return {};
    Status applied = ApplyOptimizer(main, startup, *pairs, spec);
    EXPECT_TRUE(applied.ok()) << applied.ToString();
    if (!applied.ok()) return {};

    exec::ExecutorOptions eo;
    eo.num_threads = 1;
    auto ex = exec::Executor::Create(*plugins_, "cpu", eo);
    EXPECT_TRUE(ex.ok());
    if (!ex.ok()) return {};
    exec::Executor& e = **ex;
    std::vector<exec::HostTensor> out;
    Status s = e.Run(startup, {}, {}, out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    exec::FeedMap feeds;
    feeds["x"].Reshape(ir::DataType::kFloat32, {4, 3});
    feeds["y"].Reshape(ir::DataType::kFloat32, {4, 1});
    const float xs[12] = {1, 2, 0, -1, 0.5f, 1, 0, 1, -2, 2, -1, 0.5f};
    for (int i = 0; i < 12; ++i) feeds["x"].data<float>()[i] = xs[i];
    for (int i = 0; i < 4; ++i) {
      feeds["y"].data<float>()[i] = xs[3 * i] - 2 * xs[3 * i + 1] + 0.5f * xs[3 * i + 2];
    }
    auto read_w = [&] {
      auto t = e.scope().Read("w");
      EXPECT_TRUE(t.ok());
      return t.ok() ? std::vector<float>(t->data<float>(), t->data<float>() + 3)
                    : std::vector<float>(3);
    };
    std::vector<float> losses;
    for (int i = 0; i < steps; ++i) {
      *w_before = read_w();
      Status r = e.Run(main, feeds, {"loss"}, out);
      EXPECT_TRUE(r.ok()) << r.ToString();
      if (!r.ok()) return losses;
      losses.push_back(out[0].data<float>()[0]);
    }
    *w_after = read_w();
    return losses;
  }

  std::unique_ptr<PluginRegistry> plugins_;
};

TEST_F(OptimExtEndToEnd, EveryNewOptimizerLowersTheLoss) {
  std::vector<OptimizerSpec> specs(6);
  specs[0].type = "adagrad";
  specs[0].lr.learning_rate = 0.3;
  specs[1].type = "rmsprop";
  specs[1].lr.type = "polynomial";
  specs[1].lr.learning_rate = 0.05;
  specs[1].lr.args = {{"decay_steps", int64_t{40}}, {"end_learning_rate", 0.001}};
  specs[2].type = "rmsprop";
  specs[2].options = {{"centered", true}, {"momentum", 0.5}};
  specs[2].lr.type = "inverse_time";
  specs[2].lr.learning_rate = 0.02;
  specs[2].lr.args = {{"decay_steps", int64_t{10}}, {"decay_rate", 0.1}};
  specs[3].type = "lamb";
  specs[3].lr.type = "natural_exp";
  specs[3].lr.learning_rate = 0.1;
  specs[3].lr.args = {{"decay_steps", int64_t{10}}, {"decay_rate", 0.1}};
  specs[3].clip_norm = 10.0;
  specs[4].type = "lamb";
  specs[4].lr.type = "noam";
  specs[4].lr.learning_rate = 1.0;
  specs[4].lr.args = {{"d_model", 4.0}, {"warmup_steps", int64_t{5}}};
  specs[4].options = {{"weight_decay", 0.0}};
  specs[5].type = "adamax";
  specs[5].lr.learning_rate = 0.1;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<float> before, after;
    std::vector<float> losses = Train(specs[i], 20, &before, &after);
    ASSERT_EQ(losses.size(), 20u) << "spec " << i << " (" << specs[i].type << ")";
    EXPECT_LT(losses.back(), 0.5f * losses.front())
        << "spec " << i << " (" << specs[i].type << ")";
  }
}

TEST_F(OptimExtEndToEnd, ClippedByNormSgdStepHasTheClipNorm) {
  OptimizerSpec spec;
  spec.lr.learning_rate = 0.1;
  spec.clip_norm = 0.01;
  std::vector<float> before, after;
  std::vector<float> losses = Train(spec, 3, &before, &after);
  ASSERT_EQ(losses.size(), 3u);
  double step = 0;
  for (size_t i = 0; i < 3; ++i) step += (after[i] - before[i]) * (after[i] - before[i]);
  EXPECT_NEAR(std::sqrt(step), 0.1 * 0.01, 1e-6);
}

}  // namespace
}  // namespace fleet::optim
