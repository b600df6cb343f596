// Entry point of a plugin whose components are not written yet (the name and description come
// from the plugin's CMakeLists). It registers nothing: a plugin never claims a component it does
// not provide, so `fleet-host plugins` shows it as empty and a config that selects its backend
// fails at start-up with a message naming what is missing.
#include "fleet/plugin.hpp"

FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host, FleetPluginInfo* info) {
  (void)host;
  if (FLEET_HAS_FIELD(info, FleetPluginInfo, description)) {
    info->abi_major = FLEET_ABI_MAJOR;
    info->abi_minor = FLEET_ABI_MINOR;
    info->name = FLEET_PLACEHOLDER_NAME;
    info->version = "0.1.0";
    info->description = FLEET_PLACEHOLDER_DESCRIPTION;
  }
  return nullptr;
}
