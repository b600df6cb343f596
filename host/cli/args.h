// Argument handling shared by the commands that take flags with values (export, infer,
// convert): each command says which flags it knows; --config and --set, the global options, may
// follow the command too.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace fleet {

// The words of one command: flags with values, boolean flags and positional arguments.
struct Words {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;
  std::vector<std::string> flags;
};

// Splits `args` by the flags a command knows (`with_value`, `boolean`), adding --config and
// --set to `global`. Prints the usage error and returns nullopt on a bad word.
std::optional<Words> ParseWords(const std::string& command, const std::vector<std::string>& args,
                                const std::vector<std::string>& with_value,
                                const std::vector<std::string>& boolean, GlobalOptions& global,
                                const char* usage, std::ostream& err);

// Whether boolean `flag` was given.
bool Has(const Words& w, const std::string& flag);

// The last value of `flag`, or "".
std::string One(const Words& w, const std::string& flag);

}  // namespace fleet
