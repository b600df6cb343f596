// The interpreter of the program file: runs the syntax tree once, at build time, with Python's
// semantics for the subset the parser accepts. Layers, ops and Paddle API names build the
// programs through State (builtins.h); everything else (numbers, strings, lists, functions,
// loops) exists only while the file runs. Internal to frontend/.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/builtins.h"
#include "frontend/frontend.h"
#include "frontend/paddle_api.h"
#include "frontend/syntax.h"
#include "frontend/values.h"

namespace fleet::frontend {

// The names one function call (or the file) binds. `parent` is the scope of the function a def
// appeared in, so nested functions read their enclosing function's names as Python's closures
// do; the file's scope is searched after the chain.
struct Scope {
  std::map<std::string, Value, std::less<>> vars;
  // The names a call bound from its arguments (or their defaults) and the function has not
  // rebound since. A list or dict there is a copy of the caller's, so changing it in place is
  // refused: Python would change the caller's, and a program must not silently differ.
  std::set<std::string, std::less<>> params;
  std::shared_ptr<Scope> parent;
};

struct Callable {
  enum class Kind {
    kBuiltin,   // name: a key of the builtin table (layers, configuration objects, len, ...)
    kOp,        // name: an op type, called directly
    kFunction,  // a def of the file
    kPaddle,    // a Paddle API name (paddle_api.h)
    kMethod,    // name: the method; self: the receiver
  };
  Kind kind = Kind::kBuiltin;
  std::string name;
  // kFunction: the def (owned by the syntax tree, which outlives the run), its defaults as
  // evaluated when the def ran (Python's rule), and the scope it closes over.
  const Stmt* def = nullptr;
  std::vector<std::shared_ptr<const Value>> defaults;  // one per parameter; null = none
  std::shared_ptr<Scope> closure;
  const PaddleApi* paddle = nullptr;  // kPaddle
  std::shared_ptr<const Value> self;  // kMethod
};

// A callable as a value (its name also in text, for messages), and one for a Paddle name.
Value CallableValue(std::shared_ptr<Callable> c, Pos pos);
Value PaddleValue(const PaddleApi& api, Pos pos);

// Limits that keep a hostile file from exhausting the stack, the memory or the time. Each
// refusal names FILE:LINE:COL.
inline constexpr int kMaxCallDepth = 64;             // user function calls inside each other
inline constexpr int kMaxEvalDepth = 600;            // statements + expressions being evaluated
inline constexpr int64_t kMaxIterations = 1000000;   // loop iterations in the whole run
inline constexpr size_t kMaxItems = size_t{1} << 20;  // elements of a list, bytes of a string
inline constexpr int kMaxValueDepth = 100;            // lists and dicts inside each other
// def statements run: a function made inside a function closes over its scope, so functions
// made from functions form chains that copying and destroying walk recursively.
inline constexpr int kMaxDefs = 2000;
inline constexpr size_t kMaxOps = 200000;             // ops in the main program

class Interpreter {
 public:
  Interpreter(std::string_view file, const ops::OpRegistry& registry);
  // Breaks the cycles closures make (a scope holds a function that holds the scope).
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  Status Run(const Block& block);
  StatusOr<ParsedProgram> Finish() &&;

  // Whether every entry of paddle_api.h maps onto a builtin or op that takes the parameters it
  // names (a self-check for tests).
  Status CheckPaddleApis() const;

  // The file, for errors placed by helpers.
  std::string_view file() const { return file_; }
  State& state() { return state_; }

 private:
  enum class Flow { kNext, kReturn, kBreak, kContinue };

  // Counts one level of evaluation for the scope of a call.
  class Depth {
   public:
    explicit Depth(Interpreter& in) : in_(in) { ++in_.eval_depth_; }
    ~Depth() { --in_.eval_depth_; }
    Status Check(Pos pos) const;

   private:
    Interpreter& in_;
  };

  // interpreter.cc: statements.
  StatusOr<Flow> Exec(const Block& block, const std::shared_ptr<Scope>& scope);
  StatusOr<Flow> ExecOne(const Stmt& st, const std::shared_ptr<Scope>& scope);
  Status Assign(const Expr& target, Value value, const std::shared_ptr<Scope>& scope);
  Status AssignAttribute(const Expr& target, Value value, const std::shared_ptr<Scope>& scope);
  Status AssignItem(const Expr& target, Value value, const std::shared_ptr<Scope>& scope);
  Status Import(const Stmt& st, Scope& scope);
  Status With(const Stmt& st, const std::shared_ptr<Scope>& scope, Flow* flow);
  StatusOr<std::vector<Value>> Iterate(const Value& v, Pos pos);
  Status CountIteration(Pos pos);
  Status Charge(size_t units, Pos pos) { return SpendWork(state_, units, file_, pos); }
  // Raises a list's or dict's depth for a new item without rescanning the others.
  Status GrowDepth(Value& holder, const Value& item, Pos pos);
  // Sets v's depth (a list or dict) and refuses one nested past kMaxValueDepth: copying and
  // destroying a value recurse once per level.
  Status CheckDepth(Value& v, Pos pos);

