#include "data/source.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "data/table_source.h"

namespace fleet::data {

StatusOr<std::vector<FeedSpec>> FeedSpecs(const ir::Program& program,
                                          const std::vector<std::string>& feed_names) {
  std::vector<FeedSpec> out;
  for (const std::string& name : feed_names) {
    const ir::Var* v = program.FindVarRecursive(0, name);
    if (v == nullptr) return NotFound("feed '" + name + "' is not a var of the program");
    if (v->shape.empty()) {
      return InvalidArgument("feed '" + name + "' is a scalar; a feed needs a batch dimension");
    }
    for (size_t i = 0; i < v->shape.size(); ++i) {
      if (v->shape[i] < 0 && i != 0) {
        return InvalidArgument("feed '" + name + "' is declared " + ir::ShapeText(v->shape) +
                               ": only the first (batch) dimension may be -1");
      }
    }
    out.push_back({name, v->dtype, v->shape, v->lod_level});
  }
  return out;
}

std::vector<int64_t> SampleDims(const FeedSpec& spec) {
  if (spec.dims.empty()) return {};
  return std::vector<int64_t>(spec.dims.begin() + 1, spec.dims.end());
}

Status RefuseSequenceFeeds(const std::vector<FeedSpec>& feeds, const std::string& source) {
  for (const FeedSpec& f : feeds) {
    if (f.lod_level == 0) continue;
    return InvalidArgument("feed '" + f.name + "' is a sequence (lod_level " +
                           std::to_string(f.lod_level) + "), which " + source +
                           " cannot fill: each sample's sequence needs a length of its own, as "
                           "the counts of MultiSlot files give (data.source = \"multislot\")");
  }
  return OkStatus();
}

void SliceSamples(const exec::HostTensor& batch, int64_t first, int64_t count,
                  exec::HostTensor& out) {
  const bool sequence = !batch.lod.empty();
  const int64_t row = sequence ? batch.lod[static_cast<size_t>(first)] : first;
  const int64_t end = sequence ? batch.lod[static_cast<size_t>(first + count)] : first + count;
  std::vector<int64_t> dims = batch.dims;
  dims[0] = end - row;
  out.Reshape(batch.dtype, dims);
  if (!out.bytes.empty()) {
    const size_t row_bytes = out.bytes.size() / static_cast<size_t>(end - row);
    std::memcpy(out.bytes.data(), batch.bytes.data() + static_cast<size_t>(row) * row_bytes,
                out.bytes.size());
  }
  if (!sequence) return;
  out.lod.resize(static_cast<size_t>(count) + 1);
  for (int64_t k = 0; k <= count; ++k) {
    out.lod[static_cast<size_t>(k)] = batch.lod[static_cast<size_t>(first + k)] - row;
  }
}

int64_t SampleNumel(const FeedSpec& spec) {
  int64_t n = 1;
  for (int64_t d : SampleDims(spec)) n *= d;
  return n;
}

Status DataSource::Skip(int64_t batches, int64_t batch_size) {
  if (batches < 0) return InvalidArgument("cannot skip a negative number of batches");
  exec::FeedMap scratch;
  for (int64_t i = 0; i < batches; ++i) {
    FLEET_RETURN_IF_ERROR(
        Next(batch_size, scratch).WithContext("skipping batch " + std::to_string(i + 1)));
  }
  return OkStatus();
}

namespace {

class TableSource : public DataSource {
 public:
  TableSource(std::vector<FeedSpec> feeds, std::vector<exec::HostTensor> tables,
              std::string place)
      : feeds_(std::move(feeds)), tables_(std::move(tables)) {
    origin_.SetPlaces(std::make_shared<const std::vector<std::string>>(
                          std::vector<std::string>{std::move(place)}),
                      OriginUnit::kRecord);
    samples_ = tables_.empty() ? 0 : tables_[0].dims[0];
    for (const FeedSpec& f : feeds_) {
      std::vector<int64_t> dims = SampleDims(f);
      dims.insert(dims.begin(), 0);
      batch_dims_.push_back(std::move(dims));
    }
  }

  Status Next(int64_t batch_size, exec::FeedMap& feeds) override {
    if (batch_size <= 0) return InvalidArgument("batch size must be > 0");
    for (size_t i = 0; i < feeds_.size(); ++i) {
      batch_dims_[i][0] = batch_size;
      exec::HostTensor& t = feeds[feeds_[i].name];
      t.Reshape(feeds_[i].dtype, batch_dims_[i]);
      const size_t row = tables_[i].bytes.size() / static_cast<size_t>(samples_);
      int64_t at = cursor_;
      for (int64_t r = 0; r < batch_size; ++r) {
        std::memcpy(t.bytes.data() + static_cast<size_t>(r) * row,
                    tables_[i].bytes.data() + static_cast<size_t>(at) * row, row);
        at = (at + 1) % samples_;
      }
    }
    origin_.Begin();
    for (int64_t left = batch_size, at = cursor_; left > 0;) {
      const int64_t n = std::min(left, samples_ - at);
      origin_.Add(0, at, n);
      left -= n;
      at = (at + n) % samples_;
    }
    cursor_ = (cursor_ + batch_size) % samples_;
    return OkStatus();
  }

  int64_t num_samples() const override { return samples_; }

  // The cursor after `batches` batches: no need to copy them.
  Status Skip(int64_t batches, int64_t batch_size) override {
    if (batches < 0 || batch_size <= 0) {
      return InvalidArgument("cannot skip " + std::to_string(batches) + " batches of " +
                             std::to_string(batch_size));
    }
    // Reduced first, so the product stays far from overflow for any table that fits in memory.
    cursor_ = (cursor_ + (batches % samples_) * (batch_size % samples_)) % samples_;
    origin_.SkipBatches(batches);
    return OkStatus();
  }

 private:
  std::vector<FeedSpec> feeds_;
  std::vector<exec::HostTensor> tables_;
  std::vector<std::vector<int64_t>> batch_dims_;
  int64_t samples_ = 0;
  int64_t cursor_ = 0;
};

}  // namespace

std::unique_ptr<DataSource> MakeTableSource(std::vector<FeedSpec> feeds,
                                            std::vector<exec::HostTensor> tables,
                                            std::string place) {
  return std::make_unique<TableSource>(std::move(feeds), std::move(tables), std::move(place));
}

}  // namespace fleet::data
