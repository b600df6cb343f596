// Conformance of the math ops: forward against NumPy, gradients against finite differences.
#include "harness.h"

namespace fleet::conformance {
namespace {

ir::Op MakeOp(std::string type, ir::SlotMap inputs, ir::SlotMap outputs, ir::AttrMap attrs = {}) {
  ir::Op op;
  op.type = std::move(type);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  return op;
}

TEST(MathConformance, ScaleMatchesNumpy) {
  FLEET_CONFORMANCE_RUNNER(runner);
  for (bool after : {true, false}) {
    ir::Op op = MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"out"}}},
                       {{"scale", 2.5f}, {"bias", -0.5f}, {"bias_after_scale", after}});
    VarMap vars{{"x", RandomTensor<float>({3, 7}, 1)}};
    ASSERT_TRUE(runner->Run(op, vars).ok());
    auto ref = NumpyReference("scale", op, vars);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    EXPECT_TRUE(AllClose(vars.at("out"), ref->at("Out")[0], 1e-6, 1e-6));
  }
}

TEST(MathConformance, ScaleGradient) {
  FLEET_CONFORMANCE_RUNNER(runner);
  ir::Op op = MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"out"}}}, {{"scale", -1.5f}});
  VarMap vars{{"x", RandomTensor<double>({4, 3}, 2)}};
  EXPECT_TRUE(CheckGradients(*runner, op, vars, {}));
}

}  // namespace
}  // namespace fleet::conformance
