// Conformance of the optimizer ops: updates against NumPy (ref/ref_optimizer.py) and against
// closed forms worked out by hand; learning-rate schedules at chosen steps.
#include <cmath>

#include "harness.h"
#include "optimizer_ops.h"

namespace fleet::conformance {
namespace {

template <typename T>
double Tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

// Runs `op` on the device and through reference `op.type`, and compares every output slot.
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

template <typename T>
void SgdCase(OpRunner& runner) {
  VarMap vars{{"p", RandomTensor<T>({5, 3}, 1)},
              {"g", RandomTensor<T>({5, 3}, 2)},
              {"lr", MakeTensor<float>({1}, {0.3f})}};
  ExpectMatchesReference<T>(runner, SgdOp(), vars);
  // By hand: 1 - 0.5 * 4 = -1.
  VarMap one{{"p", MakeTensor<T>({1}, {T(1)})},
             {"g", MakeTensor<T>({1}, {T(4)})},
             {"lr", MakeTensor<double>({1}, {0.5})}};  // a float64 rate works too
  ASSERT_TRUE(runner.Run(SgdOp(), one).ok());
  EXPECT_EQ(Values<T>(one.at("p_out"))[0], T(-1));
}

TEST(OptimizerConformance, Sgd) {
  FLEET_CONFORMANCE_RUNNER(runner);
  SgdCase<float>(*runner);
  SgdCase<double>(*runner);
}

template <typename T>
void MomentumCase(OpRunner& runner) {
  VarMap vars{{"p", RandomTensor<T>({4, 6}, 3)},
              {"g", RandomTensor<T>({4, 6}, 4)},
              {"v", RandomTensor<T>({4, 6}, 5)},
              {"lr", MakeTensor<float>({1}, {0.1f})}};
  for (bool nesterov : {false, true}) {
    ExpectMatchesReference<T>(runner, MomentumOp({{"mu", 0.8f}, {"use_nesterov", nesterov}}),
                              vars);
  }
  ExpectMatchesReference<T>(
      runner, MomentumOp({{"mu", 0.7f},
                          {"regularization_method", std::string("l2_decay")},
                          {"regularization_coeff", 0.01f}}),
      vars);
  // By hand, p=1, g=2, v=1, mu=0.5, lr=0.1: v' = 0.5 + 2 = 2.5; plain p' = 1 - 0.25 = 0.75;
  // Nesterov p' = 1 - (2 + 0.5 * 2.5) * 0.1 = 0.675.
  for (auto [nesterov, want] : {std::pair{false, 0.75}, std::pair{true, 0.675}}) {
    VarMap one{{"p", MakeTensor<T>({1}, {T(1)})},
               {"g", MakeTensor<T>({1}, {T(2)})},
               {"v", MakeTensor<T>({1}, {T(1)})},
               {"lr", MakeTensor<float>({1}, {0.1f})}};
    ASSERT_TRUE(runner.Run(MomentumOp({{"mu", 0.5f}, {"use_nesterov", nesterov}}), one).ok());
    EXPECT_NEAR(Values<T>(one.at("v_out"))[0], 2.5, 1e-6);
    EXPECT_NEAR(Values<T>(one.at("p_out"))[0], want, 1e-6) << "nesterov " << nesterov;
  }
}

TEST(OptimizerConformance, Momentum) {
  FLEET_CONFORMANCE_RUNNER(runner);
  MomentumCase<float>(*runner);
  MomentumCase<double>(*runner);
}

// Two consecutive steps: the device runs step 2 from its own step-1 state, the reference from
// its own, so errors in the carried state (moments, beta powers) show.
template <typename T>
void AdamTwoSteps(OpRunner& runner, const std::string& type, ir::AttrMap attrs) {
  const ir::Op op = AdamOp(type, attrs);
  VarMap dev{{"p", RandomTensor<T>({3, 5}, 10)},
             {"g", RandomTensor<T>({3, 5}, 11)},
             {"lr", MakeTensor<float>({1}, {0.01f})},
             {"m1", MakeTensor<T>({3, 5}, std::vector<T>(15, T(0)))},
             {"m2", MakeTensor<T>({3, 5}, std::vector<T>(15, T(0)))},
             {"b1p", MakeTensor<T>({1}, {T(0.9)})},
             {"b2p", MakeTensor<T>({1}, {T(0.999)})}};
  VarMap ref = dev;
  const std::map<std::string, std::string> carry = {{"p_out", "p"},     {"m1_out", "m1"},
                                                    {"m2_out", "m2"},   {"b1p_out", "b1p"},
                                                    {"b2p_out", "b2p"}};
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(runner.Run(op, dev).ok());
    auto out = NumpyReference(type, op, ref);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    for (const auto& [slot, names] : op.outputs) ref[names[0]] = out->at(slot)[0];
    for (const auto& [from, to] : carry) {
      EXPECT_TRUE(AllClose(dev.at(from), ref.at(from), Tol<T>(), Tol<T>()))
          << type << " step " << step << " " << from;
      dev[to] = dev.at(from);
      ref[to] = ref.at(from);
    }
    dev["g"] = ref["g"] = RandomTensor<T>({3, 5}, 20 + static_cast<uint64_t>(step));
  }
  // After two steps Beta1Pow has been multiplied by beta1 twice.
  const float beta1 = attrs.count("beta1") ? std::get<float>(attrs.at("beta1")) : 0.9f;
  EXPECT_NEAR(Values<T>(dev.at("b1p"))[0], 0.9 * beta1 * beta1, 1e-6);
}

TEST(OptimizerConformance, AdamTwoStepsWithBiasCorrection) {
  FLEET_CONFORMANCE_RUNNER(runner);
  AdamTwoSteps<float>(*runner, "adam", {});
  AdamTwoSteps<double>(*runner, "adam", {{"beta1", 0.8f}, {"beta2", 0.99f}, {"epsilon", 1e-6f}});
  AdamTwoSteps<float>(*runner, "adamw", {{"coeff", 0.1f}, {"with_decay", true}});
  AdamTwoSteps<double>(*runner, "adamw",
                       {{"coeff", 0.05f}, {"with_decay", true}, {"lr_ratio", 0.5f}});
}

TEST(OptimizerConformance, AdamClosedForms) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // First step from zero moments with Beta1Pow = beta1, Beta2Pow = beta2: bias correction makes
  // the step lr * g / (|g| + eps) whatever the betas.
  const double lr = 0.05, eps = 1e-8;
  std::vector<double> g = {0.5, -2.0, 1e-3, 0.0};
  VarMap vars{{"p", MakeTensor<double>({4}, {1.0, 1.0, 1.0, 1.0})},
              {"g", MakeTensor<double>({4}, g)},
              {"lr", MakeTensor<double>({1}, {lr})},
              {"m1", MakeTensor<double>({4}, std::vector<double>(4, 0.0))},
              {"m2", MakeTensor<double>({4}, std::vector<double>(4, 0.0))},
              {"b1p", MakeTensor<double>({1}, {0.7})},
              {"b2p", MakeTensor<double>({1}, {0.95})}};
  ASSERT_TRUE(runner->Run(AdamOp("adam", {{"beta1", 0.7f}, {"beta2", 0.95f}}), vars).ok());
  auto p = Values<double>(vars.at("p_out"));
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(p[i], 1.0 - lr * g[i] / (std::fabs(g[i]) + eps), 1e-6) << i;
  }
  EXPECT_NEAR(Values<double>(vars.at("b1p_out"))[0], 0.7 * 0.7f, 1e-9);

  // adamw with a zero gradient only decays: p * (1 - lr * coeff).
  VarMap w = vars;
  w["g"] = MakeTensor<double>({4}, std::vector<double>(4, 0.0));
  w["p"] = MakeTensor<double>({4}, {2.0, -1.0, 0.5, 4.0});
  ASSERT_TRUE(runner->Run(AdamOp("adamw", {{"coeff", 0.25f}, {"with_decay", true}}), w).ok());
  auto pw = Values<double>(w.at("p_out"));
  std::vector<double> p0 = {2.0, -1.0, 0.5, 4.0};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(pw[i], p0[i] * (1 - lr * 0.25), 1e-12) << i;
  // with_decay false (Paddle's default) leaves the param alone.
  ASSERT_TRUE(runner->Run(AdamOp("adamw", {{"coeff", 0.25f}}), w).ok());
  pw = Values<double>(w.at("p_out"));
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(pw[i], p0[i], 1e-12) << i;
}

