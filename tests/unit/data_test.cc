// Data sources: synthetic determinism and learnability, CSV and npy readers with their errors.
#include "data/source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "data/npy.h"

#include "temp_dir.h"

namespace fleet::data {
namespace {

namespace fs = std::filesystem;

using fleet::test_util::TempDir;

const std::vector<FeedSpec> kClassifier = {{"x", ir::DataType::kFloat32, {-1, 6}},
                                           {"y", ir::DataType::kInt64, {-1, 1}}};

std::string ErrorOf(const StatusOr<std::unique_ptr<DataSource>>& s) {
  return s.ok() ? "<no error>" : s.status().message();
}

TEST(SyntheticTest, SameSeedSameBatchesOtherSeedOtherBatches) {
  auto batches = [](uint64_t seed) {
    auto source = MakeSyntheticSource(kClassifier, {seed, "", 3, 0.01});
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    exec::FeedMap feeds;
    std::vector<uint8_t> all;
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE((*source)->Next(16, feeds).ok());
      for (const char* n : {"x", "y"}) all.insert(all.end(), feeds[n].bytes.begin(), feeds[n].bytes.end());
    }
    EXPECT_EQ(feeds["x"].dims, (std::vector<int64_t>{16, 6}));
    EXPECT_EQ(feeds["y"].dims, (std::vector<int64_t>{16, 1}));
    return all;
  };
  EXPECT_EQ(batches(5), batches(5));
  EXPECT_NE(batches(5), batches(6));
}

TEST(SyntheticTest, ClassLabelsAreAFunctionOfTheInputs) {
  auto source = MakeSyntheticSource(kClassifier, {1, "y", 3, 0.01});
  ASSERT_TRUE(source.ok());
  exec::FeedMap feeds;
  ASSERT_TRUE((*source)->Next(512, feeds).ok());
  std::set<int64_t> seen;
  for (int i = 0; i < 512; ++i) {
    int64_t label = feeds["y"].data<int64_t>()[i];
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 3);
    seen.insert(label);
  }
  EXPECT_GE(seen.size(), 2u);  // not a constant: there is something to learn
  // The teacher is fixed by the seed: a second source with the same seed labels the same.
  auto again = MakeSyntheticSource(kClassifier, {1, "y", 3, 0.01});
  exec::FeedMap feeds2;
  ASSERT_TRUE((*again)->Next(512, feeds2).ok());
  EXPECT_EQ(feeds["y"].bytes, feeds2["y"].bytes);
}

TEST(SyntheticTest, FloatLabelIsLinearInTheInputs) {
  // With no noise, y = x.w + b exactly: fit w, b from 8 samples by least squares on x of width
  // 2 (3 unknowns) and check the fit predicts the other samples.
  std::vector<FeedSpec> feeds = {{"x", ir::DataType::kFloat64, {-1, 2}},
                                 {"y", ir::DataType::kFloat64, {-1, 1}}};
  auto source = MakeSyntheticSource(feeds, {3, "", 0, 0.0});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  exec::FeedMap f;
  ASSERT_TRUE((*source)->Next(4, f).ok());
  const double* x = f["x"].data<double>();
  const double* y = f["y"].data<double>();
  // Solve for w0, w1, b from the first three samples (Cramer's rule).
  double a[3][3] = {{x[0], x[1], 1}, {x[2], x[3], 1}, {x[4], x[5], 1}};
  auto det = [](double m[3][3]) {
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
           m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  };
  double d = det(a), sol[3];
  for (int c = 0; c < 3; ++c) {
    double m[3][3];
    for (int r = 0; r < 3; ++r) {
      for (int k = 0; k < 3; ++k) m[r][k] = k == c ? y[r] : a[r][k];
    }
    sol[c] = det(m) / d;
  }
  EXPECT_NEAR(sol[0] * x[6] + sol[1] * x[7] + sol[2], y[3], 1e-9);
}

TEST(SyntheticTest, Errors) {
  EXPECT_NE(ErrorOf(MakeSyntheticSource(kClassifier, {1, "", 0, 0.01})).find(
                "the int64 label 'y' needs the number of classes"),
            std::string::npos);
  EXPECT_NE(ErrorOf(MakeSyntheticSource(kClassifier, {1, "z", 2, 0.01})).find(
                "the label 'z' is not a feed"),
            std::string::npos);
  std::vector<FeedSpec> ids = {{"ids", ir::DataType::kInt64, {-1, 4}},
                               {"y", ir::DataType::kInt64, {-1, 1}}};
  EXPECT_NE(ErrorOf(MakeSyntheticSource(ids, {1, "", 2, 0.01})).find(
                "input 'ids' is int64; only float inputs"),
            std::string::npos);
}

