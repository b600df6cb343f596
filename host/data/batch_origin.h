// Where the rows of a batch came from, so that an error raised while a step runs on the batch (a
// label out of range, a bad index) names the file and the lines to look at. Every source records
// its batches here in the same terms, whatever the format, and only this file words them: the
// training loop appends Describe() to an error of the step.
//
// A row here is one sample of the batch, the unit the batch size counts: for a sequence feed
// (lod_level 1) that is one whole sequence, however many tensor rows it has, so a trainer's or
// a device's share of sequences is named by the same sample numbers as its dense rows.
//
// A batch is recorded as runs: rows that came from consecutive positions of one place (a file,
// the set of .npy files, the generator). Recording a row costs a comparison and, when it starts a
// new run, an append to a vector whose storage is kept from batch to batch, so steady-state
// batches allocate nothing.
//
// Threading: like the source that owns it, used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/status.h"

namespace fleet::data {

// What a position within a place counts.
enum class OriginUnit {
  kLine,    // 1-based line of a text file
  kRecord,  // 0-based index along the first axis of .npy arrays
  kSample,  // 0-based index of a generated sample
};

class BatchOrigin {
 public:
  // The places positions refer to (file names, for messages), shared by every batch of a
  // source: set once, before the first batch.
  void SetPlaces(std::shared_ptr<const std::vector<std::string>> places, OriginUnit unit);

  // Starts the next batch, numbered one more than the last (the first batch is 1).
  void Begin();
  // Counts `batches` batches as drawn without recording them (DataSource::Skip).
  void SkipBatches(int64_t batches);
  // Appends `count` rows from consecutive positions `first`, `first` + 1, ... of place `place`.
  void Add(uint32_t place, int64_t first, int64_t count = 1);
  // Forgets the rows recorded since Begin (a partial batch that is dropped); the number stays.
  void ClearRows();

  int64_t batch() const { return batch_; }
  int64_t rows() const { return rows_; }

  // "batch 3: data/train.csv lines 65-96" for rows [first_row, first_row + rows) of the batch
  // (rows < 0: to the end; a trainer names its share of a global batch). Runs of one place are
  // grouped ("a.csv lines 90-99, 101, b.csv lines 1-22"); after a few runs the rest is counted
  // ("... and 29 more rows"), so a shuffled batch gives a short text. "" when nothing is recorded.
  std::string Describe(int64_t first_row = 0, int64_t rows = -1) const;

  // `status` with " (DESCRIBE)" appended to its message; OK, or nothing recorded, is returned
  // unchanged.
  Status Annotate(const Status& status, int64_t first_row = 0, int64_t rows = -1) const;

 private:
  struct Run {
    uint32_t place;
    int64_t first;
    int64_t count;
  };

  std::shared_ptr<const std::vector<std::string>> places_;
  OriginUnit unit_ = OriginUnit::kSample;
  std::vector<Run> runs_;
  int64_t rows_ = 0;
  int64_t batch_ = 0;
};

}  // namespace fleet::data
