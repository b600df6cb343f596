#include "job/pipeline.h"

#include <variant>

#include <algorithm>
#include <set>

#include "autodiff/backward.h"
#include "optim/optimizer.h"
#include "fleet/fleet_plugin.h"
#include "plugin/device.h"
#include "plugin/kernel.h"
#include "plugin/pass.h"
#include "plugin/transport.h"
#include "support/text.h"

namespace fleet {
namespace {

// The [strategy] key behind each option the host passes its built-in passes; such an option in
// [passes.NAME] would be a second way to set it.
const std::map<std::string, std::map<std::string, std::string>>& StrategyOwnedOptions() {
  static const auto* owned = new std::map<std::string, std::map<std::string, std::string>>{
      {"grad_allreduce",
       {{"nrings", "strategy.nrings"}, {"sparse_exchange", "strategy.sparse_exchange"}}},
      {"local_sgd", {{"nrings", "strategy.nrings"}, {"k_steps", "strategy.local_sgd_k_steps"}}},
      {"fuse_allreduce", {{"bucket_mb", "strategy.fuse_grad_size_mb"}}},
      {"pserver",
       {{"sync", "strategy.sync_mode"},
        {"slice_var_up", "strategy.slice_var_up"},
        {"min_block_size", "strategy.min_block_size"},
        {"split_method", "strategy.split_method"},
        {"init", "strategy.pserver_init"},
        {"geo_k_steps", "strategy.a_sync_configs.k_steps"}}}};
  return *owned;
}

// "fleet.toml:12:3: passes.x.y" or "--set passes.x.y" (which already names the key); `key`
// alone when nothing says where it was set.
std::string Place(const std::string& where, const std::string& key) {
  if (where.empty()) return key;
  return where.rfind("--set ", 0) == 0 ? where : where + ": " + key;
}
std::string Place(const ConfigValue& v, const std::string& key) { return Place(v.where, key); }

// The pass `name` of `registry`, or NOT_FOUND saying which key named it (`where`, already
// placed; "" for a pass the host itself runs), the closest registered name and every registered
// one: the one lookup behind [passes.NAME], strategy.passes and the built-in passes.
StatusOr<const ComponentRecord*> FindPass(const PluginRegistry& registry, const std::string& name,
                                          const std::string& where) {
  if (const ComponentRecord* pass = registry.Find(FLEET_COMPONENT_PASS, name)) return pass;
  std::vector<std::string> known;
  for (const ComponentRecord* c : registry.Components(FLEET_COMPONENT_PASS)) {
    known.push_back(c->name);
  }
  std::sort(known.begin(), known.end());
  const std::string close = ClosestMatch(name, known);
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  return NotFound((where.empty() ? "" : where + ": ") + "no pass " + QuoteForMessage(name) +
                  " is registered" + (close.empty() ? "" : " (did you mean '" + close + "'?)") +
                  "; registered: " + (list.empty() ? "none" : list) +
                  "; a plugin's pass needs its plugin in [plugins] load");
}

ir::Attribute ToAttribute(const ConfigValue& v) {
  return std::visit([](const auto& x) -> ir::Attribute { return x; }, v.value);
}

// [passes.NAME] of the config as attributes, each checked alone so an error names its place.
StatusOr<ir::AttrMap> PassTableOptions(const Config& config, const ComponentRecord& pass) {
  ir::AttrMap given;
  auto it = config.passes.find(pass.name);
  if (it == config.passes.end()) return given;
  const auto owned = StrategyOwnedOptions().find(pass.name);
  for (const ConfigValue& v : it->second) {
    const std::string key = "passes." + pass.name + "." + v.key;
    if (owned != StrategyOwnedOptions().end()) {
      if (auto o = owned->second.find(v.key); o != owned->second.end()) {
        return InvalidArgument(Place(v, key) + " is set by " + o->second +
                               "; set it there (one place per setting)");
      }
    }
    ir::AttrMap one = {{v.key, ToAttribute(v)}};
    if (Status s = ResolvePassOptions(pass, one).status(); !s.ok()) {
      return InvalidArgument(Place(v, key) + ": " + s.message());
    }
    given[v.key] = ToAttribute(v);
  }
  return given;
}

// Whether `device`'s tensors live in host memory (FLEET_DEVICE_CAP_HOST_MEMORY); a device whose
// properties cannot be read counts as not.
bool HoldsHostMemory(const PluginRegistry& registry, const std::string& device) {
  const ComponentRecord* record = registry.Find(FLEET_COMPONENT_DEVICE, device);
  if (record == nullptr) return false;
  auto props = Device(record).Props(0);
  return props.ok() && (props->caps & FLEET_DEVICE_CAP_HOST_MEMORY) != 0;
}

}  // namespace

Status CheckPasses(const Config& config, const PluginRegistry& registry) {
  for (const auto& [name, values] : config.passes) {
    const std::string where =
        values.empty() ? "[passes." + name + "]" : Place(values[0], "passes." + name);
    FLEET_ASSIGN_OR_RETURN(const ComponentRecord* pass, FindPass(registry, name, where));
    FLEET_RETURN_IF_ERROR(PassTableOptions(config, *pass).status());
  }
  for (const std::string& name : config.collective.passes) {
    FLEET_RETURN_IF_ERROR(
        FindPass(registry, name, Place(config.collective.passes_where, "strategy.passes"))
            .status());
  }
  return OkStatus();
}

StatusOr<Stage> ParseStage(std::string_view name) {
  if (name == "parsed") return Stage::kParsed;
  if (name == "backward") return Stage::kBackward;
  if (name == "optimized") return Stage::kOptimized;
  if (name == "transpiled") return Stage::kTranspiled;
  return InvalidArgument("unknown stage '" + std::string(name) +
                         "': expected parsed, backward, optimized or transpiled");
}

StatusOr<frontend::ParsedProgram> BuildPrograms(const std::filesystem::path& file, Stage stage,
                                                bool sparse_gradients) {
  FLEET_ASSIGN_OR_RETURN(frontend::ParsedProgram p, frontend::ParseProgramFile(file));
  if (stage == Stage::kParsed || p.loss.empty()) return p;
  autodiff::BackwardOptions options;
  options.no_grad_set.insert(p.no_grad.begin(), p.no_grad.end());
  options.sparse_gradients =
      sparse_gradients && (!p.optimizer || optim::OptimizerTakesSparseGradients(*p.optimizer));
  auto params_grads = autodiff::AppendBackward(p.main, p.loss, options);
  if (!params_grads.ok()) return params_grads.status().WithContext(file.string());
  if (stage == Stage::kBackward || !p.optimizer) return p;
  if (Status s = optim::ApplyOptimizer(p.main, p.startup, *params_grads, *p.optimizer); !s.ok()) {
    return s.WithContext(file.string());
  }
  return p;
}

std::string DenseGradientsReason(const Config& config, const PluginRegistry& registry,
                                 const std::string& device, const ComponentRecord* transport) {
  if (config.strategy_mode == "pserver" && transport != nullptr &&
      !TransportCarriesSelectedRows(*transport)) {
    return "transport '" + config.transport.backend + "' predates ABI 1.7 and cannot send them";
  }
  bool kernels = false;
  for (ir::DataType dtype : {ir::DataType::kFloat32, ir::DataType::kFloat64}) {
    for (const KernelCandidate& k : FindKernels(registry, "lookup_table_v2_grad", device, dtype)) {
      kernels = kernels || TakesSelectedRows(*k.def);
    }
  }
  if (!kernels) return "device '" + device + "' has no kernels that take sparse gradients";
  if (config.strategy_mode == "pserver" && !HoldsHostMemory(registry, device)) {
    return "a parameter-server trainer sends them from host memory, and device '" + device +
           "' keeps its tensors elsewhere";
  }
  return "";
}

bool AsksForSparseGradients(const ir::Program& main) {
  for (const ir::Op& op : main.global().ops) {
    const ir::Attribute* a = op.FindAttr("is_sparse");
    if (a == nullptr) continue;
    if (auto b = ir::AttrAsBool(*a); b && *b) return true;
  }
  return false;
}

std::string EffectiveStrategy(const Config& config, const Role& role) {
  if (config.strategy_mode != "auto") return config.strategy_mode;
  if (config.collective.mode == "single_process_multi_thread") return "collective";
  if (role.is_pserver() || !role.pserver_endpoints.empty()) return "pserver";
  return role.world_size > 1 ? "collective" : "none";
}

namespace {

using StrategyValue = std::variant<bool, int64_t, double, std::string>;

std::string StrategyText(const StrategyValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&v)) return FormatFixed(*d, 3);
  return "\"" + std::get<std::string>(v) + "\"";
}

