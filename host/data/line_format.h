// Internal to host/data: turning one line of a text file into one sample.
//
// A sample is a row of bytes holding every feed's values back to back (RowLayout), so a whole
// dataset is one array of rows and a batch is assembled by copying each row's pieces into the
// feed tensors. Parsers write straight into such a row: no allocation per line.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/source.h"

namespace fleet::data {

// Where each feed's values sit in a sample row.
struct RowLayout {
  std::vector<FeedSpec> feeds;
  std::vector<int64_t> numel;   // values per sample of each feed
  std::vector<size_t> offset;   // byte offset of each feed in the row
  std::vector<size_t> bytes;    // bytes of each feed in the row
  size_t row_bytes = 0;
};

// Errors: a feed whose dtype text files cannot fill (float32, float64, int32 and int64 can).
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
  // Parses a line that is not blank into `row` (layout().row_bytes bytes). On a malformed line
  // returns false with `error` set; `row` is then unspecified.
  virtual bool Parse(std::string_view line, uint8_t* row, LineError& error) = 0;
  // Lines at the top of every file that carry no data (a CSV header).
  virtual int64_t header_lines() const { return 0; }
  virtual const RowLayout& layout() const = 0;
};

// Paddle's MultiSlot text format: for each slot of `slots`, in order, a count and that many
// values. A slot named like a feed fills it (its count must be the feed's per-sample size: there
// are no variable-length tensors); other slots are parsed and dropped. Errors: a feed that is no
// slot, a slot named twice, no slots.
StatusOr<std::unique_ptr<LineParser>> MakeMultiSlotParser(const std::vector<FeedSpec>& feeds,
                                                          const std::vector<std::string>& slots);

// Comma-separated cells; `columns` maps feeds to 0-based columns (feeds without an entry take
// the next unused columns in feed order, see CsvOptions). Every row must have as many cells as
// the first good one.
StatusOr<std::unique_ptr<LineParser>> MakeCsvParser(
    const std::vector<FeedSpec>& feeds, bool header,
    const std::map<std::string, std::vector<int64_t>>& columns);

// Number parsing shared by the formats: the whole of `text` must be the number. An integer
// feed's value must be written as an integer. Returns "" or what is wrong.
std::string StoreValue(std::string_view text, ir::DataType dtype, uint8_t* at);

}  // namespace fleet::data
