#include "support/isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fleet {
namespace {

constexpr size_t kMaxAnswer = size_t{16} << 20;

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string IsolatedResult::Describe() const {
  if (timed_out) return "did not finish before its deadline and was killed";
  if (signal != 0) {
    const char* abbrev = sigabbrev_np(signal);
    return std::string("was killed by ") +
           (abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signal));
  }
  if (!answered) return "exited with code " + std::to_string(exit_code) + " without answering";
  return "answered";
}

StatusOr<IsolatedChild> StartIsolated(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    // Set on both sides of the fork, so the group exists whichever runs first.
    ::setpgid(0, 0);
    // A caller that dies (Ctrl-C reaches only its own group now) takes the child with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(71);  // it died before the line above
    std::string answer;
    try {
      answer = work();
    } catch (...) {
      ::_exit(70);
    }
    WriteAll(fds[1], answer);
    ::_exit(0);
  }
  ::close(fds[1]);
  ::setpgid(pid, pid);
  return IsolatedChild{pid, fds[0]};
}

IsolatedResult FinishIsolated(IsolatedChild child,
                              std::chrono::steady_clock::time_point deadline) {
  IsolatedResult r;
  char buf[65536];
  // Appends what the pipe holds now; false at end of file or on an error.
  auto drain = [&]() {
    for (;;) {
      const ssize_t n = ::read(child.fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 && errno == EAGAIN;
      if (r.answer.size() < kMaxAnswer) r.answer.append(buf, static_cast<size_t>(n));
    }
  };
  ::fcntl(child.fd, F_SETFL, ::fcntl(child.fd, F_GETFL) | O_NONBLOCK);
  bool exited = false;
  bool open = true;
  while (!exited) {
    // Whether the child has exited, without reaping it: its pid must stay taken until the
    // group is killed below, or the kill could reach a stranger that was given the number.
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == child.pid) {
      exited = true;  // it wrote everything before exiting: what the pipe holds is the answer
      if (open) drain();
      break;
    }
    // Rounded up: a deadline 0.4 ms away has not passed.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      break;
    }
    // A short poll: the end of the pipe says nothing when a process the work started still
    // holds its write end, so the child's exit is checked between polls.
    const int wait_ms = static_cast<int>(std::min<int64_t>(left.count(), open ? 100 : 20));
    if (!open) {
      ::poll(nullptr, 0, wait_ms);
      continue;
    }
    pollfd p{child.fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready > 0) open = drain();
  }
  // The child (when it ran past the deadline) and anything left in its group.
  if (::kill(-child.pid, SIGKILL) != 0 && r.timed_out) ::kill(child.pid, SIGKILL);
  ::close(child.fd);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status) && !r.timed_out) r.signal = WTERMSIG(status);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.answered = !r.timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!r.answered) r.answer.clear();
  return r;
}

}  // namespace fleet
