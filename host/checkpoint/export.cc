#include "checkpoint/export.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "support/input_file.h"
#include "support/durable_file.h"
#include "ir/program.h"
#include "ir/text.h"
#include "ops/verifier.h"
#include "ops/op_registry.h"

namespace fleet::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kManifest = "model.json";
constexpr const char* kProgramFile = "model.ir";
constexpr const char* kParamsFile = "params.safetensors";

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

bool HasSubBlock(const ir::Op& op) {
  return std::any_of(op.attrs.begin(), op.attrs.end(), [](const auto& a) {
    return std::holds_alternative<ir::BlockRef>(a.second);
  });
}

// A CRC-32 as the manifest writes it: eight lower-case hex digits.
std::string CrcHex(uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", crc);
  return buf;
}

// A file name a manifest may name: plain, inside the export directory.
bool PlainName(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name[0] != '.';
}

}  // namespace

StatusOr<InferenceProgram> PruneForInference(const ir::Program& forward,
                                             const std::vector<std::string>& given_feeds,
                                             const std::vector<std::string>& fetches) {
  const ir::Block& block = forward.global();
  if (fetches.empty()) return InvalidArgument("export: no fetch given (--fetch VAR)");
  for (const std::string& f : fetches) {
    if (block.FindVar(f) == nullptr) {
      return NotFound("export: fetch '" + f + "' is not a var of the program");
    }
  }
  std::map<std::string, size_t> producer;  // the first op writing each var
  for (size_t i = 0; i < block.ops.size(); ++i) {
    for (const std::string& out : block.ops[i].OutputVars()) producer.emplace(out, i);
  }
  for (const std::string& f : given_feeds) {
    const ir::Var* v = block.FindVar(f);
    if (v == nullptr) return NotFound("export: feed '" + f + "' is not a var of the program");
    if (v->persistable) {
      return InvalidArgument("export: feed '" + f + "' is a persistable var, not a data var");
    }
    if (auto it = producer.find(f); it != producer.end()) {
      return InvalidArgument("export: feed '" + f + "' is computed by op #" +
                             std::to_string(it->second) + " (" + block.ops[it->second].type +
                             "), not a data var");
    }
  }

  // Walk back from the fetches: an op is kept when it writes something still needed, and then
  // everything it reads is needed.
  std::set<std::string> needed(fetches.begin(), fetches.end());
  std::vector<size_t> kept;
  for (size_t i = block.ops.size(); i-- > 0;) {
    const ir::Op& op = block.ops[i];
    const std::vector<std::string> outs = op.OutputVars();
    if (std::none_of(outs.begin(), outs.end(), [&](const auto& o) { return needed.count(o); })) {
      continue;
    }
    if (HasSubBlock(op)) {
      return Unimplemented("export: op #" + std::to_string(i) + " (" + op.type +
                           ") runs sub-blocks, which export does not prune yet");
    }
    kept.push_back(i);
    for (const std::string& in : op.InputVars()) needed.insert(in);
  }
  std::reverse(kept.begin(), kept.end());
  std::set<std::string> computed;
  for (size_t i : kept) {
    for (const std::string& out : block.ops[i].OutputVars()) computed.insert(out);
  }
  std::vector<std::string> feeds = given_feeds;
  const std::set<std::string> feed_set(feeds.begin(), feeds.end());
  for (const std::string& name : needed) {
    const ir::Var* v = block.FindVar(name);
    if (v == nullptr || v->persistable || computed.count(name) || feed_set.count(name)) continue;
    if (given_feeds.empty()) {
      feeds.push_back(name);  // `needed` is ordered: the feeds come out sorted
      continue;
    }
    return InvalidArgument("export: the fetches need data var '" + name +
                           "', which is not among the feeds (--feed " + name + ")");
  }
  for (const std::string& f : feeds) {
    if (!needed.count(f)) {
      return InvalidArgument("export: feed '" + f + "' is not needed to compute the fetches");
    }
  }

  InferenceProgram result;
  ir::Program& out = result.program;
  ir::Block& dst = out.global();
  const ops::OpRegistry& registry = ops::BuiltinOps();
  for (size_t i : kept) {
    ir::Op op = block.ops[i];
    const ops::OpSchema* schema = registry.Find(op.type);
    // What save_inference_model does: ops that behave differently in training (dropout's mask,
    // batch_norm's batch statistics) switch to inference.
    if (schema != nullptr && schema->FindAttr("is_test") != nullptr) op.attrs["is_test"] = true;
    dst.ops.push_back(std::move(op));
  }
  std::set<std::string> used(feeds.begin(), feeds.end());
  used.insert(fetches.begin(), fetches.end());
  for (const ir::Op& op : dst.ops) {
    for (const std::string& v : op.InputVars()) used.insert(v);
    for (const std::string& v : op.OutputVars()) used.insert(v);
  }
  for (const std::string& name : used) dst.vars[name] = *block.FindVar(name);
  if (Status s = ir::VerifyProgram(out); !s.ok()) {
    return s.WithContext("export: the pruned program");
  }
  result.feeds = std::move(feeds);
  return result;
}

