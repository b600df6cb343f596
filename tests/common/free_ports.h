// Loopback ports for tests that start servers in other processes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

namespace fleet::testing {

// `count` distinct loopback ports nobody listens on right now, or an empty vector when the
// kernel hands none out. Every socket stays bound until all are chosen, so one call never
// returns the same port twice (picking them one at a time can, since a closed port is free to
// be handed out again at once). Another process may still take a port before the server under
// test binds it; that shows as "address in use", never as a wrong result.
inline std::vector<int> FreeLoopbackPorts(std::size_t count) {
  std::vector<int> fds;
  std::vector<int> ports;
  for (std::size_t i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      break;
    }
    ports.push_back(ntohs(addr.sin_port));
  }
  for (const int fd : fds) ::close(fd);
  if (ports.size() != count) ports.clear();
  return ports;
}

inline int FreeLoopbackPort() {
  const std::vector<int> ports = FreeLoopbackPorts(1);
  return ports.empty() ? 0 : ports.front();
}

}  // namespace fleet::testing
