// Values of the program-file language and the arguments of one call, bound to a signature,
// with typed getters whose errors point at the argument in the file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/syntax.h"
#include "support/status.h"

namespace fleet::frontend {

struct Object;
struct Namespace;
struct Callable;

struct Value {
  enum class Kind {
    kNone, kBool, kInt, kFloat, kString,
    kList,       // items; `tuple` when written as one
    kDict,       // keys (strings) and items, in insertion order
    kVar,        // a program var: text
    kObject,     // a configuration object: ParamAttr(...), Normal(...), sgd(...), ...
    kNamespace,  // an object with attributes set by the file (a DistributedStrategy)
    kCallable,   // a layer, op, Paddle API, user function or bound method
    kModule,     // text: a dotted module path ("paddle.static.nn")
    kSlice,      // items: lower, upper, step (kNone when absent); only inside x[...]
    kEllipsis,   // ... inside x[...]
  };
  Kind kind = Kind::kNone;
  Pos pos;
  bool bool_value = false;
  int64_t int_value = 0;
  double float_value = 0.0;
  bool tuple = false;
  int depth = 0;  // lists and dicts: 1 + the depth of the deepest item (SetDepth)
  std::string text;  // a string, the program var a kVar names, a module, a callable's name
  std::vector<Value> items;              // kList, kDict values, kSlice bounds
  std::vector<std::string> keys;         // kDict
  std::shared_ptr<const Object> object;  // kObject
  std::shared_ptr<Namespace> ns;         // kNamespace: shared, so attribute writes are seen
  std::shared_ptr<const Callable> callable;  // kCallable

  bool is_none() const { return kind == Kind::kNone; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  double number() const {
    return kind == Kind::kInt ? static_cast<double>(int_value) : float_value;
  }
};

// Sets a list's or dict's depth from its items' (each already set).
void SetDepth(Value& v);

// Values made by the interpreter and builtins, at `pos`.
Value IntValue(int64_t i, Pos pos);
Value FloatValue(double d, Pos pos);
Value BoolValue(bool b, Pos pos);
Value StringValue(std::string s, Pos pos);
Value ListValue(std::vector<Value> items, Pos pos, bool tuple = false);

// Python's == on build-time values (numbers by value, bools as 0 and 1, lists item by item); a
// program var equals only itself (by name), never appending an op.
bool ValuesEqual(const Value& a, const Value& b);

// "an int", "a string 'abc'", "ParamAttr(...)", ... for messages.
std::string DescribeValue(const Value& v);

struct Arg {
  Value value;
  Pos pos;  // of the argument (the keyword for keyword arguments)
};

// One parameter of a builtin: its name and whether a call must give it.
struct Param {
  std::string name;
  bool required = false;
};

// Arguments of one call bound to a signature. Getters take a default for absent arguments
// (None counts as absent) and report wrong kinds at the argument: "FILE:L:C: fn: argument
// 'size' must be an int, got a string 'a'".
class Args {
 public:
  Args(std::string fn, Pos call_pos, std::string_view file)
      : fn_(std::move(fn)), call_pos_(call_pos), file_(file) {}

  // Binds positional values to `params` in order and keywords by name. Errors: too many
  // positional arguments, an unknown keyword (with a did-you-mean), a parameter given twice, a
  // required parameter missing.
  static StatusOr<Args> Bind(std::string fn, Pos call_pos, std::string_view file,
                             const std::vector<Param>& params, std::vector<Arg> positional,
                             std::vector<std::pair<std::string, Arg>> keywords);

  const std::string& fn() const { return fn_; }
  Pos call_pos() const { return call_pos_; }
  std::string_view file() const { return file_; }

  // nullptr when absent or None.
  const Arg* Get(std::string_view name) const;
  bool Has(std::string_view name) const { return Get(name) != nullptr; }
  Pos PosOf(std::string_view name) const;

  StatusOr<std::string> Var(std::string_view name) const;                // a program var
  StatusOr<std::vector<std::string>> Vars(std::string_view name) const;  // a var or a list
  StatusOr<int64_t> Int(std::string_view name, int64_t def = 0) const;
  StatusOr<std::optional<int64_t>> OptInt(std::string_view name) const;
  StatusOr<double> Float(std::string_view name, double def = 0.0) const;  // ints accepted
  StatusOr<std::optional<double>> OptFloat(std::string_view name) const;
  StatusOr<bool> Bool(std::string_view name, bool def = false) const;
  StatusOr<std::string> String(std::string_view name, std::string def = "") const;
  // A list of ints; a single int is repeated `broadcast` times when broadcast > 0.
  StatusOr<std::vector<int64_t>> Ints(std::string_view name, std::vector<int64_t> def = {},
                                      size_t broadcast = 0) const;
  // A shape: a list of ints in which None (Paddle's unknown dim) reads as -1.
  StatusOr<std::vector<int64_t>> Shape(std::string_view name) const;
  StatusOr<std::vector<double>> Floats(std::string_view name) const;

  // "FILE:L:C: fn: message" at the argument (the call when absent) / at the call.
  Status ErrorAt(std::string_view name, std::string_view message) const;
  Status Error(std::string_view message) const;
  // An error from building ops (no position yet), placed at the call and prefixed with the
  // callee unless the message already starts with it. OK stays OK.
  Status AtCall(const Status& status) const;
  template <typename T>
  StatusOr<T> AtCall(StatusOr<T> value) const {
    if (value.ok()) return value;
    return AtCall(value.status());
  }

 private:
  Status KindError(std::string_view name, std::string_view expected, const Value& got) const;

  std::string fn_;
  Pos call_pos_;
  std::string_view file_;
  std::map<std::string, Arg, std::less<>> args_;
};

// An object whose attributes the file sets and reads (strategy.a_sync = True). `kind` names
// what it is ("DistributedStrategy"); `where` records where each attribute was last set.
struct Namespace {
  std::string kind;
  std::map<std::string, Value, std::less<>> attrs;
  std::map<std::string, Pos, std::less<>> where;
};

// A configuration object made by a call such as ParamAttr(...), Normal(...), L2Decay(...),
// sgd(...), piecewise_decay(...): its kind (the canonical callee name) and bound arguments.
struct Object {
  std::string kind;
  Args args;
};

}  // namespace fleet::frontend
