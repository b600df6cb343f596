#include "launch/signals.h"

#include <ctime>
#include <iterator>

namespace fleet::launcher_internal {
namespace {

volatile sig_atomic_t g_stop_signals = 0;  // SIGINT/SIGTERM received so far
volatile sig_atomic_t g_last_stop_signal = 0;

void OnSignal(int sig) {
  if (sig == SIGINT || sig == SIGTERM) {
    g_stop_signals = g_stop_signals + 1;
    g_last_stop_signal = sig;
  }
  // SIGCHLD only needs to end the ppoll.
}

}  // namespace

SignalScope::SignalScope() {
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

SignalScope::~SignalScope() {
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

int StopSignalsReceived() { return g_stop_signals; }
int LastStopSignal() { return g_last_stop_signal; }

}  // namespace fleet::launcher_internal
