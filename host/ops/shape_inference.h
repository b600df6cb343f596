// Shape inference over a program: runs an op's shape function on the vars it reads.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/program.h"
#include "ops/op_registry.h"
#include "support/status.h"

namespace fleet::ops {

using SlotInfos = std::map<std::string, std::vector<TensorInfo>>;

// The output shapes of `op` computed from the vars it reads, as declared in `program` (looked up
// from `block` outwards). Errors: an unknown op type, an input var that is not declared, and
// whatever the shape function reports, prefixed with the op.
StatusOr<SlotInfos> InferOpShapes(const OpRegistry& registry, const ir::Program& program,
                                  int32_t block, const ir::Op& op);

// Sequence tensors after the shape function ran (OpSchema::lod_share, sequence_kernel): refuses a
// sequence input the op does not take, naming the slot, the var and what to do; gives each
// lod_share output the lod_level and sequences of its input. Also refuses a SelectedRows input
// in a slot that does not take one (OpSchema::selected_rows_inputs). Every shape inference runs it.
Status ApplyLodRules(const OpSchema& schema, ShapeContext& ctx);

// InferOpShapes, then declares each output var that does not exist yet in `block` (not
// persistable) and sets dtype and shape of existing non-persistable ones. A persistable output
// keeps its declaration, and a disagreement with it is an error (a parameter's shape is fixed).
// Placeholder entries (ir::kEmptyVarName) are left undeclared.
Status InferAndDeclareOutputs(const OpRegistry& registry, ir::Program& program, int32_t block,
                              const ir::Op& op);

// Values are tracked for tensors of at most this many elements.
inline constexpr int64_t kMaxTrackedValues = 64;

// The values `op` writes to its output Out when its attributes alone fix them (fill_constant of
// at most kMaxTrackedValues elements, `out` being its inferred Out); nullopt otherwise. The
// executor records these so that shape functions can read them (ShapeContext::input_values).
std::optional<std::vector<double>> FixedOutputValues(const ir::Op& op, const TensorInfo& out);

}  // namespace fleet::ops
