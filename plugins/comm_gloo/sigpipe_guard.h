// Keeps SIGPIPE from killing the process while Gloo writes to a socket whose peer is gone.
//
// Gloo's TCP transport writes with writev(), which raises SIGPIPE on a connection the peer
// closed (a rank that died or aborted); the default action terminates the whole host. Python
// hosts never notice because Python ignores SIGPIPE; a plugin must not change the process-wide
// disposition, so it blocks the signal in the threads that write instead. While a guard lives,
// SIGPIPE is blocked in this thread (the write then fails with EPIPE, which Gloo reports as an
// I/O error); on destruction a SIGPIPE raised meanwhile is consumed and the old mask restored.
// Threads created under a guard (Gloo's device loop) inherit the blocked mask for good.
//
// The guard costs four system calls, most of what a small collective spends outside Gloo; a
// host that ignores SIGPIPE process-wide (fleet-host does) needs none of it, so a guard built
// with `needed` false does nothing. ProcessIgnoresSigpipe() asks once.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <time.h>

namespace fleet_gloo {

// Whether SIGPIPE's disposition is SIG_IGN now (then a write to a closed socket is only EPIPE).
inline bool ProcessIgnoresSigpipe() {
  struct sigaction current {};
  return sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

class SigpipeGuard {
 public:
  explicit SigpipeGuard(bool needed = true) : active_(needed) {
    if (!active_) return;
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!active_) return;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  bool active_;
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

}  // namespace fleet_gloo
