#include "cli/args.h"

#include <algorithm>
#include <charconv>

#include "support/logging.h"
#include "support/text.h"

namespace fleet {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

}  // namespace

Status SetGlobalOption(const std::string& flag, const std::string& value, GlobalOptions& global) {
  if (flag == "--set") {
    // The config reader checks each override and names it; an empty one included.
    global.overrides.push_back(value);
    return OkStatus();
  }
  if (value.empty()) return InvalidArgument(flag + ": expected a value, got ''");
  if (flag == "--config") {
    if (!global.config_path.empty()) {
      return InvalidArgument("--config is given twice (" + QuoteForMessage(global.config_path) +
                             " and " + QuoteForMessage(value) + "); give one config file");
    }
    global.config_path = value;
    return OkStatus();
  }
  if (flag == "--log-level") {
    if (!global.log_level.empty()) {
      return InvalidArgument("--log-level is given twice (" + QuoteForMessage(global.log_level) +
                             " and " + QuoteForMessage(value) + ")");
    }
    if (Status s = SetLogLevel(value); !s.ok()) return s.WithContext("--log-level");
    global.log_level = value;
    return OkStatus();
  }
  return InvalidArgument(QuoteForMessage(flag) + " is not a global option");
}

std::optional<Words> ParseWords(const std::string& command, const std::vector<std::string>& args,
                                const FlagSet& flags, GlobalOptions& global, const char* usage,
                                std::ostream& err) {
  auto usage_error = [&](const std::string& message) -> std::optional<Words> {
    err << "fleet-host " << command << ": " << ForTerminal(message, 1024) << "; usage: " << usage
        << "\n";
    return std::nullopt;
  };
  Words w;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool global_flag = a == "--config" || a == "--set";
    const bool single = Contains(flags.single, a);
    if (global_flag || single || Contains(flags.repeatable, a)) {
      if (i + 1 >= args.size()) return usage_error(a + " needs a value");
      const std::string& v = args[++i];
      if (global_flag) {
        if (Status s = SetGlobalOption(a, v, global); !s.ok()) return usage_error(s.message());
        continue;
      }
      if (v.empty()) return usage_error(a + ": expected a value, got ''");
      std::vector<std::string>& values = w.values[a];
      if (single && !values.empty()) {
        return usage_error(a + " is given twice (" + QuoteForMessage(values[0]) + " and " +
                           QuoteForMessage(v) + "); it takes one value");
      }
      values.push_back(v);
    } else if (Contains(flags.boolean, a)) {
      w.flags.push_back(a);
    } else if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option " + QuoteForMessage(a));
    } else {
      w.positional.push_back(a);
    }
  }
  return w;
}

bool Has(const Words& w, const std::string& flag) {
  return std::find(w.flags.begin(), w.flags.end(), flag) != w.flags.end();
}

std::string One(const Words& w, const std::string& flag) {
  auto it = w.values.find(flag);
  return it == w.values.end() || it->second.empty() ? "" : it->second.front();
}

StatusOr<int64_t> IntFlag(std::string_view flag, std::string_view text, int64_t min,
                          int64_t max) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  // from_chars takes digits with an optional '-' only (no '+', no spaces, no base prefix) and
  // reports a value past int64 as out of range instead of wrapping.
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    return InvalidArgument(std::string(flag) + ": expected an integer from " +
                           std::to_string(min) + " to " + std::to_string(max) + ", got " +
                           QuoteForMessage(text));
  }
  return value;
}

}  // namespace fleet
