// The builtins behind Paddle API names whose behaviour is more than a renaming (paddle_api.h's
// "@" targets): several outputs (split, topk, unstack), a reduction after a loss, an arange built
// from constants, the scaffolding of a script (Program, program_guard), the Fleet lines
// (fleet.init, DistributedStrategy, distributed_optimizer); and Fleet's own param() and
// create_parameter().
#include <cmath>
#include <limits>
#include <set>

#include "frontend/builtins.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

using ir::MakeOp;


Value NewNamespace(std::string kind, Pos pos) {
  Value v;
  v.kind = Value::Kind::kNamespace;
  v.pos = pos;
  v.ns = std::make_shared<Namespace>();
  v.ns->kind = std::move(kind);
  return v;
}

StatusOr<const ir::Var*> DeclaredVar(State& s, const Args& a, std::string_view arg) {
  FLEET_ASSIGN_OR_RETURN(std::string name, a.Var(arg));
  const ir::Var* v = s.builder.FindVar(name);
  if (v == nullptr) return a.ErrorAt(arg, "variable '" + name + "' is not declared");
  return v;
}

// Appends `type`, one fresh var per output slot except those `counts` gives several; returns
// the outputs by slot.
StatusOr<ir::SlotMap> Append(State& s, const Args& a, const std::string& type, ir::SlotMap inputs,
                             ir::AttrMap attrs, const std::map<std::string, int64_t>& counts = {}) {
  const ops::OpSchema* schema = s.builder.Schema(type);
  if (schema == nullptr) return a.Error("op '" + type + "' is not defined in this build");
  const std::string layer = s.builder.NewLayerName(type);
  ir::SlotMap outputs;
  for (const auto& slot : schema->outputs) {
    auto it = counts.find(slot.name);
    const int64_t n = it == counts.end() ? 1 : it->second;
    for (int64_t i = 0; i < n; ++i) outputs[slot.name].push_back(s.builder.NewTmp(layer));
  }
  FLEET_RETURN_IF_ERROR(a.AtCall(
      s.builder.AppendOp(MakeOp(type, std::move(inputs), outputs, std::move(attrs)))));
  return outputs;
}

StatusOr<std::string> AppendOne(State& s, const Args& a, const std::string& type,
                                ir::SlotMap inputs, ir::AttrMap attrs = {}) {
  FLEET_ASSIGN_OR_RETURN(ir::SlotMap out, Append(s, a, type, std::move(inputs), std::move(attrs)));
  return out.at("Out")[0];
}

StatusOr<ir::DataType> DtypeArg(const Args& a, std::string_view name, ir::DataType def) {
  if (!a.Has(name)) return def;
  FLEET_ASSIGN_OR_RETURN(std::string text, a.String(name));
  ir::DataType t = ir::ParseDataType(text);
  if (t == ir::DataType::kInvalid) return a.ErrorAt(name, "unknown dtype '" + text + "'");
  return t;
}

// A reduction of a per-example loss as Paddle 2.x's functional losses do it.
StatusOr<Value> Reduce(State& s, const Args& a, const std::string& loss) {
  FLEET_ASSIGN_OR_RETURN(std::string reduction, a.String("reduction", "mean"));
  if (reduction == "none") return VarValue(loss, a.call_pos());
  if (reduction != "mean" && reduction != "sum") {
    return a.ErrorAt("reduction", "reduction must be 'mean', 'sum' or 'none', got " +
                                      QuoteForMessage(reduction));
  }
  if (reduction == "mean") {
    FLEET_ASSIGN_OR_RETURN(std::string out, AppendOne(s, a, "mean", {{"X", {loss}}}));
    return VarValue(out, a.call_pos());
  }
  FLEET_ASSIGN_OR_RETURN(std::string out,
                         AppendOne(s, a, "reduce_sum", {{"X", {loss}}},
                                   {{"reduce_all", true}, {"dim", std::vector<int32_t>{0}}}));
  return VarValue(out, a.call_pos());
}

