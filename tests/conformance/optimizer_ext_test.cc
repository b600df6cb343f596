// Conformance of adagrad, rmsprop, lamb, adamax and clip_by_norm against NumPy
// (ref/ref_optimizer_ext.py) and closed forms worked out by hand, in place as the optimizers
// emit them, and of the schedules polynomial, noam, natural_exp and inverse_time.
#include <cmath>

#include "harness.h"

namespace fleet::conformance {
namespace {

template <typename T>
double Tol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

template <typename T>
void ExpectMatchesReference(OpRunner& runner, const ir::Op& op, VarMap vars) {
  VarMap expected_inputs = vars;
  Status s = runner.Run(op, vars);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto ref = NumpyReference(op.type, op, expected_inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (const auto& [slot, names] : op.outputs) {
    ASSERT_TRUE(ref->count(slot)) << "reference lacks " << slot;
    EXPECT_TRUE(AllClose(vars.at(names[0]), ref->at(slot)[0], Tol<T>(), Tol<T>()))
        << op.type << " " << slot;
  }
}

ir::Op AdagradOp(ir::AttrMap attrs, bool in_place = false) {
  return MakeOp(
      "adagrad", {{"Param", {"p"}}, {"Grad", {"g"}}, {"Moment", {"m"}}, {"LearningRate", {"lr"}}},
      {{"ParamOut", {in_place ? "p" : "p_out"}}, {"MomentOut", {in_place ? "m" : "m_out"}}},
      std::move(attrs));
}

ir::Op RmspropOp(ir::AttrMap attrs, bool centered) {
  ir::SlotMap ins = {{"Param", {"p"}},
                     {"Grad", {"g"}},
                     {"Moment", {"mom"}},
                     {"MeanSquare", {"ms"}},
                     {"LearningRate", {"lr"}}};
  ir::SlotMap outs = {
      {"ParamOut", {"p_out"}}, {"MomentOut", {"mom_out"}}, {"MeanSquareOut", {"ms_out"}}};
  if (centered) {
    ins["MeanGrad"] = {"mg"};
    outs["MeanGradOut"] = {"mg_out"};
    attrs["centered"] = true;
  }
  return MakeOp("rmsprop", std::move(ins), std::move(outs), std::move(attrs));
}

ir::Op LambOp(ir::AttrMap attrs, bool in_place = false) {
  auto out = [&](const char* in, const char* fresh) { return in_place ? in : fresh; };
  return MakeOp("lamb",
                {{"Param", {"p"}},
                 {"Grad", {"g"}},
                 {"LearningRate", {"lr"}},
                 {"Moment1", {"m1"}},
                 {"Moment2", {"m2"}},
                 {"Beta1Pow", {"b1p"}},
                 {"Beta2Pow", {"b2p"}}},
                {{"ParamOut", {out("p", "p_out")}},
                 {"Moment1Out", {out("m1", "m1_out")}},
                 {"Moment2Out", {out("m2", "m2_out")}},
                 {"Beta1PowOut", {out("b1p", "b1p_out")}},
                 {"Beta2PowOut", {out("b2p", "b2p_out")}}},
                std::move(attrs));
}

template <typename T>
void AdagradCase(OpRunner& runner) {
  VarMap vars{{"p", RandomTensor<T>({4, 5}, 1)},
              {"g", RandomTensor<T>({4, 5}, 2)},
              {"m", RandomTensor<T>({4, 5}, 3, 0, 1)},
              {"lr", MakeTensor<float>({1}, {0.1f})}};
  ExpectMatchesReference<T>(runner, AdagradOp({}), vars);
  ExpectMatchesReference<T>(runner, AdagradOp({{"epsilon", 0.5f}}), vars);
  // By hand, p=1, g=3, m=7, lr=0.5, eps=0: m' = 16, p' = 1 - 0.5 * 3 / 4 = 0.625; in place.
  VarMap one{{"p", MakeTensor<T>({1}, {T(1)})},
             {"g", MakeTensor<T>({1}, {T(3)})},
             {"m", MakeTensor<T>({1}, {T(7)})},
             {"lr", MakeTensor<float>({1}, {0.5f})}};
  Status s = runner.Run(AdagradOp({{"epsilon", 1e-30f}}, /*in_place=*/true), one);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NEAR(Values<T>(one.at("m"))[0], 16.0, 1e-6);
  EXPECT_NEAR(Values<T>(one.at("p"))[0], 0.625, 1e-6);
}

TEST(OptimizerExtConformance, Adagrad) {
  FLEET_CONFORMANCE_RUNNER(runner);
  AdagradCase<float>(*runner);
  AdagradCase<double>(*runner);
}

template <typename T>
void RmspropCase(OpRunner& runner) {
  VarMap vars{{"p", RandomTensor<T>({3, 7}, 11)},
              {"g", RandomTensor<T>({3, 7}, 12)},
              {"mom", RandomTensor<T>({3, 7}, 13)},
              {"ms", RandomTensor<T>({3, 7}, 14, 0.5, 1)},
              {"mg", RandomTensor<T>({3, 7}, 15, -0.1, 0.1)},
              {"lr", MakeTensor<float>({1}, {0.01f})}};
  ExpectMatchesReference<T>(runner, RmspropOp({}, false), vars);
  ExpectMatchesReference<T>(
      runner, RmspropOp({{"decay", 0.95f}, {"epsilon", 1e-6f}, {"momentum", 0.9f}}, false), vars);
  ExpectMatchesReference<T>(runner, RmspropOp({{"momentum", 0.5f}}, true), vars);
  // By hand, g=2, ms=1, rho=0.5, eps=0, momentum 0, lr=0.1: ms' = 2.5, p' = p - 0.2 / sqrt(2.5).
  VarMap one{{"p", MakeTensor<T>({1}, {T(1)})},
             {"g", MakeTensor<T>({1}, {T(2)})},
             {"mom", MakeTensor<T>({1}, {T(0)})},
             {"ms", MakeTensor<T>({1}, {T(1)})},
             {"lr", MakeTensor<float>({1}, {0.1f})}};
  Status s = runner.Run(RmspropOp({{"decay", 0.5f}, {"epsilon", 1e-30f}}, false), one);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NEAR(Values<T>(one.at("ms_out"))[0], 2.5, 1e-6);
  EXPECT_NEAR(Values<T>(one.at("p_out"))[0], 1 - 0.2 / std::sqrt(2.5), 1e-6);
}

TEST(OptimizerExtConformance, Rmsprop) {
  FLEET_CONFORMANCE_RUNNER(runner);
  RmspropCase<float>(*runner);
  RmspropCase<double>(*runner);
}

template <typename T>
void LambCase(OpRunner& runner) {
  // Large enough for several blocks of partial sums on a GPU.
  VarMap vars{{"p", RandomTensor<T>({300, 37}, 21)},
              {"g", RandomTensor<T>({300, 37}, 22)},
              {"m1", RandomTensor<T>({300, 37}, 23, -0.1, 0.1)},
              {"m2", RandomTensor<T>({300, 37}, 24, 0, 0.1)},
              {"b1p", MakeTensor<float>({1}, {0.81f})},
              {"b2p", MakeTensor<float>({1}, {0.998f})},
              {"lr", MakeTensor<float>({1}, {0.01f})}};
  ExpectMatchesReference<T>(runner, LambOp({}), vars);
  ExpectMatchesReference<T>(runner, LambOp({{"weight_decay", 0.0f}, {"beta1", 0.8f}}), vars);
  // A zero parameter: the trust ratio falls back to 1 (and so does a zero direction).
  VarMap zero = vars;
  zero["p"] = MakeTensor<T>({300, 37}, std::vector<T>(300 * 37, T(0)));
  ExpectMatchesReference<T>(runner, LambOp({}), zero);
  // By hand, one element p=2, g=1, fresh moments, beta pows = betas (the first step), wd=0:
  // m1' = 0.1, m2' = 0.001, r = (0.1/0.1) / (sqrt(0.001/0.001) + eps) ~ 1, trust = |2| / |1|,
  // p' = 2 - lr * 2 * 1 = 1.8 with lr = 0.1; in place.
  VarMap one{{"p", MakeTensor<T>({1}, {T(2)})},       {"g", MakeTensor<T>({1}, {T(1)})},
             {"m1", MakeTensor<T>({1}, {T(0)})},      {"m2", MakeTensor<T>({1}, {T(0)})},
             {"b1p", MakeTensor<float>({1}, {0.9f})}, {"b2p", MakeTensor<float>({1}, {0.999f})},
             {"lr", MakeTensor<float>({1}, {0.1f})}};
  Status s = runner.Run(LambOp({{"weight_decay", 0.0f}}, /*in_place=*/true), one);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NEAR(Values<T>(one.at("p"))[0], 1.8, 1e-5);
  EXPECT_NEAR(Values<float>(one.at("b1p"))[0], 0.81, 1e-6);
  EXPECT_NEAR(Values<float>(one.at("b2p"))[0], 0.999 * 0.999, 1e-6);
}

TEST(OptimizerExtConformance, Lamb) {
  FLEET_CONFORMANCE_RUNNER(runner);
  LambCase<float>(*runner);
  LambCase<double>(*runner);
}

// The trust ratio is one number for the whole parameter, the same on every run.
TEST(OptimizerExtConformance, LambIsDeterministic) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"p", RandomTensor<float>({1000, 33}, 31)},
              {"g", RandomTensor<float>({1000, 33}, 32)},
              {"m1", RandomTensor<float>({1000, 33}, 33)},
              {"m2", RandomTensor<float>({1000, 33}, 34, 0, 1)},
              {"b1p", MakeTensor<float>({1}, {0.9f})},
              {"b2p", MakeTensor<float>({1}, {0.999f})},
              {"lr", MakeTensor<float>({1}, {0.01f})}};
  VarMap a = vars, b = vars;
  ASSERT_TRUE(runner->Run(LambOp({}), a).ok());
  ASSERT_TRUE(runner->Run(LambOp({}), b).ok());
  EXPECT_EQ(a.at("p_out").bytes, b.at("p_out").bytes);
}

