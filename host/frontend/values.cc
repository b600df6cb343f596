#include "frontend/values.h"

#include <algorithm>
#include <cmath>

#include "support/text.h"

namespace fleet::frontend {

void SetDepth(Value& v) {
  int deepest = 0;
  for (const Value& item : v.items) deepest = std::max(deepest, item.depth);
  v.depth = deepest + 1;
}

Value IntValue(int64_t i, Pos pos) {
  Value v;
  v.kind = Value::Kind::kInt;
  v.int_value = i;
  v.pos = pos;
  return v;
}

Value FloatValue(double d, Pos pos) {
  Value v;
  v.kind = Value::Kind::kFloat;
  v.float_value = d;
  v.pos = pos;
  return v;
}

Value BoolValue(bool b, Pos pos) {
  Value v;
  v.kind = Value::Kind::kBool;
  v.bool_value = b;
  v.pos = pos;
  return v;
}

Value StringValue(std::string s, Pos pos) {
  Value v;
  v.kind = Value::Kind::kString;
  v.text = std::move(s);
  v.pos = pos;
  return v;
}

Value ListValue(std::vector<Value> items, Pos pos, bool tuple) {
  Value v;
  v.kind = Value::Kind::kList;
  v.items = std::move(items);
  v.tuple = tuple;
  v.pos = pos;
  SetDepth(v);
  return v;
}

bool ValuesEqual(const Value& a, const Value& b) {
  auto numeric = [](const Value& v) { return v.is_number() || v.kind == Value::Kind::kBool; };
  auto as_int = [](const Value& v) {
    return v.kind == Value::Kind::kBool ? int64_t{v.bool_value} : v.int_value;
  };
  if (numeric(a) && numeric(b)) {
    if (a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat) {
      return as_int(a) == as_int(b);
    }
    auto as_double = [&](const Value& v) {
      return v.kind == Value::Kind::kFloat ? v.float_value : static_cast<double>(as_int(v));
    };
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kNone: return true;
    case Value::Kind::kString:
    case Value::Kind::kVar:
    case Value::Kind::kModule: return a.text == b.text;
    case Value::Kind::kList:
      if (a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (!ValuesEqual(a.items[i], b.items[i])) return false;
      }
      return true;
    case Value::Kind::kDict:
      if (a.keys != b.keys) return false;
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (!ValuesEqual(a.items[i], b.items[i])) return false;
      }
      return true;
    case Value::Kind::kObject: return a.object == b.object;
    case Value::Kind::kNamespace: return a.ns == b.ns;
    case Value::Kind::kCallable: return a.callable == b.callable;
    default: return false;
  }
}

std::string DescribeValue(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.bool_value ? "True" : "False";
    case Value::Kind::kInt: return "an int (" + std::to_string(v.int_value) + ")";
    case Value::Kind::kFloat: return "a float";
    case Value::Kind::kString: return "a string '" + v.text + "'";
    case Value::Kind::kList: return v.tuple ? "a tuple" : "a list";
    case Value::Kind::kDict: return "a dict";
    case Value::Kind::kVar: return "the variable '" + v.text + "'";
    case Value::Kind::kObject: return v.object->kind + "(...)";
    case Value::Kind::kNamespace: return "a " + v.ns->kind;
    case Value::Kind::kCallable: return "the function '" + v.text + "'";
    case Value::Kind::kModule: return "the module " + v.text;
    case Value::Kind::kSlice: return "a slice";
    case Value::Kind::kEllipsis: return "...";
  }
  return "a value";
}

