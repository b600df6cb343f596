// `fleet-host launch [OPTIONS] -- COMMAND...`: starts the local ranks of a job (see
// launch/launcher.h for the process model). This file only turns the command line into
// LaunchOptions.
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "cli/cli.h"
#include "launch/launcher.h"
#include "roles/role.h"
#include "support/text.h"

namespace fleet {
namespace {

constexpr const char* kLaunchUsage = R"(Usage: fleet-host launch --nproc N [OPTIONS] -- COMMAND...
       fleet-host launch --servers S --workers W [OPTIONS] -- COMMAND...

Starts N ranks of one job on this machine, each with the Fleet role variables set
(PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, TRAINING_ROLE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...).
COMMAND is a program when it contains '/', else a fleet-host command line such as
`run mlp.fleet` (run with this fleet-host and its global options).

With --servers and --workers it starts a parameter-server job instead: S servers
(TRAINING_ROLE=PSERVER, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_PSERVER_ID, POD_IP, PADDLE_PORT)
and W workers (TRAINING_ROLE=TRAINER, PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, ...), all running
COMMAND, logging to DIR/JOB/serverlog.I and DIR/JOB/workerlog.I.

Options:
  --nproc N          ranks on this node (>= 1)
  --servers S        parameter-server job: S servers on 127.0.0.1 at free ports, or the
                     servers' endpoints as HOST:PORT,HOST:PORT,... (all started here)
  --workers W        parameter-server job: W workers (trainers)
  --server-exit-s T  seconds the servers get to exit by themselves once every worker
                     finished, before they are stopped and the job fails, and that
                     workers get to finish after a server exited (default: 10)
  --nnodes M         nodes in the job (default 1); M > 1 needs --master and --node-rank
  --node-rank K      this node's index, 0..M-1 (default 0); global rank = K*N + local rank
  --master HOST:PORT the rendezvous store: node 0 serves it there, the others connect to it
                     (default: node 0 serves it on 127.0.0.1 at a free port)
  --log-dir DIR      where logs go (default: log); each rank writes DIR/JOB/trainer.RANK.log
  --job-id JOB       the job's name (default: fleet)
  --grace-s S        seconds the ranks get to stop after SIGTERM before SIGKILL (default: 3)
  --max-restarts K   after a failure, start the whole job again, up to K times (default 0;
                     one node only). FLEET_RESTART_COUNT tells the processes which start
                     they are; with `run --resume` they continue from the newest checkpoint.
                     Start k > 0 logs into DIR/JOB/restart.k/
  -h, --help         show this help

Job secret (collective jobs): the rendezvous store admits only processes that hold the job's
secret, which the launcher hands its ranks in FLEET_JOB_SECRET. It is taken from the launcher's
environment: FLEET_JOB_SECRET, else the file FLEET_JOB_SECRET_FILE names (a regular file of
16 bytes to 4 KiB, private to its owner: chmod 600). On one node, without either, the launcher
makes a fresh one per job. On several nodes nothing is made: give every node's launcher the same
secret (FLEET_JOB_SECRET_FILE pointing at a copy of one file); without one the store admits
anyone who reaches its port. The launcher does not read the ranks' fleet.toml: [comm]
secret_file serves ranks started without a launcher; a launched rank uses the launcher's secret.

When a rank fails the others are stopped and a summary (also DIR/JOB/failure.json) names it;
the exit code is the failed rank's (128+signal when a signal ended it). Ctrl-C stops every
rank; a second Ctrl-C kills them. In a parameter-server job a server that exits while workers
still run, or does not exit after they all finished, fails the job too (exit code 1).
)";

std::optional<int> ParseIntArg(const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::optional<double> ParseSeconds(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

int Usage(std::ostream& err, const std::string& message) {
  err << "fleet-host launch: " << message << "; see fleet-host launch --help\n";
  return kExitUsage;
}

}  // namespace

int LaunchCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                  std::ostream& out, std::ostream& err) {
  LaunchOptions o;
  bool nproc_set = false, saw_separator = false, servers_set = false, workers_set = false;
  std::set<std::string> seen;  // the flags given so far, by their canonical names
  size_t i = 0;
  for (; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag == "--") {
      saw_separator = true;
      ++i;
      break;
    }
    if (flag == "-h" || flag == "--help") {
      out << kLaunchUsage;
      return kExitOk;
    }
    std::optional<std::string> inline_value;
    if (size_t eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    // Paddle spells its flags with '_' (--log_dir, --job_id); accept both.
    for (char& ch : flag) {
      if (ch == '_') ch = '-';
    }
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i + 1 >= args.size() || args[i + 1] == "--") return std::nullopt;
      return args[++i];
    };
    auto int_flag = [&](int& target) -> std::optional<std::string> {
      std::optional<std::string> v = value();
      if (!v) return flag + " needs a value";
      std::optional<int> n = ParseIntArg(*v);
      if (!n) return flag + " '" + *v + "': expected an integer";
      target = *n;
      return std::nullopt;
    };
    // One value per flag: a flag given twice, under either of its names, is refused rather than
    // letting the last one win.
    static const std::map<std::string, std::string> kAliases = {
        {"--nproc-per-node", "--nproc"}, {"--server-num", "--servers"},
        {"--worker-num", "--workers"}, {"--rank", "--node-rank"}};
    static const std::set<std::string> kFlags = {
        "--nproc",     "--servers", "--workers", "--server-exit-s", "--nnodes",       "--node-rank",
        "--master",    "--log-dir", "--job-id",  "--grace-s",       "--max-restarts"};
    const auto alias = kAliases.find(flag);
    const std::string& canonical = alias != kAliases.end() ? alias->second : flag;
    if (kFlags.count(canonical) != 0 && !seen.insert(canonical).second) {
      return Usage(err, canonical + " is given twice (a launch flag takes one value)");
    }
    std::optional<std::string> problem;
    if (flag == "--nproc" || flag == "--nproc-per-node") {
      problem = int_flag(o.nproc);
      nproc_set = true;
    } else if (flag == "--servers" || flag == "--server-num") {
      // fleetrun's --servers takes the endpoint list, launch_ps's --server_num a count.
      std::optional<std::string> v = value();
      servers_set = true;
      if (!v) {
        problem = flag + " needs a count or HOST:PORT,...";
      } else if (std::optional<int> n = ParseIntArg(*v)) {
        o.servers = *n;
      } else if (flag == "--server-num") {
        problem = "--server-num '" + *v + "': expected an integer";
      } else if (v->find(':') == std::string::npos) {
        problem = "--servers '" + *v + "': expected a count or HOST:PORT,HOST:PORT,...";
      } else {
        o.server_endpoints = Split(*v, ',');
        for (std::string& e : o.server_endpoints) {
          size_t b = e.find_first_not_of(' '), end = e.find_last_not_of(' ');
          e = b == std::string::npos ? "" : e.substr(b, end - b + 1);
        }
      }
    } else if (flag == "--workers" || flag == "--worker-num") {
      problem = int_flag(o.workers);
      workers_set = true;
    } else if (flag == "--server-exit-s") {
      std::optional<std::string> v = value();
      std::optional<double> s = v ? ParseSeconds(*v) : std::nullopt;
      if (!v) problem = "--server-exit-s needs a number of seconds";
      else if (!s) problem = "--server-exit-s '" + *v + "': expected a number of seconds";
      else o.server_exit_s = *s;
    } else if (flag == "--nnodes") {
      problem = int_flag(o.nnodes);
    } else if (flag == "--node-rank" || flag == "--rank") {
      problem = int_flag(o.node_rank);
      o.node_rank_set = true;
    } else if (flag == "--master") {
      std::optional<std::string> v = value();
      if (!v) {
        problem = "--master needs HOST:PORT";
      } else if (Status s = CheckEndpoint(*v); !s.ok()) {
        problem = "--master: " + s.message();
      } else {
        size_t colon = v->rfind(':');
        std::string host = v->substr(0, colon);
        if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
        o.master_host = host;
        o.master_port = *ParseIntArg(v->substr(colon + 1));
      }
    } else if (flag == "--log-dir") {
      std::optional<std::string> v = value();
      if (!v) problem = "--log-dir needs a directory";
      else o.log_dir = *v;
    } else if (flag == "--job-id") {
      std::optional<std::string> v = value();
      if (!v) problem = "--job-id needs a value";
      else o.job_id = *v;
    } else if (flag == "--grace-s") {
      std::optional<std::string> v = value();
      std::optional<double> s = v ? ParseSeconds(*v) : std::nullopt;
      if (!v) problem = "--grace-s needs a number of seconds";
      else if (!s) problem = "--grace-s '" + *v + "': expected a number of seconds";
      else o.grace_s = *s;
    } else if (flag == "--max-restarts") {
      problem = int_flag(o.max_restarts);
    } else if (flag.starts_with("-")) {
      problem = "unknown option " + QuoteForMessage(args[i]);
    } else {
      problem = "missing '--' before the command to run ('" + args[i] +
                "' is not an option; write: fleet-host launch --nproc N -- COMMAND...)";
    }
    if (problem) return Usage(err, *problem);
  }
  if (!saw_separator) return Usage(err, "missing '--' before the command to run");
  o.ps = servers_set || workers_set;
  if (o.ps && nproc_set) {
    return Usage(err, "--nproc cannot be combined with --servers/--workers: a job is either "
                      "collective (--nproc N) or parameter-server (--servers S --workers W)");
  }
  if (o.ps && !servers_set) return Usage(err, "--workers needs --servers S as well");
  if (o.ps && !workers_set) return Usage(err, "--servers needs --workers W as well");
  if (!o.ps && !nproc_set) {
    return Usage(err, "--nproc N (or --servers S --workers W) is required");
  }
  std::vector<std::string> command(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (command.empty()) return Usage(err, "no command after '--'");

  if (command[0].find('/') != std::string::npos) {
    o.argv = command;
  } else {
    // A fleet-host command line: run it with this very binary and the same global options.
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return Fail(err, Internal("cannot find this fleet-host (/proc/self/exe): " +
                                      ec.message()));
    o.argv.push_back(self.string());
    if (!global.config_path.empty()) {
      o.argv.push_back("--config");
      o.argv.push_back(global.config_path);
    }
    for (const std::string& s : global.overrides) {
      o.argv.push_back("--set");
      o.argv.push_back(s);
    }
    if (!global.log_level.empty()) {
      o.argv.push_back("--log-level");
      o.argv.push_back(global.log_level);
    }
    o.argv.insert(o.argv.end(), command.begin(), command.end());
  }
  if (Status s = ValidateLaunchOptions(o); !s.ok()) return Usage(err, s.message());
  StatusOr<int> code = RunLaunch(o, out, err);
  if (!code.ok()) return Fail(err, code.status().WithContext("launch"));
  return *code;
}

}  // namespace fleet
