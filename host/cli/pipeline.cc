#include "cli/pipeline.h"

#include <set>

#include "autodiff/backward.h"
#include "optim/optimizer.h"

namespace fleet {

StatusOr<Stage> ParseStage(std::string_view name) {
  if (name == "parsed") return Stage::kParsed;
  if (name == "backward") return Stage::kBackward;
  if (name == "optimized") return Stage::kOptimized;
  return InvalidArgument("unknown stage '" + std::string(name) +
                         "': expected parsed, backward or optimized");
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

}  // namespace fleet
