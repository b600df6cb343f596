// `fleet-host convert SRC --out DST [--force]`: tensors between safetensors files, checkpoints,
// exports and directories of NAME.npy (checkpoint/convert.h).
#include <filesystem>

#include "checkpoint/convert.h"
#include "checkpoint/safetensors.h"
#include "cli/args.h"
#include "cli/cli.h"

namespace fleet {

namespace fs = std::filesystem;

int ConvertCommand(const GlobalOptions& global_in, const std::vector<std::string>& args,
                   std::ostream& out, std::ostream& err) {
  constexpr const char* kUsage = "fleet-host convert SRC --out DST [--force]";
  GlobalOptions global = global_in;
  auto w = ParseWords("convert", args,
                      {.single = {"--out"}, .repeatable = {}, .boolean = {"--force"}}, global,
                      kUsage, err);
  if (!w) return kExitUsage;
  if (w->positional.size() != 1 || One(*w, "--out").empty()) {
    err << "fleet-host convert: a source and --out are needed; usage: " << kUsage << "\n"
        << "  SRC: a .safetensors file, a checkpoint's step directory, an export, or a directory "
           "of NAME.npy\n  DST: a directory (one NAME.npy per tensor) or a file ending in "
           ".safetensors\n";
    return kExitUsage;
  }
  auto st = checkpoint::ReadTensors(w->positional[0]);
  if (!st.ok()) return Fail(err, st.status());
  const fs::path dst = One(*w, "--out");
  Status s;
  if (dst.extension() == ".safetensors") {
    std::error_code ec;
    if (fs::exists(dst, ec) && !Has(*w, "--force")) {
      return Fail(err, AlreadyExists("'" + dst.string() + "' exists (--force replaces it)"));
    }
    s = checkpoint::WriteSafeTensors(dst, *st).status();
  } else {
    s = checkpoint::WriteNpyDirectory(dst, *st, Has(*w, "--force"));
  }
  if (!s.ok()) return Fail(err, s);
  out << "wrote " << st->tensors.size() << " tensors to " << dst.string() << "\n";
  return kExitOk;
}

}  // namespace fleet
