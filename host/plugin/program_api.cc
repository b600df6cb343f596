#include "plugin/program_api.h"

#include <cstring>
#include <deque>
#include <limits>

#include "plugin/host_api.h"
#include "plugin/kernel.h"
#include "support/text.h"

namespace fleet {
namespace {

// Tags that catch a handle of the wrong kind (or freed memory) before it is used.
constexpr uint64_t kSetMagic = 0x464c54534554ULL;      // "FLTSET"
constexpr uint64_t kProgramMagic = 0x464c5450524fULL;  // "FLTPRO"

// What op_get hands out for one op: every array the FleetOpDesc points to.
struct OpScratch {
  std::vector<std::vector<const char*>> slot_vars;
  std::vector<FleetSlot> in_slots, out_slots;
  std::vector<const FleetSlot*> in_ptrs, out_ptrs;
  std::vector<std::vector<int64_t>> ints;
  std::vector<std::vector<double>> floats;
  std::vector<std::vector<const char*>> strings;
  std::vector<FleetAttr> attrs;
  std::vector<const FleetAttr*> attr_ptrs;
};

}  // namespace
}  // namespace fleet

// The opaque handles of fleet_pass.h, defined by the host.
struct FleetProgram {
  uint64_t magic = fleet::kProgramMagic;
  std::string name;
  fleet::ir::Program* program = nullptr;
  // Everything op_get returned since the last edit; cleared by each edit.
  std::deque<fleet::OpScratch> scratch;
};

struct FleetProgramSet {
  uint64_t magic = fleet::kSetMagic;
  std::map<std::string, fleet::ir::Program>* programs = nullptr;
  std::map<std::string, std::unique_ptr<FleetProgram>> handles;
};

