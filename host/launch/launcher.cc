#include "launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launch/flight_report.h"
#include "launch/launch_internal.h"
#include "support/durable_file.h"
#include "support/secret.h"

namespace fleet {
namespace launcher_internal {

namespace fs = std::filesystem;

Status Launch::Prepare() {
  FLEET_RETURN_IF_ERROR(ValidateLaunchOptions(o_));
  signals_.emplace();  // before the server starts, so its thread inherits the blocked mask
  if (o_.ps) {
    // Servers and workers talk over the servers' endpoints. The job secret (from the
    // environment, or made here when every server is local) gives the transport its token.
    StatusOr<std::string> given = JobSecretFromEnvironment();
    if (!given.ok()) return given.status().WithContext("the job secret");
    job_secret_ = *given;
    if (!o_.server_endpoints.empty()) {
      server_endpoints_ = o_.server_endpoints;
    } else {
      FLEET_ASSIGN_OR_RETURN(server_endpoints_, PickLocalEndpoints(o_.servers));
      if (job_secret_.empty()) {
        auto secret = NewJobSecret();
        if (!secret.ok()) return secret.status().WithContext("making the job secret");
        job_secret_ = *secret;
      }
    }
    // The workers, all on this machine, also meet at a store served here: they form a ring of
    // their own for the job's figures (the global AUC of every worker's data, job/train.h).
    if (o_.workers > 1) {
      master_addr_ = "127.0.0.1";
      auto server = TcpStoreServer::Start(master_addr_, 0, {}, job_secret_);
      if (!server.ok()) {
        return server.status().WithContext("cannot serve the workers' rendezvous store");
      }
      server_ = std::move(*server);
      master_port_ = server_->port();
    }
  } else if (o_.master_host.empty()) {
    master_addr_ = "127.0.0.1";
    // One machine: this launcher starts every rank, so it can make the job's secret and hand
    // it to them (kept if the environment already gives one, itself or in a file).
    StatusOr<std::string> given = JobSecretFromEnvironment();
    if (!given.ok()) return given.status().WithContext("the job secret");
    job_secret_ = *given;
    if (job_secret_.empty()) {
      auto secret = NewJobSecret();
      if (!secret.ok()) return secret.status().WithContext("making the job secret");
      job_secret_ = *secret;
    }
    auto server = TcpStoreServer::Start(master_addr_, 0, {}, job_secret_);
    if (!server.ok()) {
      return server.status().WithContext("cannot serve the job's rendezvous store");
    }
    server_ = std::move(*server);
    master_port_ = server_->port();
  } else {
    master_addr_ = o_.master_host;
    master_port_ = o_.master_port;
    // Several machines: every node needs the same secret, so it comes from the environment
    // (FLEET_JOB_SECRET, or a file FLEET_JOB_SECRET_FILE names, on each node) or is absent.
    // Every node reads it, so a bad file stops the launch here rather than in each rank, and
    // hands it to its ranks, which then agree with the store whatever their fleet.toml says.
    StatusOr<std::string> given = JobSecretFromEnvironment();
    if (!given.ok()) return given.status().WithContext("the job secret");
    job_secret_ = *given;
    if (o_.node_rank == 0) {
      auto server = TcpStoreServer::Start(master_addr_, master_port_, {}, job_secret_);
      if (!server.ok()) {
        std::string where = HostPort(master_addr_, master_port_);
        std::string message = "cannot serve the job's rendezvous store on " + where +
                              " (--master): " + server.status().message();
        if (message.find("in use") != std::string::npos) {
          message += "; another process holds port " + std::to_string(master_port_) +
                     ": stop it or choose another port, e.g. --master " +
                     HostPort(master_addr_, master_port_ == 65535
                                                                   ? master_port_ - 1
                                                                   : master_port_ + 1);
        }
        return Status(server.status().code(), message);
      }
      server_ = std::move(*server);
    }
  }
  // The log directory only once the store is served: a launch refused for its port leaves
  // nothing behind.
  std::error_code ec;
  fs::path base = fs::absolute(o_.log_dir, ec);
  if (ec) return InvalidArgument("--log-dir '" + o_.log_dir + "': " + ec.message());
  job_dir_ = (base / o_.job_id).lexically_normal();
  // A restarted job keeps the logs of the start that failed.
  if (o_.restart > 0) job_dir_ /= "restart." + std::to_string(o_.restart);
  if (Status made = MakePrivateDirectories(job_dir_); !made.ok()) {
    return FailedPrecondition("cannot create the log directory: " + made.message());
  }
  // A failure.json from an earlier run of the same job id would describe a run that is gone.
  fs::remove(job_dir_ / "failure.json", ec);

  devnull_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull_ < 0) return Internal("cannot open /dev/null: " + std::string(strerror(errno)));
  return OkStatus();
}

void Launch::StopAll(int sig) {
  for (Child& c : children_) {
    if (c.reaped) continue;
    c.terminated = true;
    // The whole group, so whatever the rank started stops too.
    if (::kill(-c.record.pid, sig) != 0) ::kill(c.record.pid, sig);
  }
  if (sig == SIGKILL) killed_ = true;
}

void Launch::BeginStop(Clock::time_point now) {
  stopping_ = true;
  kill_deadline_ = now + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(o_.grace_s));
  StopAll(SIGTERM);
}

