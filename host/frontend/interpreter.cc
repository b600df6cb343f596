// Statements and expressions. Values are copied, as build-time data is small; what keeps
// Python's reference semantics is the DistributedStrategy a file sets attributes on (a shared
// Namespace), and list.append / item assignment, which change the list or dict bound to the name
// they are called on (another name bound to the same list keeps the old one).
#include "frontend/interpreter.h"

#include <cmath>

#include "support/text.h"

namespace fleet::frontend {

Value CallableValue(std::shared_ptr<Callable> c, Pos pos) {
  Value v;
  v.kind = Value::Kind::kCallable;
  v.pos = pos;
  v.text = c->name;
  v.callable = std::move(c);
  return v;
}

Value PaddleValue(const PaddleApi& api, Pos pos) {
  auto c = std::make_shared<Callable>();
  c->kind = Callable::Kind::kPaddle;
  c->name = std::string(api.name);
  c->paddle = &api;
  return CallableValue(std::move(c), pos);
}

Status Interpreter::Depth::Check(Pos pos) const {
  if (in_.eval_depth_ <= kMaxEvalDepth) return OkStatus();
  return ErrorAt(in_.file_, pos, "evaluation nests more than " +
                                     std::to_string(kMaxEvalDepth) +
                                     " levels deep (deep recursion of functions?)");
}

Interpreter::~Interpreter() {
  for (const auto& scope : captured_) scope->vars.clear();
  globals_->vars.clear();
}

Status Interpreter::Run(const Block& block) {
  FLEET_ASSIGN_OR_RETURN(Flow flow, Exec(block, globals_));
  (void)flow;  // the parser keeps return/break/continue where they belong
  return OkStatus();
}

StatusOr<ParsedProgram> Interpreter::Finish() && {
  ParsedProgram p;
  p.main = std::move(state_.builder.main());
  p.startup = std::move(state_.builder.startup());
  p.feeds = std::move(state_.feeds);
  p.loss = std::move(state_.loss);
  p.optimizer = std::move(state_.optimizer);
  p.no_grad = std::move(state_.no_grad);
  p.metrics = std::move(state_.metrics);
  p.strategy = std::move(state_.strategy);
  p.fleet_init = std::move(state_.fleet_init);
  for (const auto& [name, value] : globals_->vars) {
    if (value.kind == Value::Kind::kVar) p.names[name] = value.text;
  }
  return p;
}

// ---- statements ----

StatusOr<Interpreter::Flow> Interpreter::Exec(const Block& block,
                                              const std::shared_ptr<Scope>& scope) {
  for (const Stmt& st : block) {
    FLEET_ASSIGN_OR_RETURN(Flow flow, ExecOne(st, scope));
    if (flow != Flow::kNext) return flow;
  }
  return Flow::kNext;
}

StatusOr<Interpreter::Flow> Interpreter::ExecOne(const Stmt& st,
                                                 const std::shared_ptr<Scope>& scope) {
  Depth depth(*this);
  FLEET_RETURN_IF_ERROR(depth.Check(st.pos));
  switch (st.kind) {
    case Stmt::Kind::kExpr: {
      FLEET_ASSIGN_OR_RETURN(Value v, Eval(st.value, scope));
      (void)v;
      return Flow::kNext;
    }
    case Stmt::Kind::kAssign: {
      FLEET_ASSIGN_OR_RETURN(Value v, Eval(st.value, scope));
      for (const Expr& target : st.targets) FLEET_RETURN_IF_ERROR(Assign(target, v, scope));
      return Flow::kNext;
    }
    case Stmt::Kind::kAugAssign: {
      const Expr& target = st.targets[0];
      FLEET_ASSIGN_OR_RETURN(Value current, Eval(target, scope));
      FLEET_ASSIGN_OR_RETURN(Value rhs, Eval(st.value, scope));
      FLEET_ASSIGN_OR_RETURN(Value v, Binary(st.text, current, rhs, st.pos));
      FLEET_RETURN_IF_ERROR(Assign(target, std::move(v), scope));
      return Flow::kNext;
    }
    case Stmt::Kind::kReturn:
      if (call_depth_ == 0) return ErrorAt(file_, st.pos, "'return' outside a function");
      return_value_ = Value{};
      if (st.has_value) {
        FLEET_ASSIGN_OR_RETURN(return_value_, Eval(st.value, scope));
      }
      return Flow::kReturn;
    case Stmt::Kind::kPass:
      return Flow::kNext;
    case Stmt::Kind::kBreak:
    case Stmt::Kind::kContinue:
      if (loop_depth_ == 0) {
        return ErrorAt(file_, st.pos, std::string(st.kind == Stmt::Kind::kBreak ? "'break'"
                                                                               : "'continue'") +
                                          " outside a loop");
      }
      return st.kind == Stmt::Kind::kBreak ? Flow::kBreak : Flow::kContinue;
    case Stmt::Kind::kImport:
      FLEET_RETURN_IF_ERROR(Import(st, *scope));
      return Flow::kNext;
    case Stmt::Kind::kDef: {
      if (++defs_ > kMaxDefs) {
        return ErrorAt(file_, st.pos, "the program runs more than " + std::to_string(kMaxDefs) +
                                          " def statements");
      }
      auto fn = std::make_shared<Callable>();
      fn->kind = Callable::Kind::kFunction;
      fn->name = st.text;
      fn->def = &st;
      for (const DefParam& p : st.params) {
        if (p.default_value == nullptr) {
          fn->defaults.push_back(nullptr);
          continue;
        }
        FLEET_ASSIGN_OR_RETURN(Value d, Eval(*p.default_value, scope));
        fn->defaults.push_back(std::make_shared<const Value>(std::move(d)));
      }
      if (scope != globals_) {
        fn->closure = scope;
        captured_.push_back(scope);
      }
      scope->vars[st.text] = CallableValue(std::move(fn), st.pos);
      return Flow::kNext;
    }
    case Stmt::Kind::kFor: {
      FLEET_ASSIGN_OR_RETURN(Value seq, Eval(st.value, scope));
      FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(seq, st.value.pos));
      ++loop_depth_;
      for (Value& item : items) {
        Status counted = CountIteration(st.pos);
        Status assigned = counted.ok() ? Assign(st.targets[0], std::move(item), scope) : counted;
        if (!assigned.ok()) {
          --loop_depth_;
          return assigned;
        }
        StatusOr<Flow> flow = Exec(*st.body, scope);
        if (!flow.ok() || *flow == Flow::kReturn) {
          --loop_depth_;
          return flow;
        }
        if (*flow == Flow::kBreak) break;
      }
      --loop_depth_;
      return Flow::kNext;
    }
    case Stmt::Kind::kIf: {
      FLEET_ASSIGN_OR_RETURN(Value cond, Eval(st.value, scope));
      FLEET_ASSIGN_OR_RETURN(bool truth, Truth(cond, st.value.pos));
      if (truth) return Exec(*st.body, scope);
      if (st.orelse) return Exec(*st.orelse, scope);
      return Flow::kNext;
    }
    case Stmt::Kind::kWith: {
      Flow flow = Flow::kNext;
      FLEET_RETURN_IF_ERROR(With(st, scope, &flow));
      return flow;
    }
  }
  return Flow::kNext;
}

