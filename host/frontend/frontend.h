// host/frontend: the program-file language, run once to build the startup and main programs.
// Depends on: ir/, ops/, optim/, support/.
//
// The program file: the subset of Python in which paddle.static model code is written (see
// docs/program.md). Parsing runs the file once: its layer, op and Paddle API calls append ops
// and vars to a main program and initializers to a startup program; functions, loops and
// conditions run at build time and leave only what they built.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/program.h"
#include "optim/optimizer.h"
#include "support/status.h"

namespace fleet::frontend {

// A value the file asks the training loop to report: metric("auc", auc_var).
struct ReportedMetric {
  std::string name;   // the label in progress lines, metrics records and TensorBoard tags
  std::string var;    // the main-program var holding it
  std::string where;  // "FILE:LINE:COL" of the metric(...) call, for errors found later
};

// A DistributedStrategy setting the file made (strategy.KEY = value) and handed to
// fleet.distributed_optimizer, as the [strategy] key of fleet.toml it stands for.
struct ProgramStrategyKey {
  std::string paddle_key;  // as written: "a_sync", "localsgd_configs['k_steps']"
  std::string config_key;  // the [strategy] key: "sync_mode", "local_sgd_k_steps"
  std::variant<bool, int64_t, double, std::string> value;
  std::string where;       // "FILE:LINE:COL" of the assignment
};

// fleet.init(...) as the file called it. The role itself comes from the environment or
// fleet.toml; is_collective (when given) is checked against the job's strategy.
struct ProgramFleetInit {
  std::optional<bool> is_collective;
  std::string where;
};

struct ParsedProgram {
  ir::Program startup;
  ir::Program main;
  std::vector<std::string> feeds;    // data() vars, in declaration order
  std::string loss;                  // minimize's loss var; "" when the file has no minimize
  std::optional<optim::OptimizerSpec> optimizer;
  std::vector<std::string> no_grad;  // vars the file marks stop_gradient beyond data()
  // The file's variables that hold a program var, by the name the file gives them
  // ("prediction" -> "fc_2.tmp_2"), as they stand after the last statement.
  std::map<std::string, std::string> names;
  std::vector<ReportedMetric> metrics;  // metric(...) calls, in order
  std::vector<ProgramStrategyKey> strategy;  // by Paddle key
  std::optional<ProgramFleetInit> fleet_init;
};

// INTERNAL when an entry of the Paddle name table (paddle_api.h) maps onto a layer or op that
// lacks it, or onto a parameter the layer or op does not take.
Status CheckPaddleApiTable();

// Errors are INVALID_ARGUMENT "FILE:LINE:COL: message" saying what was expected.
StatusOr<ParsedProgram> ParseProgramFile(const std::filesystem::path& file);
StatusOr<ParsedProgram> ParseProgramText(std::string_view text, std::string_view file_name);

}  // namespace fleet::frontend