StatusOr<Value> Split(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(const ir::Var* x, DeclaredVar(s, a, "x"));
  FLEET_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", 0));
  const Arg* sections = a.Get("num_or_sections");
  if (sections == nullptr) return a.Error("missing argument 'num_or_sections'");
  ir::AttrMap attrs = {{"axis", static_cast<int32_t>(axis)}};
  int64_t n = 0;
  if (sections->value.kind == Value::Kind::kInt) {
    n = sections->value.int_value;
    if (n < 1 || n > 4096) return a.ErrorAt("num_or_sections", "must be in [1, 4096]");
    attrs["num"] = static_cast<int32_t>(n);
  } else {
    FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> parts, a.Ints("num_or_sections"));
    if (parts.empty() || parts.size() > 4096) {
      return a.ErrorAt("num_or_sections", "gives 1 to 4096 sections");
    }
    std::vector<int32_t> p32;
    for (int64_t p : parts) {
      if (p < -1 || p > std::numeric_limits<int32_t>::max()) {
        return a.ErrorAt("num_or_sections", "section sizes are positive or -1");
      }
      p32.push_back(static_cast<int32_t>(p));
    }
    n = static_cast<int64_t>(parts.size());
    attrs["sections"] = std::move(p32);
  }
  FLEET_ASSIGN_OR_RETURN(ir::SlotMap out, Append(s, a, "split", {{"X", {x->name}}},
                                                 std::move(attrs), {{"Out", n}}));
  std::vector<Value> items;
  for (const std::string& v : out.at("Out")) items.push_back(VarValue(v, a.call_pos()));
  return ListValue(std::move(items), a.call_pos(), false);
}

StatusOr<Value> Unstack(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(const ir::Var* x, DeclaredVar(s, a, "x"));
  FLEET_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", 0));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  if (axis < -rank || axis >= rank) return a.ErrorAt("axis", "axis out of range");
  const int64_t dim = x->shape[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
  FLEET_ASSIGN_OR_RETURN(int64_t num, a.Int("num", dim));
  if (num < 1 || num > 4096) {
    return a.Error("unstack needs a known dim (or num=) in [1, 4096], got " +
                   std::to_string(num));
  }
  FLEET_ASSIGN_OR_RETURN(ir::SlotMap out,
                         Append(s, a, "unstack", {{"X", {x->name}}},
                                {{"axis", static_cast<int32_t>(axis)},
                                 {"num", static_cast<int32_t>(num)}},
                                {{"Y", num}}));
  std::vector<Value> items;
  for (const std::string& v : out.at("Y")) items.push_back(VarValue(v, a.call_pos()));
  return ListValue(std::move(items), a.call_pos(), false);
}

StatusOr<Value> TopK(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(const ir::Var* x, DeclaredVar(s, a, "x"));
  FLEET_ASSIGN_OR_RETURN(int64_t k, a.Int("k"));
  FLEET_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", -1));
  FLEET_ASSIGN_OR_RETURN(bool largest, a.Bool("largest", true));
  FLEET_ASSIGN_OR_RETURN(bool sorted, a.Bool("sorted", true));
  if (k < 1 || k > std::numeric_limits<int32_t>::max()) return a.ErrorAt("k", "k must be >= 1");
  FLEET_ASSIGN_OR_RETURN(ir::SlotMap out,
                         Append(s, a, "top_k_v2", {{"X", {x->name}}},
                                {{"k", static_cast<int32_t>(k)},
                                 {"axis", static_cast<int32_t>(axis)},
                                 {"largest", largest},
                                 {"sorted", sorted}}));
  s.builder.SetStopGradient({out.at("Indices")[0]});
  return ListValue({VarValue(out.at("Out")[0], a.call_pos()),
                VarValue(out.at("Indices")[0], a.call_pos())},
               a.call_pos());
}

StatusOr<Value> Cast(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(const ir::Var* x, DeclaredVar(s, a, "x"));
  FLEET_ASSIGN_OR_RETURN(ir::DataType to, DtypeArg(a, "dtype", ir::DataType::kInvalid));
  if (to == ir::DataType::kInvalid) return a.Error("missing argument 'dtype'");
  FLEET_ASSIGN_OR_RETURN(std::string out,
                         AppendOne(s, a, "cast", {{"X", {x->name}}},
                                   {{"in_dtype", static_cast<int32_t>(x->dtype)},
                                    {"out_dtype", static_cast<int32_t>(to)}}));
  return VarValue(out, a.call_pos());
}

StatusOr<Value> Pow(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string x, a.Var("x"));
  const Arg* y = a.Get("y");
  if (y == nullptr) return a.Error("missing argument 'y'");
  std::string out;
  if (y->value.is_number()) {
    FLEET_ASSIGN_OR_RETURN(out, AppendOne(s, a, "pow", {{"X", {x}}},
                                          {{"factor", static_cast<float>(y->value.number())}}));
  } else {
    FLEET_ASSIGN_OR_RETURN(std::string yv, a.Var("y"));
    FLEET_ASSIGN_OR_RETURN(out, AppendOne(s, a, "elementwise_pow", {{"X", {x}}, {"Y", {yv}}},
                                          {{"axis", int32_t{-1}}}));
  }
  return VarValue(out, a.call_pos());
}

