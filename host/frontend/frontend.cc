// Runs a program file: evaluates each statement, dispatching calls to layers, configuration
// objects, data()/minimize()/stop_gradient(), or an op called directly by its type.
#include "frontend/frontend.h"

#include <cctype>
#include <fstream>
#include <limits>
#include <sstream>

#include "frontend/builtins.h"
#include "frontend/syntax.h"
#include "frontend/values.h"
#include "support/input_file.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string PosText(Pos p) { return std::to_string(p.line) + ":" + std::to_string(p.col); }

// A value from the file as an attribute of the type `like` has; an error message otherwise.
StatusOr<ir::Attribute> ValueToAttr(const Value& v, const ir::Attribute& like,
                                    std::string_view attr) {
  using K = Value::Kind;
  auto fail = [&]() -> Status {
    return InvalidArgument("attribute '" + std::string(attr) + "' expects " +
                           std::string(ir::AttrTypeName(ir::AttrTypeOf(like))) + ", got " +
                           DescribeValue(v));
  };
  auto int_list = [&](auto out) -> StatusOr<ir::Attribute> {
    using E = typename decltype(out)::value_type;
    if (v.kind != K::kList) return fail();
    for (const Value& item : v.items) {
      if (item.kind != K::kInt) return fail();
      if (std::is_same_v<E, int32_t> &&
          (item.int_value > std::numeric_limits<int32_t>::max() ||
           item.int_value < std::numeric_limits<int32_t>::min())) {
        return fail();
      }
      out.push_back(static_cast<E>(item.int_value));
    }
    return ir::Attribute(std::move(out));
  };
  auto float_list = [&](auto out) -> StatusOr<ir::Attribute> {
    using E = typename decltype(out)::value_type;
    if (v.kind != K::kList) return fail();
    for (const Value& item : v.items) {
      if (!item.is_number()) return fail();
      out.push_back(static_cast<E>(item.number()));
    }
    return ir::Attribute(std::move(out));
  };
  switch (like.index()) {
    case 0:    // int32
    case 1: {  // int64
      int64_t n = 0;
      if (v.kind == K::kInt) {
        n = v.int_value;
      } else if (v.kind == K::kString && attr.find("dtype") != std::string_view::npos &&
                 ir::ParseDataType(v.text) != ir::DataType::kInvalid) {
        n = static_cast<int32_t>(ir::ParseDataType(v.text));
      } else {
        return fail();
      }
      if (like.index() == 1) return ir::Attribute(n);
      if (n > std::numeric_limits<int32_t>::max() || n < std::numeric_limits<int32_t>::min()) {
        return fail();
      }
      return ir::Attribute(static_cast<int32_t>(n));
    }
    case 2:
      if (!v.is_number()) return fail();
      return ir::Attribute(static_cast<float>(v.number()));
    case 3:
      if (!v.is_number()) return fail();
      return ir::Attribute(v.number());
    case 4:
      if (v.kind != K::kBool) return fail();
      return ir::Attribute(v.bool_value);
    case 5:
      if (v.kind != K::kString) return fail();
      return ir::Attribute(v.text);
    case 6: return int_list(std::vector<int32_t>{});
    case 7: return int_list(std::vector<int64_t>{});
    case 8: return float_list(std::vector<float>{});
    case 9: return float_list(std::vector<double>{});
    case 10: {
      if (v.kind != K::kList) return fail();
      std::vector<bool> out;
      for (const Value& item : v.items) {
        if (item.kind != K::kBool) return fail();
        out.push_back(item.bool_value);
      }
      return ir::Attribute(std::move(out));
    }
    case 11: {
      if (v.kind != K::kList) return fail();
      std::vector<std::string> out;
      for (const Value& item : v.items) {
        if (item.kind != K::kString) return fail();
        out.push_back(item.text);
      }
      return ir::Attribute(std::move(out));
    }
    default:
      return InvalidArgument("attribute '" + std::string(attr) +
                             "' refers to a block and cannot be set from a program file");
  }
}

class Interpreter {
 public:
  Interpreter(std::string_view file, const ops::OpRegistry& registry)
      : file_(file), state_(registry) {
    AddLayerBuiltins(table_);
    AddObjectBuiltins(table_);
    table_["minimize"] = Builtin{
        {{"loss", true}, {"optimizer", true}, {"grad_clip"}, {"regularization"}},
        [](State& s, const Args& a) { return Minimize(s, a); }};
    table_["stop_gradient"] =
        Builtin{{{"x", true}}, [](State& s, const Args& a) { return StopGradient(s, a); }};
    table_["metric"] = Builtin{{{"name", true}, {"x", true}},
                               [](State& s, const Args& a) { return Metric(s, a); }};
  }

  Status Run(const std::vector<Stmt>& stmts) {
    for (const Stmt& st : stmts) {
      FLEET_ASSIGN_OR_RETURN(Value v, Eval(st.value));
      // Names of variables and of callables live apart, so `mean = mean(cost)` is fine.
      if (!st.target.empty()) env_[st.target] = std::move(v);
    }
    return OkStatus();
  }