// [strategy.a_sync_configs] keys as the program's settings name them ("a_sync_configs.KEY").
constexpr std::string_view kAsyncPrefix = "a_sync_configs.";

// Calls fn with the field of `configs` (Config::Pserver::AsyncConfigs, const or not) that `key`
// names; false for a key it does not have.
template <typename Configs, typename Fn>
bool WithAsyncField(Configs& configs, const std::string& key, Fn&& fn) {
  if (key == "k_steps") fn(configs.k_steps);
  else if (key == "max_merge_var_num") fn(configs.max_merge_var_num);
  else if (key == "send_queue_size") fn(configs.send_queue_size);
  else if (key == "independent_recv_thread") fn(configs.independent_recv_thread);
  else if (key == "thread_pool_size") fn(configs.thread_pool_size);
  else if (key == "send_wait_times") fn(configs.send_wait_times);
  else if (key == "runtime_split_send_recv") fn(configs.runtime_split_send_recv);
  else return false;
  return true;
}

// The [strategy] keys a program file can set, as references into the config.
StatusOr<StrategyValue> CurrentValue(const Config& config, const std::string& key) {
  if (key == "sync_mode") return StrategyValue(config.pserver.sync_mode);
  if (key == "a_sync") return StrategyValue(config.pserver.a_sync);
  if (key.rfind(kAsyncPrefix, 0) == 0) {
    StrategyValue out;
    if (WithAsyncField(config.pserver.a_sync_configs, key.substr(kAsyncPrefix.size()),
                       [&](const auto& field) { out = StrategyValue(field); })) {
      return out;
    }
  }
  if (key == "collective_mode") return StrategyValue(config.collective.mode);
  if (key == "local_sgd_k_steps") return StrategyValue(config.collective.local_sgd_k_steps);
  if (key == "nrings") return StrategyValue(config.collective.nrings);
  if (key == "fuse_grad_size_mb") return StrategyValue(config.collective.fuse_grad_size_mb);
  if (key == "sync_batch_norm") return StrategyValue(config.collective.sync_batch_norm);
  return Internal("the program set [strategy] key '" + key + "', which the host cannot merge");
}

