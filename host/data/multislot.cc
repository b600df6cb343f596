// Paddle's MultiSlot text format (the MultiSlotDataFeed of InMemoryDataset / QueueDataset):
//
//   3 0.1 0.2 0.3 1 7        slot x: 3 values, slot y: 1 value
//
// Tokens are separated by spaces or tabs. A dense feed's slot carries exactly the feed's
// per-sample element count on every line; a sequence feed's slot carries whole rows, as many as
// the sample's sequence has (none at all is an empty sequence).
#include <cstring>
#include <set>

#include "data/line_format.h"
#include "support/text.h"

namespace fleet::data {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

class MultiSlotParser : public LineParser {
 public:
  MultiSlotParser(RowLayout layout, std::vector<std::string> slots, std::vector<int> feed_of)
      : layout_(std::move(layout)), slots_(std::move(slots)), feed_of_(std::move(feed_of)) {}

  bool Parse(std::string_view line, std::vector<uint8_t>& record, LineError& error) override {
    const size_t start = record.size();
    if (ParseAt(line, record, start, error)) return true;
    record.resize(start);
    return false;
  }

  const RowLayout& layout() const override { return layout_; }

 private:
  bool ParseAt(std::string_view line, std::vector<uint8_t>& record, size_t start,
               LineError& error) {
    record.resize(start + layout_.row_bytes);
    size_t at = 0;
    std::string_view token;
    // The next token, or false at the end of the line; `at` then points past it.
    auto next = [&]() {
      while (at < line.size() && IsSpace(line[at])) ++at;
      const size_t first = at;
      while (at < line.size() && !IsSpace(line[at])) ++at;
      token = line.substr(first, at - first);
      return !token.empty();
    };
    auto column = [&]() { return static_cast<int64_t>(token.data() - line.data()) + 1; };
    for (size_t s = 0; s < slots_.size(); ++s) {
      if (!next()) {
        error = {0, "the line ends before slot '" + slots_[s] + "' (slot " +
                        std::to_string(s + 1) + " of " + std::to_string(slots_.size()) + ")"};
        return false;
      }
      int64_t count = 0;
      if (!ParseCount(token, count)) {
        error = {column(), "slot '" + slots_[s] + "': expected a value count, got " +
                               QuoteForMessage(token)};
        return false;
      }
      const int feed = feed_of_[s];
      const auto f = static_cast<size_t>(feed);
      // Where the values go: a dense feed's place in the fixed part, the end of the record for
      // a sequence (grown below), nowhere for a dropped slot. An offset, not a pointer: growing
      // the record may move it.
      size_t out = 0;
      if (feed >= 0 && layout_.is_sequence(f)) {
        const int64_t per_row = layout_.numel[f];
        if (count % per_row != 0) {
          error = {column(), "slot '" + slots_[s] + "' has " + std::to_string(count) +
                                 " values, not a whole number of rows of sequence feed '" +
                                 slots_[s] + "' (" + std::to_string(per_row) + " values each)"};
          return false;
        }
        // Each value takes a character and a separator: a count the rest of the line cannot
        // hold is refused before the record grows for it.
        const size_t room = (line.size() - at) / 2;
        if (static_cast<uint64_t>(count) > room) {
          error = {column(), "slot '" + slots_[s] + "' claims " + std::to_string(count) +
                                 " values but the rest of the line has room for at most " +
                                 std::to_string(room)};
          return false;
        }
        const int64_t rows = count / per_row;
        std::memcpy(record.data() + start + layout_.offset[f], &rows, sizeof rows);
        out = record.size();
        record.resize(out + static_cast<size_t>(count) * ir::DataTypeSize(layout_.feeds[f].dtype));
      } else if (feed >= 0) {
        if (count != layout_.numel[f]) {
          error = {column(), "slot '" + slots_[s] + "' has " + std::to_string(count) +
                                 " values but feed '" + slots_[s] + "' takes " +
                                 std::to_string(layout_.numel[f]) + " per sample"};
          return false;
        }
        out = start + layout_.offset[f];
      }
      const ir::DataType dtype = feed >= 0 ? layout_.feeds[f].dtype : ir::DataType::kFloat64;
      const size_t size = ir::DataTypeSize(dtype);
      for (int64_t k = 0; k < count; ++k) {
        if (!next()) {
          error = {0, "the line ends inside slot '" + slots_[s] + "': " + std::to_string(k) +
                          " of its " + std::to_string(count) + " values"};
          return false;
        }
        // A dropped slot's values are still checked to be numbers, so a shifted line is caught.
        std::string what = StoreValue(token, dtype, feed >= 0 ? record.data() + out : scratch_);
        if (!what.empty()) {
          error = {column(), "slot '" + slots_[s] + "': " + what};
          return false;
        }
        if (feed >= 0) out += size;
      }
    }
    if (next()) {
      error = {column(), "expected " + std::to_string(slots_.size()) +
                             " slots, but the line goes on with " + QuoteForMessage(token)};
      return false;
    }
    return true;
  }

  static bool ParseCount(std::string_view t, int64_t& count) {
    if (t.empty() || t.size() > 9) return false;
    count = 0;
    for (char c : t) {
      if (c < '0' || c > '9') return false;
      count = count * 10 + (c - '0');
    }
    return true;
  }

  RowLayout layout_;
  std::vector<std::string> slots_;
  std::vector<int> feed_of_;  // per slot: the feed it fills, or -1
  uint8_t scratch_[8] = {};   // where a dropped slot's values go
};

}  // namespace

StatusOr<std::unique_ptr<LineParser>> MakeMultiSlotParser(const std::vector<FeedSpec>& feeds,
                                                          const std::vector<std::string>& slots) {
  if (slots.empty()) {
    return InvalidArgument("multislot data needs the file's slots in order (data.slots)");
  }
  FLEET_ASSIGN_OR_RETURN(RowLayout layout, MakeRowLayout(feeds));
  std::set<std::string> seen;
  std::vector<int> feed_of;
  for (const std::string& slot : slots) {
    if (!seen.insert(slot).second) {
      return InvalidArgument("data.slots names slot '" + slot + "' twice");
    }
    int feed = -1;
    for (size_t i = 0; i < feeds.size(); ++i) {
      if (feeds[i].name == slot) feed = static_cast<int>(i);
    }
    feed_of.push_back(feed);
    // Sequence rows follow the fixed part in the order the line gives them.
    if (feed >= 0 && feeds[static_cast<size_t>(feed)].lod_level > 0) {
      layout.sequence_order.push_back(static_cast<size_t>(feed));
    }
  }
  for (const FeedSpec& f : feeds) {
    if (seen.count(f.name) == 0) {
      return InvalidArgument("feed '" + f.name + "' is not one of the slots in data.slots (" +
                             std::to_string(slots.size()) + " slots: " + [&] {
                               std::string list;
                               for (const auto& s : slots) list += (list.empty() ? "" : ", ") + s;
                               return list;
                             }() + ")");
    }
  }
  return std::unique_ptr<LineParser>(
      new MultiSlotParser(std::move(layout), slots, std::move(feed_of)));
}

}  // namespace fleet::data