TEST(OptimizerConformance, SquaredL2Norm) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("squared_l2_norm", {{"X", {"x"}}}, {{"Out", {"out"}}});
  {
    VarMap vars{{"x", RandomTensor<float>({17, 9}, 7)}};
    ExpectMatchesReference<float>(*runner, op, vars);
  }
  {
    VarMap vars{{"x", RandomTensor<double>({4, 2, 3}, 8)}};
    ExpectMatchesReference<double>(*runner, op, vars);
  }
  VarMap by_hand{{"x", MakeTensor<float>({2, 2}, {1, -2, 3, 0.5f})}};
  ASSERT_TRUE(runner->Run(op, by_hand).ok());
  EXPECT_FLOAT_EQ(Values<float>(by_hand.at("out"))[0], 14.25f);
}

// Out of lr_schedule at `step` (an int64 counter, or float when `float_step`).
double LrAt(OpRunner& runner, const ir::AttrMap& attrs, int64_t step, bool float_step = false) {
  ir::Op op = MakeOp("lr_schedule", {{"Step", {"step"}}}, {{"Out", {"lr"}}}, attrs);
  VarMap vars{{"step", float_step ? MakeTensor<float>({1}, {static_cast<float>(step)})
                                  : MakeTensor<int64_t>({1}, {step})}};
  Status s = runner.Run(op, vars);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return NAN;
  auto ref = NumpyReference("lr_schedule", op, vars);
  EXPECT_TRUE(ref.ok()) << ref.status().ToString();
  double got = Values<float>(vars.at("lr"))[0];
  if (ref.ok()) {
    EXPECT_NEAR(got, Values<float>(ref->at("Out")[0])[0], 1e-7) << "step " << step;
  }
  return got;
}

