#include "cli/args.h"

#include <algorithm>

namespace fleet {

std::optional<Words> ParseWords(const std::string& command, const std::vector<std::string>& args,
                                const std::vector<std::string>& with_value,
                                const std::vector<std::string>& boolean, GlobalOptions& global,
                                const char* usage, std::ostream& err) {
  Words w;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool takes = std::find(with_value.begin(), with_value.end(), a) != with_value.end() ||
                       a == "--config" || a == "--set";
    if (takes) {
      if (i + 1 >= args.size()) {
        err << "fleet-host " << command << ": " << a << " needs a value; usage: " << usage << "\n";
        return std::nullopt;
      }
      const std::string& v = args[++i];
      if (a == "--config") {
        global.config_path = v;
      } else if (a == "--set") {
        global.overrides.push_back(v);
      } else {
        w.values[a].push_back(v);
      }
    } else if (std::find(boolean.begin(), boolean.end(), a) != boolean.end()) {
      w.flags.push_back(a);
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host " << command << ": unknown option '" << a << "'; usage: " << usage
          << "\n";
      return std::nullopt;
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
  return it == w.values.end() || it->second.empty() ? "" : it->second.back();
}

}  // namespace fleet
