// Shared pieces of the math op group (math_*_ops.cc): the registration functions RegisterMathOps
// calls, and small helpers for shape functions and grad makers. Not a public header.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op_registry.h"

namespace fleet::ops::math {

// Groups of the math ops, one file each.
void RegisterMatmulOps(OpRegistry& registry);       // math_matmul_ops.cc: mul, matmul_v2
void RegisterElementwiseOps(OpRegistry& registry);  // math_elementwise_ops.cc: elementwise_*
void RegisterReduceOps(OpRegistry& registry);       // math_reduce_ops.cc: sum, mean, reduce_*
void RegisterActivationOps(OpRegistry& registry);   // math_activation_ops.cc: activations,
                                                    // softmax, log_softmax
void RegisterUnaryOps(OpRegistry& registry);        // math_unary_ops.cc: unary math, more
                                                    // activations, prelu, cumsum
void RegisterCompareOps(OpRegistry& registry);      // math_compare_ops.cc: comparisons,
                                                    // logical_*, where, isfinite_v2,
                                                    // elementwise_pow / mod / floordiv
void RegisterReduceExtOps(OpRegistry& registry);    // math_reduce_ext_ops.cc: reduce_max / min /
                                                    // prod / any / all, arg_max / arg_min,
                                                    // argsort, p_norm

// Out of X and Y broadcast by Paddle's rule with the lower-rank operand placed at `axis` (-1:
// trailing); X and Y must share a dtype, which Out takes (math_elementwise_ops.cc).
Status InferBroadcastBinary(ShapeContext& c, int64_t axis);

// The shape of reduce_sum and friends: X reduced over attributes dim / keep_dim / reduce_all,
// [1] when nothing is left (math_reduce_ops.cc).
Status InferReduceShape(ShapeContext& c);

// Known dims must agree; an unknown (-1) one agrees with anything.
inline bool DimsAgree(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

// Writes `info` to output `slot` when the op has it (grad ops may omit gradients autodiff
// pruned).
void SetOutputIfPresent(ShapeContext& c, std::string_view slot, const TensorInfo& info);

// Output slot `out` takes the shape of input slot `in` (both optional), var by var.
Status SameShapeAs(ShapeContext& c, std::string_view out, std::string_view in);

// A grad op of `fwd`: `type`, the forward attributes, the listed forward input and output slots
// as inputs, "<Out>@GRAD" of every listed output-gradient slot, and "<In>@GRAD" outputs for the
// listed differentiable input slots (skipped when the forward op lacks them).
ir::Op MakeGradOp(const ir::Op& fwd, std::string type,
                  const std::vector<std::string>& forward_inputs,
                  const std::vector<std::string>& forward_outputs,
                  const std::vector<std::string>& out_grads,
                  const std::vector<std::string>& in_grads);

}  // namespace fleet::ops::math
