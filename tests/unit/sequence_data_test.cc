// Sequence (LoD level 1) feeds from MultiSlot files: each line's slot is one sample's sequence,
// batches carry offsets (exec::HostTensor::lod). The expected offsets and rows are computed here
// from the lengths the test wrote, never from the reader: memory and queue datasets, shuffled,
// padded, dropped and skipped epochs, prefetching, batch origins, the trainer and device splits
// of a batch, and malformed lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "collective/parallel_runner.h"
#include "data/dataset.h"
#include "data/line_format.h"
#include "data/prefetch.h"
#include "data/source.h"
#include "temp_dir.h"

namespace fleet::data {
namespace {

namespace fs = std::filesystem;

using fleet::test_util::TempDir;

// ids: a sequence of single int64 ids; emb: a sequence of float rows of 2; x, y: dense. The
// files also carry a slot "d" that no feed takes.
const std::vector<FeedSpec> kFeeds = {{"ids", ir::DataType::kInt64, {-1, 1}, 1},
                                      {"x", ir::DataType::kFloat32, {-1, 1}},
                                      {"emb", ir::DataType::kFloat32, {-1, 2}, 1},
                                      {"y", ir::DataType::kInt64, {-1, 1}}};
const std::vector<std::string> kSlots = {"emb", "x", "d", "ids", "y"};

// Sample i's sequence lengths: 0 comes up for both (empty sequences), never both at once in a
// row, and no pattern shared between the two feeds.
int64_t IdsLength(int64_t i) { return (i * 7) % 5; }
int64_t EmbLength(int64_t i) { return (i * 3 + 1) % 4; }
// Sample i's k-th id and the values of its k-th emb row.
int64_t IdOf(int64_t i, int64_t k) { return i * 100 + k; }
float EmbOf(int64_t i, int64_t k, int64_t c) { return static_cast<float>(i * 10 + k) + 0.5f * c; }

std::string Line(int64_t i) {
  std::string line = std::to_string(2 * EmbLength(i));
  for (int64_t k = 0; k < EmbLength(i); ++k) {
    for (int64_t c = 0; c < 2; ++c) line += " " + std::to_string(EmbOf(i, k, c));
  }
  line += " 1 " + std::to_string(i) + ".25 " + std::to_string(i % 2);
  for (int64_t k = 0; k < i % 2; ++k) line += " 9";
  line += " " + std::to_string(IdsLength(i));
  for (int64_t k = 0; k < IdsLength(i); ++k) line += " " + std::to_string(IdOf(i, k));
  return line + " 1 " + std::to_string(i) + "\n";
}

std::string Lines(int64_t first, int64_t last) {
  std::string text;
  for (int64_t i = first; i < last; ++i) text += Line(i);
  return text;
}

DatasetOptions Options(std::vector<fs::path> files, bool in_memory) {
  DatasetOptions o;
  o.format = "multislot";
  o.files = std::move(files);
  o.slots = kSlots;
  o.in_memory = in_memory;
  return o;
}

std::unique_ptr<DataSource> Make(const DatasetOptions& o) {
  auto s = MakeDataset(kFeeds, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

std::vector<int64_t> Ints(const exec::HostTensor& t) {
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}
std::vector<float> Floats(const exec::HostTensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

// Checks every feed of a batch against the samples its y names: dense rows, and for the
// sequences the offsets (prefix sums of the written lengths) and rows.
void ExpectBatchOf(const exec::FeedMap& feeds, const std::vector<int64_t>& samples) {
  std::vector<int64_t> ids_lod = {0}, emb_lod = {0}, ids;
  std::vector<float> emb, x;
  for (int64_t i : samples) {
    ids_lod.push_back(ids_lod.back() + IdsLength(i));
    emb_lod.push_back(emb_lod.back() + EmbLength(i));
    for (int64_t k = 0; k < IdsLength(i); ++k) ids.push_back(IdOf(i, k));
    for (int64_t k = 0; k < EmbLength(i); ++k) {
      for (int64_t c = 0; c < 2; ++c) emb.push_back(EmbOf(i, k, c));
    }
    x.push_back(static_cast<float>(i) + 0.25f);
  }
  const auto n = static_cast<int64_t>(samples.size());
  const exec::HostTensor& t_ids = feeds.at("ids");
  const exec::HostTensor& t_emb = feeds.at("emb");
  EXPECT_EQ(Ints(feeds.at("y")), samples);
  EXPECT_EQ(feeds.at("y").dims, (std::vector<int64_t>{n, 1}));
  EXPECT_TRUE(feeds.at("y").lod.empty());
  EXPECT_EQ(Floats(feeds.at("x")), x);
  EXPECT_EQ(t_ids.lod, ids_lod);
  EXPECT_EQ(t_ids.dims, (std::vector<int64_t>{ids_lod.back(), 1}));
  EXPECT_EQ(t_ids.dtype, ir::DataType::kInt64);
  EXPECT_EQ(Ints(t_ids), ids);
  EXPECT_EQ(t_emb.lod, emb_lod);
  EXPECT_EQ(t_emb.dims, (std::vector<int64_t>{emb_lod.back(), 2}));
  EXPECT_EQ(Floats(t_emb), emb);
}

// The next batch, checked; returns its samples.
std::vector<int64_t> NextChecked(DataSource& s, int64_t batch, exec::FeedMap& feeds) {
  Status st = s.Next(batch, feeds);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return {};
  std::vector<int64_t> samples = Ints(feeds.at("y"));
  ExpectBatchOf(feeds, samples);
  return samples;
}

TEST(SequenceDataTest, LinesBecomeSequencesWithOffsets) {
  TempDir dir;
  // 11 samples over two files; 0, 5 and 10 have no ids, 1, 5 and 9 no emb rows.
  fs::path a = dir.Write("a.txt", Lines(0, 6));
  fs::path b = dir.Write("b.txt", Lines(6, 11));
  for (bool memory : {true, false}) {
    SCOPED_TRACE(memory ? "memory" : "queue");
    auto s = Make(Options({a, b}, memory));
    ASSERT_NE(s, nullptr);
    exec::FeedMap feeds;
    // Batches of 4 run across epochs: 0-3, 4-7, 8-10 + 0, ...
    std::vector<int64_t> seen;
    for (int k = 0; k < 6; ++k) {
      std::vector<int64_t> got = NextChecked(*s, 4, feeds);
      seen.insert(seen.end(), got.begin(), got.end());
    }
    std::vector<int64_t> want;
    for (int k = 0; k < 24; ++k) want.push_back(k % 11);
    EXPECT_EQ(seen, want);
  }
}

TEST(SequenceDataTest, BatchOfOneAndAllEmpty) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Lines(0, 3));
  for (bool memory : {true, false}) {
    auto s = Make(Options({a}, memory));
    ASSERT_NE(s, nullptr);
    exec::FeedMap feeds;
    // Sample 0 has no ids: an empty sequence, a tensor of 0 rows.
    EXPECT_EQ(NextChecked(*s, 1, feeds), (std::vector<int64_t>{0}));
    EXPECT_EQ(feeds["ids"].lod, (std::vector<int64_t>{0, 0}));
    EXPECT_EQ(feeds["ids"].dims, (std::vector<int64_t>{0, 1}));
    EXPECT_TRUE(feeds["ids"].bytes.empty());
    EXPECT_EQ(NextChecked(*s, 1, feeds), (std::vector<int64_t>{1}));
    EXPECT_EQ(feeds["emb"].lod, (std::vector<int64_t>{0, 0}));
    EXPECT_EQ(NextChecked(*s, 1, feeds), (std::vector<int64_t>{2}));
  }
}

TEST(SequenceDataTest, ShuffledEpochsKeepEachSampleWithItsSequences) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Lines(0, 13));
  DatasetOptions o = Options({a}, true);
  o.shuffle = true;
  o.seed = 7;
  auto s = Make(o);
  ASSERT_NE(s, nullptr);
  exec::FeedMap feeds;
  std::vector<int64_t> epoch1, epoch2;
  for (int k = 0; k < 13; ++k) {
    std::vector<int64_t> got = NextChecked(*s, 1, feeds);
    epoch1.insert(epoch1.end(), got.begin(), got.end());
  }
  // A second epoch in batches of 13: one batch, whose offsets span all samples.
  epoch2 = NextChecked(*s, 13, feeds);
  std::vector<int64_t> sorted1 = epoch1, sorted2 = epoch2, all(13);
  std::iota(all.begin(), all.end(), 0);
  std::sort(sorted1.begin(), sorted1.end());
  std::sort(sorted2.begin(), sorted2.end());
  EXPECT_EQ(sorted1, all);
  EXPECT_EQ(sorted2, all);
  EXPECT_NE(epoch1, all);
  EXPECT_NE(epoch1, epoch2);
}

TEST(SequenceDataTest, QueueAndMemoryAgreeThroughPrefetch) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Lines(0, 7));
  auto memory = Make(Options({a}, true));
  auto queue = Make(Options({a}, false));
  ASSERT_NE(memory, nullptr);
  ASSERT_NE(queue, nullptr);
  PrefetchOptions p;
  p.depth = 2;
  auto prefetched = MakePrefetchSource(std::move(queue), p);
  exec::FeedMap m, q;
  for (int k = 0; k < 9; ++k) {
    std::vector<int64_t> want = NextChecked(*memory, 3, m);
    EXPECT_EQ(NextChecked(*prefetched, 3, q), want);
    EXPECT_EQ(q["ids"].lod, m["ids"].lod);
    EXPECT_EQ(q["emb"].lod, m["emb"].lod);
  }
}

