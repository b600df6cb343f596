// `fleet-host run PROGRAM [--resume] [--config FILE] [--set KEY=VALUE ...]`: this process's part
// of a training job (job/run.h): train as a trainer, or serve as a parameter server until every
// trainer has completed.
#include <string>
#include <utility>
#include <vector>

#include "cli/cli.h"
#include "job/run.h"
#include "roles/role.h"

namespace fleet {

int RunCommand(const GlobalOptions& global, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err) {
  // --config and --set may also follow the program, as in `run mlp.fleet --set train.steps=5`.
  GlobalOptions options = global;
  std::string file;
  bool resume = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--resume") {
      resume = true;
    } else if (a == "--config" || a == "--set") {
      if (i + 1 >= args.size()) {
        err << "fleet-host run: " << a << " needs a value\n";
        return kExitUsage;
      }
      if (a == "--config") {
        options.config_path = args[++i];
      } else {
        options.overrides.push_back(args[++i]);
      }
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host run: unknown option '" << a << "'\n";
      return kExitUsage;
    } else if (file.empty()) {
      file = a;
    } else {
      err << "fleet-host run: unexpected argument '" << a << "'\n";
      return kExitUsage;
    }
  }
  if (file.empty()) {
    err << "fleet-host run: which program? usage: fleet-host run PROGRAM [--resume] "
           "[--config FILE] [--set KEY=VALUE ...]\n";
    return kExitUsage;
  }
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
