// The program pipeline shared by `run` and `show`: parse the program file, append the backward
// ops of its loss, then the optimizer's update ops, then (for a trainer of a distributed job)
// the transpile passes of [strategy]. Each stage is a complete set of programs.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "config/config.h"
#include "roles/role.h"
#include "frontend/frontend.h"
#include "ir/program.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

enum class Stage { kParsed, kBackward, kOptimized, kTranspiled };

// "parsed", "backward", "optimized" or "transpiled"; anything else is INVALID_ARGUMENT listing
// those.
StatusOr<Stage> ParseStage(std::string_view name);

// The programs of `file` after `stage` (kTranspiled gives kOptimized here: see Transpile). A
// file without minimize() stops after parsing (there is nothing to differentiate); `run` checks
// for a loss itself.
// With `sparse_gradients` (and an optimizer that applies them, optim::
// OptimizerTakesSparseGradients), an embedding built with is_sparse=True gets a sparse gradient
// (ir::Var::selected_rows); otherwise every gradient is dense.
StatusOr<frontend::ParsedProgram> BuildPrograms(const std::filesystem::path& file, Stage stage,
                                                bool sparse_gradients = true);

// Why the job of `config` (its [strategy] mode resolved) on `device` trains embeddings with
// dense gradients though they ask for sparse ones; "" when it can use sparse ones: every
// strategy can (one process; collective trainers, whose grad_allreduce exchanges them and whose
// local_sgd keeps them local; parameter-server trainers, which send them in row blocks through
// `transport` when it speaks ABI 1.7, from a device whose tensors are in host memory), on a
// device with kernels that take them (FLEET_KERNEL_FLAG_SELECTED_ROWS). `transport` may be null (no transport selected: the job
// fails elsewhere if it needs one).
std::string DenseGradientsReason(const Config& config, const PluginRegistry& registry,
                                 const std::string& device,
                                 const ComponentRecord* transport = nullptr);

// Whether a program asks for sparse gradients (an op with is_sparse=True).
bool AsksForSparseGradients(const ir::Program& main);

// [strategy] mode with "auto" decided: "collective" for a job of several trainers, else "none".
std::string EffectiveStrategy(const Config& config, const Role& role);

// Merges the DistributedStrategy a program file set (frontend::ProgramStrategyKey: its
// strategy.KEY = value lines handed to fleet.distributed_optimizer) into config's [strategy]:
// a key only the file sets is applied; a key fleet.toml (or --set) also sets must agree, or the
// error names both places. Call before EffectiveStrategy.
Status MergeProgramStrategy(const frontend::ParsedProgram& program, Config& config);

// fleet.init(is_collective=...) or the role maker's against the strategy mode the job resolved
// to: is_collective=True needs "collective", False (a parameter-server role maker) "pserver".
Status CheckFleetInit(const frontend::ParsedProgram& program, std::string_view mode);

// The program set of a job under [strategy], all passes from `registry` (built-in passes must
// be registered):
//   - collective: {"startup", "main", and "main.local" for local_sgd with k_steps > 1} that
//     trainer `role.rank` of `role.world_size` runs: the collective pass ([strategy]
//     collective_mode with nrings and local_sgd_k_steps), then fuse_allreduce when
//     fuse_grad_size_mb > 0;
//   - pserver: the whole parameter-server set, {"main", "startup"} of trainer `role.rank` (0
//     in a pserver process) and "pserver.<i>", "pserver.<i>.startup" for every server of
//     role.pserver_endpoints (the "pserver" pass with [strategy] sync_mode, slice_var_up,
//     min_block_size, split_method and init; world_size = the number of trainers). Needs a
//     program with minimize and at least one server endpoint; the caller picks the programs
//     of its role;
//   - others: the optimized programs unchanged.
// Then each of [strategy] passes runs on the set, with its [passes.NAME] options.
// `ran`, when given, receives each pass that ran and the options it saw (defaults filled in).
struct PassRun {
  std::string name;
  ir::AttrMap options;
};
StatusOr<std::map<std::string, ir::Program>> Transpile(const Config& config, const Role& role,
                                                       const frontend::ParsedProgram& optimized,
                                                       const PluginRegistry& registry,
                                                       std::vector<PassRun>* ran = nullptr);

// Checks the passes the config names against `registry` (built-in passes registered): every
// pass of strategy.passes is registered; for every [passes.NAME] table, NAME is a registered
// pass, each key one of its declared options with a value of a convertible type, and not an
// option the host sets from [strategy] (the built-in passes take theirs from there). Errors name
// the key and where it was set ("fleet.toml:12:3" or "--set passes.x.y"), and for an unknown
// pass every registered one. Transpile calls it, so `run` and `show` check this way whatever
// the job's mode; `check` calls it for jobs that would not transpile.
Status CheckPasses(const Config& config, const PluginRegistry& registry);


}  // namespace fleet
