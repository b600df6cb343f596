// Conformance of the extra loss ops (sigmoid_cross_entropy_with_logits, bce_loss, log_loss,
// huber_loss, smooth_l1_loss, kldiv_loss, label_smooth): forward against NumPy
// (ref/ref_loss_ext.py), gradient rules against finite differences in float64, float32 kernels
// against float64, and shape-function errors naming the op and slot.
#include <cmath>

#include "harness.h"
#include "ops/op_registry.h"

namespace fleet::conformance {
namespace {

using Attrs = ir::AttrMap;

// Runs the forward op and its grad ops in float64 and in float32 (inputs cast from the float64
// ones, the same random output gradients) and compares every output and input gradient.
::testing::AssertionResult Float32MatchesFloat64(OpRunner& runner, const ir::Op& fwd,
                                                 const VarMap& inputs,
                                                 const std::vector<std::string>& grad_outputs,
                                                 double tol) {
  const ops::OpSchema* schema = ops::BuiltinOps().Find(fwd.type);
  if (schema == nullptr || !schema->grad) return ::testing::AssertionFailure() << "no grad rule";
  VarMap v64 = inputs;
  if (Status s = runner.Run(fwd, v64); !s.ok()) {
    return ::testing::AssertionFailure() << "float64 forward: " << s.ToString();
  }
  uint64_t seed = 500;
  for (const auto& slot : grad_outputs) {
    for (const auto& name : fwd.Output(slot)) {
      v64[name + "@GRAD"] = RandomTensor<double>(v64.at(name).dims, ++seed);
    }
  }
  VarMap v32;
  for (const auto& [name, t] : v64) {
    v32[name] = t.dtype == ir::DataType::kFloat64 ? Cast(t, ir::DataType::kFloat32) : t;
  }
  VarMap f32 = v32;
  if (Status s = runner.Run(fwd, f32); !s.ok()) {
    return ::testing::AssertionFailure() << "float32 forward: " << s.ToString();
  }
  for (const auto& [slot, names] : fwd.outputs) {
    for (const auto& name : names) {
      auto r = AllClose(f32.at(name), Cast(v64.at(name), ir::DataType::kFloat32), tol, tol);
      if (!r) return ::testing::AssertionFailure() << "forward " << name << ": " << r.message();
    }
  }
  for (const ir::Op& g : schema->grad(fwd)) {
    if (Status s = runner.Run(g, v64); !s.ok()) {
      return ::testing::AssertionFailure() << "float64 " << g.type << ": " << s.ToString();
    }
    if (Status s = runner.Run(g, v32); !s.ok()) {
      return ::testing::AssertionFailure() << "float32 " << g.type << ": " << s.ToString();
    }
    for (const auto& [slot, names] : g.outputs) {
      for (const auto& name : names) {
        auto r = AllClose(v32.at(name), Cast(v64.at(name), ir::DataType::kFloat32), tol, tol);
        if (!r)
          return ::testing::AssertionFailure() << g.type << " " << name << ": " << r.message();
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// A run that must fail with every one of `needles` in its message.
::testing::AssertionResult FailsWith(OpRunner& runner, const ir::Op& op, VarMap vars,
                                     const std::vector<std::string>& needles) {
  Status s = runner.Run(op, vars);
  if (s.ok()) return ::testing::AssertionFailure() << op.type << " ran but should have failed";
  for (const auto& n : needles) {
    if (s.ToString().find(n) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << n << "' not in: " << s.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

// Values in {0, 1} (hard binary labels) of dtype T.
template <typename T>
HostTensor Binary(std::vector<int64_t> dims, uint64_t seed) {
  HostTensor t = RandomTensor<T>(dims, seed, 0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = t.data<T>()[i] < 0.5 ? T(0) : T(1);
  return t;
}

// Random values moved away from the kinks at +-`at` so finite differences do not straddle one.
template <typename T>
HostTensor AwayFrom(HostTensor t, double at, double margin) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    T& v = t.data<T>()[i];
    if (std::abs(std::abs(static_cast<double>(v)) - at) < margin) v = static_cast<T>(v * 1.5);
    if (std::abs(static_cast<double>(v)) < margin) v = static_cast<T>(v + 2 * margin);
  }
  return t;
}

// ---- sigmoid_cross_entropy_with_logits -------------------------------------------------------

ir::Op SigmoidCe(Attrs attrs) {
  return MakeOp("sigmoid_cross_entropy_with_logits", {{"X", {"x"}}, {"Label", {"l"}}},
                {{"Out", {"out"}}}, std::move(attrs));
}

TEST(LossExtConformance, SigmoidCeMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Large logits of both signs stay finite.
  VarMap v32{{"x", RandomTensor<float>({4, 5}, 1, -30, 30)}, {"l", Binary<float>({4, 5}, 2)}};
  EXPECT_TRUE(MatchesNumpy(*runner, SigmoidCe({}), v32, {"Out"}, 1e-5, 1e-6));
  VarMap soft{{"x", RandomTensor<double>({3, 2, 4}, 3, -3, 3)},
              {"l", RandomTensor<double>({3, 2, 4}, 4, 0, 1)}};
  EXPECT_TRUE(MatchesNumpy(*runner, SigmoidCe({}), soft, {"Out"}, 1e-12, 1e-12));
  // ignore_index and normalize: ignored elements give 0 and do not count.
  VarMap ign{{"x", RandomTensor<double>({3, 4}, 5, -3, 3)}, {"l", Binary<double>({3, 4}, 6)}};
  for (int i : {1, 5, 6}) ign.at("l").data<double>()[i] = -1;
  EXPECT_TRUE(MatchesNumpy(*runner, SigmoidCe({{"ignore_index", int32_t{-1}}}), ign, {"Out"}, 1e-12,
                           1e-12));
  EXPECT_TRUE(MatchesNumpy(*runner, SigmoidCe({{"ignore_index", int32_t{-1}}, {"normalize", true}}),
                           ign, {"Out"}, 1e-12, 1e-12));
  // Everything ignored with normalize: zeros, not NaN.
  VarMap all{{"x", RandomTensor<float>({2, 2}, 7)},
             {"l", MakeTensor<float>({2, 2}, {-100, -100, -100, -100})}};
  EXPECT_TRUE(MatchesNumpy(*runner, SigmoidCe({{"normalize", true}}), all, {"Out"}, 0, 0));
}

TEST(LossExtConformance, SigmoidCeGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<double>({3, 4}, 11, -3, 3)}, {"l", Binary<double>({3, 4}, 12)}};
  v.at("l").data<double>()[2] = -100;
  EXPECT_TRUE(CheckGradients(*runner, SigmoidCe({}), v, {}));
  EXPECT_TRUE(CheckGradients(*runner, SigmoidCe({{"normalize", true}}), v, {}));
  VarMap soft{{"x", RandomTensor<double>({2, 3}, 13, -3, 3)},
              {"l", RandomTensor<double>({2, 3}, 14, 0, 1)}};
  EXPECT_TRUE(CheckGradients(*runner, SigmoidCe({}), soft, {}));
  EXPECT_TRUE(Float32MatchesFloat64(*runner, SigmoidCe({{"normalize", true}}), v, {"Out"}, 1e-5));
}

// ---- bce_loss, log_loss ---------------------------------------------------------------------

ir::Op Bce() { return MakeOp("bce_loss", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Out", {"out"}}}); }

ir::Op LogLoss(Attrs attrs) {
  return MakeOp("log_loss", {{"Predicted", {"p"}}, {"Labels", {"l"}}}, {{"Loss", {"loss"}}},
                std::move(attrs));
}

TEST(LossExtConformance, BceLossMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<float>({5, 3}, 21, 0.01, 0.99)}, {"l", Binary<float>({5, 3}, 22)}};
  EXPECT_TRUE(MatchesNumpy(*runner, Bce(), v, {"Out"}, 1e-5, 1e-6));
  // Probabilities of exactly 0 and 1: each log is floored at -100, so the loss stays finite.
  VarMap edge{{"x", MakeTensor<double>({4}, {0.0, 1.0, 0.0, 1.0})},
              {"l", MakeTensor<double>({4}, {1.0, 0.0, 0.0, 1.0})}};
  EXPECT_TRUE(MatchesNumpy(*runner, Bce(), edge, {"Out"}, 1e-12, 1e-12));
  Status s = runner->Run(Bce(), edge);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(edge.at("out").data<double>()[0], 100.0);
}

TEST(LossExtConformance, BceLossGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<double>({4, 3}, 23, 0.1, 0.9)},
           {"l", RandomTensor<double>({4, 3}, 24, 0, 1)}};
  EXPECT_TRUE(CheckGradients(*runner, Bce(), v, {}));
  EXPECT_TRUE(Float32MatchesFloat64(*runner, Bce(), v, {"Out"}, 1e-5));
}

TEST(LossExtConformance, LogLossMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"p", RandomTensor<float>({6, 1}, 31, 0, 1)}, {"l", Binary<float>({6, 1}, 32)}};
  EXPECT_TRUE(MatchesNumpy(*runner, LogLoss({}), v, {"Loss"}, 1e-5, 1e-6));
  VarMap d{{"p", RandomTensor<double>({4, 1}, 33, 0, 1)}, {"l", Binary<double>({4, 1}, 34)}};
  EXPECT_TRUE(MatchesNumpy(*runner, LogLoss({{"epsilon", 0.01f}}), d, {"Loss"}, 1e-7, 1e-9));
}

TEST(LossExtConformance, LogLossGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"p", RandomTensor<double>({5, 1}, 35, 0.05, 0.95)}, {"l", Binary<double>({5, 1}, 36)}};
  EXPECT_TRUE(CheckGradients(*runner, LogLoss({}), v, {}));
  EXPECT_TRUE(Float32MatchesFloat64(*runner, LogLoss({}), v, {"Loss"}, 1e-5));
}

