#include "ops/verifier.h"

#include <limits>
#include <map>

#include "ir/text.h"
#include "ops/shape_inference.h"
#include "support/text.h"

namespace fleet::ir {
namespace {

// Kinds of attributes; widths within a kind are interchangeable (see verifier.h).
enum class AttrKind { kInt, kReal, kBool, kString, kInts, kReals, kBools, kStrings, kBlock };

AttrKind KindOf(const Attribute& a) {
  switch (AttrTypeOf(a)) {
    case FLEET_ATTR_INT:
    case FLEET_ATTR_INT64: return AttrKind::kInt;
    case FLEET_ATTR_FLOAT:
    case FLEET_ATTR_DOUBLE: return AttrKind::kReal;
    case FLEET_ATTR_BOOL: return AttrKind::kBool;
    case FLEET_ATTR_STRING: return AttrKind::kString;
    case FLEET_ATTR_INTS:
    case FLEET_ATTR_INT64S: return AttrKind::kInts;
    case FLEET_ATTR_FLOATS:
    case FLEET_ATTR_DOUBLES: return AttrKind::kReals;
    case FLEET_ATTR_BOOLS: return AttrKind::kBools;
    case FLEET_ATTR_STRINGS: return AttrKind::kStrings;
    default: return AttrKind::kBlock;
  }
}

bool IsList(AttrKind k) {
  return k == AttrKind::kInts || k == AttrKind::kReals || k == AttrKind::kBools ||
         k == AttrKind::kStrings;
}

bool IsEmptyList(const Attribute& a) {
  return std::visit(
      [](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return false;
        } else if constexpr (requires { v.empty(); }) {
          return v.empty();
        } else {
          return false;
        }
      },
      a);
}

// Why `given` cannot stand for an attribute whose schema default is `expected`; "" if it can.
std::string AttrMismatch(const Attribute& given, const Attribute& expected) {
  AttrKind g = KindOf(given), e = KindOf(expected);
  std::string why = "expected " + std::string(AttrTypeName(AttrTypeOf(expected))) + ", got " +
                    std::string(AttrTypeName(AttrTypeOf(given))) + " " + PrintAttribute(given);
  if (g == e) {
    // An int64 value standing for an int32 attribute must fit.
    if (AttrTypeOf(expected) == FLEET_ATTR_INT && AttrTypeOf(given) == FLEET_ATTR_INT64) {
      int64_t v = std::get<int64_t>(given);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return why + " (does not fit an int32)";
      }
    }
    return "";
  }
  if (g == AttrKind::kInt && e == AttrKind::kReal) return "";
  if (g == AttrKind::kInts && e == AttrKind::kReals) return "";
  if (IsList(g) && IsList(e) && IsEmptyList(given)) return "";
  return why;
}

std::string Suggest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string m = ClosestMatch(word, candidates);
  return m.empty() ? "" : " (did you mean '" + m + "'?)";
}

class Verifier {
 public:
  Verifier(const Program& program, const ops::OpRegistry& registry)
      : program_(program), registry_(registry) {}

  std::vector<std::string> Run() {
    bool tree_ok = true;
    for (int32_t b = 0; b < program_.num_blocks(); ++b) tree_ok = CheckBlockHeader(b) && tree_ok;
    // Var lookups walk the parent chain, which is only safe (finite) when every parent is an
    // earlier block.
    if (!tree_ok) return std::move(errors_);
    for (int32_t b = 0; b < program_.num_blocks(); ++b) CheckBlockOps(b);
    return std::move(errors_);
  }

