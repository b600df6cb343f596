// Python's builtin functions that model code uses at build time: len, range, enumerate, zip,
// list, tuple, int, float, str, bool, min, max, abs, sum, round, reversed, print.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <limits>

#include "frontend/interpreter.h"
#include "support/logging.h"
#include "support/text.h"

namespace fleet::frontend {
namespace {

// Variadic builtins take their arguments as arg0, arg1, ...
constexpr int kMaxVariadic = 16;

std::vector<Param> Variadic(int required) {
  std::vector<Param> p;
  for (int i = 0; i < kMaxVariadic; ++i) p.push_back({"arg" + std::to_string(i), i < required});
  return p;
}

std::vector<const Arg*> Positional(const Args& a) {
  std::vector<const Arg*> out;
  for (int i = 0; i < kMaxVariadic; ++i) {
    const Arg* arg = a.Get("arg" + std::to_string(i));
    if (arg == nullptr) break;
    out.push_back(arg);
  }
  return out;
}

// A whole string as a number (surrounding blanks allowed), as int() / float() read one; ints
// must fit in 53 bits so that the double holding them is exact.
std::optional<double> ParseNumber(std::string_view text, bool integer) {
  std::string s(text);
  const size_t b = s.find_first_not_of(" \t\n");
  const size_t e = s.find_last_not_of(" \t\n");
  if (b == std::string::npos) return std::nullopt;
  s = s.substr(b, e - b + 1);
  char* end = nullptr;
  errno = 0;
  if (integer) {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v > (1LL << 53) || v < -(1LL << 53)) return std::nullopt;
    return static_cast<double>(v);
  }
  const double d = std::strtod(s.c_str(), &end);
  if (errno == ERANGE || *end != '\0') return std::nullopt;
  return d;
}




// The items of a list, tuple, dict (its keys) or string.
StatusOr<std::vector<Value>> Items(State& s, const Args& a, const Arg& arg) {
  const Value& v = arg.value;
  FLEET_RETURN_IF_ERROR(SpendWork(s, v.items.size() + v.text.size(), a.file(), arg.pos));
  if (v.kind == Value::Kind::kList) return v.items;
  std::vector<Value> out;
  if (v.kind == Value::Kind::kDict || v.kind == Value::Kind::kString) {
    const size_t n = v.kind == Value::Kind::kDict ? v.keys.size() : v.text.size();
    for (size_t i = 0; i < n; ++i) {
      Value s;
      s.kind = Value::Kind::kString;
      s.text = v.kind == Value::Kind::kDict ? v.keys[i] : std::string(1, v.text[i]);
      s.pos = v.pos;
      out.push_back(std::move(s));
    }
    return out;
  }
  return frontend::ErrorAt(a.file(), arg.pos,
                           a.fn() + ": expected a list, tuple, dict or string, got " +
                               DescribeValue(v) +
                               (v.kind == Value::Kind::kVar
                                    ? " (a variable's values exist only when the program runs)"
                                    : ""));
}

StatusOr<Value> Len(State& s, const Args& a) {
  const Arg* x = a.Get("arg0");
  if (x->value.kind == Value::Kind::kVar) {
    return a.ErrorAt("arg0", "len() of the variable '" + x->value.text +
                                 "': use .shape[0] for its static first dim");
  }
  FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Items(s, a, *x));
  return IntValue(static_cast<int64_t>(items.size()), a.call_pos());
}