// The teacher is sized by the classes (data.classes, or the width of the prediction): counted
// without overflow and refused before allocating when it cannot fit, not a bad_alloc.
TEST(SyntheticTest, ATeacherThatCannotFitIsRefused) {
  auto made = MakeSyntheticSource(kClassifier, {1, "", int64_t{1} << 40, 0.01});
  ASSERT_FALSE(made.ok());
  const Status& s = made.status();
  EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("synthetic data: the teacher network for the int64 label 'y' with "
                             "1099511627776 classes"),
            std::string::npos)
      << s.message();
}

const std::vector<FeedSpec> kRegression = {{"x", ir::DataType::kFloat32, {-1, 2}},
                                           {"y", ir::DataType::kInt64, {-1, 1}}};

TEST(CsvTest, ReadsColumnsAndWrapsAround) {
  TempDir dir;
  fs::path file = dir.Write("d.csv", "a,b,label\n1, 2.5,0\n-3,4e1,1\n\n5,6,2\n");
  auto source = MakeCsvSource(kRegression, {file, true, {{"y", {2}}, {"x", {1, 0}}}});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->num_samples(), 3);
  exec::FeedMap f;
  ASSERT_TRUE((*source)->Next(4, f).ok());
  EXPECT_EQ(f["x"].dims, (std::vector<int64_t>{4, 2}));
  const float* x = f["x"].data<float>();
  EXPECT_EQ(std::vector<float>(x, x + 8), (std::vector<float>{2.5f, 1, 40, -3, 6, 5, 2.5f, 1}));
  const int64_t* y = f["y"].data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(y, y + 4), (std::vector<int64_t>{0, 1, 2, 0}));
  ASSERT_TRUE((*source)->Next(2, f).ok());  // continues after the wrap: rows 2, 3
  EXPECT_EQ(f["y"].data<int64_t>()[0], 1);
  EXPECT_EQ(f["y"].data<int64_t>()[1], 2);
}

TEST(CsvTest, DefaultColumnsFollowFeedOrder) {
  TempDir dir;
  fs::path file = dir.Write("d.csv", "1,2,1\n3,4,0\n");
  auto source = MakeCsvSource(kRegression, {file, false, {}});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  exec::FeedMap f;
  ASSERT_TRUE((*source)->Next(2, f).ok());
  EXPECT_EQ(f["x"].data<float>()[3], 4.0f);
  EXPECT_EQ(f["y"].data<int64_t>()[0], 1);
}

TEST(CsvTest, MalformedInputNamesFileLineAndColumn) {
  TempDir dir;
  auto error = [&](const std::string& text, CsvOptions options = {}) {
    options.path = dir.Write("bad.csv", text);
    return ErrorOf(MakeCsvSource(kRegression, options));
  };
  const std::string f = (dir.path() / "bad.csv").string();
  EXPECT_EQ(error("1,2,0\n1,abc,1\n"), f + ":2:3: expected a number, got 'abc'");
  EXPECT_EQ(error("1,2,0\n1,2\n"), f + ":2: expected 3 columns (as in the first row), got 2");
  EXPECT_EQ(error("1,2,0.5\n"),
            f + ":1:5: feed 'y' is int64 but the cell is not an integer ('0.5')");
  // A hostile cell is echoed escaped and cut, however long it is.
  EXPECT_EQ(error("1,\x1b[31mred,0\n"), f + ":1:3: expected a number, got '\\x1b[31mred'");
  const std::string huge = error("1,2," + std::string(1 << 20, '7') + "\n");
  EXPECT_LT(huge.size(), f.size() + 200) << huge.substr(0, 300);
  EXPECT_NE(huge.find("' is out of range"), std::string::npos) << huge.substr(0, 300);
  EXPECT_EQ(error("1,2\n"),
            f + ":1: feed 'y' needs column 2 but the row has 2 columns (0 to 1)");
  EXPECT_EQ(error("\n"), "no samples in " + f + ": the file is empty");
  EXPECT_EQ(error("1,2,3\n", {{}, false, {{"x", {0}}}}),
            f + ": feed 'x' has 2 values per sample but 1 columns are mapped to it");
  EXPECT_EQ(error("1,2,3\n", {{}, false, {{"q", {0}}}}),
            f + ": columns are given for 'q', which is not a feed of the program");
  EXPECT_NE(ErrorOf(MakeCsvSource(kRegression, {dir.path() / "none.csv", false, {}}))
                .find("cannot open the file"),
            std::string::npos);
}

