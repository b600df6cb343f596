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
};

struct ChildRecord {
  int local_rank = 0;
  int rank = 0;
  int pid = 0;
  std::string log_path;  // absolute
  int exit_code = 0;     // when it exited normally
  int signal = 0;        // when a signal ended it; 0 otherwise
  Fate fate = Fate::kRunning;
  std::string start_time;  // ISO 8601 UTC
  std::string end_time;
};

struct JobFacts {
  std::string job_id;
  std::string log_dir;  // absolute <log-dir>/<job-id>
  int nproc = 0;
  int nnodes = 1;
  int node_rank = 0;
  double grace_s = 0;
};

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
// "ranks 0, 1 and 3 stopped" style text for an interrupted job.
std::string StoppedRanksText(const std::vector<ChildRecord>& records);

// The bordered block printed once when the job failed.
void PrintFailureSummary(std::ostream& err, const JobFacts& job,
                         const std::vector<ChildRecord>& records, size_t first,
                         const std::vector<std::string>& tail);

// Writes <job.log_dir>/failure.json (through a temporary file and a rename, so a reader never
// sees half of it) with the same facts as the summary.
Status WriteFailureJson(const JobFacts& job, const std::vector<ChildRecord>& records,
                        size_t first, const std::vector<std::string>& tail, int exit_code);

}  // namespace fleet::launcher_internal
