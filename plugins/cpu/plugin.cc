// Entry point of the CPU plugin: registers the "cpu" device and one kernels component holding
// every CPU kernel (oneDNN for the heavy ops, plain C++ for the rest).
#include "device.h"
#include "kernels/kernel_util.h"

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
      info->description = "CPU device and kernels (oneDNN and plain C++)";
    }
    FleetComponent device{};
    device.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
    device.kind = FLEET_COMPONENT_DEVICE;
    device.name = "cpu";
    device.summary = "host memory (64-byte aligned), memcpy copies, synchronous streams";
    device.vtable = fleet_cpu::DeviceVTable();
    if (FleetStatus* s = fleet::plugin::Register(h, device)) return s;

    static FleetKernelsVTable kernels_table{};
    const fleet_cpu::KernelList& list = fleet_cpu::AllKernels();
    kernels_table.struct_size = FLEET_STRUCT_SIZE(FleetKernelsVTable, kernels);
    kernels_table.count = list.size();
    kernels_table.kernels = list.data();
    FleetComponent kernels{};
    kernels.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
    kernels.kind = FLEET_COMPONENT_KERNELS;
    kernels.name = "cpu";
    kernels.summary = "CPU kernels: oneDNN primitives for the heavy ops, C++ for the rest";
    kernels.vtable = &kernels_table;
    return fleet::plugin::Register(h, kernels);
  })
}