NpyArray Array(ir::DataType dtype, std::vector<int64_t> dims) {
  NpyArray a;
  a.dtype = dtype;
  a.dims = std::move(dims);
  a.bytes.resize(static_cast<size_t>(a.numel()) * ir::DataTypeSize(dtype));
  return a;
}

TEST(NpySourceTest, ReadsOneFilePerFeed) {
  TempDir dir;
  NpyArray x = Array(ir::DataType::kFloat32, {3, 2});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i);
  NpyArray y = Array(ir::DataType::kInt64, {3, 1});
  for (int i = 0; i < 3; ++i) y.data<int64_t>()[i] = 10 + i;
  ASSERT_TRUE(WriteNpy(dir.path() / "x.npy", x).ok());
  ASSERT_TRUE(WriteNpy(dir.path() / "y.npy", y).ok());
  auto source =
      MakeNpySource(kRegression, {{"x", dir.path() / "x.npy"}, {"y", dir.path() / "y.npy"}});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  exec::FeedMap f;
  ASSERT_TRUE((*source)->Next(2, f).ok());
  ASSERT_TRUE((*source)->Next(2, f).ok());  // rows 2, 0
  EXPECT_EQ(f["x"].data<float>()[0], 4.0f);
  EXPECT_EQ(f["x"].data<float>()[2], 0.0f);
  EXPECT_EQ(f["y"].data<int64_t>()[0], 12);
  EXPECT_EQ(f["y"].data<int64_t>()[1], 10);
}

TEST(NpySourceTest, Errors) {
  TempDir dir;
  ASSERT_TRUE(WriteNpy(dir.path() / "x.npy", Array(ir::DataType::kFloat32, {3, 2})).ok());
  ASSERT_TRUE(WriteNpy(dir.path() / "x64.npy", Array(ir::DataType::kFloat64, {3, 2})).ok());
  ASSERT_TRUE(WriteNpy(dir.path() / "x3.npy", Array(ir::DataType::kFloat32, {3, 3})).ok());
  ASSERT_TRUE(WriteNpy(dir.path() / "y.npy", Array(ir::DataType::kInt64, {4, 1})).ok());
  auto error = [&](const std::string& xf, const std::string& yf) {
    std::map<std::string, fs::path> files;
    if (!xf.empty()) files["x"] = dir.path() / xf;
    if (!yf.empty()) files["y"] = dir.path() / yf;
    return ErrorOf(MakeNpySource(kRegression, files));
  };
  EXPECT_NE(error("x.npy", "").find("no file for feed 'y' (set data.files.y)"),
            std::string::npos);
  EXPECT_NE(error("x64.npy", "y.npy").find("the array is float64 but feed 'x' is float32"),
            std::string::npos);
  EXPECT_NE(error("x3.npy", "y.npy").find("the array has shape [3, 3] but feed 'x' needs "
                                          "[samples, 2]"),
            std::string::npos)
      << error("x3.npy", "y.npy");
  EXPECT_NE(error("x.npy", "y.npy").find("4 samples, but"), std::string::npos);
  dir.Write("junk.npy", "not an npy file");
  EXPECT_NE(error("junk.npy", "y.npy").find("junk.npy"), std::string::npos);
}

// An .npy file whose header dict is `dict` (padded as NumPy pads it) and `data_bytes` zero bytes
// of data, written to `dir`/`name`; what ReadNpy says of it ("ok" or the message).
std::string ReadNpyWithHeader(const TempDir& dir, const std::string& name,
                              const std::string& dict, size_t data_bytes) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  dir.Write(name, file + header + std::string(data_bytes, '\0'));
  auto r = ReadNpy(dir.path() / name);
  return r.ok() ? std::string("ok") : r.status().message();
}

