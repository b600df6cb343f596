// `fleet-host export`, `infer` and `convert`: a trained model out of Fleet's training world
// (checkpoint/export.h, checkpoint/convert.h).
//
//   export PROGRAM --fetch VAR [--fetch ...] [--feed VAR ...] --out DIR
//          [--params DIR | --checkpoint ROOT] [--force]
//   infer DIR --input [FEED=]FILE.npy [...] [--out DIR]
//   convert SRC --out DST [--force]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "checkpoint/export.h"
#include "checkpoint/init_from.h"
#include "cli/cli.h"
#include "job/pipeline.h"
#include "data/npy.h"
#include "executor/executor.h"
#include "plugin/registry.h"
#include "plugin/selection.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

// The words of one command: flags with values, boolean flags and positional arguments.
struct Words {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;
  std::vector<std::string> flags;
};

// Splits `args` by the flags a command knows; --config and --set are global options and may
// follow the command too. Prints the usage error and returns nullopt on a bad word.
std::optional<Words> ParseWords(const std::string& command, const std::vector<std::string>& args,
                                const std::vector<std::string>& with_value,
                                const std::vector<std::string>& boolean, GlobalOptions& global,
                                const char* usage, std::ostream& err) {
  Words w;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool takes = std::find(with_value.begin(), with_value.end(), a) != with_value.end() ||
                       a == "--config" || a == "--set";
    if (takes) {
      if (i + 1 >= args.size()) {
        err << "fleet-host " << command << ": " << a << " needs a value; usage: " << usage << "\n";
        return std::nullopt;
      }
      const std::string& v = args[++i];
      if (a == "--config") {
        global.config_path = v;
      } else if (a == "--set") {
        global.overrides.push_back(v);
      } else {
        w.values[a].push_back(v);
      }
    } else if (std::find(boolean.begin(), boolean.end(), a) != boolean.end()) {
      w.flags.push_back(a);
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host " << command << ": unknown option '" << a << "'; usage: " << usage
          << "\n";
      return std::nullopt;
    } else {
      w.positional.push_back(a);
    }
  }
  return w;
}

bool Has(const Words& w, const std::string& flag) {
  return std::find(w.flags.begin(), w.flags.end(), flag) != w.flags.end();
}

std::string One(const Words& w, const std::string& flag) {
  auto it = w.values.find(flag);
  return it == w.values.end() || it->second.empty() ? "" : it->second.back();
}

// An executor on the config's device, for a job of one process.
struct Runtime {
  std::unique_ptr<PluginRegistry> registry;
  std::unique_ptr<exec::Executor> executor;
};

StatusOr<Runtime> MakeRuntime(Config config) {
  config.strategy_mode = "none";  // only the device: no communicator, no transport
  Runtime rt;
  rt.registry = std::make_unique<PluginRegistry>(LoadOptionsFor(config));
  FLEET_ASSIGN_OR_RETURN(Selection selection, LoadSelected(config, *rt.registry));
  exec::ExecutorOptions options;
  options.num_threads = static_cast<int32_t>(config.train.threads);
  options.seed = static_cast<uint64_t>(config.train.seed);
  FLEET_ASSIGN_OR_RETURN(rt.executor,
                         exec::Executor::Create(*rt.registry, selection.device->name, options));
  return rt;
}

std::string Summary(const exec::HostTensor& t) {
  std::string out = ir::TypeShapeText(t.dtype, t.dims);
  const int64_t n = std::min<int64_t>(t.numel(), 6);
  out += " [";
  for (int64_t i = 0; i < n; ++i) {
    char buf[32];
    double v = 0;
    switch (t.dtype) {
      case ir::DataType::kFloat32: v = t.data<float>()[i]; break;
      case ir::DataType::kFloat64: v = t.data<double>()[i]; break;
      case ir::DataType::kInt64: v = static_cast<double>(t.data<int64_t>()[i]); break;
      case ir::DataType::kInt32: v = t.data<int32_t>()[i]; break;
      default: out += "?"; continue;
    }
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    out += (i ? ", " : "") + std::string(buf);
  }
  return out + (t.numel() > n ? ", ...]" : "]");
}

}  // namespace

