// Operators and indexing. On build-time values they compute, with Python's rules (integer
// overflow and division by zero are errors, not wrap-arounds). On program vars they append ops
// the way Paddle's static-mode operator overloads do: a number with +, -, *, / becomes a scale
// op, anything else an element-wise op with Paddle's broadcasting, x @ y a matmul_v2, and
// x[...] a slice (strided_slice when a step is not 1) plus unsqueeze2 for each None.
#include <cmath>
#include <cstdio>
#include <limits>

#include "frontend/interpreter.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

constexpr int32_t kMaxIndex = std::numeric_limits<int32_t>::max();




// Python treats bools as the ints 0 and 1 in arithmetic.
Value AsNumber(const Value& v) {
  if (v.kind != Value::Kind::kBool) return v;
  return IntValue(v.bool_value ? 1 : 0, v.pos);
}

bool IsNumeric(const Value& v) { return v.is_number() || v.kind == Value::Kind::kBool; }

}  // namespace

StatusOr<Value> Interpreter::Unary(const std::string& op, const Value& v, Pos pos) {
  if (v.kind == Value::Kind::kVar) {
    if (op == "+") return v;
    if (op == "-") return AppendSimpleOp("scale", {{"X", v}}, {{"scale", -1.0f}}, pos);
    return ErrorAt(file_, pos, "operator '" + op + "' is not supported on tensors");
  }
  if (!IsNumeric(v)) {
    return ErrorAt(file_, pos, "bad operand for unary '" + op + "': " + DescribeValue(v));
  }
  const Value n = AsNumber(v);
  if (op == "+") return n;
  if (op == "-") {
    if (n.kind == Value::Kind::kFloat) return FloatValue(-n.float_value, pos);
    if (n.int_value == std::numeric_limits<int64_t>::min()) {
      return ErrorAt(file_, pos, "integer overflow");
    }
    return IntValue(-n.int_value, pos);
  }
  if (n.kind != Value::Kind::kInt) return ErrorAt(file_, pos, "'~' takes an int");
  return IntValue(~n.int_value, pos);
}

