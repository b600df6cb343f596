// The MultiSlot and CSV line parsers, fed each line of the input. The first byte picks the
// layout (feeds of several dtypes and widths, dense or sequences), so the corpus covers both
// formats. A parsed record must be as long as the layout says, and no line may grow it by more
// than its own length justifies.
#include <memory>
#include <vector>

#include "data/line_format.h"
#include "fuzz_util.h"

namespace {

using fleet::data::FeedSpec;
using fleet::ir::DataType;

struct Parsers {
  std::unique_ptr<fleet::data::LineParser> multislot, sequences, csv, csv_header;
};

const Parsers& Get() {
  static const Parsers parsers = [] {
    const std::vector<FeedSpec> feeds = {{"x", DataType::kFloat32, {-1, 3}},
                                         {"ids", DataType::kInt64, {-1, 2}},
                                         {"y", DataType::kInt32, {-1, 1}}};
    // Sequences of single ids and of float pairs around a dense label.
    const std::vector<FeedSpec> sequence_feeds = {{"ids", DataType::kInt64, {-1, 1}, 1},
                                                  {"pairs", DataType::kFloat32, {-1, 2}, 1},
                                                  {"y", DataType::kInt32, {-1, 1}}};
    Parsers p;
    auto multislot = fleet::data::MakeMultiSlotParser(feeds, {"x", "skip", "ids", "y"});
    auto sequences =
        fleet::data::MakeMultiSlotParser(sequence_feeds, {"pairs", "skip", "ids", "y"});
    auto csv = fleet::data::MakeCsvParser(feeds, false, {});
    auto csv_header = fleet::data::MakeCsvParser(feeds, true, {{"y", {0}}});
    if (!multislot.ok() || !sequences.ok() || !csv.ok() || !csv_header.ok()) {
      __builtin_trap();  // a harness bug
    }
    p.multislot = std::move(*multislot);
    p.sequences = std::move(*sequences);
    p.csv = std::move(*csv);
    p.csv_header = std::move(*csv_header);
    return p;
  }();
  return parsers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fleet::fuzz::Quiet();
  if (size == 0) return 0;
  const Parsers& p = Get();
  fleet::data::LineParser* choice[] = {p.multislot.get(), p.csv.get(), p.csv_header.get(),
                                       p.sequences.get()};
  fleet::data::LineParser* parser = choice[data[0] % 4];
  const fleet::data::RowLayout& layout = parser->layout();
  std::vector<uint8_t> record;
  std::string_view text = fleet::fuzz::AsText(data + 1, size - 1);
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    fleet::data::LineError error;
    const size_t before = record.size();
    if (parser->Parse(line, record, error)) {
      const size_t added = record.size() - before;
      // At most 8 bytes per value and 2 characters per value on the line.
      if (added != layout.RecordBytes(record.data() + before) ||
          added > layout.row_bytes + 4 * (line.size() + 1)) {
        __builtin_trap();
      }
    } else if (record.size() != before) {
      __builtin_trap();  // a failed parse leaves the record as it was
    }
    if (record.size() > (1u << 20)) record.clear();
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return 0;
}
