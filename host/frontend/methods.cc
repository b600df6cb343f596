// Attributes and methods: Paddle module paths (paddle.static.nn.fc), a variable's static facts
// (x.shape, x.dtype) and its paddle.* methods (x.astype, x.reshape, ...), an optimizer's
// minimize, the attributes a file sets on a DistributedStrategy, and the string, list and dict
// methods model code uses to build names and configurations.
#include "frontend/interpreter.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

Value Method(const Value& self, std::string name) {
  auto c = std::make_shared<Callable>();
  c->kind = Callable::Kind::kMethod;
  c->name = std::move(name);
  c->self = std::make_shared<const Value>(self);
  return CallableValue(std::move(c), self.pos);
}

}  // namespace

StatusOr<Value> Interpreter::Attribute(const Value& object, const std::string& name, Pos pos) {
  switch (object.kind) {
    case Value::Kind::kModule: {
      const std::string path = object.text + "." + name;
      if (const PaddleApi* api = FindPaddleApi(path)) return PaddleValue(*api, pos);
      if (IsPaddleModule(path)) {
        Value v;
        v.kind = Value::Kind::kModule;
        v.pos = pos;
        v.text = path;
        return v;
      }
      if (object.text == "numpy") {
        return ErrorAt(file_, pos, "numpy." + name + " is not available in a program file "
                                   "(numpy is accepted in imports only)");
      }
      std::vector<std::string> near = ClosestPaddleApis(path);
      std::string hint = near.empty() ? "" : " (closest: " + QuotedAlternatives(near) + ")";
      if (path == "paddle.static.nn.while_loop" || path == "paddle.static.nn.cond" ||
          path == "paddle.fluid.layers.while_loop" || path == "paddle.fluid.layers.cond" ||
          path == "paddle.fluid.layers.While" || path == "paddle.fluid.layers.Switch" ||
          path == "paddle.fluid.layers.IfElse") {
        return ErrorAt(file_, pos, path + ": graph control flow is out of scope; loops and "
                                   "conditions run at build time (for, if)");
      }
      return ErrorAt(file_, pos, path + " is not known to Fleet" + hint +
                                     "; docs/program.md lists the Paddle names Fleet maps");
    }
    case Value::Kind::kVar: {
      const ir::Var* var = state_.builder.FindVar(object.text);
      if (var == nullptr) {
        return ErrorAt(file_, pos, "variable '" + object.text + "' is not declared");
      }
      if (name == "shape") {
        std::vector<Value> dims;
        for (int64_t d : var->shape) dims.push_back(IntValue(d, pos));
        return ListValue(std::move(dims), pos);
      }
      if (name == "ndim") return IntValue(static_cast<int64_t>(var->shape.size()), pos);
      if (name == "name") return StringValue(var->name, pos);
      if (name == "dtype") return StringValue(std::string(ir::DataTypeName(var->dtype)), pos);
      if (name == "stop_gradient") return BoolValue(var->stop_gradient, pos);
      if (name == "astype" || FindPaddleApi("paddle." + name) != nullptr) {
        return Method(object, name);
      }
      return ErrorAt(file_, pos, "a variable has no attribute or method '" + name +
                                     "' (it has shape, dtype, name, stop_gradient, astype and "
                                     "the paddle.* functions as methods)");
    }
    case Value::Kind::kNamespace: {
      auto it = object.ns->attrs.find(name);
      if (it != object.ns->attrs.end()) return it->second;
      return ErrorAt(file_, pos, "the " + object.ns->kind + " has no attribute '" + name +
                                     "' set");
    }
    case Value::Kind::kObject:
      if (name == "minimize") return Method(object, name);
      break;
    case Value::Kind::kString:
      if (name == "format" || name == "join" || name == "upper" || name == "lower" ||
          name == "replace" || name == "startswith" || name == "endswith" || name == "split" ||
          name == "strip") {
        return Method(object, name);
      }
      break;
    case Value::Kind::kDict:
      if (name == "get" || name == "keys" || name == "values" || name == "items") {
        return Method(object, name);
      }
      break;
    case Value::Kind::kList:
      if (name == "index" || name == "count") return Method(object, name);
      if (name == "append" || name == "extend") {
        return ErrorAt(file_, pos, name + " works on a list held by a name (xs." + name +
                                       "(...))");
      }
      break;
    default:
      break;
  }
  return ErrorAt(file_, pos, DescribeValue(object) + " has no attribute '" + name + "'");
}


