// `fleet-host plugins`: what is installed, what each plugin provides, and what was refused.
// Inspection loads every plugin it finds (entries are cheap by contract) but initialises no
// device beyond asking for its count and properties.
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/device_info.h"
#include "fleet/fleet_plugin.h"
#include "plugin/device.h"
#include "plugin/registry.h"
#include "plugin/selection.h"

namespace fleet {
namespace {

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
  PluginRegistry registry(LoadOptionsFor(*config));
  Status target_status;
  if (target.empty()) {
    registry.LoadAll();
  } else {
    auto loaded = registry.Load(target);
    if (!loaded.ok()) target_status = loaded.status();
  }

  nlohmann::json doc;
  // Version 1: search_path, plugins (name, file, abi, version, description, load_ms,
  // components, notes), rejected, error. Bumped when a field changes meaning or goes away.
  doc["schema_version"] = 1;
  doc["search_path"] = nlohmann::json::array();
  for (const auto& d : registry.options().search_dirs) doc["search_path"].push_back(d.string());
  doc["plugins"] = nlohmann::json::array();
  for (const auto& p : registry.plugins()) {
    doc["plugins"].push_back(PluginJson(registry, *p, !target.empty()));
  }
  doc["rejected"] = nlohmann::json::array();
  for (const Rejection& r : registry.rejected()) {
    doc["rejected"].push_back(
        {{"file", r.file.string()}, {"plugin", r.plugin}, {"reason", r.reason.ToString()}});
  }
  if (!target_status.ok() && registry.rejected().empty()) {
    doc["error"] = target_status.ToString();
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
        out << "rejected " << r["file"].get<std::string>() << "\n  " << r["reason"].get<std::string>()
            << "\n";
      }
    }
    if (target.empty()) {
      out << registry.plugins().size() << " plugin(s) loaded, " << registry.rejected().size()
          << " rejected";
      if (!registry.rejected().empty() && !show_rejected) out << " (see --rejected)";
      out << "\n";
    }
  }
  if (!target_status.ok()) return Fail(err, target_status);
  return kExitOk;
}

}  // namespace fleet
