// [strategy] collective_mode = "single_process_multi_thread" (Paddle's ParallelExecutor):
// several devices of one process trained as the ranks of one collective group
// (collective/parallel_runner.h).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "config/config.h"
#include "frontend/frontend.h"
#include "job/progress.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// `num_devices` ranks in this process, a thread and a replica each, all-reducing gradients
// through the configured communicator. [train] batch_size is per device, as it is per trainer:
// each step draws batch_size * num_devices rows, split evenly. Logged losses are the mean over
// devices. `env` is the process's environment (for FLEET_COLLECTIVE_CHECK). With [eval],
// `forward` is the program file's main before backward and optimizer (job/evaluation.h); the
// devices hold the same parameters after every step, so the first device evaluates for all.
StatusOr<TrainSummary> TrainOnDevices(const Config& config,
                                      const frontend::ParsedProgram& programs,
                                      const PluginRegistry& registry, const std::string& device,
                                      int32_t num_devices,
                                      const std::map<std::string, std::string>& env,
                                      std::ostream& out, const ir::Program* forward = nullptr);

}  // namespace fleet
