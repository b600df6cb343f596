// The csv and npy sources: read every sample into memory once, then serve batches from a
// table source.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "data/npy.h"
#include "data/source.h"
#include "data/table_source.h"

namespace fleet::data {
namespace {

std::string_view TrimCell(std::string_view s, size_t& lead) {
  lead = 0;
  while (lead < s.size() && (s[lead] == ' ' || s[lead] == '\t')) ++lead;
  size_t end = s.size();
  while (end > lead && (s[end - 1] == ' ' || s[end - 1] == '\t' || s[end - 1] == '\r')) --end;
  return s.substr(lead, end - lead);
}

bool IsFloat(ir::DataType t) { return t == ir::DataType::kFloat32 || t == ir::DataType::kFloat64; }

}  // namespace

StatusOr<std::unique_ptr<DataSource>> MakeCsvSource(const std::vector<FeedSpec>& feeds,
                                                    const CsvOptions& options) {
  const std::string file = options.path.string();
  for (const auto& [name, cols] : options.columns) {
    if (std::none_of(feeds.begin(), feeds.end(), [&](const FeedSpec& f) { return f.name == name; })) {
      return InvalidArgument(file + ": columns are given for '" + name +
                             "', which is not a feed of the program");
    }
  }
  for (const FeedSpec& f : feeds) {
    if (!IsFloat(f.dtype) && f.dtype != ir::DataType::kInt64 && f.dtype != ir::DataType::kInt32) {
      return InvalidArgument(file + ": feed '" + f.name + "' is " +
                             std::string(ir::DataTypeName(f.dtype)) +
                             "; csv data fills float32, float64, int32 and int64 feeds");
    }
  }
  // Columns of each feed: given, or the next unused ones in feed order.
  std::vector<std::vector<int64_t>> columns;
  int64_t next = 0;
  for (const FeedSpec& f : feeds) {
    auto it = options.columns.find(f.name);
    std::vector<int64_t> cols;
    if (it != options.columns.end()) {
      cols = it->second;
      if (static_cast<int64_t>(cols.size()) != SampleNumel(f)) {
        return InvalidArgument(file + ": feed '" + f.name + "' has " +
                               std::to_string(SampleNumel(f)) + " values per sample but " +
                               std::to_string(cols.size()) + " columns are mapped to it");
      }
    } else {
      for (int64_t k = 0; k < SampleNumel(f); ++k) cols.push_back(next + k);
    }
    for (int64_t c : cols) next = std::max(next, c + 1);
    columns.push_back(std::move(cols));
  }

  std::ifstream in(options.path, std::ios::binary);
  if (!in) return NotFound(file + ": cannot open the file: " + std::strerror(errno));
  std::vector<std::vector<double>> rows;
  std::vector<std::vector<bool>> integral;
  size_t width = 0, width_line = 0;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 && options.header) continue;
    size_t lead;
    if (TrimCell(line, lead).empty()) continue;  // blank lines
    std::vector<double> row;
    std::vector<bool> ints;
    size_t start = 0;
    while (true) {
      size_t comma = line.find(',', start);
      std::string_view raw = std::string_view(line).substr(
          start, comma == std::string::npos ? std::string::npos : comma - start);
      std::string_view cell = TrimCell(raw, lead);
      std::string text(cell);
      char* end = nullptr;
      errno = 0;
      double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
        return InvalidArgument(file + ":" + std::to_string(line_no) + ":" +
                               std::to_string(start + lead + 1) + ": expected a number, got '" +
                               text + "'");
      }
      row.push_back(v);
      ints.push_back(text.find_first_of(".eEnN") == std::string::npos);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (width == 0) {
      width = row.size();
      width_line = line_no;
    } else if (row.size() != width) {
      return InvalidArgument(file + ":" + std::to_string(line_no) + ": expected " +
                             std::to_string(width) + " columns (as on line " +
                             std::to_string(width_line) + "), got " + std::to_string(row.size()));
    }
    rows.push_back(std::move(row));
    integral.push_back(std::move(ints));
  }
  if (rows.empty()) return InvalidArgument(file + ": the file has no data rows");
  for (size_t i = 0; i < feeds.size(); ++i) {
    for (int64_t c : columns[i]) {
      if (c < 0 || static_cast<size_t>(c) >= width) {
        return InvalidArgument(file + ": feed '" + feeds[i].name + "' needs column " +
                               std::to_string(c) + " but the rows have " + std::to_string(width) +
                               " columns (0 to " + std::to_string(width - 1) + ")");
      }
    }
  }

  std::vector<exec::HostTensor> tables;
  const int64_t n = static_cast<int64_t>(rows.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    const FeedSpec& f = feeds[i];
    std::vector<int64_t> dims = SampleDims(f);
    dims.insert(dims.begin(), n);
    exec::HostTensor t;
    t.Reshape(f.dtype, dims);
    const auto& cols = columns[i];
    for (int64_t r = 0; r < n; ++r) {
      for (size_t k = 0; k < cols.size(); ++k) {
        const size_t c = static_cast<size_t>(cols[k]);
        const double v = rows[static_cast<size_t>(r)][c];
        const int64_t at = r * static_cast<int64_t>(cols.size()) + static_cast<int64_t>(k);
        if (!IsFloat(f.dtype) && !integral[static_cast<size_t>(r)][c]) {
          return InvalidArgument(file + ": row " + std::to_string(r + 1) + ", column " +
                                 std::to_string(c) + ": feed '" + f.name + "' is " +
                                 std::string(ir::DataTypeName(f.dtype)) +
                                 " but the cell is not an integer");
        }
        switch (f.dtype) {
          case ir::DataType::kFloat64: t.data<double>()[at] = v; break;
          case ir::DataType::kInt64: t.data<int64_t>()[at] = static_cast<int64_t>(v); break;
          case ir::DataType::kInt32: t.data<int32_t>()[at] = static_cast<int32_t>(v); break;
          default: t.data<float>()[at] = static_cast<float>(v); break;
        }
      }
    }
    tables.push_back(std::move(t));
  }
  return MakeTableSource(feeds, std::move(tables));
}

