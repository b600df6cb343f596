// The entry points of the frontend, and the builtins that record what the training loop needs:
// minimize() (the loss and optimizer), stop_gradient(), metric().
#include "frontend/frontend.h"

#include <cctype>
#include <fstream>
#include <limits>
#include <sstream>

#include "frontend/builtins.h"
#include "frontend/interpreter.h"
#include "frontend/syntax.h"
#include "frontend/values.h"
#include "support/input_file.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

std::string PosText(Pos p) { return std::to_string(p.line) + ":" + std::to_string(p.col); }

}  // namespace

StatusOr<ir::Attribute> ValueToAttr(const Value& v, const ir::Attribute& like,
                                    std::string_view attr) {
  using K = Value::Kind;
  auto fail = [&]() -> Status {
    return InvalidArgument("attribute '" + std::string(attr) + "' expects " +
                           std::string(ir::AttrTypeName(ir::AttrTypeOf(like))) + ", got " +
                           DescribeValue(v));
  };
  // Paddle's APIs take a single number where a list is expected (axes=1 for axes=[1]).
  const std::vector<Value> single = {v};
  const std::vector<Value>& items = v.kind == K::kList ? v.items : single;
  auto int_list = [&](auto out) -> StatusOr<ir::Attribute> {
    using E = typename decltype(out)::value_type;
    if (v.kind != K::kList && v.kind != K::kInt) return fail();
    for (const Value& item : items) {
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
    if (v.kind != K::kList && !v.is_number()) return fail();
    for (const Value& item : items) {
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

namespace {

StatusOr<Value> Minimize(State& s, const Args& a) {
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

StatusOr<Value> StopGradient(State& s, const Args& a) {
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
StatusOr<Value> Metric(State& s, const Args& a) {
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

}  // namespace

Status SpendWork(State& s, size_t units, std::string_view file, Pos pos) {
  s.work += static_cast<int64_t>(std::min<size_t>(units, kMaxWork)) + 1;
  if (s.work <= kMaxWork) return OkStatus();
  return ErrorAt(file, pos, "the program does more than " + std::to_string(kMaxWork) +
                                " units of build-time work (values copied, scanned or formatted)");
}

Interpreter::Interpreter(std::string_view file, const ops::OpRegistry& registry)
    : file_(file), state_(registry), globals_(std::make_shared<Scope>()) {
  AddLayerBuiltins(table_);
  AddObjectBuiltins(table_);
  AddPythonBuiltins(table_);
  AddPaddleBuiltins(table_);
  table_["minimize"] = Builtin{
      {{"loss", true}, {"optimizer", true}, {"grad_clip"}, {"regularization"}}, Minimize};
  table_["stop_gradient"] = Builtin{{{"x", true}}, StopGradient};
  table_["metric"] = Builtin{{{"name", true}, {"x", true}}, Metric};
}

Status Interpreter::MarkStopGradient(const std::string& var) {
  state_.builder.SetStopGradient({var});
  for (const auto& n : state_.no_grad) {
    if (n == var) return OkStatus();
  }
  state_.no_grad.push_back(var);
  return OkStatus();
}

Status Interpreter::CheckPaddleApis() const {
  for (const PaddleApi& api : PaddleApis()) {
    const std::string target(api.target);
    auto builtin = table_.find(target);
    const ops::OpSchema* schema = state_.builder.Schema(target);
    if (builtin == table_.end() && schema == nullptr) {
      return Internal(std::string(api.name) + " maps to '" + target + "', which is neither a "
                      "builtin nor an op");
    }
    auto takes = [&](const std::string& name) {
      if (builtin != table_.end()) {
        for (const Param& p : builtin->second.params) {
          if (p.name == name) return true;
        }
        return false;
      }
      if (name == "act" || schema->FindAttr(name) != nullptr) return true;
      if ((name == "x" || name == "input") && !schema->inputs.empty()) return true;
      for (const auto& slot : schema->inputs) {
        std::string lower = slot.name;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == name) return true;
      }
      return false;
    };
    std::vector<PaddleParam> params = ParsePaddleParams(api.params);
    for (const PaddleParam& d : ParsePaddleParams(api.defaults)) params.push_back(d);
    const size_t n_params = ParsePaddleParams(api.params).size();
    for (size_t i = 0; i < params.size(); ++i) {
      // Defaults are key=value: the key is a target name.
      const std::string name = i < n_params ? params[i].target : params[i].paddle;
      if (name.empty()) continue;
      if (name[0] == '@') {
        if (name != "@act" && name != "@alpha" && name != "@training") {
          return Internal(std::string(api.name) + ": unknown adapter " + name);
        }
        continue;
      }
      if (!takes(name)) {
        return Internal(std::string(api.name) + ": '" + target + "' takes no '" + name + "'");
      }
    }
  }
  return OkStatus();
}

Status CheckPaddleApiTable() {
  return Interpreter("table", ops::BuiltinOps()).CheckPaddleApis();
}

StatusOr<ParsedProgram> ParseProgramText(std::string_view text, std::string_view file_name) {
  FLEET_ASSIGN_OR_RETURN(Block block, ParseProgram(text, file_name));
  Interpreter interp(file_name, ops::BuiltinOps());
  FLEET_RETURN_IF_ERROR(interp.Run(block));
  return std::move(interp).Finish();
}

StatusOr<ParsedProgram> ParseProgramFile(const std::filesystem::path& file) {
  FLEET_ASSIGN_OR_RETURN(std::string text,
                         ReadInputFileText(file, "program file", kMaxInputTextBytes));
  return ParseProgramText(text, file.string());
}

}  // namespace fleet::frontend
