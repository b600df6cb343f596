/*
 * fleet_device.h — the device component: memory, copies, streams and events of one kind of
 * device (host CPU, CUDA GPUs, ...). Registered with kind FLEET_COMPONENT_DEVICE.
 *
 * Model:
 *   - Ordinals are logical, 0..count-1 (after any visibility mask such as CUDA_VISIBLE_DEVICES);
 *     props.physical_id shows the physical one. There is no thread-current device: every call
 *     names its ordinal or a stream, which belongs to one ordinal.
 *   - Work is stream-ordered. Copies with a stream are asynchronous with respect to the host
 *     unless the device says otherwise (FLEET_DEVICE_CAP_SYNC_STREAMS); events order work
 *     across streams. A NULL stream means "synchronous": the call returns when the work is done.
 *   - Threading: slots may be called concurrently for different streams and ordinals. Calls on
 *     one stream are serialised by the host.
 */
#ifndef FLEET_DEVICE_H_
#define FLEET_DEVICE_H_

#include "fleet/fleet_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FleetStream FleetStream; /* opaque, owned by the device component */
typedef struct FleetEvent FleetEvent;   /* opaque, owned by the device component */

/* Capability bits of FleetDeviceProps.caps. */
#define FLEET_DEVICE_CAP_HOST_MEMORY  (1u << 0) /* its pointers are ordinary host pointers */
#define FLEET_DEVICE_CAP_SYNC_STREAMS (1u << 1) /* stream work completes before the call returns */
#define FLEET_DEVICE_CAP_PINNED_HOST  (1u << 2) /* host_alloc gives page-locked memory */
/* 1.3: the device's random kernels (every op whose schema has a "seed" attribute: the random
 * initializers, dropout, nce's sampler) draw exactly the CPU plugin's numbers for the same seed,
 * launch_index and shape, so a job moved between the CPU and this device reproduces bit for bit.
 * Optional: without it a random kernel only has to meet the contract in fleet_kernels.h, and the
 * conformance kit checks it at the statistical level alone. Older hosts ignore the bit. */
#define FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS (1u << 3)

/* Out-struct: the host allocates and zero-fills it and sets struct_size; the device writes the
 * members inside that size. Strings point to storage that lives until shutdown. */
typedef struct FleetDeviceProps {
  size_t struct_size;
  const char* model;           /* e.g. "x86_64 (AVX-512)", "NVIDIA H200" */
  int32_t physical_id;         /* physical index behind this logical ordinal */
  uint32_t caps;               /* FLEET_DEVICE_CAP_* */
  uint64_t total_memory;       /* bytes; 0 if unknown */
  uint64_t alignment;          /* alignment alloc guarantees, bytes */
  int32_t compute_units;       /* cores or SMs */
  int32_t reserved;
} FleetDeviceProps;

typedef struct FleetDeviceVTable {
  size_t struct_size;

  /* Number of usable devices; 0 is a valid answer (for example, a CUDA build on a machine
   * without a GPU), in which case no other slot is called with an ordinal. */
  FleetStatus* (*count)(void* ctx, int32_t* out);
  FleetStatus* (*props)(void* ctx, int32_t ordinal, FleetDeviceProps* out);

  /* Device memory. alloc of 0 bytes yields a unique non-NULL pointer or NULL; both are freed
   * by free. RESOURCE_EXHAUSTED when out of memory. free(NULL) is a no-op. */
  FleetStatus* (*alloc)(void* ctx, int32_t ordinal, size_t bytes, void** out);
  FleetStatus* (*free)(void* ctx, int32_t ordinal, void* ptr);

  /* Streams. */
  FleetStatus* (*stream_create)(void* ctx, int32_t ordinal, FleetStream** out);
  FleetStatus* (*stream_destroy)(void* ctx, FleetStream* stream);
  FleetStatus* (*stream_synchronize)(void* ctx, FleetStream* stream);

  /* Copies of `bytes` bytes: host to device, device to host, device to device (same ordinal).
   * Host memory passed here must stay valid until the copy completes on `stream`. */
  FleetStatus* (*copy_h2d)(void* ctx, int32_t ordinal, void* dst, const void* src, size_t bytes,
                           FleetStream* stream);
  FleetStatus* (*copy_d2h)(void* ctx, int32_t ordinal, void* dst, const void* src, size_t bytes,
                           FleetStream* stream);
  FleetStatus* (*copy_d2d)(void* ctx, int32_t ordinal, void* dst, const void* src, size_t bytes,
                           FleetStream* stream);
  /* Sets `bytes` bytes at dst to `value` (as memset). */
  FleetStatus* (*memset)(void* ctx, int32_t ordinal, void* dst, int32_t value, size_t bytes,
                         FleetStream* stream);

  /* Events: record marks a point in a stream; stream_wait_event makes later work on `stream`
   * wait for it without blocking the host; event_synchronize blocks the host. */
  FleetStatus* (*event_create)(void* ctx, int32_t ordinal, FleetEvent** out);
  FleetStatus* (*event_destroy)(void* ctx, FleetEvent* event);
  FleetStatus* (*event_record)(void* ctx, FleetEvent* event, FleetStream* stream);
  FleetStatus* (*stream_wait_event)(void* ctx, FleetStream* stream, FleetEvent* event);
  FleetStatus* (*event_synchronize)(void* ctx, FleetEvent* event);

  /* Blocks until all work on the ordinal is done. */
  FleetStatus* (*synchronize)(void* ctx, int32_t ordinal);

  /* --- optional slots (may be NULL) --- */

  /* Page-locked host memory for fast copies; without it the host uses ordinary memory. */
  FleetStatus* (*host_alloc)(void* ctx, size_t bytes, void** out);
  FleetStatus* (*host_free)(void* ctx, void* ptr);

  /* The native handle behind a stream (e.g. kind "cudaStream_t"), so that a communicator in
   * another plugin can enqueue on it. UNIMPLEMENTED for an unknown kind. */
  FleetStatus* (*stream_native)(void* ctx, FleetStream* stream, const char* kind, void** out);
} FleetDeviceVTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEET_DEVICE_H_ */
