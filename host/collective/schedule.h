// The desync check: before the first collective of a job, every rank compares the collectives
// it is about to run with the others', so ranks that would run different sequences (another
// program, another number of steps) fail at once naming where they differ, instead of meeting
// inside the communicator with mismatched buffers (which ends in an abort inside Gloo).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet {

// What a rank will run, in order: one entry per collective op of `startup`, then of `main`
// (op type, ring and every input and output var with its declared dtype and shape), then one
// for the number of steps `main` runs.
struct CollectiveSchedule {
  std::vector<std::string> entries;
};
CollectiveSchedule ScheduleOf(const ir::Program& startup, const ir::Program& main, int64_t steps);

// Compares `mine` with every other rank's over `comm` (two small all-reduces, collectives that
// cannot themselves desync). OK when all agree; otherwise FAILED_PRECONDITION on every rank,
// naming the first entry where ranks differ, which ranks agree with rank 0 there and what this
// rank runs at that point.
Status CheckSchedulesAgree(Communicator& comm, const CollectiveSchedule& mine);

}  // namespace fleet