StatusOr<Value> Interpreter::Binary(const std::string& op, const Value& a, const Value& b,
                                    Pos pos) {
  if (a.kind == Value::Kind::kVar || b.kind == Value::Kind::kVar) {
    return TensorBinary(op, a, b, pos);
  }
  auto bad = [&]() {
    return ErrorAt(file_, pos, "unsupported operand types for " + op + ": " + DescribeValue(a) +
                                   " and " + DescribeValue(b));
  };
  auto too_long = [&]() {
    return ErrorAt(file_, pos, "the result would hold more than " + std::to_string(kMaxItems) +
                                   " items");
  };
  // Sequences: + joins, * repeats.
  const bool a_seq = a.kind == Value::Kind::kString || a.kind == Value::Kind::kList;
  const bool b_seq = b.kind == Value::Kind::kString || b.kind == Value::Kind::kList;
  if (a_seq || b_seq) {
    FLEET_RETURN_IF_ERROR(Charge(a.items.size() + a.text.size() + b.items.size() + b.text.size(),
                                 pos));
    if (op == "+" && a.kind == b.kind && a.tuple == b.tuple) {
      if (a.text.size() + b.text.size() > kMaxItems ||
          a.items.size() + b.items.size() > kMaxItems) {
        return too_long();
      }
      Value out = a;
      out.pos = pos;
      out.text += b.text;
      out.items.insert(out.items.end(), b.items.begin(), b.items.end());
      if (out.kind == Value::Kind::kList) SetDepth(out);
      return out;
    }
    if (op == "*" && (a_seq != b_seq)) {
      const Value& seq = a_seq ? a : b;
      const Value& count = a_seq ? b : a;
      if (count.kind != Value::Kind::kInt) return bad();
      const int64_t n = std::max<int64_t>(count.int_value, 0);
      const size_t unit = seq.kind == Value::Kind::kString ? seq.text.size() : seq.items.size();
      if (unit != 0 && static_cast<uint64_t>(n) > kMaxItems / unit) return too_long();
      FLEET_RETURN_IF_ERROR(Charge(static_cast<size_t>(n) * unit, pos));
      Value out = seq;
      out.pos = pos;
      out.text.clear();
      out.items.clear();
      for (int64_t i = 0; i < n; ++i) {
        out.text += seq.text;
        out.items.insert(out.items.end(), seq.items.begin(), seq.items.end());
      }
      if (out.kind == Value::Kind::kList) SetDepth(out);
      return out;
    }
    if (op == "%" && a.kind == Value::Kind::kString) {
      return ErrorAt(file_, pos, "'%' formatting is not supported; use an f-string");
    }
    return bad();
  }
  if (!IsNumeric(a) || !IsNumeric(b)) return bad();
  const Value x = AsNumber(a), y = AsNumber(b);
  if (op == "@") return bad();
  if (x.kind == Value::Kind::kInt && y.kind == Value::Kind::kInt && op != "/") {
    const int64_t p = x.int_value, q = y.int_value;
    int64_t r = 0;
    if (op == "+" || op == "-" || op == "*") {
      const bool overflow = op == "+"   ? __builtin_add_overflow(p, q, &r)
                            : op == "-" ? __builtin_sub_overflow(p, q, &r)
                                        : __builtin_mul_overflow(p, q, &r);
      if (overflow) return ErrorAt(file_, pos, "integer overflow in " + op);
      return IntValue(r, pos);
    }
    if (op == "//" || op == "%") {
      if (q == 0) return ErrorAt(file_, pos, "integer division or modulo by zero");
      if (p == std::numeric_limits<int64_t>::min() && q == -1) {
        return ErrorAt(file_, pos, "integer overflow in " + op);
      }
      int64_t quot = p / q, rem = p % q;
      if (rem != 0 && ((rem < 0) != (q < 0))) {  // Python floors
        quot -= 1;
        rem += q;
      }
      return IntValue(op == "//" ? quot : rem, pos);
    }
    if (op == "**") {
      if (q < 0) return FloatValue(std::pow(static_cast<double>(p), static_cast<double>(q)), pos);
      if (p == 0 || p == 1) return IntValue(q == 0 ? 1 : p, pos);
      if (p == -1) return IntValue(q % 2 == 0 ? 1 : -1, pos);
      int64_t result = 1;
      for (int64_t i = 0; i < q; ++i) {  // |p| >= 2 overflows within 63 rounds
        if (__builtin_mul_overflow(result, p, &result)) {
          return ErrorAt(file_, pos, "integer overflow in **");
        }
      }
      return IntValue(result, pos);
    }
    return bad();
  }
  const double p = x.number(), q = y.number();
  if (op == "+") return FloatValue(p + q, pos);
  if (op == "-") return FloatValue(p - q, pos);
  if (op == "*") return FloatValue(p * q, pos);
  if (op == "/" || op == "//" || op == "%") {
    if (q == 0.0) return ErrorAt(file_, pos, "division by zero");
    if (op == "/") return FloatValue(p / q, pos);
    const double fl = std::floor(p / q);
    if (op == "//") return FloatValue(fl, pos);
    double m = std::fmod(p, q);
    if (m != 0.0 && ((m < 0) != (q < 0))) m += q;
    return FloatValue(m, pos);
  }
  if (op == "**") {
    if (p == 0.0 && q < 0) return ErrorAt(file_, pos, "0.0 cannot be raised to a negative power");
    return FloatValue(std::pow(p, q), pos);
  }
  return bad();
}

