// The program-file frontend: layers expand into the ops, vars and initializers Paddle's
// static-graph layers produce (written out by hand below), and bad files get exact positions.
#include "frontend/frontend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autodiff/backward.h"
#include "optim/optimizer.h"

namespace fleet::frontend {
namespace {

const std::filesystem::path kPrograms = std::filesystem::path(FLEET_TEST_DATA_DIR) / "programs";

// An op with only its type and slots: what the expected programs below spell out.
ir::Op Sig(std::string type, ir::SlotMap inputs, ir::SlotMap outputs) {
  ir::Op op;
  op.type = std::move(type);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  return op;
}

std::string SigText(const ir::Op& op) {
  auto slots = [](const ir::SlotMap& m) {
    std::string s;
    for (const auto& [slot, vars] : m) {
      s += slot + "=[";
      for (size_t i = 0; i < vars.size(); ++i) s += (i ? "," : "") + vars[i];
      s += "] ";
    }
    return s;
  };
  return op.type + "(" + slots(op.inputs) + ") -> (" + slots(op.outputs) + ")";
}

void ExpectOps(const ir::Block& block, const std::vector<ir::Op>& expected) {
  std::vector<std::string> got, want;
  for (const auto& op : block.ops) got.push_back(SigText(op));
  for (const auto& op : expected) want.push_back(SigText(op));
  EXPECT_EQ(got, want);
}

double FloatAttr(const ir::Op& op, const std::string& name) {
  const ir::Attribute* a = op.FindAttr(name);
  EXPECT_NE(a, nullptr) << op.type << " lacks " << name;
  return a ? ir::AttrAsDouble(*a).value_or(NAN) : NAN;
}

int64_t IntAttr(const ir::Op& op, const std::string& name) {
  const ir::Attribute* a = op.FindAttr(name);
  EXPECT_NE(a, nullptr) << op.type << " lacks " << name;
  return a ? ir::AttrAsInt(*a).value_or(-12345) : -12345;
}

std::vector<int64_t> IntsAttr(const ir::Op& op, const std::string& name) {
  const ir::Attribute* a = op.FindAttr(name);
  EXPECT_NE(a, nullptr) << op.type << " lacks " << name;
  return a ? ir::AttrAsInts(*a).value_or(std::vector<int64_t>{}) : std::vector<int64_t>{};
}

std::vector<int64_t> ShapeOf(const ir::Program& p, const std::string& var) {
  const ir::Var* v = p.global().FindVar(var);
  EXPECT_NE(v, nullptr) << var << " is not declared";
  return v ? v->shape : std::vector<int64_t>{-999};
}

// Every parameter is declared the same way in both programs, persistable, with ParamInfo.
void ExpectParam(const ParsedProgram& p, const std::string& name, std::vector<int64_t> shape,
                 ir::ParamInfo info = {}) {
  for (const ir::Program* prog : {&p.main, &p.startup}) {
    const ir::Var* v = prog->global().FindVar(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->shape, shape) << name;
    EXPECT_TRUE(v->persistable) << name;
    ASSERT_TRUE(v->param.has_value()) << name;
    EXPECT_EQ(*v->param, info) << name;
    EXPECT_EQ(v->stop_gradient, !info.trainable) << name;
  }
}

// Asserts the startup op initializing `var` and returns it.
const ir::Op* InitOf(const ParsedProgram& p, const std::string& var) {
  for (const auto& op : p.startup.global().ops) {
    if (op.OutputOne("Out") == var) return &op;
  }
  ADD_FAILURE() << "no initializer for " << var;
  return nullptr;
}

std::string ErrorOf(std::string_view text) {
  StatusOr<ParsedProgram> r = ParseProgramText(text, "t.fleet");
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
  return r.status().message();
}

constexpr double kTol = 1e-6;

void ExpectPrefix(const std::string& message, const std::string& prefix) {
  EXPECT_EQ(message.substr(0, prefix.size()), prefix) << message;
}

TEST(FrontendTest, QuickStartExpandsLikePaddle) {
  StatusOr<ParsedProgram> r = ParseProgramFile(kPrograms / "quickstart.fleet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ParsedProgram& p = *r;
  ExpectOps(p.main.global(),
            {Sig("mul", {{"X", {"x"}}, {"Y", {"fc_0.w_0"}}}, {{"Out", {"fc_0.tmp_0"}}}),
             Sig("elementwise_add", {{"X", {"fc_0.tmp_0"}}, {"Y", {"fc_0.b_0"}}},
                 {{"Out", {"fc_0.tmp_1"}}}),
             Sig("tanh", {{"X", {"fc_0.tmp_1"}}}, {{"Out", {"fc_0.tmp_2"}}}),
             Sig("mul", {{"X", {"fc_0.tmp_2"}}, {"Y", {"fc_1.w_0"}}}, {{"Out", {"fc_1.tmp_0"}}}),
             Sig("elementwise_add", {{"X", {"fc_1.tmp_0"}}, {"Y", {"fc_1.b_0"}}},
                 {{"Out", {"fc_1.tmp_1"}}}),
             Sig("tanh", {{"X", {"fc_1.tmp_1"}}}, {{"Out", {"fc_1.tmp_2"}}}),
             Sig("mul", {{"X", {"fc_1.tmp_2"}}, {"Y", {"fc_2.w_0"}}}, {{"Out", {"fc_2.tmp_0"}}}),
             Sig("elementwise_add", {{"X", {"fc_2.tmp_0"}}, {"Y", {"fc_2.b_0"}}},
                 {{"Out", {"fc_2.tmp_1"}}}),
             Sig("softmax", {{"X", {"fc_2.tmp_1"}}}, {{"Out", {"fc_2.tmp_2"}}}),
             Sig("cross_entropy", {{"X", {"fc_2.tmp_2"}}, {"Label", {"y"}}},
                 {{"Y", {"cross_entropy_0.tmp_0"}}}),
             Sig("mean", {{"X", {"cross_entropy_0.tmp_0"}}}, {{"Out", {"mean_0.tmp_0"}}})});
  const auto& ops = p.main.global().ops;
  EXPECT_EQ(IntAttr(ops[0], "x_num_col_dims"), 1);
  EXPECT_EQ(IntAttr(ops[0], "y_num_col_dims"), 1);
  EXPECT_EQ(IntAttr(ops[1], "axis"), 1);

  // Shapes come from shape inference, with the batch dim unknown.
  EXPECT_EQ(ShapeOf(p.main, "fc_0.tmp_0"), (std::vector<int64_t>{-1, 128}));
  EXPECT_EQ(ShapeOf(p.main, "fc_1.tmp_2"), (std::vector<int64_t>{-1, 128}));
  EXPECT_EQ(ShapeOf(p.main, "fc_2.tmp_2"), (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(ShapeOf(p.main, "cross_entropy_0.tmp_0"), (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(ShapeOf(p.main, "mean_0.tmp_0"), (std::vector<int64_t>{1}));
  ExpectParam(p, "fc_0.w_0", {32, 128});
  ExpectParam(p, "fc_0.b_0", {128});
  ExpectParam(p, "fc_1.w_0", {128, 128});
  ExpectParam(p, "fc_2.w_0", {128, 2});
  ExpectParam(p, "fc_2.b_0", {2});

  const ir::Var* x = p.main.global().FindVar("x");
  ASSERT_NE(x, nullptr);
  EXPECT_TRUE(x->stop_gradient);
  EXPECT_FALSE(x->persistable);
  EXPECT_EQ(x->dtype, ir::DataType::kFloat32);
  EXPECT_EQ(p.main.global().FindVar("y")->dtype, ir::DataType::kInt64);
  EXPECT_EQ(p.startup.global().FindVar("x"), nullptr);

  // Startup: Xavier-uniform weights (limit sqrt(6 / (fan_in + fan_out))) and zero biases, in
  // creation order.
  ExpectOps(p.startup.global(),
            {Sig("uniform_random", {}, {{"Out", {"fc_0.w_0"}}}),
             Sig("fill_constant", {}, {{"Out", {"fc_0.b_0"}}}),
             Sig("uniform_random", {}, {{"Out", {"fc_1.w_0"}}}),
             Sig("fill_constant", {}, {{"Out", {"fc_1.b_0"}}}),
             Sig("uniform_random", {}, {{"Out", {"fc_2.w_0"}}}),
             Sig("fill_constant", {}, {{"Out", {"fc_2.b_0"}}})});
  const struct {
    const char* var;
    double fan_in, fan_out;
  } weights[] = {{"fc_0.w_0", 32, 128}, {"fc_1.w_0", 128, 128}, {"fc_2.w_0", 128, 2}};
  for (const auto& w : weights) {
    const ir::Op* op = InitOf(p, w.var);
    ASSERT_NE(op, nullptr);
    double limit = std::sqrt(6.0 / (w.fan_in + w.fan_out));
    EXPECT_NEAR(FloatAttr(*op, "min"), -limit, kTol) << w.var;
    EXPECT_NEAR(FloatAttr(*op, "max"), limit, kTol) << w.var;
    EXPECT_EQ(IntAttr(*op, "seed"), 0);
    EXPECT_EQ(IntsAttr(*op, "shape"),
              (std::vector<int64_t>{int64_t(w.fan_in), int64_t(w.fan_out)}));
  }
  const ir::Op* b = InitOf(p, "fc_1.b_0");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(FloatAttr(*b, "value"), 0.0);
  EXPECT_EQ(IntsAttr(*b, "shape"), (std::vector<int64_t>{128}));
  EXPECT_EQ(IntAttr(*b, "dtype"), FLEET_DTYPE_FLOAT32);

  EXPECT_EQ(p.feeds, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(p.loss, "mean_0.tmp_0");
  ASSERT_TRUE(p.optimizer.has_value());
  EXPECT_EQ(p.optimizer->type, "sgd");
  EXPECT_EQ(p.optimizer->lr.type, "constant");
  EXPECT_DOUBLE_EQ(p.optimizer->lr.learning_rate, 0.01);
  EXPECT_EQ(p.optimizer->l2_coeff, 0.0);
  EXPECT_EQ(p.optimizer->clip_global_norm, 0.0);
}

TEST(FrontendTest, ConvBatchNormPoolExpandLikePaddle) {
  StatusOr<ParsedProgram> r = ParseProgramFile(kPrograms / "conv_bn.fleet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ParsedProgram& p = *r;
  ExpectOps(
      p.main.global(),
      {Sig("conv2d", {{"Input", {"img"}}, {"Filter", {"conv2d_0.w_0"}}},
           {{"Output", {"conv2d_0.tmp_0"}}}),
       Sig("elementwise_add", {{"X", {"conv2d_0.tmp_0"}}, {"Y", {"conv2d_0.b_0"}}},
           {{"Out", {"conv2d_0.tmp_1"}}}),
       Sig("relu", {{"X", {"conv2d_0.tmp_1"}}}, {{"Out", {"conv2d_0.tmp_2"}}}),
       Sig("batch_norm",
           {{"X", {"conv2d_0.tmp_2"}},
            {"Scale", {"batch_norm_0.w_0"}},
            {"Bias", {"batch_norm_0.b_0"}},
            {"Mean", {"batch_norm_0.w_1"}},
            {"Variance", {"batch_norm_0.w_2"}}},
           {{"Y", {"batch_norm_0.tmp_3"}},
            {"MeanOut", {"batch_norm_0.w_1"}},
            {"VarianceOut", {"batch_norm_0.w_2"}},
            {"SavedMean", {"batch_norm_0.tmp_0"}},
            {"SavedVariance", {"batch_norm_0.tmp_1"}},
            {"ReserveSpace", {"batch_norm_0.tmp_2"}}}),
       Sig("pool2d", {{"X", {"batch_norm_0.tmp_3"}}}, {{"Out", {"pool2d_0.tmp_0"}}}),
       Sig("mul", {{"X", {"pool2d_0.tmp_0"}}, {"Y", {"fc_0.w_0"}}}, {{"Out", {"fc_0.tmp_0"}}}),
       Sig("elementwise_add", {{"X", {"fc_0.tmp_0"}}, {"Y", {"fc_0.b_0"}}},
           {{"Out", {"fc_0.tmp_1"}}}),
       Sig("softmax_with_cross_entropy", {{"Logits", {"fc_0.tmp_1"}}, {"Label", {"label"}}},
           {{"Softmax", {"softmax_with_cross_entropy_0.tmp_0"}},
            {"Loss", {"softmax_with_cross_entropy_0.tmp_1"}}}),
       Sig("mean", {{"X", {"softmax_with_cross_entropy_0.tmp_1"}}}, {{"Out", {"mean_0.tmp_0"}}}),
       Sig("top_k_v2", {{"X", {"fc_0.tmp_1"}}},
           {{"Out", {"accuracy_0.tmp_0"}}, {"Indices", {"accuracy_0.tmp_1"}}}),
       Sig("accuracy",
           {{"Out", {"accuracy_0.tmp_0"}},
            {"Indices", {"accuracy_0.tmp_1"}},
            {"Label", {"label"}}},
           {{"Accuracy", {"accuracy_0.tmp_2"}},
            {"Correct", {"accuracy_0.tmp_3"}},
            {"Total", {"accuracy_0.tmp_4"}}})});
  const auto& ops = p.main.global().ops;
  EXPECT_EQ(IntsAttr(ops[0], "strides"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(IntsAttr(ops[0], "paddings"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(IntsAttr(ops[0], "dilations"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(IntAttr(ops[0], "groups"), 1);
  EXPECT_EQ(IntAttr(ops[1], "axis"), 1);
  EXPECT_NEAR(FloatAttr(ops[3], "momentum"), 0.99, kTol);
  EXPECT_NEAR(FloatAttr(ops[3], "epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(IntsAttr(ops[4], "ksize"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(IntsAttr(ops[4], "strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(IntAttr(ops[9], "k"), 1);

  EXPECT_EQ(ShapeOf(p.main, "conv2d_0.tmp_0"), (std::vector<int64_t>{-1, 4, 8, 8}));
  EXPECT_EQ(ShapeOf(p.main, "batch_norm_0.tmp_3"), (std::vector<int64_t>{-1, 4, 8, 8}));
  EXPECT_EQ(ShapeOf(p.main, "pool2d_0.tmp_0"), (std::vector<int64_t>{-1, 4, 4, 4}));
  EXPECT_EQ(ShapeOf(p.main, "fc_0.tmp_1"), (std::vector<int64_t>{-1, 10}));
  ExpectParam(p, "conv2d_0.w_0", {4, 3, 3, 3});
  ExpectParam(p, "conv2d_0.b_0", {4});
  ExpectParam(p, "batch_norm_0.w_0", {4});
  ExpectParam(p, "batch_norm_0.b_0", {4});
  ir::ParamInfo frozen;
  frozen.trainable = false;
  ExpectParam(p, "batch_norm_0.w_1", {4}, frozen);
  ExpectParam(p, "batch_norm_0.w_2", {4}, frozen);
  ExpectParam(p, "fc_0.w_0", {64, 10});  // 4 * 4 * 4 features after pooling
  EXPECT_TRUE(p.main.global().FindVar("batch_norm_0.tmp_0")->stop_gradient);

  ExpectOps(p.startup.global(),
            {Sig("gaussian_random", {}, {{"Out", {"conv2d_0.w_0"}}}),
             Sig("fill_constant", {}, {{"Out", {"conv2d_0.b_0"}}}),
             Sig("fill_constant", {}, {{"Out", {"batch_norm_0.w_0"}}}),
             Sig("fill_constant", {}, {{"Out", {"batch_norm_0.b_0"}}}),
             Sig("fill_constant", {}, {{"Out", {"batch_norm_0.w_1"}}}),
             Sig("fill_constant", {}, {{"Out", {"batch_norm_0.w_2"}}}),
             Sig("uniform_random", {}, {{"Out", {"fc_0.w_0"}}}),
             Sig("fill_constant", {}, {{"Out", {"fc_0.b_0"}}})});
  // Paddle's conv2d default: Normal(0, sqrt(2 / (filter_h * filter_w * in_channels))).
  const ir::Op* conv_init = InitOf(p, "conv2d_0.w_0");
  ASSERT_NE(conv_init, nullptr);
  EXPECT_NEAR(FloatAttr(*conv_init, "mean"), 0.0, kTol);
  EXPECT_NEAR(FloatAttr(*conv_init, "std"), std::sqrt(2.0 / 27.0), kTol);
  EXPECT_EQ(FloatAttr(*InitOf(p, "batch_norm_0.w_0"), "value"), 1.0);
  EXPECT_EQ(FloatAttr(*InitOf(p, "batch_norm_0.b_0"), "value"), 0.0);
  EXPECT_EQ(FloatAttr(*InitOf(p, "batch_norm_0.w_1"), "value"), 0.0);
  EXPECT_EQ(FloatAttr(*InitOf(p, "batch_norm_0.w_2"), "value"), 1.0);
  double limit = std::sqrt(6.0 / (64 + 10));
  EXPECT_NEAR(FloatAttr(*InitOf(p, "fc_0.w_0"), "max"), limit, kTol);

  EXPECT_EQ(p.loss, "mean_0.tmp_0");
  ASSERT_TRUE(p.optimizer.has_value());
  EXPECT_EQ(p.optimizer->type, "momentum");
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(p.optimizer->options.at("momentum")).value(), 0.9);
  EXPECT_EQ(p.optimizer->options.at("use_nesterov"), ir::Attribute(false));
  EXPECT_EQ(p.optimizer->lr.type, "piecewise");
  EXPECT_EQ(ir::AttrAsInts(p.optimizer->lr.args.at("boundaries")),
            (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(ir::AttrAsDoubles(p.optimizer->lr.args.at("values")),
            (std::vector<double>{0.1, 0.01, 0.001}));
  EXPECT_DOUBLE_EQ(p.optimizer->l2_coeff, 1e-4);
}

TEST(FrontendTest, EmbeddingLayerNormDropoutAndParamAttr) {
  StatusOr<ParsedProgram> r = ParseProgramFile(kPrograms / "embedding.fleet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ParsedProgram& p = *r;
  ExpectOps(
      p.main.global(),
      {Sig("lookup_table_v2", {{"Ids", {"ids"}}, {"W", {"embedding_0.w_0"}}},
           {{"Out", {"embedding_0.tmp_0"}}}),
       Sig("reshape2", {{"X", {"embedding_0.tmp_0"}}},
           {{"Out", {"reshape2_0.tmp_0"}}, {"XShape", {"reshape2_0.tmp_1"}}}),
       Sig("layer_norm",
           {{"X", {"reshape2_0.tmp_0"}},
            {"Scale", {"layer_norm_0.w_0"}},
            {"Bias", {"layer_norm_0.b_0"}}},
           {{"Y", {"layer_norm_0.tmp_2"}},
            {"Mean", {"layer_norm_0.tmp_0"}},
            {"Variance", {"layer_norm_0.tmp_1"}}}),
       Sig("dropout", {{"X", {"layer_norm_0.tmp_2"}}},
           {{"Out", {"dropout_0.tmp_0"}}, {"Mask", {"dropout_0.tmp_1"}}}),
       Sig("mul", {{"X", {"dropout_0.tmp_0"}}, {"Y", {"head_w"}}}, {{"Out", {"fc_0.tmp_0"}}}),
       Sig("elementwise_sub", {{"X", {"fc_0.tmp_0"}}, {"Y", {"label"}}},
           {{"Out", {"square_error_cost_0.tmp_0"}}}),
       Sig("square", {{"X", {"square_error_cost_0.tmp_0"}}},
           {{"Out", {"square_error_cost_0.tmp_1"}}}),
       Sig("mean", {{"X", {"square_error_cost_0.tmp_1"}}}, {{"Out", {"mean_0.tmp_0"}}})});
  const auto& ops = p.main.global().ops;
  EXPECT_EQ(IntAttr(ops[0], "padding_idx"), 999);  // -1 counts from the end of the table
  EXPECT_EQ(IntsAttr(ops[1], "shape"), (std::vector<int64_t>{-1, 80}));
  EXPECT_EQ(IntAttr(ops[2], "begin_norm_axis"), 1);
  EXPECT_NEAR(FloatAttr(ops[3], "dropout_prob"), 0.1, kTol);
  EXPECT_EQ(IntAttr(ops[3], "seed"), 7);
  ASSERT_NE(ops[3].FindAttr("fix_seed"), nullptr);
  EXPECT_EQ(*ops[3].FindAttr("fix_seed"), ir::Attribute(true));
  EXPECT_EQ(ShapeOf(p.main, "embedding_0.tmp_0"), (std::vector<int64_t>{-1, 5, 16}));
  EXPECT_EQ(ShapeOf(p.main, "layer_norm_0.tmp_2"), (std::vector<int64_t>{-1, 80}));
  EXPECT_EQ(ShapeOf(p.main, "fc_0.tmp_0"), (std::vector<int64_t>{-1, 1}));
  ExpectParam(p, "embedding_0.w_0", {1000, 16});
  ExpectParam(p, "layer_norm_0.w_0", {80});
  ExpectParam(p, "layer_norm_0.b_0", {80});
  // ParamAttr options land in ParamInfo; bias_attr=False leaves no bias at all.
  ir::ParamInfo head;
  head.trainable = false;
  head.learning_rate = 0.5;
  head.regularizer = "l2";
  head.regularization_coeff = 1e-4;
  ExpectParam(p, "head_w", {80, 1}, head);
  EXPECT_EQ(p.main.global().FindVar("fc_0.b_0"), nullptr);

  double limit = std::sqrt(6.0 / (1000 + 16));
  const ir::Op* emb = InitOf(p, "embedding_0.w_0");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, "uniform_random");
  EXPECT_NEAR(FloatAttr(*emb, "max"), limit, kTol);
  const ir::Op* w = InitOf(p, "head_w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, "gaussian_random");
  EXPECT_NEAR(FloatAttr(*w, "mean"), 0.0, kTol);
  EXPECT_NEAR(FloatAttr(*w, "std"), 0.02, kTol);
  EXPECT_EQ(FloatAttr(*InitOf(p, "layer_norm_0.w_0"), "value"), 1.0);

  ASSERT_TRUE(p.optimizer.has_value());
  const optim::OptimizerSpec& o = *p.optimizer;
  EXPECT_EQ(o.type, "adam");
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(o.options.at("beta1")).value(), 0.8);
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(o.options.at("beta2")).value(), 0.999);
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(o.options.at("epsilon")).value(), 1e-8);
  EXPECT_DOUBLE_EQ(o.clip_global_norm, 1.0);
  EXPECT_EQ(o.lr.type, "linear_warmup");
  EXPECT_EQ(ir::AttrAsInt(o.lr.args.at("warmup_steps")), 100);
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(o.lr.args.at("end_lr")).value(), 0.001);
  ASSERT_NE(o.lr.inner, nullptr);
  EXPECT_EQ(o.lr.inner->type, "cosine");
  EXPECT_DOUBLE_EQ(o.lr.inner->learning_rate, 0.001);
  EXPECT_EQ(ir::AttrAsInt(o.lr.inner->args.at("T_max")), 1000);
}

TEST(FrontendTest, ParamAttrNamesShareAndCustomInitializers) {
  StatusOr<ParsedProgram> r = ParseProgramText(R"(
x = data("x", shape=[-1, 8])
a = fc(x, size=8, param_attr="shared", bias_attr=ParamAttr(initializer=Constant(0.5)))
b = fc(a, size=8, param_attr="shared", name="second")
c = fc(b, size=3, param_attr=Uniform(-0.1, 0.2), bias_attr=L1Decay(0.01))
d = fc(c, size=3, param_attr=ParamAttr(initializer=XavierNormal()), act="relu")
)",
                                               "t.fleet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ParsedProgram& p = *r;
  // The second fc reuses "shared" (Paddle's weight sharing) and names its temporaries "second".
  EXPECT_EQ(p.main.global().ops[2].InputOne("Y"), "shared");
  EXPECT_EQ(p.main.global().ops[2].OutputOne("Out"), "second.tmp_0");
  EXPECT_EQ(p.main.global().ops[3].InputOne("Y"), "second.b_0");
  int shared_inits = 0;
  for (const auto& op : p.startup.global().ops) shared_inits += op.OutputOne("Out") == "shared";
  EXPECT_EQ(shared_inits, 1);
  EXPECT_EQ(FloatAttr(*InitOf(p, "fc_0.b_0"), "value"), 0.5);
  const ir::Op* u = InitOf(p, "fc_1.w_0");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->type, "uniform_random");
  EXPECT_NEAR(FloatAttr(*u, "min"), -0.1, kTol);
  EXPECT_NEAR(FloatAttr(*u, "max"), 0.2, kTol);
  ir::ParamInfo l1;
  l1.regularizer = "l1";
  l1.regularization_coeff = 0.01;
  ExpectParam(p, "fc_1.b_0", {3}, l1);
  const ir::Op* xn = InitOf(p, "fc_2.w_0");
  ASSERT_NE(xn, nullptr);
  EXPECT_EQ(xn->type, "gaussian_random");
  EXPECT_NEAR(FloatAttr(*xn, "std"), std::sqrt(2.0 / (3 + 3)), kTol);
  EXPECT_TRUE(p.loss.empty());
  EXPECT_FALSE(p.optimizer.has_value());
}

TEST(FrontendTest, DirectOpCallsBindSlotsAndConvertAttributes) {
  StatusOr<ParsedProgram> r = ParseProgramText(R"(
x = data("x", shape=[-1, 4])
y = data("y", shape=[4])
s = scale(x, scale=2, bias=0.5, bias_after_scale=False)   # int 2 becomes the float 2.0
t = elementwise_add(X=s, y=y, axis=-1)
u = relu(input=t)
v = reduce_sum(u, dim=1, keep_dim=True)
w = matmul(x, x, transpose_y=True)
z = stop_gradient(w)
)",
                                               "t.fleet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ParsedProgram& p = *r;
  ExpectOps(p.main.global(),
            {Sig("scale", {{"X", {"x"}}}, {{"Out", {"scale_0.tmp_0"}}}),
             Sig("elementwise_add", {{"X", {"scale_0.tmp_0"}}, {"Y", {"y"}}},
                 {{"Out", {"elementwise_add_0.tmp_0"}}}),
             Sig("relu", {{"X", {"elementwise_add_0.tmp_0"}}}, {{"Out", {"relu_0.tmp_0"}}}),
             Sig("reduce_sum", {{"X", {"relu_0.tmp_0"}}}, {{"Out", {"reduce_sum_0.tmp_0"}}}),
             Sig("matmul_v2", {{"X", {"x"}}, {"Y", {"x"}}}, {{"Out", {"matmul_v2_0.tmp_0"}}})});
  const auto& ops = p.main.global().ops;
  EXPECT_EQ(ops[0].attrs.at("scale"), ir::Attribute(2.0f));
  EXPECT_EQ(ops[0].attrs.at("bias"), ir::Attribute(0.5f));
  EXPECT_EQ(ops[0].attrs.at("bias_after_scale"), ir::Attribute(false));
  EXPECT_EQ(IntAttr(ops[1], "axis"), -1);
  EXPECT_EQ(IntsAttr(ops[3], "dim"), (std::vector<int64_t>{1}));
  EXPECT_EQ(ShapeOf(p.main, "reduce_sum_0.tmp_0"), (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(ShapeOf(p.main, "matmul_v2_0.tmp_0"), (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(p.no_grad, (std::vector<std::string>{"matmul_v2_0.tmp_0"}));
  EXPECT_TRUE(p.main.global().FindVar("matmul_v2_0.tmp_0")->stop_gradient);
  EXPECT_EQ(p.feeds, (std::vector<std::string>{"x", "y"}));
}

TEST(FrontendTest, SyntaxCommentsContinuationAndLiterals) {
  StatusOr<ParsedProgram> r = ParseProgramText(
      "# header\n"
      "x = data('x',   # a comment inside brackets\n"
      "         shape=(-1, 3), dtype=\"float64\")\n"
      "s = scale(x, scale=.5, bias=1e-3)\n"
      "s2 = scale(s, \\\n  scale=-2.5E+1)\n"
      "opt = adamw(learning_rate=exponential_decay(0.1, gamma=0.5, decay_steps=10, "
      "staircase=True), weight_decay=0.02)\n"
      "minimize(reduce_mean(s2), optimizer=opt)\n",
      "t.fleet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ParsedProgram& p = *r;
  EXPECT_EQ(p.main.global().FindVar("x")->dtype, ir::DataType::kFloat64);
  EXPECT_EQ(p.main.global().FindVar("x")->shape, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(p.main.global().ops[0].attrs.at("scale"), ir::Attribute(0.5f));
  EXPECT_EQ(p.main.global().ops[0].attrs.at("bias"), ir::Attribute(1e-3f));
  EXPECT_EQ(p.main.global().ops[1].attrs.at("scale"), ir::Attribute(-25.0f));
  EXPECT_EQ(p.loss, "reduce_mean_0.tmp_0");
  ASSERT_TRUE(p.optimizer.has_value());
  EXPECT_EQ(p.optimizer->type, "adamw");
  EXPECT_DOUBLE_EQ(ir::AttrAsDouble(p.optimizer->options.at("weight_decay")).value(), 0.02);
  EXPECT_EQ(p.optimizer->lr.type, "exponential");
  EXPECT_DOUBLE_EQ(p.optimizer->lr.learning_rate, 0.1);
  EXPECT_EQ(p.optimizer->lr.args.at("staircase"), ir::Attribute(true));
}

TEST(FrontendTest, SyntaxErrorsPointAtTheToken) {
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 3])\nh = fc(x size=128)\n"),
            "t.fleet:2:10: expected ')' or ',' after argument, got 'size'");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 3]\n"), "t.fleet:1:9: '(' is never closed");
  EXPECT_EQ(ErrorOf("x = data('x, shape=[3])\n"),
            "t.fleet:1:10: unterminated string: expected a closing ' on the same line");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[3]) y\n"),
            "t.fleet:1:26: expected end of line after the statement, got 'y'");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[3]]\n"),
            "t.fleet:1:24: ']' does not match '(' at 1:9");
  EXPECT_EQ(ErrorOf("x = 1\n  y = 2\n"), "t.fleet:2:3: unexpected indent");
}

// Nesting thousands deep once overflowed the stack (a crash, not an error).
TEST(FrontendTest, DeepNestingIsAnErrorNotACrash) {
  for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"(", ")"},
                                    std::pair{"fc(", ")"}}) {
    std::string text = "x = ";
    for (int i = 0; i < 50000; ++i) text += open;
    text += "1";
    for (int i = 0; i < 50000; ++i) text += close;
    ExpectPrefix(ErrorOf(text + "\n"), "t.fleet:1:");
    EXPECT_NE(ErrorOf(text + "\n").find("values nest more than 64 levels deep"),
              std::string::npos);
  }
  // 64 levels are fine: the call, 62 lists and the number (the error is then about the shape).
  std::string ok = "x = data('x', shape=";
  for (int i = 0; i < 62; ++i) ok += "[";
  ok += "1";
  for (int i = 0; i < 62; ++i) ok += "]";
  EXPECT_EQ(ErrorOf(ok + ")\n").find("nest"), std::string::npos);
}

// A name that could leave train.save_params_dir, or break a log or JSON, is refused at the call.
TEST(FrontendTest, BadNamesAreRefusedAtTheCall) {
  EXPECT_EQ(ErrorOf("x = data('../../x', shape=[-1, 3])\n"),
            "t.fleet:1:5: data: var name '../../x' holds a path separator");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 3])\n"
                    "h = fc(x, size=2, param_attr=ParamAttr(name='/abs/path'))\n"),
            "t.fleet:2:5: fc: var name '/abs/path' holds a path separator");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 3])\nh = fc(x, size=2, name='a\\tb')\n"),
            "t.fleet:2:5: fc: var name 'a\\x09b.w_0' holds a control character");
}

// lod_level=1 declares a sequence feed; its rows vary from batch to batch.
TEST(FrontendTest, SequenceDataVarsCarryTheirLodLevel) {
  StatusOr<ParsedProgram> r = ParseProgramText(
      "ids = data('ids', shape=[-1, 1], dtype='int64', lod_level=1)\n"
      "x = data('x', shape=[-1, 3])\n", "t.fleet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->main.global().FindVar("ids")->lod_level, 1);
  EXPECT_EQ(r->main.global().FindVar("x")->lod_level, 0);
  EXPECT_NE(ErrorOf("ids = data('ids', shape=[-1, 1], dtype='int64', lod_level=2)\n")
                .find("lod_level 2: only 0 (dense) and 1 (sequences) are supported"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ids = data('ids', shape=[4, 1], dtype='int64', lod_level=1)\n")
                .find("has -1 as its first dim"),
            std::string::npos);
}

// fc(x, size=2**62) once wrapped a byte count around and wrote past a small buffer.
TEST(FrontendTest, ParametersTooLargeForAnyTensorAreRefusedAtTheLayer) {
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 4])\nh = fc(x, size=4611686018427387904)\n"),
            "t.fleet:2:5: fc: float32[4, 4611686018427387904] would take more than 2^62 bytes");
  EXPECT_EQ(ErrorOf("i = data('i', shape=[-1, 1], dtype='int64')\n"
                    "e = embedding(i, size=[4611686018427387904, 8])\n"),
            "t.fleet:2:5: embedding: float32[4611686018427387904, 8] would take more than 2^62 "
            "bytes");
  // Found by the program fuzzer: conv2d's initializer multiplied the filter size out (signed
  // overflow) before the parameter's size was checked.
  EXPECT_EQ(ErrorOf("img = data('img', shape=[-1, 1, 8, 8])\n"
                    "c = conv2d(img, num_filters=8, filter_size=3111111111)\n"),
            "t.fleet:2:5: conv2d: float32[8, 1, 3111111111, 3111111111] would take more than "
            "2^62 bytes");
}

TEST(FrontendTest, NameAndCallErrorsPointAtTheCall) {
  const std::string head = "x = data('x', shape=[-1, 3])\n";
  EXPECT_EQ(ErrorOf(head + "h = fc(h2, size=3)\n"), "t.fleet:2:8: name 'h2' is not defined");
  EXPECT_EQ(ErrorOf(head + "h = fc(xx, size=3)\n"),
            "t.fleet:2:8: name 'xx' is not defined (did you mean 'x'?)");
  EXPECT_EQ(ErrorOf(head + "h = fcc(x, size=3)\n"),
            "t.fleet:2:5: unknown layer or op 'fcc' (did you mean 'fc'?); `fleet-host ops` "
            "lists every op, docs/program.md every layer");
  // Up to three, the closest first.
  EXPECT_EQ(ErrorOf(head + "h = sequence_pol(x, 'sum')\n"),
            "t.fleet:2:5: unknown layer or op 'sequence_pol' (did you mean 'sequence_pool', "
            "'sequence_pad' or 'sequence_mask'?); `fleet-host ops` lists every op, "
            "docs/program.md every layer");
  EXPECT_EQ(ErrorOf(head + "h = fc(x)\n"), "t.fleet:2:5: fc: missing required argument 'size'");
  EXPECT_EQ(ErrorOf(head + "h = fc(x, sise=3)\n"),
            "t.fleet:2:11: fc: unknown keyword 'sise' (did you mean 'size'?)");
  EXPECT_EQ(ErrorOf(head + "h = fc(x, size='3')\n"),
            "t.fleet:2:16: fc: argument 'size' must be an int, got a string '3'");
  EXPECT_EQ(ErrorOf(head + "h = fc(x, size=3, act='tanhh')\n"),
            "t.fleet:2:23: fc: unknown activation 'tanhh' (did you mean 'tanh'?)");
  EXPECT_EQ(ErrorOf(head + "h = fc(x, size=3, act=relu)\n"),
            "t.fleet:2:23: fc: argument 'act' must be a string, got the function 'relu'");
  EXPECT_EQ(ErrorOf(head + "h = fc(x, 3, 1, None, None, None, None, 8)\n"),
            "t.fleet:2:41: fc takes at most 7 positional arguments (input, size, "
            "num_flatten_dims, param_attr, bias_attr, act, name), got 8");
  EXPECT_EQ(ErrorOf(head + "h = fc(x, size=3,\n       param_attr=ParamAttr(initializer=Normal(0, "
                           "scale='big')))\n"),
            "t.fleet:3:57: Normal: argument 'scale' must be a number, got a string 'big'");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 3], dtype='float')\n"),
            "t.fleet:1:36: data: unknown dtype 'float'; expected one of bool, int8, uint8, "
            "int16, int32, int64, float16, bfloat16, float32 or float64");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 3], dtype='flaot32')\n"),
            "t.fleet:1:36: data: unknown dtype 'flaot32' (did you mean 'float32'?)");
  EXPECT_EQ(ErrorOf(head + "y = data('x', shape=[3])\n"),
            "t.fleet:2:5: data: a variable named 'x' already exists");
}

