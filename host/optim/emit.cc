#include "optim/emit.h"

#include <cmath>

#include "support/text.h"

namespace fleet::optim::internal {

std::string UniqueName(const ir::Program& main, const ir::Program& startup,
                       const std::string& prefix) {
  for (int k = 0;; ++k) {
    std::string name = prefix + "_" + std::to_string(k);
    if (main.global().FindVar(name) == nullptr && startup.global().FindVar(name) == nullptr) {
      return name;
    }
  }
}

Status Declare(ir::Program& main, ir::Program* startup, const ir::Var& var) {
  FLEET_RETURN_IF_ERROR(main.global().AddVar(var).status());
  if (startup != nullptr) FLEET_RETURN_IF_ERROR(startup->global().AddVar(var).status());
  return OkStatus();
}

ir::Var MakeVar(std::string name, ir::DataType dtype, std::vector<int64_t> shape,
                bool persistable) {
  ir::Var v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.persistable = persistable;
  return v;
}

ir::Op FillConstant(const std::string& out, std::vector<int64_t> shape, double value,
                    ir::DataType dtype) {
  return MakeOp("fill_constant", {}, {{"Out", {out}}},
                {{"shape", std::move(shape)},
                 {"value", static_cast<float>(value)},
                 {"dtype", static_cast<int32_t>(dtype)}});
}

Status CheckNames(const std::map<std::string, ir::Attribute>& given,
                  const std::vector<std::string>& allowed, const std::string& what) {
  for (const auto& [name, value] : given) {
    bool known = false;
    for (const auto& a : allowed) known = known || a == name;
    if (known) continue;
    std::string msg = what + ": unknown option '" + name + "'";
    std::string guess = ClosestMatch(name, allowed);
    if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
    if (allowed.empty()) {
      msg += "; it takes no options";
    } else {
      msg += "; expected " + JoinWords(allowed, " or ");
    }
    return InvalidArgument(msg);
  }
  return OkStatus();
}

StatusOr<double> DoubleOption(const std::map<std::string, ir::Attribute>& options,
                              const std::string& name, double fallback, const std::string& what) {
  auto it = options.find(name);
  if (it == options.end()) return fallback;
  std::optional<double> v = ir::AttrAsDouble(it->second);
  if (!v.has_value() || std::holds_alternative<bool>(it->second)) {
    return InvalidArgument(what + ": option '" + name + "' must be a number, not " +
                           std::string(ir::AttrTypeName(ir::AttrTypeOf(it->second))));
  }
  if (!std::isfinite(*v)) {
    return InvalidArgument(what + ": option '" + name + "' must be finite");
  }
  return *v;
}

StatusOr<bool> BoolOption(const std::map<std::string, ir::Attribute>& options,
                          const std::string& name, bool fallback, const std::string& what) {
  auto it = options.find(name);
  if (it == options.end()) return fallback;
  const bool* b = std::get_if<bool>(&it->second);
  if (b == nullptr) {
    return InvalidArgument(what + ": option '" + name + "' must be a bool, not " +
                           std::string(ir::AttrTypeName(ir::AttrTypeOf(it->second))));
  }
  return *b;
}

}  // namespace fleet::optim::internal
