// The host side of the plugin ABI's host services (FleetHostApi): status objects, logging,
// registration, per-plugin config and the rendezvous store. Only host/plugin/ uses this header;
// the rest of the host sees plugins through registry.h and the C++ wrappers.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "config/config.h"
#include "plugin/store_abi.h"
#include "fleet/fleet_plugin.h"
#include "support/status.h"

// The ABI's opaque status: defined here, allocated and freed only by the host.
struct FleetStatus {
  int32_t code;
  std::string message;
};

namespace fleet {

class PluginRegistry;
class Store;

// The store behind every plugin's store_open: the job's rendezvous store once the job has one,
// else a store private to this process. `store` must outlive every plugin (the job's store is
// set before plugins that use it are created and lives until exit); nullptr restores the
// private store. Not thread-safe against concurrent store_open.
void SetJobStore(Store* store);
struct ComponentRecord;

// Converts a status a plugin returned into a Status and frees it. `context` prefixes the
// message ("plugin 'cpu': device.alloc").
Status TakeStatus(FleetStatus* status, std::string_view context);

// A new ABI status (NULL for FLEET_CODE_OK), for host callbacks that answer plugins.
FleetStatus* MakeFleetStatus(const Status& status);

// Everything the host keeps for one plugin while it is loaded: its FleetHostApi (whose host_ctx
// points back here), its logger, its config exposed as FleetAttr, and the components it
// registered during its entry point, held until the entry returns successfully.
class PluginContext {
 public:
  PluginContext(PluginRegistry* registry, std::string plugin_name,
                const std::vector<ConfigValue>* config);
  PluginContext(const PluginContext&) = delete;
  PluginContext& operator=(const PluginContext&) = delete;

  const FleetHostApi* api() const { return &api_; }
  const std::string& plugin_name() const { return plugin_name_; }

  // Registration is open only while the entry point runs.
  void set_registration_open(bool open) { registration_open_ = open; }
  std::vector<std::unique_ptr<ComponentRecord>>& pending() { return pending_; }
  std::vector<std::string>& notes() { return notes_; }
  // The first registration the host refused (OK if none). The loader rejects the plugin for it
  // even when the entry ignores the refusal.
  const Status& refused() const { return refused_; }

  // Config keys the plugin never looked up, as notes ("config key 'x' (where) was not read").
  std::vector<std::string> UnreadConfigNotes() const;

  // Implementations of the FleetHostApi slots that need this context.
  void LogLine(int32_t level, const char* msg);
  bool LogEnabled(int32_t level) const;
  FleetStatus* RegisterComponent(const FleetComponent* component);
  FleetStatus* ConfigAt(size_t index, FleetAttr* out);
  FleetStatus* ConfigGet(const char* key, FleetAttr* out);
  size_t ConfigCount() const { return attrs_.size(); }
  int32_t DeviceTypeId(const char* name) const;
  FleetStatus* StoreOpen(const char* scope, const FleetStore** out);

 private:
  void BuildConfigAttrs();

  PluginRegistry* registry_;
  std::string plugin_name_;
  const std::vector<ConfigValue>* config_;
  std::shared_ptr<spdlog::logger> logger_;
  FleetHostApi api_{};
  bool registration_open_ = false;
  std::vector<std::unique_ptr<ComponentRecord>> pending_;
  std::vector<std::string> notes_;
  Status refused_;
  // Config as FleetAttr; the vectors below own what the attrs point to.
  std::vector<FleetAttr> attrs_;
  std::vector<std::vector<int64_t>> int_storage_;
  std::vector<std::vector<double>> float_storage_;
  std::vector<std::vector<const char*>> string_storage_;
  std::set<std::string> read_keys_;
  std::vector<std::unique_ptr<AbiStore>> stores_;
};

// The program-editing API handed to plugins (implemented over the IR in plugin/program_api.h).
const FleetProgramApi* HostProgramApi();

}  // namespace fleet
