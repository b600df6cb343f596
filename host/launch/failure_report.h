// What `fleet-host launch` reports about its ranks when the job ends: the console summary and
// failure.json. Internal to the launcher (launcher.cc); kept apart so the process handling and
// the wording of the report can be read separately.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "support/status.h"

namespace fleet::launcher_internal {

enum class Fate {
  kRunning,       // not reaped yet
  kFinished,      // exited 0 on its own
  kFirstFailure,  // the job's failure: the first rank to exit non-zero or by a signal
  kStopped,       // collateral: the launcher stopped it (SIGTERM/SIGKILL), whatever it then did
  kFailedAfter,   // collateral: failed on its own after the first failure
  kDidNotExit,    // collateral: a server still running when the workers had all finished
};

struct ChildRecord {
  // "" for a rank of a collective job (named "rank N"); "server" or "worker" in a
  // parameter-server job (named "server N", "worker N", N the index within its kind).
  std::string role;
  int local_rank = 0;
  int rank = 0;  // the global rank, or the server/worker index
  int pid = 0;
  std::string log_path;  // absolute
  int exit_code = 0;     // when it exited normally
  int signal = 0;        // when a signal ended it; 0 otherwise
  Fate fate = Fate::kRunning;
  std::string start_time;  // ISO 8601 UTC
  std::string end_time;
  // Why this process counts as failed when its exit status alone does not say it (a server that
  // exited 0 while workers ran, or did not exit at all); "" otherwise.
  std::string reason;
  // A collective rank's flight recorder file (launch/flight_recorder.h); "" for other processes.
  std::string flight_recorder;
};

struct RankFlight;  // flight_report.h

struct JobFacts {
  std::string job_id;
  std::string log_dir;  // absolute <log-dir>/<job-id>
  int nproc = 0;        // local processes (servers + workers in a parameter-server job)
  int nnodes = 1;
  int node_rank = 0;
  double grace_s = 0;
  bool ps = false;      // a parameter-server job: the counts below apply
  int servers = 0;
  int workers = 0;
};

// "rank 3", "server 1" or "worker 0".
std::string ChildName(const ChildRecord& r);
// The processes of `records` named by kind in order of first appearance: "ranks 0, 1 and 3",
// "workers 0 and 1, server 1".
std::string NameList(const std::vector<ChildRecord>& records);

// "SIGKILL", "SIGTERM", ... or "signal 42".
std::string SignalName(int sig);
// "exited with code 1" or "was killed by SIGKILL (signal 9)".
std::string ExitText(const ChildRecord& r);
// The launcher's exit code for this rank's end: its exit code, or 128 + signal.
int ExitCodeOf(const ChildRecord& r);
// "host:port", IPv6 hosts in brackets.
std::string HostPort(const std::string& host, int port);
// Now, as "2026-01-02T03:04:05Z".
std::string WallClockText();
// "ranks 0, 1 and 3 stopped" style text for an interrupted job (kind-named for a PS job).
std::string StoppedRanksText(const std::vector<ChildRecord>& records);

// The bordered block printed once when the job failed; `exit_code` is the launcher's. With
// `flights` (the ranks' flight recorders, flight_report.h), a line per rank on its last
// collective and which ranks never entered the one others are in.
void PrintFailureSummary(std::ostream& err, const JobFacts& job,
                         const std::vector<ChildRecord>& records, size_t first,
                         const std::vector<std::string>& tail, int exit_code,
                         const std::vector<RankFlight>& flights);

// Writes <job.log_dir>/failure.json (through a temporary file and a rename, so a reader never
// sees half of it) with the same facts as the summary; the flights as "collectives".
Status WriteFailureJson(const JobFacts& job, const std::vector<ChildRecord>& records,
                        size_t first, const std::vector<std::string>& tail, int exit_code,
                        const std::vector<RankFlight>& flights);

}  // namespace fleet::launcher_internal
