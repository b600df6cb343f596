// Calls: of the file's own functions, of Fleet's layers and configuration objects, of ops by
// their type, of Paddle API names (translated through paddle_api.h), and of methods.
#include <cstdlib>
#include <set>

#include "frontend/interpreter.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A default of the table ("-1", "1.0", "True", "'float32'") as a value.
Value ParseDefault(std::string_view text, Pos pos) {
  Value v;
  v.pos = pos;
  if (text == "True" || text == "False") {
    v.kind = Value::Kind::kBool;
    v.bool_value = text == "True";
  } else if (!text.empty() && text.front() == '\'') {
    v.kind = Value::Kind::kString;
    v.text = std::string(text.substr(1, text.size() - 2));
  } else if (text.find('.') != std::string_view::npos) {
    v.kind = Value::Kind::kFloat;
    v.float_value = std::strtod(std::string(text).c_str(), nullptr);
  } else {
    v.kind = Value::Kind::kInt;
    v.int_value = std::strtoll(std::string(text).c_str(), nullptr, 10);
  }
  return v;
}

}  // namespace

Status Interpreter::CheckProgramSize(Pos pos) {
  if (state_.builder.main().global().ops.size() <= kMaxOps) return OkStatus();
  return ErrorAt(file_, pos, "the main program grows past " + std::to_string(kMaxOps) + " ops");
}

StatusOr<Value> Interpreter::Call(const Expr& e, const std::shared_ptr<Scope>& scope) {
  const Expr& callee_expr = *e.operand;
  Value callee;
  if (callee_expr.kind == Expr::Kind::kName) {
    // A name bound to a non-callable value still calls the layer or op of that name, so
    // `mean = mean(cost)` followed by another mean(...) keeps working as it always has.
    const Value* bound = FindBinding(callee_expr.text, scope);
    if (bound != nullptr && (bound->kind == Value::Kind::kCallable ||
                             bound->kind == Value::Kind::kModule)) {
      callee = *bound;
    } else if (bound != nullptr && !table_.count(callee_expr.text) &&
               state_.builder.Schema(callee_expr.text) == nullptr) {
      return ErrorAt(file_, callee_expr.pos, "'" + callee_expr.text + "' is " +
                                                 DescribeValue(*bound) + ", not a function");
    } else {
      if (!table_.count(callee_expr.text) && state_.builder.Schema(callee_expr.text) == nullptr &&
          callee_expr.text != "paddle" && callee_expr.text != "fluid" &&
          callee_expr.text != "fleet") {
        return UnknownCallable(callee_expr.text, callee_expr.pos);
      }
      FLEET_ASSIGN_OR_RETURN(callee, GlobalName(callee_expr.text, callee_expr.pos));
    }
  } else if (callee_expr.kind == Expr::Kind::kAttribute &&
             callee_expr.operand->kind == Expr::Kind::kName &&
             (callee_expr.text == "append" || callee_expr.text == "extend")) {
    // list.append(x) / list.extend(xs) change the list bound to the name in place.
    Value* holder = FindBinding(callee_expr.operand->text, scope);
    if (holder != nullptr && holder->kind == Value::Kind::kList && !holder->tuple) {
      FLEET_RETURN_IF_ERROR(CheckNotParamCopy(
          callee_expr.operand->text, scope,
          callee_expr.text == "append" ? "append to" : "extend", e.pos));
      if (e.items.size() != 1 || !e.keyword_names.empty()) {
        return ErrorAt(file_, e.pos, callee_expr.text + " takes one argument");
      }
      FLEET_ASSIGN_OR_RETURN(Value arg, Eval(e.items[0], scope));
      holder = FindBinding(callee_expr.operand->text, scope);  // the argument may rebind
      if (holder == nullptr || holder->kind != Value::Kind::kList) {
        return ErrorAt(file_, e.pos, "'" + callee_expr.operand->text + "' changed while its " +
                                         callee_expr.text + " argument was evaluated");
      }
      std::vector<Value> more;
      if (callee_expr.text == "append") {
        more.push_back(std::move(arg));
      } else {
        FLEET_ASSIGN_OR_RETURN(more, Iterate(arg, e.items[0].pos));
      }
      if (holder->items.size() + more.size() > kMaxItems) {
        return ErrorAt(file_, e.pos, "a list longer than " + std::to_string(kMaxItems) +
                                         " items");
      }
      for (Value& m : more) {
        FLEET_RETURN_IF_ERROR(GrowDepth(*holder, m, e.pos));
        holder->items.push_back(std::move(m));
      }
      return Value{};
    }
    FLEET_ASSIGN_OR_RETURN(callee, Eval(callee_expr, scope));
  } else {
    FLEET_ASSIGN_OR_RETURN(callee, Eval(callee_expr, scope));
  }
  std::vector<Arg> positional;
  for (const Expr& item : e.items) {
    FLEET_ASSIGN_OR_RETURN(Value v, Eval(item, scope));
    positional.push_back({std::move(v), item.pos});
  }
  std::vector<std::pair<std::string, Arg>> keywords;
  for (size_t i = 0; i < e.keyword_names.size(); ++i) {
    FLEET_ASSIGN_OR_RETURN(Value v, Eval(e.keyword_values[i], scope));
    keywords.push_back({e.keyword_names[i], Arg{std::move(v), e.keyword_pos[i]}});
  }
  StatusOr<Value> result = CallValue(callee, e.pos, std::move(positional), std::move(keywords));
  if (result.ok()) FLEET_RETURN_IF_ERROR(CheckProgramSize(e.pos));
  return result;
}

