// Entry point of the comm_nccl plugin. It registers no component yet: the NCCL communicator is not implemented yet. A plugin never
// claims a component it does not provide, so `fleet-host plugins` shows it as empty and a
// config that selects its backend fails at start-up with a message naming what is missing.
#include "fleet/plugin.hpp"

extern "C" FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host,
                                                           FleetPluginInfo* info) {
  (void)host;
  if (FLEET_HAS_FIELD(info, FleetPluginInfo, description)) {
    info->abi_major = FLEET_ABI_MAJOR;
    info->abi_minor = FLEET_ABI_MINOR;
    info->name = "comm_nccl";
    info->version = "0.1.0";
    info->description = "NCCL communicator (not implemented yet: no components)";
  }
  return nullptr;
}