StatusOr<Value> Interpreter::ScalarTensor(const Value& number, const Value& like, Pos pos) {
  const ir::Var* var = state_.builder.FindVar(like.text);
  if (var == nullptr) return ErrorAt(file_, pos, "variable '" + like.text + "' is not declared");
  const std::string layer = state_.builder.NewLayerName("fill_constant");
  const std::string out = state_.builder.NewTmp(layer);
  ir::Op op = ir::MakeOp("fill_constant", {}, {{"Out", {out}}},
                         {{"shape", std::vector<int64_t>{1}},
                          {"value", static_cast<float>(AsNumber(number).number())},
                          {"dtype", static_cast<int32_t>(var->dtype)}});
  Status st = state_.builder.AppendOp(std::move(op));
  if (!st.ok()) return ErrorAt(file_, pos, st.message());
  state_.builder.SetStopGradient({out});
  return VarValue(out, pos);
}

StatusOr<Value> Interpreter::TensorBinary(const std::string& op, const Value& a, const Value& b,
                                          Pos pos) {
  const bool a_var = a.kind == Value::Kind::kVar, b_var = b.kind == Value::Kind::kVar;
  if ((!a_var && !IsNumeric(a)) || (!b_var && !IsNumeric(b))) {
    return ErrorAt(file_, pos, "unsupported operand types for " + op + ": " + DescribeValue(a) +
                                   " and " + DescribeValue(b));
  }
  if (op == "@") {
    if (!a_var || !b_var) return ErrorAt(file_, pos, "'@' multiplies two tensors");
    return AppendSimpleOp("matmul_v2", {{"X", a}, {"Y", b}}, {}, pos);
  }
  // A number on one side of + - * / is folded into a scale op, as Paddle does.
  if (a_var != b_var && (op == "+" || op == "-" || op == "*" || op == "/")) {
    const Value& var = a_var ? a : b;
    const double n = AsNumber(a_var ? b : a).number();
    float scale = 1.0f, bias = 0.0f;
    if (op == "+") {
      bias = static_cast<float>(n);
    } else if (op == "-") {
      scale = a_var ? 1.0f : -1.0f;
      bias = static_cast<float>(a_var ? -n : n);
    } else if (op == "*") {
      scale = static_cast<float>(n);
    } else if (a_var) {
      if (n == 0.0) return ErrorAt(file_, pos, "division of a tensor by zero");
      scale = static_cast<float>(1.0 / n);
    }
    if (!(op == "/" && !a_var)) {
      return AppendSimpleOp("scale", {{"X", var}}, {{"scale", scale}, {"bias", bias}}, pos);
    }
  }
  if (op == "**" && a_var && !b_var) {
    return AppendSimpleOp("pow", {{"X", a}},
                          {{"factor", static_cast<float>(AsNumber(b).number())}}, pos);
  }
  static const std::map<std::string, std::string, std::less<>> kOps = {
      {"+", "elementwise_add"},      {"-", "elementwise_sub"},  {"*", "elementwise_mul"},
      {"/", "elementwise_div"},      {"//", "elementwise_floordiv"},
      {"%", "elementwise_mod"},      {"**", "elementwise_pow"}};
  auto it = kOps.find(op);
  if (it == kOps.end()) return ErrorAt(file_, pos, "operator '" + op + "' on tensors");
  Value x = a, y = b;
  if (!a_var) {
    FLEET_ASSIGN_OR_RETURN(x, ScalarTensor(a, b, pos));
  }
  if (!b_var) {
    FLEET_ASSIGN_OR_RETURN(y, ScalarTensor(b, a, pos));
  }
  return AppendSimpleOp(it->second, {{"X", x}, {"Y", y}}, {{"axis", int32_t{-1}}}, pos);
}