TEST(SequenceDataTest, LastBatchPoliciesAndSkip) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Lines(0, 5));
  for (bool memory : {true, false}) {
    SCOPED_TRACE(memory ? "memory" : "queue");
    DatasetOptions o = Options({a}, memory);
    o.last_batch = LastBatch::kPad;
    auto pad = Make(o);
    ASSERT_NE(pad, nullptr);
    exec::FeedMap feeds;
    EXPECT_EQ(NextChecked(*pad, 3, feeds), (std::vector<int64_t>{0, 1, 2}));
    // The epoch's last two samples, completed with its first: sequences copied whole.
    EXPECT_EQ(NextChecked(*pad, 3, feeds), (std::vector<int64_t>{3, 4, 0}));
    EXPECT_EQ(NextChecked(*pad, 3, feeds), (std::vector<int64_t>{0, 1, 2}));

    o.last_batch = LastBatch::kDrop;
    auto drop = Make(o);
    ASSERT_NE(drop, nullptr);
    EXPECT_EQ(NextChecked(*drop, 3, feeds), (std::vector<int64_t>{0, 1, 2}));
    // 3 and 4 are dropped: nothing of them may stay in the offsets.
    EXPECT_EQ(NextChecked(*drop, 3, feeds), (std::vector<int64_t>{0, 1, 2}));

    o.last_batch = LastBatch::kPad;
    auto skipped = Make(o);
    ASSERT_NE(skipped, nullptr);
    ASSERT_TRUE(skipped->Skip(4, 3).ok());  // past 0-2, 3 4 0, 0-2 and 3 4 0
    EXPECT_EQ(NextChecked(*skipped, 3, feeds), (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(NextChecked(*skipped, 3, feeds), (std::vector<int64_t>{3, 4, 0}));
  }
}

TEST(SequenceDataTest, BatchOriginNamesTheLinesOfEachSample) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Lines(0, 6));
  DatasetOptions o = Options({a}, true);
  o.shuffle = true;
  auto s = Make(o);
  ASSERT_NE(s, nullptr);
  exec::FeedMap feeds;
  for (int k = 0; k < 6; ++k) {
    std::vector<int64_t> got = NextChecked(*s, 1, feeds);
    ASSERT_EQ(got.size(), 1u);
    // Sample i is line i + 1, whatever its sequences' lengths.
    EXPECT_EQ(s->origin().Describe(),
              "batch " + std::to_string(k + 1) + ": " + a.string() + " line " +
                  std::to_string(got[0] + 1));
  }
}

