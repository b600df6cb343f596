// The outcome of host-side kernel planning shared by Fleet's device plugins (layout_plan.h and
// friends). Planning code lives in plugins/common and cannot make a FleetStatus itself: each
// plugin allocates statuses through its own host table, so the planner returns code + message
// and the plugin turns that into its status with ToFleetStatus. Plain C++17, no device code.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "fleet/fleet_kernels.h"

namespace fleet::kernel {

// FLEET_CODE_OK with an empty message means success; any other code carries the exact message
// the kernel reports (tests match on it, so planners build it verbatim).
struct PlanStatus {
  int32_t code = FLEET_CODE_OK;
  std::string message;

  bool ok() const { return code == FLEET_CODE_OK; }
};

inline PlanStatus PlanOk() { return PlanStatus{}; }
inline PlanStatus PlanInvalid(std::string message) {
  return PlanStatus{FLEET_CODE_INVALID_ARGUMENT, std::move(message)};
}
inline PlanStatus PlanUnimplemented(std::string message) {
  return PlanStatus{FLEET_CODE_UNIMPLEMENTED, std::move(message)};
}

// NULL for success, else `make_error(code, message)`: the plugin's own status constructor
// (fleet_cpu::Error, fleet_cuda::Error).
template <typename MakeError>
FleetStatus* ToFleetStatus(const PlanStatus& s, MakeError&& make_error) {
  if (s.ok()) return nullptr;
  return make_error(s.code, s.message);
}

// The op's name for messages; "kernel" for a hand-built context without one.
inline std::string OpName(const FleetKernelContext* kc) {
  return kc != nullptr && kc->op_type != nullptr ? kc->op_type : "kernel";
}

}  // namespace fleet::kernel
