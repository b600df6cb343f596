// The flight recorder: every rank of a collective job keeps its last collectives in a small file
// it maps into memory and updates in place, call by call. The pages belong to the file, not to
// the process, so the record survives the rank however it ends (SIGKILL included), and
// `fleet-host launch` reads each rank's file for the failure report: which collective each rank
// was in, which it last completed, and so which rank never entered the collective the others
// wait in.
//
// Protocol between the launcher and its ranks: the launcher removes any old file and hands each
// rank of a collective job the path <log_dir>/<job_id>/trainer.<rank>.flight in
// FLEET_FLIGHT_RECORDER; the rank's collective runtime creates the file (mode 0600) when it
// starts. Without the variable nothing is recorded.
//
// File format (native byte order; version 1): a 64-byte header, then `capacity` slots of 160
// bytes; the rank's i-th recorded call (from 0) lives in slot i % capacity, so the file holds the
// last `capacity` calls. A slot's identity and description end in a checksum written last:
// a slot the rank was killed while writing, or any damage, fails it and is skipped. State and
// end time are single aligned stores made after the checksum.
//
// The file is input to the reader: ReadFlightRecord checks every size and field and never
// trusts a count from the file beyond what the file holds.
//
// Threading: a FlightRecorder may be shared by the communicators of one process; its calls are
// serialised by an internal mutex. Reading needs no coordination with the writer.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace fleet {

inline constexpr const char* kFlightRecorderEnv = "FLEET_FLIGHT_RECORDER";

enum class CollectiveKind : int32_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kAllGather = 3,
  kReduceScatter = 4,
  kBarrier = 5,
};

enum class CallState : int32_t {
  kUnknown = 0,   // read back: a value the reader does not know
  kChecking = 1,  // comparing the ranks' collectives before running it (collective/desync.h)
  kInFlight = 2,  // handed to the communicator
  kDone = 3,
  kFailed = 4,
};

// One collective as a rank issues it.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  bool from_program = false;  // a c_* op of the program; false: the host's own (figures, checks)
  int32_t ring = 0;
  int32_t dtype = 0;    // FLEET_DTYPE_*
  int32_t arg = 0;      // FLEET_REDUCE_* of a reduction, root of a broadcast
  int32_t tensors = 1;  // tensors packed into the call
  int64_t numel = 0;    // elements this rank contributes
  int64_t bytes = 0;
  std::string_view var;  // the (first) var's name; "" when not known
};

// A call in a fixed-size form: what the recorder stores and ranks exchange when they compare
// collectives. `var` is cut to 63 bytes and NUL-padded, so equal calls pack to equal bytes.
// Plain data (copied as bytes); value-initialise it (`PackedCall p{}`).
struct PackedCall {
  uint64_t seq;  // the call's number on its communicator, from 1
  int64_t numel;
  int64_t bytes;
  int32_t ring;
  int32_t kind;
  int32_t flags;  // bit 0: from the program
  int32_t dtype;
  int32_t arg;
  int32_t tensors;
  char var[64];
};
static_assert(sizeof(PackedCall) == 112, "PackedCall is part of the file format");

PackedCall Pack(const CollectiveCall& call, uint64_t seq);
// The packed call as the CollectiveCall it came from (var points into `p`).
CollectiveCall Unpack(const PackedCall& p);
// 64-bit FNV-1a of the packed bytes.
uint64_t HashOf(const PackedCall& p);

// "c_allreduce_sum", "host all_reduce_sum", "c_broadcast", "barrier".
std::string CallName(const CollectiveCall& call);
// "c_allreduce_sum(fc_0.w_0@GRAD and 5 more: 20996 float32)", "host all_reduce_sum(2 float64)",
// "c_broadcast(fc_0.b_0: 2 float32, root 0)", "barrier". Bytes of `var` outside printable ASCII
// are shown as '?', so text read back from a file cannot drive a terminal.
std::string CallText(const CollectiveCall& call);
// "float32", or "dtype 42".
std::string DtypeText(int32_t dtype);
// "checking", "in flight", "done", "failed", "unknown".
std::string StateText(CallState state);

class FlightRecorder {
 public:
  static constexpr uint32_t kDefaultCapacity = 256;
  static constexpr uint32_t kMaxCapacity = 65536;

  // Creates (or truncates) `path`, mode 0600, sized and allocated for `capacity` slots, and
  // maps it. Refuses a path that is a symbolic link or not a regular file.
  static StatusOr<std::unique_ptr<FlightRecorder>> Create(const std::string& path, int32_t rank,
                                                          int32_t world_size,
                                                          uint32_t capacity = kDefaultCapacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Records the start of call `seq`; returns the record's index for Update. Allocates nothing.
  uint64_t Begin(const CollectiveCall& call, uint64_t seq, CallState state);
  // Sets the state of record `index` (the end time too when done or failed); a record already
  // overwritten by newer ones is left alone.
  void Update(uint64_t index, CallState state);

  const std::string& path() const { return path_; }

 private:
  FlightRecorder() = default;

  std::mutex mu_;
  std::string path_;
  int fd_ = -1;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint32_t capacity_ = 0;
  uint64_t next_ = 0;  // under mu_
};

// One record read back.
struct FlightEntry {
  uint64_t index = 0;  // the rank's count of recorded calls before this one
  PackedCall call{};
  CallState state = CallState::kUnknown;
  int64_t entered_ns = 0;  // wall clock (ns since the epoch) when the rank reached the call
  int64_t done_ns = 0;     // when it completed or failed; 0 while it had not
};

struct FlightRecord {
  int32_t rank = 0;
  int32_t world_size = 0;
  int32_t pid = 0;
  uint32_t capacity = 0;
  uint64_t written = 0;  // calls the rank recorded in all (the header's word)
  std::vector<FlightEntry> entries;  // oldest first
  size_t skipped = 0;  // slots that were torn or damaged
};

// Reads a recorder file defensively (see the file comment). NOT_FOUND when there is no file,
// DATA_LOSS when it is not a recorder file of this version.
StatusOr<FlightRecord> ReadFlightRecord(const std::string& path);

}  // namespace fleet