TEST(LossExtConformance, LogLossWantsBatchByOne) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"p", RandomTensor<float>({3, 2}, 37, 0, 1)}, {"l", Binary<float>({3, 2}, 38)}};
  EXPECT_TRUE(FailsWith(*runner, LogLoss({}), v, {"log_loss", "Predicted", "[3, 2]"}));
}

// ---- huber_loss -----------------------------------------------------------------------------

ir::Op Huber(float delta) {
  return MakeOp("huber_loss", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}, {"Residual", {"r"}}},
                {{"delta", delta}});
}

TEST(LossExtConformance, HuberLossMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  // Residuals on both sides of delta.
  VarMap v{{"x", RandomTensor<float>({6, 1}, 41, -2, 2)},
           {"y", RandomTensor<float>({6, 1}, 42, -2, 2)}};
  EXPECT_TRUE(MatchesNumpy(*runner, Huber(0.7f), v, {"Out", "Residual"}, 1e-5, 1e-6));
  VarMap d{{"x", RandomTensor<double>({3, 4}, 43, -3, 3)},
           {"y", RandomTensor<double>({3, 4}, 44, -3, 3)}};
  EXPECT_TRUE(MatchesNumpy(*runner, Huber(1.0f), d, {"Out", "Residual"}, 1e-12, 1e-12));
}

