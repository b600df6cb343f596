// The flight recorders in the failure report: what each rank of a collective job was doing in
// its collectives when the job failed (launch/flight_recorder.h), for the console summary and
// failure.json. A launcher sees the recorders of its own node's ranks only, so on several nodes
// each node's report covers its ranks. Internal to the launcher.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "launch/failure_report.h"
#include "launch/flight_recorder.h"

namespace fleet::launcher_internal {

// Records kept per rank in failure.json (the file itself holds up to its capacity).
constexpr size_t kFlightTail = 32;

struct RankFlight {
  int rank = 0;
  std::string path;
  std::optional<FlightRecord> record;  // absent when there is no readable file
  std::string error;                   // why it is absent
};

// Reads the recorder of every record that has one (collective ranks under the launcher); a
// missing or damaged file becomes an error text, never a failure of the report. Empty when no
// rank left a file at all (the ranks run something without collectives).
std::vector<RankFlight> ReadFlights(const std::vector<ChildRecord>& records);

// One line per rank: its last collective and its state, and the last it completed.
std::vector<std::string> FlightLines(const std::vector<RankFlight>& flights);

// Per ring, the ranks that never entered the collective others are in: "rank 1 never entered
// collective #57 on ring 0, c_allreduce_sum(...), which rank 0 is in (rank 1 last entered #56,
// done)". Empty when every rank with a record reached the same call or it completed.
std::vector<std::string> FlightHints(const std::vector<RankFlight>& flights);

// failure.json's "collectives": {"hint": [...], "ranks": [{rank, recorder, last_enqueued,
// last_completed, tail, ...} or {rank, recorder, error}]}.
nlohmann::json FlightJson(const std::vector<RankFlight>& flights);

}  // namespace fleet::launcher_internal