void Launch::FailEarlyServer() {
  Child& s = children_[*early_server_];
  early_server_.reset();
  s.record.fate = Fate::kFirstFailure;
  s.record.reason = "exited while workers were running";
  first_failure_ = static_cast<int>(&s - children_.data());
  err_ << "fleet-host launch: " << ChildName(s.record) << " "
       << s.record.reason << "; stopping the other processes\n";
  err_.flush();
  BeginStop(Clock::now());
}

void Launch::OnExit(Child& c, int status) {
  c.reaped = true;
  c.record.end_time = WallClockText();
  if (WIFEXITED(status)) {
    c.record.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    c.record.signal = WTERMSIG(status);
  }
  // A server that outlived the workers was judged when the launcher gave up waiting for it.
  if (c.record.fate == Fate::kFirstFailure || c.record.fate == Fate::kDidNotExit) return;
  bool failed = c.record.exit_code != 0 || c.record.signal != 0;
  if (c.terminated) {
    // Ended by what the launcher sent (or cleanly): stopped. Anything else (an exit code of its
    // own, another signal) means it failed on its way down, most likely because of the first
    // failure (a collective lost its peer): collateral either way.
    bool by_us = !failed || c.record.signal == SIGTERM || c.record.signal == SIGKILL;
    c.record.fate = by_us ? Fate::kStopped : Fate::kFailedAfter;
  } else if (!failed) {
    c.record.fate = Fate::kFinished;
    if (o_.ps && IsServer(c) && !servers_deadline_ && !early_server_ && first_failure_ < 0 &&
        interrupt_signal_ == 0) {
      // A server leaving before the workers strands them; but a server that exits on the last
      // worker's completion notice may well be reaped before that worker, so this only counts
      // when workers are still running server_exit_s later (see CheckServers): the same slack
      // servers get after the last worker, since a worker still tears down its device and
      // plugins after its notice.
      early_server_ = static_cast<size_t>(&c - children_.data());
      early_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o_.server_exit_s));
    }
  } else if (first_failure_ < 0 && interrupt_signal_ == 0) {
    if (early_server_) {
      // The worker most likely failed because the server had gone: the server is the cause.
      FailEarlyServer();
      c.record.fate = Fate::kFailedAfter;
      return;
    }
    c.record.fate = Fate::kFirstFailure;
    first_failure_ = static_cast<int>(&c - children_.data());
    err_ << "fleet-host launch: " << ChildName(c.record) << " "
         << ExitText(c.record) << "; stopping the other "
         << (o_.ps ? "processes" : "ranks") << "\n";
    err_.flush();
    BeginStop(Clock::now());
  } else {
    c.record.fate = Fate::kFailedAfter;
  }
}

void Launch::Reap() {
  // Workers before servers: a server that exits right after the last worker must not be
  // judged to have left while workers ran only because it came first in the list.
  for (bool servers : {false, true}) {
    for (Child& c : children_) {
      if (c.reaped || IsServer(c) != servers) continue;
      int status = 0;
      pid_t r = ::waitpid(c.record.pid, &status, WNOHANG);
      if (r == c.record.pid) {
        OnExit(c, status);
      } else if (r < 0 && errno == ECHILD) {
        OnExit(c, 0);  // cannot happen unless someone else reaped it; do not wait forever
      }
    }
  }
}