StatusOr<Value> Interpreter::CallMethod(const Callable& m, Pos pos, std::vector<Arg> positional,
                                        std::vector<std::pair<std::string, Arg>> keywords) {
  const Value& self = *m.self;
  const std::string& name = m.name;
  FLEET_RETURN_IF_ERROR(Charge(self.items.size() + self.text.size(), pos));
  auto no_keywords = [&]() -> Status {
    if (keywords.empty()) return OkStatus();
    return ErrorAt(file_, keywords[0].second.pos, name + "() takes no keyword arguments");
  };
  auto arity = [&](size_t lo, size_t hi) -> Status {
    FLEET_RETURN_IF_ERROR(no_keywords());
    if (positional.size() >= lo && positional.size() <= hi) return OkStatus();
    return ErrorAt(file_, pos, name + "() takes " +
                                   (lo == hi ? std::to_string(lo)
                                             : std::to_string(lo) + " to " + std::to_string(hi)) +
                                   " argument" + (hi == 1 ? "" : "s") + ", got " +
                                   std::to_string(positional.size()));
  };
  auto string_arg = [&](size_t i) -> StatusOr<std::string> {
    const Value& v = positional[i].value;
    if (v.kind != Value::Kind::kString) {
      return ErrorAt(file_, positional[i].pos, name + "() takes a string, got " +
                                                   DescribeValue(v));
    }
    return v.text;
  };
  auto string_value = [&](std::string text) -> StatusOr<Value> {
    if (text.size() > kMaxItems) {
      return ErrorAt(file_, pos, "a string longer than " + std::to_string(kMaxItems) + " bytes");
    }
    return StringValue(std::move(text), pos);
  };
  if (self.kind == Value::Kind::kVar) {
    positional.insert(positional.begin(), Arg{self, self.pos});
    if (name == "astype") {
      return CallBuiltin("@cast", "astype", pos, std::move(positional), std::move(keywords));
    }
    const PaddleApi* api = FindPaddleApi("paddle." + name);
    return CallPaddle(*api, pos, std::move(positional), std::move(keywords));
  }
  if (self.kind == Value::Kind::kObject) {
    // opt.minimize(loss, startup_program=None, parameters=None, no_grad_set=None)
    std::vector<Param> params = {{"loss", true}, {"startup_program"}, {"parameters"},
                                 {"parameter_list"}, {"no_grad_set"}};
    FLEET_ASSIGN_OR_RETURN(Args args, Args::Bind("minimize", pos, file_, params,
                                                 std::move(positional), std::move(keywords)));
    if (args.Has("no_grad_set")) {
      return args.ErrorAt("no_grad_set", "no_grad_set is not supported; mark the vars with "
                                         "stop_gradient (x.stop_gradient = True)");
    }
    std::vector<std::pair<std::string, Arg>> kw;
    kw.push_back({"loss", *args.Get("loss")});
    kw.push_back({"optimizer", Arg{self, pos}});
    return CallBuiltin("minimize", "minimize", pos, {}, std::move(kw));
  }
  if (self.kind == Value::Kind::kString) {
    const std::string& s = self.text;
    if (name == "upper" || name == "lower" || name == "strip") {
      FLEET_RETURN_IF_ERROR(arity(0, 0));
      std::string out = s;
      if (name == "strip") {
        const size_t b = out.find_first_not_of(" \t\n");
        const size_t e = out.find_last_not_of(" \t\n");
        out = b == std::string::npos ? "" : out.substr(b, e - b + 1);
      } else {
        for (char& c : out) {
          c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                                : std::tolower(static_cast<unsigned char>(c)));
        }
      }
      return string_value(std::move(out));
    }
    if (name == "startswith" || name == "endswith") {
      FLEET_RETURN_IF_ERROR(arity(1, 1));
      FLEET_ASSIGN_OR_RETURN(std::string x, string_arg(0));
      return BoolValue(name == "startswith"
                           ? s.rfind(x, 0) == 0
                           : s.size() >= x.size() &&
                                 s.compare(s.size() - x.size(), x.size(), x) == 0,
                       pos);
    }
    if (name == "replace") {
      FLEET_RETURN_IF_ERROR(arity(2, 2));
      FLEET_ASSIGN_OR_RETURN(std::string from, string_arg(0));
      FLEET_ASSIGN_OR_RETURN(std::string to, string_arg(1));
      if (from.empty()) return ErrorAt(file_, positional[0].pos, "replace() of an empty string");
      std::string out;
      for (size_t i = 0; i < s.size();) {
        if (s.compare(i, from.size(), from) == 0) {
          out += to;
          i += from.size();
        } else {
          out += s[i++];
        }
        if (out.size() > kMaxItems) break;
      }
      return string_value(std::move(out));
    }
    if (name == "split") {
      FLEET_RETURN_IF_ERROR(arity(0, 1));
      std::string sep = " ";
      if (!positional.empty()) {
        FLEET_ASSIGN_OR_RETURN(sep, string_arg(0));
      }
      if (sep.empty()) return ErrorAt(file_, pos, "split() with an empty separator");
      std::vector<Value> parts;
      size_t start = 0;
      while (true) {
        const size_t at = s.find(sep, start);
        FLEET_ASSIGN_OR_RETURN(Value part, string_value(s.substr(start, at - start)));
        if (!(positional.empty() && part.text.empty())) parts.push_back(std::move(part));
        if (at == std::string::npos) break;
        start = at + sep.size();
      }
      return ListValue(std::move(parts), pos);
    }
    if (name == "join") {
      FLEET_RETURN_IF_ERROR(arity(1, 1));
      FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(positional[0].value,
                                                               positional[0].pos));
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (items[i].kind != Value::Kind::kString) {
          return ErrorAt(file_, positional[0].pos, "join() takes strings, got " +
                                                       DescribeValue(items[i]));
        }
        if (i) out += s;
        out += items[i].text;
        if (out.size() > kMaxItems) break;
      }
      return string_value(std::move(out));
    }
    // format: {} and {N} fields take positional arguments, {name} keywords; a spec follows ':'.
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
        out += c;
        ++i;
        continue;
      }
      if (c == '}') return ErrorAt(file_, pos, "format(): single '}' (write '}}')");
      if (c != '{') {
        out += c;
        continue;
      }
      const size_t close = s.find('}', i);
      if (close == std::string::npos) return ErrorAt(file_, pos, "format(): '{' never closed");
      std::string field = s.substr(i + 1, close - i - 1);
      std::string spec;
      if (size_t colon = field.find(':'); colon != std::string::npos) {
        spec = field.substr(colon + 1);
        field.resize(colon);
      }
      const Value* v = nullptr;
      if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
        size_t index = next++;
        if (!field.empty()) index = static_cast<size_t>(std::strtoul(field.c_str(), nullptr, 10));
        if (index >= positional.size()) {
          return ErrorAt(file_, pos, "format(): no argument " + std::to_string(index));
        }
        v = &positional[index].value;
      } else {
        for (const auto& [k, arg] : keywords) {
          if (k == field) v = &arg.value;
        }
        if (v == nullptr) return ErrorAt(file_, pos, "format(): no argument '" + field + "'");
      }
      StatusOr<std::string> text = spec.empty() ? StatusOr<std::string>(FormatValue(*v))
                                                : FormatSpec(*v, spec);
      if (!text.ok()) return ErrorAt(file_, pos, "format(): " + text.status().message());
      out += *text;
      if (out.size() > kMaxItems) break;
      i = close;
    }
    return string_value(std::move(out));
  }
  if (self.kind == Value::Kind::kDict) {
    if (name == "get") {
      FLEET_RETURN_IF_ERROR(arity(1, 2));
      FLEET_ASSIGN_OR_RETURN(std::string key, string_arg(0));
      for (size_t i = 0; i < self.keys.size(); ++i) {
        if (self.keys[i] == key) return self.items[i];
      }
      return positional.size() > 1 ? positional[1].value : Value{};
    }
    FLEET_RETURN_IF_ERROR(arity(0, 0));
    std::vector<Value> items;
    for (size_t i = 0; i < self.keys.size(); ++i) {
      Value key = StringValue(self.keys[i], pos);
      if (name == "keys") {
        items.push_back(std::move(key));
      } else if (name == "values") {
        items.push_back(self.items[i]);
      } else {
        items.push_back(ListValue({std::move(key), self.items[i]}, pos, true));
      }
    }
    return ListValue(std::move(items), pos);
  }
  if (self.kind == Value::Kind::kList) {
    FLEET_RETURN_IF_ERROR(arity(1, 1));
    int64_t count = 0, first = -1;
    for (size_t i = 0; i < self.items.size(); ++i) {
      if (ValuesEqual(self.items[i], positional[0].value)) {
        if (first < 0) first = static_cast<int64_t>(i);
        ++count;
      }
    }
    if (name == "index" && first < 0) {
      return ErrorAt(file_, positional[0].pos, "index(): the value is not in the list");
    }
    return IntValue(name == "index" ? first : count, pos);
  }
  return ErrorAt(file_, pos, DescribeValue(self) + " has no method " + name);
}

}  // namespace fleet::frontend