void SetValue(Config& config, const std::string& key, const StrategyValue& v) {
  if (key == "sync_mode") config.pserver.sync_mode = std::get<bool>(v);
  if (key == "a_sync") {
    config.pserver.a_sync = std::get<bool>(v);
    config.pserver.sync_mode = !config.pserver.a_sync;
  }
  if (key.rfind(kAsyncPrefix, 0) == 0) {
    WithAsyncField(config.pserver.a_sync_configs, key.substr(kAsyncPrefix.size()),
                   [&](auto& field) { field = std::get<std::decay_t<decltype(field)>>(v); });
  }
  if (key == "collective_mode") config.collective.mode = std::get<std::string>(v);
  if (key == "local_sgd_k_steps") config.collective.local_sgd_k_steps = std::get<int64_t>(v);
  if (key == "nrings") config.collective.nrings = std::get<int64_t>(v);
  if (key == "fuse_grad_size_mb") config.collective.fuse_grad_size_mb = std::get<double>(v);
  if (key == "sync_batch_norm") config.collective.sync_batch_norm = std::get<bool>(v);
}

}  // namespace

Status MergeProgramStrategy(const frontend::ParsedProgram& program, Config& config) {
  for (const frontend::ProgramStrategyKey& k : program.strategy) {
    FLEET_ASSIGN_OR_RETURN(StrategyValue current, CurrentValue(config, k.config_key));
    auto where = config.strategy_where.find(k.config_key);
    if (where != config.strategy_where.end()) {
      if (current == k.value) continue;
      return InvalidArgument("strategy." + k.paddle_key + " at " + k.where + " sets strategy." +
                             k.config_key + " = " + StrategyText(k.value) + ", but " +
                             where->second + " sets it to " + StrategyText(current) +
                             "; keep one");
    }
    // a_sync is sync_mode's opposite: one set in the config and the other in the program
    // must agree as well.
    if (k.config_key == "a_sync" && config.strategy_where.count("sync_mode") &&
        config.pserver.sync_mode == std::get<bool>(k.value)) {
      return InvalidArgument("strategy.a_sync at " + k.where + " = " + StrategyText(k.value) +
                             " means sync_mode = " + StrategyText(!std::get<bool>(k.value)) +
                             ", but " + config.strategy_where.at("sync_mode") +
                             " sets sync_mode = " + StrategyText(config.pserver.sync_mode) +
                             "; keep one");
    }
    SetValue(config, k.config_key, k.value);
    config.strategy_where[k.config_key] = k.where;
  }
  if (!config.pserver.a_sync) {
    for (const auto& [key, where] : config.strategy_where) {
      if (key.rfind(kAsyncPrefix, 0) == 0) {
        return InvalidArgument(where + ": strategy." + key + " configures the communicator of "
                               "strategy.a_sync = true, which is not set");
      }
    }
  }
  return OkStatus();
}

