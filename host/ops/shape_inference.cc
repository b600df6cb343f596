#include "ops/shape_inference.h"

#include <algorithm>
#include <cstdlib>

namespace fleet::ops {

std::optional<std::vector<double>> FixedOutputValues(const ir::Op& op, const TensorInfo& out) {
  if (op.type != "fill_constant" || !op.inputs.empty()) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : out.dims) {
    if (d < 0) return std::nullopt;
    n *= d;
    if (n > kMaxTrackedValues) return std::nullopt;
  }
  if (n == 0) return std::nullopt;
  double value = 0.0;
  const ir::Attribute* text = op.FindAttr("str_value");
  const std::string* str = text != nullptr ? std::get_if<std::string>(text) : nullptr;
  if (str != nullptr && !str->empty()) {
    char* end = nullptr;
    value = std::strtod(str->c_str(), &end);
    if (end == str->c_str() || *end != '\0') return std::nullopt;
  } else if (const ir::Attribute* v = op.FindAttr("value")) {
    const std::optional<double> d = ir::AttrAsDouble(*v);
    if (!d) return std::nullopt;
    value = *d;
  }
  return std::vector<double>(static_cast<size_t>(n), value);
}

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
      infos.push_back(InfoOfVar(*v));
    }
  }
  for (const auto& [slot, names] : op.outputs) ctx.outputs[slot].resize(names.size());
  FLEET_RETURN_IF_ERROR(schema->infer_shape(ctx));
  FLEET_RETURN_IF_ERROR(ApplyLodRules(*schema, ctx));
  return std::move(ctx.outputs);
}

Status ApplyLodRules(const OpSchema& schema, ShapeContext& ctx) {
  for (const auto& [slot, infos] : ctx.inputs) {
    if (std::find(schema.selected_rows_inputs.begin(), schema.selected_rows_inputs.end(),
                  slot) != schema.selected_rows_inputs.end()) {
      continue;
    }
    for (size_t i = 0; i < infos.size(); ++i) {
      if (!infos[i].selected_rows()) continue;
      const std::vector<std::string>& names = ctx.op().Input(slot);
      return ctx.Error("input " + slot + " '" + (i < names.size() ? names[i] : "") +
                       "' is a sparse gradient (selected_rows), which " + ctx.op().type +
                       " does not take; build the embedding with is_sparse=False to keep its "
                       "gradient dense");
    }
  }
  if (schema.sequence_kernel) return OkStatus();
  for (const auto& [input_slot, infos] : ctx.inputs) {
    const std::string& slot = input_slot;  // a structured binding cannot be captured in C++17
    for (size_t i = 0; i < infos.size(); ++i) {
      if (infos[i].lod_level == 0) continue;
      const bool shared = std::any_of(schema.lod_share.begin(), schema.lod_share.end(),
                                      [&](const auto& pair) { return pair.second == slot; });
      if (shared) continue;
      const std::vector<std::string>& names = ctx.op().Input(slot);
      return ctx.Error("input " + slot + " '" + (i < names.size() ? names[i] : "") +
                       "' is a sequence tensor (lod_level 1), which " + ctx.op().type +
                       " does not take; turn the sequences into one row each first "
                       "(sequence_pool) or pad them (sequence_pad)");
    }
  }
  for (const auto& [out_slot, in_slot] : schema.lod_share) {
    auto in = ctx.inputs.find(in_slot);
    auto out = ctx.outputs.find(out_slot);
    if (in == ctx.inputs.end() || in->second.empty() || out == ctx.outputs.end()) continue;
    for (size_t k = 0; k < out->second.size(); ++k) {
      // Output k follows input k where the slots pair up, else the slot's first input.
      const TensorInfo& from = in->second[k < in->second.size() ? k : 0];
      out->second[k].lod_level = from.lod_level;
      out->second[k].sequences = from.sequences;
    }
  }
  return OkStatus();
}

Status InferAndDeclareOutputs(const OpRegistry& registry, ir::Program& program, int32_t block,
                              const ir::Op& op) {
  FLEET_ASSIGN_OR_RETURN(SlotInfos outs, InferOpShapes(registry, program, block, op));
  for (const auto& [slot, names] : op.outputs) {
    const auto& infos = outs[slot];
    for (size_t i = 0; i < names.size(); ++i) {
      if (i >= infos.size() || infos[i].dtype == ir::DataType::kInvalid) continue;
      if (ir::IsEmptyVar(names[i])) continue;  // not computed, never declared
      const TensorInfo& info = infos[i];
      ir::Var* v = program.FindVarRecursive(block, names[i]);
      if (v == nullptr) {
        ir::Var nv;
        nv.name = names[i];
        nv.dtype = info.dtype;
        nv.shape = DeclaredShape(info);
        nv.lod_level = info.lod_level;
        nv.selected_rows = info.selected_rows();
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
        v->shape = DeclaredShape(info);
        v->lod_level = info.lod_level;
        v->selected_rows = info.selected_rows();
      }
    }
  }
  return OkStatus();
}

}  // namespace fleet::ops
