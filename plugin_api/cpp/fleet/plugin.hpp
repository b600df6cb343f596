// plugin.hpp — optional header-only helpers for plugins written in C++.
//
// Nothing here is part of the ABI: it only makes the C contract easy to keep.
//   - fleet::plugin::Host wraps the FleetHostApi a plugin receives: statuses, logging, config.
//   - FLEET_PLUGIN_GUARD turns any exception into an INTERNAL status, because no exception may
//     cross the boundary. Wrap the body of every slot and of the entry point in it.
//   - fleet::plugin::Register registers a component and treats UNIMPLEMENTED (a kind the host
//     does not know) as "carry on without it", as fleet_host.h asks.
#ifndef FLEET_PLUGIN_HPP_
#define FLEET_PLUGIN_HPP_

#include <exception>
#include <string>

#include "fleet/fleet_plugin.h"

namespace fleet::plugin {

class Host {
 public:
  Host() = default;
  explicit Host(const FleetHostApi* api) : api_(api) {}

  const FleetHostApi* api() const { return api_; }

  FleetStatus* Error(int32_t code, const std::string& message) const {
    return api_->status_new(code, message.c_str());
  }

  void Log(int32_t level, const std::string& message) const {
    if (FLEET_CAN_CALL(api_, FleetHostApi, log)) api_->log(api_->host_ctx, level, message.c_str());
  }
  bool LogEnabled(int32_t level) const {
    return FLEET_CAN_CALL(api_, FleetHostApi, log_enabled) &&
           api_->log_enabled(api_->host_ctx, level) != 0;
  }

  // Looks up an integer config key; returns `fallback` when absent or of another type.
  int64_t ConfigInt(const char* key, int64_t fallback) const {
    FleetAttr attr{};
    attr.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings);
    if (!FLEET_CAN_CALL(api_, FleetHostApi, config_get)) return fallback;
    FleetStatus* s = api_->config_get(api_->host_ctx, key, &attr);
    if (s != nullptr) {
      api_->status_free(s);
      return fallback;
    }
    return (attr.type == FLEET_ATTR_INT || attr.type == FLEET_ATTR_INT64) ? attr.i : fallback;
  }

 private:
  const FleetHostApi* api_ = nullptr;
};

// Registers `component`; OK when the host accepted it or does not know its kind.
inline FleetStatus* Register(const Host& host, const FleetComponent& component) {
  FleetStatus* s = host.api()->register_component(host.api()->host_ctx, &component);
  if (s != nullptr && host.api()->status_code(s) == FLEET_CODE_UNIMPLEMENTED) {
    host.api()->status_free(s);
    return nullptr;
  }
  return s;
}

}  // namespace fleet::plugin

// Runs `body` (a statement block returning FleetStatus*) and converts exceptions to statuses.
// `host` is a fleet::plugin::Host.
#define FLEET_PLUGIN_GUARD(host, body)                                          \
  try {                                                                         \
    body                                                                        \
  } catch (const std::exception& fleet_e_) {                                    \
    return (host).Error(FLEET_CODE_INTERNAL, std::string("exception: ") + fleet_e_.what()); \
  } catch (...) {                                                               \
    return (host).Error(FLEET_CODE_INTERNAL, "unknown exception");              \
  }

#endif  // FLEET_PLUGIN_HPP_
