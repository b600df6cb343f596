#include "launch/failure_report.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "launch/flight_report.h"
#include "support/text.h"

namespace fleet::launcher_internal {
namespace {

constexpr const char* kBorder =
    "================================================================================";

const char* Reason(Fate fate) {
  switch (fate) {
    case Fate::kStopped:
      return "stopped by the launcher";
    case Fate::kFailedAfter:
      return "failed after the first failure";
    case Fate::kDidNotExit:
      return "did not exit after every worker finished, stopped by the launcher";
    case Fate::kFinished:
      return "finished";
    case Fate::kFirstFailure:
      return "first failure";
    case Fate::kRunning:
      break;
  }
  return "still running";
}

bool Collateral(Fate fate) {
  return fate == Fate::kStopped || fate == Fate::kFailedAfter || fate == Fate::kDidNotExit;
}

nlohmann::json RankJson(const ChildRecord& r) {
  nlohmann::json j = nlohmann::json::object();
  if (!r.role.empty()) {
    j["role"] = r.role;
    j["index"] = r.rank;
    j["name"] = ChildName(r);
  }
  j["rank"] = r.rank;
  j["local_rank"] = r.local_rank;
  j["pid"] = r.pid;
  if (r.signal != 0) {
    j["exit_code"] = nullptr;
    j["signal"] = SignalName(r.signal);
    j["signal_number"] = r.signal;
  } else {
    j["exit_code"] = r.exit_code;
    j["signal"] = nullptr;
    j["signal_number"] = nullptr;
  }
  j["log"] = r.log_path;
  j["start_time"] = r.start_time;
  j["end_time"] = r.end_time;
  return j;
}

}  // namespace

std::string ChildName(const ChildRecord& r) {
  return (r.role.empty() ? std::string("rank") : r.role) + " " + std::to_string(r.rank);
}

std::string NameList(const std::vector<ChildRecord>& records) {
  std::vector<std::string> kinds;
  std::vector<std::vector<std::string>> numbers;
  for (const ChildRecord& r : records) {
    std::string kind = r.role.empty() ? "rank" : r.role;
    size_t k = 0;
    while (k < kinds.size() && kinds[k] != kind) ++k;
    if (k == kinds.size()) {
      kinds.push_back(kind);
      numbers.emplace_back();
    }
    numbers[k].push_back(std::to_string(r.rank));
  }
  std::string text;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (!text.empty()) text += ", ";
    text += kinds[k] + (numbers[k].size() == 1 ? " " : "s ") + JoinWords(numbers[k]);
  }
  return text;
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    default: return "signal " + std::to_string(sig);
  }
}

std::string ExitText(const ChildRecord& r) {
  if (r.signal != 0) {
    return "was killed by " + SignalName(r.signal) + " (signal " + std::to_string(r.signal) + ")";
  }
  return "exited with code " + std::to_string(r.exit_code);
}

int ExitCodeOf(const ChildRecord& r) { return r.signal != 0 ? 128 + r.signal : r.exit_code; }

