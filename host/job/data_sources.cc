#include "job/data_sources.h"

#include <filesystem>

#include "data/dataset.h"
#include "data/file_list.h"
#include "data/npy.h"
#include "data/prefetch.h"
#include "support/host_memory.h"
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

namespace {

// "train.batch_size = 64 (x 2 trainers)"
std::string BatchSizeKey(const Config& config, int64_t copies, const std::string& copies_text,
                         std::string_view key) {
  return std::string(key) + " = " + std::to_string(config.train.batch_size) +
         (copies > 1 ? " (x " + std::to_string(copies) + " " + copies_text + ")" : "");
}

}  // namespace

Status NameBatchSize(const Status& status, const Config& config, int64_t copies,
                     const std::string& copies_text, std::string_view key) {
  if (status.code() != Code::kResourceExhausted) return status;
  return status.WithContext(BatchSizeKey(config, copies, copies_text, key));
}

Status CheckBatchMemory(const Config& config, const std::vector<data::FeedSpec>& feeds,
                        int64_t copies, const std::string& copies_text, std::string_view key_name) {
  const Config::Data& d = config.data;
  const int64_t batch_size = config.train.batch_size;
  const std::string key = BatchSizeKey(config, copies, copies_text, key_name);
  // A sequence feed's sample has the length its line gives, unknown before the data is read:
  // it is counted as one row and its offset, the size of a sample whose sequences average one
  // row. Longer sequences make a batch larger than this estimate.
  uint64_t sample = 0;
  bool sequences = false;
  for (const data::FeedSpec& f : feeds) {
    auto bytes = ir::TensorBytes(f.dtype, data::SampleDims(f));
    if (!bytes.ok()) return bytes.status().WithContext("feed '" + f.name + "'");
    uint64_t size = static_cast<uint64_t>(*bytes);
    if (f.lod_level > 0) {
      sequences = true;
      size += sizeof(int64_t);
    }
    if (__builtin_add_overflow(sample, size, &sample)) {
      return InvalidArgument("the feeds' samples take more than 2^64 bytes");
    }
  }
  const std::string assumed = sequences ? " (sequences counted at one row each)" : "";
  const uint64_t limit = HostMemoryBytes();
  const std::string more_than = ", more than the " + BytesText(limit) +
                                " of memory this process can use";
  uint64_t rows = 0, batch = 0;
  const bool batch_overflows =
      __builtin_mul_overflow(static_cast<uint64_t>(batch_size), static_cast<uint64_t>(copies),
                             &rows) ||
      __builtin_mul_overflow(rows, sample, &batch);
  if (batch_overflows || batch > limit) {
    return ResourceExhausted(key + ": a batch of " + std::to_string(rows) + " samples of " +
                             std::to_string(sample) + " bytes" + assumed + " needs " +
                             (batch_overflows ? "more than 2^64 bytes" : BytesText(batch)) +
                             more_than);
  }
  // Only the text datasets have a reader thread and a padding copy (data_sources.cc above).
  if (d.source != "csv" && d.source != "multislot") return OkStatus();
  const bool pad = d.last_batch == "pad";
  uint64_t held = 0;
  const bool held_overflows = __builtin_mul_overflow(
      static_cast<uint64_t>(d.queue_batches) + (pad ? 2 : 1), batch, &held);
  if (held_overflows || held > limit) {
    return ResourceExhausted(
        "data.queue_batches = " + std::to_string(d.queue_batches) + ": the reader thread holds " +
        std::to_string(d.queue_batches) + " batches of " + BytesText(batch) + assumed +
        " ahead; with the batch in use" + (pad ? " and data.last_batch = \"pad\"'s copy" : "") +
        " that is " + (held_overflows ? "more than 2^64 bytes" : BytesText(held)) + more_than);
  }
  return OkStatus();
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
