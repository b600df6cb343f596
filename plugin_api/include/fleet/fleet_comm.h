/*
 * fleet_comm.h — the communicator component: collectives among the ranks of a group (Gloo,
 * NCCL, ...). Registered with kind FLEET_COMPONENT_COMMUNICATOR.
 *
 * Rendezvous goes through the FleetStore in the create config, which the host scopes to the
 * communicator: rank 0 publishes what peers need (NCCL's unique id, Gloo's pair addresses) and
 * the others read it. A communicator never reads the environment or opens its own store.
 *
 * Deadlines: every call that waits on peers returns DEADLINE_EXCEEDED after config.timeout_ms,
 * naming the ranks it waited for, and ABORTED once abort() was called. No call blocks forever.
 *
 * Bad arguments: a call it cannot take (a root or peer outside the group, buffer sizes that do
 * not fit, an unknown reduce op, a dtype it cannot reduce) returns INVALID_ARGUMENT, names the
 * collective and the argument in the message (a dtype by its name, e.g. "bool"), and leaves the
 * communicator usable. The conformance suite checks exactly that, not the wording.
 *
 * Threading: calls on one communicator are serialised by the host, except abort(), which may be
 * called from any thread at any time (a watchdog) and must not block. Different communicators
 * may be used concurrently.
 *
 * Streams: collectives are enqueued on `stream` (from the device component named in the config)
 * and may complete asynchronously; a NULL stream means the call returns when the result is in
 * place. Buffers must stay valid until the work completes. Work enqueued on `stream` after the
 * call sees the result: a communicator that runs on a stream of its own orders it against
 * `stream` with events both ways.
 */
#ifndef FLEET_COMM_H_
#define FLEET_COMM_H_

#include "fleet/fleet_abi.h"
#include "fleet/fleet_device.h"
#include "fleet/fleet_host.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FleetComm FleetComm; /* opaque, owned by the component until destroy */

/* Options the host may pass to every communicator in FleetCommConfig.options, whatever fleet.toml
 * says, as a comma-separated list usable in an initializer: { FLEET_COMM_HOST_OPTIONS }.
 *   "hostname"  string: the address this rank's peers should use to reach it ([comm] hostname;
 *               default: the address the launcher chose, or 127.0.0.1 for local threads).
 * A communicator accepts each of these (it may ignore them). Any other option it does not know
 * is refused at create with INVALID_ARGUMENT, with the key in the message. The conformance suite
 * checks both. Other options come from the [comm] table of fleet.toml. */
#define FLEET_COMM_HOST_OPTIONS "hostname"

enum {
  FLEET_REDUCE_SUM = 0,
  FLEET_REDUCE_PROD = 1,
  FLEET_REDUCE_MAX = 2,
  FLEET_REDUCE_MIN = 3,
  FLEET_REDUCE_AVG = 4
};

typedef struct FleetCommConfig {
  size_t struct_size;
  int32_t rank;                 /* 0..world_size-1 */
  int32_t world_size;           /* >= 1 */
  const FleetStore* store;      /* scoped to this communicator; valid until destroy */
  int64_t timeout_ms;           /* deadline of every wait, > 0 */
  const char* device;           /* device component the tensors live on, e.g. "cpu" */
  int32_t device_ordinal;
  int32_t reserved;
  size_t num_options;           /* options from fleet.toml [comm] for this backend */
  const FleetAttr* const* options;
  /* 1.2: the device component named by `device` (its table and the ctx its slots take), so a
   * communicator in another plugin can turn the FleetStream* it is handed into a native stream
   * (stream_native) and order its work against it with that device's events. Both NULL when the
   * host has no such component. Valid until destroy. Read only when
   * FLEET_HAS_FIELD(config, FleetCommConfig, device_ctx). */
  const FleetDeviceVTable* device_table;
  void* device_ctx;
} FleetCommConfig;

typedef struct FleetCommVTable {
  size_t struct_size;

  /* Device components whose memory this communicator can reduce (e.g. {"cpu"}). The host
   * refuses a configuration that pairs it with another device unless staging is enabled. */
  size_t num_devices;
  const char* const* devices;

  /* Joins the group: blocks until all world_size ranks joined or the deadline passed. */
  FleetStatus* (*create)(void* ctx, const FleetCommConfig* config, FleetComm** out);
  FleetStatus* (*destroy)(void* ctx, FleetComm* comm);
  /* Makes every pending and future call on comm return ABORTED promptly. Any thread. */
  void (*abort)(void* ctx, FleetComm* comm);

  /* in and out have the same dtype and element count; in == out (same data) is allowed. */
  FleetStatus* (*all_reduce)(void* ctx, FleetComm* comm, const FleetTensor* in,
                             const FleetTensor* out, int32_t op, FleetStream* stream);
  FleetStatus* (*broadcast)(void* ctx, FleetComm* comm, const FleetTensor* buf, int32_t root,
                            FleetStream* stream);
  /* out holds world_size * numel(in) elements, rank r's contribution at offset r * numel(in). */
  FleetStatus* (*all_gather)(void* ctx, FleetComm* comm, const FleetTensor* in,
                             const FleetTensor* out, FleetStream* stream);
  /* in holds world_size * numel(out) elements; rank r receives the reduction of block r. */
  FleetStatus* (*reduce_scatter)(void* ctx, FleetComm* comm, const FleetTensor* in,
                                 const FleetTensor* out, int32_t op, FleetStream* stream);
  /* Only root's out is written; out may be NULL on other ranks. */
  FleetStatus* (*reduce)(void* ctx, FleetComm* comm, const FleetTensor* in,
                         const FleetTensor* out, int32_t op, int32_t root, FleetStream* stream);
  /* in and out hold world_size equal blocks; block j of rank i goes to block i of rank j. */
  FleetStatus* (*all_to_all)(void* ctx, FleetComm* comm, const FleetTensor* in,
                             const FleetTensor* out, FleetStream* stream);
  FleetStatus* (*send)(void* ctx, FleetComm* comm, const FleetTensor* buf, int32_t peer,
                       FleetStream* stream);
  FleetStatus* (*recv)(void* ctx, FleetComm* comm, const FleetTensor* buf, int32_t peer,
                       FleetStream* stream);
  FleetStatus* (*barrier)(void* ctx, FleetComm* comm);

  /* (optional) A communicator over a subset of ranks: ranks[0..n) (sorted, containing this
   * rank) in the order given. Collective over the parent: every parent rank calls it with the
   * same list, or with a list that excludes itself, in which case *out is set to NULL. */
  FleetStatus* (*new_group)(void* ctx, FleetComm* parent, const int32_t* ranks, size_t n,
                            FleetComm** out);

  /* 1.3 (optional) Whether a group of `world_size` ranks can be created: 1 yes, 0 no (a
   * single-process communicator, one that needs a power of two). Without it every size >= 1 is
   * supported. The host refuses a job of another size before create, naming the communicator;
   * the conformance kit skips the sizes it refuses. Must be cheap and must not block. */
  int32_t (*supports_world_size)(void* ctx, int32_t world_size);
} FleetCommVTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEET_COMM_H_ */
