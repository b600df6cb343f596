// One Gloo communicator: a full mesh of TCP pairs among `size` ranks, and the Fleet collectives
// on top of Gloo's unbound-buffer algorithms. Calls are synchronous (the cpu device has no
// asynchronous streams), serialised by the host, except Abort, which any thread may call.
//
// Errors are thrown as CommError (store_adapter.h) with a Fleet code and a message naming the
// op, this rank, the world size and, where known, the peer; plugin.cc turns them into
// statuses. After a Gloo failure (a timeout or a dead peer) Gloo has closed every pair, so the
// communicator refuses later calls with ABORTED naming that first failure.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include "fleet/fleet_comm.h"

namespace fleet_gloo {

struct CreateParams {
  const FleetHostApi* host = nullptr;
  const FleetStore* store = nullptr;
  std::string key_prefix;  // where this communicator's rendezvous keys live in `store`
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<gloo::transport::Device> device;
  int32_t cpu_device_type = -1;  // the host's id of the cpu device, or -1
  bool bcube = false;            // allreduce with Gloo's BCUBE instead of RING (option)
};

class Communicator {
 public:
  // Joins the group: every rank announces itself, then Gloo connects the full mesh. Fails with
  // DEADLINE_EXCEEDED naming the ranks that never joined.
  static std::unique_ptr<Communicator> Create(CreateParams params);
  ~Communicator();

  void Abort() noexcept;

  void AllReduce(const FleetTensor* in, const FleetTensor* out, int32_t op);
  void Broadcast(const FleetTensor* buf, int32_t root);
  void AllGather(const FleetTensor* in, const FleetTensor* out);
  void ReduceScatter(const FleetTensor* in, const FleetTensor* out, int32_t op);
  void Reduce(const FleetTensor* in, const FleetTensor* out, int32_t op, int32_t root);
  void AllToAll(const FleetTensor* in, const FleetTensor* out);
  void Send(const FleetTensor* buf, int32_t peer);
  void Recv(const FleetTensor* buf, int32_t peer);
  void Barrier();
  // nullptr when this rank is not in ranks[0..n).
  std::unique_ptr<Communicator> NewGroup(const int32_t* ranks, size_t n);

 private:
  explicit Communicator(CreateParams params);

  struct Buffer {
    void* data;
    int32_t dtype;
    size_t numel;
    size_t bytes;
  };

  // "gloo all_reduce (rank 1 of 4)".
  std::string Where(const char* op) const;
  [[noreturn]] void Invalid(const char* op, const std::string& what) const;
  Buffer View(const char* op, const char* name, const FleetTensor* t) const;
  void CheckRoot(const char* op, int32_t root) const;
  void CheckPeer(const char* op, int32_t peer) const;
  void CheckUsable(const char* op) const;
  uint32_t NextTag() { return ++tag_; }

  // Send (send = true) or Recv.
  void PointToPoint(bool send, const FleetTensor* buf, int32_t peer);
  // Runs a Gloo call, turning Gloo's exceptions into CommError (see the file comment).
  template <typename F>
  void RunGloo(const char* op, int peer, F&& body);

  CreateParams params_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::atomic<bool> aborted_{false};
  // Asked at create: a host that ignores SIGPIPE needs no per-call guard (sigpipe_guard.h).
  bool guard_sigpipe_ = true;
  std::string broken_;  // first Gloo failure; touched only by the (serialised) call thread
  uint32_t tag_ = 0;
  uint64_t groups_ = 0;
  std::unique_ptr<uint64_t[]> send_seq_;  // per peer: slot of the next send / recv
  std::unique_ptr<uint64_t[]> recv_seq_;
};

}  // namespace fleet_gloo