 private:
  // Index, parent and vars of block `b`; false when its parent would break var lookups.
  bool CheckBlockHeader(int32_t b) {
    const Block& block = program_.block(b);
    std::string where = "block " + std::to_string(b);
    bool tree_ok = true;
    if (block.index != b) {
      errors_.push_back(where + ": has index " + std::to_string(block.index));
    }
    if (b == 0 && block.parent != -1) {
      errors_.push_back(where + ": the global block has parent " + std::to_string(block.parent));
      tree_ok = false;
    } else if (b > 0 && (block.parent < 0 || block.parent >= b)) {
      errors_.push_back(where + ": parent " + std::to_string(block.parent) +
                        " is not an earlier block");
      tree_ok = false;
    }
    for (const auto& [name, var] : block.vars) {
      if (var.name != name) {
        errors_.push_back(where + ": var keyed '" + name + "' is named '" + var.name + "'");
      }
      if (var.param && !var.persistable) {
        errors_.push_back(where + ": param '" + name + "' is not persistable");
      }
      if (var.selected_rows && (var.param || var.lod_level != 0 || var.shape.empty())) {
        errors_.push_back(where + ": selected_rows var '" + name + "' must have a shape " +
                          "[height, ...] and be neither a parameter nor a sequence");
      }
      if (IsEmptyVar(name)) {
        errors_.push_back(where + ": declares '" + name + "', a reserved name: it marks an " +
                          "output entry that is not computed");
      }
    }
    return tree_ok;
  }

  void CheckBlockOps(int32_t b) {
    const Block& block = program_.block(b);
    // First writer of each var written in this block.
    std::map<std::string, size_t, std::less<>> first_writer;
    for (size_t i = 0; i < block.ops.size(); ++i) {
      for (const auto& name : block.ops[i].OutputVars()) first_writer.emplace(name, i);
    }
    for (size_t i = 0; i < block.ops.size(); ++i) CheckOp(b, i, first_writer);
  }

  void CheckOp(int32_t b, size_t i, const std::map<std::string, size_t, std::less<>>& writers) {
    const Op& op = program_.block(b).ops[i];
    std::string where = "block " + std::to_string(b) + ", op " + std::to_string(i) + " (" +
                        op.type + ")";
    size_t errors_before = errors_.size();
    const ops::OpSchema* schema = registry_.Find(op.type);
    if (schema == nullptr) {
      errors_.push_back(where + ": unknown op type '" + op.type + "'" +
                        Suggest(op.type, registry_.Types()));
    } else {
      CheckSlots(where, op.inputs, schema->inputs, "input");
      CheckSlots(where, op.outputs, schema->outputs, "output");
      CheckAttrs(where, op, *schema);
    }
    for (const auto& [slot, vars] : op.inputs) {
      for (const auto& name : vars) {
        if (IsEmptyVar(name)) {
          errors_.push_back(where + ": input " + slot + " reads '" + name +
                            "', the placeholder of an output entry that is not computed");
          continue;
        }
        const Var* v = program_.FindVarRecursive(b, name);
        if (v == nullptr) {
          errors_.push_back(where + ": input " + slot + " reads '" + name +
                            "', which is not declared");
          continue;
        }
        auto w = writers.find(name);
        if (!v->persistable && w != writers.end() && w->second >= i) {
          errors_.push_back(where + ": input " + slot + " reads '" + name +
                            "' before it is written (first by op " + std::to_string(w->second) +
                            " (" + program_.block(b).ops[w->second].type + "))");
        }
      }
    }
    for (const auto& [slot, vars] : op.outputs) {
      for (const auto& name : vars) {
        // A placeholder entry names no var (ir/program.h).
        if (!IsEmptyVar(name) && program_.FindVarRecursive(b, name) == nullptr) {
          errors_.push_back(where + ": output " + slot + " writes '" + name +
                            "', which is not declared");
        }
      }
    }
    if (schema != nullptr && errors_.size() == errors_before) CheckShapes(where, b, op);
  }

