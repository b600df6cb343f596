// Internal to host/data: turning one line of a text file into one sample.
//
// A sample is a record of bytes holding every feed's values (RowLayout), so a whole dataset is
// one array of records and a batch is assembled by copying each record's pieces into the feed
// tensors. A record is a fixed part of RowLayout::row_bytes, where each dense feed's values and
// each sequence feed's row count sit at the feed's offset, followed by the rows of the sequence
// feeds, one feed after another in RowLayout::sequence_order. A layout without sequence feeds
// therefore has records of row_bytes bytes each. Parsers append straight to a record buffer
// whose storage is kept from line to line: no allocation per line once it has grown.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/source.h"

namespace fleet::data {

// Where each feed's values sit in a sample record.
struct RowLayout {
  std::vector<FeedSpec> feeds;
  // Values per sample of a dense feed; values per row (SampleNumel) of a sequence feed.
  std::vector<int64_t> numel;
  std::vector<size_t> offset;  // byte offset of each feed in the fixed part
  // Bytes of each feed in the fixed part: its values, or a sequence feed's int64 row count.
  std::vector<size_t> bytes;
  size_t row_bytes = 0;  // the fixed part
  // The sequence feeds (indices into `feeds`) in the order their rows follow the fixed part.
  // The parser sets it (MultiSlot: the order of the slots); empty when every feed is dense.
  std::vector<size_t> sequence_order;

  bool is_sequence(size_t feed) const { return feeds[feed].lod_level > 0; }
  // The row count of sequence feed `feed` in `record`.
  int64_t SequenceRows(const uint8_t* record, size_t feed) const;
  // Bytes of one row of sequence feed `feed`.
  size_t SequenceRowBytes(size_t feed) const;
  // The whole record's size: row_bytes plus the sequence rows it carries.
  size_t RecordBytes(const uint8_t* record) const;
};

// Errors: a feed whose dtype text files cannot fill (float32, float64, int32 and int64 can), a
// lod_level other than 0 and 1.
StatusOr<RowLayout> MakeRowLayout(const std::vector<FeedSpec>& feeds);

// What is wrong with a line: the 1-based byte column it starts at (0 = the line as a whole) and
// what was expected. The reader adds "FILE:LINE:".
struct LineError {
  int64_t column = 0;
  std::string message;
};

// One line format. A parser may keep state across lines (the CSV width of the first row) and is
// used by one thread at a time.
class LineParser {
 public:
  virtual ~LineParser() = default;
  // Parses a line that is not blank and appends its sample record to `record`. On a malformed
  // line returns false with `error` set and `record` as it was. However large the counts a line
  // claims, the record grows by at most a few times the line's length.
  virtual bool Parse(std::string_view line, std::vector<uint8_t>& record, LineError& error) = 0;
  // Lines at the top of every file that carry no data (a CSV header).
  virtual int64_t header_lines() const { return 0; }
  virtual const RowLayout& layout() const = 0;
};

// Paddle's MultiSlot text format: for each slot of `slots`, in order, a count and that many
// values. A slot named like a feed fills it: a dense feed's count must be its per-sample size; a
// sequence feed's count is any multiple of its per-row size (0 too: an empty sequence), and
// count / per-row size is the sample's sequence length. Other slots are parsed and dropped.
// Errors: a feed that is no slot, a slot named twice, no slots.
StatusOr<std::unique_ptr<LineParser>> MakeMultiSlotParser(const std::vector<FeedSpec>& feeds,
                                                          const std::vector<std::string>& slots);

// Comma-separated cells; `columns` maps feeds to 0-based columns (feeds without an entry take
// the next unused columns in feed order, see CsvOptions). Every row must have as many cells as
// the first good one. Errors: a sequence feed (a row has one fixed count of cells per feed).
StatusOr<std::unique_ptr<LineParser>> MakeCsvParser(
    const std::vector<FeedSpec>& feeds, bool header,
    const std::map<std::string, std::vector<int64_t>>& columns);

// Number parsing shared by the formats: the whole of `text` must be the number. An integer
// feed's value must be written as an integer. Returns "" or what is wrong.
std::string StoreValue(std::string_view text, ir::DataType dtype, uint8_t* at);

}  // namespace fleet::data