StatusOr<Value> Range(State& s, const Args& a) {
  std::vector<const Arg*> args = Positional(a);
  if (args.size() > 3) return a.Error("range takes 1 to 3 arguments");
  int64_t b[3] = {0, 0, 1};
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i]->value.kind != Value::Kind::kInt) {
      return frontend::ErrorAt(a.file(), args[i]->pos, "range: arguments must be ints, got " +
                                                           DescribeValue(args[i]->value));
    }
  }
  if (args.size() == 1) {
    b[1] = args[0]->value.int_value;
  } else {
    b[0] = args[0]->value.int_value;
    b[1] = args[1]->value.int_value;
    if (args.size() == 3) b[2] = args[2]->value.int_value;
  }
  if (b[2] == 0) return a.Error("range: step must not be zero");
  // The count, computed without overflow.
  const long double span = static_cast<long double>(b[1]) - static_cast<long double>(b[0]);
  const long double count = std::ceil(span / static_cast<long double>(b[2]));
  if (count > static_cast<long double>(kMaxItems)) {
    return a.Error("range of more than " + std::to_string(kMaxItems) + " items");
  }
  FLEET_RETURN_IF_ERROR(SpendWork(s, static_cast<size_t>(std::max<long double>(count, 0)),
                                  a.file(), a.call_pos()));
  std::vector<Value> items;
  for (int64_t i = b[0]; b[2] > 0 ? i < b[1] : i > b[1]; i += b[2]) {
    items.push_back(IntValue(i, a.call_pos()));
    if (b[2] > 0 ? i > std::numeric_limits<int64_t>::max() - b[2]
                 : i < std::numeric_limits<int64_t>::min() - b[2]) {
      break;
    }
  }
  return ListValue(std::move(items), a.call_pos());
}

StatusOr<Value> Enumerate(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Items(s, a, *a.Get("iterable")));
  FLEET_ASSIGN_OR_RETURN(int64_t start, a.Int("start", 0));
  std::vector<Value> out;
  for (size_t i = 0; i < items.size(); ++i) {
    out.push_back(ListValue({IntValue(start + static_cast<int64_t>(i), a.call_pos()), std::move(items[i])},
                       a.call_pos(), true));
  }
  return ListValue(std::move(out), a.call_pos());
}

StatusOr<Value> Zip(State& s, const Args& a) {
  std::vector<std::vector<Value>> lists;
  size_t n = std::numeric_limits<size_t>::max();
  for (const Arg* arg : Positional(a)) {
    FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Items(s, a, *arg));
    n = std::min(n, items.size());
    lists.push_back(std::move(items));
  }
  if (lists.empty()) n = 0;
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) {
    std::vector<Value> row;
    for (auto& l : lists) row.push_back(std::move(l[i]));
    out.push_back(ListValue(std::move(row), a.call_pos(), true));
  }
  return ListValue(std::move(out), a.call_pos());
}

Builtin Sequence(bool tuple) {
  return Builtin{{{"iterable"}}, [tuple](State& s, const Args& a) -> StatusOr<Value> {
                   if (!a.Has("iterable")) return ListValue({}, a.call_pos(), tuple);
                   FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Items(s, a, *a.Get("iterable")));
                   return ListValue(std::move(items), a.call_pos(), tuple);
                 }};
}

StatusOr<Value> ToInt(State&, const Args& a) {
  const Arg* x = a.Get("x");
  if (x == nullptr) return IntValue(0, a.call_pos());
  const Value& v = x->value;
  if (v.kind == Value::Kind::kInt) return IntValue(v.int_value, a.call_pos());
  if (v.kind == Value::Kind::kBool) return IntValue(v.bool_value ? 1 : 0, a.call_pos());
  if (v.kind == Value::Kind::kFloat) {
    if (!std::isfinite(v.float_value) || std::fabs(v.float_value) >= 9.2e18) {
      return a.ErrorAt("x", "int() of a float out of range");
    }
    return IntValue(static_cast<int64_t>(v.float_value), a.call_pos());
  }
  if (v.kind == Value::Kind::kString) {
    std::optional<double> n = ParseNumber(v.text, true);
    if (!n) return a.ErrorAt("x", "int() of " + QuoteForMessage(v.text));
    return IntValue(static_cast<int64_t>(*n), a.call_pos());
  }
  return a.ErrorAt("x", "int() of " + DescribeValue(v));
}

