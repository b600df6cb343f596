// Helpers shared by the tensor op schemas (tensor_ops.cc: layout ops, tensor_create_ops.cc:
// cast, fills, random initializers). Internal to host/ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/program.h"
#include "ops/op_registry.h"

namespace fleet::ops::tensor_ops {

// "[2, -1, 3]".
std::string DimsText(const std::vector<int64_t>& dims);

// Maps an axis in [-rank, rank) to [0, rank); false when it lies outside.
bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out);

// Product of dims, or -1 when any is unknown (-1).
int64_t KnownNumel(const std::vector<int64_t>& dims);

// Whether `value` is one of the FLEET_DTYPE_* values a tensor may have (not kInvalid).
bool IsValidDtype(int64_t value);

// Registers the op into `registry`; a duplicate registration is a programming error here, so it
// aborts with the message (only reachable while BuiltinOps() is first built).
void RegisterOrAbort(OpRegistry& registry, OpSchema schema);

// A grad op of type `type` carrying the forward attributes.
ir::Op GradOpOf(const ir::Op& forward, std::string type);

// cast, fill_constant, fill_any_like, fill_zeros_like, assign, uniform_random,
// gaussian_random, increment (tensor_create_ops.cc).
void RegisterTensorCreateOps(OpRegistry& registry);

}  // namespace fleet::ops::tensor_ops