namespace fleet {
namespace {

FleetStatus* Fail(Code code, std::string message) {
  return MakeFleetStatus(Status(code, std::move(message)));
}

FleetStatus* BadArg(std::string message) { return Fail(Code::kInvalidArgument, message); }

bool ValidSet(const FleetProgramSet* set) { return set != nullptr && set->magic == kSetMagic; }
bool ValidProgram(const FleetProgram* p) {
  return p != nullptr && p->magic == kProgramMagic && p->program != nullptr;
}

FleetProgram* HandleFor(FleetProgramSet* set, const std::string& name, ir::Program* program) {
  auto& h = set->handles[name];
  if (!h) {
    h = std::make_unique<FleetProgram>();
    h->name = name;
    h->program = program;
  }
  return h.get();
}

std::string Quote(const char* s) { return s == nullptr ? "NULL" : "'" + std::string(s) + "'"; }

// A block index checked against the program; `fn` names the slot in the error.
FleetStatus* CheckBlock(FleetProgram* p, int32_t block, const char* fn) {
  if (!ValidProgram(p)) return BadArg(std::string(fn) + ": program handle is NULL or invalid");
  if (block < 0 || block >= p->program->num_blocks()) {
    return Fail(Code::kOutOfRange, std::string(fn) + ": block " + std::to_string(block) +
                                       " is out of range (program '" + p->name + "' has " +
                                       std::to_string(p->program->num_blocks()) + " blocks)");
  }
  return nullptr;
}

FleetStatus* CheckOpIndex(FleetProgram* p, int32_t block, int64_t index, const char* fn,
                          bool allow_end = false) {
  if (FleetStatus* s = CheckBlock(p, block, fn)) return s;
  auto count = static_cast<int64_t>(p->program->block(block).ops.size());
  if (index < 0 || index > count || (index == count && !allow_end)) {
    return Fail(Code::kOutOfRange, std::string(fn) + ": op index " + std::to_string(index) +
                                       " is out of range (block " + std::to_string(block) +
                                       " of program '" + p->name + "' has " +
                                       std::to_string(count) + " ops)");
  }
  return nullptr;
}

// Called by every editing slot once its arguments are copied: what reads returned is now stale.
void Edited(FleetProgram* p) { p->scratch.clear(); }

bool ValidVarName(const char* s) { return s != nullptr && *s != '\0'; }

// Reads a caller's FleetSlot into (name, vars).
Status ReadSlot(const FleetSlot* slot, std::string_view what, std::string& name,
                std::vector<std::string>& vars) {
  if (slot == nullptr) return InvalidArgument(std::string(what) + " is NULL");
  if (slot->struct_size < FLEET_STRUCT_SIZE(FleetSlot, vars)) {
    return InvalidArgument(std::string(what) + ": struct_size " +
                           std::to_string(slot->struct_size) + " is smaller than FleetSlot 1.0");
  }
  if (!ValidVarName(slot->name)) return InvalidArgument(std::string(what) + ": name is empty");
  name = slot->name;
  if (slot->count > 0 && slot->vars == nullptr) {
    return InvalidArgument(std::string(what) + " '" + name + "': vars is NULL but count is " +
                           std::to_string(slot->count));
  }
  vars.clear();
  for (size_t i = 0; i < slot->count; ++i) {
    if (!ValidVarName(slot->vars[i])) {
      return InvalidArgument(std::string(what) + " '" + name + "': var " + std::to_string(i) +
                             " is NULL or empty");
    }
    vars.emplace_back(slot->vars[i]);
  }
  return OkStatus();
}

Status ReadSlots(size_t n, const FleetSlot* const* slots, std::string_view what,
                 ir::SlotMap& out) {
  if (n > 0 && slots == nullptr) {
    return InvalidArgument(std::string(what) + " is NULL but its count is " + std::to_string(n));
  }
  for (size_t i = 0; i < n; ++i) {
    std::string name;
    std::vector<std::string> vars;
    FLEET_RETURN_IF_ERROR(ReadSlot(slots[i], std::string(what) + "[" + std::to_string(i) + "]",
                                   name, vars));
    if (out.count(name) > 0) {
      return InvalidArgument(std::string(what) + ": slot '" + name + "' is given twice");
    }
    out.emplace(std::move(name), std::move(vars));
  }
  return OkStatus();
}

// Reads a named attribute from a plugin; `what` prefixes errors.
Status ReadNamedAttr(const FleetAttr* attr, std::string_view what, std::string& name,
                     ir::Attribute& value) {
  if (attr == nullptr) return InvalidArgument(std::string(what) + " is NULL");
  if (attr->struct_size < FLEET_STRUCT_SIZE(FleetAttr, strings)) {
    return InvalidArgument(std::string(what) + ": struct_size " +
                           std::to_string(attr->struct_size) + " is smaller than FleetAttr 1.0");
  }
  if (!ValidVarName(attr->name)) return InvalidArgument(std::string(what) + ": name is empty");
  name = attr->name;
  FLEET_ASSIGN_OR_RETURN(value, FromFleetAttr(*attr, std::string(what) + " '" + name + "'"));
  return OkStatus();
}

Status CheckBlockRef(const ir::Attribute& value, const ir::Program& program,
                     std::string_view what) {
  if (const auto* ref = std::get_if<ir::BlockRef>(&value)) {
    if (ref->index >= program.num_blocks()) {
      return OutOfRange(std::string(what) + " refers to block " + std::to_string(ref->index) +
                        ", but the program has " + std::to_string(program.num_blocks()) +
                        " blocks");
    }
  }
  return OkStatus();
}

// ---- programs ----

size_t ProgramCount(FleetProgramSet* set) { return ValidSet(set) ? set->programs->size() : 0; }

const char* ProgramName(FleetProgramSet* set, size_t index) {
  if (!ValidSet(set) || index >= set->programs->size()) return nullptr;
  auto it = set->programs->begin();
  std::advance(it, static_cast<std::ptrdiff_t>(index));
  return it->first.c_str();  // map keys never move
}

FleetStatus* ProgramGet(FleetProgramSet* set, const char* name, FleetProgram** out) {
  if (!ValidSet(set)) return BadArg("program_get: program set handle is NULL or invalid");
  if (name == nullptr || out == nullptr) return BadArg("program_get: name or out is NULL");
  auto it = set->programs->find(name);
  if (it == set->programs->end()) {
    std::vector<std::string> names;
    for (const auto& [n, p] : *set->programs) names.push_back("'" + n + "'");
    return Fail(Code::kNotFound, "program_get: no program '" + std::string(name) +
                                     "' (the set has " +
                                     (names.empty() ? "none" : JoinWords(names)) + ")");
  }
  *out = HandleFor(set, it->first, &it->second);
  return nullptr;
}

FleetStatus* ProgramAdd(FleetProgramSet* set, const char* name, FleetProgram** out) {
  if (!ValidSet(set)) return BadArg("program_add: program set handle is NULL or invalid");
  if (!ValidVarName(name) || out == nullptr) {
    return BadArg("program_add: name is NULL or empty, or out is NULL");
  }
  auto [it, inserted] = set->programs->emplace(name, ir::Program());
  if (!inserted) {
    return Fail(Code::kAlreadyExists, "program_add: program '" + std::string(name) +
                                          "' already exists");
  }
  *out = HandleFor(set, it->first, &it->second);
  return nullptr;
}

// ---- blocks ----

int32_t BlockCount(FleetProgram* p) { return ValidProgram(p) ? p->program->num_blocks() : 0; }

FleetStatus* BlockAdd(FleetProgram* p, int32_t parent, int32_t* out) {
  if (FleetStatus* s = CheckBlock(p, parent, "block_add (parent)")) return s;
  if (out == nullptr) return BadArg("block_add: out is NULL");
  Edited(p);
  *out = p->program->AddBlock(parent);
  return nullptr;
}

// ---- ops ----

int64_t OpCount(FleetProgram* p, int32_t block) {
  if (!ValidProgram(p) || block < 0 || block >= p->program->num_blocks()) return 0;
  return static_cast<int64_t>(p->program->block(block).ops.size());
}

void FillSlots(const ir::SlotMap& slots, OpScratch& s, std::vector<FleetSlot>& structs,
               std::vector<const FleetSlot*>& ptrs) {
  structs.resize(slots.size());
  size_t i = 0;
  for (const auto& [name, vars] : slots) {
    auto& names = s.slot_vars.emplace_back();
    for (const auto& v : vars) names.push_back(v.c_str());
    FleetSlot& fs = structs[i++];
    fs = FleetSlot{};
    fs.struct_size = FLEET_STRUCT_SIZE(FleetSlot, vars);
    fs.name = name.c_str();
    fs.count = names.size();
    fs.vars = names.data();
  }
  for (const FleetSlot& fs : structs) ptrs.push_back(&fs);
}

FleetStatus* OpGet(FleetProgram* p, int32_t block, int64_t index, FleetOpDesc* out) {
  if (FleetStatus* s = CheckOpIndex(p, block, index, "op_get")) return s;
  if (out == nullptr) return BadArg("op_get: out is NULL");
  if (out->struct_size < FLEET_STRUCT_SIZE(FleetOpDesc, attrs)) {
    return BadArg("op_get: out->struct_size " + std::to_string(out->struct_size) +
                  " is smaller than FleetOpDesc 1.0 (set it before the call)");
  }
  const ir::Op& op = p->program->block(block).ops[static_cast<size_t>(index)];
  OpScratch& s = p->scratch.emplace_back();
  // Inner vectors keep their buffers when the outer one grows, so reserving is only needed
  // for the vectors whose elements are pointed to.
  s.slot_vars.reserve(op.inputs.size() + op.outputs.size());
  FillSlots(op.inputs, s, s.in_slots, s.in_ptrs);
  FillSlots(op.outputs, s, s.out_slots, s.out_ptrs);
  s.ints.resize(op.attrs.size());
  s.floats.resize(op.attrs.size());
  s.strings.resize(op.attrs.size());
  s.attrs.resize(op.attrs.size());
  size_t i = 0;
  for (const auto& [name, value] : op.attrs) {
    ToFleetAttr(name.c_str(), value, s.ints[i], s.floats[i], s.strings[i], s.attrs[i]);
    ++i;
  }
  for (const FleetAttr& a : s.attrs) s.attr_ptrs.push_back(&a);

  FleetOpDesc desc{};
  desc.struct_size = FLEET_STRUCT_SIZE(FleetOpDesc, attrs);
  desc.type = op.type.c_str();
  desc.num_inputs = s.in_ptrs.size();
  desc.inputs = s.in_ptrs.data();
  desc.num_outputs = s.out_ptrs.size();
  desc.outputs = s.out_ptrs.data();
  desc.num_attrs = s.attr_ptrs.size();
  desc.attrs = s.attr_ptrs.data();
  // Fill what the caller's struct has room for; keep its struct_size.
  size_t size = std::min(out->struct_size, sizeof(FleetOpDesc));
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t),
              reinterpret_cast<const char*>(&desc) + sizeof(size_t), size - sizeof(size_t));
  return nullptr;
}

