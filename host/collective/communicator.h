// The host's handle on one communicator (fleet_comm.h): a FleetComm made by a communicator
// component, with the calls the collective ops need turned into Status.
//
// Ownership: a Communicator owns its FleetComm (destroyed in the destructor) and the FleetStore
// view it was created with; the component and the base store must outlive it.
// Threading: one call at a time (the ABI's rule), except Abort, which any thread may call at any
// time, e.g. a signal watcher, to make the call in flight and every later one fail promptly.
//
// Placement (PlaceCommunicator, plugin/selection.h): a communicator names the devices whose memory
// it reduces. On one of those, tensors and the caller's stream go to it unchanged. With [comm]
// staging, a communicator of host memory (Gloo) also serves another device (CUDA): each call waits
// for the stream, copies its tensors into page-locked host buffers kept by the Communicator, runs
// there and copies the result back before returning. Host tensors handed to a communicator that
// reduces only device memory (AllReduceHost on NCCL) travel the other way, through a device
// buffer it keeps.
//
// Desync check and flight recorder (collective/desync.h, launch/flight_recorder.h): every call
// is numbered, fingerprinted and recorded; when the ranks' calls part, the call that would have
// met mismatched buffers fails instead with FAILED_PRECONDITION naming the first call where they
// differ, on every rank, and every later call fails with the same status. The ranks compare
// once when the communicator forms (the check modes must agree) and then at the check points of
// options.desync_check. A call's CallSite says whether a program op issued it (and which var)
// or the host.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "collective/desync.h"
#include "fleet/fleet_comm.h"
#include "launch/flight_recorder.h"
#include "plugin/device.h"
#include "plugin/registry.h"
#include "plugin/selection.h"
#include "plugin/store_abi.h"
#include "rendezvous/store.h"
#include "support/status.h"

namespace fleet {

struct CommunicatorOptions {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::chrono::milliseconds timeout{300000};
  std::string device = "cpu";  // device component the tensors live on
  int32_t device_ordinal = 0;
  // That device's component (must outlive the communicator); needed for staging, for host
  // tensors on a device-only communicator, and handed to the plugin (FleetCommConfig 1.2).
  // nullptr: the tensors are host memory and the communicator must reduce "cpu" memory.
  const ComponentRecord* device_component = nullptr;
  bool staging = false;  // [comm] staging
  // Backend options handed to create (FleetCommConfig.options), e.g. hostname for Gloo.
  std::vector<std::pair<std::string, std::string>> options;
  // Prefixed to every error, e.g. "ring 0".
  std::string label = "communicator";
  int32_t ring = 0;  // the ring it serves, for records and desync errors
  DesyncCheck desync_check = DesyncCheck::kOff;
  // Where calls are recorded (shared with other communicators of the process; must outlive
  // this one); nullptr: nowhere.
  FlightRecorder* recorder = nullptr;
};

// Who makes a call: a collective op of the program (the runtime's kernels) or the host itself
// (the default). `var` must stay valid for the call.
struct CallSite {
  bool from_program = false;
  std::string_view var;  // the op's (first) var, "" when unknown
  int32_t tensors = 1;   // vars packed into the call
  // The op already ran since the ranks last compared their calls (agreements() then equalled
  // what it is now): a new run of its program began, which is a check point.
  bool repeat = false;
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

