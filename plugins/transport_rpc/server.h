// The rpc transport's server: a gRPC synchronous server (a thread per call in progress, so the
// host's handlers may block: a Get waiting for its round, a barrier waiting for the other
// trainers) with four bidirectional-streaming methods of the service
// "fleet.transport_rpc.Transport":
//   Send      client streams a variable's chunks; the server assembles them into one host
//             buffer, checks them against the header's dtype/dims and calls on_send;
//   Get       client sends the name; the server calls on_get and streams the variable back in
//             chunks that reference the host's memory until gRPC is done with them
//             (on_get_done is called then);
//   Barrier   the header's barrier_kind goes to on_barrier;
//   Complete  on_complete.
// A handler's error travels back as the call's status (canonical code, the handler's message).
//
// Threading: Stop and the destructor may run on any thread but not in a handler. Stop cancels
// calls in flight (clients see ABORTED) and returns when every handler has returned, so a host
// handler blocked on its own wait delays it until that wait ends.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "common.h"

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

  // A Get's pinned tensor was released by gRPC: on_get_done has run.
  void PinReleased();

  FleetTransportHandlers handlers_{};
  Options options_;
  std::string endpoint_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  int64_t pins_ = 0;  // Get replies whose memory gRPC still references
};

}  // namespace fleet_rpc
