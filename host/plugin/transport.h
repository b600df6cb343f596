// The host's handles on a transport component (fleet_transport.h): a server that calls a
// TransportHandler back, and a client, with every plugin status turned into Status.
//
// Options (TLS, token, message cap, retries) reach the plugin as FleetAttrs built from
// TransportOptions; the host never interprets them beyond that.
//
// Ownership: a TransportServer owns its FleetTransportServer (stopped and destroyed in the
// destructor) and must not outlive its handler; a TransportClient owns its
// FleetTransportClient. The component (its registry) must outlive both.
// Threading: a server calls its handler from transport threads, several at once. A client may
// be used from several threads at once; Close may be called from any thread and makes pending
// client calls fail with ABORTED. Stop may be called from any thread but a handler's; see Stop
// for the handler calls in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "fleet/fleet_transport.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// The options handed to the transport's server_start/client_connect, by their ABI names:
//   timeout_ms (int64), retries (int64), max_message_bytes (int64), token (string),
//   tls (bool), tls_cert, tls_key, tls_ca, tls_client_cert, tls_client_key (string paths;
//   absent when unset).
struct TransportOptions {
  std::chrono::milliseconds timeout{300000};  // per call; also the server's barrier deadline
  int64_t retries = 3;
  int64_t max_message_bytes = 4 << 20;
  std::string token;
  bool tls = false;
  std::string tls_cert, tls_key, tls_ca, tls_client_cert, tls_client_key;
};

// From [transport] (Config::rpc). The token is [transport] token when set, else the one every
// process of the job derives from `job_secret` (JobSecret, config/job_secret.h; the secret
// itself never goes on the wire), else none.
TransportOptions TransportOptionsFrom(const Config& config, std::string_view job_secret = "");

// The option names the host passes a transport for `options` (server_start and client_connect
// get the same); each is one of FLEET_TRANSPORT_HOST_OPTIONS (fleet_transport.h).
std::vector<std::string> TransportOptionNames(const TransportOptions& options);

// Whether `transport` carries a SelectedRows tensor (height >= 0, fleet_abi.h) through Send
// with its rows and height (fleet_transport.h, "Sparse rows"): true when the transport's plugin
// declares ABI 1.7 or later. An older one would deliver the values alone, as a dense tensor of
// the wrong meaning, so the host sends sparse gradients only where this holds (Send refuses
// them elsewhere) and sends them dense otherwise.
bool TransportCarriesSelectedRows(const ComponentRecord& transport);

// What a server does with what trainers send; implemented by the pserver runtime.
// trainer_id is the id the client declared when it connected; the server does not check it.
// With a shared token the server cannot tell the trainers apart from one another (the token
// authenticates the job, not the trainer), so a handler must not treat the id as proof.
class TransportHandler {
 public:
  virtual ~TransportHandler() = default;
  // A trainer sent a variable; `tensor` (host memory) is valid for the call only. Its height
  // and rows can always be read: a SelectedRows tensor has height >= 0 and dims[0] rows
  // (8-byte aligned), any other has height -1 and rows null. The rows are the peer's: a
  // handler checks them against its variable (the transport only checks their count).
  virtual Status OnSend(int32_t trainer_id, std::string_view name, const FleetTensor& tensor) = 0;
  // A trainer asks for a variable: fill `out` with a host-memory view that stays valid until
  // OnGetDone(token) with the token set here.
  virtual Status OnGet(int32_t trainer_id, std::string_view name, FleetTensor& out,
                       void** token) = 0;
  virtual void OnGetDone(void* token) = 0;
  // FLEET_BARRIER_BATCH or FLEET_BARRIER_FETCH; may block until the barrier completes (with a
  // deadline of its own).
  virtual Status OnBarrier(int32_t trainer_id, int32_t kind) = 0;
  // The trainer finished and will send nothing more.
  virtual Status OnComplete(int32_t trainer_id) = 0;
  // A send is starting: `shape` carries its dtype, dims and height (data and rows are null),
  // and nothing beyond its first message has been buffered yet. An error refuses the send;
  // OnSend is not called then. Transports of ABI 1.4 call it; with an older one OnSend is the
  // only check, so OnSend must not rely on it.
  virtual Status OnSendBegin(int32_t trainer_id, std::string_view name,
                             const FleetTensor& shape) = 0;
  // The trainer is failing and will send nothing more; `reason` is its error (untrusted text).
  virtual Status OnAbort(int32_t trainer_id, std::string_view reason) = 0;
  // A trainer asks for rows ids[0 .. num_ids) of a variable (ids valid for the call only; the
  // peer's, so unchecked). Fill `out` with a host-memory view of [num_ids, ...] whose row i is
  // the row of ids[i], valid until OnGetDone(token) with the token set here; a key the
  // variable does not hold is an error naming it. Transports of ABI 1.7 call it. The default
  // serves no prefetch: UNIMPLEMENTED, which the trainer gets back.
  virtual Status OnPrefetch(int32_t trainer_id, std::string_view name, const int64_t* ids,
                            int64_t num_ids, FleetTensor& out, void** token);
};

