// Builds the main and startup programs the way Paddle's LayerHelper does: unique layer names
// from per-type counters ("fc_0"), temporaries "<layer>.tmp_<k>", parameters "<layer>.w_<k>" /
// "<layer>.b_<k>" declared in both programs with their initializer op in the startup program,
// and every appended op shaped at once through the op schemas.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/program.h"
#include "ops/op_registry.h"
#include "support/status.h"

namespace fleet::frontend {

// A parameter initializer (Paddle's paddle.nn.initializer.*).
struct InitSpec {
  std::string kind = "constant";  // constant | uniform | normal | truncated_normal | xavier | msra
  double value = 0.0;             // constant
  double low = -1.0, high = 1.0;  // uniform
  double mean = 0.0, std = 1.0;   // normal, truncated_normal
  bool uniform = true;            // xavier, msra: uniform or normal variant
  std::optional<double> fan_in, fan_out;  // xavier, msra: override the fans computed from shape
  int64_t seed = 0;
};

// Paddle's ParamAttr after conversion (None, False, a name, an initializer, ParamAttr(...)).
struct ParamAttrSpec {
  bool disabled = false;           // bias_attr=False: no parameter at all
  std::string name;                // "" = generated
  std::optional<InitSpec> init;    // unset = the layer's default
  double learning_rate = 1.0;
  std::string regularizer;         // "", "l2", "l1"
  double regularization_coeff = 0.0;
  bool trainable = true;
};

// Paddle's fan computation for an initializer: rank 0 -> (1, 1), rank 1 -> (d0, d0),
// rank 2 -> (d0, d1), else receptive field r = prod(d2..): (d1 * r, d0 * r).
std::pair<double, double> ComputeFans(const std::vector<int64_t>& shape);

class ProgramBuilder {
 public:
  explicit ProgramBuilder(const ops::OpRegistry& registry) : registry_(registry) {}

  ir::Program& main() { return main_; }
  ir::Program& startup() { return startup_; }
  const ops::OpRegistry& registry() const { return registry_; }
  const ops::OpSchema* Schema(std::string_view type) const { return registry_.Find(type); }

  // "fc" -> "fc_0", "fc_1", ... (Paddle's unique_name.generate).
  std::string NewLayerName(std::string_view type);
  // "fc_0" -> "fc_0.tmp_0", "fc_0.tmp_1", ...
  std::string NewTmp(std::string_view layer);

  const ir::Var* FindVar(std::string_view name) const { return main_.global().FindVar(name); }

  // Declares a data var in main: stop_gradient, not persistable. ALREADY_EXISTS-like error
  // message when the name is taken.
  Status AddData(const std::string& name, std::vector<int64_t> shape, ir::DataType dtype,
                 int32_t lod_level = 0);

  // Creates (or, for a named parameter that already exists with the same shape and dtype,
  // shares) a parameter "<layer>.w_<k>" (or ".b_<k>" when is_bias) in both programs and appends
  // its initializer to startup: attr.init if set, else `default_init`. Returns its name.
  StatusOr<std::string> CreateParameter(std::string_view layer, bool is_bias,
                                        const std::vector<int64_t>& shape, ir::DataType dtype,
                                        const ParamAttrSpec& attr, const InitSpec& default_init);

  // Declares `name` in both programs as a persistable var that is not a parameter (Paddle's
  // create_global_variable(persistable=True): the statistics of a metric), stop_gradient so
  // nothing differentiates or trains it, and appends its initializer to startup. The name must
  // be new; the shape must be known.
  Status CreatePersistable(const std::string& name, const std::vector<int64_t>& shape,
                           ir::DataType dtype, const InitSpec& init);

  // Appends `op` to main and declares/shapes its outputs by shape inference. Attributes are
  // converted to the schema's types; attributes the schema does not know are dropped (Paddle
  // sets a few that only matter to its own kernels, e.g. use_cudnn). Errors: unknown op type,
  // a slot the schema lacks, shape inference failures.
  Status AppendOp(ir::Op op);

  // Marks vars as stop_gradient (outputs like Mask, SavedMean that Paddle never differentiates).
  void SetStopGradient(const std::vector<std::string>& names);

 private:
  Status AppendInitializer(const std::string& var, const std::vector<int64_t>& shape,
                           ir::DataType dtype, const InitSpec& init);
  // Converts op.attrs to the schema's attribute types, dropping unknown ones.
  Status NormalizeAttrs(const ops::OpSchema& schema, ir::Op& op) const;

  const ops::OpRegistry& registry_;
  ir::Program main_;
  ir::Program startup_;
  std::map<std::string, int64_t, std::less<>> counters_;
};

// Converts `value` to the type of `like` (int <-> int64 <-> float <-> double for numbers, lists
// likewise, an int dtype to its name when the target is a string); nullopt when the kinds differ.
std::optional<ir::Attribute> ConvertAttr(const ir::Attribute& value, const ir::Attribute& like);

}  // namespace fleet::frontend
