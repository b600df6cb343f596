#include "job/export.h"

#include <optional>

#include "checkpoint/checkpoint.h"
#include "checkpoint/export.h"
#include "checkpoint/init_from.h"
#include "job/local_runtime.h"
#include "job/pipeline.h"

namespace fleet {

StatusOr<ExportReport> ExportModel(const Config& config, const ExportRequest& request) {
  const std::string& file = request.program;
  // The optimized programs make the scope of a trained model (accumulators included), so a
  // checkpoint of it restores whole; the parsed main is the forward part to prune.
  FLEET_ASSIGN_OR_RETURN(frontend::ParsedProgram optimized,
                         BuildPrograms(file, Stage::kOptimized));
  FLEET_ASSIGN_OR_RETURN(frontend::ParsedProgram parsed, BuildPrograms(file, Stage::kParsed));
  // Names the file gives its values ("prediction") stand for the vars they hold.
  auto var_of = [&](const std::string& name) {
    auto it = parsed.names.find(name);
    return it == parsed.names.end() ? name : it->second;
  };
  std::vector<std::string> feeds;
  for (const std::string& f : request.feeds) feeds.push_back(var_of(f));
  std::vector<checkpoint::ExportedFetch> fetches;
  std::vector<std::string> fetch_vars;
  for (const std::string& f : request.fetches) {
    fetches.push_back({f, var_of(f)});
    fetch_vars.push_back(var_of(f));
  }
  auto pruned = checkpoint::PruneForInference(parsed.main, feeds, fetch_vars);
  if (!pruned.ok()) return pruned.status().WithContext(file);

  FLEET_ASSIGN_OR_RETURN(LocalRuntime rt, MakeLocalRuntime(config));
  exec::Executor& executor = *rt.executor;
  std::vector<exec::HostTensor> none;
  if (Status s = executor.Run(optimized.startup, {}, {}, none); !s.ok()) {
    return s.WithContext(file + ": startup program");
  }
  ExportReport report;
  report.weights = "the startup program's initial values";
  if (!request.params_dir.empty()) {
    auto loaded = checkpoint::LoadInitialWeights(request.params_dir, executor.scope(),
                                                 {&optimized.startup, &optimized.main});
    if (!loaded.ok()) return loaded.status().WithContext("--params");
    report.weights = std::to_string(loaded->size()) + " vars of " + request.params_dir;
  } else if (!request.checkpoint_root.empty()) {
    const std::string& root = request.checkpoint_root;
    FLEET_ASSIGN_OR_RETURN(
        std::optional<checkpoint::LoadedCheckpoint> found,
        checkpoint::FindLatestCheckpoint(
            root, checkpoint::ProgramHash({&optimized.startup, &optimized.main}), "", 1,
            report.warnings));
    if (!found.has_value()) {
      return NotFound("--checkpoint: no intact checkpoint of this program in '" + root + "'");
    }
    FLEET_RETURN_IF_ERROR(checkpoint::RestoreScope(found->state, executor.scope(),
                                                   "checkpoint '" + found->dir.string() + "'"));
    report.weights = found->dir.string();
  }
  FLEET_RETURN_IF_ERROR(checkpoint::WriteExport(request.out, pruned->program, pruned->feeds,
                                                fetches, executor.scope(), file, request.force));
  report.ops = pruned->program.global().ops.size();
  report.params = checkpoint::PersistablesUsed(pruned->program).size();
  report.feeds = pruned->feeds;
  return report;
}

}  // namespace fleet