TEST(FrontendTest, DirectOpErrorsNameTheAttribute) {
  const std::string head = "x = data('x', shape=[-1, 3])\n";
  EXPECT_EQ(ErrorOf(head + "s = scale(x, scale='big')\n"),
            "t.fleet:2:20: scale: attribute 'scale' expects float, got a string 'big'");
  EXPECT_EQ(ErrorOf(head + "s = scale(x, bias_after_scale=1)\n"),
            "t.fleet:2:31: scale: attribute 'bias_after_scale' expects bool, got an int (1)");
  EXPECT_EQ(ErrorOf(head + "s = scale(x, scal=2.0)\n"),
            "t.fleet:2:14: scale: unknown keyword 'scal' (did you mean 'scale'?)");
  EXPECT_EQ(ErrorOf(head + "s = scale(x, zzz=2.0)\n"),
            "t.fleet:2:14: scale: unknown keyword 'zzz'; inputs and attributes are X, scale, "
            "bias and bias_after_scale");
  EXPECT_EQ(ErrorOf(head + "s = scale(scale=2.0)\n"),
            "t.fleet:2:5: scale: missing required input 'X'");
}

TEST(FrontendTest, ShapeErrorsAreReportedAtTheCall) {
  std::string msg = ErrorOf(
      "a = data('a', shape=[-1, 3])\n"
      "b = data('b', shape=[-1, 4])\n"
      "c = relu(a)\n"
      "d =   elementwise_add(c, b)\n");
  ExpectPrefix(msg, "t.fleet:4:7: elementwise_add: ");
  msg = ErrorOf("a = data('a', shape=[5, 3])\nh = fc(a, size=4)\nm = matmul(h, a)\n");
  ExpectPrefix(msg, "t.fleet:3:5: matmul: matmul_v2: ");
  msg = ErrorOf("a = data('a', shape=[-1, 3, 8, 8])\nc = conv2d(a, num_filters=4, "
                "filter_size=3, groups=2)\n");
  EXPECT_EQ(msg, "t.fleet:2:52: conv2d: groups (2) must divide the input channels (3) and "
                 "num_filters (4)");
}

