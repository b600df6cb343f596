// Argument handling shared by the commands: each command says which flags it knows and which of
// them may be repeated; --config and --set, the global options, may follow the command too.
//
// One set of rules for every flag, so no command can forget one:
//   - a flag that takes a value is given at most once, unless the command documents it as
//     repeatable (--set, infer's --input, export's --feed and --fetch): a second value would
//     otherwise silently replace the first;
//   - a value is never empty: no flag means anything by '' (an empty --config would read as
//     "no config given", an empty --out as "no output");
//   - a number is parsed whole, in a range (IntFlag), before anything uses it.
// Errors name the flag; values are echoed escaped (support/text.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli.h"
#include "support/status.h"

namespace fleet {

// The flags one command knows, besides the global --config and --set.
struct FlagSet {
  std::vector<std::string> single;      // take a value; given at most once
  std::vector<std::string> repeatable;  // take a value each time; documented as repeatable
  std::vector<std::string> boolean;     // take no value
};

// The words of one command: flags with values, boolean flags and positional arguments.
struct Words {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;
  std::vector<std::string> flags;
};

// Splits `args` by `flags`, adding --config and --set to `global` (SetGlobalOption). Prints the
// usage error ("fleet-host COMMAND: ...; usage: USAGE") and returns nullopt on a bad word.
std::optional<Words> ParseWords(const std::string& command, const std::vector<std::string>& args,
                                const FlagSet& flags, GlobalOptions& global, const char* usage,
                                std::ostream& err);

// Applies global option `flag` (--config, --set or --log-level) with `value` to `global`, by the
// rules above: --config and --log-level once each, whether before or after the command. A bad
// --log-level is refused here too. INVALID_ARGUMENT names the flag.
Status SetGlobalOption(const std::string& flag, const std::string& value, GlobalOptions& global);

// Whether boolean `flag` was given.
bool Has(const Words& w, const std::string& flag);

// The value of single-valued `flag`, or "" when it was not given.
std::string One(const Words& w, const std::string& flag);

// `text` as a decimal integer in [min, max] (digits only, with a '-' for a negative number);
// INVALID_ARGUMENT "FLAG: expected an integer from MIN to MAX, got 'TEXT'" otherwise, so a value
// past int64 or past what the flag can mean never wraps.
StatusOr<int64_t> IntFlag(std::string_view flag, std::string_view text, int64_t min, int64_t max);

}  // namespace fleet
