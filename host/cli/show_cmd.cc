// `fleet-host show PROGRAM [--stage S] [--program P] [--rank R --world-size N]
// [--role trainer|pserver --index I --pservers EP,...] [--config FILE] [--set KEY=VALUE ...]`:
// the programs after a pipeline stage, as
// text IR. The transpiled stage shows what trainer R of N runs under the config's [strategy];
// R and N default to the role the config and environment give. In a parameter-server job
// (strategy pserver) it shows every program of the set: the trainer's "main" and "startup" and
// each server's "pserver.<i>" and "pserver.<i>.startup" (printed under those names); --role
// trainer keeps the trainer's, --role pserver --index I server I's (I defaults to the role's
// rank for a pserver, else 0). The servers come from --pservers, [role] pserver_endpoints or
// PADDLE_PSERVERS_IP_PORT_LIST; a pserver job without any is an error.
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli/args.h"
#include "cli/cli.h"
#include "job/pipeline.h"
#include "roles/role.h"
#include "ir/text.h"
#include "passes/builtin_passes.h"
#include "plugin/registry.h"
#include "plugin/selection.h"
#include "support/limits.h"
#include "support/text.h"

namespace fleet {

int ShowCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                std::ostream& out, std::ostream& err) {
  constexpr const char* kUsage =
      "fleet-host show PROGRAM [--stage parsed|backward|optimized|transpiled] "
      "[--program main|startup|NAME|all] [--rank R --world-size N] "
      "[--role trainer|pserver --index I --pservers EP,...] [--config FILE] "
      "[--set KEY=VALUE ...]";
  // --config and --set may also follow the program, as for `run`.
  GlobalOptions options = global;
  auto w = ParseWords("show", args,
                      {.single = {"--stage", "--program", "--rank", "--world-size", "--role",
                                  "--index", "--pservers"},
                       .repeatable = {},
                       .boolean = {}},
                      options, kUsage, err);
  if (!w) return kExitUsage;
  auto usage_error = [&](const std::string& message) {
    err << "fleet-host show: " << message << "\n";
    return kExitUsage;
  };
  if (w->positional.empty()) return usage_error(std::string("which program? usage: ") + kUsage);
  if (w->positional.size() > 1) {
    return usage_error("unexpected argument " + QuoteForMessage(w->positional[1]));
  }
  const std::string& file = w->positional[0];
  const std::string stage_name = w->values.count("--stage") ? One(*w, "--stage") : "optimized";
  const std::string which = w->values.count("--program") ? One(*w, "--program") : "all";
  const std::string role_name = One(*w, "--role");
  if (!role_name.empty() && role_name != "trainer" && role_name != "pserver") {
    return usage_error("--role: expected trainer or pserver, got " + QuoteForMessage(role_name));
  }
  // -1: not given. Ranks, server indices and world sizes stay within a job's limits, which
  // fleet.toml and the launchers' variables share.
  int64_t rank = -1, world_size = -1, index = -1;
  for (auto [flag, target, min, max] :
       {std::tuple{"--rank", &rank, int64_t{0}, kMaxWorldSize - 1},
        std::tuple{"--world-size", &world_size, int64_t{1}, kMaxWorldSize},
        std::tuple{"--index", &index, int64_t{0}, kMaxWorldSize - 1}}) {
    if (!w->values.count(flag)) continue;
    StatusOr<int64_t> n = IntFlag(flag, One(*w, flag), min, max);
    if (!n.ok()) return usage_error(n.status().message());
    *target = *n;
  }
  // The servers are checked as [role] pserver_endpoints and PADDLE_PSERVERS_IP_PORT_LIST are.
  std::vector<std::string> pservers;
  if (w->values.count("--pservers")) {
    StatusOr<std::vector<std::string>> list =
        CheckEndpointList(Split(One(*w, "--pservers"), ','), "--pservers");
    if (!list.ok()) return usage_error(list.status().message());
    pservers = std::move(*list);
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

  if (*stage != Stage::kTranspiled) {
    // Passes of [strategy] run only at the transpiled stage; say so rather than leave a user
    // wondering where a plugin pass went. A config that does not load is `check`'s business.
    if (auto config = LoadConfigFor(options); config.ok() && !config->collective.passes.empty()) {
      err << "fleet-host show: note: [strategy] passes run after this stage; see --stage "
             "transpiled\n";
    }
  }
  if (*stage == Stage::kTranspiled) {
    // Only the transpiled stage reads the config (for [strategy] and the role) and plugins
    // (for pass components); the others touch neither.
    auto config = LoadConfigFor(options);
    if (!config.ok()) return Fail(err, config.status());
    if (Status s = MergeProgramStrategy(*programs, *config); !s.ok()) return Fail(err, s);
    auto role = ResolveRole(*config, ProcessEnvironment());
    if (!role.ok()) return Fail(err, role.status());
    if (world_size >= 1) role->world_size = world_size;
    if (!pservers.empty()) role->pserver_endpoints = pservers;
    if (!role_name.empty() && role_name != role->role) {
      role->role = role_name;
      role->rank = 0;
    }
    if (role->is_pserver()) {
      if (index >= 0) role->rank = index;
      index = role->rank;
      if (rank >= 0) {
        err << "fleet-host show: --rank is a trainer's; use --index for a pserver\n";
        return kExitUsage;
      }
    } else {
      if (index >= 0 && role_name != "pserver") {
        err << "fleet-host show: --index needs --role pserver\n";
        return kExitUsage;
      }
      if (rank >= 0) role->rank = rank;
      if (role->rank >= role->world_size) {
        err << "fleet-host show: rank " << role->rank << " is outside a world of "
            << role->world_size << "\n";
        return kExitUsage;
      }
    }
    if (Status s = CheckFleetInit(*programs, EffectiveStrategy(*config, *role)); !s.ok()) {
      return Fail(err, s);
    }
    const bool pserver_job = EffectiveStrategy(*config, *role) == "pserver";
    if (role->is_pserver() && !pserver_job) {
      err << "fleet-host show: --role pserver needs a parameter-server job, but strategy.mode "
             "resolves to \"" << EffectiveStrategy(*config, *role) << "\"\n";
      return kExitUsage;
    }
    if (pserver_job && role->pserver_endpoints.empty()) {
      err << "fleet-host show: a pserver job needs its servers: give --pservers HOST:PORT,... "
             "or set [role] pserver_endpoints or PADDLE_PSERVERS_IP_PORT_LIST\n";
      return kExitUsage;
    }
    if (role->is_pserver() && index >= static_cast<int64_t>(role->pserver_endpoints.size())) {
      err << "fleet-host show: pserver index " << index << " is outside the "
          << role->pserver_endpoints.size() << " servers\n";
      return kExitUsage;
    }
    PluginRegistry registry(LoadOptionsFor(*config));
    if (Status s = RegisterBuiltinPasses(registry); !s.ok()) return Fail(err, s);
    for (const std::string& name : config->plugins.load) {
      if (auto loaded = registry.Load(name); !loaded.ok()) return Fail(err, loaded.status());
    }
    // Sparse gradients as every strategy builds them; a device without sparse kernels makes
    // `run` fall back to dense ones (DenseGradientsReason), which is the job's business.
    std::vector<PassRun> ran;
    auto transpiled = Transpile(*config, *role, *programs, registry, &ran);
    if (!transpiled.ok()) return Fail(err, transpiled.status().WithContext(file));
    set = std::move(*transpiled);
    // Which passes made these programs, with the options each saw (defaults and [passes.NAME]
    // values filled in): IR comments, so the output still parses.
    out << "# passes run:" << (ran.empty() ? " none" : "") << "\n";
    for (const PassRun& r : ran) {
      out << "#   " << r.name << " {";
      bool first = true;
      for (const auto& [key, value] : r.options) {
        out << (first ? "" : ", ") << key << " = " << ir::PrintAttribute(value);
        first = false;
      }
      out << "}\n";
    }
    if (pserver_job && (role->is_pserver() || !role_name.empty())) {
      // Only this role's programs.
      const std::string server = "pserver." + std::to_string(index);
      std::map<std::string, ir::Program> picked;
      for (auto& [name, program] : set) {
        const bool is_server = name.rfind("pserver.", 0) == 0;
        const bool mine = role->is_pserver() ? (name == server || name == server + ".startup")
                                             : !is_server;
        if (mine) picked.emplace(name, std::move(program));
      }
      set = std::move(picked);
    }
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
