// The program pipeline shared by `run` and `show`: parse the program file, append the backward
// ops of its loss, then the optimizer's update ops, then (for a trainer of a distributed job)
// the transpile passes of [strategy]. Each stage is a complete set of programs.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "config/config.h"
#include "dist/role.h"
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
StatusOr<frontend::ParsedProgram> BuildPrograms(const std::filesystem::path& file, Stage stage);

// [strategy] mode with "auto" decided: "collective" for a job of several trainers, else "none".
std::string EffectiveStrategy(const Config& config, const Role& role);

// The program set {"startup", "main", and "main.local" for local_sgd with k_steps > 1} that
// trainer `role.rank` of `role.world_size` runs. For a collective strategy: the collective pass
// ([strategy] collective_mode with nrings and local_sgd_k_steps), then fuse_allreduce when
// fuse_grad_size_mb > 0, then each of [strategy] passes, all from `registry` (built-in passes
// must be registered). Other strategies return the optimized programs unchanged, except that
// [strategy] passes still run.
StatusOr<std::map<std::string, ir::Program>> Transpile(const Config& config, const Role& role,
                                                       const frontend::ParsedProgram& optimized,
                                                       const PluginRegistry& registry);

}  // namespace fleet
