#include "plugin/device.h"

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

Status Device::CopyToDevice(int32_t ordinal, void* dst, const void* src, size_t bytes) const {
  return Check(table_->copy_h2d(component_->ctx, ordinal, dst, src, bytes, nullptr), "copy_h2d");
}

Status Device::CopyToHost(int32_t ordinal, void* dst, const void* src, size_t bytes) const {
  return Check(table_->copy_d2h(component_->ctx, ordinal, dst, src, bytes, nullptr), "copy_d2h");
}

Status Device::Synchronize(int32_t ordinal) const {
  return Check(table_->synchronize(component_->ctx, ordinal), "synchronize");
}

}  // namespace fleet
