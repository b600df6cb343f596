// Gradient transforms applied before the update ops, in Paddle's order (apply_gradients):
// clipping (by global norm, per-tensor norm or value) first, then regularization. Each
// rewrites every gradient in place, so the gradient keeps its name ("<param>@GRAD") for the
// passes that look for it. A sparse gradient (selected_rows) is clipped by global norm with
// the same ops (squared_l2_norm and elementwise_mul take one) and regularized on the rows it
// touches (sparse_weight_decay); the other clips do not take one (CheckSparsePair).
#include <cmath>

#include "ops/op_registry.h"
#include "optim/emit.h"

namespace fleet::optim::internal {

Status AppendGlobalNormClip(ir::Program& main, ir::Program& startup,
                            const std::vector<autodiff::ParamGrad>& params_grads,
                            double clip_norm) {
  ir::Block& block = main.global();
  ir::DataType dtype = ir::DataType::kInvalid;
  for (const auto& pg : params_grads) {
    const ir::Var* g = block.FindVar(pg.grad);
    if (dtype == ir::DataType::kInvalid) dtype = g->dtype;
    if (g->dtype != dtype) {
      return InvalidArgument("grad_clip: clipping by global norm needs gradients of one dtype, "
                             "but '" + pg.grad + "' is " +
                             std::string(ir::DataTypeName(g->dtype)) + " and '" +
                             params_grads.front().grad + "' is " +
                             std::string(ir::DataTypeName(dtype)));
    }
  }
  auto scalar = [&](const std::string& prefix) -> StatusOr<std::string> {
    std::string name = UniqueName(main, startup, prefix);
    FLEET_RETURN_IF_ERROR(Declare(main, nullptr, MakeVar(name, dtype, {1}, false)));
    return name;
  };
  std::vector<std::string> squares;
  for (const auto& pg : params_grads) {
    FLEET_ASSIGN_OR_RETURN(std::string sq, scalar(pg.param + "_grad_squared_norm"));
    block.ops.push_back(MakeOp("squared_l2_norm", {{"X", {pg.grad}}}, {{"Out", {sq}}}));
    squares.push_back(sq);
  }
  FLEET_ASSIGN_OR_RETURN(std::string norm_sq, scalar("clip_global_norm_sq"));
  FLEET_ASSIGN_OR_RETURN(std::string norm, scalar("clip_global_norm"));
  FLEET_ASSIGN_OR_RETURN(std::string max_norm, scalar("clip_max_norm"));
  FLEET_ASSIGN_OR_RETURN(std::string denom, scalar("clip_denominator"));
  FLEET_ASSIGN_OR_RETURN(std::string factor, scalar("clip_scale"));
  block.ops.push_back(MakeOp("sum", {{"X", squares}}, {{"Out", {norm_sq}}}));
  block.ops.push_back(MakeOp("sqrt", {{"X", {norm_sq}}}, {{"Out", {norm}}}));
  block.ops.push_back(FillConstant(max_norm, {1}, clip_norm, dtype));
  block.ops.push_back(MakeOp("elementwise_max", {{"X", {norm}}, {"Y", {max_norm}}},
                             {{"Out", {denom}}}, {{"axis", int32_t{-1}}}));
  block.ops.push_back(MakeOp("elementwise_div", {{"X", {max_norm}}, {"Y", {denom}}},
                             {{"Out", {factor}}}, {{"axis", int32_t{-1}}}));
  for (const auto& pg : params_grads) {
    block.ops.push_back(MakeOp("elementwise_mul", {{"X", {pg.grad}}, {"Y", {factor}}},
                               {{"Out", {pg.grad}}}, {{"axis", int32_t{-1}}}));
  }
  return OkStatus();
}

Status AppendNormClip(ir::Program& main, const std::vector<autodiff::ParamGrad>& params_grads,
                      double clip_norm) {
  for (const auto& pg : params_grads) {
    main.global().ops.push_back(MakeOp("clip_by_norm", {{"X", {pg.grad}}}, {{"Out", {pg.grad}}},
                                       {{"max_norm", static_cast<float>(clip_norm)}}));
  }
  return OkStatus();
}

Status AppendValueClip(ir::Program& main, const std::vector<autodiff::ParamGrad>& params_grads,
                       double min, double max) {
  for (const auto& pg : params_grads) {
    main.global().ops.push_back(MakeOp("clip", {{"X", {pg.grad}}}, {{"Out", {pg.grad}}},
                                       {{"min", static_cast<float>(min)},
                                        {"max", static_cast<float>(max)}}));
  }
  return OkStatus();
}

Status AppendRegularization(ir::Program& main, ir::Program& startup,
                            const autodiff::ParamGrad& pg, double global_l2_coeff) {
  ir::Block& block = main.global();
  const ir::Var* param = block.FindVar(pg.param);
  ir::ParamInfo info = param->param.value_or(ir::ParamInfo{});
  std::string kind = info.regularizer;
  double coeff = info.regularization_coeff;
  if (kind.empty()) {
    kind = "l2";
    coeff = global_l2_coeff;
  }
  if (kind != "l1" && kind != "l2") {
    return InvalidArgument("parameter '" + pg.param + "': unknown regularizer '" + kind +
                           "' (expected l1 or l2)");
  }
  if (!std::isfinite(coeff) || coeff < 0) {
    return InvalidArgument("parameter '" + pg.param + "': regularization coefficient must be "
                           "a finite non-negative number, got " + std::to_string(coeff));
  }
  if (coeff == 0) return OkStatus();
  if (block.FindVar(pg.grad)->selected_rows) {
    // A sparse gradient: only the rows it touches decay (once each), as in Paddle.
    block.ops.push_back(MakeOp("sparse_weight_decay", {{"Grad", {pg.grad}}, {"Param", {pg.param}}},
                               {{"Out", {pg.grad}}},
                               {{"coeff", static_cast<float>(coeff)}, {"regularizer", kind}}));
    return OkStatus();
  }
  const ir::DataType dtype = param->dtype;
  const std::vector<int64_t> shape = param->shape;
  std::string source = pg.param;
  if (kind == "l1") {
    // L1Decay: coeff * sign(param).
    std::string sign = UniqueName(main, startup, pg.param + "_sign");
    FLEET_RETURN_IF_ERROR(Declare(main, nullptr, MakeVar(sign, dtype, shape, false)));
    block.ops.push_back(MakeOp("sign", {{"X", {pg.param}}}, {{"Out", {sign}}}));
    source = sign;
  }
  std::string decay = UniqueName(main, startup, pg.param + "_" + kind + "_decay");
  FLEET_RETURN_IF_ERROR(Declare(main, nullptr, MakeVar(decay, dtype, shape, false)));
  block.ops.push_back(MakeOp("scale", {{"X", {source}}}, {{"Out", {decay}}},
                             {{"scale", static_cast<float>(coeff)},
                              {"bias", 0.0f},
                              {"bias_after_scale", true}}));
  block.ops.push_back(MakeOp("sum", {{"X", {pg.grad, decay}}}, {{"Out", {pg.grad}}}));
  return OkStatus();
}

}  // namespace fleet::optim::internal
