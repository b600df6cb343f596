// Freezes the layout of the plugin ABI, as the versioning rules in fleet_abi.h promise.
//
// A plugin built against ABI 1.0 must keep working with every 1.x host, so nothing in a released
// minor may move, change type or change value: not a member's offset, not a slot's signature, not
// an enum constant. Each released minor gets one block below, written when it is released and
// never edited afterwards. A later minor appends members, so its block adds the new members (and
// the new FLEET_STRUCT_SIZE through them); the old blocks keep compiling unchanged. A static_assert
// failing here means an incompatible change: undo it, or make it a new major.
//
// The offsets are those of x86-64 (and every other LP64 target: 8-byte pointers, size_t and
// int64_t, 4-byte int32_t), the platform Fleet ships for.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <gtest/gtest.h>

#include "fleet/fleet_plugin.h"
#include "support/status.h"

// Member M of struct T lies at byte `offset` and has exactly the given type (for a function slot,
// its full signature, so that a changed parameter is caught although the layout is unchanged).
#define FLEET_FROZEN_MEMBER(T, M, offset, ...)                              \
  static_assert(offsetof(T, M) == (offset), #T "." #M " moved");            \
  static_assert(std::is_same_v<decltype(T::M), __VA_ARGS__>, #T "." #M " changed type")

// FLEET_STRUCT_SIZE(T, M) for the last member M of a minor: what a writer of that minor puts
// into struct_size.
#define FLEET_FROZEN_SIZE(T, M, size) \
  static_assert(FLEET_STRUCT_SIZE(T, M) == (size), #T " size through " #M " changed")

#if defined(__LP64__) || defined(_LP64)
#define FLEET_LAYOUT_CHECKED 1
static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8 && sizeof(int64_t) == 8 &&
              sizeof(double) == 8 && sizeof(int32_t) == 4 && alignof(int64_t) == 8);

// =================================================================================================
// ABI 1.0 — frozen; never edit, only add a block for 1.1
// =================================================================================================

// ---- fleet_abi.h --------------------------------------------------------------------------------

// FleetTensor
FLEET_FROZEN_MEMBER(FleetTensor, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetTensor, data, 8, void*);
FLEET_FROZEN_MEMBER(FleetTensor, dtype, 16, int32_t);
FLEET_FROZEN_MEMBER(FleetTensor, ndim, 20, int32_t);
FLEET_FROZEN_MEMBER(FleetTensor, dims, 24, const int64_t*);
FLEET_FROZEN_MEMBER(FleetTensor, strides, 32, const int64_t*);
FLEET_FROZEN_MEMBER(FleetTensor, device_type, 40, int32_t);
FLEET_FROZEN_MEMBER(FleetTensor, device_ordinal, 44, int32_t);
FLEET_FROZEN_SIZE(FleetTensor, device_ordinal, 48);

// FleetAttr
FLEET_FROZEN_MEMBER(FleetAttr, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetAttr, name, 8, const char*);
FLEET_FROZEN_MEMBER(FleetAttr, type, 16, int32_t);
FLEET_FROZEN_MEMBER(FleetAttr, reserved, 20, int32_t);
FLEET_FROZEN_MEMBER(FleetAttr, i, 24, int64_t);
FLEET_FROZEN_MEMBER(FleetAttr, f, 32, double);
FLEET_FROZEN_MEMBER(FleetAttr, s, 40, const char*);
FLEET_FROZEN_MEMBER(FleetAttr, s_len, 48, size_t);
FLEET_FROZEN_MEMBER(FleetAttr, count, 56, size_t);
FLEET_FROZEN_MEMBER(FleetAttr, ints, 64, const int64_t*);
FLEET_FROZEN_MEMBER(FleetAttr, floats, 72, const double*);
FLEET_FROZEN_MEMBER(FleetAttr, strings, 80, const char* const*);
FLEET_FROZEN_SIZE(FleetAttr, strings, 88);

// ---- fleet_host.h -------------------------------------------------------------------------------

// FleetComponent
FLEET_FROZEN_MEMBER(FleetComponent, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetComponent, kind, 8, int32_t);
FLEET_FROZEN_MEMBER(FleetComponent, reserved, 12, int32_t);
FLEET_FROZEN_MEMBER(FleetComponent, name, 16, const char*);
FLEET_FROZEN_MEMBER(FleetComponent, summary, 24, const char*);
FLEET_FROZEN_MEMBER(FleetComponent, ctx, 32, void*);
FLEET_FROZEN_MEMBER(FleetComponent, vtable, 40, const void*);
FLEET_FROZEN_SIZE(FleetComponent, vtable, 48);

// FleetStore
FLEET_FROZEN_MEMBER(FleetStore, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetStore, ctx, 8, void*);
FLEET_FROZEN_MEMBER(FleetStore, set, 16, FleetStatus* (*)(void*, const char*, const void*, size_t));
FLEET_FROZEN_MEMBER(FleetStore, get, 24,
                    FleetStatus* (*)(void*, const char*, int64_t, void* (*)(void*, size_t), void*,
                                     size_t*));
FLEET_FROZEN_MEMBER(FleetStore, add, 32, FleetStatus* (*)(void*, const char*, int64_t, int64_t*));
FLEET_FROZEN_MEMBER(FleetStore, wait, 40,
                    FleetStatus* (*)(void*, const char* const*, size_t, int64_t));
FLEET_FROZEN_SIZE(FleetStore, wait, 48);

// FleetHostApi
FLEET_FROZEN_MEMBER(FleetHostApi, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetHostApi, abi_major, 8, uint32_t);
FLEET_FROZEN_MEMBER(FleetHostApi, abi_minor, 12, uint32_t);
FLEET_FROZEN_MEMBER(FleetHostApi, host_version, 16, const char*);
FLEET_FROZEN_MEMBER(FleetHostApi, host_ctx, 24, void*);
FLEET_FROZEN_MEMBER(FleetHostApi, status_new, 32, FleetStatus* (*)(int32_t, const char*));
FLEET_FROZEN_MEMBER(FleetHostApi, status_code, 40, int32_t (*)(const FleetStatus*));
FLEET_FROZEN_MEMBER(FleetHostApi, status_message, 48, const char* (*)(const FleetStatus*));
FLEET_FROZEN_MEMBER(FleetHostApi, status_free, 56, void (*)(FleetStatus*));
FLEET_FROZEN_MEMBER(FleetHostApi, log, 64, void (*)(void*, int32_t, const char*));
FLEET_FROZEN_MEMBER(FleetHostApi, log_enabled, 72, int32_t (*)(void*, int32_t));
FLEET_FROZEN_MEMBER(FleetHostApi, register_component, 80,
                    FleetStatus* (*)(void*, const FleetComponent*));
FLEET_FROZEN_MEMBER(FleetHostApi, config_count, 88, size_t (*)(void*));
FLEET_FROZEN_MEMBER(FleetHostApi, config_at, 96, FleetStatus* (*)(void*, size_t, FleetAttr*));
FLEET_FROZEN_MEMBER(FleetHostApi, config_get, 104,
                    FleetStatus* (*)(void*, const char*, FleetAttr*));
FLEET_FROZEN_MEMBER(FleetHostApi, device_type_id, 112, int32_t (*)(void*, const char*));
FLEET_FROZEN_MEMBER(FleetHostApi, store_open, 120,
                    FleetStatus* (*)(void*, const char*, const FleetStore**));
FLEET_FROZEN_MEMBER(FleetHostApi, program, 128, const FleetProgramApi*);
FLEET_FROZEN_SIZE(FleetHostApi, program, 136);

// FleetPluginInfo
FLEET_FROZEN_MEMBER(FleetPluginInfo, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetPluginInfo, abi_major, 8, uint32_t);
FLEET_FROZEN_MEMBER(FleetPluginInfo, abi_minor, 12, uint32_t);
FLEET_FROZEN_MEMBER(FleetPluginInfo, name, 16, const char*);
FLEET_FROZEN_MEMBER(FleetPluginInfo, version, 24, const char*);
FLEET_FROZEN_MEMBER(FleetPluginInfo, description, 32, const char*);
FLEET_FROZEN_MEMBER(FleetPluginInfo, plugin_ctx, 40, void*);
FLEET_FROZEN_MEMBER(FleetPluginInfo, shutdown, 48, void (*)(void*));
FLEET_FROZEN_SIZE(FleetPluginInfo, shutdown, 56);

// ---- fleet_device.h -----------------------------------------------------------------------------

// FleetDeviceProps
FLEET_FROZEN_MEMBER(FleetDeviceProps, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetDeviceProps, model, 8, const char*);
FLEET_FROZEN_MEMBER(FleetDeviceProps, physical_id, 16, int32_t);
FLEET_FROZEN_MEMBER(FleetDeviceProps, caps, 20, uint32_t);
FLEET_FROZEN_MEMBER(FleetDeviceProps, total_memory, 24, uint64_t);
FLEET_FROZEN_MEMBER(FleetDeviceProps, alignment, 32, uint64_t);
FLEET_FROZEN_MEMBER(FleetDeviceProps, compute_units, 40, int32_t);
FLEET_FROZEN_MEMBER(FleetDeviceProps, reserved, 44, int32_t);
FLEET_FROZEN_SIZE(FleetDeviceProps, reserved, 48);

// FleetDeviceVTable
FLEET_FROZEN_MEMBER(FleetDeviceVTable, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetDeviceVTable, count, 8, FleetStatus* (*)(void*, int32_t*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, props, 16,
                    FleetStatus* (*)(void*, int32_t, FleetDeviceProps*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, alloc, 24, FleetStatus* (*)(void*, int32_t, size_t, void**));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, free, 32, FleetStatus* (*)(void*, int32_t, void*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, stream_create, 40,
                    FleetStatus* (*)(void*, int32_t, FleetStream**));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, stream_destroy, 48, FleetStatus* (*)(void*, FleetStream*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, stream_synchronize, 56,
                    FleetStatus* (*)(void*, FleetStream*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, copy_h2d, 64,
                    FleetStatus* (*)(void*, int32_t, void*, const void*, size_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, copy_d2h, 72,
                    FleetStatus* (*)(void*, int32_t, void*, const void*, size_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, copy_d2d, 80,
                    FleetStatus* (*)(void*, int32_t, void*, const void*, size_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, memset, 88,
                    FleetStatus* (*)(void*, int32_t, void*, int32_t, size_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, event_create, 96,
                    FleetStatus* (*)(void*, int32_t, FleetEvent**));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, event_destroy, 104, FleetStatus* (*)(void*, FleetEvent*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, event_record, 112,
                    FleetStatus* (*)(void*, FleetEvent*, FleetStream*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, stream_wait_event, 120,
                    FleetStatus* (*)(void*, FleetStream*, FleetEvent*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, event_synchronize, 128,
                    FleetStatus* (*)(void*, FleetEvent*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, synchronize, 136, FleetStatus* (*)(void*, int32_t));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, host_alloc, 144, FleetStatus* (*)(void*, size_t, void**));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, host_free, 152, FleetStatus* (*)(void*, void*));
FLEET_FROZEN_MEMBER(FleetDeviceVTable, stream_native, 160,
                    FleetStatus* (*)(void*, FleetStream*, const char*, void**));
FLEET_FROZEN_SIZE(FleetDeviceVTable, stream_native, 168);

// ---- fleet_kernels.h ----------------------------------------------------------------------------

// FleetTensorSlot
FLEET_FROZEN_MEMBER(FleetTensorSlot, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetTensorSlot, name, 8, const char*);
FLEET_FROZEN_MEMBER(FleetTensorSlot, count, 16, size_t);
FLEET_FROZEN_MEMBER(FleetTensorSlot, tensors, 24, const FleetTensor* const*);
FLEET_FROZEN_SIZE(FleetTensorSlot, tensors, 32);

// FleetKernelContext
FLEET_FROZEN_MEMBER(FleetKernelContext, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetKernelContext, op_type, 8, const char*);
FLEET_FROZEN_MEMBER(FleetKernelContext, num_inputs, 16, size_t);
FLEET_FROZEN_MEMBER(FleetKernelContext, inputs, 24, const FleetTensorSlot* const*);
FLEET_FROZEN_MEMBER(FleetKernelContext, num_outputs, 32, size_t);
FLEET_FROZEN_MEMBER(FleetKernelContext, outputs, 40, const FleetTensorSlot* const*);
FLEET_FROZEN_MEMBER(FleetKernelContext, num_attrs, 48, size_t);
FLEET_FROZEN_MEMBER(FleetKernelContext, attrs, 56, const FleetAttr* const*);
FLEET_FROZEN_MEMBER(FleetKernelContext, device_ordinal, 64, int32_t);
FLEET_FROZEN_MEMBER(FleetKernelContext, num_threads, 68, int32_t);
FLEET_FROZEN_MEMBER(FleetKernelContext, stream, 72, FleetStream*);
FLEET_FROZEN_MEMBER(FleetKernelContext, scratch, 80, void*);
FLEET_FROZEN_MEMBER(FleetKernelContext, seed, 88, uint64_t);
FLEET_FROZEN_SIZE(FleetKernelContext, seed, 96);

// FleetKernelDef
FLEET_FROZEN_MEMBER(FleetKernelDef, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetKernelDef, op_type, 8, const char*);
FLEET_FROZEN_MEMBER(FleetKernelDef, device, 16, const char*);
FLEET_FROZEN_MEMBER(FleetKernelDef, dtype, 24, int32_t);
FLEET_FROZEN_MEMBER(FleetKernelDef, priority, 28, int32_t);
FLEET_FROZEN_MEMBER(FleetKernelDef, supports, 32,
                    FleetStatus* (*)(void*, const FleetKernelContext*));
FLEET_FROZEN_MEMBER(FleetKernelDef, prepare, 40,
                    FleetStatus* (*)(void*, const FleetKernelContext*, void**, size_t*));
FLEET_FROZEN_MEMBER(FleetKernelDef, launch, 48,
                    FleetStatus* (*)(void*, const FleetKernelContext*, void*));
FLEET_FROZEN_MEMBER(FleetKernelDef, release, 56, void (*)(void*, void*));
FLEET_FROZEN_SIZE(FleetKernelDef, release, 64);

// FleetKernelsVTable
FLEET_FROZEN_MEMBER(FleetKernelsVTable, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetKernelsVTable, count, 8, size_t);
FLEET_FROZEN_MEMBER(FleetKernelsVTable, kernels, 16, const FleetKernelDef* const*);
FLEET_FROZEN_SIZE(FleetKernelsVTable, kernels, 24);

// ---- fleet_comm.h -------------------------------------------------------------------------------

// FleetCommConfig
FLEET_FROZEN_MEMBER(FleetCommConfig, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetCommConfig, rank, 8, int32_t);
FLEET_FROZEN_MEMBER(FleetCommConfig, world_size, 12, int32_t);
FLEET_FROZEN_MEMBER(FleetCommConfig, store, 16, const FleetStore*);
FLEET_FROZEN_MEMBER(FleetCommConfig, timeout_ms, 24, int64_t);
FLEET_FROZEN_MEMBER(FleetCommConfig, device, 32, const char*);
FLEET_FROZEN_MEMBER(FleetCommConfig, device_ordinal, 40, int32_t);
FLEET_FROZEN_MEMBER(FleetCommConfig, reserved, 44, int32_t);
FLEET_FROZEN_MEMBER(FleetCommConfig, num_options, 48, size_t);
FLEET_FROZEN_MEMBER(FleetCommConfig, options, 56, const FleetAttr* const*);
FLEET_FROZEN_SIZE(FleetCommConfig, options, 64);

// FleetCommVTable
FLEET_FROZEN_MEMBER(FleetCommVTable, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetCommVTable, num_devices, 8, size_t);
FLEET_FROZEN_MEMBER(FleetCommVTable, devices, 16, const char* const*);
FLEET_FROZEN_MEMBER(FleetCommVTable, create, 24,
                    FleetStatus* (*)(void*, const FleetCommConfig*, FleetComm**));
FLEET_FROZEN_MEMBER(FleetCommVTable, destroy, 32, FleetStatus* (*)(void*, FleetComm*));
FLEET_FROZEN_MEMBER(FleetCommVTable, abort, 40, void (*)(void*, FleetComm*));
FLEET_FROZEN_MEMBER(FleetCommVTable, all_reduce, 48,
                    FleetStatus* (*)(void*, FleetComm*, const FleetTensor*, const FleetTensor*,
                                     int32_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetCommVTable, broadcast, 56,
                    FleetStatus* (*)(void*, FleetComm*, const FleetTensor*, int32_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetCommVTable, all_gather, 64,
                    FleetStatus* (*)(void*, FleetComm*, const FleetTensor*, const FleetTensor*,
                                     FleetStream*));
FLEET_FROZEN_MEMBER(FleetCommVTable, reduce_scatter, 72,
                    FleetStatus* (*)(void*, FleetComm*, const FleetTensor*, const FleetTensor*,
                                     int32_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetCommVTable, reduce, 80,
                    FleetStatus* (*)(void*, FleetComm*, const FleetTensor*, const FleetTensor*,
                                     int32_t, int32_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetCommVTable, all_to_all, 88,
                    FleetStatus* (*)(void*, FleetComm*, const FleetTensor*, const FleetTensor*,
                                     FleetStream*));
FLEET_FROZEN_MEMBER(FleetCommVTable, send, 96,
                    FleetStatus* (*)(void*, FleetComm*, const FleetTensor*, int32_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetCommVTable, recv, 104,
                    FleetStatus* (*)(void*, FleetComm*, const FleetTensor*, int32_t, FleetStream*));
FLEET_FROZEN_MEMBER(FleetCommVTable, barrier, 112, FleetStatus* (*)(void*, FleetComm*));
FLEET_FROZEN_MEMBER(FleetCommVTable, new_group, 120,
                    FleetStatus* (*)(void*, FleetComm*, const int32_t*, size_t, FleetComm**));
FLEET_FROZEN_SIZE(FleetCommVTable, new_group, 128);

// ---- fleet_pass.h -------------------------------------------------------------------------------

// FleetSlot
FLEET_FROZEN_MEMBER(FleetSlot, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetSlot, name, 8, const char*);
FLEET_FROZEN_MEMBER(FleetSlot, count, 16, size_t);
FLEET_FROZEN_MEMBER(FleetSlot, vars, 24, const char* const*);
FLEET_FROZEN_SIZE(FleetSlot, vars, 32);

// FleetOpDesc
FLEET_FROZEN_MEMBER(FleetOpDesc, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetOpDesc, type, 8, const char*);
FLEET_FROZEN_MEMBER(FleetOpDesc, num_inputs, 16, size_t);
FLEET_FROZEN_MEMBER(FleetOpDesc, inputs, 24, const FleetSlot* const*);
FLEET_FROZEN_MEMBER(FleetOpDesc, num_outputs, 32, size_t);
FLEET_FROZEN_MEMBER(FleetOpDesc, outputs, 40, const FleetSlot* const*);
FLEET_FROZEN_MEMBER(FleetOpDesc, num_attrs, 48, size_t);
FLEET_FROZEN_MEMBER(FleetOpDesc, attrs, 56, const FleetAttr* const*);
FLEET_FROZEN_SIZE(FleetOpDesc, attrs, 64);

// FleetVarDesc
FLEET_FROZEN_MEMBER(FleetVarDesc, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetVarDesc, name, 8, const char*);
FLEET_FROZEN_MEMBER(FleetVarDesc, dtype, 16, int32_t);
FLEET_FROZEN_MEMBER(FleetVarDesc, ndim, 20, int32_t);
FLEET_FROZEN_MEMBER(FleetVarDesc, dims, 24, const int64_t*);
FLEET_FROZEN_MEMBER(FleetVarDesc, persistable, 32, int32_t);
FLEET_FROZEN_MEMBER(FleetVarDesc, stop_gradient, 36, int32_t);
FLEET_FROZEN_SIZE(FleetVarDesc, stop_gradient, 40);

// FleetProgramApi
FLEET_FROZEN_MEMBER(FleetProgramApi, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetProgramApi, program_count, 8, size_t (*)(FleetProgramSet*));
FLEET_FROZEN_MEMBER(FleetProgramApi, program_name, 16, const char* (*)(FleetProgramSet*, size_t));
FLEET_FROZEN_MEMBER(FleetProgramApi, program_get, 24,
                    FleetStatus* (*)(FleetProgramSet*, const char*, FleetProgram**));
FLEET_FROZEN_MEMBER(FleetProgramApi, program_add, 32,
                    FleetStatus* (*)(FleetProgramSet*, const char*, FleetProgram**));
FLEET_FROZEN_MEMBER(FleetProgramApi, block_count, 40, int32_t (*)(FleetProgram*));
FLEET_FROZEN_MEMBER(FleetProgramApi, block_add, 48,
                    FleetStatus* (*)(FleetProgram*, int32_t, int32_t*));
FLEET_FROZEN_MEMBER(FleetProgramApi, op_count, 56, int64_t (*)(FleetProgram*, int32_t));
FLEET_FROZEN_MEMBER(FleetProgramApi, op_get, 64,
                    FleetStatus* (*)(FleetProgram*, int32_t, int64_t, FleetOpDesc*));
FLEET_FROZEN_MEMBER(FleetProgramApi, op_insert, 72,
                    FleetStatus* (*)(FleetProgram*, int32_t, int64_t, const FleetOpDesc*));
FLEET_FROZEN_MEMBER(FleetProgramApi, op_remove, 80,
                    FleetStatus* (*)(FleetProgram*, int32_t, int64_t));
FLEET_FROZEN_MEMBER(FleetProgramApi, op_set_attr, 88,
                    FleetStatus* (*)(FleetProgram*, int32_t, int64_t, const FleetAttr*));
FLEET_FROZEN_MEMBER(FleetProgramApi, op_set_slot, 96,
                    FleetStatus* (*)(FleetProgram*, int32_t, int64_t, int32_t, const FleetSlot*));
FLEET_FROZEN_MEMBER(FleetProgramApi, var_count, 104, size_t (*)(FleetProgram*, int32_t));
FLEET_FROZEN_MEMBER(FleetProgramApi, var_at, 112,
                    FleetStatus* (*)(FleetProgram*, int32_t, size_t, FleetVarDesc*));
FLEET_FROZEN_MEMBER(FleetProgramApi, var_get, 120,
                    FleetStatus* (*)(FleetProgram*, int32_t, const char*, FleetVarDesc*));
FLEET_FROZEN_MEMBER(FleetProgramApi, var_add, 128,
                    FleetStatus* (*)(FleetProgram*, int32_t, const FleetVarDesc*));
FLEET_FROZEN_MEMBER(FleetProgramApi, var_remove, 136,
                    FleetStatus* (*)(FleetProgram*, int32_t, const char*));
FLEET_FROZEN_SIZE(FleetProgramApi, var_remove, 144);

// FleetPassContext
FLEET_FROZEN_MEMBER(FleetPassContext, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetPassContext, rank, 8, int32_t);
FLEET_FROZEN_MEMBER(FleetPassContext, world_size, 12, int32_t);
FLEET_FROZEN_MEMBER(FleetPassContext, role, 16, const char*);
FLEET_FROZEN_MEMBER(FleetPassContext, num_pservers, 24, size_t);
FLEET_FROZEN_MEMBER(FleetPassContext, pserver_endpoints, 32, const char* const*);
FLEET_FROZEN_SIZE(FleetPassContext, pserver_endpoints, 40);

// FleetPassVTable
FLEET_FROZEN_MEMBER(FleetPassVTable, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetPassVTable, num_options, 8, size_t);
FLEET_FROZEN_MEMBER(FleetPassVTable, options, 16, const FleetAttr* const*);
FLEET_FROZEN_MEMBER(FleetPassVTable, run, 24,
                    FleetStatus* (*)(void*, const FleetProgramApi*, FleetProgramSet*,
                                     const FleetPassContext*, size_t, const FleetAttr* const*));
FLEET_FROZEN_SIZE(FleetPassVTable, run, 32);

// ---- fleet_transport.h --------------------------------------------------------------------------

// FleetTransportHandlers
FLEET_FROZEN_MEMBER(FleetTransportHandlers, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetTransportHandlers, ctx, 8, void*);
FLEET_FROZEN_MEMBER(FleetTransportHandlers, on_send, 16,
                    FleetStatus* (*)(void*, int32_t, const char*, const FleetTensor*));
FLEET_FROZEN_MEMBER(FleetTransportHandlers, on_get, 24,
                    FleetStatus* (*)(void*, int32_t, const char*, FleetTensor*, void**));
FLEET_FROZEN_MEMBER(FleetTransportHandlers, on_get_done, 32, void (*)(void*, void*));
FLEET_FROZEN_MEMBER(FleetTransportHandlers, on_barrier, 40,
                    FleetStatus* (*)(void*, int32_t, int32_t));
FLEET_FROZEN_MEMBER(FleetTransportHandlers, on_complete, 48, FleetStatus* (*)(void*, int32_t));
FLEET_FROZEN_SIZE(FleetTransportHandlers, on_complete, 56);

// FleetTransportServerConfig
FLEET_FROZEN_MEMBER(FleetTransportServerConfig, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetTransportServerConfig, endpoint, 8, const char*);
FLEET_FROZEN_MEMBER(FleetTransportServerConfig, handlers, 16, const FleetTransportHandlers*);
FLEET_FROZEN_MEMBER(FleetTransportServerConfig, num_options, 24, size_t);
FLEET_FROZEN_MEMBER(FleetTransportServerConfig, options, 32, const FleetAttr* const*);
FLEET_FROZEN_SIZE(FleetTransportServerConfig, options, 40);

// FleetTransportClientConfig
FLEET_FROZEN_MEMBER(FleetTransportClientConfig, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetTransportClientConfig, endpoint, 8, const char*);
FLEET_FROZEN_MEMBER(FleetTransportClientConfig, trainer_id, 16, int32_t);
FLEET_FROZEN_MEMBER(FleetTransportClientConfig, reserved, 20, int32_t);
FLEET_FROZEN_MEMBER(FleetTransportClientConfig, connect_timeout_ms, 24, int64_t);
FLEET_FROZEN_MEMBER(FleetTransportClientConfig, num_options, 32, size_t);
FLEET_FROZEN_MEMBER(FleetTransportClientConfig, options, 40, const FleetAttr* const*);
FLEET_FROZEN_SIZE(FleetTransportClientConfig, options, 48);

// FleetTransportVTable
FLEET_FROZEN_MEMBER(FleetTransportVTable, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetTransportVTable, server_start, 8,
                    FleetStatus* (*)(void*, const FleetTransportServerConfig*,
                                     FleetTransportServer**));
FLEET_FROZEN_MEMBER(FleetTransportVTable, server_endpoint, 16,
                    const char* (*)(void*, FleetTransportServer*));
FLEET_FROZEN_MEMBER(FleetTransportVTable, server_stop, 24, void (*)(void*, FleetTransportServer*));
FLEET_FROZEN_MEMBER(FleetTransportVTable, server_destroy, 32,
                    FleetStatus* (*)(void*, FleetTransportServer*));
FLEET_FROZEN_MEMBER(FleetTransportVTable, client_connect, 40,
                    FleetStatus* (*)(void*, const FleetTransportClientConfig*,
                                     FleetTransportClient**));
FLEET_FROZEN_MEMBER(FleetTransportVTable, client_send, 48,
                    FleetStatus* (*)(void*, FleetTransportClient*, const char*, const FleetTensor*,
                                     int64_t));
FLEET_FROZEN_MEMBER(FleetTransportVTable, client_get, 56,
                    FleetStatus* (*)(void*, FleetTransportClient*, const char*, FleetTensorAllocFn,
                                     void*, FleetTensor*, int64_t));
FLEET_FROZEN_MEMBER(FleetTransportVTable, client_barrier, 64,
                    FleetStatus* (*)(void*, FleetTransportClient*, int32_t, int64_t));
FLEET_FROZEN_MEMBER(FleetTransportVTable, client_complete, 72,
                    FleetStatus* (*)(void*, FleetTransportClient*, int64_t));
FLEET_FROZEN_MEMBER(FleetTransportVTable, client_close, 80, void (*)(void*, FleetTransportClient*));
FLEET_FROZEN_SIZE(FleetTransportVTable, client_close, 88);

// ---- fleet_op_schema.h --------------------------------------------------------------------------

// FleetSlotSpec
FLEET_FROZEN_MEMBER(FleetSlotSpec, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetSlotSpec, name, 8, const char*);
FLEET_FROZEN_MEMBER(FleetSlotSpec, flags, 16, uint32_t);
FLEET_FROZEN_MEMBER(FleetSlotSpec, reserved, 20, uint32_t);
FLEET_FROZEN_SIZE(FleetSlotSpec, reserved, 24);

// FleetShapeSlot
FLEET_FROZEN_MEMBER(FleetShapeSlot, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetShapeSlot, name, 8, const char*);
FLEET_FROZEN_MEMBER(FleetShapeSlot, count, 16, size_t);
FLEET_FROZEN_MEMBER(FleetShapeSlot, dtypes, 24, int32_t*);
FLEET_FROZEN_MEMBER(FleetShapeSlot, ndims, 32, int32_t*);
FLEET_FROZEN_MEMBER(FleetShapeSlot, dims, 40, int64_t* const*);
FLEET_FROZEN_SIZE(FleetShapeSlot, dims, 48);

// FleetShapeContext
FLEET_FROZEN_MEMBER(FleetShapeContext, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetShapeContext, num_inputs, 8, size_t);
FLEET_FROZEN_MEMBER(FleetShapeContext, inputs, 16, const FleetShapeSlot* const*);
FLEET_FROZEN_MEMBER(FleetShapeContext, num_outputs, 24, size_t);
FLEET_FROZEN_MEMBER(FleetShapeContext, outputs, 32, const FleetShapeSlot* const*);
FLEET_FROZEN_MEMBER(FleetShapeContext, num_attrs, 40, size_t);
FLEET_FROZEN_MEMBER(FleetShapeContext, attrs, 48, const FleetAttr* const*);
FLEET_FROZEN_SIZE(FleetShapeContext, attrs, 56);

// FleetOpSchemaVTable
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, struct_size, 0, size_t);
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, num_inputs, 8, size_t);
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, inputs, 16, const FleetSlotSpec* const*);
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, num_outputs, 24, size_t);
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, outputs, 32, const FleetSlotSpec* const*);
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, num_attrs, 40, size_t);
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, attrs, 48, const FleetAttr* const*);
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, infer_shape, 56,
                    FleetStatus* (*)(void*, const FleetShapeContext*));
FLEET_FROZEN_MEMBER(FleetOpSchemaVTable, grad_op_type, 64, const char*);
FLEET_FROZEN_SIZE(FleetOpSchemaVTable, grad_op_type, 72);

// ---- entry point --------------------------------------------------------------------------------
static_assert(FLEET_ABI_MAJOR == 1);
static_assert(std::string_view(FLEET_PLUGIN_ENTRY_V1) == "fleet_plugin_entry_v1");
static_assert(std::is_same_v<FleetPluginEntryV1, FleetStatus* (*)(const FleetHostApi*,
                                                                   FleetPluginInfo*)>);
static_assert(std::is_same_v<FleetTensorAllocFn, FleetStatus* (*)(void*, int32_t, int32_t,
                                                                   const int64_t*, FleetTensor*)>);

// ---- status codes -------------------------------------------------------------------------------
static_assert(FLEET_CODE_OK == 0);
static_assert(FLEET_CODE_CANCELLED == 1);
static_assert(FLEET_CODE_UNKNOWN == 2);
static_assert(FLEET_CODE_INVALID_ARGUMENT == 3);
static_assert(FLEET_CODE_DEADLINE_EXCEEDED == 4);
static_assert(FLEET_CODE_NOT_FOUND == 5);
static_assert(FLEET_CODE_ALREADY_EXISTS == 6);
static_assert(FLEET_CODE_PERMISSION_DENIED == 7);
static_assert(FLEET_CODE_RESOURCE_EXHAUSTED == 8);
static_assert(FLEET_CODE_FAILED_PRECONDITION == 9);
static_assert(FLEET_CODE_ABORTED == 10);
static_assert(FLEET_CODE_OUT_OF_RANGE == 11);
static_assert(FLEET_CODE_UNIMPLEMENTED == 12);
static_assert(FLEET_CODE_INTERNAL == 13);
static_assert(FLEET_CODE_UNAVAILABLE == 14);
static_assert(FLEET_CODE_DATA_LOSS == 15);
static_assert(FLEET_CODE_UNAUTHENTICATED == 16);

// ---- data types ---------------------------------------------------------------------------------
static_assert(FLEET_DTYPE_INVALID == 0);
static_assert(FLEET_DTYPE_BOOL == 1);
static_assert(FLEET_DTYPE_INT8 == 2);
static_assert(FLEET_DTYPE_UINT8 == 3);
static_assert(FLEET_DTYPE_INT16 == 4);
static_assert(FLEET_DTYPE_INT32 == 5);
static_assert(FLEET_DTYPE_INT64 == 6);
static_assert(FLEET_DTYPE_FLOAT16 == 7);
static_assert(FLEET_DTYPE_BFLOAT16 == 8);
static_assert(FLEET_DTYPE_FLOAT32 == 9);
static_assert(FLEET_DTYPE_FLOAT64 == 10);

// ---- attribute types ----------------------------------------------------------------------------
static_assert(FLEET_ATTR_INVALID == 0);
static_assert(FLEET_ATTR_INT == 1);
static_assert(FLEET_ATTR_INT64 == 2);
static_assert(FLEET_ATTR_FLOAT == 3);
static_assert(FLEET_ATTR_DOUBLE == 4);
static_assert(FLEET_ATTR_BOOL == 5);
static_assert(FLEET_ATTR_STRING == 6);
static_assert(FLEET_ATTR_INTS == 7);
static_assert(FLEET_ATTR_INT64S == 8);
static_assert(FLEET_ATTR_FLOATS == 9);
static_assert(FLEET_ATTR_DOUBLES == 10);
static_assert(FLEET_ATTR_BOOLS == 11);
static_assert(FLEET_ATTR_STRINGS == 12);
static_assert(FLEET_ATTR_BLOCK == 13);

// ---- component kinds ----------------------------------------------------------------------------
static_assert(FLEET_COMPONENT_DEVICE == 1);
static_assert(FLEET_COMPONENT_KERNELS == 2);
static_assert(FLEET_COMPONENT_COMMUNICATOR == 3);
static_assert(FLEET_COMPONENT_PASS == 4);
static_assert(FLEET_COMPONENT_TRANSPORT == 5);
static_assert(FLEET_COMPONENT_OP_SCHEMA == 6);

// ---- log levels ---------------------------------------------------------------------------------
static_assert(FLEET_LOG_TRACE == 0);
static_assert(FLEET_LOG_DEBUG == 1);
static_assert(FLEET_LOG_INFO == 2);
static_assert(FLEET_LOG_WARN == 3);
static_assert(FLEET_LOG_ERROR == 4);

// ---- reduce ops ---------------------------------------------------------------------------------
static_assert(FLEET_REDUCE_SUM == 0);
static_assert(FLEET_REDUCE_PROD == 1);
static_assert(FLEET_REDUCE_MAX == 2);
static_assert(FLEET_REDUCE_MIN == 3);
static_assert(FLEET_REDUCE_AVG == 4);

// ---- barrier kinds ------------------------------------------------------------------------------
static_assert(FLEET_BARRIER_BATCH == 0);
static_assert(FLEET_BARRIER_FETCH == 1);

// ---- other constants ----------------------------------------------------------------------------
static_assert(FLEET_DEVICE_TYPE_HOST == 0);
static_assert(FLEET_DEVICE_CAP_HOST_MEMORY == 0x1u);
static_assert(FLEET_DEVICE_CAP_SYNC_STREAMS == 0x2u);
static_assert(FLEET_DEVICE_CAP_PINNED_HOST == 0x4u);
static_assert(FLEET_SLOT_OPTIONAL == 0x1u);
static_assert(FLEET_SLOT_DUPLICABLE == 0x2u);
static_assert(FLEET_SLOT_NO_GRAD == 0x4u);
static_assert(FLEET_SHAPE_MAX_DIMS == 8);

// =================================================================================================
// end of ABI 1.0
// =================================================================================================

// ABI 1.1: FleetKernelContext gains launch_index; everything of 1.0 above stays where it was.
FLEET_FROZEN_MEMBER(FleetKernelContext, launch_index, 96, uint64_t);
FLEET_FROZEN_SIZE(FleetKernelContext, launch_index, 104);

// =================================================================================================
// end of ABI 1.1
// =================================================================================================

// ABI 1.2: FleetCommConfig gains the device component's table and ctx.
FLEET_FROZEN_MEMBER(FleetCommConfig, device_table, 64, const FleetDeviceVTable*);
FLEET_FROZEN_MEMBER(FleetCommConfig, device_ctx, 72, void*);
FLEET_FROZEN_SIZE(FleetCommConfig, device_ctx, 80);

// =================================================================================================
// end of ABI 1.2
// =================================================================================================

// ABI 1.3: FleetCommVTable gains supports_world_size; a device cap bit for CPU random streams.
FLEET_FROZEN_MEMBER(FleetCommVTable, supports_world_size, 128,
                    int32_t (*)(void*, int32_t));
FLEET_FROZEN_SIZE(FleetCommVTable, supports_world_size, 136);
static_assert(FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS == 0x8u);

// =================================================================================================
// end of ABI 1.3
// =================================================================================================

// ABI 1.4: transport handlers on_send_begin and on_abort; the client's abort notice.
FLEET_FROZEN_MEMBER(FleetTransportHandlers, on_send_begin, 56,
                    FleetStatus* (*)(void*, int32_t, const char*, const FleetTensor*));
FLEET_FROZEN_MEMBER(FleetTransportHandlers, on_abort, 64,
                    FleetStatus* (*)(void*, int32_t, const char*));
FLEET_FROZEN_SIZE(FleetTransportHandlers, on_abort, 72);
FLEET_FROZEN_MEMBER(FleetTransportVTable, client_abort, 88,
                    FleetStatus* (*)(void*, FleetTransportClient*, const char*, int64_t));
FLEET_FROZEN_SIZE(FleetTransportVTable, client_abort, 96);
static_assert(FLEET_TRANSPORT_MAX_REASON == 4096);

// =================================================================================================
// end of ABI 1.4
// =================================================================================================

// ABI 1.5: sequence offsets in the tensor descriptor; kernel flags (FLEET_KERNEL_FLAG_SEQUENCES).
FLEET_FROZEN_MEMBER(FleetTensor, lod, 48, const int64_t*);
FLEET_FROZEN_MEMBER(FleetTensor, lod_count, 56, int64_t);
FLEET_FROZEN_SIZE(FleetTensor, lod_count, 64);
FLEET_FROZEN_MEMBER(FleetKernelDef, flags, 64, uint32_t);
FLEET_FROZEN_SIZE(FleetKernelDef, flags, 68);
static_assert(FLEET_KERNEL_FLAG_SEQUENCES == 0x1u);

// =================================================================================================
// end of ABI 1.5
// =================================================================================================

// ABI 1.6: SelectedRows in the tensor descriptor (FLEET_KERNEL_FLAG_SELECTED_ROWS).
FLEET_FROZEN_MEMBER(FleetTensor, rows, 64, int64_t*);
FLEET_FROZEN_MEMBER(FleetTensor, height, 72, int64_t);
FLEET_FROZEN_SIZE(FleetTensor, height, 80);
static_assert(FLEET_KERNEL_FLAG_SELECTED_ROWS == 0x2u);

// =================================================================================================
// end of ABI 1.6
// =================================================================================================

// ABI 1.7: batched row prefetch (client_prefetch, on_prefetch); sends carry SelectedRows.
FLEET_FROZEN_MEMBER(FleetTransportHandlers, on_prefetch, 72,
                    FleetStatus* (*)(void*, int32_t, const char*, const int64_t*, int64_t,
                                     FleetTensor*, void**));
FLEET_FROZEN_SIZE(FleetTransportHandlers, on_prefetch, 80);
FLEET_FROZEN_MEMBER(FleetTransportVTable, client_prefetch, 96,
                    FleetStatus* (*)(void*, FleetTransportClient*, const char*, const int64_t*,
                                     int64_t, FleetTensorAllocFn, void*, FleetTensor*, int64_t));
FLEET_FROZEN_SIZE(FleetTransportVTable, client_prefetch, 104);

// =================================================================================================
// end of ABI 1.7
// =================================================================================================
#endif  // LP64

// ---- not frozen: checks that move with the current version --------------------------------------

// Bumping the minor needs a new frozen block above (and a CHANGELOG line); this assert is the
// reminder. Update it together with the new block.
static_assert(FLEET_ABI_MINOR == 7, "new ABI minor: add its frozen block to abi_layout_test.cc");

// The host's Status codes are the ABI's codes, so a plugin's status converts without a table.
static_assert(static_cast<int>(fleet::Code::kOk) == FLEET_CODE_OK);
static_assert(static_cast<int>(fleet::Code::kCancelled) == FLEET_CODE_CANCELLED);
static_assert(static_cast<int>(fleet::Code::kUnknown) == FLEET_CODE_UNKNOWN);
static_assert(static_cast<int>(fleet::Code::kInvalidArgument) == FLEET_CODE_INVALID_ARGUMENT);
static_assert(static_cast<int>(fleet::Code::kDeadlineExceeded) == FLEET_CODE_DEADLINE_EXCEEDED);
static_assert(static_cast<int>(fleet::Code::kNotFound) == FLEET_CODE_NOT_FOUND);
static_assert(static_cast<int>(fleet::Code::kAlreadyExists) == FLEET_CODE_ALREADY_EXISTS);
static_assert(static_cast<int>(fleet::Code::kPermissionDenied) == FLEET_CODE_PERMISSION_DENIED);
static_assert(static_cast<int>(fleet::Code::kResourceExhausted) == FLEET_CODE_RESOURCE_EXHAUSTED);
static_assert(static_cast<int>(fleet::Code::kFailedPrecondition) ==
              FLEET_CODE_FAILED_PRECONDITION);
static_assert(static_cast<int>(fleet::Code::kAborted) == FLEET_CODE_ABORTED);
static_assert(static_cast<int>(fleet::Code::kOutOfRange) == FLEET_CODE_OUT_OF_RANGE);
static_assert(static_cast<int>(fleet::Code::kUnimplemented) == FLEET_CODE_UNIMPLEMENTED);
static_assert(static_cast<int>(fleet::Code::kInternal) == FLEET_CODE_INTERNAL);
static_assert(static_cast<int>(fleet::Code::kUnavailable) == FLEET_CODE_UNAVAILABLE);
static_assert(static_cast<int>(fleet::Code::kDataLoss) == FLEET_CODE_DATA_LOSS);
static_assert(static_cast<int>(fleet::Code::kUnauthenticated) == FLEET_CODE_UNAUTHENTICATED);

namespace {

// The static_asserts above did the work at compile time; these make the result visible in ctest
// and check what only exists at run time.
TEST(AbiLayout, FrozenBlocksWereCompiled) {
#ifndef FLEET_LAYOUT_CHECKED
  GTEST_SKIP() << "layout is frozen for LP64 targets only";
#endif
  EXPECT_EQ(FLEET_ABI_MAJOR, 1);
  EXPECT_STREQ(FLEET_PLUGIN_ENTRY_V1, "fleet_plugin_entry_v1");
}

// FLEET_HAS_FIELD is how every reader honours the writer's size: exercise its edges on the
// device table, whose optional slots are the ones most likely to be absent.
TEST(AbiLayout, HasFieldHonoursStructSize) {
  FleetDeviceVTable storage{};
  FleetDeviceVTable* table = &storage;  // through a pointer, as a reader sees it
  table->struct_size = FLEET_STRUCT_SIZE(FleetDeviceVTable, synchronize);
  EXPECT_TRUE(FLEET_HAS_FIELD(table, FleetDeviceVTable, synchronize));
  EXPECT_FALSE(FLEET_HAS_FIELD(table, FleetDeviceVTable, host_alloc));
  table->struct_size = FLEET_STRUCT_SIZE(FleetDeviceVTable, host_alloc) - 1;
  EXPECT_FALSE(FLEET_HAS_FIELD(table, FleetDeviceVTable, host_alloc));
  table->struct_size = FLEET_STRUCT_SIZE(FleetDeviceVTable, host_alloc);
  EXPECT_TRUE(FLEET_HAS_FIELD(table, FleetDeviceVTable, host_alloc));
  // Present but NULL: may not be called.
  EXPECT_FALSE(FLEET_CAN_CALL(table, FleetDeviceVTable, host_alloc));
  const FleetDeviceVTable* none = nullptr;
  EXPECT_FALSE(FLEET_HAS_FIELD(none, FleetDeviceVTable, struct_size));
}

}  // namespace