Status Interpreter::UnknownCallable(const std::string& name, Pos pos) const {
  std::vector<std::string> names;
  for (const auto& [n, b] : table_) {
    if (n[0] != '@') names.push_back(n);
  }
  for (const auto& t : state_.builder.registry().Types()) {
    if (t.find("_grad") == std::string::npos) names.push_back(t);
  }
  const std::vector<std::string> guesses = ClosestMatches(name, names, 3);
  return ErrorAt(file_, pos,
                 "unknown layer or op '" + name + "'" +
                     (guesses.empty() ? "" : " (did you mean " + QuotedAlternatives(guesses) + "?)") +
                     "; `fleet-host ops` lists every op, docs/program.md every layer");
}

StatusOr<Value> Interpreter::CallValue(const Value& callee, Pos pos, std::vector<Arg> positional,
                                       std::vector<std::pair<std::string, Arg>> keywords) {
  if (callee.kind == Value::Kind::kModule) {
    return ErrorAt(file_, pos, "the module " + callee.text + " is not callable");
  }
  if (callee.kind != Value::Kind::kCallable) {
    return ErrorAt(file_, pos, DescribeValue(callee) + " is not callable");
  }
  const Callable& c = *callee.callable;
  switch (c.kind) {
    case Callable::Kind::kBuiltin: {
      // Python's abs, round, sum and range share their names with ops: on variables they are
      // the ops, as they were before the file could hold Python.
      static const std::set<std::string, std::less<>> kShadowing = {"abs", "round", "sum",
                                                                    "range"};
      bool vars = false;
      for (const Arg& a : positional) {
        vars = vars || a.value.kind == Value::Kind::kVar ||
               (a.value.kind == Value::Kind::kList && !a.value.items.empty() &&
                a.value.items[0].kind == Value::Kind::kVar);
      }
      for (const auto& [k, a] : keywords) vars = vars || a.value.kind == Value::Kind::kVar;
      const ops::OpSchema* schema = state_.builder.Schema(c.name);
      if (vars && schema != nullptr && kShadowing.count(c.name)) {
        return DirectOp(*schema, pos, std::move(positional), std::move(keywords));
      }
      return CallBuiltin(c.name, c.name, pos, std::move(positional), std::move(keywords));
    }
    case Callable::Kind::kOp:
      return DirectOp(*state_.builder.Schema(c.name), pos, std::move(positional),
                      std::move(keywords));
    case Callable::Kind::kFunction:
      return CallFunction(c, pos, std::move(positional), std::move(keywords));
    case Callable::Kind::kPaddle:
      return CallPaddle(*c.paddle, pos, std::move(positional), std::move(keywords));
    case Callable::Kind::kMethod:
      return CallMethod(c, pos, std::move(positional), std::move(keywords));
  }
  return Value{};
}

StatusOr<Value> Interpreter::CallBuiltin(const std::string& name, const std::string& shown,
                                         Pos pos, std::vector<Arg> positional,
                                         std::vector<std::pair<std::string, Arg>> keywords) {
  auto it = table_.find(name);
  if (it == table_.end()) return UnknownCallable(name, pos);
  FLEET_ASSIGN_OR_RETURN(Args args, Args::Bind(shown, pos, file_, it->second.params,
                                               std::move(positional), std::move(keywords)));
  return it->second.fn(state_, args);
}

