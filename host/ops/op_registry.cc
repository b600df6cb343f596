#include "ops/op_registry.h"

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace fleet::ops {

bool ShapeContext::HasInput(std::string_view slot) const {
  auto it = inputs.find(std::string(slot));
  return it != inputs.end() && !it->second.empty();
}

bool ShapeContext::HasOutput(std::string_view slot) const {
  auto it = outputs.find(std::string(slot));
  return it != outputs.end() && !it->second.empty();
}

const TensorInfo& ShapeContext::Input(std::string_view slot, size_t i) const {
  auto it = inputs.find(std::string(slot));
  assert(it != inputs.end() && i < it->second.size());
  return it->second[i];
}

TensorInfo& ShapeContext::Output(std::string_view slot, size_t i) {
  auto it = outputs.find(std::string(slot));
  assert(it != outputs.end() && i < it->second.size());
  return it->second[i];
}

size_t ShapeContext::InputCount(std::string_view slot) const {
  auto it = inputs.find(std::string(slot));
  return it == inputs.end() ? 0 : it->second.size();
}

const std::vector<double>* ShapeContext::InputValue(std::string_view slot, size_t i) const {
  auto it = input_values.find(std::string(slot));
  if (it == input_values.end() || i >= it->second.size() || it->second[i].empty()) {
    return nullptr;
  }
  return &it->second[i];
}

size_t ShapeContext::OutputCount(std::string_view slot) const {
  auto it = outputs.find(std::string(slot));
  return it == outputs.end() ? 0 : it->second.size();
}

const ir::Attribute& ShapeContext::Attr(std::string_view name) const {
  if (const ir::Attribute* a = op_.FindAttr(name)) return *a;
  const AttrSpec* spec = schema_.FindAttr(name);
  assert(spec != nullptr);
  return spec->default_value;
}

int64_t ShapeContext::IntAttr(std::string_view name) const {
  return ir::AttrAsInt(Attr(name)).value_or(0);
}
double ShapeContext::FloatAttr(std::string_view name) const {
  return ir::AttrAsDouble(Attr(name)).value_or(0.0);
}
bool ShapeContext::BoolAttr(std::string_view name) const {
  return ir::AttrAsBool(Attr(name)).value_or(false);
}
std::string ShapeContext::StringAttr(std::string_view name) const {
  const auto* s = std::get_if<std::string>(&Attr(name));
  return s ? *s : std::string();
}
std::vector<int64_t> ShapeContext::IntsAttr(std::string_view name) const {
  return ir::AttrAsInts(Attr(name)).value_or(std::vector<int64_t>{});
}
std::vector<double> ShapeContext::FloatsAttr(std::string_view name) const {
  return ir::AttrAsDoubles(Attr(name)).value_or(std::vector<double>{});
}

Status ShapeContext::Error(std::string_view message) const {
  return InvalidArgument(op_.type + ": " + std::string(message));
}

const SlotSpec* OpSchema::FindInput(std::string_view name) const {
  for (const auto& s : inputs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const SlotSpec* OpSchema::FindOutput(std::string_view name) const {
  for (const auto& s : outputs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const AttrSpec* OpSchema::FindAttr(std::string_view name) const {
  for (const auto& a : attrs) {
    if (a.name == name) return &a;
  }
  // As Paddle's OpProtoAndCheckerMaker adds them to every op.
  static const AttrSpec kRole{std::string(ir::op_role::kAttr), int32_t{0}};
  static const AttrSpec kRoleVar{std::string(ir::op_role::kVarAttr), std::vector<std::string>{}};
  if (name == kRole.name) return &kRole;
  if (name == kRoleVar.name) return &kRoleVar;
  return nullptr;
}

GradFn DefaultGrad(const OpSchema& forward_schema, std::string grad_type) {
  if (grad_type.empty()) grad_type = forward_schema.type + "_grad";
  std::vector<SlotSpec> in_slots = forward_schema.inputs;
  std::vector<SlotSpec> out_slots = forward_schema.outputs;
  return [grad_type, in_slots, out_slots](const ir::Op& fwd) {
    ir::Op g;
    g.type = grad_type;
    g.attrs = fwd.attrs;
    for (const auto& s : in_slots) {
      const auto& vars = fwd.Input(s.name);
      if (vars.empty()) continue;
      g.inputs[s.name] = vars;
      if (s.no_grad) continue;
      std::vector<std::string> grads;
      for (const auto& v : vars) grads.push_back(ir::GradVarName(v));
      g.outputs[ir::GradVarName(s.name)] = std::move(grads);
    }
    for (const auto& s : out_slots) {
      const auto& vars = fwd.Output(s.name);
      if (vars.empty()) continue;
      g.inputs[s.name] = vars;
      std::vector<std::string> grads;
      for (const auto& v : vars) grads.push_back(ir::GradVarName(v));
      g.inputs[ir::GradVarName(s.name)] = std::move(grads);
    }
    return std::vector<ir::Op>{std::move(g)};
  };
}

Status OpRegistry::Register(OpSchema schema) {
  if (schema.type.empty()) return InvalidArgument("op schema without a type");
  if (!schema.infer_shape) {
    return InvalidArgument("op schema '" + schema.type + "' has no shape function");
  }
  std::string type = schema.type;
  auto [it, inserted] = schemas_.emplace(type, std::move(schema));
  if (!inserted) return AlreadyExists("op '" + type + "' is already registered");
  return OkStatus();
}

const OpSchema* OpRegistry::Find(std::string_view type) const {
  auto it = schemas_.find(type);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::Types() const {
  std::vector<std::string> out;
  out.reserve(schemas_.size());
  for (const auto& [type, schema] : schemas_) out.push_back(type);
  return out;
}

void RegisterBuiltin(OpRegistry& registry, OpSchema schema) {
  Status s = registry.Register(std::move(schema));
  if (!s.ok()) {
    std::fprintf(stderr, "fleet: built-in op schema rejected: %s\n", s.ToString().c_str());
    std::abort();
  }
}

TensorInfo InfoOfVar(const ir::Var& v) {
  TensorInfo info{v.dtype, v.shape, v.lod_level, -1};
  if (v.selected_rows && !v.shape.empty()) {
    info.height = v.shape[0] < 0 ? 0 : v.shape[0];
    info.dims[0] = -1;
  }
  return info;
}

std::vector<int64_t> DeclaredShape(const TensorInfo& info) {
  std::vector<int64_t> shape = info.dims;
  if (info.selected_rows() && !shape.empty()) shape[0] = info.height;
  return shape;
}

int64_t ProductOrUnknown(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) {
    if (dims[i] < 0) return -1;
    p *= dims[i];
  }
  return p;
}

const OpRegistry& BuiltinOps() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterMathOps(*r);
    RegisterNnOps(*r);
    RegisterTensorOps(*r);
    RegisterOptimizerOps(*r);
    RegisterCollectiveOps(*r);
    RegisterPserverOps(*r);
    return r;
  }();
  return *registry;
}

Status CheckOpSlots(const OpSchema& schema, const ir::Op& op) {
  auto check = [&](const ir::SlotMap& slots, const std::vector<SlotSpec>& specs,
                   const char* kind) -> Status {
    for (const auto& [name, vars] : slots) {
      const SlotSpec* spec = nullptr;
      for (const auto& s : specs) {
        if (s.name == name) spec = &s;
      }
      if (spec == nullptr) {
        return InvalidArgument(op.type + ": unknown " + kind + " slot '" + name + "'");
      }
      if (!spec->duplicable && vars.size() > 1) {
        return InvalidArgument(op.type + ": " + kind + " slot '" + name + "' holds " +
                               std::to_string(vars.size()) + " vars but takes one");
      }
    }
    return OkStatus();
  };
  FLEET_RETURN_IF_ERROR(check(op.inputs, schema.inputs, "input"));
  FLEET_RETURN_IF_ERROR(check(op.outputs, schema.outputs, "output"));
  for (const auto& s : schema.inputs) {
    if (!s.optional && op.Input(s.name).empty()) {
      return InvalidArgument(op.type + ": required input slot '" + s.name + "' is missing");
    }
  }
  return OkStatus();
}

ir::DataType KernelDtype(const OpSchema& schema, const ir::Op& op,
                        const std::function<ir::DataType(const std::string& var)>& dtype_of) {
  auto first_of = [&](const ir::SlotMap& slots, const std::string& slot) {
    auto it = slots.find(slot);
    if (it == slots.end() || it->second.empty()) return ir::DataType::kInvalid;
    return dtype_of(it->second.front());
  };
  if (!schema.kernel_dtype_slot.empty()) {
    ir::DataType d = first_of(op.inputs, schema.kernel_dtype_slot);
    return d != ir::DataType::kInvalid ? d : first_of(op.outputs, schema.kernel_dtype_slot);
  }
  for (const SlotSpec& s : schema.inputs) {
    ir::DataType d = first_of(op.inputs, s.name);
    if (d != ir::DataType::kInvalid) return d;
  }
  for (const SlotSpec& s : schema.outputs) {
    ir::DataType d = first_of(op.outputs, s.name);
    if (d != ir::DataType::kInvalid) return d;
  }
  return ir::DataType::kInvalid;
}

ir::AttrMap AttrsWithDefaults(const OpSchema& schema, const ir::Op& op) {
  ir::AttrMap out = op.attrs;
  for (const auto& a : schema.attrs) out.emplace(a.name, a.default_value);
  return out;
}

}  // namespace fleet::ops
