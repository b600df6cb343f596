// Logging through spdlog. The host logs as "fleet"; each plugin gets a logger named after it, so
// every line says where it came from. All loggers share one stderr sink and one level.
//
// Every line passes through LogSafe on its way to the sink, whoever logged it (the host, a
// plugin through the host API, code that calls spdlog directly on these loggers): log messages
// carry input (names, values, peers' words, a plugin's text) and must neither drive the terminal
// nor forge lines of their own nor flood the log.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "support/status.h"

namespace fleet {

// The bytes of one message a log line keeps; the rest is cut with a note of how much.
constexpr size_t kMaxLogMessageBytes = 8192;

// `message` as a log line writes it: control characters (escape sequences among them), DEL and
// invalid UTF-8 as \xHH (ForTerminal), trailing line breaks dropped, every further line indented
// by four spaces so that it cannot pass for a line of its own, and cut after
// kMaxLogMessageBytes bytes.
std::string LogSafe(std::string_view message);

// Sets the level of every logger: trace, debug, info, warn, error or off.
Status SetLogLevel(std::string_view level);

// The host's logger.
spdlog::logger& Log();

// The logger of plugin `name` (created on first use).
std::shared_ptr<spdlog::logger> PluginLogger(std::string_view name);

}  // namespace fleet