// paddle.arange(start=0, end=None, step=1, dtype=None): three constants and a range op, whose
// length shape inference computes from them.
StatusOr<Value> Arange(State& s, const Args& a) {
  const Arg* start = a.Get("start");
  const Arg* end = a.Get("end");
  const Arg* step = a.Get("step");
  if (start == nullptr) return a.Error("missing argument 'start' (or end)");
  for (const Arg* arg : {start, end, step}) {
    if (arg != nullptr && !arg->value.is_number()) {
      return frontend::ErrorAt(a.file(), arg->pos, "arange takes numbers, got " +
                                                       DescribeValue(arg->value));
    }
  }
  double b[3] = {0.0, start->value.number(), 1.0};
  if (end != nullptr) {
    b[0] = start->value.number();
    b[1] = end->value.number();
  }
  if (step != nullptr) b[2] = step->value.number();
  bool ints = true;
  for (const Arg* arg : {start, end, step}) {
    ints = ints && (arg == nullptr || arg->value.kind == Value::Kind::kInt);
  }
  FLEET_ASSIGN_OR_RETURN(ir::DataType dtype,
                         DtypeArg(a, "dtype", ints ? ir::DataType::kInt64 : ir::DataType::kFloat32));
  ir::SlotMap inputs;
  const char* slots[3] = {"Start", "End", "Step"};
  for (int i = 0; i < 3; ++i) {
    FLEET_ASSIGN_OR_RETURN(std::string c,
                           AppendOne(s, a, "fill_constant", {},
                                     {{"shape", std::vector<int64_t>{1}},
                                      {"value", static_cast<float>(b[i])},
                                      {"dtype", static_cast<int32_t>(dtype)}}));
    s.builder.SetStopGradient({c});
    inputs[slots[i]] = {c};
  }
  FLEET_ASSIGN_OR_RETURN(std::string out, AppendOne(s, a, "range", std::move(inputs)));
  s.builder.SetStopGradient({out});
  // The length is known from the numbers, as Paddle's static arange declares it.
  if (b[2] == 0.0) return a.ErrorAt("step", "arange's step must not be zero");
  const double n = std::ceil((b[1] - b[0]) / b[2]);
  if (n >= 1 && n <= static_cast<double>(std::numeric_limits<int32_t>::max())) {
    s.builder.main().global().FindVar(out)->shape = {static_cast<int64_t>(n)};
  }
  return VarValue(out, a.call_pos());
}

