#include "job/export.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/export.h"
#include "checkpoint/init_from.h"
#include "job/local_runtime.h"
#include "job/pipeline.h"
#include "support/host_memory.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

using Shards = std::optional<std::vector<checkpoint::LoadedCheckpoint>>;

// The shards of the newest checkpoint of a parameter-server job under `root` ("pserver.<i>",
// one per server, all of one step), or nullopt when `root` holds no such checkpoint.
StatusOr<Shards> ServerShards(
    const fs::path& root, const std::string& hash, std::vector<std::string>& warnings) {
  std::ifstream in(root / "latest");
  std::string latest;
  std::getline(in, latest);
  const fs::path first = root / latest / "pserver.0";
  std::error_code ec;
  if (latest.empty() || !fs::is_directory(first, ec)) return Shards();
  FLEET_ASSIGN_OR_RETURN(checkpoint::LoadedCheckpoint shard0, checkpoint::ReadCheckpointDir(first));
  const int64_t n = shard0.info.num_shards;
  std::vector<checkpoint::LoadedCheckpoint> shards;
  for (int64_t i = 0; i < n; ++i) {
    FLEET_ASSIGN_OR_RETURN(std::optional<checkpoint::LoadedCheckpoint> found,
                           checkpoint::FindLatestCheckpoint(root, hash,
                                                            "pserver." + std::to_string(i), n,
                                                            warnings));
    if (!found) return Shards();
    if (!shards.empty() && found->info.step != shards[0].info.step) {
      return FailedPrecondition("the servers' newest intact shards are of different steps (" +
                                std::to_string(shards[0].info.step) + " and " +
                                std::to_string(found->info.step) + ")");
    }
    shards.push_back(std::move(*found));
  }
  return Shards(std::move(shards));
}

// Writes each var of `wanted` into `scope` from the servers' shards: whole where a shard holds
// it, else its row blocks "<var>.block<k>" (the pserver pass's cut) joined in order.
Status GatherFromServers(const std::vector<checkpoint::LoadedCheckpoint>& shards,
                         const std::vector<std::string>& wanted, exec::Scope& scope) {
  std::map<std::string, const exec::HostTensor*> held;
  for (const checkpoint::LoadedCheckpoint& s : shards) {
    for (const checkpoint::NamedTensor& t : s.state.tensors) held[t.name] = &t.tensor;
  }
  for (const std::string& name : wanted) {
    const exec::ScopeVar* v = scope.Find(name);
    if (v == nullptr) continue;
    if (auto it = held.find(name); it != held.end()) {
      FLEET_RETURN_IF_ERROR(scope.Write(name, *it->second));
      continue;
    }
    exec::HostTensor whole;
    whole.Reshape(v->dtype, v->dims);
    size_t at = 0;
    int64_t rows = 0;
    for (int k = 0;; ++k) {
      auto it = held.find(name + ".block" + std::to_string(k));
      if (it == held.end()) break;
      const exec::HostTensor& b = *it->second;
      if (b.dtype != v->dtype || b.dims.empty() || v->dims.empty() ||
          std::vector<int64_t>(b.dims.begin() + 1, b.dims.end()) !=
              std::vector<int64_t>(v->dims.begin() + 1, v->dims.end()) ||
          at + b.bytes.size() > whole.bytes.size()) {
        return FailedPrecondition("the servers' block '" + it->first + "' is " +
                                  ir::TypeShapeText(b.dtype, b.dims) + ", which is no row block "
                                  "of '" + name + "' " + ir::TypeShapeText(v->dtype, v->dims));
      }
      std::memcpy(whole.bytes.data() + at, b.bytes.data(), b.bytes.size());
      at += b.bytes.size();
      rows += b.dims[0];
    }
    if (rows == 0) {
      return FailedPrecondition("no server's shard holds '" + name + "' or its blocks");
    }
    if (at != whole.bytes.size()) {
      return FailedPrecondition("the servers' blocks of '" + name + "' hold " +
                                std::to_string(rows) + " rows of its " +
                                std::to_string(v->dims[0]));
    }
    FLEET_RETURN_IF_ERROR(scope.Write(name, whole));
  }
  return OkStatus();
}

// An export holds every table whole, and its process holds the trained program's state while
// it writes one: refused up front, naming the largest var, when that cannot fit.
Status CheckStateFits(const ir::Program& program) {
  uint64_t total = 0, largest = 0;
  std::string name;
  for (const auto& [n, v] : program.global().vars) {
    if (!v.persistable) continue;
    auto bytes = ir::TensorBytes(v.dtype, v.shape);
    if (!bytes.ok()) continue;  // a shape known only at run time
    const uint64_t b = static_cast<uint64_t>(*bytes);
    total += b;
    if (b > largest) {
      largest = b;
      name = n;
    }
  }
  const uint64_t limit = HostMemoryBytes();
  if (total <= limit) return OkStatus();
  return ResourceExhausted("the model's state is " + BytesText(total) + " ('" + name + "' alone " +
                           BytesText(largest) + "), more than the " + BytesText(limit) +
                           " of memory this process can use; an export holds each table whole");
}

}  // namespace

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
  // A growable table has no rows outside its servers: a model would look ids up in its
  // one-row prototype.
  for (const ir::Op& op : pruned->program.global().ops) {
    const ir::Attribute* g = op.FindAttr("growable");
    if (g == nullptr || !ir::AttrAsBool(*g).value_or(false)) continue;
    return FailedPrecondition(file + ": table '" + std::string(op.InputOne("W")) + "' is "
                              "growable (size [-1, dim]); an exported model cannot look ids up "
                              "in it yet. Its servers write its rows and ids (NAME.npy, "
                              "NAME.ids.npy) into [train] save_params_dir");
  }

  FLEET_RETURN_IF_ERROR(CheckStateFits(optimized.main).WithContext(file));
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
    const std::string hash = checkpoint::ProgramHash({&optimized.startup, &optimized.main});
    // A parameter-server job's checkpoint: each server's shard holds its blocks of the
    // parameters.
    auto shards = ServerShards(root, hash, report.warnings);
    if (!shards.ok()) return shards.status().WithContext("--checkpoint '" + root + "'");
    if (shards->has_value()) {
      const fs::path step = (**shards)[0].dir.parent_path();
      FLEET_RETURN_IF_ERROR(
          GatherFromServers(**shards, checkpoint::PersistablesUsed(pruned->program),
                            executor.scope())
              .WithContext("--checkpoint '" + step.string() + "'"));
      report.weights = step.string() + " (" + std::to_string((*shards)->size()) +
                       " servers' shards)";
    } else {
      FLEET_ASSIGN_OR_RETURN(
          std::optional<checkpoint::LoadedCheckpoint> found,
          checkpoint::FindLatestCheckpoint(root, hash, "", 1, report.warnings));
      if (!found.has_value()) {
        return NotFound("--checkpoint: no intact checkpoint of this program in '" + root + "'");
      }
      FLEET_RETURN_IF_ERROR(checkpoint::RestoreScope(found->state, executor.scope(),
                                                     "checkpoint '" + found->dir.string() + "'"));
      report.weights = found->dir.string();
    }
  }
  FLEET_RETURN_IF_ERROR(checkpoint::WriteExport(request.out, pruned->program, pruned->feeds,
                                                fetches, executor.scope(), file, request.force));
  report.ops = pruned->program.global().ops.size();
  report.params = checkpoint::PersistablesUsed(pruned->program).size();
  report.feeds = pruned->feeds;
  return report;
}

}  // namespace fleet
