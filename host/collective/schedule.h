// The desync check: before the first collective of a job, every rank compares the collectives
// it is about to run with the others', so ranks that would run different sequences (another
// program, another number of steps) fail at once naming where they differ, instead of meeting
// inside the communicator with mismatched buffers (which ends in an abort inside Gloo).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collective/communicator.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet {

// What a rank will run, in order: one entry per collective op of `startup`, then of `main`
// (op type, ring and every input and output var with its declared dtype and shape), then one
// for the number of steps `main` runs. `ops` holds the same ops in structured form, for naming
// the vars of kernel calls (VarNamer).
struct ScheduledOp {
  std::string type;
  int32_t ring = 0;
  std::vector<std::string> vars;               // of slot X
  std::vector<int32_t> dtypes;                 // FLEET_DTYPE_* of each
  std::vector<std::vector<int64_t>> dims;      // declared; -1 matches any size
};
struct CollectiveSchedule {
  std::vector<std::string> entries;
  std::vector<ScheduledOp> ops;
};
CollectiveSchedule ScheduleOf(const ir::Program& startup, const ir::Program& main, int64_t steps);

// Names the vars of a collective kernel call, which the kernel ABI does not carry: an op being
// prepared is matched to the schedule's ops of its type and ring whose X vars have its dtypes
// and shapes; among several such ops (equal-sized gradients), the k-th prepared gets the k-th
// in program order, which is the order the executor prepares a program's ops in. Names are for
// reports (desync errors, the flight recorder); a call no op matches gets none.
class VarNamer {
 public:
  VarNamer() = default;
  explicit VarNamer(const CollectiveSchedule& schedule) : ops_(schedule.ops) {}

  // X's var names of the op prepared now, or empty. `dtypes`/`dims` are the X tensors'.
  std::vector<std::string> Next(std::string_view type, int32_t ring,
                                const std::vector<int32_t>& dtypes,
                                const std::vector<std::vector<int64_t>>& dims);

 private:
  std::vector<ScheduledOp> ops_;
  std::vector<size_t> prepared_;  // per op: how many prepared calls its group handed out
};

// Compares `mine` with every other rank's over `comm` (two small all-reduces, collectives that
// cannot themselves desync). OK when all agree; otherwise FAILED_PRECONDITION on every rank,
// naming the first entry where ranks differ, which ranks agree with rank 0 there and what this
// rank runs at that point.
Status CheckSchedulesAgree(Communicator& comm, const CollectiveSchedule& mine);

// "rank 0" or "ranks 0, 2 and 3", for the messages of this check and the run-time one
// (desync.h).
std::string RankList(const std::vector<int>& ranks);

}  // namespace fleet