int ExportCommand(const GlobalOptions& global_in, const std::vector<std::string>& args,
                  std::ostream& out, std::ostream& err) {
  constexpr const char* kUsage =
      "fleet-host export PROGRAM --fetch VAR [--fetch VAR ...] [--feed VAR ...] --out DIR "
      "[--params DIR | --checkpoint ROOT] [--force]";
  GlobalOptions global = global_in;
  auto w = ParseWords("export", args, {"--feed", "--fetch", "--out", "--params", "--checkpoint"},
                      {"--force"}, global, kUsage, err);
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
  const std::string file = w->positional[0];
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  // The optimized programs make the scope of a trained model (accumulators included), so a
  // checkpoint of it restores whole; the parsed main is the forward part to prune.
  auto optimized = BuildPrograms(file, Stage::kOptimized);
  if (!optimized.ok()) return Fail(err, optimized.status());
  auto parsed = BuildPrograms(file, Stage::kParsed);
  if (!parsed.ok()) return Fail(err, parsed.status());
  // Names the file gives its values ("prediction") stand for the vars they hold.
  auto var_of = [&](const std::string& name) {
    auto it = parsed->names.find(name);
    return it == parsed->names.end() ? name : it->second;
  };
  std::vector<std::string> feeds;
  if (w->values.count("--feed")) {
    for (const std::string& f : w->values.at("--feed")) feeds.push_back(var_of(f));
  }
  std::vector<checkpoint::ExportedFetch> fetches;
  std::vector<std::string> fetch_vars;
  for (const std::string& f : w->values.at("--fetch")) {
    fetches.push_back({f, var_of(f)});
    fetch_vars.push_back(var_of(f));
  }
  auto pruned = checkpoint::PruneForInference(parsed->main, feeds, fetch_vars);
  if (!pruned.ok()) return Fail(err, pruned.status().WithContext(file));

  auto rt = MakeRuntime(*config);
  if (!rt.ok()) return Fail(err, rt.status());
  exec::Executor& executor = *rt->executor;
  std::vector<exec::HostTensor> none;
  if (Status s = executor.Run(optimized->startup, {}, {}, none); !s.ok()) {
    return Fail(err, s.WithContext(file + ": startup program"));
  }
  std::string weights = "the startup program's initial values";
  if (const std::string dir = One(*w, "--params"); !dir.empty()) {
    auto loaded = checkpoint::LoadInitialWeights(dir, executor.scope(),
                                                 {&optimized->startup, &optimized->main});
    if (!loaded.ok()) return Fail(err, loaded.status().WithContext("--params"));
    weights = std::to_string(loaded->size()) + " vars of " + dir;
  } else if (const std::string root = One(*w, "--checkpoint"); !root.empty()) {
    std::vector<std::string> warnings;
    auto found = checkpoint::FindLatestCheckpoint(
        root, checkpoint::ProgramHash({&optimized->startup, &optimized->main}), "", 1, warnings);
    for (const std::string& m : warnings) err << "fleet-host: warning: checkpoint: " << m << "\n";
    if (!found.ok()) return Fail(err, found.status());
    if (!found->has_value()) {
      return Fail(err, NotFound("--checkpoint: no intact checkpoint of this program in '" +
                                root + "'"));
    }
    Status s = checkpoint::RestoreScope((*found)->state, executor.scope(),
                                        "checkpoint '" + (*found)->dir.string() + "'");
    if (!s.ok()) return Fail(err, s);
    weights = (*found)->dir.string();
  }
  Status s = checkpoint::WriteExport(One(*w, "--out"), pruned->program, pruned->feeds, fetches,
                                     executor.scope(), file, Has(*w, "--force"));
  if (!s.ok()) return Fail(err, s);
  std::string feed_list, fetch_list;
  for (const auto& f : pruned->feeds) feed_list += (feed_list.empty() ? "" : ", ") + f;
  for (const auto& f : w->values.at("--fetch")) fetch_list += (fetch_list.empty() ? "" : ", ") + f;
  out << "exported " << pruned->program.global().ops.size() << " ops and "
      << checkpoint::PersistablesUsed(pruned->program).size() << " parameters (from " << weights
      << ") to " << One(*w, "--out") << ": feeds " << feed_list << "; fetches " << fetch_list
      << "\n";
  return kExitOk;
}