TEST(FrontendTest, AucKeepsPersistableStatisticsOutOfTraining) {
  StatusOr<ParsedProgram> r = ParseProgramText(R"(
x = data("x", shape=[-1, 4], dtype="float32")
y = data("y", shape=[-1, 1], dtype="int64")
prediction = fc(x, size=2, act="softmax")
loss = mean(cross_entropy(prediction, y))
global_auc = auc(prediction, y, slide_steps=3)
minimize(loss, optimizer=sgd(learning_rate=0.1))
)",
                                               "t.fleet");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ParsedProgram& p = *r;
  // Paddle's names: the global AUC, the batch AUC, then the batch and the global statistics.
  EXPECT_EQ(p.names.at("global_auc"), "auc_0.tmp_0");
  const auto& ops = p.main.global().ops;
  ASSERT_GE(ops.size(), 2u);
  const std::vector<ir::Op> want = {
      Sig("auc",
          {{"Predict", {"fc_0.tmp_2"}},
           {"Label", {"y"}},
           {"StatPos", {"auc_0.tmp_2"}},
           {"StatNeg", {"auc_0.tmp_3"}}},
          {{"AUC", {"auc_0.tmp_1"}},
           {"StatPosOut", {"auc_0.tmp_2"}},
           {"StatNegOut", {"auc_0.tmp_3"}}}),
      Sig("auc",
          {{"Predict", {"fc_0.tmp_2"}},
           {"Label", {"y"}},
           {"StatPos", {"auc_0.tmp_4"}},
           {"StatNeg", {"auc_0.tmp_5"}}},
          {{"AUC", {"auc_0.tmp_0"}},
           {"StatPosOut", {"auc_0.tmp_4"}},
           {"StatNegOut", {"auc_0.tmp_5"}}})};
  EXPECT_EQ(SigText(ops[ops.size() - 2]), SigText(want[0]));
  EXPECT_EQ(SigText(ops.back()), SigText(want[1]));
  EXPECT_EQ(IntAttr(ops[ops.size() - 2], "slide_steps"), 3);
  EXPECT_EQ(IntAttr(ops.back(), "slide_steps"), 0);
  EXPECT_EQ(IntAttr(ops.back(), "num_thresholds"), 4095);
  for (const char* out : {"auc_0.tmp_0", "auc_0.tmp_1"}) {
    const ir::Var* v = p.main.global().FindVar(out);
    ASSERT_NE(v, nullptr) << out;
    EXPECT_EQ(v->dtype, ir::DataType::kFloat64) << out;
    EXPECT_EQ(v->shape, (std::vector<int64_t>{1})) << out;
  }
  const std::map<std::string, int64_t> stats = {{"auc_0.tmp_2", 4 * 4096},
                                                {"auc_0.tmp_3", 4 * 4096},
                                                {"auc_0.tmp_4", 4096},
                                                {"auc_0.tmp_5", 4096}};
  for (const auto& [name, n] : stats) {
    for (const ir::Program* prog : {&p.main, &p.startup}) {
      const ir::Var* v = prog->global().FindVar(name);
      ASSERT_NE(v, nullptr) << name;
      EXPECT_EQ(v->shape, (std::vector<int64_t>{n})) << name;
      EXPECT_EQ(v->dtype, ir::DataType::kInt64) << name;
      EXPECT_TRUE(v->persistable) << name;
      EXPECT_TRUE(v->stop_gradient) << name;
      EXPECT_FALSE(v->param.has_value()) << name;  // saved as state, never trained
    }
    const ir::Op* init = InitOf(p, name);
    ASSERT_NE(init, nullptr);
    EXPECT_EQ(init->type, "fill_constant");
    EXPECT_EQ(FloatAttr(*init, "value"), 0.0);
    EXPECT_EQ(IntAttr(*init, "dtype"), static_cast<int64_t>(ir::DataType::kInt64));
    EXPECT_EQ(IntsAttr(*init, "shape"), (std::vector<int64_t>{n}));
  }
  // Backward and the optimizer leave the statistics alone: no gradient, no update.
  auto pairs = autodiff::AppendBackward(p.main, p.loss);
  ASSERT_TRUE(pairs.ok()) << pairs.status().ToString();
  ASSERT_TRUE(optim::ApplyOptimizer(p.main, p.startup, *pairs, *p.optimizer).ok());
  for (const auto& pg : *pairs) EXPECT_EQ(stats.count(pg.param), 0u) << pg.param;
  for (const auto& op : p.main.global().ops) {
    for (const auto& [slot, vars] : op.outputs) {
      for (const auto& v : vars) {
        for (const auto& [name, n] : stats) {
          EXPECT_TRUE(v != name || op.type == "auc") << op.type << " writes " << v;
          EXPECT_EQ(v.find(name + "@GRAD"), std::string::npos) << op.type << " writes " << v;
        }
      }
    }
  }
}

