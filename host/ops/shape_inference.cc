#include "ops/shape_inference.h"

namespace fleet::ops {
namespace {



}  // namespace

StatusOr<SlotInfos> InferOpShapes(const OpRegistry& registry, const ir::Program& program,
                                  int32_t block, const ir::Op& op) {
  const OpSchema* schema = registry.Find(op.type);
  if (schema == nullptr) return NotFound("unknown op type '" + op.type + "'");
  FLEET_RETURN_IF_ERROR(CheckOpSlots(*schema, op));
  ShapeContext ctx(*schema, op);
  for (const auto& [slot, names] : op.inputs) {
    auto& infos = ctx.inputs[slot];
    for (const auto& name : names) {
      const ir::Var* v = program.FindVarRecursive(block, name);
      if (v == nullptr) {
        return NotFound(op.type + ": input " + slot + " reads '" + name +
                        "', which is not declared");
      }
      infos.push_back({v->dtype, v->shape});
    }
  }
  for (const auto& [slot, names] : op.outputs) ctx.outputs[slot].resize(names.size());
  FLEET_RETURN_IF_ERROR(schema->infer_shape(ctx));
  return std::move(ctx.outputs);
}

Status InferAndDeclareOutputs(const OpRegistry& registry, ir::Program& program, int32_t block,
                              const ir::Op& op) {
  FLEET_ASSIGN_OR_RETURN(SlotInfos outs, InferOpShapes(registry, program, block, op));
  for (const auto& [slot, names] : op.outputs) {
    const auto& infos = outs[slot];
    for (size_t i = 0; i < names.size(); ++i) {
      if (i >= infos.size() || infos[i].dtype == ir::DataType::kInvalid) continue;
      const TensorInfo& info = infos[i];
      ir::Var* v = program.FindVarRecursive(block, names[i]);
      if (v == nullptr) {
        ir::Var nv;
        nv.name = names[i];
        nv.dtype = info.dtype;
        nv.shape = info.dims;
        FLEET_RETURN_IF_ERROR(program.block(block).AddVar(std::move(nv)).status());
      } else if (v->persistable) {
        if (v->dtype != info.dtype || !ir::ShapesCompatible(v->shape, info.dims)) {
          return InvalidArgument(op.type + ": output " + slot + " '" + names[i] + "' is " +
                                 std::string(ir::DataTypeName(info.dtype)) +
                                 ir::ShapeText(info.dims) + " but the persistable var is declared " +
                                 std::string(ir::DataTypeName(v->dtype)) + ir::ShapeText(v->shape));
        }
      } else {
        v->dtype = info.dtype;
        v->shape = info.dims;
      }
    }
  }
  return OkStatus();
}

}  // namespace fleet::ops
