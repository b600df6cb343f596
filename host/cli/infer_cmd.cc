// `fleet-host infer DIR --input [FEED=]FILE.npy [...] [--out DIR]`: an exported model run on
// .npy inputs (job/inference.h); each fetch is printed, and with --out written as NAME.npy.
#include <filesystem>
#include <utility>

#include "cli/args.h"
#include "cli/cli.h"
#include "job/inference.h"
#include "support/text.h"

namespace fleet {

int InferCommand(const GlobalOptions& global_in, const std::vector<std::string>& args,
                 std::ostream& out, std::ostream& err) {
  constexpr const char* kUsage = "fleet-host infer DIR --input [FEED=]FILE.npy [...] [--out DIR]";
  GlobalOptions global = global_in;
  auto w = ParseWords("infer", args,
                      {.single = {"--out"}, .repeatable = {"--input"}, .boolean = {}}, global,
                      kUsage, err);
  if (!w) return kExitUsage;
  if (w->positional.size() != 1 || !w->values.count("--input")) {
    err << "fleet-host infer: an export directory and --input are needed; usage: " << kUsage
        << "\n";
    return kExitUsage;
  }
  std::vector<std::pair<std::string, std::filesystem::path>> inputs;
  for (const std::string& in : w->values.at("--input")) {
    const size_t eq = in.find('=');
    if (eq == std::string::npos) {
      inputs.emplace_back("", in);
    } else if (eq + 1 == in.size()) {
      // "FEED=" names no file; read as one it would be the empty path.
      err << "fleet-host infer: --input " << QuoteForMessage(in) << ": no file after '='; usage: "
          << kUsage << "\n";
      return kExitUsage;
    } else {
      inputs.emplace_back(in.substr(0, eq), in.substr(eq + 1));
    }
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  auto result = RunInference(*config, w->positional[0], inputs, One(*w, "--out"));
  if (!result.ok()) return Fail(err, result.status());
  for (size_t i = 0; i < result->fetched.size(); ++i) {
    out << result->names[i] << ": " << TensorSummary(result->fetched[i]) << "\n";
  }
  return kExitOk;
}

}  // namespace fleet