TEST(LossExtConformance, HuberLossGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<double>({4, 3}, 45, -2, 2)},
           {"y", RandomTensor<double>({4, 3}, 46, -2, 2)}};
  // Keep |y - x| away from delta, where the second derivative jumps.
  for (int64_t i = 0; i < 12; ++i) {
    double& y = v.at("y").data<double>()[i];
    const double r = y - v.at("x").data<double>()[i];
    if (std::abs(std::abs(r) - 0.8) < 0.05) y += 0.2;
  }
  GradCheckOptions opt;
  opt.outputs = {"Out"};
  EXPECT_TRUE(CheckGradients(*runner, Huber(0.8f), v, opt));
  EXPECT_TRUE(Float32MatchesFloat64(*runner, Huber(0.8f), v, {"Out"}, 1e-5));
}

TEST(LossExtConformance, HuberLossShapeErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<float>({3, 1}, 47)}, {"y", RandomTensor<float>({3, 2}, 48)}};
  EXPECT_TRUE(FailsWith(*runner, Huber(1.0f), v, {"huber_loss", "Y", "[3, 2]", "[3, 1]"}));
  VarMap ok{{"x", RandomTensor<float>({3, 1}, 47)}, {"y", RandomTensor<float>({3, 1}, 48)}};
  EXPECT_TRUE(FailsWith(*runner, Huber(0.0f), ok, {"huber_loss", "delta"}));
}