std::vector<std::string> PersistablesUsed(const ir::Program& program) {
  std::set<std::string> out;
  for (const ir::Op& op : program.global().ops) {
    for (const auto& names : {op.InputVars(), op.OutputVars()}) {
      for (const std::string& n : names) {
        const ir::Var* v = program.global().FindVar(n);
        if (v != nullptr && v->persistable) out.insert(n);
      }
    }
  }
  return {out.begin(), out.end()};
}

Status WriteExport(const fs::path& out, const ir::Program& program,
                   const std::vector<std::string>& feeds,
                   const std::vector<ExportedFetch>& fetches, const exec::Scope& scope,
                   const std::string& source, bool force) {
  FLEET_RETURN_IF_ERROR(CheckDirectoryTarget(out, force).WithContext("export"));
  SafeTensors params;
  for (const std::string& name : PersistablesUsed(program)) {
    auto value = scope.Read(name);
    if (!value.ok()) return value.status().WithContext("export: parameter '" + name + "'");
    params.tensors.push_back({name, std::move(*value)});
  }
  json manifest;
  manifest["format"] = kExportFormat;
  manifest["feeds"] = json::array();
  for (const std::string& f : feeds) {
    const ir::Var* v = program.global().FindVar(f);
    manifest["feeds"].push_back(
        {{"name", f}, {"dtype", ir::DataTypeName(v->dtype)}, {"shape", v->shape}});
  }
  manifest["fetches"] = json::array();
  for (const ExportedFetch& f : fetches) {
    manifest["fetches"].push_back({{"name", f.name}, {"var", f.var}});
  }
  manifest["program"] = kProgramFile;
  manifest["params"] = kParamsFile;
  manifest["source"] = source;

  FLEET_ASSIGN_OR_RETURN(const fs::path tmp, TempDirBeside(out));
  auto fail = [&](const Status& s) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return s.WithContext("export to '" + out.string() + "'");
  };
  auto params_crc = WriteSafeTensors(tmp / kParamsFile, params);
  if (!params_crc.ok()) return fail(params_crc.status());
  const std::string text = ir::PrintProgram(program);
  auto program_crc = WriteFileDurably(tmp / kProgramFile, {AsBytes(text)});
  if (!program_crc.ok()) return fail(program_crc.status());
  // What infer checks before trusting either file.
  manifest["crc32"] = {{kProgramFile, CrcHex(*program_crc)}, {kParamsFile, CrcHex(*params_crc)}};
  const std::string m = manifest.dump(2) + "\n";
  if (auto w = WriteFileDurably(tmp / kManifest, {AsBytes(m)}); !w.ok()) return fail(w.status());
  return CommitDirectory(tmp, out, force).WithContext("export");
}