StatusOr<Args> Args::Bind(std::string fn, Pos call_pos, std::string_view file,
                          const std::vector<Param>& params, std::vector<Arg> positional,
                          std::vector<std::pair<std::string, Arg>> keywords) {
  Args a(std::move(fn), call_pos, file);
  if (positional.size() > params.size()) {
    std::vector<std::string> names;
    for (const auto& p : params) names.push_back(p.name);
    std::string msg = a.fn_ + " takes at most " + std::to_string(params.size()) +
                      " positional argument" + (params.size() == 1 ? "" : "s");
    if (!names.empty()) msg += " (" + JoinWords(names, ", ") + ")";
    msg += ", got " + std::to_string(positional.size());
    return frontend::ErrorAt(file, positional[params.size()].pos, msg);
  }
  for (size_t i = 0; i < positional.size(); ++i) {
    a.args_.emplace(params[i].name, std::move(positional[i]));
  }
  for (auto& [name, arg] : keywords) {
    bool known = false;
    for (const auto& p : params) known = known || p.name == name;
    if (!known) {
      std::vector<std::string> names;
      for (const auto& p : params) names.push_back(p.name);
      std::string msg = a.fn_ + ": unknown keyword '" + name + "'";
      std::string guess = ClosestMatch(name, names);
      if (!guess.empty()) {
        msg += " (did you mean '" + guess + "'?)";
      } else if (!names.empty()) {
        msg += "; it takes " + JoinWords(names);
      }
      return frontend::ErrorAt(file, arg.pos, msg);
    }
    if (a.args_.count(name)) {
      return frontend::ErrorAt(file, arg.pos,
                               a.fn_ + ": argument '" + name + "' given twice (by position and "
                                       "by keyword)");
    }
    a.args_.emplace(name, std::move(arg));
  }
  for (const auto& p : params) {
    if (p.required && !a.args_.count(p.name)) {
      return frontend::ErrorAt(file, call_pos,
                               a.fn_ + ": missing required argument '" + p.name + "'");
    }
  }
  return a;
}

const Arg* Args::Get(std::string_view name) const {
  auto it = args_.find(name);
  if (it == args_.end() || it->second.value.is_none()) return nullptr;
  return &it->second;
}

Pos Args::PosOf(std::string_view name) const {
  auto it = args_.find(name);
  return it == args_.end() ? call_pos_ : it->second.value.pos;
}

Status Args::ErrorAt(std::string_view name, std::string_view message) const {
  return frontend::ErrorAt(file_, PosOf(name), fn_ + ": " + std::string(message));
}

Status Args::Error(std::string_view message) const {
  return frontend::ErrorAt(file_, call_pos_, fn_ + ": " + std::string(message));
}

Status Args::AtCall(const Status& status) const {
  if (status.ok()) return status;
  const std::string& m = status.message();
  if (m.rfind(std::string(file_) + ":", 0) == 0) return status;  // already placed
  if (m.rfind(fn_ + ":", 0) == 0) return frontend::ErrorAt(file_, call_pos_, m);
  return Error(m);
}

Status Args::KindError(std::string_view name, std::string_view expected,
                       const Value& got) const {
  return ErrorAt(name, "argument '" + std::string(name) + "' must be " + std::string(expected) +
                           ", got " + DescribeValue(got));
}

StatusOr<std::string> Args::Var(std::string_view name) const {
  const Arg* a = Get(name);
  if (a == nullptr) return Error("missing required argument '" + std::string(name) + "'");
  if (a->value.kind != Value::Kind::kVar) return KindError(name, "a variable", a->value);
  return a->value.text;
}

StatusOr<std::vector<std::string>> Args::Vars(std::string_view name) const {
  const Arg* a = Get(name);
  if (a == nullptr) return Error("missing required argument '" + std::string(name) + "'");
  if (a->value.kind == Value::Kind::kVar) return std::vector<std::string>{a->value.text};
  if (a->value.kind != Value::Kind::kList || a->value.items.empty()) {
    return KindError(name, "a variable or a non-empty list of variables", a->value);
  }
  std::vector<std::string> out;
  for (const Value& v : a->value.items) {
    if (v.kind != Value::Kind::kVar) {
      return frontend::ErrorAt(file_, v.pos, fn_ + ": items of '" + std::string(name) +
                                                 "' must be variables, got " +
                                                 DescribeValue(v));
    }
    out.push_back(v.text);
  }
  return out;
}