StatusOr<Value> Interpreter::CallFunction(const Callable& fn, Pos pos, std::vector<Arg> positional,
                                          std::vector<std::pair<std::string, Arg>> keywords) {
  const Stmt& def = *fn.def;
  if (call_depth_ >= kMaxCallDepth) {
    return ErrorAt(file_, pos, "calls nest more than " + std::to_string(kMaxCallDepth) +
                                   " deep (calling " + fn.name + ")");
  }
  auto scope = std::make_shared<Scope>();
  scope->parent = fn.closure;
  const size_t n = def.params.size();
  if (positional.size() > n) {
    return ErrorAt(file_, positional[n].pos, fn.name + "() takes " + std::to_string(n) +
                                                 " positional argument" + (n == 1 ? "" : "s") +
                                                 ", got " + std::to_string(positional.size()));
  }
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < positional.size(); ++i) {
    scope->vars[def.params[i].name] = std::move(positional[i].value);
    scope->params.insert(def.params[i].name);
    given[i] = true;
  }
  for (auto& [name, arg] : keywords) {
    size_t i = 0;
    while (i < n && def.params[i].name != name) ++i;
    if (i == n) {
      std::vector<std::string> names;
      for (const DefParam& p : def.params) names.push_back(p.name);
      std::string guess = ClosestMatch(name, names);
      return ErrorAt(file_, arg.pos, fn.name + "() has no parameter '" + name + "'" +
                                         (guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
    }
    if (given[i]) {
      return ErrorAt(file_, arg.pos, fn.name + "(): argument '" + name + "' given twice");
    }
    scope->vars[name] = std::move(arg.value);
    scope->params.insert(name);
    given[i] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    if (fn.defaults[i] == nullptr) {
      return ErrorAt(file_, pos, fn.name + "() missing argument '" + def.params[i].name + "'");
    }
    scope->vars[def.params[i].name] = *fn.defaults[i];
    scope->params.insert(def.params[i].name);
  }
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  ++call_depth_;
  StatusOr<Flow> flow = Exec(*def.body, scope);
  --call_depth_;
  loop_depth_ = saved_loops;
  if (!flow.ok()) return flow.status();
  Value result;
  if (*flow == Flow::kReturn) result = std::move(return_value_);
  return_value_ = Value{};
  return result;
}

StatusOr<Value> Interpreter::CallPaddle(const PaddleApi& api, Pos pos, std::vector<Arg> positional,
                                        std::vector<std::pair<std::string, Arg>> keywords) {
  const std::string name(api.name);
  const std::vector<PaddleParam> params = ParsePaddleParams(api.params);
  std::vector<const PaddleParam*> positional_params;
  for (const PaddleParam& p : params) {
    if (p.positional) positional_params.push_back(&p);
  }
  if (positional.size() > positional_params.size()) {
    return ErrorAt(file_, positional[positional_params.size()].pos,
                   name + " takes at most " + std::to_string(positional_params.size()) +
                       " positional argument" + (positional_params.size() == 1 ? "" : "s"));
  }
  std::vector<std::pair<const PaddleParam*, Arg>> given;
  for (size_t i = 0; i < positional.size(); ++i) {
    given.push_back({positional_params[i], std::move(positional[i])});
  }
  for (auto& [kw, arg] : keywords) {
    const PaddleParam* p = nullptr;
    for (const PaddleParam& q : params) {
      if (q.paddle == kw) p = &q;
    }
    if (p == nullptr) {
      std::vector<std::string> names;
      for (const PaddleParam& q : params) names.push_back(q.paddle);
      std::string guess = ClosestMatch(kw, names);
      return ErrorAt(file_, arg.pos,
                     name + ": unknown keyword '" + kw + "'" +
                         (guess.empty() ? (names.empty() ? "; it takes no arguments"
                                                         : "; it takes " + JoinWords(names))
                                        : " (did you mean '" + guess + "'?)"));
    }
    for (const auto& [q, a] : given) {
      if (q == p) {
        return ErrorAt(file_, arg.pos, name + ": argument '" + kw + "' given twice");
      }
    }
    given.push_back({p, std::move(arg)});
  }
  // Translate to the target's keywords; the table's "@" targets adapt the call.
  std::vector<std::pair<std::string, Arg>> out;
  std::string act;
  Pos act_pos = pos;
  std::optional<double> alpha;
  for (auto& [p, arg] : given) {
    if (p->target.empty()) continue;
    if (p->target == "@act") {
      if (arg.value.is_none()) continue;
      if (arg.value.kind != Value::Kind::kString) {
        return ErrorAt(file_, arg.pos, name + ": act must be a string, got " +
                                           DescribeValue(arg.value));
      }
      act = arg.value.text;
      act_pos = arg.pos;
      continue;
    }
    if (p->target == "@alpha") {
      if (!arg.value.is_number()) {
        return ErrorAt(file_, arg.pos, name + ": alpha must be a number");
      }
      alpha = arg.value.number();
      continue;
    }
    if (p->target == "@training") {
      if (arg.value.kind != Value::Kind::kBool) {
        return ErrorAt(file_, arg.pos, name + ": training must be True or False");
      }
      Arg is_test = arg;
      is_test.value.bool_value = !arg.value.bool_value;
      out.push_back({"is_test", std::move(is_test)});
      continue;
    }
    out.push_back({p->target, std::move(arg)});
  }
  for (const PaddleParam& d : ParsePaddleParams(api.defaults)) {
    // defaults are "key=value" words: ParsePaddleParams puts the value in `target`.
    bool present = false;
    for (const auto& [k, a] : out) present = present || k == d.paddle;
    if (!present) out.push_back({d.paddle, Arg{ParseDefault(d.target, pos), pos}});
  }
  const std::string target(api.target);
  const ops::OpSchema* schema = state_.builder.Schema(target);
  if (!table_.count(target) && schema == nullptr) {
    return ErrorAt(file_, pos, name + " maps to '" + target + "', which this build lacks");
  }
  StatusOr<Value> result = table_.count(target)
                               ? CallBuiltin(target, name, pos, {}, std::move(out))
                               : DirectOp(*schema, pos, {}, std::move(out));
  if (!result.ok()) return result;
  if (alpha && *alpha != 1.0) {
    FLEET_ASSIGN_OR_RETURN(result, AppendSimpleOp("scale", {{"X", *result}},
                                                  {{"scale", static_cast<float>(*alpha)}}, pos));
  }
  if (!act.empty()) {
    const ops::OpSchema* schema = state_.builder.Schema(act);
    if (schema == nullptr || schema->FindInput("X") == nullptr) {
      return ErrorAt(file_, act_pos, name + ": unknown activation '" + act + "'");
    }
    FLEET_ASSIGN_OR_RETURN(result, AppendSimpleOp(act, {{"X", *result}}, {}, act_pos));
  }
  return result;
}

StatusOr<Value> Interpreter::DirectOp(const ops::OpSchema& schema, Pos pos,
                                      std::vector<Arg> positional,
                                      std::vector<std::pair<std::string, Arg>> keywords) {
  const std::string& type = schema.type;
  auto err = [&](Pos p, const std::string& msg) { return ErrorAt(file_, p, type + ": " + msg); };
  ir::Op op;
  op.type = type;
  auto bind_slot = [&](const ops::SlotSpec& slot, const Arg& arg) -> Status {
    if (op.inputs.count(slot.name)) return err(arg.pos, "input " + slot.name + " given twice");
    const Value& v = arg.value;
    if (v.is_none()) return OkStatus();
    std::vector<std::string> vars;
    if (v.kind == Value::Kind::kVar) {
      vars.push_back(v.text);
    } else if (v.kind == Value::Kind::kList && slot.duplicable) {
      for (const Value& item : v.items) {
        if (item.kind != Value::Kind::kVar) {
          return err(item.pos, "input " + slot.name + " takes variables, got " +
                                   DescribeValue(item));
        }
        vars.push_back(item.text);
      }
    } else {
      return err(v.pos, "input " + slot.name + " takes " +
                            (slot.duplicable ? "a variable or a list of variables"
                                             : "a variable") +
                            ", got " + DescribeValue(v));
    }
    op.inputs[slot.name] = std::move(vars);
    return OkStatus();
  };
  if (positional.size() > schema.inputs.size()) {
    return err(positional[schema.inputs.size()].pos,
               "takes " + std::to_string(schema.inputs.size()) +
                   " positional input(s); pass attributes by keyword");
  }
  for (size_t i = 0; i < positional.size(); ++i) {
    FLEET_RETURN_IF_ERROR(bind_slot(schema.inputs[i], positional[i]));
  }
  std::string act;
  Pos act_pos = pos;
  for (auto& [name, arg] : keywords) {
    const ops::SlotSpec* slot = nullptr;
    for (const auto& s : schema.inputs) {
      if (Lower(s.name) == Lower(name)) slot = &s;
    }
    if (slot == nullptr && (name == "input" || name == "x") && !schema.inputs.empty()) {
      slot = &schema.inputs[0];
    }
    if (slot != nullptr) {
      FLEET_RETURN_IF_ERROR(bind_slot(*slot, arg));
      continue;
    }
    const ops::AttrSpec* spec = schema.FindAttr(name);
    if (spec == nullptr && name == "act") {
      // Paddle's layers that take act= apply it after the op; so does every op here.
      if (arg.value.is_none()) continue;
      if (arg.value.kind != Value::Kind::kString) {
        return err(arg.pos, "act must be a string, got " + DescribeValue(arg.value));
      }
      act = arg.value.text;
      act_pos = arg.pos;
      continue;
    }
    if (spec == nullptr) {
      std::vector<std::string> names;
      for (const auto& s : schema.inputs) names.push_back(s.name);
      for (const auto& a : schema.attrs) names.push_back(a.name);
      std::string guess = ClosestMatch(name, names);
      std::string msg = "unknown keyword '" + name + "'";
      if (!guess.empty()) {
        msg += " (did you mean '" + guess + "'?)";
      } else if (!names.empty()) {
        msg += "; inputs and attributes are " + JoinWords(names);
      }
      return err(arg.pos, msg);
    }
    if (arg.value.is_none()) continue;
    StatusOr<ir::Attribute> attr = ValueToAttr(arg.value, spec->default_value, name);
    if (!attr.ok()) return err(arg.value.pos, attr.status().message());
    op.attrs[name] = std::move(*attr);
  }
  for (const auto& s : schema.inputs) {
    if (!s.optional && !op.inputs.count(s.name)) {
      return err(pos, "missing required input '" + s.name + "'");
    }
  }
  std::string layer = state_.builder.NewLayerName(type);
  std::string first;
  for (const auto& s : schema.outputs) {
    // A duplicable output that carries on a duplicable input ("State" after "PreState", as
    // rnn's LSTM states) holds as many vars as it; any other output holds one.
    size_t count = 1;
    if (s.duplicable) {
      auto pre = op.inputs.find("Pre" + s.name);
      if (pre != op.inputs.end() && !pre->second.empty()) count = pre->second.size();
    }
    for (size_t i = 0; i < count; ++i) {
      std::string out = state_.builder.NewTmp(layer);
      if (first.empty()) first = out;
      op.outputs[s.name].push_back(out);
    }
  }
  if (first.empty()) return err(pos, "has no outputs to return");
  Status st = state_.builder.AppendOp(std::move(op));
  if (!st.ok()) {
    const std::string& m = st.message();
    return ErrorAt(file_, pos, m.rfind(type + ":", 0) == 0 ? m : type + ": " + m);
  }
  Value result = VarValue(first, pos);
  if (act.empty()) return result;
  const ops::OpSchema* act_schema = state_.builder.Schema(act);
  if (act_schema == nullptr || act_schema->FindInput("X") == nullptr) {
    return err(act_pos, "unknown activation '" + act + "'");
  }
  return AppendSimpleOp(act, {{"X", result}}, {}, act_pos);
}

StatusOr<Value> Interpreter::AppendSimpleOp(const std::string& type,
                                            std::map<std::string, Value> inputs,
                                            std::map<std::string, ir::Attribute> attrs, Pos pos) {
  ir::Op op;
  op.type = type;
  for (auto& [slot, v] : inputs) op.inputs[slot] = {v.text};
  op.attrs = std::move(attrs);
  const ops::OpSchema* schema = state_.builder.Schema(type);
  if (schema == nullptr) return ErrorAt(file_, pos, "op '" + type + "' is not defined");
  const std::string layer = state_.builder.NewLayerName(type);
  std::string out;
  for (const auto& slot : schema->outputs) {
    const std::string name = state_.builder.NewTmp(layer);
    if (out.empty()) out = name;
    op.outputs[slot.name] = {name};
  }
  Status st = state_.builder.AppendOp(std::move(op));
  if (!st.ok()) {
    const std::string& m = st.message();
    return ErrorAt(file_, pos, m.rfind(type + ":", 0) == 0 ? m : type + ": " + m);
  }
  return VarValue(out, pos);
}

}  // namespace fleet::frontend
