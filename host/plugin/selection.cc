#include "plugin/selection.h"

#include <algorithm>

#include "fleet/fleet_comm.h"
#include "fleet/fleet_host.h"
#include "support/text.h"

namespace fleet {
namespace {

bool Lists(const FleetCommVTable* vt, std::string_view device) {
  for (size_t i = 0; i < vt->num_devices; ++i) {
    if (vt->devices != nullptr && vt->devices[i] != nullptr && device == vt->devices[i]) {
      return true;
    }
  }
  return false;
}

std::string DeviceList(const FleetCommVTable* vt) {
  std::string out;
  for (size_t i = 0; i < vt->num_devices; ++i) {
    if (vt->devices == nullptr || vt->devices[i] == nullptr) continue;
    out += (out.empty() ? "" : ", ") + std::string(vt->devices[i]);
  }
  return out.empty() ? "none" : out;
}

bool IsOptional(const Config& config, const std::string& plugin) {
  const auto& opt = config.plugins.optional;
  return std::find(opt.begin(), opt.end(), plugin) != opt.end();
}

// Loads the plugin behind one backend choice and finds the component in it.
StatusOr<const ComponentRecord*> Resolve(const Config& config, PluginRegistry& registry,
                                         int32_t kind, const std::string& key,
                                         const BackendChoice& choice) {
  auto plugin = registry.Load(choice.plugin);
  if (!plugin.ok()) {
    return plugin.status().WithContext(config.source + ": " + key + " = \"" + choice.backend +
                                       "\" needs plugin '" + choice.plugin + "'");
  }
  const ComponentRecord* c = registry.Find(kind, choice.backend);
  if (c == nullptr || c->plugin != choice.plugin) {
    std::vector<std::string> offered;
    for (const ComponentRecord* o : registry.Components(kind)) {
      if (o->plugin == choice.plugin) offered.push_back("'" + o->name + "'");
    }
    return NotFound(config.source + ": " + key + " = \"" + choice.backend + "\": plugin '" +
                    choice.plugin + "' (" + (*plugin)->file.string() + ") provides no " +
                    ComponentKindName(kind) + " named '" + choice.backend + "'" +
                    (offered.empty() ? " (it provides no " + ComponentKindName(kind) + " at all)"
                                     : " (it provides " + JoinWords(offered) + ")"));
  }
  return c;
}

}  // namespace

bool CommReducesMemoryOf(const ComponentRecord& comm, std::string_view device) {
  return Lists(comm.table<FleetCommVTable>(), device);
}

StatusOr<CommPlacement> PlaceCommunicator(const ComponentRecord& comm, std::string_view device,
                                          bool staging, std::string_view where) {
  const auto* vt = comm.table<FleetCommVTable>();
  if (Lists(vt, device)) return CommPlacement::kDirect;
  const std::string head = std::string(where) + (where.empty() ? "" : ": ") +
                           "communicator '" + comm.name + "' (plugin '" + comm.plugin +
                           "') reduces memory of " + DeviceList(vt) + ", not of device '" +
                           std::string(device) + "'";
  if (Lists(vt, "cpu")) {
    if (staging) return CommPlacement::kStaged;
    return FailedPrecondition(head + "; choose a communicator for '" + std::string(device) +
                              "' in [comm] backend, or set [comm] staging = true to copy every "
                              "collective through host memory");
  }
  return FailedPrecondition(head + ", and it cannot stage through host memory since it does "
                                   "not reduce host memory; choose [device] backend = one of " +
                            DeviceList(vt) + ", or a communicator for '" + std::string(device) +
                            "' in [comm] backend");
}

LoadOptions LoadOptionsFor(const Config& config) {
  LoadOptions options;
  options.search_dirs = PluginSearchPath(config);
  // A privileged process never loads code others could have written (SecureMode).
  options.allow_insecure = config.plugins.allow_insecure && !SecureMode();
  options.plugin_config = config.plugins.config;
  return options;
}

StatusOr<Selection> LoadSelected(const Config& config, PluginRegistry& registry) {
  Selection selection;
  FLEET_ASSIGN_OR_RETURN(selection.device, Resolve(config, registry, FLEET_COMPONENT_DEVICE,
                                                   "device.backend", config.device));
  if (config.strategy_mode == "collective") {
    FLEET_ASSIGN_OR_RETURN(selection.comm, Resolve(config, registry, FLEET_COMPONENT_COMMUNICATOR,
                                                   "comm.backend", config.comm));
    FLEET_ASSIGN_OR_RETURN(CommPlacement placement,
                           PlaceCommunicator(*selection.comm, selection.device->name,
                                             config.comm_staging, config.source));
    selection.comm_staged = placement == CommPlacement::kStaged;
    if (config.comm_staging && !selection.comm_staged) {
      selection.warnings.push_back("comm.staging has no effect: communicator '" +
                                   selection.comm->name + "' reduces memory of device '" +
                                   selection.device->name + "' itself");
    }
  }
  if (config.strategy_mode == "pserver") {
    FLEET_ASSIGN_OR_RETURN(selection.transport,
                           Resolve(config, registry, FLEET_COMPONENT_TRANSPORT,
                                   "transport.backend", config.transport));
    // The trainers of a CPU job sum their figures over a ring of their own (job/train.h),
    // which training does not need: a communicator that does not load, or does not reduce
    // host memory, only leaves each trainer reporting its own figures.
    if (selection.device->name == "cpu") {
      auto comm = Resolve(config, registry, FLEET_COMPONENT_COMMUNICATOR, "comm.backend",
                          config.comm);
      if (!comm.ok()) {
        selection.warnings.push_back("the trainers report their own figures, not the job's: " +
                                     comm.status().message());
      } else if (CommReducesMemoryOf(**comm, "cpu")) {
        selection.comm = *comm;
      }
    }
  }
  for (const std::string& name : config.plugins.load) {
    auto plugin = registry.Load(name);
    if (plugin.ok()) continue;
    if (IsOptional(config, name)) {
      selection.warnings.push_back("optional plugin '" + name +
                                   "' was not loaded: " + plugin.status().message());
    } else {
      return plugin.status().WithContext(config.source + ": plugins.load");
    }
  }
  for (const std::string& name : config.plugins.optional) {
    if (registry.FindPlugin(name) != nullptr) continue;
    bool in_load = std::find(config.plugins.load.begin(), config.plugins.load.end(), name) !=
                   config.plugins.load.end();
    if (in_load) continue;  // already reported above
    auto plugin = registry.Load(name);
    if (!plugin.ok()) {
      selection.warnings.push_back("optional plugin '" + name +
                                   "' was not loaded: " + plugin.status().message());
    }
  }
  return selection;
}

}  // namespace fleet
