// Loading what a config selects: the device backend's plugin always, the communicator's for a
// collective job, the transport's for a parameter-server job, and [plugins] load. Nothing else
// is initialised.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// How a communicator meets the device the tensors live on.
enum class CommPlacement {
  kDirect,  // the communicator reduces that device's memory itself
  kStaged,  // through host memory: the communicator reduces "cpu" memory and staging is on
};

// Whether communicator `comm` lists `device` among the devices whose memory it reduces.
bool CommReducesMemoryOf(const ComponentRecord& comm, std::string_view device);

// The placement of communicator `comm` with `device`, or FAILED_PRECONDITION naming both, what
// each can do and what to change in fleet.toml. `where` prefixes the message (the config file).
StatusOr<CommPlacement> PlaceCommunicator(const ComponentRecord& comm, std::string_view device,
                                          bool staging, std::string_view where);

struct Selection {
  const ComponentRecord* device = nullptr;
  // Collective jobs' communicator; in a CPU parameter-server job, the trainers' ring for the
  // job's figures when it loads (else null, with a warning).
  const ComponentRecord* comm = nullptr;
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
