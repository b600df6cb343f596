// The optimizer ops the conformance suites build (optimizer_test.cc, sparse_test.cc), over the
// vars p, g, lr, v, m1, m2, b1p, b2p and their "<name>_out" outputs.
#pragma once

#include <string>
#include <utility>

#include "harness.h"

namespace fleet::conformance {

inline ir::Op SgdOp() {
  return MakeOp("sgd", {{"Param", {"p"}}, {"LearningRate", {"lr"}}, {"Grad", {"g"}}},
                {{"ParamOut", {"p_out"}}});
}

inline ir::Op MomentumOp(ir::AttrMap attrs) {
  return MakeOp("momentum",
                {{"Param", {"p"}}, {"Grad", {"g"}}, {"Velocity", {"v"}}, {"LearningRate", {"lr"}}},
                {{"ParamOut", {"p_out"}}, {"VelocityOut", {"v_out"}}}, std::move(attrs));
}

inline ir::Op AdamOp(const std::string& type, ir::AttrMap attrs) {
  return MakeOp(type,
                {{"Param", {"p"}},
                 {"Grad", {"g"}},
                 {"LearningRate", {"lr"}},
                 {"Moment1", {"m1"}},
                 {"Moment2", {"m2"}},
                 {"Beta1Pow", {"b1p"}},
                 {"Beta2Pow", {"b2p"}}},
                {{"ParamOut", {"p_out"}},
                 {"Moment1Out", {"m1_out"}},
                 {"Moment2Out", {"m2_out"}},
                 {"Beta1PowOut", {"b1p_out"}},
                 {"Beta2PowOut", {"b2p_out"}}},
                std::move(attrs));
}

}  // namespace fleet::conformance