StatusOr<Value> Interpreter::Compare(const std::string& op, const Value& a, const Value& b,
                                     Pos pos) {
  if (op == "is" || op == "is not") {
    const bool same = (a.kind == Value::Kind::kNone && b.kind == Value::Kind::kNone) ||
                      (a.kind == Value::Kind::kBool && b.kind == Value::Kind::kBool &&
                       a.bool_value == b.bool_value) ||
                      (a.kind == b.kind && a.kind != Value::Kind::kNone &&
                       a.kind != Value::Kind::kBool && ValuesEqual(a, b));
    return BoolValue(op == "is" ? same : !same, pos);
  }
  FLEET_RETURN_IF_ERROR(Charge(a.items.size() + b.items.size() + b.keys.size(), pos));
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.kind == Value::Kind::kList) {
      for (const Value& item : b.items) found = found || ValuesEqual(a, item);
    } else if (b.kind == Value::Kind::kDict) {
      for (const std::string& k : b.keys) found = found || (a.kind == Value::Kind::kString && a.text == k);
    } else if (b.kind == Value::Kind::kString && a.kind == Value::Kind::kString) {
      found = b.text.find(a.text) != std::string::npos;
    } else {
      return ErrorAt(file_, pos, "'" + op + "' needs a list, dict or string on its right, got " +
                                     DescribeValue(b));
    }
    return BoolValue(op == "in" ? found : !found, pos);
  }
  const bool a_var = a.kind == Value::Kind::kVar, b_var = b.kind == Value::Kind::kVar;
  if ((a_var || b_var) && !a.is_none() && !b.is_none()) {
    static const std::map<std::string, std::string, std::less<>> kOps = {
        {"<", "less_than"},     {"<=", "less_equal"}, {">", "greater_than"},
        {">=", "greater_equal"}, {"==", "equal"},      {"!=", "not_equal"}};
    if (!(a_var || IsNumeric(a)) || !(b_var || IsNumeric(b))) {
      return ErrorAt(file_, pos, "cannot compare " + DescribeValue(a) + " and " +
                                     DescribeValue(b));
    }
    Value x = a, y = b;
    if (!a_var) {
      FLEET_ASSIGN_OR_RETURN(x, ScalarTensor(a, b, pos));
    }
    if (!b_var) {
      FLEET_ASSIGN_OR_RETURN(y, ScalarTensor(b, a, pos));
    }
    return AppendSimpleOp(kOps.at(op), {{"X", x}, {"Y", y}}, {{"axis", int32_t{-1}}}, pos);
  }
  if (op == "==") return BoolValue(ValuesEqual(a, b), pos);
  if (op == "!=") return BoolValue(!ValuesEqual(a, b), pos);
  int order = 0;
  if (IsNumeric(a) && IsNumeric(b)) {
    const Value x = AsNumber(a), y = AsNumber(b);
    if (x.kind == Value::Kind::kInt && y.kind == Value::Kind::kInt) {
      order = x.int_value < y.int_value ? -1 : x.int_value > y.int_value ? 1 : 0;
    } else {
      order = x.number() < y.number() ? -1 : x.number() > y.number() ? 1 : 0;
      if (std::isnan(x.number()) || std::isnan(y.number())) return BoolValue(false, pos);
    }
  } else if (a.kind == Value::Kind::kString && b.kind == Value::Kind::kString) {
    order = a.text.compare(b.text);
  } else {
    return ErrorAt(file_, pos, "'" + op + "' is not supported between " + DescribeValue(a) +
                                   " and " + DescribeValue(b));
  }
  bool r = op == "<" ? order < 0 : op == "<=" ? order <= 0 : op == ">" ? order > 0 : order >= 0;
  return BoolValue(r, pos);
}

