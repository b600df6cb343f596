// The host's handle on one communicator (fleet_comm.h): a FleetComm made by a communicator
// component, with the calls the collective ops need turned into Status.
//
// Ownership: a Communicator owns its FleetComm (destroyed in the destructor) and the FleetStore
// view it was created with; the component and the base store must outlive it.
// Threading: one call at a time (the ABI's rule), except Abort, which any thread may call at any
// time, e.g. a signal watcher, to make the call in flight and every later one fail promptly.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/store.h"
#include "dist/store_abi.h"
#include "fleet/fleet_comm.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

struct CommunicatorOptions {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::chrono::milliseconds timeout{300000};
  std::string device = "cpu";  // device component the tensors live on
  int32_t device_ordinal = 0;
  // Backend options handed to create (FleetCommConfig.options), e.g. hostname for Gloo.
  std::vector<std::pair<std::string, std::string>> options;
  // Prefixed to every error, e.g. "ring 0".
  std::string label = "communicator";
};

class Communicator {
 public:
  // Joins the group: blocks until every rank joined or options.timeout passed. `store` is the
  // job's store; the communicator gets a view of it scoped under `scope`, which every rank of
  // the group must name alike and no other group may use.
  static StatusOr<std::unique_ptr<Communicator>> Create(const ComponentRecord& component,
                                                        Store* store, const std::string& scope,
                                                        const CommunicatorOptions& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int32_t rank() const { return options_.rank; }
  int32_t world_size() const { return options_.world_size; }
  const std::string& backend() const { return component_.name; }

  Status AllReduce(const FleetTensor& in, const FleetTensor& out, int32_t op);
  // In place over `count` elements of `dtype` (FLEET_DTYPE_*) in host memory: the figures and
  // checks the host itself exchanges (job metrics, replica checks, benchmarks).
  Status AllReduceHost(void* data, int32_t dtype, int64_t count, int32_t op);
  Status Broadcast(const FleetTensor& buf, int32_t root);
  // Collectives below (and AllReduce, Broadcast) that fail for another reason than Abort name
  // the peers that did not answer a survey after the failure (see SurveyPeers).
  Status AllGather(const FleetTensor& in, const FleetTensor& out);
  Status ReduceScatter(const FleetTensor& in, const FleetTensor& out, int32_t op);
  Status Barrier();
  // Any thread; never blocks for long. Later calls fail with ABORTED.
  void Abort();
  bool aborted() const { return aborted_.load(); }

 private:
  Communicator(const ComponentRecord& component, Store* store, const std::string& scope,
               CommunicatorOptions options);
  Status Check(FleetStatus* status, const char* op) const;
  // After a collective failed: which peers are gone. Every rank of a group of two or more beats
  // a counter in the store twice a second from its own thread; the survey reads the counters,
  // waits a few beats and names the ranks whose counter stood still, so a rank that was killed
  // is named by every survivor, whether or not the survivors noticed the failure themselves.
  std::string SurveyPeers() const;
  void Heartbeat();

  const ComponentRecord& component_;
  const FleetCommVTable* vtable_;
  AbiStore store_;
  CommunicatorOptions options_;
  FleetComm* comm_ = nullptr;
  std::atomic<bool> aborted_{false};
  std::mutex beat_mu_;
  std::condition_variable beat_cv_;
  bool stop_beating_ = false;
  std::thread beat_thread_;
};

}  // namespace fleet