StatusOr<int64_t> Args::Int(std::string_view name, int64_t def) const {
  FLEET_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptInt(name));
  return v.value_or(def);
}

StatusOr<std::optional<int64_t>> Args::OptInt(std::string_view name) const {
  const Arg* a = Get(name);
  if (a == nullptr) return std::optional<int64_t>();
  if (a->value.kind != Value::Kind::kInt) return KindError(name, "an int", a->value);
  return std::optional<int64_t>(a->value.int_value);
}

StatusOr<double> Args::Float(std::string_view name, double def) const {
  FLEET_ASSIGN_OR_RETURN(std::optional<double> v, OptFloat(name));
  return v.value_or(def);
}

StatusOr<std::optional<double>> Args::OptFloat(std::string_view name) const {
  const Arg* a = Get(name);
  if (a == nullptr) return std::optional<double>();
  if (!a->value.is_number()) return KindError(name, "a number", a->value);
  return std::optional<double>(a->value.number());
}

StatusOr<bool> Args::Bool(std::string_view name, bool def) const {
  const Arg* a = Get(name);
  if (a == nullptr) return def;
  if (a->value.kind != Value::Kind::kBool) return KindError(name, "True or False", a->value);
  return a->value.bool_value;
}

StatusOr<std::string> Args::String(std::string_view name, std::string def) const {
  const Arg* a = Get(name);
  if (a == nullptr) return def;
  if (a->value.kind != Value::Kind::kString) return KindError(name, "a string", a->value);
  return a->value.text;
}

StatusOr<std::vector<int64_t>> Args::Ints(std::string_view name, std::vector<int64_t> def,
                                          size_t broadcast) const {
  const Arg* a = Get(name);
  if (a == nullptr) return def;
  if (a->value.kind == Value::Kind::kInt && broadcast > 0) {
    return std::vector<int64_t>(broadcast, a->value.int_value);
  }
  if (a->value.kind != Value::Kind::kList) {
    return KindError(name, broadcast > 0 ? "an int or a list of ints" : "a list of ints",
                     a->value);
  }
  std::vector<int64_t> out;
  for (const Value& v : a->value.items) {
    if (v.kind != Value::Kind::kInt) {
      return frontend::ErrorAt(file_, v.pos, fn_ + ": items of '" + std::string(name) +
                                                 "' must be ints, got " + DescribeValue(v));
    }
    out.push_back(v.int_value);
  }
  return out;
}

StatusOr<std::vector<int64_t>> Args::Shape(std::string_view name) const {
  const Arg* a = Get(name);
  if (a == nullptr || a->value.kind != Value::Kind::kList) return Ints(name);
  std::vector<int64_t> out;
  for (const Value& v : a->value.items) {
    if (v.is_none()) {
      out.push_back(-1);
    } else if (v.kind == Value::Kind::kInt) {
      out.push_back(v.int_value);
    } else {
      return frontend::ErrorAt(file_, v.pos, fn_ + ": dims of '" + std::string(name) +
                                                 "' must be ints or None, got " +
                                                 DescribeValue(v));
    }
  }
  return out;
}

StatusOr<std::vector<double>> Args::Floats(std::string_view name) const {
  const Arg* a = Get(name);
  if (a == nullptr) return std::vector<double>{};
  if (a->value.kind != Value::Kind::kList) return KindError(name, "a list of numbers", a->value);
  std::vector<double> out;
  for (const Value& v : a->value.items) {
    if (!v.is_number()) {
      return frontend::ErrorAt(file_, v.pos, fn_ + ": items of '" + std::string(name) +
                                                 "' must be numbers, got " + DescribeValue(v));
    }
    out.push_back(v.number());
  }
  return out;
}

}  // namespace fleet::frontend
