// `fleet-host run PROGRAM [--config FILE] [--set KEY=VALUE ...]`: parse, differentiate and
// optimize the program, load the plugins the config selects and train on this process.
#include "cli/cli.h"
#include "cli/pipeline.h"
#include "cli/train_loop.h"
#include "plugin/registry.h"
#include "plugin/selection.h"

namespace fleet {

int RunCommand(const GlobalOptions& global, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err) {
  // --config and --set may also follow the program, as in `run mlp.fleet --set train.steps=5`.
  GlobalOptions options = global;
  std::string file;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--config" || a == "--set") {
      if (i + 1 >= args.size()) {
        err << "fleet-host run: " << a << " needs a value\n";
        return kExitUsage;
      }
      if (a == "--config") {
        options.config_path = args[++i];
      } else {
        options.overrides.push_back(args[++i]);
      }
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host run: unknown option '" << a << "'\n";
      return kExitUsage;
    } else if (file.empty()) {
      file = a;
    } else {
      err << "fleet-host run: unexpected argument '" << a << "'\n";
      return kExitUsage;
    }
  }
  if (file.empty()) {
    err << "fleet-host run: which program? usage: fleet-host run PROGRAM [--config FILE] "
           "[--set KEY=VALUE ...]\n";
    return kExitUsage;
  }
  auto config = LoadConfigFor(options);
  if (!config.ok()) return Fail(err, config.status());
  auto programs = BuildPrograms(file, Stage::kOptimized);
  if (!programs.ok()) return Fail(err, programs.status());
  PluginRegistry registry(LoadOptionsFor(*config));
  auto selection = LoadSelected(*config, registry);
  if (!selection.ok()) return Fail(err, selection.status());
  for (const std::string& w : selection->warnings) err << "fleet-host: warning: " << w << "\n";
  auto summary = Train(*config, *programs, registry, selection->device->name, out);
  if (!summary.ok()) return Fail(err, summary.status().WithContext(file));
  return kExitOk;
}

}  // namespace fleet
