/*
 * toy_plugin.c — a complete Fleet plugin in strict C99, written as a tutorial.
 *
 * It provides one device component, "toy", whose "device memory" is ordinary host memory:
 * alloc/free are malloc/free and every copy is a memcpy. That is enough for the host to list it
 * (`fleet-host plugins toy`), and it shows every rule a real device plugin (a GPU, an
 * accelerator) must follow, without any hardware getting in the way.
 *
 * The whole ABI lives in <fleet/fleet_plugin.h>. The rules worth knowing before reading on:
 *
 *   - A plugin exports exactly one symbol, fleet_plugin_entry_v1, marked FLEET_EXPORT. The
 *     build helper fleet_add_plugin() hides everything else.
 *   - Every struct crossing the boundary starts with `size_t struct_size`. You set it with
 *     FLEET_STRUCT_SIZE(Type, last_member_you_fill) on structs you write, and you check it with
 *     FLEET_HAS_FIELD before touching a member of a struct the host wrote. That is what lets a
 *     plugin built today load into tomorrow's host, and the other way round.
 *   - Errors are FleetStatus objects, created and freed only by the host (host->status_new,
 *     host->status_free). NULL means success. Returning a status hands it to the caller.
 *   - Nothing C++ crosses the boundary; nothing here may throw or longjmp out of a slot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fleet/fleet_plugin.h>

/* ---- the component's state ------------------------------------------------------------------- */

/* Everything the slots need. The host passes it back as `ctx`, the first argument of every slot,
 * so the plugin needs no globals (and two hosts in one process would not share it). */
typedef struct ToyDevice {
  const FleetHostApi* host; /* valid until our shutdown returns */
  char model[64];           /* what props() reports; settable from fleet.toml */
} ToyDevice;

/* The opaque handle types of fleet_device.h are ours to define. The toy device does all work
 * before returning (it reports FLEET_DEVICE_CAP_SYNC_STREAMS), so a stream needs no queue and an
 * event only remembers whether it was recorded. */
struct FleetStream {
  int32_t ordinal;
};
struct FleetEvent {
  int recorded;
};

/* Errors: the host creates the object and copies the message, so a stack buffer is fine. */
static FleetStatus* toy_error(void* ctx, int32_t code, const char* msg) {
  const ToyDevice* toy = (const ToyDevice*)ctx;
  return toy->host->status_new(code, msg);
}

/* The toy has a single device, ordinal 0. The host only passes ordinals below count(), but a
 * cheap check turns a host bug into a clear error instead of a crash. */
static FleetStatus* toy_check_ordinal(void* ctx, int32_t ordinal) {
  char msg[80];
  if (ordinal == 0) return NULL;
  snprintf(msg, sizeof(msg), "toy: no device with ordinal %d (there is one: 0)", (int)ordinal);
  return toy_error(ctx, FLEET_CODE_OUT_OF_RANGE, msg);
}

/* ---- device slots ---------------------------------------------------------------------------- */

/* How many devices there are. 0 is a valid answer (no hardware present); then no other slot is
 * called with an ordinal. Keep it cheap: `fleet-host plugins` calls it just to list devices. */
static FleetStatus* toy_count(void* ctx, int32_t* out) {
  (void)ctx;
  *out = 1;
  return NULL;
}

/* `out` was allocated and zero-filled by the host, which also set out->struct_size. Write only
 * members inside that size: an older host passes a smaller struct. Strings must outlive the
 * call (here: until shutdown, as they live in ToyDevice). */
static FleetStatus* toy_props(void* ctx, int32_t ordinal, FleetDeviceProps* out) {
  const ToyDevice* toy = (const ToyDevice*)ctx;
  FleetStatus* status = toy_check_ordinal(ctx, ordinal);
  if (status != NULL) return status;
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, model)) out->model = toy->model;
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, physical_id)) out->physical_id = 0;
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, caps)) {
    out->caps = FLEET_DEVICE_CAP_HOST_MEMORY | FLEET_DEVICE_CAP_SYNC_STREAMS;
  }
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, total_memory)) out->total_memory = 0; /* unknown */
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, alignment)) out->alignment = 16; /* malloc's */
  if (FLEET_HAS_FIELD(out, FleetDeviceProps, compute_units)) out->compute_units = 1;
  return NULL;
}

/* Device memory. The pointer belongs to the host until it passes it back to free. Allocating 0
 * bytes must give NULL or a unique pointer that free accepts; malloc(0) may do either, so ask for
 * one byte to be predictable. Out of memory is RESOURCE_EXHAUSTED, never an abort. */
