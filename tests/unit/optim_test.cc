// Program structure emitted by ApplyOptimizer: update ops, accumulators, learning-rate ops,
// clipping, regularization, and the errors for bad specs.
#include <gtest/gtest.h>

#include "op_summary.h"
#include "optim/optimizer.h"

#include <cmath>

#include "executor/executor.h"
#include "ops/shape_inference.h"

namespace fleet::optim {
namespace {

using ir::DataType;

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

// main: params w [4, 3] and b [3] (b declared first in the pair list to check sorting), their
// gradients, and a forward op so inserted ops have something to precede.
struct Fixture {
  ir::Program main, startup;
  std::vector<autodiff::ParamGrad> pairs = {{"w", "w@GRAD"}, {"b", "b@GRAD"}};
  Fixture() {
    for (auto [name, shape] : {std::pair{"w", std::vector<int64_t>{4, 3}},
                               std::pair{"b", std::vector<int64_t>{3}}}) {
      ir::Var p;
      p.name = name;
      p.shape = shape;
      p.persistable = true;
      p.param = ir::ParamInfo{};
      EXPECT_TRUE(main.global().AddVar(p).ok());
      EXPECT_TRUE(startup.global().AddVar(p).ok());
      ir::Var g;
      g.name = std::string(name) + "@GRAD";
      g.shape = shape;
      EXPECT_TRUE(main.global().AddVar(g).ok());
    }
    ir::Op fwd;
    fwd.type = "forward";
    main.global().ops.push_back(fwd);
  }
  Status Apply(const OptimizerSpec& spec) { return ApplyOptimizer(main, startup, pairs, spec); }
};

void ExpectPersistableIn(const Fixture& f, const std::string& name, DataType dtype,
                         std::vector<int64_t> shape) {
  for (const ir::Program* p : {&f.main, &f.startup}) {
    const ir::Var* v = p->global().FindVar(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_TRUE(v->persistable) << name;
    EXPECT_EQ(v->dtype, dtype) << name;
    EXPECT_EQ(v->shape, shape) << name;
  }
}

TEST(OptimTest, SgdWithConstantRate) {
  Fixture f;
  OptimizerSpec spec;
  spec.lr.learning_rate = 0.25;
  ASSERT_TRUE(f.Apply(spec).ok());
  EXPECT_EQ(DescribeOps(f.main, 1),
            (std::vector<std::string>{
                "sgd(Grad=b@GRAD LearningRate=learning_rate_0 Param=b)->(ParamOut=b)",
                "sgd(Grad=w@GRAD LearningRate=learning_rate_0 Param=w)->(ParamOut=w)"}));
  EXPECT_EQ(DescribeOps(f.startup),
            (std::vector<std::string>{"fill_constant()->(Out=learning_rate_0)"}));
  EXPECT_FLOAT_EQ(AttrOf<float>(f.startup.global().ops[0], "value"), 0.25f);
  EXPECT_EQ(AttrOf<int32_t>(f.startup.global().ops[0], "dtype"), FLEET_DTYPE_FLOAT32);
  ExpectPersistableIn(f, "learning_rate_0", DataType::kFloat32, {1});
}

TEST(OptimTest, MomentumDeclaresVelocity) {
  Fixture f;
  OptimizerSpec spec;
  spec.type = "momentum";
  spec.options = {{"momentum", 0.5}, {"use_nesterov", true}};
  ASSERT_TRUE(f.Apply(spec).ok());
  EXPECT_EQ(DescribeOps(f.main, 1),
            (std::vector<std::string>{
                "momentum(Grad=b@GRAD LearningRate=learning_rate_0 Param=b Velocity=b_velocity_0)"
                "->(ParamOut=b VelocityOut=b_velocity_0)",
                "momentum(Grad=w@GRAD LearningRate=learning_rate_0 Param=w Velocity=w_velocity_0)"
                "->(ParamOut=w VelocityOut=w_velocity_0)"}));
  const ir::Op& op = f.main.global().ops[1];
  EXPECT_FLOAT_EQ(AttrOf<float>(op, "mu"), 0.5f);
  EXPECT_TRUE(AttrOf<bool>(op, "use_nesterov"));
  ExpectPersistableIn(f, "w_velocity_0", DataType::kFloat32, {4, 3});
  ExpectPersistableIn(f, "b_velocity_0", DataType::kFloat32, {3});
  EXPECT_EQ(DescribeOps(f.startup),
            (std::vector<std::string>{"fill_constant()->(Out=learning_rate_0)",
                                      "fill_constant()->(Out=b_velocity_0)",
                                      "fill_constant()->(Out=w_velocity_0)"}));
  EXPECT_EQ(AttrOf<std::vector<int64_t>>(f.startup.global().ops[2], "shape"),
            (std::vector<int64_t>{4, 3}));
  EXPECT_FLOAT_EQ(AttrOf<float>(f.startup.global().ops[2], "value"), 0.0f);
}

TEST(OptimTest, AdamAndAdamWAccumulators) {
  for (std::string type : {"adam", "adamw"}) {
    Fixture f;
    OptimizerSpec spec;
    spec.type = type;
    spec.options = {{"beta1", 0.8}, {"beta2", 0.99f}, {"epsilon", 1e-6}};
    if (type == "adamw") spec.options["weight_decay"] = 0.05;
    ASSERT_TRUE(f.Apply(spec).ok()) << type;
    EXPECT_EQ(DescribeOps(f.main, 2),
              (std::vector<std::string>{
                  type + "(Beta1Pow=w_beta1_pow_acc_0 Beta2Pow=w_beta2_pow_acc_0 Grad=w@GRAD "
                         "LearningRate=learning_rate_0 Moment1=w_moment1_0 Moment2=w_moment2_0 "
                         "Param=w)->(Beta1PowOut=w_beta1_pow_acc_0 Beta2PowOut=w_beta2_pow_acc_0 "
                         "Moment1Out=w_moment1_0 Moment2Out=w_moment2_0 ParamOut=w)"}));
    const ir::Op& op = f.main.global().ops[2];
    EXPECT_FLOAT_EQ(AttrOf<float>(op, "beta1"), 0.8f);
    EXPECT_FLOAT_EQ(AttrOf<float>(op, "beta2"), 0.99f);
    EXPECT_FLOAT_EQ(AttrOf<float>(op, "epsilon"), 1e-6f);
    if (type == "adamw") {
      EXPECT_FLOAT_EQ(AttrOf<float>(op, "coeff"), 0.05f);
      EXPECT_TRUE(AttrOf<bool>(op, "with_decay"));
    } else {
      EXPECT_EQ(op.attrs.count("coeff"), 0u);
    }
    ExpectPersistableIn(f, "w_moment1_0", DataType::kFloat32, {4, 3});
    ExpectPersistableIn(f, "w_moment2_0", DataType::kFloat32, {4, 3});
    ExpectPersistableIn(f, "w_beta1_pow_acc_0", DataType::kFloat32, {1});
    ExpectPersistableIn(f, "w_beta2_pow_acc_0", DataType::kFloat32, {1});
    // Beta powers start at beta1 / beta2 (Paddle), moments at zero.
    std::map<std::string, float> init;
    for (const auto& op2 : f.startup.global().ops) {
      init[op2.outputs.at("Out")[0]] = AttrOf<float>(op2, "value");
    }
    EXPECT_FLOAT_EQ(init.at("w_beta1_pow_acc_0"), 0.8f);
    EXPECT_FLOAT_EQ(init.at("w_beta2_pow_acc_0"), 0.99f);
    EXPECT_FLOAT_EQ(init.at("b_moment1_0"), 0.0f);
    EXPECT_FLOAT_EQ(init.at("w_moment2_0"), 0.0f);
    EXPECT_EQ(f.startup.global().ops.size(), 9u);  // lr + 4 per param
  }
}

TEST(OptimTest, ScheduleUsesTheStepCounter) {
  Fixture f;
  OptimizerSpec spec;
  spec.lr.type = "exponential";
  spec.lr.learning_rate = 0.1;
  spec.lr.args = {{"gamma", 0.5}, {"decay_steps", int64_t{10}}, {"staircase", true}};
  ASSERT_TRUE(f.Apply(spec).ok());
  auto d = DescribeOps(f.main);
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0], "increment(X=@LR_DECAY_COUNTER@)->(Out=@LR_DECAY_COUNTER@)");
  EXPECT_EQ(d[1], "lr_schedule(Step=@LR_DECAY_COUNTER@)->(Out=learning_rate_0)");
  EXPECT_EQ(d[2], "forward()->()");
  const ir::Op& lr = f.main.global().ops[1];
  EXPECT_EQ(AttrOf<std::string>(lr, "type"), "exponential");
  EXPECT_FLOAT_EQ(AttrOf<float>(lr, "learning_rate"), 0.1f);
  EXPECT_FLOAT_EQ(AttrOf<float>(lr, "gamma"), 0.5f);
  EXPECT_EQ(AttrOf<int64_t>(lr, "decay_steps"), 10);
  EXPECT_TRUE(AttrOf<bool>(lr, "staircase"));
  EXPECT_FLOAT_EQ(AttrOf<float>(f.main.global().ops[0], "step"), 1.0f);
  ExpectPersistableIn(f, "@LR_DECAY_COUNTER@", DataType::kInt64, {1});
  bool counter_init = false;
  for (const auto& op : f.startup.global().ops) {
    if (op.outputs.at("Out")[0] != "@LR_DECAY_COUNTER@") continue;
    counter_init = true;
    EXPECT_FLOAT_EQ(AttrOf<float>(op, "value"), -1.0f);
    EXPECT_EQ(AttrOf<int32_t>(op, "dtype"), FLEET_DTYPE_INT64);
  }
  EXPECT_TRUE(counter_init);
}

TEST(OptimTest, WarmupWrapsAnInnerSchedule) {
  Fixture f;
  OptimizerSpec spec;
  auto inner = std::make_shared<LrSchedule>();
  inner->type = "cosine";
  inner->learning_rate = 0.2;
  inner->args = {{"T_max", int64_t{100}}, {"eta_min", 0.01}};
  spec.lr.type = "linear_warmup";
  spec.lr.args = {{"warmup_steps", int64_t{5}}, {"start_lr", 0.0}, {"end_lr", 0.2}};
  spec.lr.inner = inner;
  ASSERT_TRUE(f.Apply(spec).ok());
  const ir::Op& lr = f.main.global().ops[1];
  ASSERT_EQ(lr.type, "lr_schedule");
  EXPECT_EQ(AttrOf<std::string>(lr, "type"), "cosine");
  EXPECT_EQ(AttrOf<int64_t>(lr, "T_max"), 100);
  EXPECT_FLOAT_EQ(AttrOf<float>(lr, "eta_min"), 0.01f);
  EXPECT_EQ(AttrOf<int64_t>(lr, "warmup_steps"), 5);
  EXPECT_FLOAT_EQ(AttrOf<float>(lr, "end_lr"), 0.2f);

  // Without an inner schedule the rate stays at end_lr after the warm-up.
  Fixture g;
  spec.lr.inner = nullptr;
  ASSERT_TRUE(g.Apply(spec).ok());
  const ir::Op& lr2 = g.main.global().ops[1];
  EXPECT_EQ(AttrOf<std::string>(lr2, "type"), "constant");
  EXPECT_FLOAT_EQ(AttrOf<float>(lr2, "learning_rate"), 0.2f);
}

TEST(OptimTest, ClipByGlobalNorm) {
  Fixture f;
  OptimizerSpec spec;
  spec.clip_global_norm = 1.5;
  ASSERT_TRUE(f.Apply(spec).ok());
  EXPECT_EQ(
      DescribeOps(f.main, 1),
      (std::vector<std::string>{
          "squared_l2_norm(X=b@GRAD)->(Out=b_grad_squared_norm_0)",
          "squared_l2_norm(X=w@GRAD)->(Out=w_grad_squared_norm_0)",
          "sum(X=b_grad_squared_norm_0,w_grad_squared_norm_0)->(Out=clip_global_norm_sq_0)",
          "sqrt(X=clip_global_norm_sq_0)->(Out=clip_global_norm_0)",
          "fill_constant()->(Out=clip_max_norm_0)",
          "elementwise_max(X=clip_global_norm_0 Y=clip_max_norm_0)->(Out=clip_denominator_0)",
          "elementwise_div(X=clip_max_norm_0 Y=clip_denominator_0)->(Out=clip_scale_0)",
          "elementwise_mul(X=b@GRAD Y=clip_scale_0)->(Out=b@GRAD)",
          "elementwise_mul(X=w@GRAD Y=clip_scale_0)->(Out=w@GRAD)",
          "sgd(Grad=b@GRAD LearningRate=learning_rate_0 Param=b)->(ParamOut=b)",
          "sgd(Grad=w@GRAD LearningRate=learning_rate_0 Param=w)->(ParamOut=w)"}));
  EXPECT_FLOAT_EQ(AttrOf<float>(f.main.global().ops[5], "value"), 1.5f);
  EXPECT_EQ(AttrOf<int32_t>(f.main.global().ops[6], "axis"), -1);
  EXPECT_EQ(f.main.global().FindVar("clip_scale_0")->shape, std::vector<int64_t>{1});
}

TEST(OptimTest, RegularizationAndPerParamLearningRate) {
  Fixture f;
  // b has its own L2 coefficient and a doubled learning rate; w uses the global coefficient.
  auto& b_info = *f.main.global().FindVar("b")->param;
  b_info.regularizer = "l2";
  b_info.regularization_coeff = 0.5;
  b_info.learning_rate = 2.0;
  OptimizerSpec spec;
  spec.l2_coeff = 0.001;
  spec.clip_global_norm = 0;
  ASSERT_TRUE(f.Apply(spec).ok());
  EXPECT_EQ(DescribeOps(f.main, 1),
            (std::vector<std::string>{
                "scale(X=b)->(Out=b_l2_decay_0)",
                "sum(X=b@GRAD,b_l2_decay_0)->(Out=b@GRAD)",
                "scale(X=w)->(Out=w_l2_decay_0)",
                "sum(X=w@GRAD,w_l2_decay_0)->(Out=w@GRAD)",
                "scale(X=learning_rate_0)->(Out=b_learning_rate_0)",
                "sgd(Grad=b@GRAD LearningRate=b_learning_rate_0 Param=b)->(ParamOut=b)",
                "sgd(Grad=w@GRAD LearningRate=learning_rate_0 Param=w)->(ParamOut=w)"}));
  const auto& ops = f.main.global().ops;
  EXPECT_FLOAT_EQ(AttrOf<float>(ops[1], "scale"), 0.5f);
  EXPECT_FLOAT_EQ(AttrOf<float>(ops[3], "scale"), 0.001f);
  EXPECT_FLOAT_EQ(AttrOf<float>(ops[5], "scale"), 2.0f);
  EXPECT_EQ(f.main.global().FindVar("w_l2_decay_0")->shape, (std::vector<int64_t>{4, 3}));
  EXPECT_FALSE(f.main.global().FindVar("w_l2_decay_0")->persistable);
}

TEST(OptimTest, L1RegularizationAddsCoeffTimesSign) {
  Fixture f;
  auto& w_info = *f.main.global().FindVar("w")->param;
  w_info.regularizer = "l1";
  w_info.regularization_coeff = 0.25;
  OptimizerSpec spec;
  ASSERT_TRUE(f.Apply(spec).ok());
  EXPECT_EQ(DescribeOps(f.main, 1),
            (std::vector<std::string>{
                "sign(X=w)->(Out=w_sign_0)",
                "scale(X=w_sign_0)->(Out=w_l1_decay_0)",
                "sum(X=w@GRAD,w_l1_decay_0)->(Out=w@GRAD)",
                "sgd(Grad=b@GRAD LearningRate=learning_rate_0 Param=b)->(ParamOut=b)",
                "sgd(Grad=w@GRAD LearningRate=learning_rate_0 Param=w)->(ParamOut=w)"}));
  EXPECT_FLOAT_EQ(AttrOf<float>(f.main.global().ops[2], "scale"), 0.25f);
}

::testing::AssertionResult FailsWith(const OptimizerSpec& spec, const std::string& needle) {
  Fixture f;
  ir::Program main_before = f.main, startup_before = f.startup;
  Status s = f.Apply(spec);
  if (s.ok()) return ::testing::AssertionFailure() << "expected an error with '" << needle << "'";
  if (s.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << needle << "': " << s.ToString();
  }
  if (!(f.main == main_before) || !(f.startup == startup_before)) {
    return ::testing::AssertionFailure() << "a failed call changed the programs";
  }
  return ::testing::AssertionSuccess();
}

TEST(OptimTest, Errors) {
  OptimizerSpec spec;
  spec.type = "momentun";
  EXPECT_TRUE(FailsWith(spec, "did you mean 'momentum'"));
  spec.type = "ftrl";
  EXPECT_TRUE(FailsWith(spec, "unknown optimizer 'ftrl'"));

  spec = {};
  spec.type = "adam";
  spec.options = {{"betta1", 0.9}};
  EXPECT_TRUE(FailsWith(spec, "unknown option 'betta1' (did you mean 'beta1'?)"));
  spec.options = {{"beta1", 1.5}};
  EXPECT_TRUE(FailsWith(spec, "beta1 must be in [0, 1)"));
  spec.options = {{"epsilon", std::string("tiny")}};
  EXPECT_TRUE(FailsWith(spec, "'epsilon' must be a number"));
  spec.options = {{"weight_decay", 0.1}};  // adamw only
  EXPECT_TRUE(FailsWith(spec, "unknown option 'weight_decay'"));

  spec = {};
  spec.type = "momentum";
  spec.options = {{"use_nesterov", 1}};
  EXPECT_TRUE(FailsWith(spec, "'use_nesterov' must be a bool"));
  spec.type = "sgd";
  spec.options = {{"momentum", 0.9}};
  EXPECT_TRUE(FailsWith(spec, "takes no options"));

  spec = {};
  spec.lr.type = "cosin";
  EXPECT_TRUE(FailsWith(spec, "did you mean 'cosine'"));
  spec.lr.type = "piecewise";
  spec.lr.args = {{"boundaries", std::vector<int64_t>{10, 20}},
                  {"values", std::vector<double>{0.1, 0.01}}};
  EXPECT_TRUE(FailsWith(spec, "one more value than boundaries"));
  spec.lr.type = "exponential";
  spec.lr.args = {{"decay_steps", int64_t{10}}};
  EXPECT_TRUE(FailsWith(spec, "'gamma' is required"));
  spec.lr.type = "constant";
  spec.lr.args = {};
  spec.lr.learning_rate = -1;
  EXPECT_TRUE(FailsWith(spec, "learning_rate must be a finite non-negative number"));

  spec = {};
  spec.clip_global_norm = -1;
  EXPECT_TRUE(FailsWith(spec, "grad_clip"));
  spec = {};
  spec.l2_coeff = -0.1;
  EXPECT_TRUE(FailsWith(spec, "L2 coefficient"));

  Fixture f;
  f.pairs.push_back({"missing", "missing@GRAD"});
  Status s = f.Apply(OptimizerSpec{});
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("'missing'"), std::string::npos) << s.ToString();