StatusOr<Value> Interpreter::Index(const Value& object, const std::vector<Value>& index,
                                   Pos pos) {
  if (object.kind == Value::Kind::kVar) return TensorIndex(object, index, pos);
  FLEET_RETURN_IF_ERROR(Charge(object.keys.size(), pos));
  if (index.size() != 1) {
    return ErrorAt(file_, pos, DescribeValue(object) + " takes one index");
  }
  const Value& i = index[0];
  if (object.kind == Value::Kind::kDict) {
    if (i.kind == Value::Kind::kString) {
      for (size_t k = 0; k < object.keys.size(); ++k) {
        if (object.keys[k] == i.text) return object.items[k];
      }
    }
    return ErrorAt(file_, i.pos, "key " + (i.kind == Value::Kind::kString
                                               ? QuoteForMessage(i.text)
                                               : DescribeValue(i)) +
                                     " is not in the dict" +
                                     (object.keys.empty()
                                          ? ""
                                          : " (its keys: " + JoinWords(object.keys) + ")"));
  }
  if (object.kind != Value::Kind::kList && object.kind != Value::Kind::kString) {
    return ErrorAt(file_, pos, DescribeValue(object) + " cannot be indexed");
  }
  const bool is_string = object.kind == Value::Kind::kString;
  const int64_t n = static_cast<int64_t>(is_string ? object.text.size() : object.items.size());
  if (i.kind == Value::Kind::kInt || i.kind == Value::Kind::kBool) {
    const int64_t raw = AsNumber(i).int_value;
    const int64_t k = raw < 0 ? raw + n : raw;
    if (k < 0 || k >= n) {
      return ErrorAt(file_, i.pos, "index " + std::to_string(raw) + " is out of range for " +
                                       std::to_string(n) + " item" + (n == 1 ? "" : "s"));
    }
    if (!is_string) return object.items[static_cast<size_t>(k)];
    Value c;
    c.kind = Value::Kind::kString;
    c.pos = pos;
    c.text = std::string(1, object.text[static_cast<size_t>(k)]);
    return c;
  }
  if (i.kind != Value::Kind::kSlice) {
    return ErrorAt(file_, i.pos, "indices are ints or slices, got " + DescribeValue(i));
  }
  int64_t bounds[3] = {0, n, 1};
  for (int part = 0; part < 3; ++part) {
    const Value& b = i.items[static_cast<size_t>(part)];
    if (b.is_none()) continue;
    if (b.kind != Value::Kind::kInt) {
      return ErrorAt(file_, b.pos, "slice bounds are ints, got " + DescribeValue(b));
    }
    bounds[part] = b.int_value;
  }
  const int64_t step = bounds[2];
  if (step == 0) return ErrorAt(file_, i.pos, "slice step cannot be zero");
  // Python's slice.indices().
  auto clamp = [&](const Value& b, int64_t value, int64_t def) {
    if (b.is_none()) return def;
    int64_t v = value < 0 ? value + n : value;
    if (step > 0) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  FLEET_RETURN_IF_ERROR(Charge(static_cast<size_t>(n), pos));
  const int64_t start = clamp(i.items[0], bounds[0], step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(i.items[1], bounds[1], step > 0 ? n : -1);
  Value out = object;
  out.pos = pos;
  out.items.clear();
  out.text.clear();
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (is_string) {
      out.text += object.text[static_cast<size_t>(k)];
    } else {
      out.items.push_back(object.items[static_cast<size_t>(k)]);
    }
  }
  if (!is_string) SetDepth(out);
  return out;
}

StatusOr<Value> Interpreter::TensorIndex(const Value& x, const std::vector<Value>& index,
                                         Pos pos) {
  const ir::Var* var = state_.builder.FindVar(x.text);
  if (var == nullptr) return ErrorAt(file_, pos, "variable '" + x.text + "' is not declared");
  const int64_t rank = static_cast<int64_t>(var->shape.size());
  int64_t consuming = 0;
  int ellipses = 0;
  for (const Value& v : index) {
    if (v.kind == Value::Kind::kEllipsis) {
      ++ellipses;
    } else if (!v.is_none()) {
      ++consuming;
    }
  }
  if (ellipses > 1) return ErrorAt(file_, pos, "an index can hold only one '...'");
  if (consuming > rank) {
    return ErrorAt(file_, pos, "too many indices for '" + x.text + "' of rank " +
                                   std::to_string(rank));
  }
  std::vector<int32_t> axes, starts, ends, strides, decrease;
  std::vector<int32_t> none_axes;
  int64_t dim = 0, out_dim = 0;
  for (const Value& v : index) {
    if (v.kind == Value::Kind::kEllipsis) {
      const int64_t skip = rank - consuming;
      dim += skip;
      out_dim += skip;
      continue;
    }
    if (v.is_none()) {
      none_axes.push_back(static_cast<int32_t>(out_dim++));
      continue;
    }
    const int64_t size = var->shape[static_cast<size_t>(dim)];
    if (v.kind == Value::Kind::kInt) {
      const int64_t i = v.int_value;
      if (size >= 0 && (i < -size || i >= size)) {
        return ErrorAt(file_, v.pos, "index " + std::to_string(i) + " is out of range for dim " +
                                         std::to_string(dim) + " of size " +
                                         std::to_string(size));
      }
      if (i < std::numeric_limits<int32_t>::min() || i >= kMaxIndex) {
        return ErrorAt(file_, v.pos, "index " + std::to_string(i) + " is out of range");
      }
      axes.push_back(static_cast<int32_t>(dim));
      starts.push_back(static_cast<int32_t>(i));
      ends.push_back(i == -1 ? kMaxIndex : static_cast<int32_t>(i + 1));
      strides.push_back(1);
      decrease.push_back(static_cast<int32_t>(dim));
      ++dim;
      continue;
    }
    if (v.kind != Value::Kind::kSlice) {
      return ErrorAt(file_, v.pos, std::string("a tensor is indexed by ints, slices, None and "
                                               "...; got ") + DescribeValue(v) +
                                       (v.kind == Value::Kind::kVar
                                            ? " (use gather or index_select)"
                                            : ""));
    }
    int64_t b[3] = {0, kMaxIndex, 1};
    for (int part = 0; part < 3; ++part) {
      const Value& bound = v.items[static_cast<size_t>(part)];
      if (bound.is_none()) continue;
      if (bound.kind != Value::Kind::kInt) {
        return ErrorAt(file_, bound.pos, "slice bounds of a tensor are ints, got " +
                                             DescribeValue(bound));
      }
      if (bound.int_value < std::numeric_limits<int32_t>::min() ||
          bound.int_value > kMaxIndex) {
        return ErrorAt(file_, bound.pos, "slice bound " + std::to_string(bound.int_value) +
                                             " is out of range");
      }
      b[part] = bound.int_value;
    }
    if (b[2] <= 0) {
      return ErrorAt(file_, v.pos, "a tensor slice takes a positive step (flip reverses)");
    }
    ++dim;
    ++out_dim;
    if (v.items[0].is_none() && v.items[1].is_none() && b[2] == 1) continue;  // x[:]
    axes.push_back(static_cast<int32_t>(dim - 1));
    starts.push_back(static_cast<int32_t>(b[0]));
    ends.push_back(static_cast<int32_t>(b[1]));
    strides.push_back(static_cast<int32_t>(b[2]));
  }
  Value out = x;
  out.pos = pos;
  if (!axes.empty()) {
    bool unit = true;
    for (int32_t s : strides) unit = unit && s == 1;
    std::map<std::string, ir::Attribute> attrs = {
        {"axes", axes}, {"starts", starts}, {"ends", ends}, {"decrease_axis", decrease},
        {"infer_flags", std::vector<int32_t>(axes.size(), 1)}};
    if (!unit) attrs["strides"] = strides;
    FLEET_ASSIGN_OR_RETURN(out, AppendSimpleOp(unit ? "slice" : "strided_slice",
                                               {{"Input", out}}, attrs, pos));
  }
  if (!none_axes.empty()) {
    FLEET_ASSIGN_OR_RETURN(out, AppendSimpleOp("unsqueeze2", {{"X", out}},
                                               {{"axes", none_axes}}, pos));
  }
  return out;
}

// ---- formatting ----

std::string FormatValue(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.bool_value ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.int_value);
    case Value::Kind::kFloat: {
      const double d = v.float_value;
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      // The shortest text that reads back as the same double, as Python's repr.
      char buf[40];
      for (int precision = 1; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof(buf), "%.*g", precision, d);
        if (std::strtod(buf, nullptr) == d) break;
      }
      std::string s = buf;
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return s;
    }
    case Value::Kind::kString: return v.text;
    case Value::Kind::kVar: return v.text;
    case Value::Kind::kList: {
      std::string s = v.tuple ? "(" : "[";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) s += ", ";
        const Value& item = v.items[i];
        s += item.kind == Value::Kind::kString ? "'" + item.text + "'" : FormatValue(item);
        if (s.size() > kMaxItems) return s;
      }
      if (v.tuple && v.items.size() == 1) s += ",";
      return s + (v.tuple ? ")" : "]");
    }
    default:
      return DescribeValue(v);
  }
}

