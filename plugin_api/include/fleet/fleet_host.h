/*
 * fleet_host.h — the entry point of a plugin and the services the host hands it.
 *
 * A plugin is a shared library that exports exactly one symbol per ABI major it speaks:
 *
 *     FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host,
 *                                                     FleetPluginInfo* info);
 *
 * Start-up protocol (all of it on one host thread, before anything else runs):
 *   1. The host loads the library (RTLD_NOW | RTLD_LOCAL) and never unloads it. Plugins must do
 *      no work in global constructors.
 *   2. The host calls the entry once. The plugin may read only the frozen prefix of `host`
 *      (struct_size, abi_major, abi_minor, host_version) before checking struct_size; it uses
 *      min(host->abi_minor, FLEET_ABI_MINOR) as the minor both sides speak.
 *   3. The entry fills `info` (only members inside info->struct_size) and registers its
 *      components with host->register_component. It must stay cheap: no device is opened and no
 *      socket is bound here, because `fleet-host plugins` runs every entry just to list them.
 *   4. A non-NULL return rejects the whole plugin; the host reports the message with the file
 *      name, drops every component the plugin registered, and goes on.
 *   5. At exit the host calls info->shutdown(info->plugin_ctx) (if set), on the same thread, after
 *      every object created through the plugin's components was destroyed. It does so whenever
 *      the entry returned NULL, even if the host refused the plugin afterwards (a name clash,
 *      say). A plugin whose entry returns an error must free what it made before returning;
 *      shutdown is not called for it.
 *
 * Threading: every FleetHostApi function is thread-safe unless its comment says otherwise.
 */
#ifndef FLEET_HOST_H_
#define FLEET_HOST_H_

#include "fleet/fleet_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- components -------------------------------------------------------------------------- */

enum {
  FLEET_COMPONENT_DEVICE = 1,        /* FleetDeviceVTable       (fleet_device.h)    */
  FLEET_COMPONENT_KERNELS = 2,       /* FleetKernelsVTable      (fleet_kernels.h)   */
  FLEET_COMPONENT_COMMUNICATOR = 3,  /* FleetCommVTable         (fleet_comm.h)      */
  FLEET_COMPONENT_PASS = 4,          /* FleetPassVTable         (fleet_pass.h)      */
  FLEET_COMPONENT_TRANSPORT = 5,     /* FleetTransportVTable    (fleet_transport.h) */
  FLEET_COMPONENT_OP_SCHEMA = 6      /* FleetOpSchemaVTable     (fleet_op_schema.h) */
};

/* One component a plugin provides. Passed to register_component.
 *
 * Lifetime: the host copies this struct, but `name`, `summary` and `vtable` (and everything
 * the vtable points to) must stay valid until the plugin's shutdown; static storage is usual.
 * `ctx` is passed back as the first argument of every slot of the vtable. */
typedef struct FleetComponent {
  size_t struct_size;
  int32_t kind;            /* FLEET_COMPONENT_* */
  int32_t reserved;        /* zero */
  const char* name;        /* unique per kind across all plugins; what fleet.toml refers to */
  const char* summary;     /* one line for `fleet-host plugins` */
  void* ctx;
  const void* vtable;      /* the kind's table; it begins with its own struct_size */
} FleetComponent;

/* ---- rendezvous store ---------------------------------------------------------------------- */

/* A key-value store shared by the processes of one job, already scoped (to a job and, when
 * handed to a communicator, to that communicator), so keys never collide across scopes.
 *
 * Threading: every slot is thread-safe and blocking. Deadlines are relative, in milliseconds;
 * a wait past its deadline returns DEADLINE_EXCEEDED naming the keys still missing. */
typedef struct FleetStore {
  size_t struct_size;
  void* ctx;
  /* Stores a copy of value[0..len) under key, replacing any previous value. */
  FleetStatus* (*set)(void* ctx, const char* key, const void* value, size_t len);
  /* Waits until key exists, then copies its value. The value is written to a buffer from
   * `alloc(alloc_ctx, len)` (called exactly once on success) and its length to *len. */
  FleetStatus* (*get)(void* ctx, const char* key, int64_t timeout_ms,
                      void* (*alloc)(void* alloc_ctx, size_t len), void* alloc_ctx,
                      size_t* len);
  /* Atomically adds delta to the integer stored at key (0 if absent); *result gets the sum. */
  FleetStatus* (*add)(void* ctx, const char* key, int64_t delta, int64_t* result);
  /* Waits until every key in keys[0..n) exists. */
  FleetStatus* (*wait)(void* ctx, const char* const* keys, size_t n, int64_t timeout_ms);
} FleetStore;

/* ---- host services ------------------------------------------------------------------------- */