  // interpreter.cc: expressions.
  StatusOr<Value> Eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  StatusOr<Value> EvalInner(const Expr& e, const std::shared_ptr<Scope>& scope);
  StatusOr<Value> Lookup(const std::string& name, Pos pos, const std::shared_ptr<Scope>& scope);
  Value* FindBinding(std::string_view name, const std::shared_ptr<Scope>& scope);
  // OK unless `name` is a parameter holding a list or dict (Scope::params), which `what`
  // ("append to", ...) would change only in the callee's copy; the error says so at `pos`.
  Status CheckNotParamCopy(std::string_view name, const std::shared_ptr<Scope>& scope,
                           const std::string& what, Pos pos);
  StatusOr<Value> GlobalName(const std::string& name, Pos pos);
  StatusOr<Value> ListComp(const Expr& e, const std::shared_ptr<Scope>& scope);
  StatusOr<Value> FString(const Expr& e, const std::shared_ptr<Scope>& scope);
  StatusOr<bool> Truth(const Value& v, Pos pos);

  // methods.cc: attributes and methods.
  StatusOr<Value> Attribute(const Value& object, const std::string& name, Pos pos);
  StatusOr<Value> CallMethod(const Callable& m, Pos pos, std::vector<Arg> positional,
                             std::vector<std::pair<std::string, Arg>> keywords);

  // call.cc: calls.
  StatusOr<Value> Call(const Expr& e, const std::shared_ptr<Scope>& scope);
  StatusOr<Value> CallValue(const Value& callee, Pos pos, std::vector<Arg> positional,
                            std::vector<std::pair<std::string, Arg>> keywords);
  // `shown` is the name errors give the callee (a Paddle API name for a translated call).
  StatusOr<Value> CallBuiltin(const std::string& name, const std::string& shown, Pos pos,
                              std::vector<Arg> positional,
                              std::vector<std::pair<std::string, Arg>> keywords);
  StatusOr<Value> CallFunction(const Callable& fn, Pos pos, std::vector<Arg> positional,
                               std::vector<std::pair<std::string, Arg>> keywords);
  StatusOr<Value> CallPaddle(const PaddleApi& api, Pos pos, std::vector<Arg> positional,
                             std::vector<std::pair<std::string, Arg>> keywords);
  StatusOr<Value> DirectOp(const ops::OpSchema& schema, Pos pos, std::vector<Arg> positional,
                           std::vector<std::pair<std::string, Arg>> keywords);
  Status UnknownCallable(const std::string& name, Pos pos) const;
  Status CheckProgramSize(Pos pos);
  Status MarkStopGradient(const std::string& var);

  // operators.cc: operators and indexing.
  StatusOr<Value> Unary(const std::string& op, const Value& v, Pos pos);
  StatusOr<Value> Binary(const std::string& op, const Value& a, const Value& b, Pos pos);
  StatusOr<Value> Compare(const std::string& op, const Value& a, const Value& b, Pos pos);
  StatusOr<Value> Index(const Value& object, const std::vector<Value>& index, Pos pos);
  StatusOr<Value> TensorBinary(const std::string& op, const Value& a, const Value& b, Pos pos);
  StatusOr<Value> TensorIndex(const Value& x, const std::vector<Value>& index, Pos pos);
  StatusOr<Value> ScalarTensor(const Value& number, const Value& like, Pos pos);
  StatusOr<Value> AppendSimpleOp(const std::string& type, std::map<std::string, Value> inputs,
                                 std::map<std::string, ir::Attribute> attrs, Pos pos);

  std::string_view file_;
  State state_;
  BuiltinTable table_;
  std::shared_ptr<Scope> globals_;
  Value return_value_;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  int loop_depth_ = 0;  // loops of the current function (break / continue)
  int64_t iterations_ = 0;
  int defs_ = 0;
  // The function scopes a def closed over, emptied by the destructor.
  std::vector<std::shared_ptr<Scope>> captured_;
};

// Python's str() of a build-time value, for f-strings and str(): ints, floats (repr-style
// shortest form), strings, bools, None, lists, and a program var by its name.
std::string FormatValue(const Value& v);

// Applies a format spec ("d", "02d", ".3f", ">8", ...) as Python's format() would; an error
// message for a spec the value's kind does not take.
StatusOr<std::string> FormatSpec(const Value& v, std::string_view spec);

}  // namespace fleet::frontend