Status Interpreter::CountIteration(Pos pos) {
  if (++iterations_ <= kMaxIterations) return OkStatus();
  return ErrorAt(file_, pos, "the program runs more than " + std::to_string(kMaxIterations) +
                                 " loop iterations in all");
}

Status Interpreter::CheckDepth(Value& v, Pos pos) {
  if (v.kind != Value::Kind::kList && v.kind != Value::Kind::kDict) return OkStatus();
  FLEET_RETURN_IF_ERROR(Charge(v.items.size(), pos));
  SetDepth(v);
  if (v.depth <= kMaxValueDepth) return OkStatus();
  return ErrorAt(file_, pos, "lists and dicts nest more than " +
                                 std::to_string(kMaxValueDepth) + " levels deep");
}

Status Interpreter::GrowDepth(Value& holder, const Value& item, Pos pos) {
  holder.depth = std::max(holder.depth, item.depth + 1);
  if (holder.depth <= kMaxValueDepth) return OkStatus();
  return ErrorAt(file_, pos, "lists and dicts nest more than " +
                                 std::to_string(kMaxValueDepth) + " levels deep");
}

Status Interpreter::Assign(const Expr& target, Value value,
                           const std::shared_ptr<Scope>& scope) {
  FLEET_RETURN_IF_ERROR(CheckDepth(value, target.pos));
  switch (target.kind) {
    case Expr::Kind::kName:
      if (value.kind == Value::Kind::kVar || value.kind == Value::Kind::kNone ||
          value.kind == Value::Kind::kBool || value.is_number() ||
          value.kind == Value::Kind::kString) {
        value.pos = target.pos;
      }
      scope->vars[target.text] = std::move(value);
      scope->params.erase(target.text);  // a new value of its own
      return OkStatus();
    case Expr::Kind::kTuple:
    case Expr::Kind::kList: {
      if (value.kind != Value::Kind::kList) {
        return ErrorAt(file_, target.pos, "cannot unpack " + DescribeValue(value) + " into " +
                                              std::to_string(target.items.size()) + " names");
      }
      if (value.items.size() != target.items.size()) {
        return ErrorAt(file_, target.pos,
                       "cannot unpack " + std::to_string(value.items.size()) + " value" +
                           (value.items.size() == 1 ? "" : "s") + " into " +
                           std::to_string(target.items.size()) + " names");
      }
      for (size_t i = 0; i < target.items.size(); ++i) {
        FLEET_RETURN_IF_ERROR(Assign(target.items[i], std::move(value.items[i]), scope));
      }
      return OkStatus();
    }
    case Expr::Kind::kAttribute:
      return AssignAttribute(target, std::move(value), scope);
    case Expr::Kind::kSubscript:
      return AssignItem(target, std::move(value), scope);
    default:
      return ErrorAt(file_, target.pos, "cannot assign to this expression");
  }
}

