// `fleet-host check`: everything start-up would do short of running a job — read and validate
// the config, load exactly the plugins it selects, resolve the selected components and ask the
// device what it has. No socket is opened.
#include "cli/cli.h"
#include "plugin/device.h"
#include "plugin/registry.h"
#include "plugin/selection.h"

namespace fleet {

int CheckCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                 std::ostream& out, std::ostream& err) {
  if (!args.empty()) {
    err << "fleet-host check: unexpected argument '" << args[0] << "'\n";
    return kExitUsage;
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  PluginRegistry registry(LoadOptionsFor(*config));
  auto selection = LoadSelected(*config, registry);
  if (!selection.ok()) return Fail(err, selection.status());
  Device device(selection->device);
  auto count = device.Count();
  if (!count.ok()) return Fail(err, count.status());
  if (*count == 0) {
    err << "fleet-host: " << config->source << ": device.backend = \"" << device.name()
        << "\": no device of this kind is present on this machine\n";
    return kExitFailure;
  }
  auto props = device.Props(0);
  if (!props.ok()) return Fail(err, props.status());

  out << "config:    " << config->source << "\n";
  out << "device:    " << device.name() << " from plugin '" << selection->device->plugin << "' ("
      << *count << " present; #0: " << props->model << ")\n";
  if (selection->comm != nullptr) {
    out << "comm:      " << selection->comm->name << " from plugin '" << selection->comm->plugin
        << "'\n";
  }
  if (selection->transport != nullptr) {
    out << "transport: " << selection->transport->name << " from plugin '"
        << selection->transport->plugin << "'\n";
  }
  out << "strategy:  " << config->strategy_mode << "\n";
  out << "plugins:   ";
  for (size_t i = 0; i < registry.plugins().size(); ++i) {
    const PluginRecord& p = *registry.plugins()[i];
    out << (i ? ", " : "") << p.name << " " << p.version;
  }
  out << "\n";
  for (const auto& p : registry.plugins()) {
    for (const std::string& n : p->notes) out << "note:      " << p->name << ": " << n << "\n";
  }
  for (const std::string& w : selection->warnings) out << "warning:   " << w << "\n";
  out << "check passed\n";
  return kExitOk;
}

}  // namespace fleet
