// The "abi" contender: the communicator exactly as fleet-host gets it. The host's registry loads
// libfleet_comm_gloo.so from the plugin directory, the component is looked up by kind and name,
// and fleet::Communicator creates it with a FleetCommConfig whose store is an AbiStore over the
// job's store. Every all-reduce is one vtable call with a FleetTensor describing the buffer.
#include <cstdint>
#include <utility>

#include "comm/allreduce_impl.h"
#include "collective/communicator.h"
#include "fleet/fleet_abi.h"
#include "plugin/registry.h"

namespace fleet::bench {
namespace {

class AbiAllReduce final : public AllReduceImpl {
 public:
  AbiAllReduce(std::unique_ptr<PluginRegistry> registry, std::unique_ptr<Communicator> comm)
      : registry_(std::move(registry)), comm_(std::move(comm)) {}
  ~AbiAllReduce() override {
    comm_.reset();  // destroyed before its plugin is shut down
  }

  Status AllReduce(float* data, size_t count) override {
    // A dense 1-d host tensor, as the collective kernels hand the communicator.
    return comm_->AllReduceHost(data, FLEET_DTYPE_FLOAT32, static_cast<int64_t>(count),
                                FLEET_REDUCE_SUM);
  }

  Status Barrier() override { return comm_->Barrier(); }

 private:
  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace

StatusOr<std::unique_ptr<AllReduceImpl>> CreateAbiAllReduce(Store* store,
                                                           const GroupOptions& options) {
  LoadOptions load;
  load.search_dirs = {options.plugin_dir};
  auto registry = std::make_unique<PluginRegistry>(load);
  auto loaded = registry->Load("comm_gloo");
  if (!loaded.ok()) {
    return loaded.status().WithContext("loading the gloo plugin from " +
                                       options.plugin_dir.string());
  }
  const ComponentRecord* component = registry->Find(FLEET_COMPONENT_COMMUNICATOR, "gloo");
  if (component == nullptr) {
    return NotFound("plugin comm_gloo in " + options.plugin_dir.string() +
                    " registered no communicator named 'gloo'");
  }
  CommunicatorOptions comm_options;
  comm_options.rank = options.rank;
  comm_options.world_size = options.world_size;
  comm_options.timeout = options.timeout;
  comm_options.options = {{"hostname", options.hostname}};
  comm_options.label = "bench";
  FLEET_ASSIGN_OR_RETURN(auto comm,
                         Communicator::Create(*component, store, "bench/abi", comm_options));
  return std::unique_ptr<AllReduceImpl>(
      new AbiAllReduce(std::move(registry), std::move(comm)));
}

}  // namespace fleet::bench