Status Interpreter::AssignAttribute(const Expr& target, Value value,
                                    const std::shared_ptr<Scope>& scope) {
  FLEET_ASSIGN_OR_RETURN(Value object, Eval(*target.operand, scope));
  if (object.kind == Value::Kind::kNamespace && object.ns->kind == "DistributedStrategy") {
    Namespace& ns = *object.ns;
    Status ok = CheckStrategyValue(target.text, value);
    if (!ok.ok()) return ErrorAt(file_, target.pos, ok.message());
    ns.attrs[target.text] = std::move(value);
    ns.where[target.text] = target.pos;
    return OkStatus();
  }
  if (object.kind == Value::Kind::kVar && target.text == "stop_gradient") {
    if (value.kind != Value::Kind::kBool) {
      return ErrorAt(file_, target.pos, "stop_gradient takes True or False");
    }
    if (!value.bool_value) {
      return ErrorAt(file_, target.pos, "stop_gradient = False is not supported: a var is "
                                        "differentiated unless marked");
    }
    FLEET_RETURN_IF_ERROR(MarkStopGradient(object.text));
    return OkStatus();
  }
  return ErrorAt(file_, target.pos,
                 "cannot set attribute '" + target.text + "' of " + DescribeValue(object));
}

// x[i] = v and d["key"] = v change the list or dict bound to that name, in place.
Status Interpreter::AssignItem(const Expr& target, Value value,
                               const std::shared_ptr<Scope>& scope) {
  if (target.operand->kind != Expr::Kind::kName || target.items.size() != 1) {
    return ErrorAt(file_, target.pos, "item assignment works on a list or dict held by a name "
                                      "(items[0] = ..., config['key'] = ...)");
  }
  Value* holder = FindBinding(target.operand->text, scope);
  if (holder == nullptr) {
    return ErrorAt(file_, target.operand->pos,
                   "name '" + target.operand->text + "' is not defined");
  }
  FLEET_RETURN_IF_ERROR(
      CheckNotParamCopy(target.operand->text, scope, "assign an item of", target.operand->pos));
  FLEET_ASSIGN_OR_RETURN(Value key, Eval(target.items[0], scope));
  holder = FindBinding(target.operand->text, scope);  // the key's evaluation may rebind
  if (holder == nullptr) {
    return ErrorAt(file_, target.operand->pos,
                   "name '" + target.operand->text + "' is not defined");
  }
  FLEET_RETURN_IF_ERROR(Charge(holder->items.size(), target.pos));
  if (holder->kind == Value::Kind::kDict) {
    if (key.kind != Value::Kind::kString) {
      return ErrorAt(file_, target.items[0].pos, "dict keys are strings");
    }
    for (size_t i = 0; i < holder->keys.size(); ++i) {
      if (holder->keys[i] == key.text) {
        FLEET_RETURN_IF_ERROR(GrowDepth(*holder, value, target.pos));
        holder->items[i] = std::move(value);
        return OkStatus();
      }
    }
    if (holder->keys.size() >= kMaxItems) {
      return ErrorAt(file_, target.pos, "a dict holds at most " + std::to_string(kMaxItems) +
                                            " entries");
    }
    FLEET_RETURN_IF_ERROR(GrowDepth(*holder, value, target.pos));
    holder->keys.push_back(key.text);
    holder->items.push_back(std::move(value));
    return OkStatus();
  }
  if (holder->kind == Value::Kind::kList && !holder->tuple) {
    if (key.kind != Value::Kind::kInt) {
      return ErrorAt(file_, target.items[0].pos, "list indices are ints");
    }
    const int64_t n = static_cast<int64_t>(holder->items.size());
    const int64_t i = key.int_value < 0 ? key.int_value + n : key.int_value;
    if (i < 0 || i >= n) {
      return ErrorAt(file_, target.items[0].pos, "list index " + std::to_string(key.int_value) +
                                                     " is out of range for " +
                                                     std::to_string(n) + " items");
    }
    FLEET_RETURN_IF_ERROR(GrowDepth(*holder, value, target.pos));
    holder->items[static_cast<size_t>(i)] = std::move(value);
    return OkStatus();
  }
  return ErrorAt(file_, target.pos,
                 "cannot assign items of " + DescribeValue(*holder) +
                     (holder->kind == Value::Kind::kVar
                          ? " (tensors are values in a static program: build a new one)"
                          : ""));
}

