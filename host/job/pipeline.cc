#include "job/pipeline.h"

#include <set>

#include "autodiff/backward.h"
#include "optim/optimizer.h"
#include "fleet/fleet_plugin.h"
#include "plugin/pass.h"

namespace fleet {

StatusOr<Stage> ParseStage(std::string_view name) {
  if (name == "parsed") return Stage::kParsed;
  if (name == "backward") return Stage::kBackward;
  if (name == "optimized") return Stage::kOptimized;
  if (name == "transpiled") return Stage::kTranspiled;
  return InvalidArgument("unknown stage '" + std::string(name) +
                         "': expected parsed, backward, optimized or transpiled");
}

StatusOr<frontend::ParsedProgram> BuildPrograms(const std::filesystem::path& file, Stage stage) {
  FLEET_ASSIGN_OR_RETURN(frontend::ParsedProgram p, frontend::ParseProgramFile(file));
  if (stage == Stage::kParsed || p.loss.empty()) return p;
  autodiff::BackwardOptions options;
  options.no_grad_set.insert(p.no_grad.begin(), p.no_grad.end());
  auto params_grads = autodiff::AppendBackward(p.main, p.loss, options);
  if (!params_grads.ok()) return params_grads.status().WithContext(file.string());
  if (stage == Stage::kBackward || !p.optimizer) return p;
  if (Status s = optim::ApplyOptimizer(p.main, p.startup, *params_grads, *p.optimizer); !s.ok()) {
    return s.WithContext(file.string());
  }
  return p;
}

std::string EffectiveStrategy(const Config& config, const Role& role) {
  if (config.strategy_mode != "auto") return config.strategy_mode;
  if (config.collective.mode == "single_process_multi_thread") return "collective";
  if (role.is_pserver() || !role.pserver_endpoints.empty()) return "pserver";
  return role.world_size > 1 ? "collective" : "none";
}

StatusOr<std::map<std::string, ir::Program>> Transpile(const Config& config, const Role& role,
                                                       const frontend::ParsedProgram& optimized,
                                                       const PluginRegistry& registry) {
  std::map<std::string, ir::Program> programs = {{"startup", optimized.startup},
                                                 {"main", optimized.main}};
  PassContextInfo ctx;
  // A pserver process transpiles like trainer 0: its own programs do not depend on the id.
  ctx.rank = role.is_pserver() ? 0 : static_cast<int32_t>(role.rank);
  ctx.world_size = static_cast<int32_t>(role.world_size);
  ctx.role = role.role;
  ctx.pserver_endpoints = role.pserver_endpoints;

  auto run = [&](const std::string& name, const ir::AttrMap& given) -> Status {
    const ComponentRecord* pass = registry.Find(FLEET_COMPONENT_PASS, name);
    if (pass == nullptr) {
      return NotFound("pass '" + name + "' is not registered (is its plugin in [plugins] load?)");
    }
    FLEET_ASSIGN_OR_RETURN(ir::AttrMap options, ResolvePassOptions(*pass, given));
    return RunPass(*pass, programs, ctx, options);
  };

  const std::string mode = EffectiveStrategy(config, role);
  if (mode == "collective") {
    if (optimized.loss.empty() || !optimized.optimizer) {
      return InvalidArgument("a collective job needs a program with minimize(..., optimizer=...)");
    }
    const Config::Collective& c = config.collective;
    // Paddle's SingleProcessMultiThread is GradAllReduce with the process's devices as ranks.
    const std::string pass = c.mode == "local_sgd" ? "local_sgd" : "grad_allreduce";
    ir::AttrMap options = {{"nrings", static_cast<int32_t>(c.nrings)}};
    if (pass == "local_sgd") options["k_steps"] = static_cast<int32_t>(c.local_sgd_k_steps);
    FLEET_RETURN_IF_ERROR(run(pass, options).WithContext("strategy.collective_mode"));
    if (c.fuse_grad_size_mb > 0 && pass == "grad_allreduce") {
      FLEET_RETURN_IF_ERROR(run("fuse_allreduce", {{"bucket_mb", c.fuse_grad_size_mb}})
                                .WithContext("strategy.fuse_grad_size_mb"));
    }
  }
  if (mode == "pserver") {
    if (optimized.loss.empty() || !optimized.optimizer) {
      return InvalidArgument("a pserver job needs a program with minimize(..., optimizer=...)");
    }
    if (role.pserver_endpoints.empty()) {
      return InvalidArgument("a pserver job needs pserver_endpoints: [role] pserver_endpoints "
                             "or PADDLE_PSERVERS_IP_PORT_LIST");
    }
    const Config::Pserver& ps = config.pserver;
    ir::AttrMap options = {{"sync", ps.sync_mode},
                           {"slice_var_up", ps.slice_var_up},
                           {"min_block_size", ps.min_block_size},
                           {"split_method", ps.split_method},
                           {"init", ps.init}};
    FLEET_RETURN_IF_ERROR(run("pserver", options).WithContext("strategy.mode \"pserver\""));
  }
  for (const std::string& name : config.collective.passes) {
    FLEET_RETURN_IF_ERROR(run(name, {}).WithContext("strategy.passes"));
  }
  return programs;
}

}  // namespace fleet