template <typename T>
void AdamaxCase(OpRunner& runner) {
  ir::Op op = MakeOp("adamax",
                     {{"Param", {"p"}},
                      {"Grad", {"g"}},
                      {"LearningRate", {"lr"}},
                      {"Moment", {"m"}},
                      {"InfNorm", {"u"}},
                      {"Beta1Pow", {"b1p"}}},
                     {{"ParamOut", {"p"}}, {"MomentOut", {"m"}}, {"InfNormOut", {"u"}}},
                     {{"beta2", 0.99f}});
  VarMap vars{{"p", RandomTensor<T>({6, 5}, 51)},
              {"g", RandomTensor<T>({6, 5}, 52)},
              {"m", RandomTensor<T>({6, 5}, 53, -0.1, 0.1)},
              {"u", RandomTensor<T>({6, 5}, 54, 0, 0.8)},
              {"b1p", MakeTensor<float>({1}, {0.81f})},
              {"lr", MakeTensor<float>({1}, {0.02f})}};
  ExpectMatchesReference<T>(runner, op, vars);
}

TEST(OptimizerExtConformance, Adamax) {
  FLEET_CONFORMANCE_RUNNER(runner);
  AdamaxCase<float>(*runner);
  AdamaxCase<double>(*runner);
}

TEST(OptimizerExtConformance, ClipByNorm) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("clip_by_norm", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"max_norm", 1.5f}});
  {
    VarMap vars{{"x", RandomTensor<float>({40, 31}, 41)}};  // norm ~ 20: scaled
    ExpectMatchesReference<float>(*runner, op, vars);
  }
  {
    VarMap vars{{"x", RandomTensor<double>({3, 2}, 42, -0.1, 0.1)}};  // norm < 1.5: unchanged
    ExpectMatchesReference<double>(*runner, op, vars);
  }
  // By hand, in place: [3, 4] has norm 5 -> [0.9, 1.2].
  ir::Op in_place = MakeOp("clip_by_norm", {{"X", {"x"}}}, {{"Out", {"x"}}}, {{"max_norm", 1.5f}});
  VarMap v{{"x", MakeTensor<float>({2}, {3, 4})}};
  ASSERT_TRUE(runner->Run(in_place, v).ok());
  EXPECT_NEAR(Values<float>(v.at("x"))[0], 0.9, 1e-6);
  EXPECT_NEAR(Values<float>(v.at("x"))[1], 1.2, 1e-6);
  VarMap bad{{"x", RandomTensor<float>({2}, 43)}};
  Status s = runner->Run(
      MakeOp("clip_by_norm", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"max_norm", 0.0f}}), bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("max_norm"), std::string::npos) << s.ToString();
}

