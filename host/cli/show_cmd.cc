// `fleet-host show PROGRAM [--stage S] [--program P]`: the programs after a pipeline stage, as
// text IR.
#include "cli/cli.h"
#include "cli/pipeline.h"
#include "ir/text.h"

namespace fleet {

int ShowCommand(const GlobalOptions& global, const std::vector<std::string>& args,
                std::ostream& out, std::ostream& err) {
  (void)global;  // show reads no config: it touches neither plugins nor devices
  std::string file, stage_name = "optimized", which = "all";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--stage" || a == "--program") {
      if (i + 1 >= args.size()) {
        err << "fleet-host show: " << a << " needs a value\n";
        return kExitUsage;
      }
      (a == "--stage" ? stage_name : which) = args[++i];
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
           "[--stage parsed|backward|optimized] [--program main|startup|all]\n";
    return kExitUsage;
  }
  auto stage = ParseStage(stage_name);
  if (!stage.ok()) {
    err << "fleet-host show: --stage: " << stage.status().message() << "\n";
    return kExitUsage;
  }
  if (which != "main" && which != "startup" && which != "all") {
    err << "fleet-host show: --program: unknown program '" << which
        << "': expected main, startup or all\n";
    return kExitUsage;
  }
  auto programs = BuildPrograms(file, *stage);
  if (!programs.ok()) return Fail(err, programs.status());
  if (which == "all") {
    out << ir::PrintProgramSet({{"startup", programs->startup}, {"main", programs->main}});
  } else {
    out << ir::PrintProgram(which == "main" ? programs->main : programs->startup);
  }
  return kExitOk;
}

}  // namespace fleet
