// Entry point of the CUDA plugin: registers the "cuda" device and one kernels component holding
// every CUDA kernel. Opens no device: `fleet-host plugins` runs this on machines without a GPU,
// where the device answers count = 0 and says why (NoDeviceReason).
#include "device.h"
#include "kernels/kernel_util.h"

namespace {

void Shutdown(void*) { fleet_cuda::ReleaseAllCachedMemory(); }

}  // namespace

extern "C" FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host,
                                                           FleetPluginInfo* info) {
  fleet::plugin::Host h(host);
  FLEET_PLUGIN_GUARD(h, {
    fleet_cuda::SetHost(host);
    if (FLEET_HAS_FIELD(info, FleetPluginInfo, description)) {
      info->abi_major = FLEET_ABI_MAJOR;
      info->abi_minor = FLEET_ABI_MINOR;
      info->name = "cuda";
      info->version = "0.1.0";
      info->description = "CUDA device and kernels (cuBLAS, cuDNN and CUDA C++)";
    }
    if (FLEET_HAS_FIELD(info, FleetPluginInfo, shutdown)) info->shutdown = Shutdown;
    FleetComponent device{};
    device.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
    device.kind = FLEET_COMPONENT_DEVICE;
    device.name = "cuda";
    device.summary = "NVIDIA GPUs: caching allocator, pinned host memory, CUDA streams and events";
    device.vtable = fleet_cuda::DeviceVTable();
    if (FleetStatus* s = fleet::plugin::Register(h, device)) return s;

    static FleetKernelsVTable kernels_table{};
    const fleet_cuda::KernelList& list = fleet_cuda::AllKernels();
    kernels_table.struct_size = FLEET_STRUCT_SIZE(FleetKernelsVTable, kernels);
    kernels_table.count = list.size();
    kernels_table.kernels = list.data();
    FleetComponent kernels{};
    kernels.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
    kernels.kind = FLEET_COMPONENT_KERNELS;
    kernels.name = "cuda";
    kernels.summary = "CUDA kernels: cuBLAS GEMMs, cuDNN convolution/pooling/batch norm, own kernels";
    kernels.vtable = &kernels_table;
    return fleet::plugin::Register(h, kernels);
  })
}
