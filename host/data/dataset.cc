// The memory and queue datasets: files read line by line into sample records (line_format.h),
// batches assembled from the records under a LastBatch policy.
#include "data/dataset.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "data/line_format.h"
#include "support/input_file.h"
#include "support/logging.h"

namespace fleet::data {
namespace {

namespace fs = std::filesystem;

// The lines of one file, read in large blocks: the line handed out is a view into the block, so
// reading allocates only when a line is longer than any before it.
class LineReader {
 public:
  LineReader() : buf_(1 << 18) {}
  ~LineReader() { Close(); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  Status Open(const fs::path& path) {
    Close();
    auto file = OpenInputStream(path, "data file");
    if (!file.ok() && file.status().code() == Code::kNotFound) {
      return NotFound(path.string() + ": cannot open the file: " + file.status().message());
    }
    FLEET_ASSIGN_OR_RETURN(file_, std::move(file));
    path_ = path.string();
    begin_ = end_ = 0;
    eof_ = false;
    line_no_ = 0;
    return OkStatus();
  }

  void Close() {
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
  }

  // The next line without its '\n'; false at the end of the file or on a read error (status()).
  bool Next(std::string_view& line) {
    while (true) {
      const char* at = buf_.data() + begin_;
      if (const void* nl = std::memchr(at, '\n', end_ - begin_)) {
        const size_t len = static_cast<size_t>(static_cast<const char*>(nl) - at);
        line = std::string_view(at, len);
        begin_ += len + 1;
        ++line_no_;
        return true;
      }
      if (eof_) {
        if (begin_ == end_) return false;
        line = std::string_view(at, end_ - begin_);  // a last line without '\n'
        begin_ = end_;
        ++line_no_;
        return true;
      }
      // Keep the partial line, growing the block when one line fills it.
      const size_t rest = end_ - begin_;
      std::memmove(buf_.data(), at, rest);
      begin_ = 0;
      end_ = rest;
      if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
      const size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, file_);
      end_ += got;
      if (got == 0) {
        if (std::ferror(file_)) {
          status_ = Unavailable(path_ + ": read error after line " + std::to_string(line_no_));
          return false;
        }
        eof_ = true;
      }
    }
  }

  const Status& status() const { return status_; }
  int64_t line_no() const { return line_no_; }
  const std::string& path() const { return path_; }