TEST(FrontendTest, AucErrorsPointAtTheArgument) {
  const std::string head =
      "x = data('x', shape=[-1, 2])\ny = data('y', shape=[-1, 1], dtype='int64')\n";
  EXPECT_EQ(ErrorOf(head + "a = auc(x, y, curve='PR')\n"),
            "t.fleet:3:21: auc: curve must be 'ROC' (the only curve the auc op computes), got "
            "'PR'");
  EXPECT_EQ(ErrorOf(head + "a = auc(x, y, num_thresholds=0)\n"),
            "t.fleet:3:30: auc: num_thresholds must be in [1, 2147483646], got 0");
  EXPECT_EQ(ErrorOf(head + "a = auc(x, y, slide_steps=-1)\n"),
            "t.fleet:3:27: auc: slide_steps must be in [0, 2147483646], got -1");
  const std::string msg = ErrorOf(head + "a = auc(x, x)\n");
  ExpectPrefix(msg, "t.fleet:3:5: auc: ");
  EXPECT_NE(msg.find("Label must be int64"), std::string::npos) << msg;
}

TEST(FrontendTest, MinimizeOnceWithAScalarLoss) {
  const std::string head =
      "x = data('x', shape=[-1, 3])\nl = mean(x)\n"
      "minimize(l, optimizer=sgd(0.1))\n";
  EXPECT_EQ(ErrorOf(head + "minimize(l, optimizer=sgd(0.2))\n"),
            "t.fleet:4:1: minimize: minimize may be called once per program; it was already "
            "called at 3:1");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 3])\nminimize(x, optimizer=sgd(0.1))\n"),
            "t.fleet:2:10: minimize: the loss must hold one value (reduce it with mean(...)), "
            "'x' has shape [-1, 3]");
  EXPECT_EQ(ErrorOf("x = data('x', shape=[-1, 3])\nl = mean(x)\nminimize(l, optimizer=0.1)\n"),
            "t.fleet:3:23: minimize: argument 'optimizer' must be an optimizer: sgd(...), "
            "momentum(...), adam(...), adamw(...), adagrad(...), rmsprop(...), lamb(...) or "
            "adamax(...), got a float");
  EXPECT_EQ(ErrorOf("o = sgd(learning_rate=piecewise_decay([10], [0.1]))\n"),
            "t.fleet:1:45: piecewise_decay: needs one more value than boundaries (1 "
            "boundaries, 1 values)");
}

