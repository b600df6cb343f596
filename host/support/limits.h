// Caps on values that size a job, shared by every reader of such a value (fleet.toml, the
// launchers' environment variables, checkpoint manifests, the command line), so that each
// refuses the same values and none meets them later as an int overflow, a huge allocation or
// a loop that does not end.
#pragma once

#include <cstdint>

namespace fleet {

// Trainers of one job, so ranks are below it. Ranks and world sizes are int everywhere
// downstream (communicators, the plugin ABI).
inline constexpr int64_t kMaxWorldSize = 65536;

}  // namespace fleet