StatusOr<std::string> FormatSpec(const Value& v, std::string_view spec) {
  // [[fill]align][sign][0][width][.precision][type]
  size_t i = 0;
  char fill = ' ', align = 0, sign = '-';
  if (spec.size() >= 2 && (spec[1] == '<' || spec[1] == '>' || spec[1] == '^')) {
    fill = spec[0];
    align = spec[1];
    i = 2;
  } else if (!spec.empty() && (spec[0] == '<' || spec[0] == '>' || spec[0] == '^')) {
    align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  bool zero = false;
  if (i < spec.size() && spec[i] == '0') {
    zero = true;
    ++i;
  }
  int width = 0, precision = -1;
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) {
    width = width * 10 + (spec[i++] - '0');
    if (width > 1000) return InvalidArgument("format width over 1000");
  }
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = 0;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) {
      precision = precision * 10 + (spec[i++] - '0');
      if (precision > 100) return InvalidArgument("format precision over 100");
    }
  }
  char type = 0;
  if (i < spec.size()) type = spec[i++];
  if (i != spec.size()) {
    return InvalidArgument("unsupported format spec '" + std::string(spec) + "'");
  }
  std::string body;
  const Value n = AsNumber(v);
  if (type == 's' || (type == 0 && !IsNumeric(v))) {
    body = FormatValue(v);
    if (precision >= 0 && body.size() > static_cast<size_t>(precision)) body.resize(precision);
    if (!align) align = '<';
  } else if (type == 'd') {
    if (n.kind != Value::Kind::kInt) {
      return InvalidArgument("format 'd' takes an int, got " + DescribeValue(v));
    }
    body = std::to_string(n.int_value);
  } else if (type == 'f' || type == 'e' || type == 'g' || type == '%' || type == 0) {
    if (!IsNumeric(v)) {
      return InvalidArgument("format '" + std::string(1, type) + "' takes a number, got " +
                             DescribeValue(v));
    }
    if (type == 0 && precision < 0) {
      body = FormatValue(n);
    } else {
      double d = n.number();
      const char conv = type == 0 ? 'g' : type == '%' ? 'f' : type;
      if (type == '%') d *= 100.0;
      char buf[512];
      std::snprintf(buf, sizeof(buf), (std::string("%.*") + conv).c_str(),
                    precision < 0 ? 6 : precision, d);
      body = buf;
      if (type == '%') body += "%";
    }
  } else {
    return InvalidArgument("unsupported format type '" + std::string(1, type) + "'");
  }
  if (sign != '-' && IsNumeric(v) && !body.empty() && body[0] != '-') {
    body.insert(body.begin(), sign);
  }
  if (static_cast<int>(body.size()) < width) {
    const size_t pad = static_cast<size_t>(width) - body.size();
    if (zero && !align && IsNumeric(v)) {
      const size_t at = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
                            ? 1 : 0;
      body.insert(at, pad, '0');
    } else {
      const char a = align ? align : '>';
      if (a == '<') {
        body.append(pad, fill);
      } else if (a == '>') {
        body.insert(0, pad, fill);
      } else {
        body.insert(0, pad / 2, fill);
        body.append(pad - pad / 2, fill);
      }
    }
  }
  return body;
}

}  // namespace fleet::frontend