Status Interpreter::With(const Stmt& st, const std::shared_ptr<Scope>& scope, Flow* flow) {
  for (const auto& [expr, as] : st.withs) {
    FLEET_ASSIGN_OR_RETURN(Value v, Eval(expr, scope));
    if (v.kind != Value::Kind::kNamespace || v.ns->kind != "guard") {
      return ErrorAt(file_, expr.pos,
                     "'with' takes program_guard(...), unique_name.guard() or name_scope(...), "
                     "got " + DescribeValue(v));
    }
    if (!as.empty()) scope->vars[as] = v;
  }
  FLEET_ASSIGN_OR_RETURN(*flow, Exec(*st.body, scope));
  return OkStatus();
}

Status Interpreter::Import(const Stmt& st, Scope& scope) {
  for (const auto& [module, as] : st.imports) {
    std::string root = module.substr(0, module.find('.'));
    if (root == "numpy" || root == "paddle") {
      // `import paddle.fluid` binds `paddle`; `import paddle.fluid as fluid` binds `fluid`;
      // `from paddle import fluid` arrives as ("paddle.fluid", "fluid").
      if (root == "paddle" && module != "paddle" && !IsPaddleModule(module) &&
          FindPaddleApi(module) == nullptr) {
        std::vector<std::string> near = ClosestPaddleApis(module);
        return ErrorAt(file_, st.pos, "module or name '" + module + "' is not known to Fleet" +
                                          (near.empty() ? ""
                                                        : " (closest: " +
                                                              QuotedAlternatives(near) + ")"));
      }
      Value v;
      v.pos = st.pos;
      if (const PaddleApi* api = FindPaddleApi(module)) {
        v = PaddleValue(*api, st.pos);
      } else {
        v.kind = Value::Kind::kModule;
        v.text = as.empty() ? root : module;
      }
      scope.vars[as.empty() ? root : as] = std::move(v);
      continue;
    }
    return ErrorAt(file_, st.pos, "import of '" + module + "': a program file may import only "
                                  "paddle (and its submodules) and numpy");
  }
  return OkStatus();
}