Status ReadOp(const FleetOpDesc* desc, const ir::Program& program, ir::Op& op) {
  if (desc == nullptr) return InvalidArgument("op is NULL");
  if (desc->struct_size < FLEET_STRUCT_SIZE(FleetOpDesc, attrs)) {
    return InvalidArgument("op struct_size " + std::to_string(desc->struct_size) +
                           " is smaller than FleetOpDesc 1.0");
  }
  if (!ValidVarName(desc->type)) return InvalidArgument("op type is NULL or empty");
  op.type = desc->type;
  FLEET_RETURN_IF_ERROR(ReadSlots(desc->num_inputs, desc->inputs, "inputs", op.inputs));
  FLEET_RETURN_IF_ERROR(ReadSlots(desc->num_outputs, desc->outputs, "outputs", op.outputs));
  if (desc->num_attrs > 0 && desc->attrs == nullptr) {
    return InvalidArgument("attrs is NULL but num_attrs is " + std::to_string(desc->num_attrs));
  }
  for (size_t i = 0; i < desc->num_attrs; ++i) {
    std::string name;
    ir::Attribute value;
    FLEET_RETURN_IF_ERROR(
        ReadNamedAttr(desc->attrs[i], "attrs[" + std::to_string(i) + "]", name, value));
    FLEET_RETURN_IF_ERROR(CheckBlockRef(value, program, "attribute '" + name + "'"));
    if (!op.attrs.emplace(name, std::move(value)).second) {
      return InvalidArgument("attribute '" + name + "' is given twice");
    }
  }
  return OkStatus();
}

