// Sample rows and number parsing shared by the text formats.
#include <charconv>
#include <cstring>

#include "data/line_format.h"
#include "support/text.h"

namespace fleet::data {

StatusOr<RowLayout> MakeRowLayout(const std::vector<FeedSpec>& feeds) {
  RowLayout layout;
  layout.feeds = feeds;
  for (const FeedSpec& f : feeds) {
    if (f.dtype != ir::DataType::kFloat32 && f.dtype != ir::DataType::kFloat64 &&
        f.dtype != ir::DataType::kInt32 && f.dtype != ir::DataType::kInt64) {
      return InvalidArgument("feed '" + f.name + "' is " + std::string(ir::DataTypeName(f.dtype)) +
                             "; text data fills float32, float64, int32 and int64 feeds");
    }
    if (f.lod_level < 0 || f.lod_level > 1) {
      return InvalidArgument("feed '" + f.name + "' has lod_level " +
                             std::to_string(f.lod_level) +
                             "; text data fills dense feeds and sequences (lod_level 1)");
    }
    const int64_t n = SampleNumel(f);
    if (f.lod_level > 0 && n == 0) {
      return InvalidArgument("sequence feed '" + f.name + "' is declared " +
                             ir::ShapeText(f.dims) + ": its rows hold no values");
    }
    layout.numel.push_back(n);
    layout.offset.push_back(layout.row_bytes);
    layout.bytes.push_back(f.lod_level > 0 ? sizeof(int64_t)
                                           : static_cast<size_t>(n) * ir::DataTypeSize(f.dtype));
    layout.row_bytes += layout.bytes.back();
  }
  return layout;
}

int64_t RowLayout::SequenceRows(const uint8_t* record, size_t feed) const {
  int64_t rows = 0;
  std::memcpy(&rows, record + offset[feed], sizeof rows);
  return rows;
}

size_t RowLayout::SequenceRowBytes(size_t feed) const {
  return static_cast<size_t>(numel[feed]) * ir::DataTypeSize(feeds[feed].dtype);
}

size_t RowLayout::RecordBytes(const uint8_t* record) const {
  size_t size = row_bytes;
  for (size_t f : sequence_order) {
    size += static_cast<size_t>(SequenceRows(record, f)) * SequenceRowBytes(f);
  }
  return size;
}

std::string StoreValue(std::string_view text, ir::DataType dtype, uint8_t* at) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;  // from_chars takes no plus sign; people write one
  if (dtype == ir::DataType::kFloat32 || dtype == ir::DataType::kFloat64) {
    double v = 0;
    auto [end, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || end != last || first == last) {
      return ec == std::errc::result_out_of_range ? QuoteForMessage(text) + " is out of range"
                                                  : "expected a number, got " +
                                                        QuoteForMessage(text);
    }
    if (dtype == ir::DataType::kFloat32) {
      const float f = static_cast<float>(v);
      std::memcpy(at, &f, sizeof f);
    } else {
      std::memcpy(at, &v, sizeof v);
    }
    return {};
  }
  int64_t v = 0;
  auto [end, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || end != last || first == last) {
    double d = 0;
    auto [dend, dec] = std::from_chars(first, last, d);
    if (dec == std::errc() && dend == last && first != last) {
      return "expected an integer for an " + std::string(ir::DataTypeName(dtype)) +
             " feed, got " + QuoteForMessage(text);
    }
    return ec == std::errc::result_out_of_range
               ? QuoteForMessage(text) + " is out of range"
               : "expected an integer, got " + QuoteForMessage(text);
  }
  if (dtype == ir::DataType::kInt32) {
    if (v < INT32_MIN || v > INT32_MAX) {
      return QuoteForMessage(text) + " is out of range for an int32 feed";
    }
    const int32_t i = static_cast<int32_t>(v);
    std::memcpy(at, &i, sizeof i);
  } else {
    std::memcpy(at, &v, sizeof v);
  }
  return {};
}

}  // namespace fleet::data
