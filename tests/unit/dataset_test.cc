// Text datasets (data/dataset.h): the MultiSlot reader, file lists and shards, memory and queue
// datasets, shuffling, end-of-epoch policies, malformed lines, prefetching and Skip.
#include "data/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <thread>
#include <chrono>

#include "data/file_list.h"
#include "data/npy.h"
#include "data/prefetch.h"

#include "temp_dir.h"

namespace fleet::data {
namespace {

namespace fs = std::filesystem;

using fleet::test_util::TempDir;

// x: 2 floats, y: one int64; the files also carry a slot "d" that no feed takes.
const std::vector<FeedSpec> kFeeds = {{"x", ir::DataType::kFloat32, {-1, 2}},
                                      {"y", ir::DataType::kInt64, {-1, 1}}};
const std::vector<std::string> kSlots = {"x", "d", "y"};

// Sample i: x = [i, i + 0.5], d = i % 3 values, y = i.
std::string Line(int i) {
  std::string line = "2 " + std::to_string(i) + " " + std::to_string(i) + ".5 " +
                     std::to_string(i % 3);
  for (int k = 0; k < i % 3; ++k) line += " 9";
  return line + " 1 " + std::to_string(i) + "\n";
}

// Samples [first, last) as one file's text.
std::string Lines(int first, int last) {
  std::string text;
  for (int i = first; i < last; ++i) text += Line(i);
  return text;
}

DatasetOptions Options(std::vector<fs::path> files, bool in_memory = true) {
  DatasetOptions o;
  o.format = "multislot";
  o.files = std::move(files);
  o.slots = kSlots;
  o.in_memory = in_memory;
  return o;
}

std::unique_ptr<DataSource> Make(const DatasetOptions& o,
                                 const std::vector<FeedSpec>& feeds = kFeeds) {
  auto s = MakeDataset(feeds, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

std::string ErrorOf(const StatusOr<std::unique_ptr<DataSource>>& s) {
  return s.ok() ? "<no error>" : s.status().message();
}

// The y values (sample ids) of the next batch.
std::vector<int64_t> Ids(DataSource& s, int64_t batch) {
  exec::FeedMap f;
  Status st = s.Next(batch, f);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return {};
  const int64_t* y = f["y"].data<int64_t>();
  return std::vector<int64_t>(y, y + batch);
}

// The ids of `batches` batches, concatenated.
std::vector<int64_t> Stream(DataSource& s, int batches, int64_t batch) {
  std::vector<int64_t> all;
  for (int b = 0; b < batches; ++b) {
    std::vector<int64_t> ids = Ids(s, batch);
    all.insert(all.end(), ids.begin(), ids.end());
  }
  return all;
}

TEST(DatasetTest, MultiSlotFillsFeedsAndDropsOtherSlots) {
  TempDir dir;
  fs::path f = dir.Write("a.txt", Lines(0, 4) + "\n  \n");  // blank lines are not samples
  for (bool memory : {true, false}) {
    auto s = Make(Options({f}, memory));
    ASSERT_NE(s, nullptr);
    exec::FeedMap feeds;
    ASSERT_TRUE(s->Next(4, feeds).ok());
    EXPECT_EQ(feeds["x"].dims, (std::vector<int64_t>{4, 2}));
    EXPECT_EQ(feeds["y"].dims, (std::vector<int64_t>{4, 1}));
    const float* x = feeds["x"].data<float>();
    EXPECT_EQ(std::vector<float>(x, x + 8), (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f}));
    const int64_t* y = feeds["y"].data<int64_t>();
    EXPECT_EQ(std::vector<int64_t>(y, y + 4), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(feeds.size(), 2u);  // no tensor for the dropped slot
    EXPECT_EQ(s->num_samples(), memory ? 4 : 0);  // a queue knows only after a pass
    EXPECT_EQ(Ids(*s, 2), (std::vector<int64_t>{0, 1}));  // wraps
  }
}

TEST(DatasetTest, MultiSlotIntoDoubleAndInt32Feeds) {
  TempDir dir;
  fs::path f = dir.Write("a.txt", "3 1e-3 -2 +4.25 2 -7 8\n");
  std::vector<FeedSpec> feeds = {{"a", ir::DataType::kFloat64, {-1, 3}},
                                 {"b", ir::DataType::kInt32, {-1, 2}}};
  DatasetOptions o = Options({f});
  o.slots = {"a", "b"};
  auto s = Make(o, feeds);
  ASSERT_NE(s, nullptr);
  exec::FeedMap m;
  ASSERT_TRUE(s->Next(1, m).ok());
  EXPECT_EQ(m["a"].data<double>()[0], 1e-3);
  EXPECT_EQ(m["a"].data<double>()[2], 4.25);
  EXPECT_EQ(m["b"].data<int32_t>()[0], -7);
  EXPECT_EQ(m["b"].data<int32_t>()[1], 8);
}

TEST(DatasetTest, SlotsMustCoverTheFeeds) {
  TempDir dir;
  fs::path f = dir.Write("a.txt", Lines(0, 2));
  DatasetOptions o = Options({f});
  o.slots = {"x", "d"};
  EXPECT_EQ(ErrorOf(MakeDataset(kFeeds, o)),
            "feed 'y' is not one of the slots in data.slots (2 slots: x, d)");
  o.slots = {};
  EXPECT_NE(ErrorOf(MakeDataset(kFeeds, o)).find("needs the file's slots"), std::string::npos);
  o.slots = {"x", "y", "x"};
  EXPECT_EQ(ErrorOf(MakeDataset(kFeeds, o)), "data.slots names slot 'x' twice");
}

TEST(DatasetTest, MalformedLinesNameFileLineAndWhat) {
  TempDir dir;
  const std::string good = Lines(0, 2);
  auto error = [&](const std::string& bad, bool memory) {
    fs::path f = dir.Write("bad.txt", good + bad);
    auto s = MakeDataset(kFeeds, Options({f}, memory));
    if (!s.ok()) return s.status().message();
    // A queue finds the line when it reads it.
    exec::FeedMap m;
    Status st = (*s)->Next(3, m);
    return st.ok() ? std::string("<no error>") : st.message();
  };
  const std::string f = (dir.path() / "bad.txt").string();
  for (bool memory : {true, false}) {
    EXPECT_EQ(error("3 1 2 3 0 1 5\n", memory),
              f + ":3:1: slot 'x' has 3 values but feed 'x' takes 2 per sample");
    EXPECT_EQ(error("2 1 zz 0 1 5\n", memory), f + ":3:5: slot 'x': expected a number, got 'zz'");
    EXPECT_EQ(error("2 1 2 0 1 5.5\n", memory),
              f + ":3:11: slot 'y': expected an integer for an int64 feed, got '5.5'");
    EXPECT_EQ(error("2 1 2 0 1\n", memory),
              f + ":3: the line ends inside slot 'y': 0 of its 1 values");
    EXPECT_EQ(error("2 1 2 0\n", memory),
              f + ":3: the line ends before slot 'y' (slot 3 of 3)");
    EXPECT_EQ(error("2 1 2 x 1 5\n", memory),
              f + ":3:7: slot 'd': expected a value count, got 'x'");
    EXPECT_EQ(error("2 1 2 1 q 1 5\n", memory), f + ":3:9: slot 'd': expected a number, got 'q'");
    EXPECT_EQ(error("2 1 2 0 1 5 6\n", memory),
              f + ":3:13: expected 3 slots, but the line goes on with '6'");
  }
}

TEST(DatasetTest, SkippedLinesAreCountedOnce) {
  TempDir dir;
  fs::path a = dir.Write("a.txt", Line(0) + "2 1 zz 0 1 5\n" + Line(1));
  fs::path b = dir.Write("b.txt", "2 1 2 0 1\n" + Line(2) + "oops\n");
  for (bool memory : {true, false}) {
    DatasetOptions o = Options({a, b}, memory);
    o.skip_bad_lines = true;
    auto s = Make(o);
    ASSERT_NE(s, nullptr);
    // Three epochs: the good samples only, and each bad line counted once.
    EXPECT_EQ(Stream(*s, 3, 3), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
    EXPECT_EQ(s->skipped_lines(), 3);
  }
}

TEST(DatasetTest, EmptyFilesAreAClearError) {
  TempDir dir;
  fs::path e1 = dir.Write("e1.txt", ""), e2 = dir.Write("e2.txt", "\n\n");
  fs::path bad = dir.Write("bad.txt", "nonsense\n");
  EXPECT_EQ(ErrorOf(MakeDataset(kFeeds, Options({e1}))),
            "no samples in " + e1.string() + ": the file is empty");
  EXPECT_EQ(ErrorOf(MakeDataset(kFeeds, Options({e1, e2}))),
            "no samples in 2 files (" + e1.string() + ", " + e2.string() +
                "): every file is empty");
  DatasetOptions skip = Options({bad, e1});
  skip.skip_bad_lines = true;
  EXPECT_NE(ErrorOf(MakeDataset(kFeeds, skip)).find("all 1 data lines are malformed"),
            std::string::npos);
  // A queue finds out at the end of its first pass.
  auto q = Make(Options({e1, e2}, false));
  exec::FeedMap m;
  Status st = q->Next(1, m);
  EXPECT_EQ(st.message(), "no samples in 2 files (" + e1.string() + ", " + e2.string() +
                              "): every file is empty");
  // Empty files among others are fine.
  fs::path g = dir.Write("g.txt", Lines(0, 2));
  auto s = Make(Options({e1, g, e2}, false));
  EXPECT_EQ(Stream(*s, 2, 3), (std::vector<int64_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_NE(ErrorOf(MakeDataset(kFeeds, Options({dir.path() / "none.txt"}))).find(
                "cannot open the file"),
            std::string::npos);
}

TEST(DataFileListTest, GlobsAreExpandedAndSorted) {
  TempDir dir;
  for (const char* n : {"p-2.txt", "p-10.txt", "p-1.txt", "other.csv"}) dir.Write(n, "");
  auto files = ExpandFileList({(dir.path() / "p-*.txt").string(), (dir.path() / "other.csv").string(),
                               (dir.path() / "p-1.txt").string()});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(*files, (std::vector<fs::path>{dir.path() / "other.csv", dir.path() / "p-1.txt",
                                           dir.path() / "p-10.txt", dir.path() / "p-2.txt"}));
  auto none = ExpandFileList({(dir.path() / "q-*").string()});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "data.filelist: '" + (dir.path() / "q-*").string() + "' matches no file");
  auto missing = ExpandFileList({(dir.path() / "q.txt").string()});
  EXPECT_EQ(missing.status().message(),
            "data.filelist: '" + (dir.path() / "q.txt").string() + "': no such file");
  auto directory = ExpandFileList({dir.path().string()});
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos);
}

TEST(DataFileListTest, ShardsAreContiguousBlocksLikeGetFileShard) {
  std::vector<fs::path> files;
  for (int i = 0; i < 5; ++i) files.push_back("f" + std::to_string(i));
  auto shard = [&](int64_t rank, int64_t n) {
    auto s = ShardFiles(files, rank, n);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : std::vector<fs::path>{};
  };
  using V = std::vector<fs::path>;
  EXPECT_EQ(shard(0, 2), (V{"f0", "f1", "f2"}));
  EXPECT_EQ(shard(1, 2), (V{"f3", "f4"}));
  EXPECT_EQ(shard(0, 3), (V{"f0", "f1"}));
  EXPECT_EQ(shard(1, 3), (V{"f2", "f3"}));
  EXPECT_EQ(shard(2, 3), (V{"f4"}));
  for (int64_t n = 1; n <= 5; ++n) {  // every file once: union = all, no overlap
    std::vector<fs::path> all;
    for (int64_t r = 0; r < n; ++r) {
      V part = shard(r, n);
      all.insert(all.end(), part.begin(), part.end());
    }
    EXPECT_EQ(all, files) << n << " trainers";
  }
  auto none = ShardFiles(files, 5, 6);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(
                "trainer 5 of 6 has no file to read: the file list has 5 files for 6 trainers"),
            std::string::npos)
      << none.status().message();
}

TEST(DatasetTest, QueueAndMemoryYieldTheSameSamples) {
  TempDir dir;
  std::vector<fs::path> files = {dir.Write("a.txt", Lines(0, 7)), dir.Write("b.txt", ""),
                                 dir.Write("c.txt", Lines(7, 10))};
  for (LastBatch last : {LastBatch::kWrap, LastBatch::kDrop, LastBatch::kPad}) {
    DatasetOptions m = Options(files, true), q = Options(files, false);
    m.last_batch = q.last_batch = last;
    auto a = Make(m), b = Make(q);
    EXPECT_EQ(Stream(*a, 9, 4), Stream(*b, 9, 4));
  }
}

TEST(DatasetTest, ShuffleIsAReproduciblePermutationPerEpoch) {
  TempDir dir;
  fs::path f = dir.Write("a.txt", Lines(0, 50));
  auto epochs = [&](uint64_t seed) {
    DatasetOptions o = Options({f});
    o.shuffle = true;
    o.seed = seed;
    auto s = Make(o);
    return std::make_pair(Ids(*s, 50), Ids(*s, 50));
  };
  auto [e0, e1] = epochs(7);
  std::vector<int64_t> sorted = e0, identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, identity);  // a permutation
  EXPECT_NE(e0, identity);      // and a shuffled one
  sorted = e1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(e0, e1);  // another epoch, another order
  EXPECT_EQ(epochs(7), std::make_pair(e0, e1));  // the same seed, the same orders
  EXPECT_NE(epochs(8).first, e0);
  DatasetOptions q = Options({f}, false);
  q.shuffle = true;
  EXPECT_NE(ErrorOf(MakeDataset(kFeeds, q)).find("cannot shuffle"), std::string::npos);
}

TEST(DatasetTest, LastBatchPolicies) {
  TempDir dir;
  // 5 samples, batches of 2.
  std::vector<fs::path> files = {dir.Write("a.txt", Lines(0, 3)), dir.Write("b.txt", Lines(3, 5))};
  using V = std::vector<int64_t>;
  for (bool memory : {true, false}) {
    auto run = [&](LastBatch last) {
      DatasetOptions o = Options(files, memory);
      o.last_batch = last;
      return Stream(*Make(o), 5, 2);
    };
    EXPECT_EQ(run(LastBatch::kWrap), (V{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
    EXPECT_EQ(run(LastBatch::kDrop), (V{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}));
    EXPECT_EQ(run(LastBatch::kPad), (V{0, 1, 2, 3, 4, 0, 0, 1, 2, 3}));
    // A batch bigger than the epoch: pad repeats the epoch, drop cannot make one.
    DatasetOptions o = Options(files, memory);
    o.last_batch = LastBatch::kPad;
    auto pad = Make(o);
    EXPECT_EQ(Ids(*pad, 7), (V{0, 1, 2, 3, 4, 0, 1}));
    EXPECT_EQ(Ids(*pad, 7), (V{0, 1, 2, 3, 4, 0, 1}));
    o.last_batch = LastBatch::kDrop;
    auto drop = Make(o);
    exec::FeedMap m;
    EXPECT_NE(drop->Next(6, m).message().find("an epoch has 5 samples, fewer than a batch of 6"),
              std::string::npos);
  }
  // Pad with shuffle repeats the first samples of the same (shuffled) epoch.
  DatasetOptions o = Options(files);
  o.shuffle = true;
  o.last_batch = LastBatch::kPad;
  V ids = Stream(*Make(o), 3, 2);
  EXPECT_EQ(ids[5], ids[0]);
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.begin() + 5).size(), 5u);
}

TEST(DataPrefetchTest, YieldsExactlyTheBatchesOfASynchronousRead) {
  TempDir dir;
  std::vector<fs::path> files = {dir.Write("a.txt", Lines(0, 37)), dir.Write("b.txt", Lines(37, 61))};
  for (bool memory : {true, false}) {
    for (int64_t depth : {1, 2, 4}) {
      DatasetOptions o = Options(files, memory);
      o.shuffle = memory;
      o.last_batch = LastBatch::kPad;
      auto sync = Make(o);
      auto pre = MakePrefetchSource(Make(o), {depth});
      for (int b = 0; b < 40; ++b) {
        exec::FeedMap a, c;
        ASSERT_TRUE(sync->Next(8, a).ok());
        ASSERT_TRUE(pre->Next(8, c).ok());
        ASSERT_EQ(a["x"].bytes, c["x"].bytes) << b;
        ASSERT_EQ(a["y"].bytes, c["y"].bytes) << b;
        ASSERT_EQ(c["x"].dims, (std::vector<int64_t>{8, 2}));
      }
    }
  }
}

TEST(DataPrefetchTest, ReaderErrorsComeBackAtTheirBatch) {
  TempDir dir;
  // Sample 10 is malformed: batches of 4 hold lines 0-3 and 4-7; the third batch fails.
  fs::path f = dir.Write("a.txt", Lines(0, 10) + "2 1 x 0 1 5\n" + Lines(11, 20));
  auto s = MakePrefetchSource(Make(Options({f}, false)), {2});
  EXPECT_EQ(Ids(*s, 4), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Ids(*s, 4), (std::vector<int64_t>{4, 5, 6, 7}));
  exec::FeedMap m;
  Status st = s->Next(4, m);
  EXPECT_EQ(st.message(), f.string() + ":11:5: slot 'x': expected a number, got 'x'");
  EXPECT_EQ(s->Next(4, m).message(), st.message());  // and stays failed
  // A batch size other than the first one's is refused rather than silently served.
  auto t = MakePrefetchSource(Make(Options({dir.Write("b.txt", Lines(0, 5))})), {2});
  EXPECT_TRUE(t->Next(4, m).ok());
  EXPECT_EQ(t->Next(5, m).code(), Code::kInvalidArgument);
}

TEST(DataPrefetchTest, DestructionStopsAFullQueue) {
  TempDir dir;
  fs::path f = dir.Write("a.txt", Lines(0, 10));
  for (int i = 0; i < 20; ++i) {
    auto s = MakePrefetchSource(Make(Options({f}, false)), {3});
    exec::FeedMap m;
    ASSERT_TRUE(s->Next(4, m).ok());
    if (i % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    // Destroyed with the reader blocked on a full queue, or mid-batch: must not hang.
  }
  // Never started: nothing to join.
  auto idle = MakePrefetchSource(Make(Options({f})), {3});
}

TEST(DataPrefetchTest, TimesOutOnASlowReader) {
  // A source that takes longer than the deadline.
  class Slow : public DataSource {
   public:
    Status Next(int64_t, exec::FeedMap&) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return OkStatus();
    }
    int64_t num_samples() const override { return 0; }
  };
  PrefetchOptions o;
  o.depth = 1;
  o.timeout = std::chrono::milliseconds(20);
  auto s = MakePrefetchSource(std::make_unique<Slow>(), o);
  exec::FeedMap m;
  Status st = s->Next(1, m);
  EXPECT_EQ(st.code(), Code::kDeadlineExceeded) << st.ToString();
}

std::unique_ptr<DataSource> Take(StatusOr<std::unique_ptr<DataSource>> s) {
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

bool Same(const exec::FeedMap& a, const exec::FeedMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.dtype != t.dtype || it->second.dims != t.dims ||
        it->second.bytes != t.bytes) {
      return false;
    }
  }
  return true;
}

// Skip(k) then Next must equal k + 1 Nexts, for every kind of source.
void ExpectSkipMatches(const std::function<std::unique_ptr<DataSource>()>& make,
                       const std::string& what) {
  for (int64_t batch : {1, 3, 4, 7}) {
    for (int64_t k : {0, 1, 2, 3, 5, 8, 13}) {
      auto a = make(), b = make();
      exec::FeedMap fa, fb;
      for (int64_t i = 0; i <= k; ++i) ASSERT_TRUE(a->Next(batch, fa).ok()) << what;
      ASSERT_TRUE(b->Skip(k, batch).ok()) << what;
      ASSERT_TRUE(b->Next(batch, fb).ok()) << what;
      // One more batch too: the state after the skip is right, not just the next rows.
      ASSERT_TRUE(Same(fa, fb)) << what << ": batch " << batch << ", k " << k;
      ASSERT_TRUE(a->Next(batch, fa).ok());
      ASSERT_TRUE(b->Next(batch, fb).ok());
      ASSERT_TRUE(Same(fa, fb)) << what << ": batch " << batch << ", k " << k << " (+1)";
    }
  }
}

TEST(DataSkipTest, SkipThenNextEqualsNexts) {
  TempDir dir;
  std::vector<fs::path> files = {dir.Write("a.txt", Lines(0, 6)), dir.Write("b.txt", Lines(6, 11))};
  for (bool memory : {true, false}) {
    for (LastBatch last : {LastBatch::kWrap, LastBatch::kDrop, LastBatch::kPad}) {
      for (bool shuffle : {false, true}) {
        if (shuffle && !memory) continue;
        for (int64_t depth : {0, 2}) {
          DatasetOptions o = Options(files, memory);
          o.last_batch = last;
          o.shuffle = shuffle;
          const std::string what = std::string(memory ? "memory" : "queue") + " last " +
                                   std::to_string(static_cast<int>(last)) +
                                   (shuffle ? " shuffled" : "") + " depth " +
                                   std::to_string(depth);
          ExpectSkipMatches(
              [&]() -> std::unique_ptr<DataSource> {
                auto s = Make(o);
                return depth > 0 ? MakePrefetchSource(std::move(s), {depth}) : std::move(s);
              },
              what);
        }
      }
    }
  }
  ExpectSkipMatches([] { return Take(MakeSyntheticSource(kFeeds, {3, "", 2, 0.01})); },
                    "synthetic");
  ExpectSkipMatches(
      [] { return MakePrefetchSource(Take(MakeSyntheticSource(kFeeds, {3, "", 2, 0.01})), {2}); },
      "prefetched synthetic");
  fs::path csv = dir.Write("d.csv", "1,2,0\n3,4,1\n5,6,2\n7,8,3\n9,10,4\n");
  ExpectSkipMatches([&] { return Take(MakeCsvSource(kFeeds, {csv, false, {}})); }, "csv");
  NpyArray x, y;
  x.dtype = ir::DataType::kFloat32;
  x.dims = {5, 2};
  x.bytes.assign(40, 0);
  for (int i = 0; i < 10; ++i) x.data<float>()[i] = static_cast<float>(i);
  y.dtype = ir::DataType::kInt64;
  y.dims = {5, 1};
  y.bytes.assign(40, 0);
  for (int i = 0; i < 5; ++i) y.data<int64_t>()[i] = i;
  ASSERT_TRUE(WriteNpy(dir.path() / "x.npy", x).ok());
  ASSERT_TRUE(WriteNpy(dir.path() / "y.npy", y).ok());
  ExpectSkipMatches(
      [&] {
        return Take(
            MakeNpySource(kFeeds, {{"x", dir.path() / "x.npy"}, {"y", dir.path() / "y.npy"}}));
      },
      "npy");
}

TEST(DatasetTest, CsvFileListReadsEveryFileWithItsHeader) {
  TempDir dir;
  std::vector<fs::path> files = {dir.Write("a.csv", "a,b,y\n1,2,0\n3,4,1\n"),
                                 dir.Write("b.csv", "a,b,y\n5,6,2\n")};
  DatasetOptions o;
  o.format = "csv";
  o.files = files;
  o.csv_header = true;
  for (bool memory : {true, false}) {
    o.in_memory = memory;
    auto s = Make(o);
    EXPECT_EQ(Stream(*s, 2, 3), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  }
  o.in_memory = true;
  o.files = {dir.Write("c.csv", "a,b,y\n1,2,0\n3,4\n")};
  EXPECT_EQ(ErrorOf(MakeDataset(kFeeds, o)),
            (dir.path() / "c.csv").string() + ":3: expected 3 columns (as in the first row), got 2");
}

}  // namespace
}  // namespace fleet::data
