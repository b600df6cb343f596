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
  // Copies on `stream`; with a NULL stream (the default) they return when the copy is done.
  // Host memory handed to an asynchronous copy must stay valid until the stream reaches it.
  Status CopyToDevice(int32_t ordinal, void* dst, const void* src, size_t bytes,
                      FleetStream* stream = nullptr) const;
  Status CopyToHost(int32_t ordinal, void* dst, const void* src, size_t bytes,
                    FleetStream* stream = nullptr) const;
  Status Memset(int32_t ordinal, void* dst, int32_t value, size_t bytes,
                FleetStream* stream = nullptr) const;
  Status Synchronize(int32_t ordinal) const;

  // Streams and events (fleet_device.h); every object made here is destroyed here.
  StatusOr<FleetStream*> StreamCreate(int32_t ordinal) const;
  Status StreamDestroy(FleetStream* stream) const;
  Status StreamSynchronize(FleetStream* stream) const;
  StatusOr<FleetEvent*> EventCreate(int32_t ordinal) const;
  Status EventDestroy(FleetEvent* event) const;
  Status EventRecord(FleetEvent* event, FleetStream* stream) const;
  Status StreamWaitEvent(FleetStream* stream, FleetEvent* event) const;
  Status EventSynchronize(FleetEvent* event) const;

  // Page-locked host memory when the device offers it (host_alloc), else ordinary memory; free
  // it with HostFree of the same device.
  StatusOr<void*> HostAlloc(size_t bytes) const;
  Status HostFree(void* ptr) const;

  // The raw table and ctx, for handing the device to another plugin (FleetCommConfig).
  const FleetDeviceVTable* table() const { return table_; }
  void* ctx() const { return component_->ctx; }

 private:
  std::string Where(const char* slot) const;
  Status Check(FleetStatus* status, const char* slot) const;

  const ComponentRecord* component_;
  const FleetDeviceVTable* table_;
};

}  // namespace fleet