FleetStatus* OpInsert(FleetProgram* p, int32_t block, int64_t index, const FleetOpDesc* desc) {
  if (FleetStatus* s = CheckOpIndex(p, block, index, "op_insert", /*allow_end=*/true)) return s;
  ir::Op op;
  Status read = ReadOp(desc, *p->program, op);
  if (!read.ok()) return MakeFleetStatus(read.WithContext("op_insert"));
  Edited(p);
  auto& ops = p->program->block(block).ops;
  ops.insert(ops.begin() + index, std::move(op));
  return nullptr;
}

FleetStatus* OpRemove(FleetProgram* p, int32_t block, int64_t index) {
  if (FleetStatus* s = CheckOpIndex(p, block, index, "op_remove")) return s;
  Edited(p);
  auto& ops = p->program->block(block).ops;
  ops.erase(ops.begin() + index);
  return nullptr;
}

FleetStatus* OpSetAttr(FleetProgram* p, int32_t block, int64_t index, const FleetAttr* attr) {
  if (FleetStatus* s = CheckOpIndex(p, block, index, "op_set_attr")) return s;
  std::string name;
  ir::Attribute value;
  Status read = ReadNamedAttr(attr, "attr", name, value);
  if (read.ok()) read = CheckBlockRef(value, *p->program, "attribute '" + name + "'");
  if (!read.ok()) return MakeFleetStatus(read.WithContext("op_set_attr"));
  Edited(p);
  p->program->block(block).ops[static_cast<size_t>(index)].attrs[name] = std::move(value);
  return nullptr;
}

