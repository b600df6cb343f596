// host/data: where batches come from: synthetic, .npy, CSV and MultiSlot datasets, file lists
// and shards, the reader thread.
// Depends on: executor/, ir/, support/.
//
// Data sources: where the training loop's batches come from. A source knows the feed vars of
// the program (name, dtype, shape with -1 for the batch) and fills one host tensor per feed on
// each Next, reusing the tensors' storage so that steady-state batches allocate nothing.
//
//   synthetic  an endless, seeded, learnable stream: inputs drawn from N(0, 1), the label feed
//              computed by a fixed random teacher network from the inputs (see SyntheticOptions)
//   csv        rows of CSV files, columns mapped to feeds (data/dataset.h)
//   multislot  Paddle's MultiSlot text files, slots mapped to feeds by name (data/dataset.h);
//              the only source of sequence feeds (lod_level 1), one sequence per line and slot
//   npy        one .npy file per feed, first dimension = samples
// File sources go round their samples in order and start over at the end; data/dataset.h adds
// shuffling, sharding across trainers, streaming and end-of-epoch policies, data/prefetch.h a
// reader thread.
//
// Threading: a source is used by one thread at a time (a prefetching source owns a reader thread
// of its own, but its methods are still called from one thread).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_origin.h"
#include "executor/tensor.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet::data {

struct FeedSpec {
  std::string name;
  ir::DataType dtype = ir::DataType::kFloat32;
  std::vector<int64_t> dims;  // dims[0] is the batch (usually -1); no other dim may be -1
  // 1: a sequence feed (ir::Var::lod_level): each sample is a sequence of rows of dims[1:],
  // of its own length, and the batch's tensor carries offsets (exec::HostTensor::lod).
  int32_t lod_level = 0;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  // Fills `feeds[spec.name]` for every feed with the next `batch_size` samples.
  virtual Status Next(int64_t batch_size, exec::FeedMap& feeds) = 0;
  // Samples in one pass over the data; 0 for an endless source or one that does not know yet
  // (a streaming dataset).
  virtual int64_t num_samples() const = 0;

  // Leaves the source exactly as if Next(batch_size) had been called `batches` times, so a
  // resumed run sees the batches an uninterrupted one would. Called at most once, before the
  // first Next. The default draws the batches into a scratch FeedMap; sources that can, do it
  // arithmetically.
  virtual Status Skip(int64_t batches, int64_t batch_size);

  // True when the source already yields only this trainer's share of the data (its files were
  // split across trainers): the training loop then calls Next(batch_size) on every trainer. False
  // when every trainer sees all the data: the loop draws the global batch of
  // batch_size * trainers on every trainer and keeps its rows.
  virtual bool sharded() const { return false; }

  // Malformed lines skipped so far (data.bad_lines = "skip"); each line counts once however
  // many epochs pass over it. Safe to call from any thread.
  virtual int64_t skipped_lines() const { return 0; }

  // Where the rows of the batch the last successful Next filled came from, numbered among all
  // batches of the source, skipped ones included (data/batch_origin.h). Every source records it.
  const BatchOrigin& origin() const { return origin_; }

 protected:
  BatchOrigin origin_;
};

// The feed specs of a program's data vars, checked: a feed has a batch dimension (the first) and
// every other dim is known.
StatusOr<std::vector<FeedSpec>> FeedSpecs(const ir::Program& program,
                                          const std::vector<std::string>& feed_names);

// The shape of one sample of `spec` (dims without the first, batch dimension) and its element
// count. Sources fill feeds of shape [batch_size] + SampleDims.
std::vector<int64_t> SampleDims(const FeedSpec& spec);
int64_t SampleNumel(const FeedSpec& spec);

// OK when every feed is dense; else an error naming the first sequence feed, for a source that
// cannot give samples lengths of their own (`source`: "csv data"). Only MultiSlot files can.
Status RefuseSequenceFeeds(const std::vector<FeedSpec>& feeds, const std::string& source);

// Samples [first, first + count) of a batch tensor into `out`, whose storage is reused: those
// rows of a dense tensor; of a sequence tensor, those sequences with all their rows and the
// offsets rebased to start at 0. The range must lie within the batch (and a sequence tensor's
// offsets must be valid, as the sources make them).
void SliceSamples(const exec::HostTensor& batch, int64_t first, int64_t count,
                  exec::HostTensor& out);

struct SyntheticOptions {
  uint64_t seed = 1;
  // The feed the teacher computes. "" = the last feed when there are two or more, else none.
  std::string label;
  // Classes of an int64 label (argmax of the teacher's logits); required for an int64 label.
  int64_t classes = 0;
  double noise = 0.01;  // standard deviation of the noise added to a float label
};

// The teacher reads every non-label feed (all float) as one flat vector per sample. For an
// int64 label of shape [-1, 1] or [-1] it is a random one-hidden-layer tanh network whose
// argmax over `classes` logits is the label; for a float label it is linear plus noise.
// Errors: an unknown label, an int64 label without classes, a non-float input, a sequence feed.
StatusOr<std::unique_ptr<DataSource>> MakeSyntheticSource(const std::vector<FeedSpec>& feeds,
                                                          const SyntheticOptions& options);

struct CsvOptions {
  std::filesystem::path path;
  bool header = false;  // skip the first line
  // Columns (0-based) of each feed, as many as one sample has elements. Feeds without an entry
  // take the next unused columns in feed order.
  std::map<std::string, std::vector<int64_t>> columns;
};

// Reads the whole file at once. Sequence feeds are refused. Errors are "FILE:LINE:COL: ..." for cells that are not numbers
// (or not integers, for an int feed) and rows with another column count than the first;
// "FILE: ..." for a file with no rows and columns that do not exist.
StatusOr<std::unique_ptr<DataSource>> MakeCsvSource(const std::vector<FeedSpec>& feeds,
                                                    const CsvOptions& options);

// One .npy file per feed (every feed needs one); each array is [samples, sample dims...] with
// the feed's dtype, and all have the same number of samples. Sequence feeds are refused.
StatusOr<std::unique_ptr<DataSource>> MakeNpySource(
    const std::vector<FeedSpec>& feeds, const std::map<std::string, std::filesystem::path>& files);

}  // namespace fleet::data