static FleetStatus* toy_alloc(void* ctx, int32_t ordinal, size_t bytes, void** out) {
  FleetStatus* status = toy_check_ordinal(ctx, ordinal);
  if (status != NULL) return status;
  *out = malloc(bytes == 0 ? 1 : bytes);
  if (*out == NULL) return toy_error(ctx, FLEET_CODE_RESOURCE_EXHAUSTED, "toy: out of memory");
  return NULL;
}

/* free(NULL) must be a no-op, which C's free already is. */
static FleetStatus* toy_free(void* ctx, int32_t ordinal, void* ptr) {
  FleetStatus* status = toy_check_ordinal(ctx, ordinal);
  if (status != NULL) return status;
  free(ptr);
  return NULL;
}

/* Streams are ours: created here, destroyed only through stream_destroy. */
static FleetStatus* toy_stream_create(void* ctx, int32_t ordinal, FleetStream** out) {
  FleetStatus* status = toy_check_ordinal(ctx, ordinal);
  if (status != NULL) return status;
  *out = (FleetStream*)malloc(sizeof(FleetStream));
  if (*out == NULL) return toy_error(ctx, FLEET_CODE_RESOURCE_EXHAUSTED, "toy: out of memory");
  (*out)->ordinal = ordinal;
  return NULL;
}

static FleetStatus* toy_stream_destroy(void* ctx, FleetStream* stream) {
  (void)ctx;
  free(stream);
  return NULL;
}

/* Blocks until the stream's work is done; ours always is. A real device waits here. */
static FleetStatus* toy_stream_synchronize(void* ctx, FleetStream* stream) {
  (void)ctx;
  (void)stream;
  return NULL;
}

/* One copy routine serves all three directions, because device memory is host memory. A real
 * device enqueues the copy on `stream` and returns; a NULL stream means "finish before
 * returning". Either way the host keeps both buffers valid until the copy is done. */
static FleetStatus* toy_copy(void* ctx, int32_t ordinal, void* dst, const void* src, size_t bytes,
                             FleetStream* stream) {
  FleetStatus* status = toy_check_ordinal(ctx, ordinal);
  (void)stream;
  if (status != NULL) return status;
  if (bytes > 0) memcpy(dst, src, bytes);
  return NULL;
}

static FleetStatus* toy_memset(void* ctx, int32_t ordinal, void* dst, int32_t value, size_t bytes,
                               FleetStream* stream) {
  FleetStatus* status = toy_check_ordinal(ctx, ordinal);
  (void)stream;
  if (status != NULL) return status;
  if (bytes > 0) memset(dst, (int)value, bytes);
  return NULL;
}

/* Events order work across streams: record marks a point in one stream, stream_wait_event makes
 * another stream wait for it (without blocking the host), event_synchronize blocks the host. */
static FleetStatus* toy_event_create(void* ctx, int32_t ordinal, FleetEvent** out) {
  FleetStatus* status = toy_check_ordinal(ctx, ordinal);
  if (status != NULL) return status;
  *out = (FleetEvent*)malloc(sizeof(FleetEvent));
  if (*out == NULL) return toy_error(ctx, FLEET_CODE_RESOURCE_EXHAUSTED, "toy: out of memory");
  (*out)->recorded = 0;
  return NULL;
}

static FleetStatus* toy_event_destroy(void* ctx, FleetEvent* event) {
  (void)ctx;
  free(event);
  return NULL;
}

static FleetStatus* toy_event_record(void* ctx, FleetEvent* event, FleetStream* stream) {
  (void)ctx;
  (void)stream;
  event->recorded = 1; /* everything before it on `stream` is already done */
  return NULL;
}

/* Waiting for an event that was never recorded would hang a real device; say so instead. */
static FleetStatus* toy_stream_wait_event(void* ctx, FleetStream* stream, FleetEvent* event) {
  (void)stream;
  if (!event->recorded) {
    return toy_error(ctx, FLEET_CODE_FAILED_PRECONDITION, "toy: waiting on an unrecorded event");
  }
  return NULL;
}

static FleetStatus* toy_event_synchronize(void* ctx, FleetEvent* event) {
  return toy_stream_wait_event(ctx, NULL, event);
}

static FleetStatus* toy_synchronize(void* ctx, int32_t ordinal) {
  return toy_check_ordinal(ctx, ordinal);
}

/* The table. Static storage: the host keeps a pointer to it until shutdown. The optional slots
 * (host_alloc, host_free, stream_native) are left NULL: the host checks them with FLEET_CAN_CALL
 * and falls back (ordinary host memory; no native stream handle to share). Positional
 * initialisers follow the header's member order, which the ABI freezes. */
