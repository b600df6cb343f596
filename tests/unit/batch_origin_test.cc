// Where a batch came from (data/batch_origin.h): the wording, and that every source (text
// datasets in memory and streamed, prefetched, shuffled, padded; .npy; synthetic) records the
// rows it really handed out.
#include "data/batch_origin.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/npy.h"
#include "data/prefetch.h"
#include "temp_dir.h"

namespace fleet::data {
namespace {

namespace fs = std::filesystem;

using fleet::test_util::TempDir;

const std::vector<FeedSpec> kFeeds = {{"x", ir::DataType::kFloat32, {-1, 2}},
                                      {"y", ir::DataType::kInt64, {-1, 1}}};

// CSV rows of samples [first, last): x = [i, i], y = i.
std::string Rows(int first, int last) {
  std::string text;
  for (int i = first; i < last; ++i) {
    text += std::to_string(i) + "," + std::to_string(i) + "," + std::to_string(i) + "\n";
  }
  return text;
}

BatchOrigin TwoFiles() {
  BatchOrigin o;
  o.SetPlaces(std::make_shared<const std::vector<std::string>>(
                  std::vector<std::string>{"a.csv", "b.csv"}),
              OriginUnit::kLine);
  return o;
}

TEST(BatchOriginTest, RunsAreGroupedByPlaceAndTheRestCounted) {
  BatchOrigin o = TwoFiles();
  EXPECT_EQ(o.Describe(), "");  // nothing recorded yet
  o.Begin();
  o.Add(0, 9);
  o.Add(0, 10);
  o.Add(1, 1, 2);
  EXPECT_EQ(o.rows(), 4);
  EXPECT_EQ(o.Describe(), "batch 1: a.csv lines 9-10; b.csv lines 1-2");
  // A share of the batch names only its own rows.
  EXPECT_EQ(o.Describe(1, 2), "batch 1: a.csv line 10; b.csv line 1");
  EXPECT_EQ(o.Describe(2), "batch 1: b.csv lines 1-2");

  // A shuffled batch: a run per row, four named and the rest counted.
  o.Begin();
  for (int64_t line : {5, 9, 2, 7, 1, 3}) o.Add(0, line);
  EXPECT_EQ(o.Describe(), "batch 2: a.csv lines 5, 9, 2, 7 and 2 more rows");

  o.SkipBatches(3);
  o.Begin();
  o.Add(1, 4);
  EXPECT_EQ(o.Describe(), "batch 6: b.csv line 4");
  o.ClearRows();
  EXPECT_EQ(o.Describe(), "");

  o.Add(1, 4);
  const Status failed = InvalidArgument("cross_entropy: Label[0] = 2 is outside [0, 2)");
  EXPECT_EQ(o.Annotate(failed).message(),
            "cross_entropy: Label[0] = 2 is outside [0, 2) (batch 6: b.csv line 4)");
  EXPECT_EQ(o.Annotate(failed).code(), Code::kInvalidArgument);
  EXPECT_TRUE(o.Annotate(OkStatus()).ok());
  EXPECT_EQ(BatchOrigin().Annotate(failed).message(), failed.message());
}

std::string OriginOfNext(DataSource& s, int64_t batch) {
  exec::FeedMap f;
  Status st = s.Next(batch, f);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return s.origin().Describe();
}

TEST(BatchOriginTest, TextDatasetsNameTheirLines) {
  TempDir dir;
  // a.csv: a header, samples 0-4 on lines 2-6, a blank line 7, samples 5-6 on lines 8-9; b.csv
  // (also with a header) samples 7-9 on lines 2-4.
  fs::path a = dir.Write("a.csv", "x0,x1,y\n" + Rows(0, 5) + "\n" + Rows(5, 7));
  fs::path b = dir.Write("b.csv", "x0,x1,y\n" + Rows(7, 10));
  for (bool memory : {true, false}) {
    for (int64_t depth : {0, 2}) {
      DatasetOptions o;
      o.format = "csv";
      o.files = {a, b};
      o.csv_header = true;
      o.in_memory = memory;
      auto made = MakeDataset(kFeeds, o);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
      std::unique_ptr<DataSource> s = std::move(*made);
      if (depth > 0) s = MakePrefetchSource(std::move(s), {depth});
      EXPECT_EQ(OriginOfNext(*s, 4), "batch 1: " + a.string() + " lines 2-5");
      EXPECT_EQ(OriginOfNext(*s, 4), "batch 2: " + a.string() + " lines 6, 8-9; " + b.string() +
                                         " line 2");
      // Across the end of the epoch (LastBatch::kWrap).
      EXPECT_EQ(OriginOfNext(*s, 4), "batch 3: " + b.string() + " lines 3-4; " + a.string() +
                                         " lines 2-3");
    }
  }
}

TEST(BatchOriginTest, ShuffledRowsKeepTheirOwnLines) {
  TempDir dir;
  // Sample i is on line i + 1 of a.csv (i < 6), on line i - 5 of b.csv (i >= 6); c.csv is empty.
  fs::path a = dir.Write("a.csv", Rows(0, 6)), b = dir.Write("b.csv", Rows(6, 11));
  fs::path c = dir.Write("c.csv", "");
  DatasetOptions o;
  o.format = "csv";
  o.files = {a, c, b};
  o.shuffle = true;
  auto s = MakeDataset(kFeeds, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (int k = 0; k < 33; ++k) {
    exec::FeedMap f;
    ASSERT_TRUE((*s)->Next(1, f).ok());
    const int64_t id = f["y"].data<int64_t>()[0];
    const std::string where = id < 6 ? a.string() + " line " + std::to_string(id + 1)
                                     : b.string() + " line " + std::to_string(id - 5);
    EXPECT_EQ((*s)->origin().Describe(), "batch " + std::to_string(k + 1) + ": " + where);
  }
}

TEST(BatchOriginTest, PaddedAndDroppedBatchesNameTheRowsTheyHold) {
  TempDir dir;
  fs::path a = dir.Write("a.csv", Rows(0, 3)), b = dir.Write("b.csv", Rows(3, 5));
  for (bool memory : {true, false}) {
    DatasetOptions o;
    o.format = "csv";
    o.files = {a, b};
    o.in_memory = memory;
    o.last_batch = LastBatch::kPad;
    auto pad = MakeDataset(kFeeds, o);
    ASSERT_TRUE(pad.ok());
    OriginOfNext(**pad, 2);
    OriginOfNext(**pad, 2);
    // Sample 4, then the epoch's first sample again.
    EXPECT_EQ(OriginOfNext(**pad, 2),
              "batch 3: " + b.string() + " line 2; " + a.string() + " line 1");
    o.last_batch = LastBatch::kDrop;
    auto drop = MakeDataset(kFeeds, o);
    ASSERT_TRUE(drop.ok());
    OriginOfNext(**drop, 2);
    OriginOfNext(**drop, 2);
    // Sample 4 was dropped with its partial batch.
    EXPECT_EQ(OriginOfNext(**drop, 2), "batch 3: " + a.string() + " lines 1-2");
    // Skipped batches are counted.
    auto skipped = MakeDataset(kFeeds, o);
    ASSERT_TRUE(skipped.ok());
    ASSERT_TRUE((*skipped)->Skip(2, 2).ok());
    EXPECT_EQ(OriginOfNext(**skipped, 2), "batch 3: " + a.string() + " lines 1-2");
  }
}

TEST(BatchOriginTest, NpyAndSyntheticSourcesNameRecordsAndSamples) {
  TempDir dir;
  NpyArray x, y;
  x.dtype = ir::DataType::kFloat32;
  x.dims = {5, 2};
  x.bytes.assign(40, 0);
  y.dtype = ir::DataType::kInt64;
  y.dims = {5, 1};
  y.bytes.assign(40, 0);
  ASSERT_TRUE(WriteNpy(dir.path() / "x.npy", x).ok());
  ASSERT_TRUE(WriteNpy(dir.path() / "y.npy", y).ok());
  auto npy = MakeNpySource(kFeeds, {{"x", dir.path() / "x.npy"}, {"y", dir.path() / "y.npy"}});
  ASSERT_TRUE(npy.ok()) << npy.status().ToString();
  const std::string files = (dir.path() / "x.npy").string() + ", " +
                            (dir.path() / "y.npy").string();
  EXPECT_EQ(OriginOfNext(**npy, 3), "batch 1: " + files + " records 0-2");
  EXPECT_EQ(OriginOfNext(**npy, 3), "batch 2: " + files + " records 3-4, 0");

  auto fresh = MakeNpySource(kFeeds, {{"x", dir.path() / "x.npy"}, {"y", dir.path() / "y.npy"}});
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Skip(3, 3).ok());
  EXPECT_EQ(OriginOfNext(**fresh, 3), "batch 4: " + files + " records 4, 0-1");

  auto synthetic = MakeSyntheticSource(kFeeds, {3, "", 2, 0.01});
  ASSERT_TRUE(synthetic.ok());
  OriginOfNext(**synthetic, 4);
  EXPECT_EQ(OriginOfNext(**synthetic, 4), "batch 2: synthetic data (seed 3) samples 4-7");
}

}  // namespace
}  // namespace fleet::data
