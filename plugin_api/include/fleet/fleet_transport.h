/*
 * fleet_transport.h — the parameter-server transport component: a server that receives and
 * serves variables and handles barriers, and a client that talks to it. Registered with kind
 * FLEET_COMPONENT_TRANSPORT.
 *
 * The transport moves bytes and calls the host back; it knows nothing of optimizers. The host
 * supplies the server's handlers (FleetTransportHandlers) and, on the client, an allocator for
 * received tensors.
 *
 * Deadlines: every client call takes a relative deadline in milliseconds and returns
 * DEADLINE_EXCEEDED (or UNAVAILABLE when the server cannot be reached) rather than block.
 *
 * Threading: a server may call its handlers concurrently from transport threads; handlers must
 * not block indefinitely (they have their own deadlines). One client may be used from several
 * threads at once. server_stop and client_close may be called from any thread and make pending
 * calls return ABORTED.
 *
 * Delivery (ABI 1.4). A transport that retries a client_send (the server was unreachable, or
 * the reply was lost) delivers it to on_send at most once: a retry of a send the server already
 * handled gets that first answer back, without a second on_send. (Asynchronous parameter
 * servers apply a gradient on arrival, so a repeated delivery would apply it twice.)
 *
 * Restarts (ABI 1.4). A server that restarts loses what its handlers held, so a client must
 * not carry on with its replacement as if nothing happened. Once a client has been answered by
 * a server, a call that reaches a different server process at the same endpoint (a restart)
 * fails with FLEET_CODE_DATA_LOSS, its message naming the endpoint and saying that the server
 * restarted, and the replacement's handlers are not called for it.
 *
 * Sparse rows (ABI 1.7). A tensor with height >= 0 (a SelectedRows tensor, fleet_abi.h) given
 * to client_send travels whole: its dims[0] entries, their rows and its height reach
 * on_send_begin (rows NULL there) and on_send (rows in host memory, 8-byte aligned, valid for
 * the call). A transport built against an older minor would drop the rows, so the host sends
 * such a tensor only through a transport whose plugin declares ABI 1.7 or later.
 */
#ifndef FLEET_TRANSPORT_H_
#define FLEET_TRANSPORT_H_

#include "fleet/fleet_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options the host passes to every transport's server_start and client_connect, as a
 * comma-separated list usable in an initializer: { FLEET_TRANSPORT_HOST_OPTIONS }.
 *   "timeout_ms"         int64: the job's RPC deadline ([transport] timeout_s);
 *   "retries"            int64: how often a client retries an UNAVAILABLE call;
 *   "max_message_bytes"  int64: the largest message to accept or send;
 *   "tls"                bool: whether TLS is required;
 *   "token", "tls_cert", "tls_key", "tls_ca", "tls_client_cert", "tls_client_key"
 *                        string, passed only when set in fleet.toml.
 * A transport accepts each of these (it may ignore what it does not implement, except that it
 * must refuse tls = true or a token it cannot enforce, with UNIMPLEMENTED). Any other option
 * is refused with INVALID_ARGUMENT naming the key. The conformance suite checks both. */
#define FLEET_TRANSPORT_HOST_OPTIONS                                                      \
  "timeout_ms", "retries", "max_message_bytes", "tls", "token", "tls_cert", "tls_key",   \
      "tls_ca", "tls_client_cert", "tls_client_key"

typedef struct FleetTransportServer FleetTransportServer; /* opaque, component-owned */
typedef struct FleetTransportClient FleetTransportClient; /* opaque, component-owned */

enum {
  FLEET_BARRIER_BATCH = 0,  /* a trainer has sent every gradient of this step (send_barrier) */
  FLEET_BARRIER_FETCH = 1   /* a trainer has fetched every parameter of this step */
};

/* Host callbacks invoked by a server. trainer_id is the sender's id as the client declared it. */
typedef struct FleetTransportHandlers {
  size_t struct_size;
  void* ctx;
  /* A trainer sent a variable. The tensor (host memory) is valid for the call only. */
  FleetStatus* (*on_send)(void* ctx, int32_t trainer_id, const char* name,
                          const FleetTensor* tensor);
  /* A trainer asks for a variable. The host fills *out (host memory) and keeps it valid until
   * on_get_done(ctx, token) is called with the token it set. */
  FleetStatus* (*on_get)(void* ctx, int32_t trainer_id, const char* name, FleetTensor* out,
                         void** token);
  void (*on_get_done)(void* ctx, void* token);
  /* A trainer reached a barrier (FLEET_BARRIER_*). May block until the barrier completes. */
  FleetStatus* (*on_barrier)(void* ctx, int32_t trainer_id, int32_t kind);
  /* A trainer finished and will send nothing more. */
  FleetStatus* (*on_complete)(void* ctx, int32_t trainer_id);

  /* ---- ABI 1.4: both optional for the host; a transport checks FLEET_CAN_CALL. ---- */
  /* A trainer began sending a variable: called once per delivered send, when its name, dtype
   * and dims are known and before the transport holds more of its payload than one message.
   * `shape` has data == NULL. An error refuses the send: the transport answers it to the
   * client and neither buffers the rest nor calls on_send. Lets the host check a send against
   * the variable it holds before a hostile size is buffered. */
  FleetStatus* (*on_send_begin)(void* ctx, int32_t trainer_id, const char* name,
                                const FleetTensor* shape);
  /* A trainer is failing and will send nothing more. `reason` (UTF-8, possibly empty, at most
   * FLEET_TRANSPORT_MAX_REASON bytes as delivered) says why. The host stops waiting for it. */
  FleetStatus* (*on_abort)(void* ctx, int32_t trainer_id, const char* reason);

  /* ---- ABI 1.7: optional for the host; a transport checks FLEET_CAN_CALL. ---- */
  /* A trainer asks for some rows of a variable (client_prefetch): ids[0 .. num_ids) are row
   * keys of the variable as the host holds it (num_ids >= 0; ids valid for the call only). The
   * host fills *out (host memory) with a tensor [num_ids, ...] whose row i is the row of
   * ids[i], and keeps it valid until on_get_done(ctx, token) is called with the token it set.
   * A key the variable does not hold is an error naming it; nothing is returned then. */
  FleetStatus* (*on_prefetch)(void* ctx, int32_t trainer_id, const char* name,
                              const int64_t* ids, int64_t num_ids, FleetTensor* out,
                              void** token);
} FleetTransportHandlers;