void Launch::CheckServers(Clock::time_point now) {
  if (!o_.ps || stopping_ || first_failure_ >= 0 || interrupt_signal_ != 0) return;
  bool workers_done = true;
  for (const Child& c : children_) {
    if (!IsServer(c)) workers_done = workers_done && c.record.fate == Fate::kFinished;
  }
  if (workers_done && !servers_deadline_) {
    early_server_.reset();  // it left together with the workers: that is how servers end
    servers_deadline_ = now + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(o_.server_exit_s));
  }
  if (early_server_ && now >= early_deadline_) {
    FailEarlyServer();
    return;
  }
  if (!servers_deadline_ || now < *servers_deadline_) return;
  std::vector<ChildRecord> late;
  for (Child& c : children_) {
    if (!IsServer(c) || c.reaped) continue;
    c.record.reason = "did not exit after every worker finished";
    if (first_failure_ < 0) {
      c.record.fate = Fate::kFirstFailure;
      first_failure_ = static_cast<int>(&c - children_.data());
    } else {
      c.record.fate = Fate::kDidNotExit;
    }
    late.push_back(c.record);
  }
  if (late.empty()) return;
  err_ << "fleet-host launch: " << NameList(late) << " did not exit after "
       << "every worker finished (waited " << o_.server_exit_s << " s); stopping "
       << (late.size() == 1 ? "it" : "them") << "\n";
  err_.flush();
  BeginStop(now);
}

void Launch::Loop() {
  std::vector<pollfd> fds;
  while (true) {
    Reap();
    bool all_reaped = true, all_closed = true;
    for (const Child& c : children_) {
      all_reaped = all_reaped && c.reaped;
      all_closed = all_closed && c.out_fd < 0;
    }
    Clock::time_point now = Clock::now();
    CheckServers(now);
    if (all_reaped) {
      if (!drain_deadline_) drain_deadline_ = now + kDrainAfterExit;
      if (all_closed || now >= *drain_deadline_) break;
    }
    // Stop requests from the user.
    int signals = StopSignalsReceived();
    if (signals > handled_stop_signals_) {
      if (handled_stop_signals_ == 0 && !stopping_) {
        interrupt_signal_ = LastStopSignal();
        err_ << "\nfleet-host launch: got " << SignalName(interrupt_signal_)
             << ", stopping (press Ctrl-C again to kill)\n";
        err_.flush();
        BeginStop(now);
      } else if (!killed_) {
        if (interrupt_signal_ == 0) interrupt_signal_ = LastStopSignal();
        err_ << "fleet-host launch: killing every " << (o_.ps ? "process" : "rank") << "\n";
        err_.flush();
        StopAll(SIGKILL);
      }
      handled_stop_signals_ = signals;
    }
    if (stopping_ && !killed_ && now >= kill_deadline_) {
      bool any_alive = false;
      for (const Child& c : children_) any_alive = any_alive || !c.reaped;
      if (any_alive) {
        err_ << "fleet-host launch: " << (o_.ps ? "processes" : "ranks")
             << " still running after " << o_.grace_s << " s; sending SIGKILL\n";
        err_.flush();
      }
      StopAll(SIGKILL);
    }

    auto wait = std::chrono::milliseconds(200);
    if (stopping_ && !killed_) {
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(kill_deadline_ - now));
    }
    if (drain_deadline_) {
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(*drain_deadline_ - now));
    }
    if (!stopping_ && early_server_) {
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(early_deadline_ - now));
    }
    if (!stopping_ && servers_deadline_ && *servers_deadline_ > now) {
      wait =
          std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(*servers_deadline_ - now));
    }
    wait = std::max(wait, std::chrono::milliseconds(0));
    fds.clear();
    for (const Child& c : children_) {
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0});
    }
    timespec ts{static_cast<time_t>(wait.count() / 1000),
                static_cast<long>((wait.count() % 1000) * 1000000)};
    int n = ::ppoll(fds.data(), fds.size(), &ts, signals_->wait_mask());
    if (n <= 0) continue;  // timeout or a signal
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      for (Child& c : children_) {
        if (c.out_fd == p.fd) {
          ReadOutput(c);
          break;
        }
      }
    }
  }
  for (Child& c : children_) CloseOutput(c);
}