Status CheckFleetInit(const frontend::ParsedProgram& program, std::string_view mode) {
  if (!program.fleet_init || !program.fleet_init->is_collective) return OkStatus();
  const bool collective = *program.fleet_init->is_collective;
  if (collective && mode != "collective") {
    return InvalidArgument("fleet.init at " + program.fleet_init->where +
                           " asks for collective training (is_collective=True), but the job's "
                           "strategy resolves to \"" + std::string(mode) + "\"");
  }
  if (!collective && mode == "collective") {
    return InvalidArgument("fleet.init at " + program.fleet_init->where +
                           " asks for a parameter-server job (is_collective=False), but the "
                           "job's strategy resolves to \"collective\"");
  }
  return OkStatus();
}

StatusOr<std::map<std::string, ir::Program>> Transpile(const Config& config, const Role& role,
                                                       const frontend::ParsedProgram& optimized,
                                                       const PluginRegistry& registry,
                                                       std::vector<PassRun>* ran) {
  FLEET_RETURN_IF_ERROR(CheckPasses(config, registry));
  std::map<std::string, ir::Program> programs = {{"startup", optimized.startup},
                                                 {"main", optimized.main}};
  PassContextInfo ctx;
  // A pserver process transpiles like trainer 0: its own programs do not depend on the id.
  ctx.rank = role.is_pserver() ? 0 : static_cast<int32_t>(role.rank);
  ctx.world_size = static_cast<int32_t>(role.world_size);
  ctx.role = role.role;
  ctx.pserver_endpoints = role.pserver_endpoints;

  auto run = [&](const std::string& name, const ir::AttrMap& given) -> Status {
    FLEET_ASSIGN_OR_RETURN(const ComponentRecord* pass, FindPass(registry, name, ""));
    FLEET_ASSIGN_OR_RETURN(ir::AttrMap from_table, PassTableOptions(config, *pass));
    ir::AttrMap merged = given;
    merged.insert(from_table.begin(), from_table.end());
    FLEET_ASSIGN_OR_RETURN(ir::AttrMap options, ResolvePassOptions(*pass, merged));
    FLEET_RETURN_IF_ERROR(RunPass(*pass, programs, ctx, options));
    if (ran != nullptr) ran->push_back({name, options});
    return OkStatus();
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
    if (pass == "grad_allreduce") options["sparse_exchange"] = c.sparse_exchange;
    FLEET_RETURN_IF_ERROR(run(pass, options).WithContext("strategy.collective_mode"));
    if (c.fuse_grad_size_mb > 0 && pass == "grad_allreduce") {
      FLEET_RETURN_IF_ERROR(run("fuse_allreduce", {{"bucket_mb", c.fuse_grad_size_mb}})
                                .WithContext("strategy.fuse_grad_size_mb"));
    }
    if (c.sync_batch_norm) {
      FLEET_RETURN_IF_ERROR(run("sync_batch_norm", {}).WithContext("strategy.sync_batch_norm"));
    }
  }
  if (mode == "pserver") {
    if (config.collective.sync_batch_norm) {
      return InvalidArgument(Place(config.strategy_where.count("sync_batch_norm")
                                       ? config.strategy_where.at("sync_batch_norm")
                                       : std::string(),
                                   "strategy.sync_batch_norm") +
                             " = true needs a collective job: a parameter-server job has no "
                             "communicator between trainers");
    }
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
                           {"init", ps.init},
                           {"geo_k_steps", ps.a_sync ? std::max<int64_t>(
                                                           ps.a_sync_configs.k_steps, 0)
                                                     : int64_t{0}}};
    FLEET_RETURN_IF_ERROR(run("pserver", options).WithContext("strategy.mode \"pserver\""));
  }
  for (const std::string& name : config.collective.passes) {
    FLEET_RETURN_IF_ERROR(run(name, {}).WithContext("strategy.passes"));
  }
  // Only the pserver pass gives a growable table somewhere to live: its lookups become fetches
  // of rows the servers create; left on a trainer, the one-row prototype would be the table.
  for (const ir::Op& op : programs.at("main").global().ops) {
    const ir::Attribute* g = op.FindAttr("growable");
    if (g == nullptr || !ir::AttrAsBool(*g).value_or(false)) continue;
    if (op.type != "lookup_table" && op.type != "lookup_table_v2") continue;
    return InvalidArgument("table '" + std::string(op.InputOne("W")) + "' is growable (size "
                           "[-1, dim]): its rows live on parameter servers, so the job needs "
                           "[strategy] mode = \"pserver\" (this one is \"" + mode + "\")");
  }
  return programs;
}

}  // namespace fleet