StatusOr<std::unique_ptr<DataSource>> MakeNpySource(
    const std::vector<FeedSpec>& feeds, const std::map<std::string, std::filesystem::path>& files) {
  for (const auto& [name, path] : files) {
    if (std::none_of(feeds.begin(), feeds.end(), [&](const FeedSpec& f) { return f.name == name; })) {
      return InvalidArgument("npy data: a file is given for '" + name +
                             "', which is not a feed of the program");
    }
  }
  for (const FeedSpec& f : feeds) {
    if (files.count(f.name) == 0) {
      return InvalidArgument("npy data: no file for feed '" + f.name + "' (set data.files." +
                             f.name + ")");
    }
  }
  std::vector<exec::HostTensor> tables;
  int64_t samples = -1;
  std::string first_file;
  for (const FeedSpec& f : feeds) {
    auto it = files.find(f.name);
    const std::string file = it->second.string();
    FLEET_ASSIGN_OR_RETURN(NpyArray array, ReadNpy(it->second));
    if (array.dtype != f.dtype) {
      return InvalidArgument(file + ": the array is " +
                             std::string(ir::DataTypeName(array.dtype)) + " but feed '" + f.name +
                             "' is " + std::string(ir::DataTypeName(f.dtype)));
    }
    std::vector<int64_t> want = SampleDims(f);
    if (array.dims.empty() ||
        std::vector<int64_t>(array.dims.begin() + 1, array.dims.end()) != want) {
      std::vector<int64_t> expect = want;
      expect.insert(expect.begin(), -1);
      return InvalidArgument(file + ": the array has shape " + ir::ShapeText(array.dims) +
                             " but feed '" + f.name + "' needs [samples" +
                             ir::ShapeText(expect).substr(3));
    }
    if (array.dims[0] == 0) return InvalidArgument(file + ": the array has no samples");
    if (samples >= 0 && array.dims[0] != samples) {
      return InvalidArgument(file + ": " + std::to_string(array.dims[0]) + " samples, but " +
                             first_file + " has " + std::to_string(samples));
    }
    samples = array.dims[0];
    if (first_file.empty()) first_file = file;
    exec::HostTensor t;
    t.dtype = array.dtype;
    t.dims = array.dims;
    t.bytes = std::move(array.bytes);
    tables.push_back(std::move(t));
  }
  return MakeTableSource(feeds, std::move(tables));
}

}  // namespace fleet::data
