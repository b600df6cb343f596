#include "job/local_runtime.h"

#include "plugin/selection.h"

namespace fleet {

StatusOr<LocalRuntime> MakeLocalRuntime(Config config) {
  config.strategy_mode = "none";  // only the device: no communicator, no transport
  LocalRuntime rt;
  rt.registry = std::make_unique<PluginRegistry>(LoadOptionsFor(config));
  FLEET_ASSIGN_OR_RETURN(Selection selection, LoadSelected(config, *rt.registry));
  exec::ExecutorOptions options;
  options.num_threads = static_cast<int32_t>(config.train.threads);
  options.seed = static_cast<uint64_t>(config.train.seed);
  FLEET_ASSIGN_OR_RETURN(rt.executor,
                         exec::Executor::Create(*rt.registry, selection.device->name, options));
  return rt;
}

}  // namespace fleet
