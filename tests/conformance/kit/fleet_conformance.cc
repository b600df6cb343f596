// fleet-conformance: the plugin author's conformance kit. Loads a plugin the way fleet-host does,
// finds its components, runs the matching suite for each (device kernels, communicator,
// transport, pass) as a child process, and prints one table per suite: per op x dtype, per
// collective x world size, per pass x job context, and a row for each test that made no call.
//
// Exit status: 0 when nothing failed, 1 when something failed (or, with --require-all, when
// something is not provided), 2 for a usage error or a plugin or suite that cannot be run.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "fleet/fleet_plugin.h"
#include "plugin/device.h"
#include "plugin/registry.h"
#include "suite_runner.h"
#include "support/isolate.h"
#include "support/text.h"

namespace fleet::kit {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage = R"(Usage: fleet-conformance [OPTIONS] PLUGIN

Runs Fleet's conformance suites against PLUGIN (a plugin name found on the plugin search path,
or the path of its .so): the device suite for each device (and each device its kernels are
for), the communicator suite for each communicator, the transport suite for each transport and
the pass suite for each pass it registers.

Options:
  --suite device|comm|transport|pass
                     run only this suite (repeatable)
  --component NAME   check only the component of that name
  --filter PATTERN   run only the tests matching this GoogleTest filter
  --require-all      count "not provided" as a failure (exit 1)
  --json             print the report as JSON (schema_version 1)
  --test-timeout S   kill and fail a test that makes no progress for S seconds (default 300)
  --suite-dir DIR    where the suite binaries are (default: next to this program, then
                     ../libexec/fleet/conformance)
  --keep DIR         keep each suite's log and report files under DIR
  -h, --help         show this help

Results: "passed"; "failed" with the first failure; "skipped" with why (a world size the
communicator does not support, the stream-exact random level on a device that does not declare
FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS); "not provided" (no kernel for that op and dtype, a
collective that answers UNIMPLEMENTED, a job a pass refuses).

The device suite compares with NumPy references: it needs python3 with NumPy (Debian:
python3-numpy). Environment the suites read (set by this program): FLEET_CONFORMANCE_DEVICE,
FLEET_CONFORMANCE_COMM, FLEET_CONFORMANCE_COMM_OPTIONS, FLEET_CONFORMANCE_TRANSPORT,
FLEET_CONFORMANCE_PASS, FLEET_CONFORMANCE_REF_DIR, FLEET_CONFORMANCE_REPORT, FLEET_PLUGIN_PATH.
)";

struct Options {
  std::string plugin;
  std::set<std::string> suites;
  std::string component;
  std::string filter = "*";
  bool require_all = false;
  bool json = false;
  int test_timeout_s = 300;
  fs::path suite_dir;
  fs::path keep;
};

struct Job {
  std::string suite;      // "device", "comm", "transport", "pass"
  std::string component;
  std::string binary;     // file name of the suite
  std::map<std::string, std::string> env;
  std::string note;       // shown above the table
};

fs::path ExeDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path(".") : exe.parent_path();
}

fs::path FindSuite(const Options& o, const std::string& binary) {
  std::vector<fs::path> dirs;
  if (!o.suite_dir.empty()) dirs.push_back(o.suite_dir);
  dirs.push_back(ExeDir());
  dirs.push_back(ExeDir() / ".." / "libexec" / "fleet" / "conformance");
  for (const fs::path& d : dirs) {
    if (fs::exists(d / binary)) return fs::weakly_canonical(d / binary);
  }
  return dirs.front() / binary;
}

// The NumPy references of the installed kit; the build's suite has its source path compiled in.
std::string RefDir() {
  fs::path ref = ExeDir() / ".." / "share" / "fleet" / "conformance" / "ref";
  return fs::exists(ref) ? fs::weakly_canonical(ref).string() : "";
}

std::string RandomLevel(const ComponentRecord* device) {
  Device d(device);
  auto count = d.Count();
  if (!count.ok()) return "device count failed: " + count.status().ToString();
  if (*count == 0) return "no unit of this device on this machine: its tests will skip";
  auto props = d.Props(0);
  if (!props.ok()) return "props failed: " + props.status().ToString();
  return (props->caps & FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS)
             ? "random kernels: stream-exact level (declares the CPU plugin's streams)"
             : "random kernels: statistical level only; not bit-identical to the CPU plugin "
               "(FLEET_DEVICE_CAP_CPU_RANDOM_STREAMS not declared)";
}

