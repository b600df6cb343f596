// The values a training loop reports beside the loss: the vars the program names with
// metric("auc", auc_var) and those [train] fetch lists, and the learning rate.
//
// Reported vars are fetched with the loss at every step: they are single values, so a fetch
// costs a copy of a few bytes next to the loss's (the GPU executor syncs once for all fetches),
// while a second preparation of main for the logged steps alone would double its arena and
// split the launch counter random kernels and resumed checkpoints rely on.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "executor/executor.h"
#include "executor/tensor.h"
#include "frontend/frontend.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet {

struct ReportedVar {
  std::string name;  // the key in records and lines, the tag in TensorBoard
  std::string var;   // the main-program var fetched
  std::string what;  // how errors name it: metric "auc" (FILE:L:C) or train.fetch[1]
};

// The keys every metrics record has (job/progress.h); no reported var may take one.
const std::vector<std::string>& ReservedRecordKeys();

// The program's metric(...) calls in order, then [train] fetch's names. A fetch name is one of
// the program file's variables (ParsedProgram::names, as the file last assigned it) or else a
// var of `programs.main`; the record key is the name as written. INVALID_ARGUMENT naming the
// entry: a var `programs.main` does not have (after transpiling: the trainer's main), a name
// reported twice or taken by a record key.
StatusOr<std::vector<ReportedVar>> ReportedVars(const Config::Train& train,
                                                const frontend::ParsedProgram& programs);

// After main is prepared for the batch size: every reported var holds one element of a number
// type (a float, an int or bool); INVALID_ARGUMENT naming it and its shape otherwise.
Status CheckReportedVars(const std::vector<ReportedVar>& vars, const exec::PreparedProgram& main);
// The same check of one var, of this dtype and shape (a fetched tensor's, where no preparation
// is at hand).
Status CheckReportedVar(const ReportedVar& var, ir::DataType dtype,
                        const std::vector<int64_t>& dims);

// The fetch list of main: the loss, then the reported vars in order.
std::vector<std::string> FetchList(const std::string& loss, const std::vector<ReportedVar>& vars);

// The one element of a fetched number tensor as a double (bool as 0 or 1).
StatusOr<double> ScalarValue(const exec::HostTensor& t, const std::string& what);

// The learning-rate var: the LearningRate input of main's first op that has one. nullopt when
// main has no optimizer op (a parameter-server trainer: the servers hold and apply the rate).
std::optional<std::string> LearningRateVar(const ir::Program& main);

// Its current value, read from the executor's scope (on a GPU this waits for the stream, so
// the loop reads it on logged steps only).
StatusOr<double> LearningRateValue(const exec::Executor& executor, const std::string& var);

}  // namespace fleet