  // Tensors live on options.device; `stream` is that device's stream the call is ordered on
  // (fleet_comm.h), NULL for "return when the result is in place".
  Status AllReduce(const FleetTensor& in, const FleetTensor& out, int32_t op,
                   FleetStream* stream = nullptr, const CallSite& site = {});
  // In place over `count` elements of `dtype` (FLEET_DTYPE_*) in host memory: the figures and
  // checks the host itself exchanges (job metrics, replica checks, benchmarks).
  Status AllReduceHost(void* data, int32_t dtype, int64_t count, int32_t op);
  Status Broadcast(const FleetTensor& buf, int32_t root, FleetStream* stream = nullptr,
                   const CallSite& site = {});
  // Collectives below (and AllReduce, Broadcast) that fail for another reason than Abort name
  // the peers that did not answer a survey after the failure (see SurveyPeers).
  Status AllGather(const FleetTensor& in, const FleetTensor& out, FleetStream* stream = nullptr,
                   const CallSite& site = {});
  Status ReduceScatter(const FleetTensor& in, const FleetTensor& out, int32_t op,
                       FleetStream* stream = nullptr, const CallSite& site = {});
  Status Barrier();
  // How many times the ranks found their calls in step so far (see CallSite::repeat).
  uint64_t agreements() const { return ledger_.agreements(); }
  // Any thread; never blocks for long. Later calls fail with ABORTED.
  void Abort();
  bool aborted() const { return aborted_.load(); }
  CommPlacement placement() const { return placement_; }

 private:
  Communicator(const ComponentRecord& component, Store* store, const std::string& scope,
               CommunicatorOptions options);
  Status Check(FleetStatus* status, const char* op) const;
  // The all-reduce of host memory under AllReduceHost, unrecorded.
  Status HostAllReduce(void* data, int32_t dtype, int64_t count, int32_t op);
  // Every rank's `count` int64 words of `row` into `rows` (world * count, rank by rank), in host
  // memory and unrecorded: the exchanges of the desync check.
  Status HostAllGather(const int64_t* row, int64_t* rows, int64_t count);
  // Numbers, fingerprints and records `call`, compares the ranks' calls first at a check point,
  // then runs `run()`; a desync found before is returned by every later call.
  template <typename Run>
  Status Tracked(const CollectiveCall& call, bool repeat, Run&& run);
  // The exchanges of the desync check (collective/desync.h); FAILED_PRECONDITION when the
  // ranks' calls differ.
  Status CompareCalls();
  // After a collective failed: which peers are gone. Every rank of a group of two or more beats
  // a counter in the store twice a second from its own thread; the survey reads the counters,
  // waits a few beats and names the ranks whose counter stood still, so a rank that was killed
  // is named by every survivor, whether or not the survivors noticed the failure themselves.
  std::string SurveyPeers() const;
  void Heartbeat();

  // Buffers of the staging paths, grown on demand and kept, so a step allocates nothing once
  // the largest collective has run. `host_` is page-locked where the device offers it.
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  StatusOr<void*> HostBuffer(size_t index, size_t bytes);
  StatusOr<void*> DeviceBuffer(size_t bytes);
  // A host copy of device tensor `t` in staging buffer `index` (its data copied when `copy`).
  StatusOr<FleetTensor> StageOut(const FleetTensor& t, size_t index, bool copy);
  Status StageBack(const FleetTensor& host, const FleetTensor& device_tensor);
  // Runs `call(in, out, stream)` on the communicator's terms: unchanged when direct, through
  // host buffers when staged. `out` may be null (reduce on a non-root rank).
  template <typename Call>
  Status Staged(const FleetTensor* in, const FleetTensor* out, FleetStream* stream, Call&& call);

  std::optional<Device> device_;  // from options.device_component
  CommPlacement placement_ = CommPlacement::kDirect;
  bool reduces_host_ = false;  // "cpu" is among the communicator's devices
  Buffer host_[2];
  Buffer device_buffer_;

  const ComponentRecord& component_;
  const FleetCommVTable* vtable_;
  AbiStore store_;
  CommunicatorOptions options_;
  FleetComm* comm_ = nullptr;
  CallLedger ledger_;
  std::vector<int64_t> fingerprints_;  // the check's gathered rows, sized once
  Status desync_ = OkStatus();  // the desync found, returned by every later call
  std::atomic<bool> aborted_{false};
  std::mutex beat_mu_;
  std::condition_variable beat_cv_;
  bool stop_beating_ = false;
  std::thread beat_thread_;
};

}  // namespace fleet