/* The longest abort reason a transport must deliver; a longer one may be cut to this. */
#define FLEET_TRANSPORT_MAX_REASON 4096

typedef struct FleetTransportServerConfig {
  size_t struct_size;
  const char* endpoint;                   /* "host:port"; bound exactly, port 0 = any free */
  const FleetTransportHandlers* handlers; /* valid until server_destroy */
  size_t num_options;                     /* TLS, token, message caps, from fleet.toml */
  const FleetAttr* const* options;
} FleetTransportServerConfig;

typedef struct FleetTransportClientConfig {
  size_t struct_size;
  const char* endpoint;                   /* server "host:port" */
  int32_t trainer_id;
  int32_t reserved;
  int64_t connect_timeout_ms;
  size_t num_options;
  const FleetAttr* const* options;
} FleetTransportClientConfig;

/* Allocates host memory for a received tensor of the given dtype and dims; fills *out with a
 * descriptor whose data the host owns. */
typedef FleetStatus* (*FleetTensorAllocFn)(void* alloc_ctx, int32_t dtype, int32_t ndim,
                                           const int64_t* dims, FleetTensor* out);

typedef struct FleetTransportVTable {
  size_t struct_size;

  /* Binds and starts serving. Fails (UNAVAILABLE, naming the endpoint) when the address is in
   * use. */
  FleetStatus* (*server_start)(void* ctx, const FleetTransportServerConfig* config,
                               FleetTransportServer** out);
  /* The endpoint actually bound (port filled in). Valid until server_destroy. */
  const char* (*server_endpoint)(void* ctx, FleetTransportServer* server);
  void (*server_stop)(void* ctx, FleetTransportServer* server);
  FleetStatus* (*server_destroy)(void* ctx, FleetTransportServer* server);

  FleetStatus* (*client_connect)(void* ctx, const FleetTransportClientConfig* config,
                                 FleetTransportClient** out);
  FleetStatus* (*client_send)(void* ctx, FleetTransportClient* client, const char* name,
                              const FleetTensor* tensor, int64_t timeout_ms);
  FleetStatus* (*client_get)(void* ctx, FleetTransportClient* client, const char* name,
                             FleetTensorAllocFn alloc, void* alloc_ctx, FleetTensor* out,
                             int64_t timeout_ms);
  FleetStatus* (*client_barrier)(void* ctx, FleetTransportClient* client, int32_t kind,
                                 int64_t timeout_ms);
  FleetStatus* (*client_complete)(void* ctx, FleetTransportClient* client, int64_t timeout_ms);
  void (*client_close)(void* ctx, FleetTransportClient* client);

  /* ---- ABI 1.4 ---- */
  /* Optional. Tells the server that this client's trainer is failing (its on_abort), so the
   * server stops waiting for it instead of running into its deadline. Attempted once, best
   * effort, within timeout_ms; the client stays usable for client_close only. */
  FleetStatus* (*client_abort)(void* ctx, FleetTransportClient* client, const char* reason,
                               int64_t timeout_ms);

  /* ---- ABI 1.7 ---- */
  /* Optional. Fetches rows ids[0 .. num_ids) of the server's variable `name` (its
   * on_prefetch): *out, allocated through `alloc` as for client_get, is [num_ids, ...] with row
   * i holding the row of ids[i]. Batched: one call for all ids, however many; a request or
   * reply larger than max_message_bytes travels in several messages, as sends and gets do. A
   * prefetch changes nothing on the server, so it may be retried. num_ids == 0 returns a
   * [0, ...] tensor. A server without on_prefetch answers UNIMPLEMENTED. */
  FleetStatus* (*client_prefetch)(void* ctx, FleetTransportClient* client, const char* name,
                                  const int64_t* ids, int64_t num_ids, FleetTensorAllocFn alloc,
                                  void* alloc_ctx, FleetTensor* out, int64_t timeout_ms);
} FleetTransportVTable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEET_TRANSPORT_H_ */