 private:
  FILE* file_ = nullptr;
  std::string path_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_no_ = 0;
  Status status_;
};

// Where a sample was read: the index of its file in the dataset's list and its 1-based line.
struct RowOrigin {
  uint32_t file = 0;
  int64_t line = 0;
};

bool Blank(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

// "a.txt" or "3 files (a.txt, b.txt, c.txt)", for messages.
std::string FilesText(const std::vector<fs::path>& files) {
  if (files.size() == 1) return files[0].string();
  std::string list;
  for (size_t i = 0; i < files.size() && i < 3; ++i) {
    list += (i ? ", " : "") + files[i].string();
  }
  if (files.size() > 3) list += ", ...";
  return std::to_string(files.size()) + " files (" + list + ")";
}

// The samples of a file list, one pass after another: lines parsed into records, malformed ones
// failing or skipped.
class SampleReader {
 public:
  SampleReader(std::vector<fs::path> files, LineParser& parser, bool skip_bad,
               std::atomic<int64_t>& skipped)
      : files_(std::move(files)), parser_(parser), skip_bad_(skip_bad), skipped_(skipped) {}

  // Appends the next sample of this pass to `records`; false when the last file is done.
  StatusOr<bool> Next(std::vector<uint8_t>& records) {
    while (true) {
      if (!open_) {
        if (file_ == files_.size()) return false;
        FLEET_RETURN_IF_ERROR(reader_.Open(files_[file_]));
        open_ = true;
      }
      std::string_view line;
      if (!reader_.Next(line)) {
        FLEET_RETURN_IF_ERROR(reader_.status());
        reader_.Close();
        open_ = false;
        ++file_;
        continue;
      }
      if (reader_.line_no() <= parser_.header_lines() || Blank(line)) continue;
      LineError error;
      if (parser_.Parse(line, records, error)) {
        ++samples_in_pass_;
        return true;
      }
      const std::string where = reader_.path() + ":" + std::to_string(reader_.line_no()) +
                                (error.column > 0 ? ":" + std::to_string(error.column) : "");
      if (!skip_bad_) return InvalidArgument(where + ": " + error.message);
      ++skipped_in_pass_;
      // Later passes see the same lines again; they are counted (and logged) once.
      if (first_pass_) {
        const int64_t n = skipped_.fetch_add(1, std::memory_order_relaxed) + 1;
        if (n <= 3) Log().warn("skipping malformed line {}: {}", where, error.message);
        if (n == 3) Log().warn("(further malformed lines are skipped without a message)");
      }
    }
  }

  // Back to the first file for the next pass. A pass without a sample is an error.
  Status Rewind() {
    if (samples_in_pass_ == 0) return NoSamples();
    reader_.Close();
    open_ = false;
    file_ = 0;
    first_pass_ = false;
    samples_in_pass_ = skipped_in_pass_ = 0;
    return OkStatus();
  }

  Status NoSamples() const {
    return InvalidArgument(
        "no samples in " + FilesText(files_) + ": " +
        (skipped_in_pass_ > 0 ? "all " + std::to_string(skipped_in_pass_) +
                                    " data lines are malformed (and were skipped)"
                              : std::string(files_.size() == 1 ? "the file is empty"
                                                               : "every file is empty")));
  }

  int64_t samples_in_pass() const { return samples_in_pass_; }
  // Where the sample the last Next parsed was read.
  RowOrigin origin() const { return {static_cast<uint32_t>(file_), reader_.line_no()}; }

 private:
  std::vector<fs::path> files_;
  LineParser& parser_;
  bool skip_bad_;
  std::atomic<int64_t>& skipped_;
  LineReader reader_;
  size_t file_ = 0;
  bool open_ = false;
  bool first_pass_ = true;
  int64_t samples_in_pass_ = 0, skipped_in_pass_ = 0;
};

// Where an epoch's samples come from.
class SampleStream {
 public:
  virtual ~SampleStream() = default;
  // The next sample record of the current epoch and where it was read (`at`), or nullptr when
  // the epoch is over (the call after that starts the next one). The record stays valid until
  // the next call.
  virtual StatusOr<const uint8_t*> Next(RowOrigin& at) = 0;
  virtual int64_t epoch_size() const = 0;  // 0 = not known (yet)
};

// queue: one SampleReader pass per epoch.
class QueueStream : public SampleStream {
 public:
  QueueStream(std::unique_ptr<LineParser> parser, std::vector<fs::path> files, bool skip_bad,
              std::atomic<int64_t>& skipped)
      : parser_(std::move(parser)),
        reader_(std::move(files), *parser_, skip_bad, skipped) {}

  StatusOr<const uint8_t*> Next(RowOrigin& at) override {
    record_.clear();  // the storage stays: the longest record so far fits without allocating
    FLEET_ASSIGN_OR_RETURN(bool more, reader_.Next(record_));
    if (more) {
      at = reader_.origin();
      return static_cast<const uint8_t*>(record_.data());
    }
    epoch_size_.store(reader_.samples_in_pass(), std::memory_order_relaxed);
    FLEET_RETURN_IF_ERROR(reader_.Rewind());
    return static_cast<const uint8_t*>(nullptr);
  }

  int64_t epoch_size() const override { return epoch_size_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<LineParser> parser_;
  SampleReader reader_;
  std::vector<uint8_t> record_;
  std::atomic<int64_t> epoch_size_{0};
};

// The records of a memory dataset and where each was read: its line, and per file the index of
// its first record (files are read in order, so a record's file is found by bisection). Records
// of a layout with sequence feeds differ in size and each one's start is kept; the others are
// row_bytes apart.
struct HeldRows {
  std::vector<uint8_t> bytes;
  std::vector<size_t> starts;  // sequence layouts only
  std::vector<int64_t> lines;
  std::vector<int64_t> file_first_row;
};

// memory: every row held; epoch e visits them in order, or in the permutation of (seed, e).
class MemoryStream : public SampleStream {
 public:
  MemoryStream(HeldRows rows, size_t row_bytes, bool shuffle, uint64_t seed)
      : rows_(std::move(rows.bytes)),
        starts_(std::move(rows.starts)),
        lines_(std::move(rows.lines)),
        file_first_row_(std::move(rows.file_first_row)),
        row_bytes_(row_bytes),
        shuffle_(shuffle),
        seed_(seed) {
    n_ = static_cast<int64_t>(starts_.empty() ? rows_.size() / row_bytes_ : starts_.size());
    order_.resize(static_cast<size_t>(n_));
    MakeOrder(0);
  }

  StatusOr<const uint8_t*> Next(RowOrigin& at) override {
    if (pos_ == n_) {
      pos_ = 0;
      MakeOrder(epoch_ + 1);
      return static_cast<const uint8_t*>(nullptr);
    }
    at = OriginAt(pos_);
    return RowAt(pos_++);
  }

  int64_t epoch_size() const override { return n_; }

  // Position `offset` of epoch `epoch`, as if every sample before had been read.
  void Seek(int64_t epoch, int64_t offset) {
    MakeOrder(epoch);
    pos_ = offset;
  }

  // The record of the i-th sample of the current epoch.
  const uint8_t* RowAt(int64_t i) const {
    const auto row = static_cast<size_t>(order_[static_cast<size_t>(i)]);
    return rows_.data() + (starts_.empty() ? row * row_bytes_ : starts_[row]);
  }

  // Where the i-th sample of the current epoch was read.
  RowOrigin OriginAt(int64_t i) const {
    const int64_t row = order_[static_cast<size_t>(i)];
    const auto after = std::upper_bound(file_first_row_.begin(), file_first_row_.end(), row);
    return {static_cast<uint32_t>(after - file_first_row_.begin() - 1),
            lines_[static_cast<size_t>(row)]};
  }

 private:
  void MakeOrder(int64_t epoch) {
    epoch_ = epoch;
    for (int64_t i = 0; i < n_; ++i) order_[static_cast<size_t>(i)] = i;
    if (!shuffle_) return;
    // Fisher-Yates with a generator of (seed, epoch) alone, drawn by hand rather than through
    // std::uniform_int_distribution, whose algorithm differs between standard libraries: the
    // order is the same on every build, so a job can be reproduced anywhere.
    std::mt19937_64 rng(Mix(seed_ ^ Mix(static_cast<uint64_t>(epoch) + 0x5EEDull)));
    for (int64_t i = n_ - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
      std::swap(order_[static_cast<size_t>(i)], order_[static_cast<size_t>(j)]);
    }
  }

  static uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

  std::vector<uint8_t> rows_;
  std::vector<size_t> starts_;
  std::vector<int64_t> lines_;
  std::vector<int64_t> file_first_row_;
  size_t row_bytes_;
  bool shuffle_;
  uint64_t seed_;
  int64_t n_ = 0;
  std::vector<int64_t> order_;
  int64_t epoch_ = 0;
  int64_t pos_ = 0;
};

// Batches from a SampleStream under a LastBatch policy.
class Dataset : public DataSource {
 public:
  Dataset(RowLayout layout, std::unique_ptr<SampleStream> stream, MemoryStream* memory,
          LastBatch last, bool sharded, std::unique_ptr<std::atomic<int64_t>> skipped,
          const std::vector<fs::path>& files)
      : layout_(std::move(layout)),
        stream_(std::move(stream)),
        memory_(memory),
        last_(last),
        sharded_(sharded),
        skipped_(std::move(skipped)) {
    for (const FeedSpec& f : layout_.feeds) {
      std::vector<int64_t> dims = SampleDims(f);
      dims.insert(dims.begin(), 0);
      batch_dims_.push_back(std::move(dims));
    }
    tensors_.resize(layout_.feeds.size());
    sequences_.resize(layout_.feeds.size());
    auto places = std::make_shared<std::vector<std::string>>();
    for (const fs::path& f : files) places->push_back(f.string());
    origin_.SetPlaces(std::move(places), OriginUnit::kLine);
  }

  Status Next(int64_t batch_size, exec::FeedMap& feeds) override {
    if (batch_size <= 0) return InvalidArgument("batch size must be > 0");
    for (size_t i = 0; i < layout_.feeds.size(); ++i) {
      exec::HostTensor& t = feeds[layout_.feeds[i].name];
      if (layout_.is_sequence(i)) {
        // Rows are appended sample by sample; dims[0] is set once the batch is complete.
        t.dtype = layout_.feeds[i].dtype;
        t.dims = batch_dims_[i];
        sequences_[i] = &t;
        continue;
      }
      batch_dims_[i][0] = batch_size;
      t.Reshape(layout_.feeds[i].dtype, batch_dims_[i]);
      tensors_[i] = t.bytes.data();
    }
    ClearSequences();
    origin_.Begin();
    int64_t r = 0;
    RowOrigin at;
    while (r < batch_size) {
      FLEET_ASSIGN_OR_RETURN(const uint8_t* row, stream_->Next(at));
      if (row == nullptr) {  // the epoch is over
        const int64_t seen = in_epoch_;
        in_epoch_ = 0;
        if (last_ == LastBatch::kDrop) {
          if (seen < batch_size) {
            return FailedPrecondition("data.last_batch = \"drop\": an epoch has " +
                                      std::to_string(seen) + " samples, fewer than a batch of " +
                                      std::to_string(batch_size) + ", so every batch is dropped");
          }
          r = 0;  // the partial batch goes; the next epoch fills the batch from its start
          ClearSequences();
          origin_.ClearRows();
        } else if (last_ == LastBatch::kPad && r > 0) {
          const auto pad_rows = static_cast<int64_t>(pad_start_.size());
          for (int64_t k = 0; r < batch_size; ++r, ++k) {
            const auto pad = static_cast<size_t>(k % pad_rows);
            Scatter(pad_.data() + pad_start_[pad], r);
            origin_.Add(pad_origin_[pad].file, pad_origin_[pad].line);
          }
        }
        continue;
      }
      if (last_ == LastBatch::kPad && in_epoch_ < batch_size) {
        // The epoch's first samples, kept to complete its last batch.
        if (in_epoch_ == 0) ClearPad();
        KeepForPad(row, at);
      }
      ++in_epoch_;
      Scatter(row, r++);
      origin_.Add(at.file, at.line);
    }
    for (exec::HostTensor* t : sequences_) {
      if (t != nullptr) t->dims[0] = t->lod.back();
    }
    return OkStatus();
  }

  int64_t num_samples() const override { return stream_->epoch_size(); }
  bool sharded() const override { return sharded_; }
  int64_t skipped_lines() const override { return skipped_->load(std::memory_order_relaxed); }

  // In memory the position after `batches` batches is arithmetic; a queue reads through them.
  Status Skip(int64_t batches, int64_t batch_size) override {
    if (memory_ == nullptr) return DataSource::Skip(batches, batch_size);
    if (batches < 0 || batch_size <= 0) {
      return InvalidArgument("cannot skip " + std::to_string(batches) + " batches of " +
                             std::to_string(batch_size));
    }
    const int64_t n = memory_->epoch_size();
    int64_t epoch = 0, offset = 0;
    if (last_ == LastBatch::kWrap) {
      int64_t total = 0;
      if (__builtin_mul_overflow(batches, batch_size, &total)) {
        return OutOfRange("cannot skip " + std::to_string(batches) + " batches of " +
                          std::to_string(batch_size) + ": too many samples");
      }
      epoch = total / n;
      offset = total % n;
    } else {
      const int64_t per_epoch = last_ == LastBatch::kDrop ? n / batch_size
                                                          : (n + batch_size - 1) / batch_size;
      if (per_epoch == 0) {
        return FailedPrecondition("data.last_batch = \"drop\": an epoch has " + std::to_string(n) +
                                  " samples, fewer than a batch of " +
                                  std::to_string(batch_size) + ", so every batch is dropped");
      }
      epoch = batches / per_epoch;
      offset = (batches % per_epoch) * batch_size;
    }
    memory_->Seek(epoch, offset);
    in_epoch_ = offset;
    origin_.SkipBatches(batches);
    if (last_ == LastBatch::kPad) {
      ClearPad();
      for (int64_t i = 0; i < std::min(offset, batch_size); ++i) {
        KeepForPad(memory_->RowAt(i), memory_->OriginAt(i));
      }
    }
    return OkStatus();
  }

 private:
  // Sample `r` of the batch from `record`: a dense feed's values go to row r of its tensor, a
  // sequence's rows are appended to its tensor and its end to the offsets.
  void Scatter(const uint8_t* record, int64_t r) {
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (layout_.is_sequence(i)) continue;
      std::memcpy(tensors_[i] + static_cast<size_t>(r) * layout_.bytes[i],
                  record + layout_.offset[i], layout_.bytes[i]);
    }
    const uint8_t* rows = record + layout_.row_bytes;
    for (size_t f : layout_.sequence_order) {
      const int64_t count = layout_.SequenceRows(record, f);
      const size_t bytes = static_cast<size_t>(count) * layout_.SequenceRowBytes(f);
      exec::HostTensor& t = *sequences_[f];
      t.bytes.insert(t.bytes.end(), rows, rows + bytes);
      t.lod.push_back(t.lod.back() + count);
      rows += bytes;
    }
  }

  // Empties the sequence tensors of the batch; their storage is kept.
  void ClearSequences() {
    for (exec::HostTensor* t : sequences_) {
      if (t == nullptr) continue;
      t->bytes.clear();
      t->lod.assign(1, 0);
    }
  }

  // The copies that complete an epoch's last batch (LastBatch::kPad): each record whole, so a
  // copy takes what its own sample needs.
  void ClearPad() {
    pad_.clear();
    pad_start_.clear();
    pad_origin_.clear();
  }
  void KeepForPad(const uint8_t* record, const RowOrigin& at) {
    pad_start_.push_back(pad_.size());
    pad_.insert(pad_.end(), record, record + layout_.RecordBytes(record));
    pad_origin_.push_back(at);
  }

  RowLayout layout_;
  std::unique_ptr<SampleStream> stream_;
  MemoryStream* memory_;  // stream_ when it is a MemoryStream, else null
  LastBatch last_;
  bool sharded_;
  std::unique_ptr<std::atomic<int64_t>> skipped_;
  std::vector<std::vector<int64_t>> batch_dims_;
  std::vector<uint8_t*> tensors_;               // per dense feed: its tensor's storage
  std::vector<exec::HostTensor*> sequences_;    // per sequence feed: its tensor
  int64_t in_epoch_ = 0;                        // samples of the current epoch handed out
  std::vector<uint8_t> pad_;                    // kPad: the first records of the current epoch,
  std::vector<size_t> pad_start_;               // where each starts in pad_,
  std::vector<RowOrigin> pad_origin_;           // and where each was read
};

}  // namespace

StatusOr<std::unique_ptr<DataSource>> MakeDataset(const std::vector<FeedSpec>& feeds,
                                                  const DatasetOptions& options) {
  if (options.files.empty()) return InvalidArgument("the dataset has no files");
  std::unique_ptr<LineParser> parser;
  if (options.format == "multislot") {
    FLEET_ASSIGN_OR_RETURN(parser, MakeMultiSlotParser(feeds, options.slots));
  } else if (options.format == "csv") {
    FLEET_ASSIGN_OR_RETURN(parser, MakeCsvParser(feeds, options.csv_header, options.csv_columns));
  } else {
    return InvalidArgument("unknown text format '" + options.format + "'");
  }
  if (options.shuffle && !options.in_memory) {
    return InvalidArgument("a queue dataset streams its files and cannot shuffle them");
  }
  RowLayout layout = parser->layout();
  if (layout.row_bytes == 0) return InvalidArgument("the feeds hold no values per sample");
  auto skipped = std::make_unique<std::atomic<int64_t>>(0);
  if (!options.in_memory) {
    auto stream = std::make_unique<QueueStream>(std::move(parser), options.files,
                                                options.skip_bad_lines, *skipped);
    return std::unique_ptr<DataSource>(new Dataset(std::move(layout), std::move(stream), nullptr,
                                                   options.last_batch, options.sharded,
                                                   std::move(skipped), options.files));
  }
  // Load everything now, so malformed lines and missing files fail before the first step.
  HeldRows rows;
  {
    SampleReader reader(options.files, *parser, options.skip_bad_lines, *skipped);
    const bool variable = !layout.sequence_order.empty();
    while (true) {
      const size_t at = rows.bytes.size();
      FLEET_ASSIGN_OR_RETURN(bool more, reader.Next(rows.bytes));
      if (!more) break;
      if (variable) rows.starts.push_back(at);
      const RowOrigin origin = reader.origin();
      // A file without samples starts where the next one does; the bisection passes over it.
      while (rows.file_first_row.size() <= origin.file) {
        rows.file_first_row.push_back(static_cast<int64_t>(rows.lines.size()));
      }
      rows.lines.push_back(origin.line);
    }
    if (reader.samples_in_pass() == 0) return reader.NoSamples();
  }
  rows.bytes.shrink_to_fit();
  rows.starts.shrink_to_fit();
  rows.lines.shrink_to_fit();
  auto stream = std::make_unique<MemoryStream>(std::move(rows), layout.row_bytes, options.shuffle,
                                               options.seed);
  MemoryStream* memory = stream.get();
  return std::unique_ptr<DataSource>(new Dataset(std::move(layout), std::move(stream), memory,
                                                 options.last_batch, options.sharded,
                                                 std::move(skipped), options.files));
}

}  // namespace fleet::data
