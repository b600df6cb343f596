// The "cpu" device: host memory, memcpy copies, and streams that run work synchronously.
#pragma once

#include "fleet/plugin.hpp"

namespace fleet_cpu {

// Remembers the host's services (for status objects). Called from the entry point.
void SetHost(const FleetHostApi* host);
// The services remembered by SetHost.
const FleetHostApi* GetHost();

// The device component's table (static storage).
const FleetDeviceVTable* DeviceVTable();

}  // namespace fleet_cpu
