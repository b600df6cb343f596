// The functions a program file can call (other than direct op calls), and the conversions of
// configuration objects (ParamAttr(...), Normal(...), sgd(...), ...) into typed specs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/builder.h"
#include "frontend/frontend.h"
#include "frontend/values.h"
#include "optim/optimizer.h"
#include "support/status.h"

namespace fleet::frontend {

// What running the file has produced so far.
struct State {
  explicit State(const ops::OpRegistry& registry) : builder(registry) {}
  ProgramBuilder builder;
  std::vector<std::string> feeds;
  std::string loss;
  std::optional<optim::OptimizerSpec> optimizer;
  std::optional<Pos> minimize_pos;
  std::vector<std::string> no_grad;
  std::vector<ReportedMetric> metrics;
  std::vector<ProgramStrategyKey> strategy;
  std::string strategy_where;  // "FILE:LINE:COL" of fleet.distributed_optimizer; "" = none
  std::optional<ProgramFleetInit> fleet_init;
  int64_t work = 0;  // units of build-time work done so far (SpendWork)
};

// Build-time work a file may do in all, in units of values copied, scanned or formatted: a
// bound on the time a hostile file can take (a list grown by concatenation a million times
// would otherwise run for hours). Real model files use a tiny fraction.
inline constexpr int64_t kMaxWork = 100000000;

// Charges `units` of work; past kMaxWork, an error at `pos`.
Status SpendWork(State& s, size_t units, std::string_view file, Pos pos);

using BuiltinFn = std::function<StatusOr<Value>(State&, const Args&)>;

struct Builtin {
  std::vector<Param> params;
  BuiltinFn fn;
};

using BuiltinTable = std::map<std::string, Builtin, std::less<>>;

// layers.cc: data, fc, conv2d, pool2d, batch_norm, layer_norm, embedding, dropout, losses,
// accuracy, reductions, matmul, reshape, transpose, flatten, concat.
void AddLayerBuiltins(BuiltinTable& table);
// sequence_layers.cc (from AddLayerBuiltins): sequence_softmax, sequence_reverse,
// sequence_pad, sequence_mask, sequence_expand_as, sequence_expand, sequence_concat,
// sequence_slice, sequence_unpad.
void AddSequenceLayerBuiltins(BuiltinTable& table);
// py_builtins.cc: len, range, enumerate, zip, list, tuple, int, float, str, bool, min, max,
// abs, sum, round, reversed, print.
void AddPythonBuiltins(BuiltinTable& table);
// paddle_layers.cc: param, create_parameter, and the "@" targets of paddle_api.h.
void AddPaddleBuiltins(BuiltinTable& table);
// objects.cc: ParamAttr, initializers, regularizers, gradient clipping, optimizers, schedules.
void AddObjectBuiltins(BuiltinTable& table);

Value VarValue(std::string name, Pos pos);

// A value from the file as an attribute of the type `like` has (an int dtype attribute also
// takes a dtype name; a list attribute also takes a single number); an error message naming
// `attr` otherwise.
StatusOr<ir::Attribute> ValueToAttr(const Value& v, const ir::Attribute& like,
                                    std::string_view attr);

// strategy.cc: whether `key` may be set on a DistributedStrategy to `value` (an error message
// naming the key otherwise), and the settings of a strategy as [strategy] keys.
Status CheckStrategyValue(const std::string& key, const Value& value);
StatusOr<std::vector<ProgramStrategyKey>> StrategySettings(const Namespace& strategy,
                                                           std::string_view file);

// Argument `name` of `a` as Paddle's ParamAttr._to_attr reads it: None/True (defaults), False
// (disabled), a string (the name), an initializer, a regularizer, or ParamAttr(...).
StatusOr<ParamAttrSpec> ParamAttrArg(const Args& a, std::string_view name);
// Argument `name` as an optimizer spec: sgd(...), momentum(...), adam(...), adamw(...),
// adagrad(...), rmsprop(...), lamb(...), adamax(...).
StatusOr<optim::OptimizerSpec> OptimizerArg(const Args& a, std::string_view name);
// regularization=L2Decay(c) -> c (0 when absent).
StatusOr<double> L2CoeffArg(const Args& a, std::string_view name);
// grad_clip=ClipGradByGlobalNorm(c), ClipGradByNorm(c) or ClipGradByValue(max, min) as the
// clipping fields of an optimizer spec (all zero / false when absent).
struct GradClip {
  double global_norm = 0.0;
  double norm = 0.0;
  bool by_value = false;
  double min = 0.0, max = 0.0;
  bool any() const { return global_norm > 0 || norm > 0 || by_value; }
  // Sets the clipping fields of `spec`.
  void ApplyTo(optim::OptimizerSpec& spec) const;
};
StatusOr<GradClip> GradClipArg(const Args& a, std::string_view name);

}  // namespace fleet::frontend