// An .npy header is input: its shape is parsed strictly, multiplied out without overflow and
// checked against the file's size before anything is allocated from it.
TEST(NpyTest, HostileHeadersAreRefusedBeforeAllocating) {
  TempDir dir;
  auto npy = [&](const std::string& name, const std::string& shape, size_t data_bytes) {
    return ReadNpyWithHeader(
        dir, name, "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }",
        data_bytes);
  };
  EXPECT_EQ(npy("ok.npy", "(2, 3)", 24), "ok");
  EXPECT_NE(npy("letters.npy", "(16abc, 32)", 2048).find("expected ',' or ')' in 'shape'"),
            std::string::npos);
  EXPECT_NE(npy("neg.npy", "(-4, 2)", 32).find("expected a non-negative integer in 'shape'"),
            std::string::npos);
  EXPECT_NE(npy("huge.npy", "(4611686018427387904, 4)", 16).find("more than 2^62 bytes"),
            std::string::npos);
  // Claims 8 GB, holds 16 bytes: refused by size, not by a failed 8 GB allocation.
  EXPECT_NE(npy("short.npy", "(1000000, 2000)", 16).find("data shorter than shape"),
            std::string::npos);
  ::mkfifo((dir.path() / "fifo.npy").c_str(), 0600);
  auto fifo = ReadNpy(dir.path() / "fifo.npy");
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find("is a FIFO, not a regular file"), std::string::npos);
  auto device = ReadNpy("/dev/zero");
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("is a character device, not a regular file"),
            std::string::npos);
}

// The header dict is read as the Python literal NumPy writes, whole: exactly descr,
// fortran_order and shape, each once; no key found inside another's value.
TEST(NpyTest, HeaderDictIsParsedStrictly) {
  TempDir dir;
  auto npy = [&](const std::string& dict, size_t data_bytes = 24) {
    return ReadNpyWithHeader(dir, "a.npy", dict, data_bytes);
  };
  // What NumPy writes, in any key order, with or without the trailing comma, either quotes.
  EXPECT_EQ(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), "ok");
  EXPECT_EQ(npy("{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}"), "ok");
  EXPECT_EQ(npy("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (6,)}"), "ok");
  EXPECT_EQ(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4), "ok");
  EXPECT_EQ(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3,), }"), "ok");

  const std::pair<std::string, std::string> refused[] = {
      {"{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
       "key 'descr' appears twice"},
      {"{'note': \"'descr': '<f4'\", 'descr': '<i8', 'fortran_order': False, 'shape': (2, 3)}",
       "unexpected key 'note'"},
      {"{'descr': '<f4', 'fortran_order': False, }", "the header has no 'shape'"},
      {"{'descr': '<f4', 'fortran_order': 'no', 'shape': (2, 3), }",
       "expected True or False for 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3), }",
       "expected True or False for 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", "is a number, not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }",
       "expected a tuple for 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (02, 3), }", "is not a valid int64"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", "after the dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),, }", "expected a quoted key"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }", "expected ',' or '}'"},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3), }",
       "expected a quoted dtype for 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", "expected ',' or '}'"},
      {"[1, 2, 3]", "expected '{'"},
  };
  for (const auto& [dict, why] : refused) {
    const std::string message = npy(dict);
    EXPECT_NE(message.find("bad .npy header: "), std::string::npos) << dict << " -> " << message;
    EXPECT_NE(message.find(why), std::string::npos) << dict << " -> " << message;
  }
  // Echoed header bytes are escaped.
  const std::string escape = npy("{'descr': '<f4', 'fortran_order': False, \x1b[2J}");
  EXPECT_EQ(escape.find('\x1b'), std::string::npos) << escape;
  // 65 dimensions of 1: more than NumPy allows.
  std::string many = "(2, 3";
  for (int i = 0; i < 63; ++i) many += ", 1";
  EXPECT_NE(npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + many + "), }")
                .find("more than 64 dimensions"),
            std::string::npos);
}

TEST(FeedSpecsTest, OnlyTheBatchDimMayBeUnknown) {
  ir::Program p;
  ir::Var v;
  v.name = "x";
  v.shape = {-1, -1};
  (void)p.global().AddVar(v);
  auto specs = FeedSpecs(p, {"x"});
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(specs.status().message().find("only the first (batch) dimension may be -1"),
            std::string::npos);
}

}  // namespace
}  // namespace fleet::data
