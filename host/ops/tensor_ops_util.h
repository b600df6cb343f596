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

// XShape = [0, x dims...] with X's dtype, when the op has an XShape output (reshape2 and the
// other ops whose grad only needs X's shape).
void SetXShape(ShapeContext& c, const TensorInfo& x);

// The forward input's shape as seen by an XShape grad op: XShape minus its leading 0, or X.
StatusOr<TensorInfo> ForwardXInfo(const ShapeContext& c);

// Grad maker of the ops that write XShape: "<grad_type>" reading XShape (X when the forward op
// has no XShape output) and Out@GRAD, writing X@GRAD.
GradFn XShapeGrad(std::string grad_type);

// Schema of an XShape grad op whose X@GRAD simply has X's shape (the kernel does the work).
OpSchema XShapeGradSchema(std::string type, std::vector<AttrSpec> attrs, std::string summary);

// cast, fill_constant, fill_any_like, fill_zeros_like, assign, uniform_random,
// gaussian_random, increment (tensor_create_ops.cc).
void RegisterTensorCreateOps(OpRegistry& registry);

// unsqueeze2, squeeze2, expand_v2, expand_as_v2, tile, stack, unstack, flip, roll, tril_triu
// (tensor_shape_ext_ops.cc).
void RegisterTensorShapeExtOps(OpRegistry& registry);

// The shape function of a grad op whose X@GRAD has X's dims and Out@GRAD's dtype.
Status InferGradLikeX(ShapeContext& c);

// strided_slice, pad3d, pad (tensor_slice_pad_ops.cc).
void RegisterTensorSlicePadOps(OpRegistry& registry);

// gather, gather_nd, index_select, scatter, one_hot_v2 (tensor_index_ops.cc).
void RegisterTensorIndexOps(OpRegistry& registry);

}  // namespace fleet::ops::tensor_ops