// The trainers' shares of a global batch: sample ranges, sequences whole.
TEST(SequenceDataTest, TrainerShareTakesWholeSequences) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Lines(0, 12));
  auto s = Make(Options({a}, true));
  ASSERT_NE(s, nullptr);
  exec::FeedMap global;
  std::vector<int64_t> samples = NextChecked(*s, 12, global);
  for (int64_t rank = 0; rank < 3; ++rank) {
    exec::FeedMap share;
    for (const auto& [name, t] : global) SliceSamples(t, rank * 4, 4, share[name]);
    ExpectBatchOf(share, std::vector<int64_t>(samples.begin() + rank * 4,
                                              samples.begin() + (rank + 1) * 4));
  }
  // A share of one empty sequence.
  exec::HostTensor one;
  SliceSamples(global["ids"], 0, 1, one);
  EXPECT_EQ(one.lod, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(one.dims, (std::vector<int64_t>{0, 1}));
  // A dense slice has no offsets, even in a tensor that had some.
  SliceSamples(global["y"], 2, 3, one);
  EXPECT_TRUE(one.lod.empty());
  EXPECT_EQ(Ints(one), (std::vector<int64_t>{2, 3, 4}));
}

// The devices' shares: chunks of ceil(samples / devices) sequences, as Paddle's SplitLoDTensor.
TEST(SequenceDataTest, DeviceSplitKeepsSequencesWhole) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Lines(0, 7));
  auto s = Make(Options({a}, true));
  ASSERT_NE(s, nullptr);
  exec::FeedMap batch;
  std::vector<int64_t> samples = NextChecked(*s, 7, batch);
  std::vector<exec::FeedMap> parts;
  ASSERT_TRUE(exec::ParallelRunner::SplitBatch(batch, 3, parts).ok());
  ASSERT_EQ(parts.size(), 3u);
  const std::vector<std::pair<int64_t, int64_t>> chunks = {{0, 3}, {3, 6}, {6, 7}};
  for (size_t d = 0; d < 3; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    ExpectBatchOf(parts[d], std::vector<int64_t>(samples.begin() + chunks[d].first,
                                                 samples.begin() + chunks[d].second));
  }
  // Fewer sequences than devices is refused, as for rows.
  exec::FeedMap two;
  ASSERT_TRUE(s->Next(2, two).ok());
  Status st = exec::ParallelRunner::SplitBatch(two, 3, parts);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sequence"), std::string::npos) << st.message();
}