std::string HostPort(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string WallClockText() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string StoppedRanksText(const std::vector<ChildRecord>& records) {
  std::vector<ChildRecord> stopped, finished;
  for (const ChildRecord& r : records) {
    (r.fate == Fate::kFinished ? finished : stopped).push_back(r);
  }
  std::string text;
  if (!stopped.empty()) text = NameList(stopped) + " stopped";
  if (!finished.empty()) {
    if (!text.empty()) text += "; ";
    text += NameList(finished) + " had finished";
  }
  return text;
}

void PrintFailureSummary(std::ostream& err, const JobFacts& job,
                         const std::vector<ChildRecord>& records, size_t first,
                         const std::vector<std::string>& tail, int exit_code,
                         const std::vector<RankFlight>& flights) {
  const ChildRecord& f = records[first];
  const std::string name = ChildName(f);
  err << kBorder << "\n";
  err << "fleet-host launch: job '" << job.job_id << "' FAILED (exit code " << exit_code << ")\n";
  err << "first failure: " << name << " (";
  if (f.role.empty()) err << "local rank " << f.local_rank << ", ";
  err << "pid " << f.pid << ") "
      << (f.reason.empty() ? ExitText(f) : f.reason + " (" + ExitText(f) + ")") << " at "
      << f.end_time << "\n";
  err << "its log: " << f.log_path << "\n";
  err << "last " << tail.size() << " line" << (tail.size() == 1 ? "" : "s") << " of " << name
      << "'s log:\n";
  for (const std::string& line : tail) err << "  | " << line << "\n";
  bool any = false;
  for (const ChildRecord& r : records) {
    if (!Collateral(r.fate)) continue;
    if (!any) err << "collateral (not the cause; stopped or failed after " << name << "):\n";
    any = true;
    err << "  " << ChildName(r) << ": " << Reason(r.fate) << ", " << ExitText(r) << "; log "
        << r.log_path << "\n";
  }
  std::vector<ChildRecord> finished;
  for (const ChildRecord& r : records) {
    if (r.fate == Fate::kFinished) finished.push_back(r);
  }
  if (!finished.empty()) err << "finished before the failure: " << NameList(finished) << "\n";
  if (!flights.empty()) {
    err << "collectives (each rank's flight recorder):\n";
    for (const std::string& line : FlightLines(flights)) err << "  " << line << "\n";
    for (const std::string& hint : FlightHints(flights)) err << "  => " << hint << "\n";
  }
  err << "all logs: " << job.log_dir << "\n";
  err << "details: " << (std::filesystem::path(job.log_dir) / "failure.json").string() << "\n";
  err << kBorder << "\n";
}

Status WriteFailureJson(const JobFacts& job, const std::vector<ChildRecord>& records,
                        size_t first, const std::vector<std::string>& tail, int exit_code,
                        const std::vector<RankFlight>& flights) {
  nlohmann::json j = nlohmann::json::object();
  j["job_id"] = job.job_id;
  j["log_dir"] = job.log_dir;
  j["nproc"] = job.nproc;
  j["nnodes"] = job.nnodes;
  j["node_rank"] = job.node_rank;
  if (job.ps) {
    j["mode"] = "pserver";
    j["servers"] = job.servers;
    j["workers"] = job.workers;
    j["world_size"] = job.workers;  // the number of trainers, as Role::world_size
  } else {
    j["world_size"] = job.nproc * job.nnodes;
  }
  j["grace_s"] = job.grace_s;
  j["exit_code"] = exit_code;
  j["time"] = WallClockText();
  nlohmann::json f = RankJson(records[first]);
  if (!records[first].reason.empty()) f["reason"] = records[first].reason;
  f["tail"] = tail;
  j["first_failure"] = f;
  nlohmann::json collateral = nlohmann::json::array();
  nlohmann::json finished = nlohmann::json::array();
  for (const ChildRecord& r : records) {
    if (Collateral(r.fate)) {
      nlohmann::json c = RankJson(r);
      c["reason"] = Reason(r.fate);
      collateral.push_back(c);
    } else if (r.fate == Fate::kFinished) {
      // Collective jobs list ranks; a PS job's processes need their kind to be told apart.
      if (r.role.empty()) finished.push_back(r.rank);
      else finished.push_back(ChildName(r));
    }
  }
  j["collateral"] = collateral;
  j["finished"] = finished;
  if (!flights.empty()) j["collectives"] = FlightJson(flights);
  // A rank's log may hold any bytes (or a line cut inside a character): replace what is not
  // UTF-8 rather than fail to report the failure.
  std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";

  namespace fs = std::filesystem;
  fs::path final_path = fs::path(job.log_dir) / "failure.json";
  fs::path tmp = fs::path(job.log_dir) / ("failure.json.tmp." + std::to_string(::getpid()));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Internal("cannot write " + tmp.string() + ": " + strerror(errno));
  }
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Internal("cannot write " + tmp.string() + ": " + strerror(e));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Internal("cannot rename " + tmp.string() + " to " + final_path.string() + ": " +
                    strerror(e));
  }
  return OkStatus();
}

}  // namespace fleet::launcher_internal