std::vector<Job> JobsFor(const PluginRegistry& registry, const PluginRecord& plugin,
                         const Options& o) {
  std::vector<Job> jobs;
  std::set<std::string> devices;
  for (const std::string& kc : plugin.components) {
    const std::string kind = kc.substr(0, kc.find(':'));
    const std::string name = kc.substr(kc.find(':') + 1);
    if (!o.component.empty() && name != o.component) continue;
    if (kind == ComponentKindName(FLEET_COMPONENT_DEVICE)) {
      devices.insert(name);
    } else if (kind == ComponentKindName(FLEET_COMPONENT_KERNELS)) {
      // Kernels for a device of another plugin are checked on that device.
      const ComponentRecord* c = registry.Find(FLEET_COMPONENT_KERNELS, name);
      const auto* vt = c != nullptr ? c->table<FleetKernelsVTable>() : nullptr;
      for (size_t i = 0; vt != nullptr && i < vt->count; ++i) {
        if (vt->kernels[i] != nullptr && vt->kernels[i]->device != nullptr) {
          devices.insert(vt->kernels[i]->device);
        }
      }
    } else if (kind == ComponentKindName(FLEET_COMPONENT_COMMUNICATOR)) {
      jobs.push_back({"comm", name, "fleet_comm_conformance_tests",
                      {{"FLEET_CONFORMANCE_COMM", name}}, ""});
    } else if (kind == ComponentKindName(FLEET_COMPONENT_TRANSPORT)) {
      jobs.push_back({"transport", name, "fleet_transport_conformance_tests",
                      {{"FLEET_CONFORMANCE_TRANSPORT", name}}, ""});
    } else if (kind == ComponentKindName(FLEET_COMPONENT_PASS)) {
      jobs.push_back({"pass", name, "fleet_pass_conformance_tests",
                      {{"FLEET_CONFORMANCE_PASS", name}}, ""});
    }
  }
  for (const std::string& d : devices) {
    Job job{"device", d, "fleet_conformance_tests", {{"FLEET_CONFORMANCE_DEVICE", d}}, ""};
    if (const ComponentRecord* c = registry.Find(FLEET_COMPONENT_DEVICE, d)) {
      job.note = RandomLevel(c);
    }
    if (std::string ref = RefDir(); !ref.empty()) job.env["FLEET_CONFORMANCE_REF_DIR"] = ref;
    jobs.insert(jobs.begin(), std::move(job));
  }
  std::vector<Job> picked;
  for (Job& j : jobs) {
    if (o.suites.empty() || o.suites.count(j.suite)) picked.push_back(std::move(j));
  }
  return picked;
}

void PrintTable(const Job& job, const SuiteResult& r, std::ostream& out) {
  out << "== " << job.suite << " suite: " << job.component << " (" << r.tests_run << " tests";
  if (r.restarts > 0) out << ", restarted " << r.restarts << " time(s) after a crash or hang";
  out << ")\n";
  if (!job.note.empty()) out << "   " << job.note << "\n";
  size_t w_subject = 7, w_variant = 7;
  for (const Row& row : r.rows) {
    w_subject = std::max(w_subject, row.subject.size());
    w_variant = std::max(w_variant, row.variant.size());
  }
  w_subject = std::min<size_t>(w_subject, 60);
  char line[512];
  std::snprintf(line, sizeof(line), "%-*s  %-*s  %-12s  %s\n", static_cast<int>(w_subject),
                "subject", static_cast<int>(w_variant), "variant", "result", "detail");
  out << line;
  std::map<std::string, int> counts;
  for (const Row& row : r.rows) {
    ++counts[row.result];
    std::snprintf(line, sizeof(line), "%-*s  %-*s  %-12s  ", static_cast<int>(w_subject),
                  row.subject.c_str(), static_cast<int>(w_variant), row.variant.c_str(),
                  row.result.c_str());
    out << line << ForTerminal(row.reason) << "\n";
  }
  out << "   " << counts["passed"] << " passed, " << counts["failed"] << " failed, "
      << counts["skipped"] << " skipped, " << counts["not provided"] << " not provided\n\n";
}

