#include "checkpoint/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "support/input_file.h"
#include "support/limits.h"
#include "support/durable_file.h"
#include "support/text.h"
#include "ir/text.h"

namespace fleet::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string Hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

json ManifestJson(const CheckpointInfo& info, const std::string& state_file, uint64_t bytes,
                  uint32_t crc) {
  json m;
  m["format"] = kManifestFormat;
  m["step"] = info.step;
  m["program_hash"] = info.program_hash;
  m["world_size"] = info.world_size;
  m["data"] = {{"batches", info.data_batches}, {"batch_size", info.data_batch_size}};
  if (!info.shard.empty()) m["shard"] = {{"name", info.shard}, {"count", info.num_shards}};
  json config = json::object();
  if (!info.config.empty()) config = json::parse(info.config, nullptr, false);
  m["config"] = config.is_discarded() ? json(info.config) : config;
  m["files"] = json::array({{{"name", state_file}, {"bytes", bytes}, {"crc32", Hex8(crc)}}});
  return m;
}

// Every field of a manifest, checked; errors say which field is wrong.
StatusOr<CheckpointInfo> ParseManifest(const std::vector<uint8_t>& bytes, const fs::path& file,
                                       std::vector<std::pair<std::string, json>>& files) {
  const json m = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  const std::string where = file.string();
  if (m.is_discarded() || !m.is_object()) return DataLoss(where + ": not a JSON object");
  // An integer field in [min, max]; `name` is its path in the manifest ("data.batches").
  auto integer = [&](const json& parent, const char* key, const std::string& name, int64_t min,
                     int64_t max, int64_t& out) -> Status {
    auto it = parent.find(key);
    if (it == parent.end() || !it->is_number_integer()) {
      return DataLoss(where + ": '" + name + "' is missing or not an integer");
    }
    // A number beyond int64 is read by nlohmann as an unsigned integer.
    if (it->is_number_unsigned() &&
        it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DataLoss(where + ": '" + name + "' = " + it->dump() + " is outside [" +
                      std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    out = it->get<int64_t>();
    if (out < min || out > max) {
      return DataLoss(where + ": '" + name + "' = " + std::to_string(out) + " is outside [" +
                      std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    return OkStatus();
  };
  constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
  int64_t format = 0;
  FLEET_RETURN_IF_ERROR(integer(m, "format", "format", 0, kAny, format));
  if (format != kManifestFormat) {
    return FailedPrecondition(where + ": manifest format " + std::to_string(format) +
                              ", but this fleet-host reads format " +
                              std::to_string(kManifestFormat));
  }
  CheckpointInfo info;
  FLEET_RETURN_IF_ERROR(integer(m, "step", "step", 0, kAny, info.step));
  // The job that wrote it had a world size fleet.toml and the launchers allow.
  FLEET_RETURN_IF_ERROR(integer(m, "world_size", "world_size", 1, kMaxWorldSize, info.world_size));
  if (!m.contains("program_hash") || !m["program_hash"].is_string()) {
    return DataLoss(where + ": 'program_hash' is missing or not a string");
  }
  info.program_hash = m["program_hash"].get<std::string>();
  if (!m.contains("data") || !m["data"].is_object()) {
    return DataLoss(where + ": 'data' is missing or not an object");
  }
  FLEET_RETURN_IF_ERROR(integer(m["data"], "batches", "data.batches", 0, kAny, info.data_batches));
  FLEET_RETURN_IF_ERROR(
      integer(m["data"], "batch_size", "data.batch_size", 0, kAny, info.data_batch_size));
  if (m.contains("shard")) {
    const json& s = m["shard"];
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string()) {
      return DataLoss(where + ": 'shard' needs a string 'name'");
    }
    info.shard = s["name"].get<std::string>();
    // One shard per parameter server; readers loop over the shards a manifest counts.
    FLEET_RETURN_IF_ERROR(integer(s, "count", "shard.count", 1, kMaxWorldSize, info.num_shards));
  }
  if (m.contains("config")) info.config = m["config"].dump();
  if (!m.contains("files") || !m["files"].is_array() || m["files"].empty()) {
    return DataLoss(where + ": 'files' is missing or empty");
  }
  for (const json& f : m["files"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
        !f.contains("bytes") || !f["bytes"].is_number_unsigned() || !f.contains("crc32") ||
        !f["crc32"].is_string()) {
      return DataLoss(where + ": a 'files' entry needs name, bytes and crc32");
    }
    const std::string name = f["name"].get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
      return DataLoss(where + ": file name '" + name + "' is not a plain file name");
    }
    files.emplace_back(name, f);
  }
  return info;
}

// The committed step directories under `root`, newest first.
std::vector<std::pair<int64_t, fs::path>> StepDirs(const fs::path& root) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory(ec)) continue;
    if (auto step = ParseStepDirName(e.path().filename().string())) {
      out.emplace_back(*step, e.path());
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

// Whether every shard of the step at `dir` has been committed (a whole-job step always is).
// Looks at names and the first shard's manifest only: intact data is FindLatest's question.
bool Committed(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / kManifestFile, ec)) return true;
  // A sharded step: committed once every pserver.I its shards' manifests count exists.
  const fs::path first = dir / "pserver.0" / kManifestFile;
  auto bytes = ReadInputFileBytes(first, "checkpoint manifest", kMaxInputTextBytes);
  if (!bytes.ok()) return false;
  std::vector<std::pair<std::string, json>> files;
  auto info = ParseManifest(*bytes, first, files);
  if (!info.ok()) return false;
  for (int64_t i = 1; i < info->num_shards; ++i) {
    if (!fs::is_directory(dir / ("pserver." + std::to_string(i)), ec)) return false;
  }
  return true;
}

void RemoveQuietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

// Keeps the newest `keep` committed steps; removes older ones, and incomplete steps older than
// the newest committed one (they can no longer complete: their writers moved on).
void Prune(const fs::path& root, int64_t keep) {
  if (keep <= 0) return;
  int64_t kept = 0;
  for (const auto& [step, dir] : StepDirs(root)) {
    const bool committed = Committed(dir);
    if (committed && kept < keep) {
      ++kept;
    } else if (kept > 0) {
      RemoveQuietly(dir);
    }
  }
}

Status WriteLatest(const fs::path& root, const std::string& name) {
  const std::string text = name + "\n";
  FLEET_ASSIGN_OR_RETURN(uint32_t crc, WriteFileDurably(root / kLatestFile, {AsBytes(text)}));
  (void)crc;
  return OkStatus();
}

// Creates `dir` (and its parents) or says why not.
Status MakeDirs(const fs::path& dir) { return MakePrivateDirectories(dir); }

}  // namespace

std::string StepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%07lld", static_cast<long long>(step));
  return buf;
}

std::optional<int64_t> ParseStepDirName(const std::string& name) {
  if (name.size() < 12 || name.rfind("step_", 0) != 0) return std::nullopt;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > (int64_t{1} << 58)) return std::nullopt;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