TEST(OptimizerExtConformance, BadInputsAreErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap vars{{"p", RandomTensor<float>({3}, 1)},
              {"g", RandomTensor<float>({3}, 2)},
              {"m", RandomTensor<float>({4}, 3)},
              {"lr", MakeTensor<float>({1}, {0.1f})}};
  Status s = runner->Run(AdagradOp({}), vars);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("adagrad"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("Moment"), std::string::npos) << s.ToString();
  // centered rmsprop without MeanGrad.
  VarMap r{{"p", RandomTensor<float>({3}, 1)},
           {"g", RandomTensor<float>({3}, 2)},
           {"mom", RandomTensor<float>({3}, 3)},
           {"ms", RandomTensor<float>({3}, 4, 0, 1)},
           {"lr", MakeTensor<float>({1}, {0.1f})}};
  s = runner->Run(RmspropOp({{"centered", true}}, false), r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("MeanGrad"), std::string::npos) << s.ToString();
  VarMap l{{"p", RandomTensor<float>({3}, 1)},      {"g", RandomTensor<float>({3}, 2)},
           {"m1", RandomTensor<float>({3}, 3)},     {"m2", RandomTensor<float>({3}, 4)},
           {"b1p", MakeTensor<float>({2}, {1, 1})}, {"b2p", MakeTensor<float>({1}, {0.9f})},
           {"lr", MakeTensor<float>({1}, {0.1f})}};
  s = runner->Run(LambOp({}), l);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("Beta1Pow"), std::string::npos) << s.ToString();
}

