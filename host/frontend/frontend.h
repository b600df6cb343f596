// host/frontend: the program-file language, run once to build the startup and main programs.
// Depends on: ir/, ops/, optim/, support/.
//
// The program file: a small Python-like language mirroring paddle.static (see docs/program.md).
// Parsing runs the file: each statement calls a layer, an op or data(), which appends ops and
// vars to a main program and initializers to a startup program.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
};

// Errors are INVALID_ARGUMENT "FILE:LINE:COL: message" saying what was expected.
StatusOr<ParsedProgram> ParseProgramFile(const std::filesystem::path& file);
StatusOr<ParsedProgram> ParseProgramText(std::string_view text, std::string_view file_name);

}  // namespace fleet::frontend
