// host/collective: communicators and the collective runtime (the host kernels of the c_*
// ops), the collective job a trainer joins (job.h) and several devices of one process trained
// as one group (parallel_runner.h).
// Depends on: config/, executor/, ir/, launch/, ops/, plugin/, rendezvous/, roles/, support/.
//
// The collective ops' runtime: the communicators of a process, one per ring, and the host
// kernels that run c_comm_init, c_broadcast, c_allreduce_*, c_allgather, c_reducescatter and the
// stream syncs through them (DESIGN.md §5: collective ops are host ops whose kernels call the
// selected communicator). c_allgather of a sparse gradient moves it as its sparse_exchange
// attribute says (sparse_exchange.h); prepare makes the choice and logs it with both ways' bytes.
//
// The kernels are ordinary FleetKernelDefs whose ctx is the runtime, so the executor prepares
// and launches them like a device plugin's (ExecutorOptions::host_kernels); they work on any
// device the communicator accepts, since they only hand tensors to it.
//
// c_comm_init creates the ring's communicator when it runs (in the startup program): it joins
// the group through the job's store under "ring<id>" and blocks until every rank joined or the
// timeout passed. A ring used before its c_comm_init is FAILED_PRECONDITION naming the op.
//
// Synchronisation: a collective is handed the kernel's stream (the executor's; NULL on the CPU).
// A communicator for that device (NCCL) runs on a stream of its own ordered against it by
// events both ways; a staged one (Gloo with CUDA tensors) waits for the stream, reduces in host
// memory and copies back before returning. Either way work enqueued after the op sees its
// result, so c_sync_calc_stream / c_sync_comm_stream have nothing left to wait for.
//
// Desync check and flight recorder (collective/desync.h, launch/flight_recorder.h): the rings'
// communicators compare the ranks' calls at the points options.desync_check says (the caller
// resolves it from [comm] check and FLEET_COLLECTIVE_CHECK: ResolveDesyncCheck). Kernel calls carry their op's var names, taken from
// the schedule (SetSchedule) since kernels do not see them. The first runtime a process makes
// records its rings' calls in the file FLEET_FLIGHT_RECORDER names, when set (`fleet-host
// launch` sets it); a recorder that cannot be created is logged and training goes on.
//
// Threading: launches come from one executor thread; AbortAll may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/abortable_store.h"
#include "collective/communicator.h"
#include "collective/desync.h"
#include "collective/schedule.h"
#include "launch/flight_recorder.h"
#include "rendezvous/store.h"
#include "fleet/fleet_kernels.h"
#include "plugin/kernel.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

class CollectiveRuntime final : public HostKernels {
 public:
  // `component` is the communicator component; `store` the job's store. Both must outlive the
  // runtime. options.rank/world_size are this process's; c_comm_init's attributes must agree.
  CollectiveRuntime(const ComponentRecord& component, Store* store,
                    CommunicatorOptions options);
  ~CollectiveRuntime() override;
  CollectiveRuntime(const CollectiveRuntime&) = delete;
  CollectiveRuntime& operator=(const CollectiveRuntime&) = delete;

  // The host kernel for a collective op type, or nullptr when op_type is not one.
  const KernelCandidate* Find(std::string_view op_type) const override;

  // Creates ring `ring_id` (what c_comm_init does). A ring already made with the same
  // rank and size is kept; a different one is FAILED_PRECONDITION.
  Status InitRing(int32_t ring_id, int32_t nranks, int32_t rank);
  // What this rank will run; the first ring InitRing makes compares it with every other
  // rank's (collective/schedule.h) before any other collective runs. Call before the startup
  // program.
  void SetSchedule(CollectiveSchedule schedule);

  // The ring's communicator, or FAILED_PRECONDITION when it was never initialised.
  StatusOr<Communicator*> Ring(int32_t ring_id);

  // The var names of a collective op being prepared (VarNamer), or empty.
  std::vector<std::string> VarNames(std::string_view op_type, int32_t ring,
                                    const std::vector<int32_t>& dtypes,
                                    const std::vector<std::vector<int64_t>>& dims);

  // Makes every communicator's pending and later calls fail, and later InitRing calls too (any
  // thread). A ring still joining is released from its store waits within
  // AbortableStore::kSlice; a connection Gloo is making stays bounded by the timeout.
  void AbortAll();

  const CommunicatorOptions& options() const { return options_; }

 private:
  const ComponentRecord& component_;
  AbortableStore store_;  // over the job's store: AbortAll also releases a ring still joining
  CommunicatorOptions options_;
  // This process's recorder, when this runtime claimed it; declared before the rings that
  // write to it.
  std::unique_ptr<FlightRecorder> recorder_;
  std::mutex init_mu_;  // one InitRing at a time, so a ring is never joined twice
  std::mutex mu_;       // guards rings_ against AbortAll
  bool aborted_ = false;  // under mu_: AbortAll ran; no ring may be created after it
  std::map<int32_t, std::unique_ptr<Communicator>> rings_;
  std::optional<CollectiveSchedule> schedule_;  // checked once, by the first ring made
  std::mutex names_mu_;
  VarNamer names_;  // under names_mu_
  ComponentRecord kernels_record_;  // kind KERNELS, plugin "host", ctx = this
  std::map<std::string, KernelCandidate, std::less<>> kernels_;
};

}  // namespace fleet