StatusOr<std::vector<Value>> Interpreter::Iterate(const Value& v, Pos pos) {
  FLEET_RETURN_IF_ERROR(Charge(v.items.size() + v.text.size(), pos));
  switch (v.kind) {
    case Value::Kind::kList:
      return v.items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const std::string& k : v.keys) {
        Value s;
        s.kind = Value::Kind::kString;
        s.text = k;
        s.pos = pos;
        keys.push_back(std::move(s));
      }
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char c : v.text) {
        Value s;
        s.kind = Value::Kind::kString;
        s.text = std::string(1, c);
        s.pos = pos;
        chars.push_back(std::move(s));
      }
      return chars;
    }
    case Value::Kind::kVar:
      return ErrorAt(file_, pos, "cannot loop over the variable '" + v.text +
                                     "': its values exist only when the program runs (loop "
                                     "over range(n) or a list instead)");
    default:
      return ErrorAt(file_, pos, "cannot loop over " + DescribeValue(v));
  }
}

// ---- expressions ----

StatusOr<Value> Interpreter::Eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Depth depth(*this);
  FLEET_RETURN_IF_ERROR(depth.Check(e.pos));
  return EvalInner(e, scope);
}

StatusOr<Value> Interpreter::EvalInner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value v;
  v.pos = e.pos;
  switch (e.kind) {
    case Expr::Kind::kNone:
      return v;
    case Expr::Kind::kBool:
      v.kind = Value::Kind::kBool;
      v.bool_value = e.bool_value;
      return v;
    case Expr::Kind::kInt:
      v.kind = Value::Kind::kInt;
      v.int_value = e.int_value;
      return v;
    case Expr::Kind::kFloat:
      v.kind = Value::Kind::kFloat;
      v.float_value = e.float_value;
      return v;
    case Expr::Kind::kString:
      v.kind = Value::Kind::kString;
      v.text = e.text;
      return v;
    case Expr::Kind::kFString:
      return FString(e, scope);
    case Expr::Kind::kFormat:
      return ErrorAt(file_, e.pos, "a format field outside an f-string");
    case Expr::Kind::kName:
      return Lookup(e.text, e.pos, scope);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple:
      v.kind = Value::Kind::kList;
      v.tuple = e.kind == Expr::Kind::kTuple;
      for (const Expr& item : e.items) {
        FLEET_ASSIGN_OR_RETURN(Value iv, Eval(item, scope));
        v.items.push_back(std::move(iv));
      }
      FLEET_RETURN_IF_ERROR(CheckDepth(v, e.pos));
      return v;
    case Expr::Kind::kDict:
      v.kind = Value::Kind::kDict;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        FLEET_ASSIGN_OR_RETURN(Value key, Eval(e.items[i], scope));
        if (key.kind != Value::Kind::kString) {
          return ErrorAt(file_, e.items[i].pos, "dict keys are strings, got " +
                                                    DescribeValue(key));
        }
        FLEET_ASSIGN_OR_RETURN(Value value, Eval(e.items[i + 1], scope));
        FLEET_RETURN_IF_ERROR(Charge(v.keys.size(), e.items[i].pos));
        bool replaced = false;
        for (size_t k = 0; k < v.keys.size(); ++k) {
          if (v.keys[k] == key.text) {
            v.items[k] = value;
            replaced = true;
          }
        }
        if (!replaced) {
          v.keys.push_back(key.text);
          v.items.push_back(std::move(value));
        }
      }
      FLEET_RETURN_IF_ERROR(CheckDepth(v, e.pos));
      return v;
    case Expr::Kind::kListComp:
      return ListComp(e, scope);
    case Expr::Kind::kCall:
      return Call(e, scope);
    case Expr::Kind::kAttribute: {
      FLEET_ASSIGN_OR_RETURN(Value object, Eval(*e.operand, scope));
      return Attribute(object, e.text, e.pos);
    }
    case Expr::Kind::kSubscript: {
      FLEET_ASSIGN_OR_RETURN(Value object, Eval(*e.operand, scope));
      std::vector<Value> index;
      for (const Expr& item : e.items) {
        FLEET_ASSIGN_OR_RETURN(Value iv, Eval(item, scope));
        index.push_back(std::move(iv));
      }
      return Index(object, index, e.pos);
    }
    case Expr::Kind::kSlice:
      v.kind = Value::Kind::kSlice;
      for (const Expr& item : e.items) {
        FLEET_ASSIGN_OR_RETURN(Value iv, Eval(item, scope));
        v.items.push_back(std::move(iv));
      }
      return v;
    case Expr::Kind::kEllipsis:
      v.kind = Value::Kind::kEllipsis;
      return v;
    case Expr::Kind::kUnary: {
      FLEET_ASSIGN_OR_RETURN(Value operand, Eval(*e.operand, scope));
      if (e.text == "not") {
        FLEET_ASSIGN_OR_RETURN(bool truth, Truth(operand, e.operand->pos));
        v.kind = Value::Kind::kBool;
        v.bool_value = !truth;
        return v;
      }
      return Unary(e.text, operand, e.pos);
    }
    case Expr::Kind::kBinary: {
      FLEET_ASSIGN_OR_RETURN(Value a, Eval(e.items[0], scope));
      FLEET_ASSIGN_OR_RETURN(Value b, Eval(e.items[1], scope));
      return Binary(e.text, a, b, e.pos);
    }
    case Expr::Kind::kCompare: {
      // a < b < c is a < b and b < c, each operand evaluated once.
      FLEET_ASSIGN_OR_RETURN(Value left, Eval(e.items[0], scope));
      Value result;
      for (size_t i = 0; i < e.ops.size(); ++i) {
        FLEET_ASSIGN_OR_RETURN(Value right, Eval(e.items[i + 1], scope));
        FLEET_ASSIGN_OR_RETURN(result, Compare(e.ops[i], left, right, e.items[i + 1].pos));
        if (result.kind == Value::Kind::kVar) {
          if (e.ops.size() > 1) {
            return ErrorAt(file_, e.pos, "chained comparisons of tensors are not supported; "
                                         "combine them with logical_and");
          }
          return result;
        }
        if (!result.bool_value) break;
        left = std::move(right);
      }
      result.pos = e.pos;
      return result;
    }
    case Expr::Kind::kBoolOp: {
      // Python's and/or return an operand, evaluated left to right until one decides.
      const bool is_and = e.text == "and";
      Value last;
      for (const Expr& item : e.items) {
        FLEET_ASSIGN_OR_RETURN(last, Eval(item, scope));
        FLEET_ASSIGN_OR_RETURN(bool truth, Truth(last, item.pos));
        if (truth != is_and) break;
      }
      return last;
    }
    case Expr::Kind::kIfElse: {
      FLEET_ASSIGN_OR_RETURN(Value cond, Eval(e.items[1], scope));
      FLEET_ASSIGN_OR_RETURN(bool truth, Truth(cond, e.items[1].pos));
      return Eval(e.items[truth ? 0 : 2], scope);
    }
  }
  return v;
}

