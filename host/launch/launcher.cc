#include "launch/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "launch/failure_report.h"
#include "roles/role.h"
#include "rendezvous/tcp_store.h"

extern char** environ;

namespace fleet {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using launcher_internal::ChildRecord;
using launcher_internal::Fate;

constexpr size_t kTailLines = 30;
// Each rank costs the launcher two descriptors and a process; past this a typo (--nproc 80000)
// is far likelier than a real job.
constexpr int kMaxLocalRanks = 1024;
// A "line" longer than this is written out in pieces, so one rank printing without newlines
// cannot make the launcher hold unbounded memory.
constexpr size_t kMaxLineBytes = size_t{1} << 20;
// How long output is still drained from a reaped rank's pipe (a grandchild may hold it open).
constexpr auto kDrainAfterExit = std::chrono::milliseconds(1000);
// Variables the launcher sets or that role.h's ResolveRole reads: a value the user's shell
// carries for one of them (RANK from an earlier torchrun, OMPI_* from an mpirun wrapper, a
// leftover PADDLE_TRAINER_ID) would contradict the launcher's and make every rank refuse to
// start, so children never inherit them:
//   TRAINING_ROLE PADDLE_TRAINING_ROLE PADDLE_TRAINER_ID PADDLE_TRAINERS_NUM
//   PADDLE_TRAINER_ENDPOINTS PADDLE_CURRENT_ENDPOINT PADDLE_PSERVERS_IP_PORT_LIST
//   PADDLE_PSERVER_ID POD_IP PADDLE_PORT PADDLE_RANK_IN_NODE
//   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
//   PMI_RANK PMI_SIZE SLURM_PROCID SLURM_NTASKS SLURM_LOCALID OMPI_COMM_WORLD_* (all)
//   FLEET_MASTER_SERVED FLEET_JOB_ID FLEET_MPI_SYMMETRIC FLEET_RESTART_COUNT
// plus http_proxy/https_proxy (and their upper-case spellings), which Paddle's launchers drop
// so that ranks talking to each other are never sent through a proxy.
const std::set<std::string>& StrippedVariables() {
  static const std::set<std::string> names = {
      "TRAINING_ROLE", "PADDLE_TRAINING_ROLE", "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM",
      "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT", "PADDLE_PSERVERS_IP_PORT_LIST",
      "PADDLE_PSERVER_ID", "POD_IP", "PADDLE_PORT", "PADDLE_RANK_IN_NODE", "RANK", "WORLD_SIZE",
      "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK", "PMI_SIZE",
      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "FLEET_MASTER_SERVED", "FLEET_JOB_ID",
      "FLEET_MPI_SYMMETRIC", "FLEET_RESTART_COUNT", "http_proxy", "https_proxy", "HTTP_PROXY",
      "HTTPS_PROXY"};
  return names;
}

bool Stripped(const std::string& name) {
  return StrippedVariables().count(name) != 0 || name.starts_with("OMPI_COMM_WORLD_");
}

// `n` distinct free ports on 127.0.0.1: each is bound at port 0 and read back, all at once (so
// they differ), then closed for the servers to bind. Between the close and a server's bind
// another program may take one: the servers bind without SO_REUSEPORT, so the loser fails with
// "address in use" and the job ends with the usual failure summary naming it.
StatusOr<std::vector<std::string>> PickLocalEndpoints(int n) {
  std::vector<int> fds;
  std::vector<std::string> endpoints;
  Status status = OkStatus();
  for (int i = 0; i < n && status.ok(); ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      status = Internal("cannot pick a port for server " + std::to_string(i) + ": socket: " +
                        strerror(errno));
      break;
    }
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      status = Internal("cannot pick a port for server " + std::to_string(i) + ": " +
                        strerror(errno));
      break;
    }
    endpoints.push_back("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  }
  for (int fd : fds) ::close(fd);
  if (!status.ok()) return status;
  return endpoints;
}

// "a:1,b:2" from the list.
std::string JoinEndpoints(const std::vector<std::string>& endpoints) {
  std::string out;
  for (const std::string& e : endpoints) out += (out.empty() ? "" : ",") + e;
  return out;
}

// ---- signals ----
//
// SIGINT/SIGTERM/SIGCHLD stay blocked in the launcher (and in the store server's thread, which
// inherits the mask) except inside ppoll, so a signal only ever interrupts that one wait and no
// other system call sees EINTR.

volatile sig_atomic_t g_stop_signals = 0;  // SIGINT/SIGTERM received so far
volatile sig_atomic_t g_last_stop_signal = 0;

void OnSignal(int sig) {
  if (sig == SIGINT || sig == SIGTERM) {
    g_stop_signals = g_stop_signals + 1;
    g_last_stop_signal = sig;
  }
  // SIGCHLD only needs to end the ppoll.
}

class SignalScope {
 public:
  SignalScope() {
    g_stop_signals = 0;
    g_last_stop_signal = 0;
    sigset_t block;
    sigemptyset(&block);
    for (int sig : kCaught) sigaddset(&block, sig);
    sigprocmask(SIG_BLOCK, &block, &old_mask_);
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    for (size_t i = 0; i < std::size(kCaught); ++i) sigaction(kCaught[i], &sa, &old_[i]);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old_pipe_);
    // The mask ppoll waits with: the caller's, minus ours.
    wait_mask_ = old_mask_;
    for (int sig : kCaught) sigdelset(&wait_mask_, sig);
  }
  ~SignalScope() {
    // Consume what is still pending, so restoring a default disposition cannot kill us.
    sigset_t pending;
    sigemptyset(&pending);
    for (int sig : kCaught) sigaddset(&pending, sig);
    timespec zero{};
    while (sigtimedwait(&pending, nullptr, &zero) > 0) {
    }
    for (size_t i = 0; i < std::size(kCaught); ++i) sigaction(kCaught[i], &old_[i], nullptr);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  const sigset_t* wait_mask() const { return &wait_mask_; }

 private:
  static constexpr int kCaught[] = {SIGINT, SIGTERM, SIGCHLD};
  sigset_t old_mask_;
  sigset_t wait_mask_;
  struct sigaction old_[3];
  struct sigaction old_pipe_;
};

// ---- children ----

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
  fs::path job_dir_;
  std::string master_addr_;
  int master_port_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
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

Status Launch::Prepare() {
  FLEET_RETURN_IF_ERROR(ValidateLaunchOptions(o_));
  signals_.emplace();  // before the server starts, so its thread inherits the blocked mask
  if (o_.ps) {
    // Servers and workers talk over the servers' endpoints; no store to serve.
    if (!o_.server_endpoints.empty()) {
      server_endpoints_ = o_.server_endpoints;
    } else {
      FLEET_ASSIGN_OR_RETURN(server_endpoints_, PickLocalEndpoints(o_.servers));
    }
  } else if (o_.master_host.empty()) {
    master_addr_ = "127.0.0.1";
    auto server = TcpStoreServer::Start(master_addr_, 0);
    if (!server.ok()) {
      return server.status().WithContext("cannot serve the job's rendezvous store");
    }
    server_ = std::move(*server);
    master_port_ = server_->port();
  } else {
    master_addr_ = o_.master_host;
    master_port_ = o_.master_port;
    if (o_.node_rank == 0) {
      auto server = TcpStoreServer::Start(master_addr_, master_port_);
      if (!server.ok()) {
        std::string where = launcher_internal::HostPort(master_addr_, master_port_);
        std::string message = "cannot serve the job's rendezvous store on " + where +
                              " (--master): " + server.status().message();
        if (message.find("in use") != std::string::npos) {
          message += "; another process holds port " + std::to_string(master_port_) +
                     ": stop it or choose another port, e.g. --master " +
                     launcher_internal::HostPort(master_addr_, master_port_ == 65535
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
  fs::create_directories(job_dir_, ec);
  if (ec) {
    return FailedPrecondition("cannot create the log directory " + job_dir_.string() + ": " +
                              ec.message());
  }
  // A failure.json from an earlier run of the same job id would describe a run that is gone.
  fs::remove(job_dir_ / "failure.json", ec);

  devnull_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull_ < 0) return Internal("cannot open /dev/null: " + std::string(strerror(errno)));
  return OkStatus();
}

void Launch::PlanCollective() {
  const int world = o_.nnodes * o_.nproc;
  children_.resize(static_cast<size_t>(o_.nproc));
  for (int l = 0; l < o_.nproc; ++l) {
    Child& c = children_[static_cast<size_t>(l)];
    c.record.local_rank = l;
    c.record.rank = o_.node_rank * o_.nproc + l;
    c.record.log_path = (job_dir_ / ("trainer." + std::to_string(c.record.rank) + ".log")).string();
    c.echo = l == 0;
    c.echo_prefix = "[trainer." + std::to_string(c.record.rank) + "] ";
    c.env = {{"PADDLE_TRAINER_ID", std::to_string(c.record.rank)},
             {"PADDLE_TRAINERS_NUM", std::to_string(world)},
             {"TRAINING_ROLE", "TRAINER"},
             {"LOCAL_RANK", std::to_string(c.record.local_rank)},
             {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc)},
             {"MASTER_ADDR", master_addr_},
             {"MASTER_PORT", std::to_string(master_port_)},
             {"FLEET_MASTER_SERVED", "1"},
             {"FLEET_JOB_ID", o_.job_id},
             {"FLEET_RESTART_COUNT", std::to_string(o_.restart)}};
  }
}

void Launch::PlanParameterServer() {
  const int servers = static_cast<int>(server_endpoints_.size());
  const std::string list = JoinEndpoints(server_endpoints_);
  const std::string local_world = std::to_string(servers + o_.workers);
  const std::string trainers = std::to_string(o_.workers);
  // Servers first, so they are already starting when the workers look for them.
  children_.resize(static_cast<size_t>(servers + o_.workers));
  for (int i = 0; i < servers; ++i) {
    Child& c = children_[static_cast<size_t>(i)];
    const std::string& endpoint = server_endpoints_[static_cast<size_t>(i)];
    size_t colon = endpoint.rfind(':');
    c.record.role = "server";
    c.record.rank = i;
    c.record.local_rank = i;
    c.record.log_path = (job_dir_ / ("serverlog." + std::to_string(i))).string();
    // POD_IP keeps an IPv6 host's brackets, so that POD_IP:PADDLE_PORT is the list's entry.
    c.env = {{"TRAINING_ROLE", "PSERVER"},
             {"PADDLE_PSERVERS_IP_PORT_LIST", list},
             {"PADDLE_PSERVER_ID", std::to_string(i)},
             {"POD_IP", endpoint.substr(0, colon)},
             {"PADDLE_PORT", endpoint.substr(colon + 1)},
             {"PADDLE_TRAINERS_NUM", trainers},
             {"LOCAL_WORLD_SIZE", local_world},
             {"FLEET_JOB_ID", o_.job_id},
             {"FLEET_RESTART_COUNT", std::to_string(o_.restart)}};
  }
  for (int i = 0; i < o_.workers; ++i) {
    Child& c = children_[static_cast<size_t>(servers + i)];
    c.record.role = "worker";
    c.record.rank = i;
    c.record.local_rank = servers + i;
    c.record.log_path = (job_dir_ / ("workerlog." + std::to_string(i))).string();
    c.echo = i == 0;
    c.echo_prefix = "[worker." + std::to_string(i) + "] ";
    c.env = {{"TRAINING_ROLE", "TRAINER"},
             {"PADDLE_PSERVERS_IP_PORT_LIST", list},
             {"PADDLE_TRAINER_ID", std::to_string(i)},
             {"PADDLE_TRAINERS_NUM", trainers},
             {"LOCAL_WORLD_SIZE", local_world},
             {"FLEET_JOB_ID", o_.job_id},
             {"FLEET_RESTART_COUNT", std::to_string(o_.restart)}};
  }
}

Status Launch::StartChildren() {
  // Everything the child needs is built before fork: the store's thread exists, so the child
  // may only make async-signal-safe calls between fork and exec.
  std::vector<std::string> base_env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos || Stripped(entry.substr(0, eq))) continue;
    base_env.push_back(std::move(entry));
  }
  std::vector<char*> argv;
  for (const std::string& a : o_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string exec_error = "fleet-host launch: cannot execute " + o_.argv[0] + ": ";
  const pid_t launcher_pid = ::getpid();

  if (o_.ps) {
    PlanParameterServer();
  } else {
    PlanCollective();
  }
  for (Child& c : children_) {
    c.log_fd = ::open(c.record.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (c.log_fd < 0) {
      return FailedPrecondition("cannot open the log file " + c.record.log_path + ": " +
                                strerror(errno));
    }
  }
  for (Child& c : children_) {
    std::vector<std::string> env = base_env;
    for (const auto& [name, value] : c.env) env.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return Internal("cannot create a pipe for " + launcher_internal::ChildName(c.record) +
                      ": " + strerror(errno));
    }
    // The launcher's end never blocks, so a spurious wake-up cannot stall the loop; the
    // child's stays blocking, as programs expect of their stdout.
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    pid_t pid = ::fork();
    if (pid < 0) {
      int e = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      return Internal("cannot fork " + launcher_internal::ChildName(c.record) + ": " +
                      strerror(e));
    }
    if (pid == 0) {
      // The child: async-signal-safe calls only.
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) sigaction(sig, &dfl, nullptr);
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher_pid) _exit(126);  // the launcher is already gone
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      ::dup2(devnull_, 0);
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::execve(argv[0], argv.data(), envp.data());
      int e = errno;
      ssize_t ignored = ::write(2, exec_error.data(), exec_error.size());
      const char* text = strerrordesc_np(e);
      if (text != nullptr) ignored = ::write(2, text, strlen(text));
      ignored = ::write(2, "\n", 1);
      (void)ignored;
      _exit(127);
    }
    // Also from here, so a signal sent right after fork already reaches the whole group.
    ::setpgid(pid, pid);
    ::close(fds[1]);
    c.out_fd = fds[0];
    c.record.pid = pid;
    c.record.start_time = launcher_internal::WallClockText();
  }
  return OkStatus();
}

void Launch::EmitLines(Child& c, std::string_view data, bool final) {
  c.partial.append(data);
  size_t start = 0;
  std::string chunk;
  while (true) {
    size_t nl = c.partial.find('\n', start);
    size_t end;
    if (nl != std::string::npos) {
      end = nl;
    } else if (c.partial.size() - start >= kMaxLineBytes || (final && start < c.partial.size())) {
      end = c.partial.size();
    } else {
      break;
    }
    std::string line = c.partial.substr(start, end - start);
    start = nl == std::string::npos ? end : nl + 1;
    chunk += line;
    chunk += '\n';
    if (c.echo) out_ << c.echo_prefix << line << "\n";
    c.tail.push_back(std::move(line));
    if (c.tail.size() > kTailLines) c.tail.pop_front();
  }
  c.partial.erase(0, start);
  if (c.echo && !chunk.empty()) out_.flush();
  // Whole lines only, one write per batch: a log never ends mid-line while the rank runs.
  const char* p = chunk.data();
  size_t left = chunk.size();
  while (left > 0 && c.log_fd >= 0) {
    ssize_t n = ::write(c.log_fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // a full disk must not stop the job; the log is best effort
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void Launch::ReadOutput(Child& c) {
  char buf[65536];
  while (c.out_fd >= 0) {
    ssize_t n = ::read(c.out_fd, buf, sizeof(buf));
    if (n > 0) {
      EmitLines(c, std::string_view(buf, static_cast<size_t>(n)), false);
      // Back to ppoll after one buffer, so a chatty rank cannot starve the others.
      return;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    CloseOutput(c);  // EOF or error
  }
}

void Launch::CloseOutput(Child& c) {
  if (c.out_fd < 0) return;
  EmitLines(c, {}, true);
  ::close(c.out_fd);
  c.out_fd = -1;
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
  err_ << "fleet-host launch: " << launcher_internal::ChildName(s.record) << " "
       << s.record.reason << "; stopping the other processes\n";
  err_.flush();
  BeginStop(Clock::now());
}

void Launch::OnExit(Child& c, int status) {
  c.reaped = true;
  c.record.end_time = launcher_internal::WallClockText();
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
    err_ << "fleet-host launch: " << launcher_internal::ChildName(c.record) << " "
         << launcher_internal::ExitText(c.record) << "; stopping the other "
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
  std::vector<launcher_internal::ChildRecord> late;
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
  err_ << "fleet-host launch: " << launcher_internal::NameList(late) << " did not exit after "
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
    int signals = g_stop_signals;
    if (signals > handled_stop_signals_) {
      if (handled_stop_signals_ == 0 && !stopping_) {
        interrupt_signal_ = g_last_stop_signal;
        err_ << "\nfleet-host launch: got " << launcher_internal::SignalName(interrupt_signal_)
             << ", stopping (press Ctrl-C again to kill)\n";
        err_.flush();
        BeginStop(now);
      } else if (!killed_) {
        if (interrupt_signal_ == 0) interrupt_signal_ = g_last_stop_signal;
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
    launcher_internal::JobFacts facts{o_.job_id,
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
    int code = f.record.reason.empty() ? launcher_internal::ExitCodeOf(f.record) : 1;
    Status written = launcher_internal::WriteFailureJson(facts, records,
                                                         static_cast<size_t>(first_failure_),
                                                         tail, code);
    launcher_internal::PrintFailureSummary(err_, facts, records,
                                           static_cast<size_t>(first_failure_), tail, code);
    if (!written.ok()) err_ << "fleet-host launch: " << written.message() << "\n";
    err_.flush();
    return code;
  }
  if (interrupt_signal_ != 0) {
    err_ << "fleet-host launch: stopped by " << launcher_internal::SignalName(interrupt_signal_)
         << "; " << launcher_internal::StoppedRanksText(records) << "; logs in "
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
       << launcher_internal::HostPort(master_addr_, master_port_)
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
      code = f.reason.empty() ? launcher_internal::ExitCodeOf(f) : 1;
    } else if (interrupt_signal_ != 0) {
      code = 128 + interrupt_signal_;
    }
  }
  Cleanup();
  return code;
}

}  // namespace

Status CheckJobId(const std::string& job_id) {
  if (job_id.empty()) return InvalidArgument("--job-id: the job id is empty");
  if (job_id.find('/') != std::string::npos || job_id.find("..") != std::string::npos) {
    return InvalidArgument("--job-id '" + job_id +
                           "': a job id names a directory under --log-dir and may not contain "
                           "'/' or '..'");
  }
  for (unsigned char ch : job_id) {
    if (ch < 0x20 || ch == 0x7f) {
      return InvalidArgument("--job-id: the job id contains a control character");
    }
  }
  return OkStatus();
}

namespace {

Status ValidateParameterServer(const LaunchOptions& o) {
  if (o.nproc != 0) {
    return InvalidArgument("--nproc cannot be combined with --servers/--workers: a job is either "
                           "collective (--nproc) or parameter-server (--servers and --workers)");
  }
  if (o.nnodes != 1 || o.node_rank_set || !o.master_host.empty()) {
    return InvalidArgument("--nnodes, --node-rank and --master do not apply to a "
                           "parameter-server job: it runs on this node, servers and workers "
                           "finding each other through the server endpoints");
  }
  if (o.workers < 1) {
    return InvalidArgument("--workers " + std::to_string(o.workers) +
                           ": a parameter-server job needs at least 1 worker (--workers W)");
  }
  const int servers =
      o.server_endpoints.empty() ? o.servers : static_cast<int>(o.server_endpoints.size());
  if (servers < 1) {
    return InvalidArgument("--servers " + std::to_string(servers) +
                           ": a parameter-server job needs at least 1 server (--servers S)");
  }
  if (!o.server_endpoints.empty() && o.servers != 0 &&
      o.servers != static_cast<int>(o.server_endpoints.size())) {
    return InvalidArgument("--servers: " + std::to_string(o.servers) + " servers but " +
                           std::to_string(o.server_endpoints.size()) + " endpoints");
  }
  if (static_cast<int64_t>(servers) + o.workers > kMaxLocalRanks) {
    return InvalidArgument("--servers " + std::to_string(servers) + " + --workers " +
                           std::to_string(o.workers) + ": at most " +
                           std::to_string(kMaxLocalRanks) + " processes per node");
  }
  std::set<std::string> seen;
  for (const std::string& e : o.server_endpoints) {
    if (Status s = CheckEndpoint(e); !s.ok()) return s.WithContext("--servers");
    if (!seen.insert(e).second) {
      return InvalidArgument("--servers: the endpoint '" + e + "' appears more than once");
    }
  }
  if (!(o.server_exit_s >= 0) || !std::isfinite(o.server_exit_s)) {
    return InvalidArgument("--server-exit-s: expected a number of seconds >= 0");
  }
  return OkStatus();
}

}  // namespace

Status ValidateLaunchOptions(const LaunchOptions& o) {
  if (o.ps) {
    FLEET_RETURN_IF_ERROR(ValidateParameterServer(o));
  } else {
    if (o.nproc < 1) {
      return InvalidArgument("--nproc " + std::to_string(o.nproc) + ": need at least 1 process");
    }
    if (o.nproc > kMaxLocalRanks) {
      return InvalidArgument("--nproc " + std::to_string(o.nproc) + ": at most " +
                             std::to_string(kMaxLocalRanks) + " ranks per node");
    }
  }
  if (o.nnodes < 1) {
    return InvalidArgument("--nnodes " + std::to_string(o.nnodes) + ": need at least 1 node");
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return InvalidArgument("--node-rank " + std::to_string(o.node_rank) +
                           " is not below --nnodes " + std::to_string(o.nnodes));
  }
  if (o.nnodes > 1 && (o.master_host.empty() || !o.node_rank_set)) {
    return InvalidArgument("--nnodes " + std::to_string(o.nnodes) +
                           " needs --master HOST:PORT (node 0's address, where it serves the "
                           "store) and --node-rank (this node's index)");
  }
  if (!o.master_host.empty() && (o.master_port < 1 || o.master_port > 65535)) {
    return InvalidArgument("--master: the port " + std::to_string(o.master_port) +
                           " is not in 1..65535");
  }
  if (static_cast<int64_t>(o.nproc) * o.nnodes > (int64_t{1} << 20)) {
    return InvalidArgument("--nproc * --nnodes is too large");
  }
  if (o.max_restarts < 0) {
    return InvalidArgument("--max-restarts " + std::to_string(o.max_restarts) +
                           ": expected a count >= 0");
  }
  if (o.max_restarts > 0 && o.nnodes > 1) {
    return InvalidArgument("--max-restarts needs a job of one node: the launchers of " +
                           std::to_string(o.nnodes) + " nodes cannot agree on restarting");
  }
  if (!(o.grace_s >= 0) || !std::isfinite(o.grace_s)) {
    return InvalidArgument("--grace-s: expected a number of seconds >= 0");
  }
  if (o.log_dir.empty()) return InvalidArgument("--log-dir: the directory name is empty");
  FLEET_RETURN_IF_ERROR(CheckJobId(o.job_id));
  if (o.argv.empty() || o.argv[0].empty()) {
    return InvalidArgument("no command to run after '--'");
  }
  return OkStatus();
}

StatusOr<int> RunLaunch(const LaunchOptions& options, std::ostream& out, std::ostream& err) {
  LaunchOptions o = options;
  for (o.restart = 0;; ++o.restart) {
    int code = 0;
    bool interrupted = false;
    {
      Launch launch(o, out, err);
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
