#include "abort_hook.h"

#include <cstring>
#include <exception>
#include <typeinfo>

// The one member of gloo::transport::tcp::Pair this plugin calls (see abort_hook.h). Declared
// on an incomplete stand-in with the same qualified name, so the call binds to the exported
// symbol of libgloo; default visibility because the plugin builds with hidden visibility.
namespace gloo::transport::tcp {
class __attribute__((visibility("default"))) Pair {
 public:
  std::exception_ptr signalExceptionExternal(const std::string& msg);
};
}  // namespace gloo::transport::tcp

namespace fleet_gloo {

bool SignalPairError(gloo::transport::Pair* pair, const std::string& message) noexcept {
  try {
    if (pair == nullptr) return false;
    // The dynamic type must be the TCP pair, with the transport::Pair subobject first (so the
    // same address is the tcp::Pair object).
    if (std::strcmp(typeid(*pair).name(), "N4gloo9transport3tcp4PairE") != 0) return false;
    if (dynamic_cast<void*>(pair) != static_cast<void*>(pair)) return false;
    auto* tcp_pair = reinterpret_cast<gloo::transport::tcp::Pair*>(pair);
    (void)tcp_pair->signalExceptionExternal(message);
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace fleet_gloo