TEST(SequenceDataTest, MalformedSequenceLinesNameFileAndLine) {
  TempDir dir;
  const std::string good = Lines(0, 2);
  auto error = [&](const std::string& bad, bool memory) {
    fs::path f = dir.Write("bad.txt", good + bad);
    auto s = MakeDataset(kFeeds, Options({f}, memory));
    if (!s.ok()) return s.status().message();
    exec::FeedMap m;
    Status st = (*s)->Next(3, m);
    return st.ok() ? std::string("<no error>") : st.message();
  };
  const std::string f = (dir.path() / "bad.txt").string();
  for (bool memory : {true, false}) {
    SCOPED_TRACE(memory ? "memory" : "queue");
    // emb's rows are pairs: 3 values are not whole rows.
    EXPECT_EQ(error("3 1 2 3 1 0.5 0 0 1 5\n", memory),
              f + ":3:1: slot 'emb' has 3 values, not a whole number of rows of sequence feed "
                  "'emb' (2 values each)");
    // Fewer slots than declared, and more.
    EXPECT_EQ(error("0 1 0.5 0 2 7 8\n", memory),
              f + ":3: the line ends before slot 'y' (slot 5 of 5)");
    EXPECT_EQ(error("0 1 0.5 0 0 1 5 2 7\n", memory),
              f + ":3:17: expected 5 slots, but the line goes on with '2'");
    // A count far beyond what the line holds is refused before anything is sized for it.
    EXPECT_EQ(error("0 1 0.5 0 999999999 1 2\n", memory),
              f + ":3:11: slot 'ids' claims 999999999 values but the rest of the line has room "
                  "for at most 2");
    EXPECT_EQ(error("0 1 0.5 0 3 11 22\n", memory),
              f + ":3: the line ends inside slot 'ids': 2 of its 3 values");
    EXPECT_EQ(error("0 1 0.5 0 2 1 x 1 5\n", memory),
              f + ":3:15: slot 'ids': expected an integer, got 'x'");
  }
}

TEST(SequenceDataTest, SkippedBadSequenceLinesLeaveTheOthersIntact) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Line(0) + "3 1 2 3 1 0.5 0 0 1 5\n" + Line(1) + Line(2));
  for (bool memory : {true, false}) {
    DatasetOptions o = Options({a}, memory);
    o.skip_bad_lines = true;
    auto s = Make(o);
    ASSERT_NE(s, nullptr);
    exec::FeedMap feeds;
    EXPECT_EQ(NextChecked(*s, 3, feeds), (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(s->skipped_lines(), 1);
  }
}

TEST(SequenceDataTest, OtherSourcesRefuseSequenceFeeds) {
  TempDir dir;
  fs::path csv = dir.Write("a.csv", "1,2\n");
  const std::vector<FeedSpec> feeds = {{"ids", ir::DataType::kInt64, {-1, 1}, 1},
                                       {"y", ir::DataType::kFloat32, {-1, 1}}};
  CsvOptions c;
  c.path = csv;
  auto from_csv = MakeCsvSource(feeds, c);
  ASSERT_FALSE(from_csv.ok());
  EXPECT_NE(from_csv.status().message().find("feed 'ids' is a sequence (lod_level 1)"),
            std::string::npos)
      << from_csv.status().message();
  EXPECT_NE(from_csv.status().message().find("multislot"), std::string::npos);
  auto from_npy = MakeNpySource(feeds, {{"ids", dir.path() / "ids.npy"},
                                        {"y", dir.path() / "y.npy"}});
  ASSERT_FALSE(from_npy.ok());
  EXPECT_NE(from_npy.status().message().find("feed 'ids' is a sequence"), std::string::npos)
      << from_npy.status().message();
  auto synthetic = MakeSyntheticSource(feeds, {});
  ASSERT_FALSE(synthetic.ok());
  EXPECT_NE(synthetic.status().message().find("feed 'ids' is a sequence"), std::string::npos)
      << synthetic.status().message();
  // Deeper levels are not read by any source.
  std::vector<FeedSpec> deep = {{"ids", ir::DataType::kInt64, {-1, 1}, 2}};
  EXPECT_FALSE(MakeMultiSlotParser(deep, {"ids"}).ok());
}

}  // namespace
}  // namespace fleet::data
