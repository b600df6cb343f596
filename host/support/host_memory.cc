#include "support/host_memory.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "support/text.h"

namespace fleet {

uint64_t HostMemoryBytes() {
  static const uint64_t bytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    uint64_t limit = pages > 0 && page > 0
                         ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                         : UINT64_MAX;
    for (int which : {RLIMIT_AS, RLIMIT_DATA}) {
      struct rlimit rl{};
      if (::getrlimit(which, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        limit = std::min<uint64_t>(limit, static_cast<uint64_t>(rl.rlim_cur));
      }
    }
    return limit;
  }();
  return bytes;
}

uint64_t AddressSpaceLimitBytes() {
  static const uint64_t bytes = [] {
    struct rlimit rl{};
    if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    return static_cast<uint64_t>(rl.rlim_cur);
  }();
  return bytes;
}

uint64_t DefaultThreadStackBytes() {
  pthread_attr_t attr;
  size_t size = 0;
  if (::pthread_getattr_default_np(&attr) == 0) {
    ::pthread_attr_getstacksize(&attr, &size);
    ::pthread_attr_destroy(&attr);
  }
  return size > 0 ? size : uint64_t{8} << 20;
}

std::string BytesText(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::string text = std::to_string(bytes) + " bytes";
  if (bytes < 1024) return text;
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  for (v /= 1024; v >= 1024 && unit + 1 < std::size(kUnits); v /= 1024) ++unit;
  return text + " (" + FormatFixed(v, 1) + " " + kUnits[unit] + ")";
}

}  // namespace fleet
