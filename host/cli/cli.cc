#include "cli/cli.h"

#include "cli/args.h"
#include "fleet/fleet_abi.h"
#include "support/logging.h"
#include "support/text.h"

namespace fleet {
namespace {

constexpr const char* kUsage = R"(Usage: fleet-host [OPTIONS] COMMAND [ARGS]

Commands:
  plugins [--json] [--rejected] [NAME|PATH]
                     list the plugins found on the search path, what each provides and what
                     was rejected; with NAME or PATH, show that plugin in detail
  devices [--json]   list every unit of every device the plugins provide: model, memory,
                     compute units and capabilities
  ops [--json] [NAME]
                     list every op with its slots and the devices and dtypes of the loaded
                     plugins' kernels; with NAME, also its attributes, defaults and grad ops
  check [PROGRAM]    validate the config and load the plugins it selects; with PROGRAM, also
                     build, verify and prepare it (no network)
  run PROGRAM [--resume] [--config FILE] [--set KEY=VALUE ...]
                     train PROGRAM on this process as [train] and [data] of the config say;
                     --resume starts from the newest intact checkpoint of [checkpoint] dir
  show PROGRAM [--stage parsed|backward|optimized|transpiled] [--program NAME|all]
       [--rank R --world-size N] [--role trainer|pserver --index I --pservers EP,...]
       [--config FILE] [--set KEY=VALUE ...]
                     print the programs after a stage (default: optimized, all) as text IR;
                     transpiled shows what trainer R of N (or, in a pserver job, server I)
                     runs under [strategy]
  env [--json]       print this process's role (trainer or pserver, rank, world size,
                     endpoints) resolved from [role] of the config and the launcher's
                     environment variables, and where each value came from
  launch --nproc N [OPTIONS] -- COMMAND...
                     start N ranks of a job on this machine (see fleet-host launch --help)
  launch --servers S --workers W [OPTIONS] -- COMMAND...
                     start a parameter-server job: S servers and W workers on this machine
  export PROGRAM --fetch VAR [--feed VAR ...] --out DIR [--params DIR | --checkpoint ROOT]
       [--force]     write the inference program (pruned to what the fetches need) and its
                     parameters to DIR; the weights come from --params (.npy or safetensors)
                     or the newest intact checkpoint under ROOT
  infer DIR --input [FEED=]FILE.npy [...] [--out DIR]
                     run an exported model on .npy inputs; print (and with --out, write) the
                     fetches
  convert SRC --out DST [--force]
                     a safetensors file, checkpoint step or export to one NAME.npy per tensor
                     in directory DST, or a directory of .npy to DST.safetensors
  version            print the host and plugin ABI versions

Options:
  --config FILE      read FILE (default: ./fleet.toml if present, else built-in defaults)
  --set KEY=VALUE    override a config key, e.g. --set device.backend=cpu (repeatable)
  --log-level LEVEL  trace, debug, info, warn, error or off (overrides log.level)
  -h, --help         show this help
  --version          same as the version command

Plugins are searched in [plugins] dirs of the config, then FLEET_PLUGIN_PATH (colon-separated),
then this installation's plugin directory.
)";

const std::vector<std::string> kCommands = {"plugins", "devices", "ops", "check", "run", "show",
                                           "env",     "launch", "export",  "infer",
                                           "convert", "version", "help"};

void PrintVersion(std::ostream& out) {
  out << "fleet-host " << FLEET_VERSION << " (plugin ABI " << FLEET_ABI_MAJOR << "."
      << FLEET_ABI_MINOR << ")\n";
}

}  // namespace

int Fail(std::ostream& err, const Status& status) {
  err << "fleet-host: " << ForTerminal(status.message()) << "\n";
  return kExitFailure;
}

StatusOr<Config> LoadConfigFor(const GlobalOptions& options) {
  std::filesystem::path path =
      options.config_path.empty() ? DefaultConfigPath() : std::filesystem::path(options.config_path);
  FLEET_ASSIGN_OR_RETURN(Config config, LoadConfig(path, options.overrides));
  FLEET_RETURN_IF_ERROR(
      SetLogLevel(options.log_level.empty() ? config.log_level : options.log_level));
  return config;
}

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  GlobalOptions global;
  size_t i = 0;
  // Global options come before the command name.
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      out << kUsage;
      return kExitOk;
    } else if (a == "--version") {
      PrintVersion(out);
      return kExitOk;
    } else if (a == "--config" || a == "--set" || a == "--log-level") {
      if (i + 1 >= args.size()) {
        err << "fleet-host: " << a << " needs a value\n";
        return kExitUsage;
      }
      if (Status s = SetGlobalOption(a, args[++i], global); !s.ok()) {
        err << "fleet-host: " << ForTerminal(s.message(), 1024) << "\n";
        return kExitUsage;
      }
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host: unknown option '" << a << "'; see fleet-host --help\n";
      return kExitUsage;
    } else {
      break;
    }
  }
  if (i == args.size()) {
    err << kUsage;
    return kExitUsage;
  }
  const std::string& command = args[i];
  std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  if (command == "plugins") return PluginsCommand(global, rest, out, err);
  if (command == "devices") return DevicesCommand(global, rest, out, err);
  if (command == "ops") return OpsCommand(global, rest, out, err);
  if (command == "check") return CheckCommand(global, rest, out, err);
  if (command == "run") return RunCommand(global, rest, out, err);
  if (command == "show") return ShowCommand(global, rest, out, err);
  if (command == "env") return EnvCommand(global, rest, out, err);
  if (command == "launch") return LaunchCommand(global, rest, out, err);
  if (command == "export") return ExportCommand(global, rest, out, err);
  if (command == "infer") return InferCommand(global, rest, out, err);
  if (command == "convert") return ConvertCommand(global, rest, out, err);
  if ((command == "version" || command == "help") && !rest.empty()) {
    err << "fleet-host " << command << ": unexpected argument " << QuoteForMessage(rest[0])
        << "; usage: fleet-host " << command << "\n";
    return kExitUsage;
  }
  if (command == "version") {
    PrintVersion(out);
    return kExitOk;
  }
  if (command == "help") {
    out << kUsage;
    return kExitOk;
  }
  err << "fleet-host: unknown command " << QuoteForMessage(command);
  if (std::string close = ClosestMatch(command, kCommands); !close.empty()) {
    err << " (did you mean '" << close << "'?)";
  }
  err << "; see fleet-host --help\n";
  return kExitUsage;
}

}  // namespace fleet
