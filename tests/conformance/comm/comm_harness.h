// Harness of the communicator conformance suite: drives a communicator plugin through the ABI
// (FleetCommVTable) with the ranks of a group as threads of this process.
//
// The communicator under test is named by FLEET_CONFORMANCE_COMM (default "gloo", or the
// build's FLEET_CONFORMANCE_DEFAULT_COMM); its plugin is found in FLEET_PLUGIN_PATH, then in the
// build's plugin directory (libfleet_comm_NAME.so first, else every plugin is loaded and
// searched). Its create options are what the host always passes (FLEET_COMM_HOST_OPTIONS:
// hostname=127.0.0.1, as for a local job) plus FLEET_CONFORMANCE_COMM_OPTIONS
// ("key=value;key=value", replacing a host option of the same key). A world size the
// communicator refuses through supports_world_size is skipped, as are worlds the device cannot
// hold.
//
// The tensors live on the device named by FLEET_CONFORMANCE_DEVICE. Without it: the build's
// FLEET_CONFORMANCE_DEFAULT_DEVICE when the communicator lists it, else "cpu" when the
// communicator lists cpu (or lists nothing), else the first device it lists. "cpu" means plain
// host memory, as the suite always used (the cpu device's pointers are host pointers). Any other
// device is loaded from its plugin (libfleet_NAME.so) into the same registry as the
// communicator; rank r's tensors are allocated on its ordinal r % count through the device's
// vtable (Buf copies values in and out), and create gets that ordinal and the device's
// vtable/ctx (FleetCommConfig.device_table/device_ctx). A test whose world has more ranks than
// the device has ordinals skips (NCCL needs one GPU per rank), so with no GPU every test skips.
//
// Every World gets its own scope in one shared in-process store, so tests never see each
// other's rendezvous keys.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fleet/fleet_comm.h"
#include "support/status.h"

namespace fleet::conformance::comm {

struct CommUnderTest {
  std::string name;
  const FleetCommVTable* vt = nullptr;
  void* ctx = nullptr;
};

// The communicator under test, or nullptr with *error set (the plugin could not be found).
const CommUnderTest* Comm(std::string* error);

// Whether the device under test can give each of `size` ranks an ordinal of its own; if not,
// *why says so. Always true for host memory.
bool WorldFits(int size, std::string* why);
// Whether the tensors live in plain host memory (device "cpu").
bool UsesHostMemory();

// Skips the current test when a world of `size` ranks does not fit on the device under test.
#define FLEET_COMM_SKIP_UNLESS_WORLD_FITS(size)                          \
  do {                                                                   \
    std::string fleet_why_;                                              \
    if (!::fleet::conformance::comm::WorldFits((size), &fleet_why_)) {   \
      GTEST_SKIP() << fleet_why_;                                        \
    }                                                                    \
  } while (0)

// Converts a status the plugin returned into a Status (freeing it).
Status Take(FleetStatus* status);

// Milliseconds since `start`.
int64_t ElapsedMs(std::chrono::steady_clock::time_point start);

// One rank's view inside World::Run.
struct Rank {
  int rank = 0;
  int size = 1;
  FleetComm* comm = nullptr;
  const FleetCommVTable* vt = nullptr;
  void* ctx = nullptr;

  Status AllReduce(const FleetTensor* in, const FleetTensor* out, int32_t op) const;
  Status Broadcast(const FleetTensor* buf, int32_t root) const;
  Status AllGather(const FleetTensor* in, const FleetTensor* out) const;
  Status ReduceScatter(const FleetTensor* in, const FleetTensor* out, int32_t op) const;
  Status Reduce(const FleetTensor* in, const FleetTensor* out, int32_t op, int32_t root) const;
  Status AllToAll(const FleetTensor* in, const FleetTensor* out) const;
  Status Send(const FleetTensor* buf, int32_t peer) const;
  Status Recv(const FleetTensor* buf, int32_t peer) const;
  Status Barrier() const;

 private:
  Status Reported(const char* collective, Status s) const;
};

// A group of `size` ranks, each a thread with its own communicator.
class World {
 public:
  explicit World(int size, int64_t timeout_ms = 20000);
  ~World();

  int size() const { return size_; }
  int64_t timeout_ms() const { return timeout_ms_; }

  // Creates one communicator per rank (concurrently, as ranks would), runs body(rank) on each
  // rank's thread, destroys the communicators and joins. A failed create is a test failure;
  // a world that does not fit on the device skips the test.
  void Run(const std::function<void(Rank&)>& body);

  // Calls create on the given ranks only (the others never join) and returns each status;
  // successful communicators are destroyed before returning.
  std::vector<Status> CreateOnly(const std::vector<int>& ranks);

  // create with extra options (on top of the suite's), returning the status of rank 0 of a
  // world of one.
  Status CreateWithOptions(const std::vector<std::pair<std::string, std::string>>& extra);

 private:
  Status Create(int rank, FleetComm** out,
                const std::vector<std::pair<std::string, std::string>>& extra = {});

  struct State;
  std::unique_ptr<State> state_;
  int size_;
  int64_t timeout_ms_;
};

// Tensors of any dtype the suite uses, with values read and written as doubles. On a device
// other than host memory, a Buf keeps a host copy: t() and Slice() copy it to the device
// (when it changed) and hand out the device's memory, which the call may write; the next Get or
// Set copies the device's contents back first (Fill overwrites them all). So a test reads and
// writes values as if the tensor were on the host. Made on a rank's thread, it lives on that
// rank's ordinal.
class Buf {
 public:
  Buf(int32_t dtype, int64_t numel);
  ~Buf();
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;

  const FleetTensor* t();  // descriptor of the whole buffer
  // A descriptor of elements [offset, offset + numel) (for in-place variants).
  const FleetTensor* Slice(int64_t offset, int64_t numel);
  int64_t numel() const { return numel_; }
  int32_t dtype() const { return dtype_; }
  double Get(int64_t i) const;
  void Set(int64_t i, double v);
  void Fill(const std::function<double(int64_t)>& f);

 private:
  void Upload();
  void Download() const;

  int32_t dtype_;
  int64_t numel_;
  size_t element_;
  mutable std::vector<unsigned char> bytes_;  // the host copy (the tensor itself on the host)
  void* device_ = nullptr;                    // device memory, or NULL for host memory
  int32_t ordinal_ = 0;
  bool host_newer_ = true;            // bytes_ changed since the last copy to the device
  mutable bool device_newer_ = false;  // the device copy may have changed since the last read
  int64_t dims_[1];
  int64_t slice_dims_[1];
  FleetTensor desc_{};
  FleetTensor slice_{};
};

std::string DtypeName(int32_t dtype);
bool IsInteger(int32_t dtype);
// The comparison tolerance of a dtype (relative and absolute alike).
double Tolerance(int32_t dtype);

// Dtypes the communicator reduces: float32, float64, int32, int64, plus float16/bfloat16 when a
// one-rank all_reduce accepts them.
const std::vector<int32_t>& ReducibleDtypes();

// Expects got ≈ want within the dtype's tolerance, reporting the context on failure. Returns
// false on a mismatch so loops can stop after the first one.
bool Near(double got, double want, int32_t dtype, const std::string& context);

}  // namespace fleet::conformance::comm
