// The MultiSlot and CSV line parsers, fed each line of the input. The first byte picks the
// layout (feeds of several dtypes and widths), so the corpus covers both formats.
#include <memory>
#include <vector>

#include "data/line_format.h"
#include "fuzz_util.h"

namespace {

using fleet::data::FeedSpec;
using fleet::ir::DataType;

struct Parsers {
  std::unique_ptr<fleet::data::LineParser> multislot, csv, csv_header;
};

const Parsers& Get() {
  static const Parsers parsers = [] {
    const std::vector<FeedSpec> feeds = {{"x", DataType::kFloat32, {-1, 3}},
                                         {"ids", DataType::kInt64, {-1, 2}},
                                         {"y", DataType::kInt32, {-1, 1}}};
    Parsers p;
    auto multislot = fleet::data::MakeMultiSlotParser(feeds, {"x", "skip", "ids", "y"});
    auto csv = fleet::data::MakeCsvParser(feeds, false, {});
    auto csv_header = fleet::data::MakeCsvParser(feeds, true, {{"y", {0}}});
    if (!multislot.ok() || !csv.ok() || !csv_header.ok()) __builtin_trap();  // a harness bug
    p.multislot = std::move(*multislot);
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
  fleet::data::LineParser* parser =
      data[0] % 3 == 0 ? p.multislot.get() : (data[0] % 3 == 1 ? p.csv.get() : p.csv_header.get());
  std::vector<uint8_t> row(parser->layout().row_bytes);
  std::string_view text = fleet::fuzz::AsText(data + 1, size - 1);
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    fleet::data::LineError error;
    (void)parser->Parse(line, row.data(), error);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return 0;
}