// paddle.nn.functional.cross_entropy: softmax and cross entropy in one op, then the reduction.
StatusOr<Value> FunctionalCrossEntropy(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(const ir::Var* input, DeclaredVar(s, a, "input"));
  FLEET_ASSIGN_OR_RETURN(const ir::Var* label, DeclaredVar(s, a, "label"));
  FLEET_ASSIGN_OR_RETURN(bool use_softmax, a.Bool("use_softmax", true));
  FLEET_ASSIGN_OR_RETURN(bool soft_label, a.Bool("soft_label", false));
  FLEET_ASSIGN_OR_RETURN(int64_t ignore_index, a.Int("ignore_index", -100));
  FLEET_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", -1));
  FLEET_ASSIGN_OR_RETURN(std::string reduction, a.String("reduction", "mean"));
  if (!use_softmax) {
    return a.ErrorAt("use_softmax", "use_softmax=False is not supported; call "
                                    "fluid.layers.cross_entropy on probabilities");
  }
  if (ignore_index != -100 && reduction == "mean") {
    return a.ErrorAt("ignore_index", "ignore_index with reduction='mean' (a mean over the "
                                     "labels kept) is not supported; use reduction='sum' or "
                                     "'none'");
  }
  std::string lbl = label->name;
  if (!soft_label && label->shape.size() + 1 == input->shape.size()) {
    // Labels of shape [N] gain the class axis, as Paddle does.
    FLEET_ASSIGN_OR_RETURN(ir::SlotMap un,
                           Append(s, a, "unsqueeze2", {{"X", {lbl}}},
                                  {{"axes", std::vector<int32_t>{static_cast<int32_t>(
                                                axis < 0 ? axis + static_cast<int64_t>(
                                                                      input->shape.size())
                                                         : axis)}}}));
    lbl = un.at("Out")[0];
  }
  FLEET_ASSIGN_OR_RETURN(ir::SlotMap out,
                         Append(s, a, "softmax_with_cross_entropy",
                                {{"Logits", {input->name}}, {"Label", {lbl}}},
                                {{"soft_label", soft_label},
                                 {"ignore_index", static_cast<int64_t>(ignore_index)},
                                 {"axis", static_cast<int32_t>(axis)}}));
  return Reduce(s, a, out.at("Loss")[0]);
}

// paddle.nn.functional.binary_cross_entropy_with_logits: the per-element loss, then the
// reduction.
StatusOr<Value> BceWithLogits(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string logit, a.Var("logit"));
  FLEET_ASSIGN_OR_RETURN(std::string label, a.Var("label"));
  FLEET_ASSIGN_OR_RETURN(std::string loss,
                         AppendOne(s, a, "sigmoid_cross_entropy_with_logits",
                                   {{"X", {logit}}, {"Label", {label}}}));
  return Reduce(s, a, loss);
}

StatusOr<Value> MseLoss(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string input, a.Var("input"));
  FLEET_ASSIGN_OR_RETURN(std::string label, a.Var("label"));
  FLEET_ASSIGN_OR_RETURN(std::string diff, AppendOne(s, a, "elementwise_sub",
                                                     {{"X", {input}}, {"Y", {label}}},
                                                     {{"axis", int32_t{-1}}}));
  FLEET_ASSIGN_OR_RETURN(std::string sq, AppendOne(s, a, "square", {{"X", {diff}}}));
  return Reduce(s, a, sq);
}

StatusOr<Value> ParamBuiltin(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::string name, a.String("name"));
  const ir::Var* v = s.builder.FindVar(name);
  if (v != nullptr && v->param.has_value()) return VarValue(name, a.call_pos());
  std::vector<std::string> params;
  for (const auto& [n, var] : s.builder.main().global().vars) {
    if (var.param.has_value()) params.push_back(n);
  }
  std::string guess = ClosestMatch(name, params);
  return a.ErrorAt("name", "no parameter named " + QuoteForMessage(name) +
                               (guess.empty() ? "" : " (did you mean '" + guess + "'?)") +
                               (v != nullptr ? "; '" + name + "' is a var but not a parameter"
                                             : ""));
}

