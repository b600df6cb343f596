// `fleet-host plugins`: what is installed, what each plugin provides, and what was refused.
// Inspection loads every plugin it finds (entries are cheap by contract), each in a child
// process of its own, but initialises no device beyond asking for its count and properties.
#include <chrono>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/device_info.h"
#include "fleet/fleet_plugin.h"
#include "plugin/device.h"
#include "plugin/registry.h"
#include "plugin/selection.h"
#include "support/isolate.h"
#include "support/text.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

// How long one plugin's entry may take to load before it is listed as hung.
constexpr std::chrono::seconds kProbeDeadline{10};

std::string AbiOf(const PluginRecord& p) {
  return std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
}

nlohmann::json PluginJson(const PluginRegistry& registry, const PluginRecord& p, bool detailed) {
  nlohmann::json j = {{"name", p.name},       {"file", p.file.string()},
                      {"abi", AbiOf(p)},      {"version", p.version},
                      {"description", p.description}, {"load_ms", p.load_ms}};
  j["components"] = nlohmann::json::array();
  for (const std::string& kc : p.components) {
    size_t colon = kc.find(':');
    std::string kind = kc.substr(0, colon), name = kc.substr(colon + 1);
    nlohmann::json cj = {{"kind", kind}, {"name", name}};
    for (int32_t k = FLEET_COMPONENT_DEVICE; k <= FLEET_COMPONENT_OP_SCHEMA; ++k) {
      if (ComponentKindName(k) != kind) continue;
      if (const ComponentRecord* c = registry.Find(k, name)) {
        cj["summary"] = c->summary;
        if (detailed && k == FLEET_COMPONENT_DEVICE) cj["details"] = DeviceDetailsJson(c);
        if (k == FLEET_COMPONENT_KERNELS) {
          cj["kernel_count"] = c->table<FleetKernelsVTable>()->count;
        }
      }
    }
    j["components"].push_back(cj);
  }
  j["notes"] = p.notes;
  return j;
}

void PrintPluginText(const nlohmann::json& p, std::ostream& out) {
  out << p["name"].get<std::string>() << " " << p["version"].get<std::string>() << " — "
      << p["description"].get<std::string>() << "\n";
  out << "  file:        " << p["file"].get<std::string>() << "\n";
  out << "  ABI:         " << p["abi"].get<std::string>() << "\n";
  if (p["components"].empty()) {
    out << "  components:  none\n";
  } else {
    out << "  components:\n";
    for (const auto& c : p["components"]) {
      char line[256];
      std::snprintf(line, sizeof(line), "    %-13s %-16s %s\n", c["kind"].get<std::string>().c_str(),
                    c["name"].get<std::string>().c_str(),
                    c.value("summary", std::string()).c_str());
      out << line;
      if (c.contains("details")) {
        const auto& d = c["details"];
        if (d.contains("error")) {
          out << "      error: " << d["error"].get<std::string>() << "\n";
        } else if (d["count"].get<int>() == 0) {
          out << "      no device present\n";
        } else {
          for (const auto& dev : d["devices"]) {
            if (dev.contains("error")) {
              out << "      #" << dev["ordinal"] << ": " << dev["error"].get<std::string>() << "\n";
              continue;
            }
            out << "      #" << dev["ordinal"] << " " << dev["model"].get<std::string>()
                << " (physical " << dev["physical_id"] << ", "
                << HumanBytes(dev["total_memory"].get<uint64_t>()) << ", "
                << dev["compute_units"] << " units, caps " << CapsText(dev["caps"]) << ")\n";
          }
        }
      }
    }
  }
  for (const auto& n : p["notes"]) out << "  note:        " << n.get<std::string>() << "\n";
}

}  // namespace

int PluginsCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                   std::ostream& out, std::ostream& err) {
  bool json = false, show_rejected = false;
  std::string target;
  for (const std::string& a : args) {
    if (a == "--json") {
      json = true;
    } else if (a == "--rejected") {
      show_rejected = true;
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host plugins: unknown option '" << a << "'\n";
      return kExitUsage;
    } else if (target.empty()) {
      target = a;
    } else {
      err << "fleet-host plugins: give at most one NAME or PATH\n";
      return kExitUsage;
    }
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  const LoadOptions options = LoadOptionsFor(*config);

  // Each plugin is loaded in a child process of its own (the children run in parallel), so a
  // plugin whose entry crashes or hangs is listed as rejected, with the signal, instead of
  // taking the listing down. The parent loads nothing.
  std::vector<std::string> units;  // what each child loads: a file, or the NAME|PATH asked for
  if (target.empty()) {
    for (const fs::path& f : PluginRegistry(options).Discover()) units.push_back(f.string());
  } else {
    units.push_back(target);
  }
  const bool detailed = !target.empty();
  std::vector<StatusOr<IsolatedChild>> children;
  for (const std::string& unit : units) {
    children.push_back(StartIsolated([&options, unit, detailed] {
      PluginRegistry registry(options);
      auto loaded = registry.Load(unit);
      nlohmann::json part = {{"plugins", nlohmann::json::array()},
                             {"rejected", nlohmann::json::array()}};
      for (const auto& p : registry.plugins()) {
        part["plugins"].push_back(PluginJson(registry, *p, detailed));
      }
      for (const Rejection& r : registry.rejected()) {
        part["rejected"].push_back(
            {{"file", r.file.string()}, {"plugin", r.plugin}, {"reason", r.reason.ToString()}});
      }
      if (!loaded.ok()) {
        part["error"] = loaded.status().ToString();
        part["error_message"] = loaded.status().message();
      }
      return part.dump();
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + kProbeDeadline;

  nlohmann::json doc;
  // Version 1: search_path, plugins (name, file, abi, version, description, load_ms,
  // components, notes), rejected, error. Bumped when a field changes meaning or goes away.
  doc["schema_version"] = 1;
  doc["search_path"] = nlohmann::json::array();
  for (const auto& d : options.search_dirs) doc["search_path"].push_back(d.string());
  doc["plugins"] = nlohmann::json::array();
  doc["rejected"] = nlohmann::json::array();
  Status target_status;
  // Components clash across plugins as they would in one process: the later plugin loses.
  std::map<std::pair<std::string, std::string>, std::string> owners;
  for (size_t i = 0; i < units.size(); ++i) {
    if (!children[i].ok()) return Fail(err, children[i].status());
    IsolatedResult r = FinishIsolated(*children[i], deadline);
    nlohmann::json part = r.answered ? nlohmann::json::parse(r.answer, nullptr, false)
                                     : nlohmann::json();
    if (!part.is_object()) {
      const Status why = Aborted("the plugin " + r.Describe() +
                                 " while loading (probed in a child process)");
      doc["rejected"].push_back({{"file", units[i]},
                                 {"plugin", PluginNameFromFile(units[i])},
                                 {"reason", why.ToString()}});
      if (!target.empty()) target_status = why.WithContext(units[i]);
      continue;
    }
    for (auto& p : part["plugins"]) {
      std::string clash;
      for (const auto& c : p["components"]) {
        auto [it, fresh] = owners.emplace(
            std::pair{c["kind"].get<std::string>(), c["name"].get<std::string>()},
            p["name"].get<std::string>());
        if (!fresh && clash.empty()) {
          clash = "plugin " + p["file"].get<std::string>() + ": " +
                  c["kind"].get<std::string>() + " '" + c["name"].get<std::string>() +
                  "' is already registered by plugin '" + it->second + "'";
        }
      }
      if (clash.empty()) {
        doc["plugins"].push_back(std::move(p));
      } else {
        doc["rejected"].push_back({{"file", p["file"]},
                                   {"plugin", p["name"]},
                                   {"reason", AlreadyExists(clash).ToString()}});
      }
    }
    for (auto& rj : part["rejected"]) doc["rejected"].push_back(std::move(rj));
    if (part.contains("error") && !target.empty()) {
      target_status = Status(Code::kNotFound, part["error_message"].get<std::string>());
      if (part["rejected"].empty()) doc["error"] = part["error"];
    }
  }
  if (json) {
    out << doc.dump(2) << "\n";
  } else {
    if (target.empty()) {
      out << "Plugin search path:\n";
      for (const auto& d : doc["search_path"]) out << "  " << d.get<std::string>() << "\n";
      out << "\n";
    }
    for (const auto& p : doc["plugins"]) {
      PrintPluginText(p, out);
      out << "\n";
    }
    if (show_rejected || !target.empty()) {
      for (const auto& r : doc["rejected"]) {
        out << "rejected " << r["file"].get<std::string>() << "\n  "
            << r["reason"].get<std::string>() << "\n";
      }
    }
    if (target.empty()) {
      out << doc["plugins"].size() << " plugin(s) loaded, " << doc["rejected"].size()
          << " rejected";
      if (!doc["rejected"].empty() && !show_rejected) out << " (see --rejected)";
      out << "\n";
    }
  }
  if (!target_status.ok()) {
    // The child's message already says what failed; keep it as it was.
    err << "fleet-host: " << ForTerminal(target_status.message()) << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace fleet
