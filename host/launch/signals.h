// The launcher's signal handling. SIGINT/SIGTERM/SIGCHLD stay blocked in the launcher (and in
// the store server's thread, which inherits the mask) except inside ppoll, so a signal only ever
// interrupts that one wait and no other system call sees EINTR. Internal to launch/.
#pragma once

#include <signal.h>

namespace fleet::launcher_internal {

// Installs the handlers and the mask for its lifetime and restores the previous dispositions and
// mask when destroyed (consuming what is still pending first). One at a time per process.
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
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

// SIGINT/SIGTERM received since the current SignalScope began, and the last of them (0: none).
int StopSignalsReceived();
int LastStopSignal();

}  // namespace fleet::launcher_internal