FleetStatus* OpSetSlot(FleetProgram* p, int32_t block, int64_t index, int32_t is_output,
                       const FleetSlot* slot) {
  if (FleetStatus* s = CheckOpIndex(p, block, index, "op_set_slot")) return s;
  if (is_output != 0 && is_output != 1) {
    return BadArg("op_set_slot: is_output must be 0 or 1, got " + std::to_string(is_output));
  }
  std::string name;
  std::vector<std::string> vars;
  Status read = ReadSlot(slot, "slot", name, vars);
  if (!read.ok()) return MakeFleetStatus(read.WithContext("op_set_slot"));
  Edited(p);
  ir::Op& op = p->program->block(block).ops[static_cast<size_t>(index)];
  (is_output ? op.outputs : op.inputs)[name] = std::move(vars);
  return nullptr;
}

// ---- vars ----

size_t VarCount(FleetProgram* p, int32_t block) {
  if (!ValidProgram(p) || block < 0 || block >= p->program->num_blocks()) return 0;
  return p->program->block(block).vars.size();
}

FleetStatus* FillVar(const ir::Var& v, FleetVarDesc* out, const char* fn) {
  if (out == nullptr) return BadArg(std::string(fn) + ": out is NULL");
  if (out->struct_size < FLEET_STRUCT_SIZE(FleetVarDesc, stop_gradient)) {
    return BadArg(std::string(fn) + ": out->struct_size " + std::to_string(out->struct_size) +
                  " is smaller than FleetVarDesc 1.0 (set it before the call)");
  }
  FleetVarDesc desc{};
  desc.struct_size = FLEET_STRUCT_SIZE(FleetVarDesc, stop_gradient);
  desc.name = v.name.c_str();
  desc.dtype = static_cast<int32_t>(v.dtype);
  desc.ndim = static_cast<int32_t>(v.shape.size());
  desc.dims = v.shape.data();
  desc.persistable = v.persistable ? 1 : 0;
  desc.stop_gradient = v.stop_gradient ? 1 : 0;
  size_t size = std::min(out->struct_size, sizeof(FleetVarDesc));
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t),
              reinterpret_cast<const char*>(&desc) + sizeof(size_t), size - sizeof(size_t));
  return nullptr;
}

FleetStatus* VarAt(FleetProgram* p, int32_t block, size_t index, FleetVarDesc* out) {
  if (FleetStatus* s = CheckBlock(p, block, "var_at")) return s;
  const auto& vars = p->program->block(block).vars;
  if (index >= vars.size()) {
    return Fail(Code::kOutOfRange, "var_at: index " + std::to_string(index) +
                                       " is out of range (block " + std::to_string(block) +
                                       " has " + std::to_string(vars.size()) + " vars)");
  }
  auto it = vars.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(index));
  return FillVar(it->second, out, "var_at");
}

FleetStatus* VarGet(FleetProgram* p, int32_t block, const char* name, FleetVarDesc* out) {
  if (FleetStatus* s = CheckBlock(p, block, "var_get")) return s;
  if (name == nullptr) return BadArg("var_get: name is NULL");
  const ir::Var* v = p->program->block(block).FindVar(name);
  if (v == nullptr) {
    return Fail(Code::kNotFound, "var_get: no var " + Quote(name) + " in block " +
                                     std::to_string(block) + " of program '" + p->name + "'");
  }
  return FillVar(*v, out, "var_get");
}

