// What the launcher's files (launcher.cc: the job's life; children.cc: starting processes and
// collecting their output; plan.cc: what each process is told) share: one local process and the
// Launch that drives a start of the job. Not part of the launcher's interface (launcher.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launch/failure_report.h"
#include "launch/launcher.h"
#include "launch/signals.h"
#include "rendezvous/tcp_store.h"

namespace fleet::launcher_internal {

using Clock = std::chrono::steady_clock;

constexpr size_t kTailLines = 30;
// Each rank costs the launcher two descriptors and a process; past this a typo (--nproc 80000)
// is far likelier than a real job.
constexpr int kMaxLocalRanks = 1024;
// A "line" longer than this is written out in pieces, so one rank printing without newlines
// cannot make the launcher hold unbounded memory.
constexpr size_t kMaxLineBytes = size_t{1} << 20;
// How long output is still drained from a reaped rank's pipe (a grandchild may hold it open).
constexpr auto kDrainAfterExit = std::chrono::milliseconds(1000);

// Whether the launcher keeps variable `name` of its own environment from its children
// (plan.cc says which and why).
bool Stripped(const std::string& name);

// `n` distinct free ports on 127.0.0.1 for the servers of a parameter-server job.
StatusOr<std::vector<std::string>> PickLocalEndpoints(int n);

// "a:1,b:2" from the list.
std::string JoinEndpoints(const std::vector<std::string>& endpoints);

struct Child {
  ChildRecord record;
  int out_fd = -1;  // read end of the child's stdout+stderr pipe; -1 once closed
  int log_fd = -1;
  bool echo = false;
  std::string echo_prefix;  // "[trainer.0] ", "[worker.0] "
  // Variables this child gets on top of the stripped environment.
  std::vector<std::pair<std::string, std::string>> env;
  bool reaped = false;
  bool terminated = false;  // the launcher has sent SIGTERM/SIGKILL
  std::string partial;      // output after the last newline
  std::deque<std::string> tail;
};

class Launch {
 public:
  Launch(const LaunchOptions& options, std::ostream& out, std::ostream& err)
      : o_(options), out_(out), err_(err) {}
  ~Launch() { Cleanup(); }

  StatusOr<int> Run();
  // Whether SIGINT/SIGTERM stopped the job (after Run).
  bool interrupted() const { return interrupt_signal_ != 0; }

 private:
  Status Prepare();
  void PlanCollective();
  void PlanParameterServer();
  Status StartChildren();
  void Loop();
  void CheckServers(Clock::time_point now);
  void FailEarlyServer();
  bool IsServer(const Child& c) const { return c.record.role == "server"; }
  void BeginStop(Clock::time_point now);
  void Reap();
  void OnExit(Child& c, int status);
  void StopAll(int sig);
  void ReadOutput(Child& c);
  void EmitLines(Child& c, std::string_view data, bool final);
  void CloseOutput(Child& c);
  int Finish();
  void Cleanup();

  const LaunchOptions& o_;
  std::ostream& out_;
  std::ostream& err_;
  std::filesystem::path job_dir_;
  std::string master_addr_;
  int master_port_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::string job_secret_;  // handed to every rank (FLEET_JOB_SECRET)
  std::vector<std::string> server_endpoints_;  // a PS job's
  std::vector<Child> children_;
  std::optional<SignalScope> signals_;
  int devnull_ = -1;

  int first_failure_ = -1;       // index into children_
  int interrupt_signal_ = 0;     // the first SIGINT/SIGTERM the launcher received
  int handled_stop_signals_ = 0;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_deadline_;
  std::optional<Clock::time_point> drain_deadline_;
  // A PS job after every worker exited 0: when the servers must have exited by.
  std::optional<Clock::time_point> servers_deadline_;
  // A PS job: the first server that exited 0 while workers still ran, and until when the
  // workers may still finish for that to be the servers' normal end.
  std::optional<size_t> early_server_;
  Clock::time_point early_deadline_;
};

}  // namespace fleet::launcher_internal
