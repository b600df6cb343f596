// Logging through spdlog. The host logs as "fleet"; each plugin gets a logger named after it, so
// every line says where it came from. All loggers share one stderr sink and one level.
#pragma once

#include <memory>
#include <string_view>

#include <spdlog/spdlog.h>

#include "support/status.h"

namespace fleet {

// Sets the level of every logger: trace, debug, info, warn, error or off.
Status SetLogLevel(std::string_view level);

// The host's logger.
spdlog::logger& Log();

// The logger of plugin `name` (created on first use).
std::shared_ptr<spdlog::logger> PluginLogger(std::string_view name);

}  // namespace fleet