TEST(OptimizerConformance, LrSchedules) {
  FLEET_CONFORMANCE_RUNNER(runner);
  using A = ir::AttrMap;
  // Piecewise: [0, 10) -> 1.0, [10, 20) -> 0.5, then 0.1.
  A pw{{"type", std::string("piecewise")},
       {"boundaries", std::vector<int64_t>{10, 20}},
       {"values", std::vector<float>{1.0f, 0.5f, 0.1f}}};
  EXPECT_NEAR(LrAt(*runner, pw, 0), 1.0, 1e-7);
  EXPECT_NEAR(LrAt(*runner, pw, 9), 1.0, 1e-7);
  EXPECT_NEAR(LrAt(*runner, pw, 10), 0.5, 1e-7);
  EXPECT_NEAR(LrAt(*runner, pw, 25), 0.1, 1e-7);
  EXPECT_NEAR(LrAt(*runner, pw, 19, /*float_step=*/true), 0.5, 1e-7);

  // Exponential: 0.1 * 0.5^(step / 10), floored with staircase.
  A ex{{"type", std::string("exponential")},
       {"learning_rate", 0.1f},
       {"gamma", 0.5f},
       {"decay_steps", int64_t{10}}};
  EXPECT_NEAR(LrAt(*runner, ex, 0), 0.1, 1e-7);
  EXPECT_NEAR(LrAt(*runner, ex, 5), 0.1 * std::pow(0.5, 0.5), 1e-7);
  EXPECT_NEAR(LrAt(*runner, ex, 25), 0.1 * std::pow(0.5, 2.5), 1e-7);
  ex["staircase"] = true;
  EXPECT_NEAR(LrAt(*runner, ex, 5), 0.1, 1e-7);
  EXPECT_NEAR(LrAt(*runner, ex, 25), 0.025, 1e-7);

  // Cosine: 0.01 + (0.2 - 0.01) * (1 + cos(pi * step / 100)) / 2.
  A cs{{"type", std::string("cosine")},
       {"learning_rate", 0.2f},
       {"T_max", int64_t{100}},
       {"eta_min", 0.01f}};
  EXPECT_NEAR(LrAt(*runner, cs, 0), 0.2, 1e-7);
  EXPECT_NEAR(LrAt(*runner, cs, 50), 0.105, 1e-7);
  EXPECT_NEAR(LrAt(*runner, cs, 100), 0.01, 1e-7);
  EXPECT_NEAR(LrAt(*runner, cs, 25), 0.01 + 0.19 * (1 + std::cos(M_PI / 4)) / 2, 1e-7);

  // Linear warm-up over 4 steps from 0 to 0.2, then the cosine on step - 4.
  A wu = cs;
  wu["warmup_steps"] = int64_t{4};
  wu["start_lr"] = 0.0f;
  wu["end_lr"] = 0.2f;
  EXPECT_NEAR(LrAt(*runner, wu, 0), 0.0, 1e-7);
  EXPECT_NEAR(LrAt(*runner, wu, 1), 0.05, 1e-7);
  EXPECT_NEAR(LrAt(*runner, wu, 3), 0.15, 1e-7);
  EXPECT_NEAR(LrAt(*runner, wu, 4), 0.2, 1e-7);
  EXPECT_NEAR(LrAt(*runner, wu, 54), 0.105, 1e-7);
  // Warm-up into a constant.
  A wc{{"type", std::string("constant")},
       {"learning_rate", 0.3f},
       {"warmup_steps", int64_t{10}},
       {"start_lr", 0.1f},
       {"end_lr", 0.3f}};
  EXPECT_NEAR(LrAt(*runner, wc, 5), 0.2, 1e-7);
  EXPECT_NEAR(LrAt(*runner, wc, 500), 0.3, 1e-7);
}

TEST(OptimizerConformance, BadInputsAreErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Grad shaped unlike Param: the shape function refuses it.
  VarMap vars{{"p", RandomTensor<float>({3}, 1)},
              {"g", RandomTensor<float>({4}, 2)},
              {"lr", MakeTensor<float>({1}, {0.1f})}};
  Status s = runner->Run(SgdOp(), vars);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Grad"), std::string::npos) << s.ToString();
  ir::Op bad = MakeOp("lr_schedule", {{"Step", {"step"}}}, {{"Out", {"lr"}}},
                      {{"type", std::string("linear")}});
  VarMap st{{"step", MakeTensor<int64_t>({1}, {3})}};
  s = runner->Run(bad, st);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("linear"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace fleet::conformance
