// host/plugin: plugin discovery, loading and version negotiation, the registry of
// components, the services the host hands to plugins, component selection from the config,
// and the C++ wrappers over the C tables (the only code that calls into a plugin).
// Depends on: config/, ir/, ops/, rendezvous/, support/.
//
// Plugin discovery, loading, version negotiation and the registry of components.
//
// A plugin is a file named libfleet_NAME.so in one of the search directories (fleet.toml
// [plugins] dirs, then FLEET_PLUGIN_PATH, then the install's plugin directory; the first file of
// a name wins). Loading one:
//   1. refuse a file or directory that others can write to (unless allow_insecure);
//   2. dlopen it with RTLD_NOW | RTLD_LOCAL through Boost.DLL, and never unload it;
//   3. find fleet_plugin_entry_v1 (if absent, name the majors it does export);
//   4. call the entry with a FleetHostApi of its own; check the info it filled in;
//   5. validate each component it registered; a clash of names rejects the later plugin.
// A plugin rejected at any step leaves no component behind. Nothing here throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "support/status.h"

struct FleetComponent;

namespace fleet {

// "device", "kernels", "communicator", "pass", "transport", "op_schema" or "unknown(N)".
std::string ComponentKindName(int32_t kind);

struct ComponentRecord {
  int32_t kind = 0;
  std::string name;
  std::string summary;
  std::string plugin;          // name of the plugin that registered it
  void* ctx = nullptr;         // first argument of every slot
  size_t vtable_size = 0;      // the plugin's struct_size of its vtable
  int32_t device_type_id = -1; // devices only: the id tensors carry (FleetTensor.device_type)
  // The ABI minor its plugin was built against (PluginRecord::abi_minor; the host's own for a
  // host component). A contract a minor added to a component (not to a table slot the host
  // can test for NULL) holds only where this is at least that minor.
  uint32_t abi_minor = 0;

  // The host's copy of the vtable, zero-filled past the plugin's struct_size, so a slot the
  // plugin's (older) table lacks reads as NULL. Its struct_size member is the plugin's.
  template <typename T>
  const T* table() const {
    return reinterpret_cast<const T*>(vtable_copy.data());
  }
  std::vector<std::max_align_t> vtable_copy;
};

struct PluginRecord {
  std::string name;                   // from the file name: libfleet_NAME.so -> NAME
  std::filesystem::path file;
  std::string version;
  std::string description;
  uint32_t abi_major = 0;             // what the plugin was built against
  uint32_t abi_minor = 0;
  std::vector<std::string> components;  // "kind:name", in registration order
  std::vector<std::string> notes;       // skipped unknown kinds, unread config keys, ...
  double load_ms = 0;                   // dlopen plus entry: what listing it costs
};

struct Rejection {
  std::filesystem::path file;
  std::string plugin;   // name from the file name
  Status reason;
};

struct LoadOptions {
  std::vector<std::filesystem::path> search_dirs;  // in priority order
  bool allow_insecure = false;
  std::map<std::string, std::vector<ConfigValue>> plugin_config;  // per plugin name
};

// The search path for a config: its [plugins] dirs, FLEET_PLUGIN_PATH (colon-separated), then
// the plugin directory of this installation (found relative to the running executable). In
// secure mode only the installation's directory.
std::vector<std::filesystem::path> PluginSearchPath(const Config& config);

// Whether this process runs with privileges its caller does not have (setuid or setgid, or the
// kernel's AT_SECURE). Then whoever started it may not choose the code it loads: the
// environment (FLEET_PLUGIN_PATH) and the config's plugins.dirs and plugins.allow_insecure
// (from a file they may have written, or --set) are ignored, as the dynamic loader ignores
// LD_LIBRARY_PATH.
bool SecureMode();

// The plugin name of a file ("libfleet_cpu.so" -> "cpu"), or empty if the file name does not
// follow the libfleet_NAME.so pattern.
std::string PluginNameFromFile(const std::filesystem::path& file);

class PluginContext;

// Owns every loaded plugin and its components for the life of the process. Not thread-safe
// while loading; lookups after loading may run on any thread.
class PluginRegistry {
 public:
  explicit PluginRegistry(LoadOptions options);
  ~PluginRegistry();  // calls each plugin's shutdown, in reverse load order
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Every libfleet_*.so in the search dirs, first occurrence of each name, in search order.
  // Other regular files ending in .so are returned too (they will fail to load with a reason).
  std::vector<std::filesystem::path> Discover() const;

  // Loads a plugin given by name (searched) or by path (a string containing '/'). Loading the
  // same file twice returns the existing record. On failure the reason is also recorded in
  // rejected().
  StatusOr<const PluginRecord*> Load(std::string_view name_or_path);

  // Loads every discovered file; failures are recorded in rejected().
  void LoadAll();

  const std::vector<std::unique_ptr<PluginRecord>>& plugins() const { return plugins_; }
  const std::vector<Rejection>& rejected() const { return rejected_; }

  // Adds a component the host itself provides (plugin "host"), such as a built-in pass. Call it
  // before loading plugins, so a plugin offering the same kind and name is refused as
  // ALREADY_EXISTS like any other clash. `record.ctx` and the vtable must outlive the registry.
  Status RegisterHostComponent(std::unique_ptr<ComponentRecord> record);

  // The component of `kind` named `name`, or nullptr.
  const ComponentRecord* Find(int32_t kind, std::string_view name) const;
  std::vector<const ComponentRecord*> Components(int32_t kind) const;
  const PluginRecord* FindPlugin(std::string_view name) const;

  const LoadOptions& options() const { return options_; }

 private:
  friend class PluginContext;
  struct Loaded;  // the library handle, the host table and the info of one plugin

  StatusOr<const PluginRecord*> LoadFile(const std::filesystem::path& file);
  Status Reject(const std::filesystem::path& file, Status reason);

  LoadOptions options_;
  std::vector<std::unique_ptr<PluginRecord>> plugins_;
  std::vector<std::unique_ptr<Loaded>> loaded_;
  std::vector<Rejection> rejected_;
  std::vector<std::unique_ptr<ComponentRecord>> components_;
  int32_t next_device_type_id_ = 1;
};

}  // namespace fleet
