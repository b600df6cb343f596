// Starting the job's processes and collecting what they print: each child in its own process
// group with stdout+stderr into a pipe, every line into its log file (and the echoed rank's to
// the console), the last lines kept for the failure report.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launch/flight_recorder.h"
#include "launch/launch_internal.h"

extern char** environ;

namespace fleet::launcher_internal {

Status Launch::StartChildren() {
  // Everything the child needs is built before fork: the store's thread exists, so the child
  // may only make async-signal-safe calls between fork and exec.
  std::vector<std::string> base_env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    // The recorder path is the launcher's to give (below), never one from the user's shell.
    if (eq == std::string::npos || Stripped(entry.substr(0, eq)) ||
        entry.substr(0, eq) == kFlightRecorderEnv) {
      continue;
    }
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
    for (Child& c : children_) {
      // Each rank records its collectives for the failure report (launch/flight_recorder.h).
      // A file an earlier run of this job id left would describe a run that is gone.
      c.record.flight_recorder =
          (job_dir_ / ("trainer." + std::to_string(c.record.rank) + ".flight")).string();
      ::unlink(c.record.flight_recorder.c_str());
      c.env.emplace_back(kFlightRecorderEnv, c.record.flight_recorder);
    }
  }
  for (Child& c : children_) {
    c.log_fd = ::open(c.record.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
      return Internal("cannot create a pipe for " + ChildName(c.record) +
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
      return Internal("cannot fork " + ChildName(c.record) + ": " +
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
    c.record.start_time = WallClockText();
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

}  // namespace fleet::launcher_internal
