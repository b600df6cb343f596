// Harness of the communicator conformance suite: drives a communicator plugin through the ABI
// (FleetCommVTable) with the ranks of a group as threads of this process.
//
// The communicator under test is named by FLEET_CONFORMANCE_COMM (default "gloo"); its plugin is
// found in FLEET_PLUGIN_PATH, then in the build's plugin directory (libfleet_comm_NAME.so first,
// else every plugin is loaded and searched). Its create options come from
// FLEET_CONFORMANCE_COMM_OPTIONS ("key=value;key=value"); for gloo the default is
// "hostname=127.0.0.1" so the suite never depends on how this machine's name resolves.
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
};

// A group of `size` ranks, each a thread with its own communicator.
class World {
 public:
  explicit World(int size, int64_t timeout_ms = 20000);
  ~World();

  int size() const { return size_; }
  int64_t timeout_ms() const { return timeout_ms_; }

  // Creates one communicator per rank (concurrently, as ranks would), runs body(rank) on each
  // rank's thread, destroys the communicators and joins. A failed create is a test failure.
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

// Host tensors of any dtype the suite uses, with values read and written as doubles.
class Buf {
 public:
  Buf(int32_t dtype, int64_t numel);
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
  int32_t dtype_;
  int64_t numel_;
  size_t element_;
  std::vector<unsigned char> bytes_;
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
