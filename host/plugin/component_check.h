// Validation of the components a plugin registers: sizes, required slots, names.
#pragma once

#include "fleet/fleet_plugin.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// Largest struct_size the host believes; anything larger is nonsense rather than a newer minor.
inline constexpr size_t kMaxStructSize = 64 * 1024;

// Whether `kind` is a FLEET_COMPONENT_* this host knows.
bool IsKnownComponentKind(int32_t kind);

// Checks `component` (whose kind is known) and fills `out` with its name, summary, ctx and a
// copy of its vtable. INVALID_ARGUMENT names the component and the member at fault.
Status CheckComponent(const FleetComponent& component, ComponentRecord* out);

}  // namespace fleet