enum {
  FLEET_LOG_TRACE = 0,
  FLEET_LOG_DEBUG = 1,
  FLEET_LOG_INFO = 2,
  FLEET_LOG_WARN = 3,
  FLEET_LOG_ERROR = 4
};

/* The host's services. Each plugin gets its own copy with its own host_ctx, which is how the
 * host knows which plugin a log line or a registration comes from. The table lives until the
 * plugin's shutdown returns. */
typedef struct FleetHostApi {
  /* Frozen prefix: identical in every major, readable before anything else. */
  size_t struct_size;
  uint32_t abi_major;          /* FLEET_ABI_MAJOR of the host */
  uint32_t abi_minor;          /* newest minor the host implements */
  const char* host_version;    /* e.g. "0.1.0" */

  void* host_ctx;              /* first argument of the slots below that take one */

  /* Status objects. status_new copies msg (NUL-terminated; NULL = empty). Codes outside the
   * canonical set become FLEET_CODE_UNKNOWN. status_new(FLEET_CODE_OK, ...) returns NULL. */
  FleetStatus* (*status_new)(int32_t code, const char* msg);
  int32_t (*status_code)(const FleetStatus* status);
  const char* (*status_message)(const FleetStatus* status); /* valid until status_free */
  void (*status_free)(FleetStatus* status);

  /* Logging, tagged with the plugin's name. msg is a preformatted NUL-terminated line; no
   * varargs cross the boundary. log_enabled is a cheap pre-check; both are thread-safe. */
  void (*log)(void* host_ctx, int32_t level, const char* msg);
  int32_t (*log_enabled)(void* host_ctx, int32_t level);

  /* Registers a component; callable only from inside the entry point. Errors:
   *   ALREADY_EXISTS  the kind already has a component of that name (from any plugin);
   *   INVALID_ARGUMENT a required slot is NULL or a size is impossible;
   *   UNIMPLEMENTED   the kind is unknown to this host (a newer plugin); the host notes it
   *                   and the plugin should carry on without it. */
  FleetStatus* (*register_component)(void* host_ctx, const FleetComponent* component);

  /* The plugin's own table from fleet.toml ([plugins.config.NAME]), as typed values. Plugins
   * never read TOML or the environment themselves. config_count/config_at enumerate it;
   * config_get looks one key up (NOT_FOUND if absent). The FleetAttr written to *out points
   * into host storage that lives until shutdown. The host warns about keys never looked up. */
  size_t (*config_count)(void* host_ctx);
  FleetStatus* (*config_at)(void* host_ctx, size_t index, FleetAttr* out);
  FleetStatus* (*config_get)(void* host_ctx, const char* key, FleetAttr* out);

  /* The host-assigned id of the device component `name` (for FleetTensor.device_type), or -1
   * when no such device is registered yet. Registration order is load order. */
  int32_t (*device_type_id)(void* host_ctx, const char* name);

  /* Opens the job's rendezvous store under `scope` (a non-empty name; keys are prefixed with
   * it). The store lives until shutdown. UNIMPLEMENTED where the job has no store. */
  FleetStatus* (*store_open)(void* host_ctx, const char* scope, const FleetStore** out);

  /* The program-editing API used by passes (fleet_pass.h). Never NULL; its slots answer
   * UNIMPLEMENTED where the host cannot edit programs. */
  const FleetProgramApi* program;
} FleetHostApi;

/* ---- plugin info ----------------------------------------------------------------------------- */

/* Filled by the plugin's entry. The host allocates it, zero-fills it and sets struct_size; the
 * plugin writes only members inside that size. Strings must be static. */
typedef struct FleetPluginInfo {
  size_t struct_size;
  uint32_t abi_major;          /* FLEET_ABI_MAJOR the plugin was built against */
  uint32_t abi_minor;          /* FLEET_ABI_MINOR the plugin was built against */
  const char* name;            /* short name, e.g. "cpu"; must match the file's plugin name */
  const char* version;         /* the plugin's own version, e.g. "0.1.0" */
  const char* description;     /* one line */
  void* plugin_ctx;            /* passed to shutdown */
  void (*shutdown)(void* plugin_ctx); /* optional */
} FleetPluginInfo;

#define FLEET_PLUGIN_ENTRY_V1 "fleet_plugin_entry_v1"
typedef FleetStatus* (*FleetPluginEntryV1)(const FleetHostApi* host, FleetPluginInfo* info);

/* Declared here so that a C++ definition gets C linkage (an unmangled symbol) without the
 * author having to remember extern "C". */
FLEET_EXPORT FleetStatus* fleet_plugin_entry_v1(const FleetHostApi* host, FleetPluginInfo* info);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEET_HOST_H_ */
