// Loading what a config selects: the device backend's plugin always, the communicator's for a
// collective job, the transport's for a parameter-server job, and [plugins] load. Nothing else
// is initialised.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

struct Selection {
  const ComponentRecord* device = nullptr;
  const ComponentRecord* comm = nullptr;       // only when the strategy needs one
  bool comm_staged = false;                    // comm reaches the device through host memory
  const ComponentRecord* transport = nullptr;  // only when the strategy needs one
  std::vector<std::string> warnings;           // optional plugins that failed, and why
};

// Load options for a config: its search path, allow_insecure and plugin tables.
LoadOptions LoadOptionsFor(const Config& config);

// Loads the selected plugins into `registry` and resolves the selected components. A required
// plugin that fails, or a selected component its plugin does not provide, is an error naming
// the config key, the plugin and the reason; an optional plugin's failure is a warning. A
// communicator that cannot reduce the device's memory (and may not stage through host memory,
// [comm] staging) is refused here, so `check` reports it before any job starts.
StatusOr<Selection> LoadSelected(const Config& config, PluginRegistry& registry);

}  // namespace fleet
