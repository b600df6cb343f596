// The rpc transport's server: a gRPC synchronous server (a thread per call in progress, so the
// host's handlers may block: a Get waiting for its round, a barrier waiting for the other
// trainers) with seven bidirectional-streaming methods of the service
// "fleet.transport_rpc.Transport":
//   Send      client streams a variable's chunks; the server assembles them into one host
//             buffer, checks them against the header's dtype/dims and calls on_send; a
//             SelectedRows tensor's rows follow its values there (8-aligned) and are checked
//             against its height first (ABI 1.7);
//   Get       client sends the name; the server calls on_get and streams the variable back in
//             chunks that reference the host's memory until gRPC is done with them
//             (on_get_done is called then);
//   Prefetch  client streams the ids as a send of int64 [n]; the server calls on_prefetch and
//             answers as Get does (ABI 1.7; UNIMPLEMENTED when the host has no on_prefetch);
//   Barrier   the header's barrier_kind goes to on_barrier;
//   Complete  on_complete;
//   Abort     on_abort, with the header's reason (ABI 1.4).
// A Send carrying a client id and request id is delivered at most once (DeliveryLog); with a
// host of ABI 1.4 its header goes to on_send_begin before the payload is buffered.
//   Hello     gives a client the challenge it must answer (auth.h), with a proof that this server
//             holds the token when it has one; the only call that needs no credentials.
// Every answer carries this server's incarnation (a random id per process) in its trailing
// metadata; a call presenting another one is refused with DATA_LOSS before any handler runs.
// With a token, every other call must carry credentials that answer this process's challenge
// and were not used before; a refusal is UNAUTHENTICATED and logged with the peer's address
// (the first 20 in full, then every 1000th with a count).
//
// Test hook: with FLEET_RPC_LOSE_SEND_REPLIES=N in the environment, the first N sends that
// on_send accepted are answered UNAVAILABLE, as if the reply had been lost on the way (the
// client then retries), to test at-most-once delivery end to end.
// A handler's error travels back as the call's status (canonical code, the handler's message).
//
// A Barrier or Complete whose client already gave up (gRPC reports the call cancelled before
// the handler would run) is not passed to the handler.
//
// Threading: Stop and the destructor may run on any thread but not in a handler. Stop cancels
// the calls in flight at the transport level, but a host handler blocked on its own wait is not
// woken by that: Stop returns only when every handler has returned, so the host must end such
// waits first.
//
// Lifetime: the destructor waits up to 30 s for gRPC to release the Get replies it still
// references (each release calls on_get_done). A release that comes later finds the server
// gone and skips on_get_done (the host's handlers may be destroyed by then): that token leaks,
// the lesser evil next to a call into freed memory.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "auth.h"
#include "common.h"
#include "deliveries.h"

namespace grpc {
class Server;
}

namespace fleet_rpc {

class RpcServer {
 public:
  // Binds config->endpoint exactly and starts serving; throws RpcError (UNAVAILABLE when the
  // address cannot be bound, INVALID_ARGUMENT for bad options or unreadable PEM files).
  static std::unique_ptr<RpcServer> Start(const FleetTransportServerConfig& config);
  ~RpcServer();

  const std::string& endpoint() const { return endpoint_; }
  void Stop();

 private:
  class Service;
  friend class Service;
  RpcServer();

  // What a Get reply's release needs, shared with the release closures so it outlives the
  // server: the count of replies gRPC still references and whether the server is gone.
  struct PinState {
    std::mutex mu;
    std::condition_variable cv;
    FleetTransportHandlers handlers{};
    int64_t pins = 0;     // Get replies whose memory gRPC still references
    int64_t calling = 0;  // releases inside on_get_done right now
    bool gone = false;    // the server was destroyed: skip on_get_done
  };
  // Counts a Get reply that lends `token` and returns the closure that releases it: it calls
  // on_get_done unless the server is gone.
  std::function<void()> PinGet(void* token);

  // Logs a refused call (rate-limited after the first kLoggedRefusals).
  void LogRefusal(const std::string& text);
  static constexpr int64_t kLoggedRefusals = 20;
  // One line in the host's log at `level` (FLEET_LOG_*), when the host takes log lines.
  static void Log(int32_t level, const std::string& text);
  // True for the first lose_replies_ accepted sends (the test hook).
  bool LoseThisReply();

  FleetTransportHandlers handlers_{};
  Options options_;
  std::string incarnation_;
  std::string challenge_;  // this process's challenge (auth.h), random per process
  ReplayWindow replays_;
  std::atomic<int64_t> refusals_{0};
  DeliveryLog deliveries_;
  std::atomic<int64_t> lose_replies_{0};
  std::string endpoint_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<PinState> pin_state_ = std::make_shared<PinState>();
  std::mutex mu_;
  bool stopped_ = false;
};

}  // namespace fleet_rpc
