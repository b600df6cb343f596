// The training loop of `fleet-host run`: run startup once, then [train] steps of main, each with
// a batch from the [data] source, fetching the loss; progress every log_every steps to `out`
// and, when [train] metrics_file is set, one JSON object per logged step to that file.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/source.h"
#include "executor/executor.h"
#include "frontend/frontend.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

struct TrainSummary {
  int64_t steps = 0;
  double final_loss = 0.0;
  double elapsed_s = 0.0;
  std::vector<double> logged_losses;  // the loss of every logged step, in order
};

// Everything a training run needs before its first step: the data source, an executor whose
// scope holds the initialised parameters (startup has run), and main prepared for
// [train].batch_size with the loss as its fetch.
struct TrainingSetup {
  std::unique_ptr<data::DataSource> source;
  std::unique_ptr<exec::Executor> executor;
  std::unique_ptr<exec::PreparedProgram> main;
  size_t startup_ops = 0;
};

// `programs` must be optimized (backward + optimizer appended) and have a loss. `device` is the
// device component's name in `registry`. Errors name the program and op at fault (a missing
// kernel, a shape that does not fit the batch, a data file that does not fit its var).
StatusOr<TrainingSetup> PrepareTraining(const Config& config,
                                        const frontend::ParsedProgram& programs,
                                        const PluginRegistry& registry,
                                        const std::string& device);

// PrepareTraining, then the loop.
StatusOr<TrainSummary> Train(const Config& config, const frontend::ParsedProgram& programs,
                             const PluginRegistry& registry, const std::string& device,
                             std::ostream& out);

// The width of the prediction a label is compared with: the last dim of the other input of the
// first op in `main` that reads `label` (e.g. cross_entropy's X). 0 when it cannot be told.
int64_t PredictionWidth(const ir::Program& main, const std::string& label);

}  // namespace fleet