// ---- smooth_l1_loss -------------------------------------------------------------------------

ir::Op SmoothL1(float sigma, bool weights) {
  std::map<std::string, std::vector<std::string>> ins = {{"X", {"x"}}, {"Y", {"y"}}};
  if (weights) {
    ins["InsideWeight"] = {"wi"};
    ins["OutsideWeight"] = {"wo"};
  }
  return MakeOp("smooth_l1_loss", ins, {{"Diff", {"diff"}}, {"Out", {"out"}}}, {{"sigma", sigma}});
}

TEST(LossExtConformance, SmoothL1LossMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<float>({4, 5}, 51, -2, 2)},
           {"y", RandomTensor<float>({4, 5}, 52, -2, 2)}};
  EXPECT_TRUE(MatchesNumpy(*runner, SmoothL1(1.0f, false), v, {"Out", "Diff"}, 1e-5, 1e-6));
  VarMap w{{"x", RandomTensor<double>({3, 2, 3}, 53, -2, 2)},
           {"y", RandomTensor<double>({3, 2, 3}, 54, -2, 2)},
           {"wi", RandomTensor<double>({3, 2, 3}, 55, 0, 2)},
           {"wo", RandomTensor<double>({3, 2, 3}, 56, 0, 2)}};
  EXPECT_TRUE(MatchesNumpy(*runner, SmoothL1(2.0f, true), w, {"Out", "Diff"}, 1e-12, 1e-12));
}

TEST(LossExtConformance, SmoothL1LossGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  GradCheckOptions opt;
  opt.outputs = {"Out"};
  opt.inputs = {"X", "Y"};
  // sigma = 1: the kink of the derivative is at |d| = 1.
  VarMap v{{"x", AwayFrom<double>(RandomTensor<double>({3, 4}, 57, -2, 2), 1.0, 0.05)},
           {"y", RandomTensor<double>({3, 4}, 58, -0.01, 0.01)}};
  EXPECT_TRUE(CheckGradients(*runner, SmoothL1(1.0f, false), v, opt));
  // With weights (the derivative includes InsideWeight).
  VarMap w{{"x", AwayFrom<double>(RandomTensor<double>({2, 3}, 59, -2, 2), 0.25, 0.05)},
           {"y", RandomTensor<double>({2, 3}, 60, -0.001, 0.001)},
           {"wi", MakeTensor<double>({2, 3}, {1, 0, 1, 1, 1, 0})},
           {"wo", RandomTensor<double>({2, 3}, 61, 0.5, 2)}};
  EXPECT_TRUE(CheckGradients(*runner, SmoothL1(2.0f, true), w, opt));
  EXPECT_TRUE(Float32MatchesFloat64(*runner, SmoothL1(2.0f, true), w, {"Out"}, 1e-5));
}