StatusOr<Value> ToFloat(State&, const Args& a) {
  const Arg* x = a.Get("x");
  if (x == nullptr) return FloatValue(0.0, a.call_pos());
  const Value& v = x->value;
  if (v.is_number()) return FloatValue(v.number(), a.call_pos());
  if (v.kind == Value::Kind::kBool) return FloatValue(v.bool_value ? 1.0 : 0.0, a.call_pos());
  if (v.kind == Value::Kind::kString) {
    std::optional<double> d = ParseNumber(v.text, false);
    if (!d) return a.ErrorAt("x", "float() of " + QuoteForMessage(v.text));
    return FloatValue(*d, a.call_pos());
  }
  return a.ErrorAt("x", "float() of " + DescribeValue(v));
}

StatusOr<Value> ToStr(State& s, const Args& a) {
  Value out = StringValue("", a.call_pos());
  if (const Arg* x = a.Get("x")) out.text = FormatValue(x->value);
  FLEET_RETURN_IF_ERROR(SpendWork(s, out.text.size(), a.file(), a.call_pos()));
  return out;
}

StatusOr<Value> ToBool(State&, const Args& a) {
  Value b;
  b.kind = Value::Kind::kBool;
  b.pos = a.call_pos();
  const Arg* x = a.Get("x");
  if (x == nullptr) return b;
  const Value& v = x->value;
  switch (v.kind) {
    case Value::Kind::kBool: b.bool_value = v.bool_value; break;
    case Value::Kind::kInt: b.bool_value = v.int_value != 0; break;
    case Value::Kind::kFloat: b.bool_value = v.float_value != 0.0; break;
    case Value::Kind::kString: b.bool_value = !v.text.empty(); break;
    case Value::Kind::kList:
    case Value::Kind::kDict: b.bool_value = !v.items.empty(); break;
    case Value::Kind::kVar:
      return a.ErrorAt("x", "bool() of a variable is known only when the program runs");
    default: b.bool_value = true; break;
  }
  return b;
}

// min / max of numbers or strings: over one list argument, or over the arguments.
Builtin Extreme(bool want_max) {
  return Builtin{Variadic(1), [want_max](State& s, const Args& a) -> StatusOr<Value> {
    std::vector<const Arg*> args = Positional(a);
    std::vector<Value> items;
    if (args.size() == 1) {
      FLEET_ASSIGN_OR_RETURN(items, Items(s, a, *args[0]));
    } else {
      for (const Arg* arg : args) items.push_back(arg->value);
    }
    if (items.empty()) return a.Error(a.fn() + "() of an empty sequence");
    Value best = items[0];
    for (const Value& v : items) {
      const bool numbers = v.is_number() && best.is_number();
      const bool strings = v.kind == Value::Kind::kString && best.kind == Value::Kind::kString;
      if (!numbers && !strings) {
        return a.Error(a.fn() + "() compares numbers or strings, got " + DescribeValue(v) +
                       (v.kind == Value::Kind::kVar ? " (use elementwise_max/min on tensors)"
                                                    : ""));
      }
      const bool less = numbers ? v.number() < best.number() : v.text < best.text;
      const bool greater = numbers ? v.number() > best.number() : v.text > best.text;
      if (want_max ? greater : less) best = v;
    }
    return best;
  }};
}

StatusOr<Value> Abs(State&, const Args& a) {
  const Value& v = a.Get("x")->value;
  if (v.kind == Value::Kind::kInt) {
    if (v.int_value == std::numeric_limits<int64_t>::min()) return a.Error("integer overflow");
    return IntValue(v.int_value < 0 ? -v.int_value : v.int_value, a.call_pos());
  }
  if (v.kind == Value::Kind::kFloat) return FloatValue(std::fabs(v.float_value), a.call_pos());
  return a.ErrorAt("x", "abs() takes a number, got " + DescribeValue(v) +
                            (v.kind == Value::Kind::kVar ? " (paddle.abs works on tensors)" : ""));
}