nlohmann::json RowsJson(const SuiteResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& row : r.rows) {
    rows.push_back({{"subject", row.subject},
                    {"variant", row.variant},
                    {"result", row.result},
                    {"reason", row.reason},
                    {"tests", row.tests},
                    {"not_provided_cases", row.not_provided_cases}});
  }
  return rows;
}

int ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::cerr << "fleet-conformance: " << flag << " needs a value\n";
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--require-all") {
      o.require_all = true;
    } else if (a == "--suite" || a == "--component" || a == "--filter" ||
               a == "--test-timeout" || a == "--suite-dir" || a == "--keep") {
      const char* v = value(a.c_str());
      if (v == nullptr) return 2;
      if (a == "--suite") {
        if (std::string s = v; s != "device" && s != "comm" && s != "transport" && s != "pass") {
          std::cerr << "fleet-conformance: --suite takes device, comm, transport or pass, not '"
                    << ForTerminal(s) << "'\n";
          return 2;
        }
        o.suites.insert(v);
      } else if (a == "--component") {
        o.component = v;
      } else if (a == "--filter") {
        o.filter = v;
      } else if (a == "--test-timeout") {
        char* end = nullptr;
        long s = std::strtol(v, &end, 10);
        if (end == v || *end != '\0' || s < 1 || s > 86400) {
          std::cerr << "fleet-conformance: --test-timeout takes seconds in [1, 86400]\n";
          return 2;
        }
        o.test_timeout_s = static_cast<int>(s);
      } else if (a == "--suite-dir") {
        o.suite_dir = v;
      } else {
        o.keep = v;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "fleet-conformance: unknown option '" << ForTerminal(a)
                << "'; see fleet-conformance --help\n";
      return 2;
    } else if (o.plugin.empty()) {
      o.plugin = a;
    } else {
      std::cerr << "fleet-conformance: give one PLUGIN\n";
      return 2;
    }
  }
  if (o.plugin.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  return -1;
}

