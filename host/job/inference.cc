#include "job/inference.h"

#include <algorithm>
#include <cstdio>

#include "checkpoint/export.h"
#include "data/npy.h"
#include "job/local_runtime.h"
#include "support/text.h"

namespace fleet {

namespace fs = std::filesystem;

StatusOr<InferenceResult> RunInference(const Config& config, const fs::path& dir,
                                       const std::vector<std::pair<std::string, fs::path>>& given,
                                       const fs::path& out_dir) {
  FLEET_ASSIGN_OR_RETURN(checkpoint::ExportedModel model, checkpoint::ReadExport(dir));
  // Inputs by feed; a lone input may leave the feed's name out when there is one feed.
  std::map<std::string, fs::path> inputs;
  for (const auto& [name, file] : given) {
    if (name.empty() && (model.feeds.size() != 1 || given.size() != 1)) {
      return InvalidArgument("--input " + file.string() + ": the model has " +
                             std::to_string(model.feeds.size()) +
                             " feeds; name each (--input FEED=FILE.npy)");
    }
    const std::string feed = name.empty() ? model.feeds[0].name : name;
    // --input is repeatable for the model's several feeds, not to give one feed twice: the
    // later file would silently win.
    if (auto [it, added] = inputs.emplace(feed, file); !added) {
      return InvalidArgument("--input gives feed " + QuoteForMessage(feed) + " twice (" +
                             QuoteForMessage(it->second.string()) + " and " +
                             QuoteForMessage(file.string()) + ")");
    }
  }
  exec::FeedMap feeds;
  exec::FeedShapes shapes;
  int64_t batch = -1;
  for (const checkpoint::ExportedFeed& f : model.feeds) {
    auto it = inputs.find(f.name);
    if (it == inputs.end()) {
      return InvalidArgument("no --input for feed '" + f.name + "' (" +
                             ir::TypeShapeText(f.dtype, f.shape) + ")");
    }
    FLEET_ASSIGN_OR_RETURN(data::NpyArray array, data::ReadNpy(it->second));
    const std::vector<int64_t>& want = f.shape;
    if (array.dims.size() != want.size() || array.dtype != f.dtype ||
        !std::equal(want.begin() + 1, want.end(), array.dims.begin() + 1) ||
        (want[0] >= 0 && want[0] != array.dims[0])) {
      return InvalidArgument("feed '" + f.name + "' is " + ir::TypeShapeText(f.dtype, f.shape) +
                             " but '" + it->second.string() + "' holds " +
                             ir::TypeShapeText(array.dtype, array.dims));
    }
    if (batch >= 0 && array.dims[0] != batch) {
      return InvalidArgument("'" + it->second.string() + "' has " + std::to_string(array.dims[0]) +
                             " samples, the other inputs " + std::to_string(batch));
    }
    batch = array.dims[0];
    shapes[f.name] = array.dims;
    exec::HostTensor& t = feeds[f.name];
    t.dtype = array.dtype;
    t.dims = array.dims;
    t.bytes = std::move(array.bytes);
    inputs.erase(it);
  }
  if (!inputs.empty()) {
    return InvalidArgument("--input names '" + inputs.begin()->first +
                           "', which is not a feed of the model");
  }
  FLEET_ASSIGN_OR_RETURN(LocalRuntime rt, MakeLocalRuntime(config));
  exec::Executor& executor = *rt.executor;
  for (const auto& p : model.params.tensors) {
    FLEET_RETURN_IF_ERROR(executor.scope().Write(p.name, p.tensor));
  }
  std::vector<std::string> fetch_vars;
  for (const auto& f : model.fetches) fetch_vars.push_back(f.var);
  auto prepared = executor.Prepare(model.program, shapes, fetch_vars);
  if (!prepared.ok()) return prepared.status().WithContext(dir.string());
  InferenceResult result;
  if (Status s = executor.Run(**prepared, feeds, result.fetched); !s.ok()) {
    return s.WithContext(dir.string());
  }
  for (const auto& f : model.fetches) result.names.push_back(f.name);
  if (!out_dir.empty()) {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) {
      return Unavailable("--out: cannot create '" + out_dir.string() + "': " + ec.message());
    }
    for (size_t i = 0; i < result.fetched.size(); ++i) {
      data::NpyArray a;
      a.dtype = result.fetched[i].dtype;
      a.dims = result.fetched[i].dims;
      a.bytes = result.fetched[i].bytes;
      FLEET_RETURN_IF_ERROR(data::WriteNpy(out_dir / (result.names[i] + ".npy"), a));
    }
  }
  return result;
}

std::string TensorSummary(const exec::HostTensor& t) {
  std::string out = ir::TypeShapeText(t.dtype, t.dims);
  const int64_t n = std::min<int64_t>(t.numel(), 6);
  out += " [";
  for (int64_t i = 0; i < n; ++i) {
    char buf[32];
    double v = 0;
    switch (t.dtype) {
      case ir::DataType::kFloat32:
        v = t.data<float>()[i];
        break;
      case ir::DataType::kFloat64:
        v = t.data<double>()[i];
        break;
      case ir::DataType::kInt64:
        v = static_cast<double>(t.data<int64_t>()[i]);
        break;
      case ir::DataType::kInt32:
        v = t.data<int32_t>()[i];
        break;
      default:
        out += "?";
        continue;
    }
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    out += (i ? ", " : "") + std::string(buf);
  }
  return out + (t.numel() > n ? ", ...]" : "]");
}

}  // namespace fleet