static const FleetDeviceVTable kToyDeviceTable = {
    FLEET_STRUCT_SIZE(FleetDeviceVTable, stream_native), /* struct_size: we know all of 1.0 */
    toy_count,
    toy_props,
    toy_alloc,
    toy_free,
    toy_stream_create,
    toy_stream_destroy,
    toy_stream_synchronize,
    toy_copy, /* copy_h2d */
    toy_copy, /* copy_d2h */
    toy_copy, /* copy_d2d */
    toy_memset,
    toy_event_create,
    toy_event_destroy,
    toy_event_record,
    toy_stream_wait_event,
    toy_event_synchronize,
    toy_synchronize,
    NULL, /* host_alloc (optional) */
    NULL, /* host_free (optional) */
    NULL  /* stream_native (optional) */
};

/* ---- plugin life cycle ----------------------------------------------------------------------- */

/* Called once at exit, after every object made through our component is gone. */
static void toy_shutdown(void* plugin_ctx) { free(plugin_ctx); }

/* Reads the optional key `model` of [plugins.config.toy] in fleet.toml. Plugins never read TOML
 * or the environment themselves: the host hands them their table. An absent key is NOT_FOUND,
 * which is not an error for an optional setting. */
static FleetStatus* toy_read_config(const FleetHostApi* host, ToyDevice* toy) {
  FleetAttr attr;
  FleetStatus* status;
  memset(&attr, 0, sizeof(attr));
  attr.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings); /* an out-struct: we set the size */
  status = host->config_get(host->host_ctx, "model", &attr);
  if (status != NULL) {
    if (host->status_code(status) != FLEET_CODE_NOT_FOUND) return status; /* pass it on */
    host->status_free(status); /* we own it: free it */
    return NULL;
  }
  if (attr.type != FLEET_ATTR_STRING) {
    return host->status_new(FLEET_CODE_INVALID_ARGUMENT,
                            "toy: plugins.config.toy.model must be a string");
  }
  /* attr.s points into host storage valid until shutdown; copying keeps the rules simple. */
  snprintf(toy->model, sizeof(toy->model), "%s", attr.s);
  return NULL;
}

/* The entry point: the only exported symbol. The host calls it once, on one thread, right after
 * loading the library. It fills `info`, registers components and returns; it must stay cheap
 * (no device opened, no thread started), because `fleet-host plugins` runs it just to list us.
 * A non-NULL return rejects the plugin with that message. */
FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host, FleetPluginInfo* info) {
  ToyDevice* toy;
  FleetComponent component;
  FleetStatus* status;

  /* Before anything else, only the frozen prefix of `host` may be read. Check that the host's
   * table holds every slot we call; a host too old to have them cannot even build a status. */
  if (!FLEET_HAS_FIELD(host, FleetHostApi, config_get)) return NULL;

  /* `info` was zero-filled by the host, which set its struct_size. Strings must be static. */
  info->abi_major = FLEET_ABI_MAJOR;
  info->abi_minor = FLEET_ABI_MINOR;
  info->name = "toy"; /* must match the file name: libfleet_toy.so */
  info->version = "0.1.0";
  info->description = "Example third-party plugin: a device over host memory";

  toy = (ToyDevice*)calloc(1, sizeof(ToyDevice));
  if (toy == NULL) return host->status_new(FLEET_CODE_RESOURCE_EXHAUSTED, "toy: out of memory");
  toy->host = host;
  snprintf(toy->model, sizeof(toy->model), "%s", "toy device (host memory)");

  status = toy_read_config(host, toy);
  if (status != NULL) {
    free(toy); /* shutdown is not set yet, so clean up here */
    return status;
  }

  /* The host copies the component struct, but name, summary and vtable must stay valid until
   * shutdown: string literals and a static table are. ctx is handed back to every slot. */
  memset(&component, 0, sizeof(component));
  component.struct_size = FLEET_STRUCT_SIZE(FleetComponent, vtable);
  component.kind = FLEET_COMPONENT_DEVICE;
  component.name = "toy"; /* what fleet.toml's [device] backend refers to */
  component.summary = "toy device: host memory via malloc/memcpy";
  component.ctx = toy;
  component.vtable = &kToyDeviceTable;
  status = host->register_component(host->host_ctx, &component);
  if (status != NULL) {
    free(toy);
    return status; /* e.g. ALREADY_EXISTS: another plugin has a device named "toy" */
  }

  /* (A host whose info lacks shutdown never frees `toy`; it lives until the process ends.) */
  if (FLEET_HAS_FIELD(info, FleetPluginInfo, shutdown)) {
    info->plugin_ctx = toy;
    info->shutdown = toy_shutdown;
  }
  if (host->log_enabled(host->host_ctx, FLEET_LOG_DEBUG)) {
    host->log(host->host_ctx, FLEET_LOG_DEBUG, "toy: registered device 'toy'");
  }
  return NULL;
}