TEST(LossExtConformance, SmoothL1LossShapeErrors) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap rank1{{"x", RandomTensor<float>({4}, 62)}, {"y", RandomTensor<float>({4}, 63)}};
  EXPECT_TRUE(FailsWith(*runner, SmoothL1(1.0f, false), rank1, {"smooth_l1_loss", "X", "[4]"}));
  VarMap w{{"x", RandomTensor<float>({2, 3}, 64)},
           {"y", RandomTensor<float>({2, 3}, 65)},
           {"wi", RandomTensor<float>({2, 2}, 66)},
           {"wo", RandomTensor<float>({2, 3}, 67)}};
  EXPECT_TRUE(FailsWith(*runner, SmoothL1(1.0f, true), w, {"smooth_l1_loss", "InsideWeight"}));
}

// ---- kldiv_loss -----------------------------------------------------------------------------

ir::Op KlDiv(const std::string& reduction) {
  return MakeOp("kldiv_loss", {{"X", {"x"}}, {"Target", {"t"}}}, {{"Loss", {"loss"}}},
                {{"reduction", reduction}});
}

TEST(LossExtConformance, KlDivLossMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const char* red : {"none", "mean", "batchmean", "sum"}) {
    // Targets include zeros and negatives, which contribute nothing.
    VarMap v{{"x", RandomTensor<float>({4, 3}, 71, -3, 0)},
             {"t", RandomTensor<float>({4, 3}, 72, -0.2, 1)}};
    EXPECT_TRUE(MatchesNumpy(*runner, KlDiv(red), v, {"Loss"}, 1e-5, 1e-6)) << red;
    VarMap d{{"x", RandomTensor<double>({2, 3, 2}, 73, -3, 0)},
             {"t", RandomTensor<double>({2, 3, 2}, 74, 0, 1)}};
    EXPECT_TRUE(MatchesNumpy(*runner, KlDiv(red), d, {"Loss"}, 1e-12, 1e-12)) << red;
  }
}

TEST(LossExtConformance, KlDivLossGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (const char* red : {"none", "mean", "batchmean", "sum"}) {
    VarMap v{{"x", RandomTensor<double>({3, 4}, 75, -3, 0)},
             {"t", RandomTensor<double>({3, 4}, 76, -0.2, 1)}};
    EXPECT_TRUE(CheckGradients(*runner, KlDiv(red), v, {})) << red;
    EXPECT_TRUE(Float32MatchesFloat64(*runner, KlDiv(red), v, {"Loss"}, 1e-5)) << red;
  }
}

TEST(LossExtConformance, KlDivLossRejectsUnknownReduction) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<float>({2, 2}, 77)}, {"t", RandomTensor<float>({2, 2}, 78)}};
  EXPECT_TRUE(FailsWith(*runner, KlDiv("avg"), v, {"kldiv_loss", "reduction", "avg"}));
}

// ---- label_smooth ---------------------------------------------------------------------------

ir::Op LabelSmooth(float eps, bool prior) {
  std::map<std::string, std::vector<std::string>> ins = {{"X", {"x"}}};
  if (prior) ins["PriorDist"] = {"prior"};
  return MakeOp("label_smooth", ins, {{"Out", {"out"}}}, {{"epsilon", eps}});
}

TEST(LossExtConformance, LabelSmoothMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", Binary<float>({2, 3, 5}, 81)}};
  EXPECT_TRUE(MatchesNumpy(*runner, LabelSmooth(0.1f, false), v, {"Out"}, 1e-6, 1e-7));
  VarMap p{{"x", Binary<double>({4, 3}, 82)},
           {"prior", MakeTensor<double>({1, 3}, {0.2, 0.5, 0.3})}};
  EXPECT_TRUE(MatchesNumpy(*runner, LabelSmooth(0.25f, true), p, {"Out"}, 1e-7, 1e-7));
  // The default epsilon 0 is the identity.
  VarMap id{{"x", RandomTensor<float>({3, 2}, 83)}};
  EXPECT_TRUE(MatchesNumpy(*runner, MakeOp("label_smooth", {{"X", {"x"}}}, {{"Out", {"out"}}}), id,
                           {"Out"}, 0, 0));
}