  void CheckSlots(const std::string& where, const SlotMap& slots,
                  const std::vector<ops::SlotSpec>& specs, std::string_view kind) {
    std::vector<std::string> names;
    for (const auto& s : specs) names.push_back(s.name);
    for (const auto& [slot, vars] : slots) {
      const ops::SlotSpec* spec = nullptr;
      for (const auto& s : specs) {
        if (s.name == slot) spec = &s;
      }
      if (spec == nullptr) {
        errors_.push_back(where + ": unknown " + std::string(kind) + " slot '" + slot + "'" +
                          Suggest(slot, names));
      } else if (!spec->duplicable && vars.size() > 1) {
        errors_.push_back(where + ": " + std::string(kind) + " slot " + slot + " holds " +
                          std::to_string(vars.size()) + " vars but takes one");
      }
    }
    for (const auto& s : specs) {
      if (s.optional) continue;
      auto it = slots.find(s.name);
      if (it == slots.end() || it->second.empty()) {
        errors_.push_back(where + ": required " + std::string(kind) + " slot " + s.name +
                          " is missing");
      }
    }
  }

  void CheckAttrs(const std::string& where, const Op& op, const ops::OpSchema& schema) {
    std::vector<std::string> names;
    for (const auto& a : schema.attrs) names.push_back(a.name);
    for (const auto& [name, value] : op.attrs) {
      const ops::AttrSpec* spec = schema.FindAttr(name);
      if (spec == nullptr) {
        errors_.push_back(where + ": unknown attribute '" + name + "'" + Suggest(name, names));
        continue;
      }
      std::string why = AttrMismatch(value, spec->default_value);
      if (!why.empty()) errors_.push_back(where + ": attribute " + name + ": " + why);
      if (const auto* ref = std::get_if<BlockRef>(&value)) {
        if (ref->index < 0 || ref->index >= program_.num_blocks()) {
          errors_.push_back(where + ": attribute " + name + " refers to block " +
                            std::to_string(ref->index) + ", but the program has " +
                            std::to_string(program_.num_blocks()));
        }
      }
    }
  }

  void CheckShapes(const std::string& where, int32_t b, const Op& op) {
    auto inferred = ops::InferOpShapes(registry_, program_, b, op);
    if (!inferred.ok()) {
      errors_.push_back(where + ": shape inference failed: " + inferred.status().message());
      return;
    }
    for (const auto& [slot, names] : op.outputs) {
      auto it = inferred->find(slot);
      if (it == inferred->end()) continue;
      for (size_t k = 0; k < names.size() && k < it->second.size(); ++k) {
        const ops::TensorInfo& info = it->second[k];
        if (info.dtype == DataType::kInvalid) continue;  // the shape function left it open
        const Var* v = program_.FindVarRecursive(b, names[k]);
        if (v == nullptr) continue;
        const std::vector<int64_t> shape = ops::DeclaredShape(info);
        if (v->dtype != info.dtype || !ShapesCompatible(v->shape, shape)) {
          errors_.push_back(where + ": output " + slot + " '" + names[k] + "' is declared " +
                            std::string(DataTypeName(v->dtype)) + ShapeText(v->shape) +
                            " but the op produces " + std::string(DataTypeName(info.dtype)) +
                            ShapeText(shape));
        } else if (v->selected_rows != info.selected_rows()) {
          errors_.push_back(where + ": output " + slot + " '" + names[k] + "' is declared " +
                            (v->selected_rows ? "selected_rows" : "dense") +
                            " but the op produces a " +
                            (info.selected_rows() ? "selected_rows" : "dense") + " tensor");
        }
      }
    }
  }

  const Program& program_;
  const ops::OpRegistry& registry_;
  std::vector<std::string> errors_;
};

}  // namespace

std::vector<std::string> VerifyProgramErrors(const Program& program,
                                             const ops::OpRegistry& registry) {
  return Verifier(program, registry).Run();
}

Status VerifyProgram(const Program& program, const ops::OpRegistry& registry) {
  std::vector<std::string> errors = VerifyProgramErrors(program, registry);
  if (errors.empty()) return OkStatus();
  if (errors.size() == 1) return InvalidArgument(errors[0]);
  std::string message = std::to_string(errors.size()) + " errors in the program:";
  for (const auto& e : errors) message += "\n  " + e;
  return InvalidArgument(message);
}

}  // namespace fleet::ir