// paddle.static.create_parameter: Xavier for weights and zeros for biases unless given.
StatusOr<Value> CreateParameterBuiltin(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<int64_t> shape, a.Ints("shape"));
  FLEET_ASSIGN_OR_RETURN(ir::DataType dtype, DtypeArg(a, "dtype", ir::DataType::kFloat32));
  FLEET_ASSIGN_OR_RETURN(bool is_bias, a.Bool("is_bias", false));
  FLEET_ASSIGN_OR_RETURN(std::string name, a.String("name", ""));
  for (int64_t d : shape) {
    if (d < 1) return a.ErrorAt("shape", "a parameter's dims are positive");
  }
  FLEET_ASSIGN_OR_RETURN(ParamAttrSpec attr, ParamAttrArg(a, "attr"));
  if (attr.disabled) return a.ErrorAt("attr", "attr=False makes no parameter");
  if (!name.empty()) {
    if (!attr.name.empty() && attr.name != name) {
      return a.ErrorAt("name", "the parameter is named both '" + name + "' and '" + attr.name +
                                   "' (attr)");
    }
    attr.name = name;
  }
  InitSpec init;
  init.kind = is_bias ? "constant" : "xavier";
  if (a.Has("default_initializer")) {
    FLEET_ASSIGN_OR_RETURN(ParamAttrSpec d, ParamAttrArg(a, "default_initializer"));
    if (!d.init) {
      return a.ErrorAt("default_initializer", "default_initializer takes an initializer");
    }
    init = *d.init;
  }
  const std::string layer = s.builder.NewLayerName("create_parameter");
  FLEET_ASSIGN_OR_RETURN(std::string p, a.AtCall(s.builder.CreateParameter(
                                            layer, is_bias, shape, dtype, attr, init)));
  return VarValue(p, a.call_pos());
}

// ---- the Fleet lines of a training script ----

StatusOr<Value> FleetInit(State& s, const Args& a) {
  if (s.fleet_init) {
    return a.Error("fleet.init is called twice (first at " + s.fleet_init->where + ")");
  }
  ProgramFleetInit init;
  init.where = std::string(a.file()) + ":" + std::to_string(a.call_pos().line) + ":" +
               std::to_string(a.call_pos().col);
  if (a.Has("is_collective")) {
    FLEET_ASSIGN_OR_RETURN(bool c, a.Bool("is_collective"));
    init.is_collective = c;
  }
  if (const Arg* rm = a.Get("role_maker")) {
    if (rm->value.kind != Value::Kind::kNamespace || rm->value.ns->kind != "PaddleCloudRoleMaker") {
      return a.ErrorAt("role_maker", "role_maker must be PaddleCloudRoleMaker(...) (the role "
                                     "comes from the environment or fleet.toml)");
    }
    auto it = rm->value.ns->attrs.find("is_collective");
    if (it != rm->value.ns->attrs.end()) {
      if (init.is_collective && *init.is_collective != it->second.bool_value) {
        return a.ErrorAt("is_collective", "is_collective disagrees with the role maker's");
      }
      init.is_collective = it->second.bool_value;
    }
  }
  if (a.Has("strategy")) {
    return a.ErrorAt("strategy", "pass the strategy to fleet.distributed_optimizer");
  }
  s.fleet_init = std::move(init);
  return Value{};
}

StatusOr<Value> RoleMaker(State&, const Args& a) {
  Value v = NewNamespace("PaddleCloudRoleMaker", a.call_pos());
  FLEET_ASSIGN_OR_RETURN(bool collective, a.Bool("is_collective", false));
  Value b;
  b.kind = Value::Kind::kBool;
  b.bool_value = collective;
  v.ns->attrs["is_collective"] = b;
  return v;
}

