// A runtime for work outside a training job (export, inference): the config's device plugin
// loaded and an executor on it, with no communicator and no transport.
#pragma once

#include <memory>

#include "config/config.h"
#include "executor/executor.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// The registry owns the plugins the executor's kernels come from, so it is declared first and
// destroyed last.
struct LocalRuntime {
  std::unique_ptr<PluginRegistry> registry;
  std::unique_ptr<exec::Executor> executor;
};

// Loads the device [device] backend selects (and [plugins] load) and makes an executor on it
// with [train] threads and seed. Errors are LoadSelected's and Executor::Create's.
StatusOr<LocalRuntime> MakeLocalRuntime(Config config);

}  // namespace fleet
