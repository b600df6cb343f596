// `fleet-host show PROGRAM [--stage S] [--program P] [--rank R --world-size N]`: the programs
// after a pipeline stage, as text IR. The transpiled stage shows what trainer R of N runs under
// the config's [strategy]; R and N default to the role the config and environment give.
#include <cstdlib>
#include <map>

#include "cli/cli.h"
#include "cli/pipeline.h"
#include "dist/role.h"
#include "ir/text.h"
#include "passes/builtin_passes.h"
#include "plugin/registry.h"
#include "plugin/selection.h"

namespace fleet {
namespace {

// A non-negative integer flag value, or -1 when malformed.
int64_t FlagInt(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::atoll(text.c_str());
}

}  // namespace

int ShowCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                std::ostream& out, std::ostream& err) {
  std::string file, stage_name = "optimized", which = "all";
  int64_t rank = -1, world_size = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--stage" || a == "--program" || a == "--rank" || a == "--world-size") {
      if (i + 1 >= args.size()) {
        err << "fleet-host show: " << a << " needs a value\n";
        return kExitUsage;
      }
      const std::string& v = args[++i];
      if (a == "--stage") {
        stage_name = v;
      } else if (a == "--program") {
        which = v;
      } else {
        int64_t n = FlagInt(v);
        if (n < 0 || (a == "--world-size" && n < 1)) {
          err << "fleet-host show: " << a << ": expected a number"
              << (a == "--world-size" ? " >= 1" : " >= 0") << ", got '" << v << "'\n";
          return kExitUsage;
        }
        (a == "--rank" ? rank : world_size) = n;
      }
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host show: unknown option '" << a << "'\n";
      return kExitUsage;
    } else if (file.empty()) {
      file = a;
    } else {
      err << "fleet-host show: unexpected argument '" << a << "'\n";
      return kExitUsage;
    }
  }
  if (file.empty()) {
    err << "fleet-host show: which program? usage: fleet-host show PROGRAM "
           "[--stage parsed|backward|optimized|transpiled] [--program main|startup|NAME|all] "
           "[--rank R --world-size N]\n";
    return kExitUsage;
  }
  auto stage = ParseStage(stage_name);
  if (!stage.ok()) {
    err << "fleet-host show: --stage: " << stage.status().message() << "\n";
    return kExitUsage;
  }
  auto programs = BuildPrograms(file, *stage);
  if (!programs.ok()) return Fail(err, programs.status());
  std::map<std::string, ir::Program> set = {{"startup", programs->startup},
                                            {"main", programs->main}};

  if (*stage == Stage::kTranspiled) {
    // Only the transpiled stage reads the config (for [strategy] and the role) and plugins
    // (for pass components); the others touch neither.
    auto config = LoadConfigFor(global);
    if (!config.ok()) return Fail(err, config.status());
    auto role = ResolveRole(*config, ProcessEnvironment());
    if (!role.ok()) return Fail(err, role.status());
    if (world_size >= 1) role->world_size = world_size;
    if (rank >= 0) role->rank = rank;
    if (role->rank >= role->world_size) {
      err << "fleet-host show: rank " << role->rank << " is outside a world of "
          << role->world_size << "\n";
      return kExitUsage;
    }
    PluginRegistry registry(LoadOptionsFor(*config));
    if (Status s = RegisterBuiltinPasses(registry); !s.ok()) return Fail(err, s);
    for (const std::string& name : config->plugins.load) {
      if (auto loaded = registry.Load(name); !loaded.ok()) return Fail(err, loaded.status());
    }
    auto transpiled = Transpile(*config, *role, *programs, registry);
    if (!transpiled.ok()) return Fail(err, transpiled.status().WithContext(file));
    set = std::move(*transpiled);
  }
  if (which == "all") {
    out << ir::PrintProgramSet(set);
    return kExitOk;
  }
  auto it = set.find(which);
  if (it == set.end()) {
    err << "fleet-host show: --program: no program '" << which << "' at this stage (have";
    for (const auto& [name, p] : set) err << " " << name;
    err << ", or all)\n";
    return kExitUsage;
  }
  out << ir::PrintProgram(it->second);
  return kExitOk;
}

}  // namespace fleet