  Fixture g;
  g.main.global().FindVar("w")->param->regularizer = "l3";
  Status r = g.Apply(OptimizerSpec{});
  EXPECT_NE(r.message().find("unknown regularizer 'l3'"), std::string::npos) << r.ToString();

  Fixture h;
  h.pairs.clear();
  EXPECT_FALSE(h.Apply(OptimizerSpec{}).ok());
}

// End to end with the built-in ops and the cpu plugin: a linear regression on one fixed batch,
// loss = mean((x w - y)^2), trained by each optimizer with schedules, clipping and decay. Every
// emitted op must prepare and run, and the loss must fall.
class OptimEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* t : {"mul", "elementwise_sub", "square", "mean", "sum", "fill_constant",
                          "fill_zeros_like", "increment", "sqrt", "elementwise_max",
                          "elementwise_div", "elementwise_mul", "scale"}) {
      if (ops::BuiltinOps().Find(t) == nullptr) GTEST_SKIP() << "op " << t << " missing";
    }
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    plugins_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(plugins_->Load("cpu").ok());
  }

  // Builds the programs, applies `spec`, runs startup and `steps` steps; returns the losses and
  // leaves w before and after the last step in w_before / w_after.
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
    ir::Op init;
    init.type = "fill_constant";
    init.outputs["Out"] = {"w"};
    init.attrs = {{"shape", std::vector<int64_t>{3, 1}}, {"value", 0.5f},
                  {"dtype", int32_t{FLEET_DTYPE_FLOAT32}}};
    startup.global().ops.push_back(init);
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

    exec::ExecutorOptions eo;
    eo.num_threads = 1;
    auto ex = exec::Executor::Create(*plugins_, "cpu", eo);
    EXPECT_TRUE(ex.ok());
    exec::Executor& e = **ex;
    std::vector<exec::HostTensor> out;
    Status s = e.Run(startup, {}, {}, out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    exec::FeedMap feeds;
    feeds["x"].Reshape(ir::DataType::kFloat32, {4, 3});
    feeds["y"].Reshape(ir::DataType::kFloat32, {4, 1});
    const float xs[12] = {1, 2, 0, -1, 0.5f, 1, 0, 1, -2, 2, -1, 0.5f};
    for (int i = 0; i < 12; ++i) feeds["x"].data<float>()[i] = xs[i];
    for (int i = 0; i < 4; ++i) {  // y = x . (1, -2, 0.5)
      feeds["y"].data<float>()[i] = xs[3 * i] - 2 * xs[3 * i + 1] + 0.5f * xs[3 * i + 2];
    }
    std::vector<float> losses;
    auto read_w = [&] {
      auto t = e.scope().Read("w");
      EXPECT_TRUE(t.ok());
      return t.ok() ? std::vector<float>(t->data<float>(), t->data<float>() + 3)
                    : std::vector<float>(3);
    };
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

TEST_F(OptimEndToEnd, EveryOptimizerLowersTheLoss) {
  std::vector<OptimizerSpec> specs(5);
  specs[0].lr.learning_rate = 0.05;
  specs[0].lr.type = "exponential";
  specs[0].lr.args = {{"gamma", 0.9}, {"decay_steps", int64_t{5}}, {"staircase", true}};
  specs[1].type = "momentum";
  specs[1].options = {{"use_nesterov", true}};
  specs[1].lr.type = "piecewise";
  specs[1].lr.args = {{"boundaries", std::vector<int64_t>{10}},
                      {"values", std::vector<double>{0.02, 0.01}}};
  specs[1].l2_coeff = 1e-3;
  specs[2].type = "adam";
  specs[2].lr.type = "linear_warmup";
  specs[2].lr.args = {{"warmup_steps", int64_t{3}}, {"start_lr", 0.01}, {"end_lr", 0.1}};
  auto inner = std::make_shared<LrSchedule>();
  inner->type = "cosine";
  inner->learning_rate = 0.1;
  inner->args = {{"T_max", int64_t{50}}};
  specs[2].lr.inner = inner;
  specs[3].type = "adamw";
  specs[3].lr.learning_rate = 0.05;
  specs[3].clip_global_norm = 5.0;
  specs[4].type = "momentum";
  specs[4].lr.learning_rate = 0.02;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<float> before, after;
    std::vector<float> losses = Train(specs[i], 20, &before, &after);
    ASSERT_EQ(losses.size(), 20u) << "spec " << i << " (" << specs[i].type << ")";
    EXPECT_LT(losses.back(), 0.5f * losses.front())
        << "spec " << i << " (" << specs[i].type << ")";
  }
}

TEST_F(OptimEndToEnd, ClippedSgdStepHasTheClipNorm) {
  // With a clip norm far below the gradient's, every step moves w by exactly lr * clip_norm.
  OptimizerSpec spec;
  spec.lr.learning_rate = 0.1;
  spec.clip_global_norm = 0.01;
  std::vector<float> before, after;
  std::vector<float> losses = Train(spec, 3, &before, &after);
  ASSERT_EQ(losses.size(), 3u);
  double step = 0;
  for (size_t i = 0; i < 3; ++i) step += (after[i] - before[i]) * (after[i] - before[i]);
  EXPECT_NEAR(std::sqrt(step), 0.1 * 0.01, 1e-6);
}

}  // namespace
}  // namespace fleet::optim
