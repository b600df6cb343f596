#include "support/logging.h"

#include <mutex>
#include <string>

#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "support/text.h"

namespace fleet {
namespace {

// Text that LogSafe would return unchanged: printable ASCII only, within the cap.
bool AlreadySafe(std::string_view text) {
  if (text.size() > kMaxLogMessageBytes) return false;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

// A logger's name on one line (names come from plugins too).
std::string SafeName(std::string_view name) {
  std::string out;
  for (char c : ForTerminal(name, 256)) {
    if (c == '\n') {
      out += "\\x0a";
    } else if (c == '\t') {
      out += "\\x09";
    } else {
      out += c;
    }
  }
  return out;
}

// Sits in front of the real sink and hands it every message made safe. A sink rather than a
// pattern flag, so that no logger's set_pattern (ours or a caller's) can bypass it.
class EscapingSink final : public spdlog::sinks::sink {
 public:
  explicit EscapingSink(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}

  void log(const spdlog::details::log_msg& msg) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    const std::string_view name(msg.logger_name.data(), msg.logger_name.size());
    if (AlreadySafe(payload) && AlreadySafe(name)) {
      inner_->log(msg);
      return;
    }
    const std::string safe_payload = LogSafe(payload);
    const std::string safe_name = AlreadySafe(name) ? std::string(name) : SafeName(name);
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(safe_payload.data(), safe_payload.size());
    copy.logger_name = spdlog::string_view_t(safe_name.data(), safe_name.size());
    inner_->log(copy);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  spdlog::sink_ptr inner_;
};

struct Loggers {
  std::mutex mu;
  spdlog::sink_ptr sink = std::make_shared<EscapingSink>(
      std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
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

std::string LogSafe(std::string_view message) {
  // A trailing line break (plugins often end their messages with one) would only leave a
  // blank line; \r too, since it would return the cursor over the line.
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
    message.remove_suffix(1);
  }
  const std::string escaped = ForTerminal(message, kMaxLogMessageBytes);
  std::string out;
  out.reserve(escaped.size());
  for (char c : escaped) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

Status SetLogLevel(std::string_view level) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  // from_str maps anything unknown to "off"; only "off" itself may mean off.
  if (parsed == spdlog::level::off && level != "off") {
    return InvalidArgument("unknown log level " + QuoteForMessage(level) +
                           " (expected trace, debug, info, warn, error or off)");
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