StatusOr<Value> DistributedOptimizer(State& s, const Args& a) {
  const Arg* opt = a.Get("optimizer");
  if (opt == nullptr || opt->value.kind != Value::Kind::kObject) {
    return a.ErrorAt("optimizer", "expected an optimizer such as paddle.optimizer.SGD(...)");
  }
  FLEET_RETURN_IF_ERROR(OptimizerArg(a, "optimizer").status());
  if (s.strategy_where.size()) {
    return a.Error("fleet.distributed_optimizer is called twice (first at " + s.strategy_where +
                   ")");
  }
  s.strategy_where = std::string(a.file()) + ":" + std::to_string(a.call_pos().line) + ":" +
                     std::to_string(a.call_pos().col);
  if (const Arg* st = a.Get("strategy")) {
    if (st->value.kind != Value::Kind::kNamespace || st->value.ns->kind != "DistributedStrategy") {
      return a.ErrorAt("strategy", "expected fleet.DistributedStrategy(), got " +
                                       DescribeValue(st->value));
    }
    FLEET_ASSIGN_OR_RETURN(s.strategy, StrategySettings(*st->value.ns, a.file()));
  }
  return opt->value;
}

}  // namespace

void AddPaddleBuiltins(BuiltinTable& t) {
  t["@none"] = Builtin{{}, [](State&, const Args&) -> StatusOr<Value> { return Value{}; }};
  t["@program"] = Builtin{{}, [](State&, const Args& a) -> StatusOr<Value> {
                            return NewNamespace("Program", a.call_pos());
                          }};
  t["@guard"] = Builtin{{}, [](State&, const Args& a) -> StatusOr<Value> {
                          return NewNamespace("guard", a.call_pos());
                        }};
  t["@split"] = Builtin{{{"x", true}, {"num_or_sections", true}, {"axis"}}, Split};
  t["@unstack"] = Builtin{{{"x", true}, {"axis"}, {"num"}}, Unstack};
  t["@topk"] = Builtin{{{"x", true}, {"k", true}, {"axis"}, {"largest"}, {"sorted"}}, TopK};
  t["@cast"] = Builtin{{{"x", true}, {"dtype", true}}, Cast};
  t["@pow"] = Builtin{{{"x", true}, {"y", true}}, Pow};
  t["@arange"] = Builtin{{{"start"}, {"end"}, {"step"}, {"dtype"}}, Arange};
  t["@f_cross_entropy"] =
      Builtin{{{"input", true}, {"label", true}, {"ignore_index"}, {"reduction"},
               {"soft_label"}, {"axis"}, {"use_softmax"}},
              FunctionalCrossEntropy};
  t["@f_mse_loss"] = Builtin{{{"input", true}, {"label", true}, {"reduction"}}, MseLoss};
  t["@f_bce_with_logits"] =
      Builtin{{{"logit", true}, {"label", true}, {"reduction"}}, BceWithLogits};
  t["@fleet_init"] = Builtin{{{"role_maker"}, {"is_collective"}, {"strategy"}}, FleetInit};
  t["@strategy"] = Builtin{{}, [](State&, const Args& a) -> StatusOr<Value> {
                             return NewNamespace("DistributedStrategy", a.call_pos());
                           }};
  t["@role_maker"] = Builtin{{{"is_collective"}}, RoleMaker};
  t["@distributed_optimizer"] =
      Builtin{{{"optimizer", true}, {"strategy"}}, DistributedOptimizer};
  t["param"] = Builtin{{{"name", true}}, ParamBuiltin};
  t["create_parameter"] = Builtin{{{"shape", true}, {"dtype"}, {"name"}, {"attr"}, {"is_bias"},
                                   {"default_initializer"}},
                                  CreateParameterBuiltin};
}

}  // namespace fleet::frontend
