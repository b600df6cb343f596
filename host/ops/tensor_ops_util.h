// Helpers shared by the tensor op schemas (tensor_ops.cc: layout ops, tensor_create_ops.cc:
// cast, fills, random initializers). Internal to host/ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/program.h"
#include "ops/op_registry.h"

namespace fleet::ops::tensor_ops {

// Maps an axis in [-rank, rank) to [0, rank); false when it lies outside.
bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out);

// Whether `value` is one of the FLEET_DTYPE_* values a tensor may have (not kInvalid).
bool IsValidDtype(int64_t value);

// A grad op of type `type` carrying the forward attributes.
ir::Op GradOpOf(const ir::Op& forward, std::string type);

// cast, fill_constant, fill_any_like, fill_zeros_like, assign, uniform_random,
// gaussian_random, increment (tensor_create_ops.cc).
void RegisterTensorCreateOps(OpRegistry& registry);

}  // namespace fleet::ops::tensor_ops
