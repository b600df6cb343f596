// `fleet-host devices`: every unit of every device component the plugins on the search path
// provide, as llama.cpp's --list-devices lists its backends' devices. Listing loads each plugin
// (entries are cheap by contract) and asks each device for its count and properties only.
#include <cstdio>

#include "cli/cli.h"
#include "cli/device_info.h"
#include "fleet/fleet_plugin.h"
#include "plugin/device.h"
#include "plugin/selection.h"

namespace fleet {

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

namespace {

nlohmann::json CapsJson(uint32_t caps) {
  nlohmann::json names = nlohmann::json::array();
  if (caps & FLEET_DEVICE_CAP_HOST_MEMORY) names.push_back("host-memory");
  if (caps & FLEET_DEVICE_CAP_SYNC_STREAMS) names.push_back("sync-streams");
  if (caps & FLEET_DEVICE_CAP_PINNED_HOST) names.push_back("pinned-host");
  if (caps & FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS) names.push_back("cpu-random-streams");
  return names;
}

}  // namespace

std::string CapsText(const nlohmann::json& caps) {
  std::string out;
  for (const auto& c : caps) out += (out.empty() ? "" : ",") + c.get<std::string>();
  return out.empty() ? "none" : out;
}

nlohmann::json DeviceDetailsJson(const ComponentRecord* c) {
  Device device(c);
  nlohmann::json j;
  auto count = device.Count();
  if (!count.ok()) {
    j["error"] = count.status().ToString();
    return j;
  }
  j["count"] = *count;
  j["devices"] = nlohmann::json::array();
  for (int32_t i = 0; i < *count; ++i) {
    auto props = device.Props(i);
    if (!props.ok()) {
      j["devices"].push_back({{"ordinal", i}, {"error", props.status().ToString()}});
      continue;
    }
    j["devices"].push_back({{"ordinal", i},
                            {"model", props->model},
                            {"physical_id", props->physical_id},
                            {"total_memory", props->total_memory},
                            {"alignment", props->alignment},
                            {"compute_units", props->compute_units},
                            {"caps", CapsJson(props->caps)}});
  }
  return j;
}

int DevicesCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                   std::ostream& out, std::ostream& err) {
  bool json = false;
  for (const std::string& a : args) {
    if (a == "--json") {
      json = true;
    } else {
      err << "fleet-host devices: unexpected argument '" << a
          << "'; usage: fleet-host devices [--json]\n";
      return kExitUsage;
    }
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  PluginRegistry registry(LoadOptionsFor(*config));
  registry.LoadAll();

  // Version 1: devices (one entry per unit: device, plugin, ordinal and its properties) and
  // absent (device components with no unit here, or whose count failed, with the reason).
  nlohmann::json doc = {{"schema_version", 1},
                        {"devices", nlohmann::json::array()},
                        {"absent", nlohmann::json::array()}};
  for (const ComponentRecord* c : registry.Components(FLEET_COMPONENT_DEVICE)) {
    nlohmann::json d = DeviceDetailsJson(c);
    if (d.contains("error") || d["count"].get<int>() == 0) {
      doc["absent"].push_back(
          {{"device", c->name},
           {"plugin", c->plugin},
           {"reason", d.contains("error") ? d["error"].get<std::string>()
                                          : std::string("no unit present on this machine")}});
      continue;
    }
    for (nlohmann::json unit : d["devices"]) {
      unit["device"] = c->name;
      unit["plugin"] = c->plugin;
      doc["devices"].push_back(std::move(unit));
    }
  }
  if (json) {
    out << doc.dump(2) << "\n";
    return kExitOk;
  }
  out << "Available devices:\n";
  for (const auto& u : doc["devices"]) {
    const std::string id =
        u["device"].get<std::string>() + ":" + std::to_string(u["ordinal"].get<int>());
    if (u.contains("error")) {
      out << "  " << id << "  error: " << u["error"].get<std::string>() << "\n";
      continue;
    }
    char line[512];
    std::snprintf(line, sizeof(line), "  %-8s %-36s %10s  %4d units  %s  (plugin %s)\n",
                  id.c_str(), u["model"].get<std::string>().c_str(),
                  HumanBytes(u["total_memory"].get<uint64_t>()).c_str(),
                  u["compute_units"].get<int>(), CapsText(u["caps"]).c_str(),
                  u["plugin"].get<std::string>().c_str());
    out << line;
  }
  if (doc["devices"].empty()) out << "  none\n";
  for (const auto& a : doc["absent"]) {
    out << "  " << a["device"].get<std::string>() << ": " << a["reason"].get<std::string>()
        << " (plugin " << a["plugin"].get<std::string>() << ")\n";
  }
  return kExitOk;
}

}  // namespace fleet
