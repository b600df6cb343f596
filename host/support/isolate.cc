#include "support/isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
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
  return IsolatedChild{pid, fds[0]};
}

IsolatedResult FinishIsolated(IsolatedChild child,
                              std::chrono::steady_clock::time_point deadline) {
  IsolatedResult r;
  char buf[65536];
  bool open = true;
  while (open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(child.pid, SIGKILL);
      break;
    }
    pollfd p{child.fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(child.fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      open = false;
    } else if (r.answer.size() < kMaxAnswer) {
      r.answer.append(buf, static_cast<size_t>(n));
    }
  }
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
