#include "support/logging.h"

#include <mutex>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace fleet {
namespace {

struct Loggers {
  std::mutex mu;
  spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  spdlog::level::level_enum level = spdlog::level::info;
  std::shared_ptr<spdlog::logger> host = Make("fleet");

  std::shared_ptr<spdlog::logger> Make(const std::string& name) {
    auto logger = std::make_shared<spdlog::logger>(name, sink);
    logger->set_pattern("[%H:%M:%S.%e] [%n] [%^%l%$] %v");
    logger->set_level(level);
    return logger;
  }
};

Loggers& State() {
  static Loggers* loggers = new Loggers();  // never destroyed: plugins may log during exit
  return *loggers;
}

}  // namespace

Status SetLogLevel(std::string_view level) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  // from_str maps anything unknown to "off"; only "off" itself may mean off.
  if (parsed == spdlog::level::off && level != "off") {
    return InvalidArgument("unknown log level '" + std::string(level) +
                           "' (expected trace, debug, info, warn, error or off)");
  }
  Loggers& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.level = parsed;
  s.host->set_level(parsed);
  spdlog::apply_all([parsed](const std::shared_ptr<spdlog::logger>& l) { l->set_level(parsed); });
  return OkStatus();
}

spdlog::logger& Log() { return *State().host; }

std::shared_ptr<spdlog::logger> PluginLogger(std::string_view name) {
  Loggers& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  std::string full = "plugin:" + std::string(name);
  if (auto existing = spdlog::get(full)) return existing;
  auto logger = s.Make(full);
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace fleet
