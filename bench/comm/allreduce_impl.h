// The contenders of fleet_comm_bench: one float32 in-place SUM all-reduce implementation each,
// all joined through the same rendezvous store, so the timing loop in main.cc treats them alike.
//   abi:  the gloo plugin loaded by the host's PluginRegistry and called through its
//         FleetCommVTable (fleet::Communicator, the wrapper the collective ops use);
//   gloo: Gloo called directly with the algorithm, reduce function and options the plugin uses.
// Their difference is what the ABI (and the plugin's checks around the Gloo call) costs.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "rendezvous/store.h"
#include "support/status.h"

namespace fleet::bench {

struct GroupOptions {
  int rank = 0;
  int world_size = 1;
  std::string hostname = "127.0.0.1";  // address the Gloo pairs bind to
  std::chrono::milliseconds timeout{120000};
  std::filesystem::path plugin_dir;    // where libfleet_comm_gloo.so is (abi only)
};

class AllReduceImpl {
 public:
  virtual ~AllReduceImpl() = default;
  // Sums `count` floats at `data` across the group, in place.
  virtual Status AllReduce(float* data, size_t count) = 0;
  virtual Status Barrier() = 0;
};

// Each joins the group (blocks until every rank did) through `store`, which must outlive the
// result. Different contenders use different scopes of the store.
StatusOr<std::unique_ptr<AllReduceImpl>> CreateAbiAllReduce(Store* store,
                                                           const GroupOptions& options);
StatusOr<std::unique_ptr<AllReduceImpl>> CreateGlooAllReduce(Store* store,
                                                            const GroupOptions& options);

}  // namespace fleet::bench