StatusOr<Value> Sum(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Items(s, a, *a.Get("iterable")));
  bool is_float = false;
  int64_t isum = 0;
  double fsum = 0.0;
  if (const Arg* start = a.Get("start")) items.insert(items.begin(), start->value);
  for (const Value& v : items) {
    if (v.kind == Value::Kind::kInt) {
      if (__builtin_add_overflow(isum, v.int_value, &isum)) return a.Error("integer overflow");
      fsum += static_cast<double>(v.int_value);
    } else if (v.kind == Value::Kind::kFloat) {
      is_float = true;
      fsum += v.float_value;
    } else {
      return a.Error("sum() adds numbers, got " + DescribeValue(v) +
                     (v.kind == Value::Kind::kVar ? " (use the sum op on tensors)" : ""));
    }
  }
  return is_float ? FloatValue(fsum, a.call_pos()) : IntValue(isum, a.call_pos());
}

StatusOr<Value> Round(State&, const Args& a) {
  const Value& v = a.Get("x")->value;
  if (!v.is_number()) return a.ErrorAt("x", "round() takes a number, got " + DescribeValue(v));
  FLEET_ASSIGN_OR_RETURN(std::optional<int64_t> digits, a.OptInt("ndigits"));
  const double x = v.number();
  if (!digits) {
    const double r = std::nearbyint(x);  // ties to even, as Python
    if (!std::isfinite(r) || std::fabs(r) >= 9.2e18) return a.Error("round() out of range");
    return IntValue(static_cast<int64_t>(r), a.call_pos());
  }
  if (*digits > 300 || *digits < -300) return a.ErrorAt("ndigits", "ndigits out of range");
  const double scale = std::pow(10.0, static_cast<double>(*digits));
  return FloatValue(std::nearbyint(x * scale) / scale, a.call_pos());
}

StatusOr<Value> Reversed(State& s, const Args& a) {
  FLEET_ASSIGN_OR_RETURN(std::vector<Value> items, Items(s, a, *a.Get("seq")));
  std::reverse(items.begin(), items.end());
  return ListValue(std::move(items), a.call_pos());
}

StatusOr<Value> Print(State&, const Args& a) {
  std::string line;
  for (const Arg* arg : Positional(a)) {
    if (!line.empty()) line += ' ';
    line += FormatValue(arg->value);
  }
  Log().info("{}:{}: {}", LogSafe(a.file()), a.call_pos().line, LogSafe(line));
  return Value{};
}

// The body of a failing `assert cond[, message]`.
StatusOr<Value> AssertFailed(State&, const Args& a) {
  const Arg* message = a.Get("message");
  return a.Error(message == nullptr ? "assertion failed"
                                    : "assertion failed: " + FormatValue(message->value));
}

}  // namespace

void AddPythonBuiltins(BuiltinTable& t) {
  t["len"] = Builtin{{{"arg0", true}}, Len};
  t["range"] = Builtin{Variadic(1), Range};
  t["enumerate"] = Builtin{{{"iterable", true}, {"start"}}, Enumerate};
  t["zip"] = Builtin{Variadic(0), Zip};
  t["list"] = Sequence(false);
  t["tuple"] = Sequence(true);
  t["int"] = Builtin{{{"x"}}, ToInt};
  t["float"] = Builtin{{{"x"}}, ToFloat};
  t["str"] = Builtin{{{"x"}}, ToStr};
  t["bool"] = Builtin{{{"x"}}, ToBool};
  t["min"] = Extreme(false);
  t["max"] = Extreme(true);
  t["abs"] = Builtin{{{"x", true}}, Abs};
  t["sum"] = Builtin{{{"iterable", true}, {"start"}}, Sum};
  t["round"] = Builtin{{{"x", true}, {"ndigits"}}, Round};
  t["reversed"] = Builtin{{{"seq", true}}, Reversed};
  t["print"] = Builtin{Variadic(0), Print};
  t["__assert_failed__"] = Builtin{{{"message"}}, AssertFailed};
}

}  // namespace fleet::frontend
