#include "plugin/device.h"

#include <cstdlib>

#include "plugin/host_api.h"

namespace fleet {

Device::Device(const ComponentRecord* component)
    : component_(component), table_(component->table<FleetDeviceVTable>()) {}

std::string Device::Where(const char* slot) const {
  return "device '" + component_->name + "' (plugin '" + component_->plugin + "'): " + slot;
}

Status Device::Check(FleetStatus* status, const char* slot) const {
  // Copies and synchronisation run every step: build the context only for an error.
  if (status == nullptr) return OkStatus();
  return TakeStatus(status, Where(slot));
}

StatusOr<int32_t> Device::Count() const {
  int32_t n = 0;
  FLEET_RETURN_IF_ERROR(Check(table_->count(component_->ctx, &n), "count"));
  if (n < 0) return Internal(Where("count") + " returned a negative count");
  return n;
}

StatusOr<DeviceProps> Device::Props(int32_t ordinal) const {
  FleetDeviceProps raw{};
  raw.struct_size = FLEET_STRUCT_SIZE(FleetDeviceProps, reserved);
  FLEET_RETURN_IF_ERROR(Check(table_->props(component_->ctx, ordinal, &raw), "props"));
  DeviceProps p;
  p.model = raw.model != nullptr ? raw.model : "";
  p.physical_id = raw.physical_id;
  p.caps = raw.caps;
  p.total_memory = raw.total_memory;
  p.alignment = raw.alignment;
  p.compute_units = raw.compute_units;
  return p;
}

StatusOr<void*> Device::Alloc(int32_t ordinal, size_t bytes) const {
  void* p = nullptr;
  FLEET_RETURN_IF_ERROR(
      Check(table_->alloc(component_->ctx, ordinal, bytes, &p), "alloc"));
  return p;
}

Status Device::Free(int32_t ordinal, void* ptr) const {
  return Check(table_->free(component_->ctx, ordinal, ptr), "free");
}

Status Device::CopyToDevice(int32_t ordinal, void* dst, const void* src, size_t bytes,
                            FleetStream* stream) const {
  return Check(table_->copy_h2d(component_->ctx, ordinal, dst, src, bytes, stream), "copy_h2d");
}

Status Device::CopyToHost(int32_t ordinal, void* dst, const void* src, size_t bytes,
                          FleetStream* stream) const {
  return Check(table_->copy_d2h(component_->ctx, ordinal, dst, src, bytes, stream), "copy_d2h");
}

Status Device::Memset(int32_t ordinal, void* dst, int32_t value, size_t bytes,
                      FleetStream* stream) const {
  return Check(table_->memset(component_->ctx, ordinal, dst, value, bytes, stream), "memset");
}

Status Device::Synchronize(int32_t ordinal) const {
  return Check(table_->synchronize(component_->ctx, ordinal), "synchronize");
}

StatusOr<FleetStream*> Device::StreamCreate(int32_t ordinal) const {
  FleetStream* stream = nullptr;
  FLEET_RETURN_IF_ERROR(
      Check(table_->stream_create(component_->ctx, ordinal, &stream), "stream_create"));
  if (stream == nullptr) return Internal(Where("stream_create") + " returned no stream");
  return stream;
}

Status Device::StreamDestroy(FleetStream* stream) const {
  return Check(table_->stream_destroy(component_->ctx, stream), "stream_destroy");
}

Status Device::StreamSynchronize(FleetStream* stream) const {
  return Check(table_->stream_synchronize(component_->ctx, stream), "stream_synchronize");
}

StatusOr<FleetEvent*> Device::EventCreate(int32_t ordinal) const {
  FleetEvent* event = nullptr;
  FLEET_RETURN_IF_ERROR(
      Check(table_->event_create(component_->ctx, ordinal, &event), "event_create"));
  if (event == nullptr) return Internal(Where("event_create") + " returned no event");
  return event;
}

Status Device::EventDestroy(FleetEvent* event) const {
  return Check(table_->event_destroy(component_->ctx, event), "event_destroy");
}

Status Device::EventRecord(FleetEvent* event, FleetStream* stream) const {
  return Check(table_->event_record(component_->ctx, event, stream), "event_record");
}

Status Device::StreamWaitEvent(FleetStream* stream, FleetEvent* event) const {
  return Check(table_->stream_wait_event(component_->ctx, stream, event), "stream_wait_event");
}

Status Device::EventSynchronize(FleetEvent* event) const {
  return Check(table_->event_synchronize(component_->ctx, event), "event_synchronize");
}

StatusOr<void*> Device::HostAlloc(size_t bytes) const {
  if (FLEET_CAN_CALL(table_, FleetDeviceVTable, host_alloc) &&
      FLEET_CAN_CALL(table_, FleetDeviceVTable, host_free)) {
    void* p = nullptr;
    FLEET_RETURN_IF_ERROR(Check(table_->host_alloc(component_->ctx, bytes, &p), "host_alloc"));
    return p;
  }
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) {
    return ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  }
  return p;
}

Status Device::HostFree(void* ptr) const {
  if (ptr == nullptr) return OkStatus();
  if (FLEET_CAN_CALL(table_, FleetDeviceVTable, host_alloc) &&
      FLEET_CAN_CALL(table_, FleetDeviceVTable, host_free)) {
    return Check(table_->host_free(component_->ctx, ptr), "host_free");
  }
  std::free(ptr);
  return OkStatus();
}

}  // namespace fleet
