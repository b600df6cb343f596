#include "job/data_sources.h"

#include <filesystem>

#include "data/dataset.h"
#include "data/file_list.h"
#include "data/npy.h"
#include "data/prefetch.h"
#include "support/logging.h"

namespace fleet {
namespace {

// A csv or multislot dataset over this trainer's files: the file list expanded, then split
// across the `trainers` when data.shard says so.
StatusOr<std::unique_ptr<data::DataSource>> MakeTextDataset(
    const Config::Data& d, uint64_t seed, const std::vector<data::FeedSpec>& feeds, int64_t rank,
    int64_t trainers) {
  std::vector<std::string> patterns = d.filelist;
  if (d.source == "csv" && !d.csv_path.empty()) patterns.insert(patterns.begin(), d.csv_path);
  FLEET_ASSIGN_OR_RETURN(std::vector<std::filesystem::path> files,
                         data::ExpandFileList(patterns));
  const auto count = static_cast<int64_t>(files.size());
  const bool shard =
      d.shard == "true" || (d.shard == "auto" && trainers > 1 && count >= trainers);
  if (shard && trainers > 1) {
    FLEET_ASSIGN_OR_RETURN(files, data::ShardFiles(files, rank, trainers));
    Log().info("data: trainer {} of {} reads {} of {} files", rank, trainers, files.size(), count);
  }
  data::DatasetOptions options;
  options.format = d.source;
  options.files = std::move(files);
  options.sharded = shard;
  options.slots = d.slots;
  options.csv_header = d.csv_header;
  options.csv_columns = d.csv_columns;
  options.in_memory = d.dataset == "memory";
  options.shuffle = d.shuffle;
  options.seed = seed;
  options.last_batch = d.last_batch == "drop"  ? data::LastBatch::kDrop
                       : d.last_batch == "pad" ? data::LastBatch::kPad
                                               : data::LastBatch::kWrap;
  options.skip_bad_lines = d.bad_lines == "skip";
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<data::DataSource> source,
                         data::MakeDataset(feeds, options));
  if (d.queue_batches > 0) {
    data::PrefetchOptions prefetch;
    prefetch.depth = d.queue_batches;
    source = data::MakePrefetchSource(std::move(source), prefetch);
  }
  return source;
}

}  // namespace

StatusOr<std::unique_ptr<data::DataSource>> MakeDataSource(const Config& config,
                                                           const frontend::ParsedProgram& programs,
                                                           const std::vector<data::FeedSpec>& feeds,
                                                           int64_t rank, int64_t trainers) {
  const Config::Data& d = config.data;
  const std::string where =
      "data source '" + d.source + "' (" + (d.where.empty() ? "the default" : d.where) + ")";
  StatusOr<std::unique_ptr<data::DataSource>> source = NotFound("");
  if (d.source == "csv" || d.source == "multislot") {
    source = MakeTextDataset(d, static_cast<uint64_t>(config.train.seed), feeds, rank, trainers);
  } else if (d.source == "npy") {
    source = data::MakeNpySource(feeds, d.files);
  } else {
    data::SyntheticOptions options;
    options.seed = static_cast<uint64_t>(config.train.seed);
    options.label = d.label;
    options.classes = d.classes;
    std::string label = d.label;
    if (label.empty() && feeds.size() >= 2) label = feeds.back().name;
    if (options.classes == 0 && !label.empty()) {
      options.classes = PredictionWidth(programs.main, label);
    }
    source = data::MakeSyntheticSource(feeds, options);
  }
  if (!source.ok()) return source.status().WithContext(where);
  return source;
}

int64_t PredictionWidth(const ir::Program& main, const std::string& label) {
  for (const ir::Op& op : main.global().ops) {
    bool reads = false;
    std::string other;
    for (const auto& [slot, names] : op.inputs) {
      for (const auto& n : names) {
        if (n == label) {
          reads = true;
        } else if (other.empty()) {
          other = n;
        }
      }
    }
    if (!reads) continue;
    const ir::Var* v = main.FindVarRecursive(0, other);
    if (v == nullptr || v->shape.empty() || v->shape.back() < 1) return 0;
    return v->shape.back();
  }
  return 0;
}

}  // namespace fleet