class TransportServer {
 public:
  // Binds `endpoint` exactly ("host:port"; port 0 = any free) and starts serving. UNAVAILABLE
  // naming the endpoint when it cannot be bound (in use, no such address).
  static StatusOr<std::unique_ptr<TransportServer>> Start(const ComponentRecord& component,
                                                          const std::string& endpoint,
                                                          TransportHandler* handler,
                                                          const TransportOptions& options);
  ~TransportServer();
  TransportServer(const TransportServer&) = delete;
  TransportServer& operator=(const TransportServer&) = delete;

  // The endpoint actually bound (the port filled in when 0 was asked for).
  const std::string& endpoint() const { return endpoint_; }
  // Stops serving: new calls are refused and calls in flight are cancelled at the transport
  // level (their clients see an error). Idempotent; any thread but a handler's. A handler
  // blocked in the host's own wait (a barrier, a get waiting for its round) is NOT woken by
  // this: Stop returns only once every handler call has returned. So the caller must release
  // its handlers' waits first (the pserver runtime fails or finishes its loop, which ends those
  // waits, before it stops the server); otherwise Stop lasts as long as those waits' deadlines.
  void Stop();

 private:
  TransportServer(const ComponentRecord& component, TransportHandler* handler);

  const ComponentRecord& component_;
  const FleetTransportVTable* table_;
  TransportHandler* handler_;
  FleetTransportHandlers handlers_{};
  FleetTransportServer* server_ = nullptr;
  std::string endpoint_;
  std::atomic<bool> stopped_{false};
};

// Where a received tensor goes: called with its dtype (FLEET_DTYPE_*) and dims, returns a
// host-memory descriptor to fill (e.g. a prepared output whose shape is checked here), or an
// error naming the mismatch. The descriptor's data and dims must stay valid until Get (or
// Prefetch) returns.
using TensorSink = std::function<StatusOr<FleetTensor>(int32_t dtype,
                                                       const std::vector<int64_t>& dims)>;

class TransportClient {
 public:
  // Connects to the server at `endpoint` as trainer `trainer_id`. The plugin may connect
  // lazily; UNAVAILABLE names the endpoint when it is known to be unreachable.
  static StatusOr<std::unique_ptr<TransportClient>> Connect(const ComponentRecord& component,
                                                            const std::string& endpoint,
                                                            int32_t trainer_id,
                                                            const TransportOptions& options);
  ~TransportClient();
  TransportClient(const TransportClient&) = delete;
  TransportClient& operator=(const TransportClient&) = delete;

  const std::string& endpoint() const { return endpoint_; }

  // Each call has the deadline options.timeout; errors name the endpoint and the variable.
  // Send and Get are idempotent (a send overwrites the same variable, a get reads) and are
  // retried up to options.retries times when the server is unreachable. Barrier and Complete
  // are attempted once: the request may have reached the server's handler before the
  // connection dropped, and a repeated barrier would be counted twice. Callers wait for every
  // server's port to accept connections before the first barrier (the trainers do).
  // Send hands the plugin `tensor` as it is. A SelectedRows tensor (height >= 0) must say so
  // within its struct_size (FLEET_STRUCT_SIZE(FleetTensor, height); a shorter one is dense),
  // have ndim >= 1 and rows for its dims[0] entries; through a transport that does not carry
  // one (TransportCarriesSelectedRows) it is refused with FAILED_PRECONDITION.
  Status Send(std::string_view name, const FleetTensor& tensor);
  Status Get(std::string_view name, const TensorSink& sink);
  // Fetches rows ids[0 .. num_ids) of the server's variable `name` (its OnPrefetch) in one
  // call, into what `sink` gives for [num_ids, ...]. Idempotent like Get (retried alike, the
  // same deadline). UNIMPLEMENTED naming the transport when it predates ABI 1.7's
  // client_prefetch; the server's UNIMPLEMENTED when its handler serves no prefetch.
  Status Prefetch(std::string_view name, const int64_t* ids, int64_t num_ids,
                  const TensorSink& sink);
  Status Barrier(int32_t kind);
  Status Complete();
  // Tells the server this trainer is failing (`reason`: its error), attempted once within
  // `timeout`. UNIMPLEMENTED when the transport predates ABI 1.4's client_abort.
  Status Abort(std::string_view reason, std::chrono::milliseconds timeout);
  // Any thread; pending and later calls fail with ABORTED.
  void Close();

 private:
  TransportClient(const ComponentRecord& component, std::string endpoint,
                  TransportOptions options);

  const ComponentRecord& component_;
  const FleetTransportVTable* table_;
  std::string endpoint_;
  TransportOptions options_;
  FleetTransportClient* client_ = nullptr;
  // Set by Close: later calls fail here without reaching the plugin, whose client_close also
  // releases the client (the ABI has no separate destroy).
  std::atomic<bool> closed_{false};
};

}  // namespace fleet
