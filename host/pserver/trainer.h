// The trainer's side of parameter-server training: the host kernels of the RPC ops (send,
// recv, distributed_lookup_table, send_barrier, fetch_barrier) over one transport client per
// parameter server.
//
// Like CollectiveRuntime, the kernels are ordinary FleetKernelDefs whose ctx is the runtime;
// the executor takes them from ExecutorOptions::host_kernels. What they do (Paddle's
// distributed_ops, reference §9.1):
//   send           X[i] is sent under its var name to epmap[i]; the servers are called
//                  concurrently and the op waits for every call. A sparse X (a block of a
//                  sparse gradient) is sent with one entry per row it touches (float entries
//                  of a row summed, rows in order), through a transport of ABI 1.7 or later
//                  only.
//   recv           Out[i] is fetched by its var name (or varnames[i] when that attribute is set)
//                  from epmap[i] into the prepared output, whose dtype and dims must match what
//                  the server holds; concurrently across servers.
//   distributed_lookup_table
//                  Outputs[i] = the rows of Ids[i] of a table the servers hold in row blocks
//                  (table_names[k] on endpoints[k], height_sections[k] rows): each id is
//                  checked against the table, and the distinct ids of each block go to its
//                  server in one prefetch call (the servers concurrently). Host memory only.
//   send_barrier   a BATCH barrier on every server of `endpoints`.
//   (With a communicator, send queues X instead and recv takes the newest value it received;
//   see StartCommunicator.)
//   fetch_barrier  a FETCH barrier on every server of `endpoints`.
// Attributes are read once at prepare; the var names come from the executor's "@names@SLOT"
// attributes (OpSchema::rpc).
//
// Clients connect on first use, so a trainer's startup is what first reaches the servers.
// Tensors on a device without host memory are staged through host buffers made at prepare.
//
// Threading: launches come from one executor thread (each launch may call several servers
// from threads of its own). Complete and Close may be called from any thread; after Close
// every call fails with ABORTED.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ir/program.h"
#include "pserver/async_communicator.h"
#include "plugin/device.h"
#include "plugin/kernel.h"
#include "plugin/registry.h"
#include "plugin/transport.h"
#include "support/status.h"

namespace fleet {

class PsTrainerRuntime final : public HostKernels {
 public:
  // `transport` is the transport component; `endpoints` the servers in index order (the
  // role's pserver_endpoints: "pserver <i>" in messages is an index in this list);
  // `trainer_id` this trainer's id, which every RPC op's trainer_id attribute must equal.
  // `device` is the component the executor runs on (nullptr: host memory). `transport` and
  // `device` must outlive the runtime.
  PsTrainerRuntime(const ComponentRecord& transport, std::vector<std::string> endpoints,
                   int32_t trainer_id, TransportOptions options,
                   const ComponentRecord* device = nullptr, int32_t device_ordinal = 0);
  ~PsTrainerRuntime() override;
  PsTrainerRuntime(const PsTrainerRuntime&) = delete;
  PsTrainerRuntime& operator=(const PsTrainerRuntime&) = delete;

  const KernelCandidate* Find(std::string_view op_type) const override;

  // The client of `endpoint`, connected on first use. ABORTED after Close.
  StatusOr<TransportClient*> Client(const std::string& endpoint);

  // Gets `name` from `endpoint` into `target` (host memory), after checking that the server
  // holds the dtype and dims of `var` (the var `target` stands for); errors name both.
  Status GetInto(const std::string& name, const std::string& endpoint, const FleetTensor& var,
                 const FleetTensor& target);

  // "pserver 1 (127.0.0.1:6171)", or "pserver 127.0.0.1:6171" for one not in the list.
  std::string ServerLabel(const std::string& endpoint) const;

  // Waits until every server of the list accepts TCP connections (Paddle's wait_server_ready:
  // trainers may start before their servers listen), polling each every 100 ms, concurrently,
  // until options.timeout. UNAVAILABLE names the servers that never answered.
  Status WaitServersReady();

  // From now on send ops queue their tensors in a background communicator and recv ops take
  // what it received (strategy.a_sync; pserver/async_communicator.h). Call once, before the first
  // launch. UNIMPLEMENTED for a device without host memory.
  Status StartCommunicator(AsyncCommunicatorOptions options);
  AsyncCommunicator* communicator() const { return communicator_.get(); }

  // Tells every server (the list and any other one contacted) that this trainer is done, so
  // sync servers stop waiting for it and exit once every trainer has. Concurrent across
  // servers; the first error (naming the server) is returned after every call finished. With
  // a communicator, first sends what it still holds (and stops it).
  Status Complete();

  // Tells every server (as Complete does) that this trainer failed, with `reason`, so each
  // fails at once naming it instead of waiting out its deadline. Best effort: one attempt per
  // server within min(options.timeout, 5 s), concurrently; a transport without the call
  // (before ABI 1.4) or an unreachable server is skipped. Returns how many servers were told.
  int Abort(std::string_view reason);

  // Closes every client; pending and later calls fail with ABORTED. Any thread; idempotent.
  void Close();

  int32_t trainer_id() const { return trainer_id_; }
  // Whether the transport carries a sparse gradient's rows (its plugin speaks ABI 1.7).
  bool CarriesSelectedRows() const;
  const TransportOptions& options() const { return options_; }
  const Device* device() const { return device_.get(); }  // nullptr: host memory
  int32_t device_ordinal() const { return device_ordinal_; }

 private:
  const ComponentRecord& transport_;
  std::vector<std::string> endpoints_;
  int32_t trainer_id_;
  TransportOptions options_;
  std::unique_ptr<Device> device_;  // only for a device without host memory
  int32_t device_ordinal_;
  std::mutex mu_;  // guards clients_ and closed_
  bool closed_ = false;
  std::map<std::string, std::unique_ptr<TransportClient>> clients_;
  std::unique_ptr<AsyncCommunicator> communicator_;  // strategy.a_sync only
  ComponentRecord kernels_record_;  // kind KERNELS, plugin "host", ctx = this
  std::map<std::string, KernelCandidate, std::less<>> kernels_;
};

// Runs fn(0) .. fn(n - 1) at once (fn(0) on the calling thread, the rest on threads of their
// own) and returns the first error in index order after all of them returned.
Status RunConcurrently(size_t n, const std::function<Status(size_t)>& fn);

}  // namespace fleet