StatusOr<bool> Interpreter::Truth(const Value& v, Pos pos) {
  switch (v.kind) {
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.bool_value;
    case Value::Kind::kInt: return v.int_value != 0;
    case Value::Kind::kFloat: return v.float_value != 0.0;
    case Value::Kind::kString: return !v.text.empty();
    case Value::Kind::kList:
    case Value::Kind::kDict: return !v.items.empty();
    case Value::Kind::kVar:
      return ErrorAt(file_, pos,
                     "the truth of the variable '" + v.text + "' is known only when the program "
                     "runs: conditions must be build-time values (graph control flow such as "
                     "cond and while_loop is out of scope)");
    default:
      return true;
  }
}

Value* Interpreter::FindBinding(std::string_view name, const std::shared_ptr<Scope>& scope) {
  for (Scope* s = scope.get(); s != nullptr; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  auto it = globals_->vars.find(name);
  return it != globals_->vars.end() ? &it->second : nullptr;
}

Status Interpreter::CheckNotParamCopy(std::string_view name, const std::shared_ptr<Scope>& scope,
                                      const std::string& what, Pos pos) {
  for (Scope* s = scope.get(); s != nullptr; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it == s->vars.end()) continue;
    const Value::Kind kind = it->second.kind;
    if (!s->params.count(name) || (kind != Value::Kind::kList && kind != Value::Kind::kDict)) {
      return OkStatus();
    }
    const std::string n(name);
    const bool list = kind == Value::Kind::kList;
    return ErrorAt(file_, pos, "cannot " + what + " '" + n + "': it is a parameter, and a " +
                                   (list ? "list" : "dict") +
                                   " passed to a function is a copy here, so the caller's "
                                   "would not change as it does in Python; return it instead (" +
                                   n + " = f(" + n + ", ...))" +
                                   (list ? " or make a copy first (" + n + " = list(" + n + "))"
                                         : std::string()));
  }
  return OkStatus();
}

