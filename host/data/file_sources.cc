// The csv and npy sources: read every sample into memory once, then serve batches.
#include <algorithm>

#include "data/dataset.h"
#include "data/line_format.h"
#include "data/npy.h"
#include "data/source.h"
#include "data/table_source.h"

namespace fleet::data {

// A one-file, in-memory CSV dataset (data/dataset.h), which reads the same way the file list
// of the training loop does.
StatusOr<std::unique_ptr<DataSource>> MakeCsvSource(const std::vector<FeedSpec>& feeds,
                                                    const CsvOptions& options) {
  // Mapping errors concern the file as a whole: say which.
  if (auto parser = MakeCsvParser(feeds, options.header, options.columns); !parser.ok()) {
    return parser.status().WithContext(options.path.string());
  }
  DatasetOptions d;
  d.format = "csv";
  d.files = {options.path};
  d.csv_header = options.header;
  d.csv_columns = options.columns;
  return MakeDataset(feeds, d);
}

StatusOr<std::unique_ptr<DataSource>> MakeNpySource(
    const std::vector<FeedSpec>& feeds, const std::map<std::string, std::filesystem::path>& files) {
  FLEET_RETURN_IF_ERROR(RefuseSequenceFeeds(feeds, "npy data"));
  for (const auto& entry : files) {
    const std::string& name = entry.first;  // a lambda may not capture a binding (clang 14)
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
  std::string place;  // "x.npy, y.npy": a batch's records are rows of every file
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
    place += (place.empty() ? "" : ", ") + file;
    exec::HostTensor t;
    t.dtype = array.dtype;
    t.dims = array.dims;
    t.bytes = std::move(array.bytes);
    tables.push_back(std::move(t));
  }
  return MakeTableSource(feeds, std::move(tables), std::move(place));
}

}  // namespace fleet::data