int InferCommand(const GlobalOptions& global_in, const std::vector<std::string>& args,
                 std::ostream& out, std::ostream& err) {
  constexpr const char* kUsage = "fleet-host infer DIR --input [FEED=]FILE.npy [...] [--out DIR]";
  GlobalOptions global = global_in;
  auto w = ParseWords("infer", args, {"--input", "--out"}, {}, global, kUsage, err);
  if (!w) return kExitUsage;
  if (w->positional.size() != 1 || !w->values.count("--input")) {
    err << "fleet-host infer: an export directory and --input are needed; usage: " << kUsage
        << "\n";
    return kExitUsage;
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  auto model = checkpoint::ReadExport(w->positional[0]);
  if (!model.ok()) return Fail(err, model.status());

  // Inputs by feed; a lone input may leave the feed's name out when there is one feed.
  std::map<std::string, fs::path> inputs;
  for (const std::string& in : w->values.at("--input")) {
    const size_t eq = in.find('=');
    if (eq == std::string::npos) {
      if (model->feeds.size() != 1 || w->values.at("--input").size() != 1) {
        return Fail(err, InvalidArgument("--input " + in + ": the model has " +
                                         std::to_string(model->feeds.size()) +
                                         " feeds; name each (--input FEED=FILE.npy)"));
      }
      inputs[model->feeds[0].name] = in;
    } else {
      inputs[in.substr(0, eq)] = in.substr(eq + 1);
    }
  }
  exec::FeedMap feeds;
  exec::FeedShapes shapes;
  int64_t batch = -1;
  for (const checkpoint::ExportedFeed& f : model->feeds) {
    auto it = inputs.find(f.name);
    if (it == inputs.end()) {
      return Fail(err, InvalidArgument("no --input for feed '" + f.name + "' (" +
                                       ir::TypeShapeText(f.dtype, f.shape) + ")"));
    }
    auto array = data::ReadNpy(it->second);
    if (!array.ok()) return Fail(err, array.status());
    std::vector<int64_t> want = f.shape;
    if (array->dims.size() != want.size() || array->dtype != f.dtype ||
        !std::equal(want.begin() + 1, want.end(), array->dims.begin() + 1) ||
        (want[0] >= 0 && want[0] != array->dims[0])) {
      return Fail(err, InvalidArgument("feed '" + f.name + "' is " +
                                       ir::TypeShapeText(f.dtype, f.shape) + " but '" +
                                       it->second.string() + "' holds " +
                                       ir::TypeShapeText(array->dtype, array->dims)));
    }
    if (batch >= 0 && array->dims[0] != batch) {
      return Fail(err, InvalidArgument("'" + it->second.string() + "' has " +
                                       std::to_string(array->dims[0]) +
                                       " samples, the other inputs " + std::to_string(batch)));
    }
    batch = array->dims[0];
    shapes[f.name] = array->dims;
    exec::HostTensor& t = feeds[f.name];
    t.dtype = array->dtype;
    t.dims = array->dims;
    t.bytes = std::move(array->bytes);
    inputs.erase(it);
  }
  if (!inputs.empty()) {
    return Fail(err, InvalidArgument("--input names '" + inputs.begin()->first +
                                     "', which is not a feed of the model"));
  }
  auto rt = MakeRuntime(*config);
  if (!rt.ok()) return Fail(err, rt.status());
  exec::Executor& executor = *rt->executor;
  for (const auto& p : model->params.tensors) {
    if (Status s = executor.scope().Write(p.name, p.tensor); !s.ok()) return Fail(err, s);
  }
  std::vector<std::string> fetch_vars;
  for (const auto& f : model->fetches) fetch_vars.push_back(f.var);
  auto prepared = executor.Prepare(model->program, shapes, fetch_vars);
  if (!prepared.ok()) return Fail(err, prepared.status().WithContext(w->positional[0]));
  std::vector<exec::HostTensor> fetched;
  if (Status s = executor.Run(**prepared, feeds, fetched); !s.ok()) {
    return Fail(err, s.WithContext(w->positional[0]));
  }
  const std::string out_dir = One(*w, "--out");
  if (!out_dir.empty()) {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) return Fail(err, Unavailable("--out: cannot create '" + out_dir + "': " + ec.message()));
  }
  for (size_t i = 0; i < fetched.size(); ++i) {
    const std::string& name = model->fetches[i].name;
    out << name << ": " << Summary(fetched[i]) << "\n";
    if (out_dir.empty()) continue;
    data::NpyArray a;
    a.dtype = fetched[i].dtype;
    a.dims = fetched[i].dims;
    a.bytes = std::move(fetched[i].bytes);
    const fs::path file = fs::path(out_dir) / (name + ".npy");
    if (Status s = data::WriteNpy(file, a); !s.ok()) return Fail(err, s);
  }
  return kExitOk;
}

int ConvertCommand(const GlobalOptions& global_in, const std::vector<std::string>& args,
                   std::ostream& out, std::ostream& err) {
  constexpr const char* kUsage = "fleet-host convert SRC --out DST [--force]";
  GlobalOptions global = global_in;
  auto w = ParseWords("convert", args, {"--out"}, {"--force"}, global, kUsage, err);
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
