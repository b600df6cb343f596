// A C++ view of a device component: the host calls device slots only through this class, which
// checks optional slots and turns plugin statuses into Status.
#pragma once

#include <cstdint>
#include <string>

#include "fleet/fleet_device.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

struct DeviceProps {
  std::string model;
  int32_t physical_id = -1;
  uint32_t caps = 0;
  uint64_t total_memory = 0;
  uint64_t alignment = 0;
  int32_t compute_units = 0;
};

class Device {
 public:
  // `component` must be a device component of a registry that outlives this object.
  explicit Device(const ComponentRecord* component);

  const std::string& name() const { return component_->name; }
  int32_t type_id() const { return component_->device_type_id; }

  StatusOr<int32_t> Count() const;
  StatusOr<DeviceProps> Props(int32_t ordinal) const;
  StatusOr<void*> Alloc(int32_t ordinal, size_t bytes) const;
  Status Free(int32_t ordinal, void* ptr) const;
  // Synchronous copies (NULL stream).
  Status CopyToDevice(int32_t ordinal, void* dst, const void* src, size_t bytes) const;
  Status CopyToHost(int32_t ordinal, void* dst, const void* src, size_t bytes) const;
  Status Synchronize(int32_t ordinal) const;

 private:
  std::string Where(const char* slot) const;
  Status Check(FleetStatus* status, const char* slot) const;

  const ComponentRecord* component_;
  const FleetDeviceVTable* table_;
};

}  // namespace fleet
