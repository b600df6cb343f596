// The training loop of `fleet-host run`: run startup once, then [train] steps of main, each with
// a batch from the [data] source, fetching the loss; progress every log_every steps to `out`
// and, when [train] metrics_file is set, one JSON object per logged step to that file.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
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

// `programs` must be optimized (backward + optimizer appended) and have a loss. `device` is the
// device component's name in `registry`.
StatusOr<TrainSummary> Train(const Config& config, const frontend::ParsedProgram& programs,
                             const PluginRegistry& registry, const std::string& device,
                             std::ostream& out);

// The width of the prediction a label is compared with: the last dim of the other input of the
// first op in `main` that reads `label` (e.g. cross_entropy's X). 0 when it cannot be told.
int64_t PredictionWidth(const ir::Program& main, const std::string& label);

}  // namespace fleet