int Main(int argc, char** argv) {
  Options o;
  if (int rc = ParseArgs(argc, argv, o); rc >= 0) return rc;

  // The plugin is loaded here as fleet-host would (to see its components) and again by each
  // suite. The suites search what this program searched (the plugin's own directory first,
  // then FLEET_PLUGIN_PATH and this installation's plugins): an installed suite's own idea of
  // "next to the executable" is libexec, where no plugin lives.
  LoadOptions load;
  load.search_dirs = PluginSearchPath(Config{});
  if (o.plugin.find('/') != std::string::npos) {
    load.search_dirs.insert(load.search_dirs.begin(), fs::absolute(o.plugin).parent_path());
  }
  // Loaded in a child process: a plugin that crashes in its entry is reported, not fatal.
  auto child = StartIsolated([&] {
    PluginRegistry registry(load);
    auto loaded = registry.Load(o.plugin);
    if (!loaded.ok()) return nlohmann::json{{"error", loaded.status().ToString()}}.dump();
    const PluginRecord& p = **loaded;
    nlohmann::json answer = {
        {"name", p.name}, {"version", p.version}, {"file", p.file.string()},
        {"abi", std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor)},
        {"jobs", nlohmann::json::array()}};
    for (const Job& j : JobsFor(registry, p, o)) {
      answer["jobs"].push_back({{"suite", j.suite}, {"component", j.component},
                                {"binary", j.binary}, {"env", j.env}, {"note", j.note}});
    }
    return answer.dump();
  });
  if (!child.ok()) {
    std::cerr << "fleet-conformance: " << child.status().ToString() << "\n";
    return 2;
  }
  IsolatedResult probe =
      FinishIsolated(*child, std::chrono::steady_clock::now() + std::chrono::seconds(60));
  nlohmann::json plugin = probe.answered ? nlohmann::json::parse(probe.answer, nullptr, false)
                                         : nlohmann::json();
  if (!plugin.is_object()) {
    std::cerr << "fleet-conformance: loading " << ForTerminal(o.plugin) << ": the plugin "
              << probe.Describe() << "\n";
    return 2;
  }
  if (plugin.contains("error")) {
    std::cerr << "fleet-conformance: " << ForTerminal(plugin["error"].get<std::string>()) << "\n";
    return 2;
  }
  std::string plugin_path_env = fs::path(plugin["file"].get<std::string>()).parent_path().string();
  for (const fs::path& d : load.search_dirs) plugin_path_env += ":" + d.string();
  std::vector<Job> jobs;
  for (const auto& j : plugin["jobs"]) {
    jobs.push_back({j["suite"], j["component"], j["binary"],
                    j["env"].get<std::map<std::string, std::string>>(), j["note"]});
  }
  if (jobs.empty()) {
    std::cerr << "fleet-conformance: plugin '" << plugin["name"].get<std::string>()
              << "' has no component the selected suites check\n";
    return 2;
  }

  char tmpl[] = "/tmp/fleet-conformance-XXXXXX";
  if (o.keep.empty() && mkdtemp(tmpl) == nullptr) {
    std::cerr << "fleet-conformance: mkdtemp failed\n";
    return 2;
  }
  const fs::path work = o.keep.empty() ? fs::path(tmpl) : o.keep;
  std::error_code ec;
  fs::create_directories(work, ec);

  nlohmann::json doc = {{"schema_version", 1},
                        {"plugin", plugin["name"]},
                        {"file", plugin["file"]},
                        {"abi", plugin["abi"]},
                        {"require_all", o.require_all},
                        {"suites", nlohmann::json::array()}};
  if (!o.json) {
    std::cout << "plugin " << plugin["name"].get<std::string>() << " "
              << plugin["version"].get<std::string>() << " ("
              << plugin["file"].get<std::string>() << ", ABI " << doc["abi"].get<std::string>()
              << ")\n\n";
  }
  int failed = 0, not_provided = 0, broken = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& job = jobs[i];
    SuiteInvocation inv;
    inv.binary = FindSuite(o, job.binary);
    inv.env = job.env;
    inv.env["FLEET_PLUGIN_PATH"] = plugin_path_env;
    inv.filter = o.filter;
    inv.test_timeout = std::chrono::seconds(o.test_timeout_s);
    inv.work_dir = work / (std::to_string(i) + "-" + job.suite + "-" + job.component);
    fs::create_directories(inv.work_dir, ec);
    auto result = RunSuite(inv);
    nlohmann::json sj = {{"suite", job.suite}, {"component", job.component}, {"note", job.note},
                         {"binary", inv.binary.string()}};
    if (!result.ok()) {
      ++broken;
      sj["error"] = result.status().ToString();
      if (!o.json) {
        std::cout << "== " << job.suite << " suite: " << job.component << "\n   cannot run: "
                  << ForTerminal(result.status().ToString()) << "\n\n";
      }
      doc["suites"].push_back(sj);
      continue;
    }
    for (const Row& row : result->rows) {
      failed += row.result == "failed";
      not_provided += row.result == "not provided";
    }
    sj["tests_run"] = result->tests_run;
    sj["restarts"] = result->restarts;
    sj["rows"] = RowsJson(*result);
    doc["suites"].push_back(sj);
    if (!o.json) PrintTable(job, *result, std::cout);
  }
  if (o.keep.empty()) fs::remove_all(work, ec);

  const int exit_code =
      broken > 0 ? 2 : (failed > 0 || (o.require_all && not_provided > 0)) ? 1 : 0;
  doc["failed"] = failed;
  doc["not_provided"] = not_provided;
  doc["exit_code"] = exit_code;
  if (o.json) {
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << (exit_code == 0 ? "CONFORMS" : "DOES NOT CONFORM") << ": " << failed
              << " failed, " << not_provided << " not provided"
              << (o.require_all ? " (--require-all: not provided counts as failed)" : "")
              << (broken > 0 ? ", " + std::to_string(broken) + " suite(s) could not run" : "")
              << "\n";
  }
  return exit_code;
}

}  // namespace
}  // namespace fleet::kit

int main(int argc, char** argv) { return fleet::kit::Main(argc, argv); }
