// Keeping a Gloo TCP device's event loop ticking while pairs are torn down.
//
// Gloo (2022-05) closes a connected TCP pair by unregistering its socket from the device's
// epoll loop, and Loop::unregisterDescriptor then waits for the loop's next tick so the pair's
// handler cannot run once it returns. An idle loop ticks only when epoll_wait's 10 ms timeout
// expires, so every pair closed from outside the loop thread costs up to 10 ms: a communicator
// of n ranks pays (n - 1) ticks to destroy or abort, and n ranks of one process (the
// single_process_multi_thread devices) pay n(n - 1), 21 s for 64 of them. Joining the loop
// thread when the device goes costs one more tick.
//
// A LoopWaker registers an eventfd that stays readable, level-triggered, with a handler that
// does nothing: while it lives, epoll_wait returns at once and the loop ticks continuously, so
// those waits end within microseconds. The loop thread spins for that time, which is why a
// waker must only span a teardown. Only tcp::Device's public registerDescriptor is used.
#pragma once

#include <gloo/transport/device.h>

namespace fleet_gloo {

class LoopWaker {
 public:
  // Does nothing (the waits then take their usual time) when `device` is not a TCP device or
  // the eventfd cannot be made or registered. Never throws.
  explicit LoopWaker(gloo::transport::Device* device) noexcept;
  // Drains and closes the eventfd, which removes it from the loop's epoll set; a handler call
  // the loop has already picked up is harmless (the handler is static and stateless). The
  // device may already be gone.
  ~LoopWaker();
  LoopWaker(const LoopWaker&) = delete;
  LoopWaker& operator=(const LoopWaker&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace fleet_gloo