FleetStatus* VarAdd(FleetProgram* p, int32_t block, const FleetVarDesc* desc) {
  if (FleetStatus* s = CheckBlock(p, block, "var_add")) return s;
  if (desc == nullptr) return BadArg("var_add: var is NULL");
  if (desc->struct_size < FLEET_STRUCT_SIZE(FleetVarDesc, stop_gradient)) {
    return BadArg("var_add: struct_size " + std::to_string(desc->struct_size) +
                  " is smaller than FleetVarDesc 1.0");
  }
  if (!ValidVarName(desc->name)) return BadArg("var_add: name is NULL or empty");
  std::string name = desc->name;
  if (Status bad = ir::CheckVarName(name); !bad.ok()) return BadArg("var_add: " + bad.message());
  std::string what = "var_add '" + name + "': ";
  if (desc->dtype <= FLEET_DTYPE_INVALID || desc->dtype > FLEET_DTYPE_FLOAT64) {
    return BadArg(what + "unknown dtype " + std::to_string(desc->dtype));
  }
  if (desc->ndim < 0 || (desc->ndim > 0 && desc->dims == nullptr)) {
    return BadArg(what + "ndim is " + std::to_string(desc->ndim) + " and dims is " +
                  (desc->dims == nullptr ? "NULL" : "set"));
  }
  if ((desc->persistable != 0 && desc->persistable != 1) ||
      (desc->stop_gradient != 0 && desc->stop_gradient != 1)) {
    return BadArg(what + "persistable and stop_gradient must be 0 or 1");
  }
  ir::Var var;
  var.name = name;
  var.dtype = static_cast<ir::DataType>(desc->dtype);
  for (int32_t i = 0; i < desc->ndim; ++i) {
    if (desc->dims[i] < -1) {
      return BadArg(what + "dim " + std::to_string(i) + " is " + std::to_string(desc->dims[i]) +
                    " (use -1 for unknown)");
    }
    var.shape.push_back(desc->dims[i]);
  }
  var.persistable = desc->persistable == 1;
  var.stop_gradient = desc->stop_gradient == 1;
  ir::Block& b = p->program->block(block);
  if (b.FindVar(name) != nullptr) {
    return Fail(Code::kAlreadyExists, what + "block " + std::to_string(block) + " of program '" +
                                          p->name + "' already has it");
  }
  Edited(p);
  b.vars.emplace(name, std::move(var));
  return nullptr;
}

FleetStatus* VarRemove(FleetProgram* p, int32_t block, const char* name) {
  if (FleetStatus* s = CheckBlock(p, block, "var_remove")) return s;
  if (name == nullptr) return BadArg("var_remove: name is NULL");
  ir::Program& program = *p->program;
  const ir::Var* var = program.block(block).FindVar(name);
  if (var == nullptr) {
    return Fail(Code::kNotFound, "var_remove: no var " + Quote(name) + " in block " +
                                     std::to_string(block) + " of program '" + p->name + "'");
  }
  // Any op whose name lookup resolves to this declaration still uses it.
  for (const ir::Block& b : program.blocks()) {
    if (program.FindVarRecursive(b.index, name) != var) continue;
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const ir::Op& op = b.ops[i];
      for (const auto& vars : {op.InputVars(), op.OutputVars()}) {
        for (const auto& v : vars) {
          if (v == name) {
            return Fail(Code::kFailedPrecondition,
                        "var_remove: var '" + std::string(name) + "' is still used by op " +
                            std::to_string(i) + " (" + op.type + ") of block " +
                            std::to_string(b.index));
          }
        }
      }
    }
  }
  Edited(p);
  program.block(block).vars.erase(std::string(name));
  return nullptr;
}

}  // namespace

ProgramSetBinding::ProgramSetBinding(std::map<std::string, ir::Program>& programs)
    : set_(std::make_unique<FleetProgramSet>()) {
  set_->programs = &programs;
}

std::map<std::string, ir::Program>* ProgramSetBinding::Programs(FleetProgramSet* handle) {
  if (handle == nullptr || handle->magic != kSetMagic) return nullptr;
  return handle->programs;
}

ProgramSetBinding::~ProgramSetBinding() = default;

const FleetProgramApi* ProgramApi() {
  static const FleetProgramApi api = {
      FLEET_STRUCT_SIZE(FleetProgramApi, var_remove),
      ProgramCount, ProgramName, ProgramGet, ProgramAdd, BlockCount, BlockAdd,
      OpCount, OpGet, OpInsert, OpRemove, OpSetAttr, OpSetSlot,
      VarCount, VarAt, VarGet, VarAdd, VarRemove};
  return &api;
}

