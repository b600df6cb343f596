// The rpc transport's client: one gRPC channel to one server (connected lazily), calls run as
// bidirectional streams on a completion queue of their own.
//
// Every attempt of a call has its own deadline (timeout_ms). Send, Get and Prefetch may be
// repeated: a get or a prefetch only reads, and every attempt of a send carries the same
// (client id, request id), which the server delivers at most once. An attempt of theirs that
// finds the server unreachable (UNAVAILABLE from the transport, not from the host's handler) is
// repeated up to `retries` times after 100 ms, 200 ms, ... (jittered). Barrier and Complete are
// attempted exactly once: an UNAVAILABLE may come from a connection that dropped after the
// server's handler ran, and a repeated barrier would be counted twice (or in the next round).
// Trainers wait for every server's port before training, so a server that is not up yet is no
// reason to retry them. Other failures are final. Errors carry canonical codes and name the
// call, the variable and the endpoint.
//
// With a token, the client and server prove to each other that they hold it (auth.h): the first
// call is preceded by a Hello, and an OK answer without the server's proof is UNAUTHENTICATED.
//
// The first server to answer is the only one this client talks to: a call that reaches a
// restarted server at the endpoint fails with DATA_LOSS (the server refuses it, knowing from
// the request which incarnation the client expects).
//
// Threading: calls may run on several threads at once. Close (any thread) cancels the calls in
// flight (they return ABORTED) and waits for them to leave; later calls return ABORTED.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common.h"

namespace grpc {
class Channel;
class ClientContext;
class ByteBuffer;
template <class R, class W>
class TemplatedGenericStub;
}  // namespace grpc

namespace fleet_rpc {

struct PayloadPiece;
struct WireHeader;

class RpcClient {
 public:
  // Throws RpcError (INVALID_ARGUMENT: bad endpoint, options or PEM files).
  explicit RpcClient(const FleetTransportClientConfig& config);
  ~RpcClient();

  void Send(const char* name, const FleetTensor* tensor, int64_t timeout_ms);
  void Get(const char* name, FleetTensorAllocFn alloc, void* alloc_ctx, FleetTensor* out,
           int64_t timeout_ms);
  // Rows ids[0 .. num_ids) of the server's `name` (ABI 1.7): the ids go as a send of an int64
  // [num_ids] tensor, the answer comes back as a get's and must be [num_ids, ...].
  void Prefetch(const char* name, const int64_t* ids, int64_t num_ids, FleetTensorAllocFn alloc,
                void* alloc_ctx, FleetTensor* out, int64_t timeout_ms);
  void Barrier(int32_t kind, int64_t timeout_ms);
  void Complete(int64_t timeout_ms);
  // Tells the server this client's trainer is failing (attempted once).
  void Abort(const char* reason, int64_t timeout_ms);
  void Close();

 private:
  using Stub = grpc::TemplatedGenericStub<grpc::ByteBuffer, grpc::ByteBuffer>;
  // Produces the next request of an attempt into *out; false when there is none left.
  using NextRequest = std::function<bool(grpc::ByteBuffer* out)>;
  // Consumes one reply; throws RpcError to abandon the call.
  using OnReply = std::function<void(grpc::ByteBuffer& reply)>;
  // Makes the requests of one attempt (called once per attempt).
  using MakeRequests = std::function<NextRequest()>;

  // How one attempt ended: the call's status (FLEET_CODE_*), whether the server's handler
  // produced it, and what a Hello answered (auth.h).
  struct Outcome {
    int32_t code = 0;
    std::string message;
    bool from_handler = false;
    std::string challenge, hello_proof;
    // An outcome the client decides itself (not the handler's).
    static Outcome Of(int32_t code, std::string message) {
      Outcome o;
      o.code = code;
      o.message = std::move(message);
      return o;
    }
  };
  // Runs a call, retried on an unreachable server only when `idempotent`; throws RpcError
  // describing `what` on failure. With a token, a call other than Hello first makes sure the
  // server's challenge is known (Hello). `hello_nonce` is set for the Hello call only.
  Outcome Call(const std::string& what, const char* method, int64_t timeout_ms, bool idempotent,
               const MakeRequests& make, const OnReply& on_reply,
               const std::string& hello_nonce = "");
  // Call with the request `head` followed by the payload `runs` (laid end to end) in messages
  // of at most max_message_bytes, the header on the first only; `on_attempt` (may be empty)
  // runs before each attempt. The payload is referenced, not copied, and it is the caller's
  // for this call only, so this returns only once gRPC has released every slice of it.
  void CallWithPayload(const std::string& what, const char* method, int64_t timeout_ms,
                       bool idempotent, const WireHeader& head,
                       const std::vector<PayloadPiece>& runs,
                       const std::function<void()>& on_attempt, const OnReply& on_reply);
  // One attempt. Throws the RpcError an on_reply threw (after cancelling the call).
  Outcome Attempt(const char* method, int64_t timeout_ms, const NextRequest& next,
                  const OnReply& on_reply, const std::string& hello_nonce);
  // Learns the server's challenge and checks the server's proof (once; concurrent callers
  // wait for the first). Throws UNAUTHENTICATED when the server cannot prove it holds the token.
  void Hello(int64_t timeout_ms);
  std::string Challenge() const;
  // The error for a failed call.
  RpcError Failure(const std::string& what, const Outcome& outcome, int attempts,
                   int64_t timeout_ms) const;

  // Registers a context of an attempt so Close can cancel it; false once closed.
  bool Track(grpc::ClientContext* ctx);
  void Untrack(grpc::ClientContext* ctx);
  // Sleeps `ms` unless Close comes first (then false).
  bool Backoff(int64_t ms);
  // The incarnation of the server that first answered, or "" before any answer.
  std::string Incarnation() const;

  std::string endpoint_;
  int32_t trainer_id_ = 0;
  uint64_t client_id_ = 0;                      // random; with a request id names one send
  std::atomic<uint64_t> next_request_id_{0};
  std::atomic<uint64_t> next_counter_{0};       // per attempt of any call (auth.h)
  std::mutex hello_mu_;
  Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stub> stub_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  std::set<grpc::ClientContext*> live_;
  std::string incarnation_;
  std::string challenge_;  // the server's, once Hello succeeded
};

}  // namespace fleet_rpc