std::string ProgramHash(const std::vector<const ir::Program*>& programs) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const ir::Program* p : programs) {
    for (char c : ir::PrintProgram(*p)) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // programs are separated, not concatenated
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

StatusOr<SafeTensors> SnapshotScope(const exec::Scope& scope) {
  SafeTensors out;
  for (const std::string& name : scope.Names()) {
    // A parameter server's received sparse gradients last one round; a resumed server receives
    // them anew.
    if (const exec::ScopeVar* v = scope.Find(name); v != nullptr && v->height >= 0) continue;
    FLEET_ASSIGN_OR_RETURN(exec::HostTensor t, scope.Read(name));
    out.tensors.push_back({name, std::move(t)});
  }
  return out;
}

Status SaveCheckpoint(const fs::path& root, const CheckpointInfo& info,
                      const SafeTensors& state, int64_t keep) {
  const std::string step_name = StepDirName(info.step);
  const fs::path step_dir = root / step_name;
  // Where the files are written, and the name the directory is committed under.
  fs::path parent = root, final_dir = step_dir;
  std::string tmp_name = "." + step_name + ".tmp-" + std::to_string(::getpid());
  if (!info.shard.empty()) {
    parent = step_dir;
    final_dir = step_dir / info.shard;
    tmp_name = "." + info.shard + ".tmp-" + std::to_string(::getpid());
  }
  FLEET_RETURN_IF_ERROR(MakeDirs(parent));
  const fs::path tmp = parent / tmp_name;
  RemoveQuietly(tmp);
  FLEET_RETURN_IF_ERROR(MakeDirs(tmp));
  auto fail = [&](Status s) {
    RemoveQuietly(tmp);
    return s.WithContext("checkpoint " + step_name + (info.shard.empty() ? "" : "/" + info.shard));
  };

  auto crc = WriteSafeTensors(tmp / kStateFile, state);
  if (!crc.ok()) return fail(crc.status());
  std::error_code ec;
  const uint64_t bytes = fs::file_size(tmp / kStateFile, ec);
  if (ec) return fail(Unavailable("cannot stat '" + (tmp / kStateFile).string() + "'"));
  const std::string manifest = ManifestJson(info, kStateFile, bytes, *crc).dump(2) + "\n";
  // The manifest goes last: a directory with a manifest has every file it lists.
  if (auto m = WriteFileDurably(tmp / kManifestFile, {AsBytes(manifest)}); !m.ok()) {
    return fail(m.status());
  }
  SyncDirectory(tmp);

  if (fs::exists(final_dir, ec)) {
    if (!fs::is_directory(final_dir, ec)) {
      return fail(AlreadyExists("'" + final_dir.string() + "' exists and is not a checkpoint"));
    }
    // Only a job that resumed from an older checkpoint (this one was corrupt) gets here.
    const fs::path old = parent / ("." + final_dir.filename().string() + ".old-" +
                                   std::to_string(::getpid()));
    fs::rename(final_dir, old, ec);
    if (ec) {
      return fail(Unavailable("cannot move the old '" + final_dir.string() + "' aside: " +
                              ec.message()));
    }
    RemoveQuietly(old);
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    return fail(Unavailable("cannot rename '" + tmp.string() + "' to '" + final_dir.string() +
                            "': " + ec.message()));
  }
  SyncDirectory(parent);
  if (!info.shard.empty()) SyncDirectory(root);
  if (Committed(step_dir)) {
    FLEET_RETURN_IF_ERROR(WriteLatest(root, step_name).WithContext("checkpoint " + step_name));
    Prune(root, keep);
  }
  return OkStatus();
}

StatusOr<LoadedCheckpoint> ReadCheckpointDir(const fs::path& dir) {
  const fs::path manifest_file = dir / kManifestFile;
  std::error_code ec;
  if (!fs::exists(manifest_file, ec)) {
    return DataLoss("no " + std::string(kManifestFile) + " (incomplete)");
  }
  FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> manifest, ReadInputFileBytes(manifest_file, "checkpoint manifest", kMaxInputTextBytes));
  std::vector<std::pair<std::string, json>> files;
  FLEET_ASSIGN_OR_RETURN(CheckpointInfo info, ParseManifest(manifest, manifest_file, files));
  LoadedCheckpoint out;
  out.dir = dir;
  out.info = info;
  bool have_state = false;
  for (const auto& [name, entry] : files) {
    const fs::path file = dir / name;
    auto bytes = ReadInputFileBytes(file, "checkpoint file", kMaxInputShardBytes);
    if (!bytes.ok()) return DataLoss(name + ": missing or unreadable: " + bytes.status().message());
    const uint64_t want = entry["bytes"].get<uint64_t>();
    if (bytes->size() != want) {
      return DataLoss(name + ": " + std::to_string(bytes->size()) + " bytes, the manifest says " +
                      std::to_string(want) + " (truncated or overwritten)");
    }
    const std::string crc = Hex8(Crc32(*bytes));
    if (crc != entry["crc32"].get<std::string>()) {
      return DataLoss(name + ": checksum mismatch (crc32 " + crc + ", the manifest says " +
                      entry["crc32"].get<std::string>() + ")");
    }
    if (name == kStateFile) {
      FLEET_ASSIGN_OR_RETURN(out.state, ParseSafeTensors(*bytes, name));
      have_state = true;
    }
  }
  if (!have_state) return DataLoss("the manifest lists no " + std::string(kStateFile));
  return out;
}