StatusOr<ir::Attribute> FromFleetAttr(const FleetAttr& a, std::string_view what) {
  std::string w(what);
  auto need_array = [&](const void* ptr) -> Status {
    if (a.count > 0 && ptr == nullptr) {
      return InvalidArgument(w + ": array is NULL but count is " + std::to_string(a.count));
    }
    return OkStatus();
  };
  switch (a.type) {
    case FLEET_ATTR_INT:
      if (a.i < std::numeric_limits<int32_t>::min() || a.i > std::numeric_limits<int32_t>::max()) {
        return InvalidArgument(w + ": int value " + std::to_string(a.i) +
                               " does not fit int32 (use FLEET_ATTR_INT64)");
      }
      return ir::Attribute(static_cast<int32_t>(a.i));
    case FLEET_ATTR_INT64: return ir::Attribute(a.i);
    case FLEET_ATTR_FLOAT: return ir::Attribute(static_cast<float>(a.f));
    case FLEET_ATTR_DOUBLE: return ir::Attribute(a.f);
    case FLEET_ATTR_BOOL:
      if (a.i != 0 && a.i != 1) {
        return InvalidArgument(w + ": bool value must be 0 or 1, got " + std::to_string(a.i));
      }
      return ir::Attribute(a.i == 1);
    case FLEET_ATTR_STRING:
      if (a.s == nullptr && a.s_len > 0) {
        return InvalidArgument(w + ": string is NULL but s_len is " + std::to_string(a.s_len));
      }
      return ir::Attribute(a.s == nullptr ? std::string() : std::string(a.s, a.s_len));
    case FLEET_ATTR_INTS: {
      FLEET_RETURN_IF_ERROR(need_array(a.ints));
      std::vector<int32_t> v;
      for (size_t i = 0; i < a.count; ++i) {
        if (a.ints[i] < std::numeric_limits<int32_t>::min() ||
            a.ints[i] > std::numeric_limits<int32_t>::max()) {
          return InvalidArgument(w + ": element " + std::to_string(i) + " (" +
                                 std::to_string(a.ints[i]) + ") does not fit int32");
        }
        v.push_back(static_cast<int32_t>(a.ints[i]));
      }
      return ir::Attribute(std::move(v));
    }
    case FLEET_ATTR_INT64S:
      FLEET_RETURN_IF_ERROR(need_array(a.ints));
      return ir::Attribute(std::vector<int64_t>(a.ints, a.ints + a.count));
    case FLEET_ATTR_FLOATS: {
      FLEET_RETURN_IF_ERROR(need_array(a.floats));
      std::vector<float> v;
      for (size_t i = 0; i < a.count; ++i) v.push_back(static_cast<float>(a.floats[i]));
      return ir::Attribute(std::move(v));
    }
    case FLEET_ATTR_DOUBLES:
      FLEET_RETURN_IF_ERROR(need_array(a.floats));
      return ir::Attribute(std::vector<double>(a.floats, a.floats + a.count));
    case FLEET_ATTR_BOOLS: {
      FLEET_RETURN_IF_ERROR(need_array(a.ints));
      std::vector<bool> v;
      for (size_t i = 0; i < a.count; ++i) {
        if (a.ints[i] != 0 && a.ints[i] != 1) {
          return InvalidArgument(w + ": element " + std::to_string(i) + " must be 0 or 1, got " +
                                 std::to_string(a.ints[i]));
        }
        v.push_back(a.ints[i] == 1);
      }
      return ir::Attribute(std::move(v));
    }
    case FLEET_ATTR_STRINGS: {
      FLEET_RETURN_IF_ERROR(need_array(a.strings));
      std::vector<std::string> v;
      for (size_t i = 0; i < a.count; ++i) {
        if (a.strings[i] == nullptr) {
          return InvalidArgument(w + ": string " + std::to_string(i) + " is NULL");
        }
        v.emplace_back(a.strings[i]);
      }
      return ir::Attribute(std::move(v));
    }
    case FLEET_ATTR_BLOCK:
      if (a.i < 0 || a.i > std::numeric_limits<int32_t>::max()) {
        return InvalidArgument(w + ": block index " + std::to_string(a.i) + " is negative");
      }
      return ir::Attribute(ir::BlockRef{static_cast<int32_t>(a.i)});
    default:
      return InvalidArgument(w + ": unknown attribute type " + std::to_string(a.type));
  }
}

}  // namespace fleet