int Launch::Finish() {
  std::vector<ChildRecord> records;
  for (const Child& c : children_) records.push_back(c.record);
  if (first_failure_ >= 0) {
    Child& f = children_[static_cast<size_t>(first_failure_)];
    JobFacts facts{o_.job_id,
                                      job_dir_.string(),
                                      static_cast<int>(children_.size()),
                                      o_.nnodes,
                                      o_.node_rank,
                                      o_.grace_s,
                                      o_.ps,
                                      static_cast<int>(server_endpoints_.size()),
                                      o_.workers};
    std::vector<std::string> tail(f.tail.begin(), f.tail.end());
    // A server that left early (with 0) or never left failed by what it did not do.
    int code = f.record.reason.empty() ? ExitCodeOf(f.record) : 1;
    // Every rank is reaped by now, so no recorder changes while it is read.
    const std::vector<RankFlight> flights = ReadFlights(records);
    Status written = WriteFailureJson(facts, records,
                                                         static_cast<size_t>(first_failure_),
                                                         tail, code, flights);
    PrintFailureSummary(err_, facts, records,
                                           static_cast<size_t>(first_failure_), tail, code,
                                           flights);
    if (!written.ok()) err_ << "fleet-host launch: " << written.message() << "\n";
    err_.flush();
    return code;
  }
  if (interrupt_signal_ != 0) {
    err_ << "fleet-host launch: stopped by " << SignalName(interrupt_signal_)
         << "; " << StoppedRanksText(records) << "; logs in "
         << job_dir_.string() << "\n";
    err_.flush();
    return 128 + interrupt_signal_;
  }
  if (o_.ps) {
    err_ << "fleet-host launch: all " << o_.workers << " worker" << (o_.workers == 1 ? "" : "s")
         << " and " << server_endpoints_.size() << " server"
         << (server_endpoints_.size() == 1 ? "" : "s") << " finished; logs in "
         << job_dir_.string() << "\n";
    err_.flush();
    return 0;
  }
  err_ << "fleet-host launch: all " << o_.nproc << " ranks finished"
       << (o_.nnodes > 1 ? " on this node" : "") << "; logs in " << job_dir_.string() << "\n";
  err_.flush();
  return 0;
}

void Launch::Cleanup() {
  // Only reached with live children when starting them failed half-way.
  bool any = false;
  for (Child& c : children_) {
    if (c.record.pid > 0 && !c.reaped) {
      ::kill(-c.record.pid, SIGKILL);
      ::kill(c.record.pid, SIGKILL);
      any = true;
    }
  }
  if (any) {
    for (Child& c : children_) {
      if (c.record.pid > 0 && !c.reaped) {
        int status;
        ::waitpid(c.record.pid, &status, 0);
        c.reaped = true;
      }
    }
  }
  for (Child& c : children_) {
    if (c.out_fd >= 0) ::close(c.out_fd);
    if (c.log_fd >= 0) ::close(c.log_fd);
    c.out_fd = c.log_fd = -1;
  }
  if (devnull_ >= 0) ::close(devnull_);
  devnull_ = -1;
  if (server_) server_->Stop();
  server_.reset();
  signals_.reset();
}

StatusOr<int> Launch::Run() {
  FLEET_RETURN_IF_ERROR(Prepare());
  if (o_.ps) {
    const size_t n = server_endpoints_.size();
    err_ << "fleet-host launch: job '" << o_.job_id << "': " << n << " server"
         << (n == 1 ? "" : "s") << " (" << JoinEndpoints(server_endpoints_) << ") and "
         << o_.workers << " worker" << (o_.workers == 1 ? "" : "s") << "\n";
  } else {
    err_ << "fleet-host launch: job '" << o_.job_id << "': " << o_.nproc << " rank"
       << (o_.nproc == 1 ? "" : "s") << " on node " << o_.node_rank << " of " << o_.nnodes
       << " (world size " << o_.nproc * o_.nnodes << "), store "
       << HostPort(master_addr_, master_port_)
       << (server_ ? " served here" : " served by node 0") << "\n";
  }
  err_ << "fleet-host launch: logs in " << job_dir_.string() << "\n";
  err_.flush();
  FLEET_RETURN_IF_ERROR(StartChildren());
  Loop();
  int code = 1;
  try {
    code = Finish();
  } catch (const std::exception& e) {
    // Reporting must never cost the job its exit code or leave ranks behind.
    err_ << "fleet-host launch: could not write the failure report: " << e.what() << "\n";
    if (first_failure_ >= 0) {
      const ChildRecord& f = children_[static_cast<size_t>(first_failure_)].record;
      code = f.reason.empty() ? ExitCodeOf(f) : 1;
    } else if (interrupt_signal_ != 0) {
      code = 128 + interrupt_signal_;
    }
  }
  Cleanup();
  return code;
}

}  // namespace launcher_internal

StatusOr<int> RunLaunch(const LaunchOptions& options, std::ostream& out, std::ostream& err) {
  LaunchOptions o = options;
  for (o.restart = 0;; ++o.restart) {
    int code = 0;
    bool interrupted = false;
    {
      launcher_internal::Launch launch(o, out, err);
      FLEET_ASSIGN_OR_RETURN(code, launch.Run());
      interrupted = launch.interrupted();
    }
    if (code == 0 || interrupted || o.restart >= o.max_restarts) return code;
    err << "fleet-host launch: restarting the whole job (restart " << o.restart + 1 << " of "
        << o.max_restarts << ")\n";
    err.flush();
  }
}

}  // namespace fleet