TEST(LossExtConformance, LabelSmoothGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<double>({3, 4}, 84)},
           {"prior", RandomTensor<double>({1, 4}, 85, 0, 1)}};
  EXPECT_TRUE(CheckGradients(*runner, LabelSmooth(0.2f, true), v, {}));
  EXPECT_TRUE(Float32MatchesFloat64(*runner, LabelSmooth(0.2f, true), v, {"Out"}, 1e-6));
}

TEST(LossExtConformance, LabelSmoothPriorMustMatchClasses) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<float>({3, 4}, 86)}, {"prior", RandomTensor<float>({1, 3}, 87)}};
  EXPECT_TRUE(
      FailsWith(*runner, LabelSmooth(0.1f, true), v, {"label_smooth", "PriorDist", "[1, 3]"}));
}

// ---- margin_rank_loss ------------------------------------------------------------------------

ir::Op MarginRank(float margin) {
  return MakeOp("margin_rank_loss", {{"X1", {"a"}}, {"X2", {"b"}}, {"Label", {"l"}}},
                {{"Out", {"out"}}, {"Activated", {"act"}}}, {{"margin", margin}});
}

// Labels of +1 and -1, as the loss expects.
template <typename T>
HostTensor Signs(std::vector<int64_t> dims, uint64_t seed) {
  HostTensor t = Binary<T>(dims, seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = t.data<T>()[i] > T(0) ? T(1) : T(-1);
  return t;
}

TEST(LossExtConformance, MarginRankLossMatchesNumpyAndGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (float margin : {0.0f, 0.3f}) {
    VarMap v{{"a", RandomTensor<double>({6, 1}, 101)},
             {"b", RandomTensor<double>({6, 1}, 102)},
             {"l", Signs<double>({6, 1}, 103)}};
    EXPECT_TRUE(MatchesNumpy(*runner, MarginRank(margin), v, {"Out", "Activated"}, 1e-12, 0));
    GradCheckOptions opt;
    opt.outputs = {"Out"};
    EXPECT_TRUE(CheckGradients(*runner, MarginRank(margin), v, opt)) << margin;
    EXPECT_TRUE(Float32MatchesFloat64(*runner, MarginRank(margin), v, {"Out"}, 1e-6)) << margin;
  }
  VarMap bad{{"a", RandomTensor<float>({6, 2}, 1)}, {"b", RandomTensor<float>({6, 2}, 2)},
             {"l", RandomTensor<float>({6, 2}, 3)}};
  EXPECT_TRUE(FailsWith(*runner, MarginRank(0), bad, {"margin_rank_loss", "[batch, 1]"}));
}

// ---- common shape rules ---------------------------------------------------------------------

TEST(LossExtConformance, LabelsMustMatchTheInput) {
  FLEET_CONFORMANCE_RUNNER(runner);
  VarMap v{{"x", RandomTensor<float>({3, 4}, 91)}, {"l", RandomTensor<float>({4, 3}, 92)}};
  EXPECT_TRUE(FailsWith(*runner, SigmoidCe({}), v,
                        {"sigmoid_cross_entropy_with_logits", "Label", "[4, 3]", "[3, 4]"}));
  EXPECT_TRUE(FailsWith(*runner, Bce(), v, {"bce_loss", "Label"}));
  VarMap ints{{"x", RandomInts({3, 4}, 93, 0, 2)}, {"l", RandomInts({3, 4}, 94, 0, 2)}};
  EXPECT_TRUE(FailsWith(*runner, Bce(), ints, {"bce_loss", "X", "int64"}));
}

}  // namespace
}  // namespace fleet::conformance