TEST(FrontendTest, GlobalPoolingAndSamePadding) {
  StatusOr<ParsedProgram> r = ParseProgramText(R"(
img = data("img", shape=[-1, 6, 5, 7])
c = conv2d(img, num_filters=6, filter_size=[3, 1], padding="SAME", groups=3, bias_attr=False)
p = pool2d(c, pool_type="avg")
)",
                                               "t.fleet");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ParsedProgram& p = *r;
  ExpectOps(p.main.global(),
            {Sig("conv2d", {{"Input", {"img"}}, {"Filter", {"conv2d_0.w_0"}}},
                 {{"Output", {"conv2d_0.tmp_0"}}}),
             Sig("pool2d", {{"X", {"conv2d_0.tmp_0"}}}, {{"Out", {"pool2d_0.tmp_0"}}})});
  const auto& ops = p.main.global().ops;
  EXPECT_EQ(ops[0].attrs.at("padding_algorithm"), ir::Attribute(std::string("SAME")));
  EXPECT_EQ(IntAttr(ops[0], "groups"), 3);
  ExpectParam(p, "conv2d_0.w_0", {6, 2, 3, 1});
  EXPECT_NEAR(FloatAttr(*InitOf(p, "conv2d_0.w_0"), "std"), std::sqrt(2.0 / (3 * 1 * 6)), kTol);
  EXPECT_EQ(ops[1].attrs.at("global_pooling"), ir::Attribute(true));
  EXPECT_EQ(ops[1].attrs.at("pooling_type"), ir::Attribute(std::string("avg")));
  EXPECT_EQ(ShapeOf(p.main, "conv2d_0.tmp_0"), (std::vector<int64_t>{-1, 6, 5, 7}));
  EXPECT_EQ(ShapeOf(p.main, "pool2d_0.tmp_0"), (std::vector<int64_t>{-1, 6, 1, 1}));
}

// Every prefix of a valid file either parses or fails with a positioned error; none crashes.
TEST(FrontendTest, TruncatedFilesFailCleanly) {
  for (const char* name : {"quickstart.fleet", "conv_bn.fleet", "embedding.fleet"}) {
    std::ifstream in(kPrograms / name);
    std::stringstream text;
    text << in.rdbuf();
    const std::string full = text.str();
    ASSERT_FALSE(full.empty()) << name;
    for (size_t n = 0; n < full.size(); ++n) {
      StatusOr<ParsedProgram> r = ParseProgramText(full.substr(0, n), "t.fleet");
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
        ExpectPrefix(r.status().message(), "t.fleet:");
      }
    }
  }
}

TEST(FrontendTest, MissingFileIsNotFound) {
  StatusOr<ParsedProgram> r = ParseProgramFile(kPrograms / "no_such_file.fleet");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace fleet::frontend
