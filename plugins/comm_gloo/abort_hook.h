// Releasing threads blocked on a Gloo TCP pair from another thread.
//
// Gloo (2022-05) has no abort. transport::Pair::close() only closes the socket: a thread
// waiting on an unbound buffer of that pair keeps waiting until its timeout. The TCP pair's
// signalExceptionExternal() is what Gloo itself calls when a wait times out: it stores an
// exception, wakes every buffer pending on the pair (their waits then throw) and closes the
// pair, which the peer sees as a dropped connection. Debian's package ships the library symbol
// but not every header tcp/pair.h needs (gloo/common/memory.h), so abort_hook.cc declares that
// one member itself and calls it only after checking, at run time, that the pair really is a
// gloo::transport::tcp::Pair whose transport::Pair base sits at offset 0.
#pragma once

#include <gloo/transport/pair.h>

#include <string>

namespace fleet_gloo {

// Fails everything pending on `pair` and closes it. Returns false when the pair is not a TCP
// pair of the expected layout (the caller then falls back to Pair::close()). Never throws.
bool SignalPairError(gloo::transport::Pair* pair, const std::string& message) noexcept;

}  // namespace fleet_gloo