  StatusOr<ParsedProgram> Finish() && {
    ParsedProgram p;
    p.main = std::move(state_.builder.main());
    p.startup = std::move(state_.builder.startup());
    p.feeds = std::move(state_.feeds);
    p.loss = std::move(state_.loss);
    p.optimizer = std::move(state_.optimizer);
    p.no_grad = std::move(state_.no_grad);
    p.metrics = std::move(state_.metrics);
    for (const auto& [name, value] : env_) {
      if (value.kind == Value::Kind::kVar) p.names[name] = value.text;
    }
    return p;
  }

 private:
  StatusOr<Value> Eval(const Expr& e) {
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
      case Expr::Kind::kList:
        v.kind = Value::Kind::kList;
        for (const Expr& item : e.items) {
          FLEET_ASSIGN_OR_RETURN(Value iv, Eval(item));
          v.items.push_back(std::move(iv));
        }
        return v;
      case Expr::Kind::kName:
        return Lookup(e);
      case Expr::Kind::kCall:
        return Call(e);
    }
    return v;
  }

  StatusOr<Value> Lookup(const Expr& e) {
    auto it = env_.find(e.text);
    if (it != env_.end()) {
      Value v = it->second;
      v.pos = e.pos;
      return v;
    }
    if (table_.count(e.text) || state_.builder.Schema(e.text) != nullptr) {
      return ErrorAt(file_, e.pos,
                     "'" + e.text + "' is a layer or op: call it as " + e.text +
                         "(...), or pass the string '" + e.text + "' (e.g. act='" + e.text +
                         "')");
    }
    std::vector<std::string> names;
    for (const auto& [name, value] : env_) names.push_back(name);
    std::string guess = ClosestMatch(e.text, names);
    return ErrorAt(file_, e.pos,
                   "name '" + e.text + "' is not defined" +
                       (guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
  }

  StatusOr<Value> Call(const Expr& e) {
    auto builtin = table_.find(e.text);
    const ops::OpSchema* schema = state_.builder.Schema(e.text);
    if (builtin == table_.end() && schema == nullptr) {
      std::vector<std::string> names;
      for (const auto& [name, b] : table_) names.push_back(name);
      for (const auto& t : state_.builder.registry().Types()) {
        if (t.find("_grad") == std::string::npos) names.push_back(t);
      }
      const std::vector<std::string> guesses = ClosestMatches(e.text, names, 3);
      return ErrorAt(file_, e.pos,
                     "unknown layer or op '" + e.text + "'" +
                         (guesses.empty() ? ""
                                          : " (did you mean " + QuotedAlternatives(guesses) +
                                                "?)") +
                         "; `fleet-host ops` lists every op, docs/program.md every layer");
    }
    std::vector<Arg> positional;
    for (const Expr& item : e.items) {
      FLEET_ASSIGN_OR_RETURN(Value v, Eval(item));
      positional.push_back({std::move(v), item.pos});
    }
    std::vector<std::pair<std::string, Arg>> keywords;
    for (size_t i = 0; i < e.keyword_names.size(); ++i) {
      FLEET_ASSIGN_OR_RETURN(Value v, Eval(e.keyword_values[i]));
      keywords.push_back({e.keyword_names[i], Arg{std::move(v), e.keyword_pos[i]}});
    }
    if (builtin != table_.end()) {
      FLEET_ASSIGN_OR_RETURN(Args args,
                             Args::Bind(e.text, e.pos, file_, builtin->second.params,
                                        std::move(positional), std::move(keywords)));
      return builtin->second.fn(state_, args);
    }
    return DirectOp(*schema, e.pos, std::move(positional), std::move(keywords));
  }

  // An op called by its type: positional arguments fill the input slots in order, keywords
  // name input slots (any case; `input`/`x` also mean the first slot) or attributes.
  StatusOr<Value> DirectOp(const ops::OpSchema& schema, Pos pos, std::vector<Arg> positional,
                           std::vector<std::pair<std::string, Arg>> keywords) {
    const std::string& type = schema.type;
    auto err = [&](Pos p, const std::string& msg) { return ErrorAt(file_, p, type + ": " + msg); };
    ir::Op op;
    op.type = type;
    auto bind_slot = [&](const ops::SlotSpec& slot, const Arg& arg) -> Status {
      if (op.inputs.count(slot.name)) {
        return err(arg.pos, "input " + slot.name + " given twice");
      }
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
      std::string out = state_.builder.NewTmp(layer);
      if (first.empty()) first = out;
      op.outputs[s.name] = {out};
    }
    if (first.empty()) return err(pos, "has no outputs to return");
    Status st = state_.builder.AppendOp(std::move(op));
    if (!st.ok()) {
      const std::string& m = st.message();
      return ErrorAt(file_, pos, m.rfind(type + ":", 0) == 0 ? m : type + ": " + m);
    }
    return VarValue(first, pos);
  }

  static StatusOr<Value> Minimize(State& s, const Args& a) {
    if (s.minimize_pos) {
      return a.Error("minimize may be called once per program; it was already called at " +
                     PosText(*s.minimize_pos));
    }
    FLEET_ASSIGN_OR_RETURN(std::string loss, a.Var("loss"));
    FLEET_ASSIGN_OR_RETURN(optim::OptimizerSpec spec, OptimizerArg(a, "optimizer"));
    FLEET_ASSIGN_OR_RETURN(double l2, L2CoeffArg(a, "regularization"));
    FLEET_ASSIGN_OR_RETURN(GradClip clip, GradClipArg(a, "grad_clip"));
    if (l2 > 0 && spec.l2_coeff > 0) {
      return a.ErrorAt("regularization", "regularization is given both here and in the "
                                         "optimizer; keep one");
    }
    if (clip.any() && (spec.clip_global_norm > 0 || spec.clip_norm > 0 || spec.clip_by_value)) {
      return a.ErrorAt("grad_clip", "grad_clip is given both here and in the optimizer; keep one");
    }
    if (l2 > 0) spec.l2_coeff = l2;
    if (clip.any()) clip.ApplyTo(spec);
    const ir::Var* v = s.builder.FindVar(loss);
    if (v == nullptr) return a.ErrorAt("loss", "variable '" + loss + "' is not declared");
    if (v->dtype != ir::DataType::kFloat32 && v->dtype != ir::DataType::kFloat64) {
      return a.ErrorAt("loss", "the loss must be float32 or float64, '" + loss + "' is " +
                                   std::string(ir::DataTypeName(v->dtype)));
    }
    int64_t elements = 1;
    for (int64_t d : v->shape) elements *= d;
    if (elements != 1) {
      std::string shape;
      for (size_t i = 0; i < v->shape.size(); ++i) {
        shape += (i ? ", " : "") + std::to_string(v->shape[i]);
      }
      return a.ErrorAt("loss", "the loss must hold one value (reduce it with mean(...)), '" +
                                   loss + "' has shape [" + shape + "]");
    }
    s.loss = loss;
    s.optimizer = std::move(spec);
    s.minimize_pos = a.call_pos();
    return Value{};
  }

  static StatusOr<Value> StopGradient(State& s, const Args& a) {
    FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
    s.builder.SetStopGradient({x});
    bool seen = false;
    for (const auto& n : s.no_grad) seen = seen || n == x;
    if (!seen) s.no_grad.push_back(x);
    return VarValue(x, a.call_pos());
  }

  // The name becomes a JSON key, a word of the progress line and a TensorBoard tag: plain
  // characters only, so none of them needs quoting. Whether the var holds one value is known
  // only once the batch size is (job/metrics.h checks it then).
  static StatusOr<Value> Metric(State& s, const Args& a) {
    FLEET_ASSIGN_OR_RETURN(std::string name, a.String("name"));
    FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
    bool plain = !name.empty() && name.size() <= 64;
    for (char c : name) {
      plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' || c == '/');
    }
    if (!plain) {
      return a.ErrorAt("name", "a metric name is 1 to 64 of the characters A-Z a-z 0-9 _ . - /, "
                               "got " + QuoteForMessage(name));
    }
    for (const ReportedMetric& m : s.metrics) {
      if (m.name == name) {
        return a.ErrorAt("name", "metric '" + name + "' is already reported (at " + m.where + ")");
      }
    }
    const ir::Var* v = s.builder.FindVar(x);
    if (v == nullptr) return a.ErrorAt("x", "variable '" + x + "' is not declared");
    int64_t elements = 1;
    for (int64_t d : v->shape) elements *= d;
    if (elements != 1 && elements >= 0) {  // a -1 dimension waits for the batch size
      return a.ErrorAt("x", "a metric must hold one value, '" + x + "' holds " +
                                std::to_string(elements));
    }
    s.metrics.push_back({name, x, std::string(a.file()) + ":" + PosText(a.call_pos())});
    return VarValue(x, a.call_pos());
  }

  std::string_view file_;
  State state_;
  BuiltinTable table_;
  std::map<std::string, Value> env_;
};

}  // namespace

StatusOr<ParsedProgram> ParseProgramText(std::string_view text, std::string_view file_name) {
  FLEET_ASSIGN_OR_RETURN(std::vector<Stmt> stmts, ParseStatements(text, file_name));
  Interpreter interp(file_name, ops::BuiltinOps());
  FLEET_RETURN_IF_ERROR(interp.Run(stmts));
  return std::move(interp).Finish();
}

StatusOr<ParsedProgram> ParseProgramFile(const std::filesystem::path& file) {
  FLEET_ASSIGN_OR_RETURN(std::string text,
                         ReadInputFileText(file, "program file", kMaxInputTextBytes));
  return ParseProgramText(text, file.string());
}

}  // namespace fleet::frontend