StatusOr<std::optional<LoadedCheckpoint>> FindLatestCheckpoint(
    const fs::path& root, const std::string& program_hash, const std::string& shard,
    int64_t num_shards, std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return std::optional<LoadedCheckpoint>();
  if (!fs::is_directory(root, ec)) {
    return FailedPrecondition("checkpoint.dir '" + root.string() + "' is not a directory");
  }
  for (const auto& [step, dir] : StepDirs(root)) {
    const std::string name = dir.filename().string();
    std::optional<LoadedCheckpoint> mine;
    Status bad = OkStatus();
    if (shard.empty()) {
      auto read = ReadCheckpointDir(dir);
      if (read.ok()) {
        mine = std::move(*read);
      } else {
        bad = read.status();
      }
    } else {
      // Every shard must be intact, not only this process's: a step some server could not
      // restore is no step to resume from.
      for (int64_t i = 0; i < num_shards && bad.ok(); ++i) {
        const std::string s = "pserver." + std::to_string(i);
        auto read = ReadCheckpointDir(dir / s);
        if (!read.ok()) {
          bad = read.status().WithContext(s);
        } else if (read->info.num_shards != num_shards) {
          bad = FailedPrecondition(s + ": written by a job of " +
                                   std::to_string(read->info.num_shards) + " servers, this one has " +
                                   std::to_string(num_shards));
        } else if (s == shard) {
          mine = std::move(*read);
        }
      }
    }
    if (!bad.ok()) {
      warnings.push_back(name + ": " + bad.message() + "; trying an older checkpoint");
      continue;
    }
    if (mine->info.program_hash != program_hash) {
      return FailedPrecondition(
          "checkpoint '" + mine->dir.string() + "' was written by another program (hash " +
          mine->info.program_hash + ", this one is " + program_hash +
          "); resuming it would mix two models: point checkpoint.dir elsewhere or remove it");
    }
    if (mine->info.step != step) {
      warnings.push_back(name + ": its manifest says step " + std::to_string(mine->info.step) +
                         "; trying an older checkpoint");
      continue;
    }
    return std::optional<LoadedCheckpoint>(std::move(*mine));
  }
  return std::optional<LoadedCheckpoint>();
}

Status RestoreScope(const SafeTensors& state, exec::Scope& scope, const std::string& where) {
  // Sparse vars are not saved (SnapshotScope), so they are neither expected nor accepted.
  auto saved = [&](const exec::ScopeVar* v) { return v != nullptr && v->height < 0; };
  std::set<std::string> missing;
  for (const std::string& n : scope.Names()) {
    if (saved(scope.Find(n))) missing.insert(n);
  }
  std::vector<std::string> extra, mismatched;
  for (const NamedTensor& t : state.tensors) {
    const exec::ScopeVar* v = scope.Find(t.name);
    if (!saved(v)) {
      extra.push_back(t.name);
      continue;
    }
    missing.erase(t.name);
    if (v->dtype != t.tensor.dtype || v->dims != t.tensor.dims) {
      mismatched.push_back(QuoteForMessage(t.name) + " (" + ir::TypeShapeText(t.tensor.dtype, t.tensor.dims) +
                           " in the checkpoint, " + ir::TypeShapeText(v->dtype, v->dims) +
                           " in the program)");
    }
  }
  if (!missing.empty() || !extra.empty() || !mismatched.empty()) {
    auto list = [](const auto& names, bool quote = true) {
      return NamesForMessage(std::vector<std::string>(names.begin(), names.end()), 8, quote);
    };
    std::string msg = where + " does not fit this job's state:";
    if (!missing.empty()) msg += " missing " + list(missing) + ";";
    if (!extra.empty()) msg += " not in the program " + list(extra) + ";";
    if (!mismatched.empty()) msg += " different " + list(mismatched, false) + ";";
    msg.pop_back();
    return FailedPrecondition(msg);
  }
  for (const NamedTensor& t : state.tensors) {
    FLEET_RETURN_IF_ERROR(scope.Write(t.name, t.tensor).WithContext(where));
  }
  return OkStatus();
}

}  // namespace fleet::checkpoint
