// host/cli: the command line, one file per command: arguments in, a library call, output.
// Depends on: checkpoint/, config/, ir/, job/, launch/, ops/, passes/, plugin/, roles/, support/.
//
// The fleet-host command line: global options, then a command with its own arguments.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"
#include "support/status.h"

namespace fleet {

// Options every command understands, parsed before the command name.
struct GlobalOptions {
  std::string config_path;              // --config; empty = ./fleet.toml if present
  std::vector<std::string> overrides;   // --set KEY=VALUE, in order
  std::string log_level;                // --log-level; empty = the config's log.level
};

// Exit codes: 0 success, 1 the command failed, 2 the command line was wrong.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Runs fleet-host with argv; returns the process exit code. Output goes to `out`, errors to
// `err`.
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Prints "fleet-host: MESSAGE" to err and returns kExitFailure: how every command reports a
// failed Status.
int Fail(std::ostream& err, const Status& status);

// Loads the config named by the global options and applies its log level.
StatusOr<Config> LoadConfigFor(const GlobalOptions& options);

// Commands. `args` are the words after the command name.
int PluginsCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                   std::ostream& out, std::ostream& err);
int DevicesCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                   std::ostream& out, std::ostream& err);
int OpsCommand(const GlobalOptions& global, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err);
int CheckCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                 std::ostream& out, std::ostream& err);
int RunCommand(const GlobalOptions& global, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err);
int EnvCommand(const GlobalOptions& global, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err);
int ShowCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                std::ostream& out, std::ostream& err);
int LaunchCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                  std::ostream& out, std::ostream& err);
int ExportCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                  std::ostream& out, std::ostream& err);
int InferCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                 std::ostream& out, std::ostream& err);
int ConvertCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                   std::ostream& out, std::ostream& err);

}  // namespace fleet
