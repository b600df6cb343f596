// Text datasets: what Paddle users know as InMemoryDataset and QueueDataset, over MultiSlot or
// CSV files.
//
//   memory  every file of this trainer's share is read and parsed once, up front; batches are
//           copied out of the rows in memory, optionally in a new shuffled order every epoch.
//   queue   files are streamed line by line and never held in memory; at the end of the last
//           file the next epoch starts over from the first.
//
// An epoch is one pass over the share's samples. What happens to its last, partial batch is the
// LastBatch policy. Both kinds yield the same samples in the same order when not shuffled.
//
// Threading: the source is used by one thread at a time (wrap it with MakePrefetchSource for a
// reader thread); skipped_lines() may be read from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/source.h"

namespace fleet::data {

enum class LastBatch {
  kWrap,  // the partial batch is completed from the next epoch (batches run across epochs)
  kDrop,  // the partial batch is dropped; the next batch starts the next epoch
  kPad,   // the partial batch is completed with the epoch's first samples again
};

struct DatasetOptions {
  std::string format = "multislot";  // multislot or csv
  // The files of this trainer, in reading order (already expanded and sharded: file_list.h).
  std::vector<std::filesystem::path> files;
  bool sharded = false;  // `files` is this trainer's share only (DataSource::sharded)
  // multislot: the file's slots in order (feeds are matched by name).
  std::vector<std::string> slots;
  // csv: skip the first line of every file; columns per feed (CsvOptions::columns).
  bool csv_header = false;
  std::map<std::string, std::vector<int64_t>> csv_columns;
  bool in_memory = true;    // memory (true) or queue (false)
  bool shuffle = false;     // memory only: a new order each epoch
  uint64_t seed = 1;        // the order of epoch e is a function of (seed, e) only
  LastBatch last_batch = LastBatch::kWrap;
  bool skip_bad_lines = false;  // skip (and count) malformed lines instead of failing
};

// Errors at creation: a feed the format cannot fill, slots that do not cover the feeds, an
// unreadable file, and for memory datasets every malformed line (as "FILE:LINE:COL: ...") and a
// share with no samples. A queue dataset reports those at the Next that reaches them. With
// LastBatch::kDrop, an epoch with fewer samples than a batch is an error at Next.
StatusOr<std::unique_ptr<DataSource>> MakeDataset(const std::vector<FeedSpec>& feeds,
                                                  const DatasetOptions& options);

}  // namespace fleet::data