StatusOr<Value> Interpreter::Lookup(const std::string& name, Pos pos,
                                    const std::shared_ptr<Scope>& scope) {
  if (const Value* v = FindBinding(name, scope)) {
    Value out = *v;
    if (out.kind == Value::Kind::kVar) out.pos = pos;
    return out;
  }
  return GlobalName(name, pos);
}

// Names every file sees without defining them: the Fleet layers and ops, Python's builtins,
// and the Paddle modules under the names scripts import them as.
StatusOr<Value> Interpreter::GlobalName(const std::string& name, Pos pos) {
  Value v;
  v.pos = pos;
  static const std::map<std::string, std::string, std::less<>> kModules = {
      {"paddle", "paddle"},
      {"fluid", "paddle.fluid"},
      {"fleet", "paddle.distributed.fleet"}};
  if (auto m = kModules.find(name); m != kModules.end()) {
    v.kind = Value::Kind::kModule;
    v.text = m->second;
    return v;
  }
  auto c = std::make_shared<Callable>();
  c->name = name;
  if (table_.count(name)) {
    c->kind = Callable::Kind::kBuiltin;
  } else if (state_.builder.Schema(name) != nullptr) {
    c->kind = Callable::Kind::kOp;
  } else {
    std::vector<std::string> names;
    for (Scope* s = globals_.get(); s != nullptr; s = s->parent.get()) {
      for (const auto& [n, value] : s->vars) names.push_back(n);
    }
    std::string guess = ClosestMatch(name, names);
    return ErrorAt(file_, pos, "name '" + name + "' is not defined" +
                                   (guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
  }
  return CallableValue(std::move(c), pos);
}

StatusOr<Value> Interpreter::ListComp(const Expr& e, const std::shared_ptr<Scope>& scope) {
  FLEET_ASSIGN_OR_RETURN(Value seq, Eval(e.items[0], scope));
  FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(seq, e.items[0].pos));
  // The loop names live in a scope of their own, as in Python 3.
  auto inner = std::make_shared<Scope>();
  inner->parent = scope;
  Value out;
  out.kind = Value::Kind::kList;
  out.pos = e.pos;
  for (Value& item : items) {
    FLEET_RETURN_IF_ERROR(CountIteration(e.pos));
    FLEET_RETURN_IF_ERROR(Assign(*e.targets, std::move(item), inner));
    if (e.items.size() > 1) {
      FLEET_ASSIGN_OR_RETURN(Value cond, Eval(e.items[1], inner));
      FLEET_ASSIGN_OR_RETURN(bool keep, Truth(cond, e.items[1].pos));
      if (!keep) continue;
    }
    FLEET_ASSIGN_OR_RETURN(Value v, Eval(*e.operand, inner));
    out.items.push_back(std::move(v));
  }
  FLEET_RETURN_IF_ERROR(CheckDepth(out, e.pos));
  return out;
}

StatusOr<Value> Interpreter::FString(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value out;
  out.kind = Value::Kind::kString;
  out.pos = e.pos;
  for (const Expr& part : e.items) {
    if (part.kind == Expr::Kind::kString) {
      out.text += part.text;
    } else {
      FLEET_ASSIGN_OR_RETURN(Value v, Eval(*part.operand, scope));
      std::string text;
      if (!part.ops.empty() && part.ops[0] == "r" && v.kind == Value::Kind::kString) {
        text = "'" + v.text + "'";
      } else if (part.text.empty()) {
        text = FormatValue(v);
      } else {
        StatusOr<std::string> formatted = FormatSpec(v, part.text);
        if (!formatted.ok()) return ErrorAt(file_, part.pos, formatted.status().message());
        text = std::move(*formatted);
      }
      FLEET_RETURN_IF_ERROR(Charge(text.size(), part.pos));
      out.text += text;
    }
    if (out.text.size() > kMaxItems) {
      return ErrorAt(file_, e.pos, "a string longer than " + std::to_string(kMaxItems) +
                                       " bytes");
    }
  }
  return out;
}

}  // namespace fleet::frontend
