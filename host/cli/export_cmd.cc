// `fleet-host export PROGRAM --fetch VAR [--fetch ...] [--feed VAR ...] --out DIR
// [--params DIR | --checkpoint ROOT] [--force]`: a trained model out of Fleet's training world
// (job/export.h).
#include "cli/args.h"
#include "cli/cli.h"
#include "job/export.h"

namespace fleet {

int ExportCommand(const GlobalOptions& global_in, const std::vector<std::string>& args,
                  std::ostream& out, std::ostream& err) {
  constexpr const char* kUsage =
      "fleet-host export PROGRAM --fetch VAR [--fetch VAR ...] [--feed VAR ...] --out DIR "
      "[--params DIR | --checkpoint ROOT] [--force]";
  GlobalOptions global = global_in;
  auto w = ParseWords("export", args,
                      {.single = {"--out", "--params", "--checkpoint"},
                       .repeatable = {"--feed", "--fetch"},
                       .boolean = {"--force"}},
                      global, kUsage, err);
  if (!w) return kExitUsage;
  if (w->positional.size() != 1 || One(*w, "--out").empty() || !w->values.count("--fetch")) {
    err << "fleet-host export: a program, --fetch and --out are needed; usage: " << kUsage
        << "\n";
    return kExitUsage;
  }
  if (!One(*w, "--params").empty() && !One(*w, "--checkpoint").empty()) {
    err << "fleet-host export: --params and --checkpoint exclude each other\n";
    return kExitUsage;
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  ExportRequest request;
  request.program = w->positional[0];
  request.fetches = w->values.at("--fetch");
  if (w->values.count("--feed")) request.feeds = w->values.at("--feed");
  request.out = One(*w, "--out");
  request.params_dir = One(*w, "--params");
  request.checkpoint_root = One(*w, "--checkpoint");
  request.force = Has(*w, "--force");
  auto report = ExportModel(*config, request);
  if (!report.ok()) return Fail(err, report.status());
  for (const std::string& m : report->warnings) {
    err << "fleet-host: warning: checkpoint: " << m << "\n";
  }
  std::string feed_list, fetch_list;
  for (const auto& f : report->feeds) feed_list += (feed_list.empty() ? "" : ", ") + f;
  for (const auto& f : request.fetches) fetch_list += (fetch_list.empty() ? "" : ", ") + f;
  out << "exported " << report->ops << " ops and " << report->params << " parameters (from "
      << report->weights << ") to " << request.out << ": feeds " << feed_list << "; fetches "
      << fetch_list << "\n";
  return kExitOk;
}

}  // namespace fleet
