// The CSV line format: comma-separated numbers, columns mapped to feeds.
#include <algorithm>

#include "data/line_format.h"
#include "support/text.h"

namespace fleet::data {
namespace {

std::string_view Trim(std::string_view s, size_t& lead) {
  lead = 0;
  while (lead < s.size() && (s[lead] == ' ' || s[lead] == '\t')) ++lead;
  size_t end = s.size();
  while (end > lead && (s[end - 1] == ' ' || s[end - 1] == '\t' || s[end - 1] == '\r')) --end;
  return s.substr(lead, end - lead);
}

class CsvParser : public LineParser {
 public:
  struct Target {
    int feed;
    int64_t index;  // value index within the feed's sample
  };

  CsvParser(RowLayout layout, bool header, std::vector<std::vector<Target>> targets)
      : layout_(std::move(layout)), header_(header), targets_(std::move(targets)) {}

  bool Parse(std::string_view line, std::vector<uint8_t>& record, LineError& error) override {
    const size_t start = record.size();
    record.resize(start + layout_.row_bytes);
    if (ParseRow(line, record.data() + start, error)) return true;
    record.resize(start);
    return false;
  }

  int64_t header_lines() const override { return header_ ? 1 : 0; }
  const RowLayout& layout() const override { return layout_; }

 private:
  struct Cell {
    std::string_view text;
    size_t column;  // 1-based
  };

  bool ParseRow(std::string_view line, uint8_t* row, LineError& error) {
    cells_.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      const size_t end = comma == std::string_view::npos ? line.size() : comma;
      size_t lead;
      std::string_view cell = Trim(line.substr(start, end - start), lead);
      cells_.push_back({cell, start + lead + 1});
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (width_ == 0) {
      // The first good row fixes the width; the mapped columns must exist in it.
      for (size_t c = cells_.size(); c < targets_.size(); ++c) {
        if (targets_[c].empty()) continue;
        const FeedSpec& f = layout_.feeds[static_cast<size_t>(targets_[c][0].feed)];
        error = {0, "feed '" + f.name + "' needs column " + std::to_string(c) +
                        " but the row has " + std::to_string(cells_.size()) + " columns (0 to " +
                        std::to_string(cells_.size() - 1) + ")"};
        return false;
      }
    } else if (cells_.size() != width_) {
      error = {0, "expected " + std::to_string(width_) + " columns (as in the first row), got " +
                      std::to_string(cells_.size())};
      return false;
    }
    for (size_t c = 0; c < cells_.size(); ++c) {
      const std::string_view cell = cells_[c].text;
      if (c >= targets_.size() || targets_[c].empty()) {
        // Unmapped cells must still be numbers: a stray word usually means a shifted row.
        std::string what = StoreValue(cell, ir::DataType::kFloat64, scratch_);
        if (!what.empty()) {
          error = {static_cast<int64_t>(cells_[c].column), what};
          return false;
        }
        continue;
      }
      for (const Target& t : targets_[c]) {
        const size_t feed = static_cast<size_t>(t.feed);
        const ir::DataType dtype = layout_.feeds[feed].dtype;
        uint8_t* at = row + layout_.offset[feed] +
                      static_cast<size_t>(t.index) * ir::DataTypeSize(dtype);
        std::string what = StoreValue(cell, dtype, at);
        if (!what.empty()) {
          if (what.rfind("expected an integer for", 0) == 0) {
            what = "feed '" + layout_.feeds[feed].name + "' is " +
                   std::string(ir::DataTypeName(dtype)) + " but the cell is not an integer (" +
                   QuoteForMessage(cell) + ")";
          }
          error = {static_cast<int64_t>(cells_[c].column), what};
          return false;
        }
      }
    }
    if (width_ == 0) width_ = cells_.size();
    return true;
  }

  RowLayout layout_;
  bool header_;
  std::vector<std::vector<Target>> targets_;  // per column: the feed values it fills
  std::vector<Cell> cells_;                   // reused from line to line
  size_t width_ = 0;
  uint8_t scratch_[8] = {};
};

}  // namespace

StatusOr<std::unique_ptr<LineParser>> MakeCsvParser(
    const std::vector<FeedSpec>& feeds, bool header,
    const std::map<std::string, std::vector<int64_t>>& columns) {
  for (const auto& entry : columns) {
    const std::string& name = entry.first;  // a lambda may not capture a binding (clang 14)
    if (std::none_of(feeds.begin(), feeds.end(), [&](const FeedSpec& f) { return f.name == name; })) {
      return InvalidArgument("columns are given for '" + name +
                             "', which is not a feed of the program");
    }
  }
  FLEET_RETURN_IF_ERROR(RefuseSequenceFeeds(feeds, "csv data"));
  FLEET_ASSIGN_OR_RETURN(RowLayout layout, MakeRowLayout(feeds));
  // Columns of each feed: given, or the next unused ones in feed order.
  std::vector<std::vector<CsvParser::Target>> targets;
  int64_t next = 0;
  for (size_t i = 0; i < feeds.size(); ++i) {
    const FeedSpec& f = feeds[i];
    auto it = columns.find(f.name);
    std::vector<int64_t> cols;
    if (it != columns.end()) {
      cols = it->second;
      if (static_cast<int64_t>(cols.size()) != SampleNumel(f)) {
        return InvalidArgument("feed '" + f.name + "' has " + std::to_string(SampleNumel(f)) +
                               " values per sample but " + std::to_string(cols.size()) +
                               " columns are mapped to it");
      }
    } else {
      for (int64_t k = 0; k < SampleNumel(f); ++k) cols.push_back(next + k);
    }
    for (size_t k = 0; k < cols.size(); ++k) {
      const int64_t c = cols[k];
      if (c < 0) return InvalidArgument("feed '" + f.name + "': column " + std::to_string(c));
      next = std::max(next, c + 1);
      if (targets.size() <= static_cast<size_t>(c)) targets.resize(static_cast<size_t>(c) + 1);
      targets[static_cast<size_t>(c)].push_back({static_cast<int>(i), static_cast<int64_t>(k)});
    }
  }
  return std::unique_ptr<LineParser>(new CsvParser(std::move(layout), header, std::move(targets)));
}

}  // namespace fleet::data
