// What `plugins NAME` and `devices` show of a device component: its units and their
// properties, asked through the device's vtable (count and props only; nothing is opened).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "plugin/registry.h"

namespace fleet {

// {"count": N, "devices": [{"ordinal", "model", "physical_id", "total_memory", "alignment",
// "compute_units", "caps": ["host-memory", ...]}]}, an entry {"ordinal", "error"} for a unit
// whose props failed, or {"error": ...} when count failed.
nlohmann::json DeviceDetailsJson(const ComponentRecord* device);

// "host-memory,sync-streams" from the "caps" array above ("none" when empty).
std::string CapsText(const nlohmann::json& caps);

// "1.5 GiB".
std::string HumanBytes(uint64_t bytes);

}  // namespace fleet
