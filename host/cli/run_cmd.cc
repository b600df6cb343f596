// `fleet-host run PROGRAM [--resume] [--config FILE] [--set KEY=VALUE ...]`: this process's part
// of a training job (job/run.h): train as a trainer, or serve as a parameter server until every
// trainer has completed.
#include <string>
#include <utility>
#include <vector>

#include "cli/args.h"
#include "cli/cli.h"
#include "job/run.h"
#include "roles/role.h"
#include "support/text.h"

namespace fleet {

int RunCommand(const GlobalOptions& global, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err) {
  constexpr const char* kUsage =
      "fleet-host run PROGRAM [--resume] [--config FILE] [--set KEY=VALUE ...]";
  // --config and --set may also follow the program, as in `run mlp.fleet --set train.steps=5`.
  GlobalOptions options = global;
  auto w = ParseWords("run", args, {.single = {}, .repeatable = {}, .boolean = {"--resume"}},
                      options, kUsage, err);
  if (!w) return kExitUsage;
  if (w->positional.empty()) {
    err << "fleet-host run: which program? usage: " << kUsage << "\n";
    return kExitUsage;
  }
  if (w->positional.size() > 1) {
    err << "fleet-host run: unexpected argument " << QuoteForMessage(w->positional[1])
        << "; usage: " << kUsage << "\n";
    return kExitUsage;
  }
  const std::string& file = w->positional[0];
  const bool resume = Has(*w, "--resume");
  auto config = LoadConfigFor(options);
  if (!config.ok()) return Fail(err, config.status());
  JobRequest request;
  request.program = file;
  request.config = std::move(*config);
  request.resume = resume;
  request.env = ProcessEnvironment();
  Status s = RunJob(request, out, [&](const std::string& warning) {
    err << "fleet-host: warning: " << warning << "\n";
  });
  if (!s.ok()) return Fail(err, s);
  return kExitOk;
}

}  // namespace fleet