StatusOr<ExportedModel> ReadExport(const fs::path& dir) {
  const std::string where = dir.string();
  FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadInputFileBytes(dir / kManifest, "export manifest", kMaxInputTextBytes));
  const json m = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  const std::string mfile = (dir / kManifest).string();
  if (m.is_discarded() || !m.is_object()) return DataLoss(mfile + ": not a JSON object");
  if (!m.contains("format") || !m["format"].is_number_integer() ||
      m["format"].get<int64_t>() != kExportFormat) {
    return FailedPrecondition(mfile + ": not an export of format " +
                              std::to_string(kExportFormat));
  }
  for (const char* key : {"program", "params"}) {
    if (!m.contains(key) || !m[key].is_string() || !PlainName(m[key].get<std::string>())) {
      return DataLoss(mfile + ": '" + key + "' must name a file of the export");
    }
  }
  if (!m.contains("feeds") || !m["feeds"].is_array() || !m.contains("fetches") ||
      !m["fetches"].is_array() || m["fetches"].empty()) {
    return DataLoss(mfile + ": 'feeds' and 'fetches' must be arrays, 'fetches' not empty");
  }
  if (!m.contains("crc32") || !m["crc32"].is_object()) {
    return DataLoss(mfile + ": no 'crc32' checksums (an export older than checksums; export the "
                            "model again)");
  }
  // A file must have the CRC-32 the manifest recorded before anything is read from it.
  auto checked_read = [&](const std::string& name) -> StatusOr<std::vector<uint8_t>> {
    const fs::path file = dir / name;
    FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                           ReadInputFileBytes(file, "export file", kMaxInputShardBytes));
    const json& want = m["crc32"].contains(name) ? m["crc32"][name] : json();
    if (!want.is_string()) return DataLoss(mfile + ": no CRC-32 for '" + name + "'");
    const std::string got = CrcHex(Crc32(bytes));
    if (got != want.get<std::string>()) {
      return DataLoss(file.string() + ": CRC-32 is " + got + " but " + kManifest + " says " +
                      want.get<std::string>() + "; the file changed or is damaged");
    }
    return bytes;
  };
  ExportedModel model;
  const fs::path program_file = dir / m["program"].get<std::string>();
  FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> text, checked_read(m["program"].get<std::string>()));
  FLEET_ASSIGN_OR_RETURN(
      model.program,
      ir::ParseProgram(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                       program_file.string()));
  if (Status s = ir::VerifyProgram(model.program); !s.ok()) {
    return s.WithContext(program_file.string());
  }
  const ir::Block& block = model.program.global();
  // Names reach the terminal and become file names (infer --out): the program's own name rule.
  auto check_name = [&](const char* what, const std::string& name) -> Status {
    if (Status s = ir::CheckVarName(name); !s.ok()) {
      return DataLoss(mfile + ": " + what + " name: " + s.message());
    }
    return OkStatus();
  };
  for (const json& f : m["feeds"]) {
    ExportedFeed feed;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
        !f.contains("dtype") || !f["dtype"].is_string() || !f.contains("shape") ||
        !f["shape"].is_array()) {
      return DataLoss(mfile + ": a feed needs name, dtype and shape");
    }
    feed.name = f["name"].get<std::string>();
    FLEET_RETURN_IF_ERROR(check_name("feed", feed.name));
    feed.dtype = ir::ParseDataType(f["dtype"].get<std::string>());
    for (const json& d : f["shape"]) {
      if (!d.is_number_integer()) return DataLoss(mfile + ": feed '" + feed.name + "': shape");
      feed.shape.push_back(d.get<int64_t>());
    }
    const ir::Var* v = block.FindVar(feed.name);
    if (v == nullptr || v->dtype != feed.dtype || v->shape != feed.shape) {
      return DataLoss(mfile + ": feed '" + feed.name + "' does not match the program's var");
    }
    model.feeds.push_back(std::move(feed));
  }
  for (const json& f : m["fetches"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("var") ||
        !f["var"].is_string() || block.FindVar(f["var"].get<std::string>()) == nullptr) {
      return DataLoss(mfile + ": a fetch needs a name and the var of the program it reads");
    }
    FLEET_RETURN_IF_ERROR(check_name("fetch", f["name"].get<std::string>()));
    FLEET_RETURN_IF_ERROR(check_name("fetch var", f["var"].get<std::string>()));
    model.fetches.push_back({f["name"].get<std::string>(), f["var"].get<std::string>()});
  }
  const fs::path params_file = dir / m["params"].get<std::string>();
  FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> params_bytes,
                         checked_read(m["params"].get<std::string>()));
  FLEET_ASSIGN_OR_RETURN(model.params, ParseSafeTensors(params_bytes, params_file.string()));
  std::set<std::string> want;
  for (const std::string& n : PersistablesUsed(model.program)) want.insert(n);
  for (const NamedTensor& t : model.params.tensors) {
    const ir::Var* v = block.FindVar(t.name);
    if (!want.erase(t.name) || v == nullptr) {
      return DataLoss(params_file.string() + ": '" + t.name +
                      "' is no persistable var of the program");
    }
    if (v->dtype != t.tensor.dtype || v->shape != t.tensor.dims) {
      return DataLoss(params_file.string() + ": '" + t.name + "' is " +
                      ir::TypeShapeText(t.tensor.dtype, t.tensor.dims) + ", the program says " +
                      ir::TypeShapeText(v->dtype, v->shape));
    }
  }
  if (!want.empty()) {
    return DataLoss(params_file.string() + ": no value for '" + *want.begin() + "'" +
                    (want.size() > 1 ? " and " + std::to_string(want.size() - 1) + " more" : ""));
  }
  return model;
}

}  // namespace fleet::checkpoint
