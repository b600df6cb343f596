#include "loop_waker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include <gloo/transport/tcp/device.h>

namespace fleet_gloo {
namespace {

// Called by the loop for every tick the eventfd causes. Reading the eventfd here would stop
// the ticks, which is what must not happen while a waker lives.
class Nothing final : public gloo::transport::tcp::Handler {
 public:
  void handleEvents(int) override {}
};

// Never destroyed: a loop may still dispatch an event it picked up before the eventfd closed,
// also during the process's exit.
gloo::transport::tcp::Handler& NothingHandler() {
  static auto* handler = new Nothing();
  return *handler;
}

}  // namespace

LoopWaker::LoopWaker(gloo::transport::Device* device) noexcept {
  auto* tcp = dynamic_cast<gloo::transport::tcp::Device*>(device);
  if (tcp == nullptr) return;
  const int fd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return;  // e.g. out of descriptors: teardown is slow, not wrong
  try {
    tcp->registerDescriptor(fd, EPOLLIN, &NothingHandler());
  } catch (...) {
    close(fd);
    return;
  }
  fd_ = fd;
}

LoopWaker::~LoopWaker() {
  if (fd_ < 0) return;
  // Drained first, so that a copy of the descriptor a concurrent fork holds until its exec
  // does not keep the loop spinning.
  uint64_t count = 0;
  (void)!read(fd_, &count, sizeof(count));
  close(fd_);
}

}  // namespace fleet_gloo
