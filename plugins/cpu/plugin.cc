// Entry point of the CPU plugin: registers the "cpu" device. Kernels (oneDNN) join it here as
// they are written.
#include "device.h"

extern "C" FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host,
                                                           FleetPluginInfo* info) {
  fleet::plugin::Host h(host);
  FLEET_PLUGIN_GUARD(h, {
    fleet_cpu::SetHost(host);
    if (FLEET_HAS_FIELD(info, FleetPluginInfo, description)) {
      info->abi_major = FLEET_ABI_MAJOR;
      info->abi_minor = FLEET_ABI_MINOR;
      info->name = "cpu";
      info->version = "0.1.0";
      info->description = "CPU device: host memory, synchronous streams";
    }
    FleetComponent device{};
    device.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
    device.kind = FLEET_COMPONENT_DEVICE;
    device.name = "cpu";
    device.summary = "host memory (64-byte aligned), memcpy copies, synchronous streams";
    device.vtable = fleet_cpu::DeviceVTable();
    return fleet::plugin::Register(h, device);
  })
}