// ---- schedules ------------------------------------------------------------------------------

double LrAt(OpRunner& runner, const ir::AttrMap& attrs, int64_t step) {
  ir::Op op = MakeOp("lr_schedule", {{"Step", {"step"}}}, {{"Out", {"lr"}}}, attrs);
  VarMap vars{{"step", MakeTensor<int64_t>({1}, {step})}};
  Status s = runner.Run(op, vars);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return NAN;
  auto ref = NumpyReference("lr_schedule", op, vars);
  EXPECT_TRUE(ref.ok()) << ref.status().ToString();
  const double got = Values<float>(vars.at("lr"))[0];
  if (ref.ok()) {
    EXPECT_NEAR(got, Values<float>(ref->at("Out")[0])[0], 1e-7) << "step " << step;
  }
  return got;
}

TEST(OptimizerExtConformance, PolynomialDecay) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::AttrMap a{{"type", std::string("polynomial")},
                {"learning_rate", 0.1f},
                {"decay_steps", int64_t{10}},
                {"end_learning_rate", 0.01f},
                {"power", 2.0f}};
  // (0.1 - 0.01) * (1 - step / 10)^2 + 0.01, held at 0.01 after step 10.
  EXPECT_NEAR(LrAt(*runner, a, 0), 0.1, 1e-7);
  EXPECT_NEAR(LrAt(*runner, a, 5), 0.09 * 0.25 + 0.01, 1e-7);
  EXPECT_NEAR(LrAt(*runner, a, 10), 0.01, 1e-7);
  EXPECT_NEAR(LrAt(*runner, a, 25), 0.01, 1e-7);
  // cycle: at step 15 the period is 20, so (1 - 15 / 20)^2.
  a["cycle"] = true;
  EXPECT_NEAR(LrAt(*runner, a, 0), 0.1, 1e-7);
  EXPECT_NEAR(LrAt(*runner, a, 15), 0.09 * 0.0625 + 0.01, 1e-7);
  EXPECT_NEAR(LrAt(*runner, a, 20), 0.01, 1e-7);
}

TEST(OptimizerExtConformance, NoamDecay) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::AttrMap a{{"type", std::string("noam")},
                {"learning_rate", 2.0f},
                {"d_model", 16.0f},
                {"noam_warmup_steps", int64_t{4}}};
  // 2 / 4 * min(t^-0.5, t / 8) with t = step + 1: rises to t = 4, then falls as t^-0.5.
  EXPECT_NEAR(LrAt(*runner, a, 0), 0.5 / 8, 1e-7);
  EXPECT_NEAR(LrAt(*runner, a, 3), 0.5 * 0.5, 1e-7);
  EXPECT_NEAR(LrAt(*runner, a, 15), 0.5 * 0.25, 1e-7);
}

TEST(OptimizerExtConformance, NaturalExpAndInverseTimeDecay) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::AttrMap ne{{"type", std::string("natural_exp")},
                 {"learning_rate", 0.5f},
                 {"decay_steps", int64_t{4}},
                 {"decay_rate", 0.5f}};
  EXPECT_NEAR(LrAt(*runner, ne, 0), 0.5, 1e-7);
  EXPECT_NEAR(LrAt(*runner, ne, 6), 0.5 * std::exp(-0.75), 1e-7);
  ne["staircase"] = true;
  EXPECT_NEAR(LrAt(*runner, ne, 6), 0.5 * std::exp(-0.5), 1e-7);
  ir::AttrMap it = ne;
  it["type"] = std::string("inverse_time");
  it["staircase"] = false;
  EXPECT_NEAR(LrAt(*runner, it, 6), 0.5 / 1.75, 1e-7);
  it["staircase"] = true;
  EXPECT_NEAR(LrAt(*runner, it, 6), 0.5 / 1.5, 1e-7);
  EXPECT_NEAR(LrAt(*runner, it, 8), 0.5 / 2.0, 1e-7);
}

}  // namespace
}  // namespace fleet::conformance
