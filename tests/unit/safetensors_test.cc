#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace fleet::checkpoint {
namespace {

namespace fs = std::filesystem;

using fleet::test_util::TempDir;

// A file: the header length as 8 little-endian bytes, `header`, then `data`.
std::vector<uint8_t> File(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> Zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

std::string Error(const std::vector<uint8_t>& bytes) {
  StatusOr<SafeTensors> st = ParseSafeTensors(bytes, "w.safetensors");
  if (st.ok()) return "(parsed)";
  return st.status().message();
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(SafeTensorsTest, DtypeNamesAreTheFormats) {
  EXPECT_EQ(SafeTensorsDtypeName(ir::DataType::kFloat32), "F32");
  EXPECT_EQ(SafeTensorsDtypeName(ir::DataType::kBFloat16), "BF16");
  EXPECT_EQ(SafeTensorsDtypeName(ir::DataType::kBool), "BOOL");
  EXPECT_EQ(SafeTensorsDtypeName(ir::DataType::kUInt8), "U8");
  EXPECT_EQ(SafeTensorsDtypeName(ir::DataType::kInvalid), "");
  EXPECT_EQ(ParseSafeTensorsDtype("I64"), ir::DataType::kInt64);
  EXPECT_EQ(ParseSafeTensorsDtype("F16"), ir::DataType::kFloat16);
  EXPECT_EQ(ParseSafeTensorsDtype("U16"), ir::DataType::kInvalid);
  EXPECT_EQ(ParseSafeTensorsDtype("f32"), ir::DataType::kInvalid);
}

TEST(SafeTensorsTest, ReadsAHandMadeFile) {
  // Two float32s, 1.0 and -2.0, as little-endian IEEE bytes.
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("__metadata__":{"format":"pt"}})";
  std::vector<uint8_t> bytes = File(header, {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0});
  StatusOr<SafeTensors> st = ParseSafeTensors(bytes, "w.safetensors");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_EQ(st->tensors.size(), 1u);
  EXPECT_EQ(st->tensors[0].name, "a");
  EXPECT_EQ(st->tensors[0].tensor.dtype, ir::DataType::kFloat32);
  EXPECT_EQ(st->tensors[0].tensor.dims, (std::vector<int64_t>{2}));
  const float* v = st->tensors[0].tensor.data<float>();
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(st->metadata.at("format"), "pt");
}

TEST(SafeTensorsTest, WritesTheSpecsBytes) {
  SafeTensors st;
  NamedTensor a;
  a.name = "a";
  a.tensor.Reshape(ir::DataType::kFloat32, {2});
  a.tensor.data<float>()[0] = 1.0f;
  a.tensor.data<float>()[1] = -2.0f;
  st.tensors.push_back(a);
  StatusOr<std::vector<uint8_t>> bytes = EncodeSafeTensors(st);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  // The 54-byte JSON padded with two spaces to 56, so the data starts 8-aligned at 64.
  const std::string json = R"({"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  std::vector<uint8_t> want = {56, 0, 0, 0, 0, 0, 0, 0};
  want.insert(want.end(), json.begin(), json.end());
  want.push_back(' ');
  want.push_back(' ');
  for (uint8_t b : {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}) want.push_back(b);
  EXPECT_EQ(*bytes, want);
}

TEST(SafeTensorsTest, EveryDtypeRoundTripsThroughAFile) {
  const ir::DataType dtypes[] = {
      ir::DataType::kBool,    ir::DataType::kUInt8,   ir::DataType::kInt8,
      ir::DataType::kInt16,   ir::DataType::kInt32,   ir::DataType::kInt64,
      ir::DataType::kFloat16, ir::DataType::kBFloat16, ir::DataType::kFloat32,
      ir::DataType::kFloat64};
  SafeTensors st;
  st.metadata["step"] = "12";
  int k = 0;
  for (ir::DataType t : dtypes) {
    NamedTensor n;
    n.name = "t" + std::to_string(k) + "." + std::string(SafeTensorsDtypeName(t));
    n.tensor.Reshape(t, {2, 3});
    for (size_t i = 0; i < n.tensor.bytes.size(); ++i) {
      n.tensor.bytes[i] = static_cast<uint8_t>(t == ir::DataType::kBool ? i % 2 : 7 * i + k);
    }
    st.tensors.push_back(n);
    ++k;
  }
  NamedTensor scalar, empty;
  scalar.name = "scalar";
  scalar.tensor.Reshape(ir::DataType::kInt64, {});
  scalar.tensor.data<int64_t>()[0] = -5;
  empty.name = "empty";
  empty.tensor.Reshape(ir::DataType::kFloat32, {0, 4});
  st.tensors.push_back(scalar);
  st.tensors.push_back(empty);

  TempDir dir;
  const fs::path file = dir.path() / "all.safetensors";
  ASSERT_TRUE(WriteSafeTensors(file, st).ok());
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path(), file) << "left behind";  // no temporary file
  }
  StatusOr<SafeTensors> back = ReadSafeTensors(file);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->tensors.size(), st.tensors.size());
  for (size_t i = 0; i < st.tensors.size(); ++i) {
    // Read back in data order, which is the order written.
    EXPECT_EQ(back->tensors[i].name, st.tensors[i].name);
    EXPECT_EQ(back->tensors[i].tensor.dtype, st.tensors[i].tensor.dtype) << st.tensors[i].name;
    EXPECT_EQ(back->tensors[i].tensor.dims, st.tensors[i].tensor.dims) << st.tensors[i].name;
    EXPECT_EQ(back->tensors[i].tensor.bytes, st.tensors[i].tensor.bytes) << st.tensors[i].name;
  }
  EXPECT_EQ(back->metadata, st.metadata);
  // 6 elements of each dtype: 1+1+1+2+4+8+2+2+4+8 bytes each, the scalar's 8, the empty's 0.
  const uint64_t data = 6 * (1 + 1 + 1 + 2 + 4 + 8 + 2 + 2 + 4 + 8) + 8;
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[static_cast<size_t>(i)];
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw.size(), 8 + n + data);
}

TEST(SafeTensorsTest, TheWriterRefusesWhatItCannotWrite) {
  SafeTensors st;
  NamedTensor a;
  a.name = "a";
  a.tensor.Reshape(ir::DataType::kFloat32, {2});
  st.tensors = {a, a};
  StatusOr<std::vector<uint8_t>> twice = EncodeSafeTensors(st);
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(Has(twice.status().message(), "'a' is given twice")) << twice.status().message();
  st.tensors = {a};
  st.tensors[0].tensor.bytes.pop_back();
  StatusOr<std::vector<uint8_t>> short_bytes = EncodeSafeTensors(st);
  ASSERT_FALSE(short_bytes.ok());
  EXPECT_TRUE(Has(short_bytes.status().message(), "7 bytes do not hold F32 [2]"))
      << short_bytes.status().message();
}

TEST(SafeTensorsTest, RefusesATruncatedHeaderLength) {
  EXPECT_EQ(Error({1, 0, 0, 0, 0}),
            "w.safetensors: 5 bytes is too short for a safetensors file (the header length "
            "alone takes 8)");
}

TEST(SafeTensorsTest, RefusesAHeaderLengthPastTheEnd) {
  std::vector<uint8_t> bytes = File("{}", {});
  bytes[0] = 100;  // claims 100 header bytes; 2 follow
  EXPECT_EQ(Error(bytes),
            "w.safetensors: the header length 100 runs past the end of the file (10 bytes)");
  // A truncated file: the header is cut short.
  std::vector<uint8_t> cut = File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                  Zeros(4));
  cut.resize(30);
  EXPECT_TRUE(Has(Error(cut), "runs past the end of the file (30 bytes)")) << Error(cut);
}

TEST(SafeTensorsTest, RefusesBadJson) {
  EXPECT_EQ(Error(File(R"({"a": {"dtype": )", {})),
            "w.safetensors: the header is not well-formed JSON");
  EXPECT_EQ(Error(File("[1, 2]", {})), "w.safetensors: the header is not a JSON object");
  EXPECT_EQ(Error(File(R"({"a": 3})", {})),
            "w.safetensors: tensor 'a': the entry is not a JSON object");
  EXPECT_EQ(Error(File(R"({"__metadata__": {"k": 1}})", {})),
            "w.safetensors: __metadata__ value of 'k' is not a string");
}

TEST(SafeTensorsTest, RefusesBadEntries) {
  EXPECT_EQ(Error(File(R"({"w":{"dtype":"F32","shape":[1]}})", Zeros(4))),
            "w.safetensors: tensor 'w': missing 'data_offsets'");
  EXPECT_TRUE(Has(Error(File(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})",
                             Zeros(4))),
                  "w.safetensors: tensor 'w': unknown key 'x'"));
  EXPECT_EQ(Error(File(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", Zeros(4))),
            "w.safetensors: tensor 'w': shape [-1] has an entry that is not a non-negative "
            "integer");
  EXPECT_EQ(Error(File(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", Zeros(4))),
            "w.safetensors: tensor 'w': data_offsets [4,0] ends before it begins");
  EXPECT_EQ(Error(File(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", Zeros(4))),
            "w.safetensors: tensor 'w': data_offsets [0] is not [begin, end] of non-negative "
            "integers");
}

TEST(SafeTensorsTest, RefusesUnknownDtypes) {
  for (const char* dtype : {"F8_E4M3", "U16", "C64", "float32"}) {
    const std::string header = std::string(R"({"w":{"dtype":")") + dtype +
                               R"(","shape":[1],"data_offsets":[0,4]}})";
    EXPECT_TRUE(Has(Error(File(header, Zeros(4))),
                    std::string("w.safetensors: tensor 'w': unsupported dtype '") + dtype + "'"))
        << Error(File(header, Zeros(4)));
  }
}

TEST(SafeTensorsTest, RefusesOffsetsOutOfBounds) {
  EXPECT_EQ(Error(File(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", Zeros(8))),
            "w.safetensors: tensor 'w': data_offsets [0,16] lie past the end of the data (8 "
            "bytes)");
}

TEST(SafeTensorsTest, RefusesASizeUnlikeTheShape) {
  EXPECT_EQ(Error(File(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", Zeros(8))),
            "w.safetensors: tensor 'w': data_offsets [0,8] hold 8 bytes but F32 [3] needs 12");
  EXPECT_EQ(Error(File(R"({"w":{"dtype":"F64","shape":[2,1],"data_offsets":[0,8]}})", Zeros(8))),
            "w.safetensors: tensor 'w': data_offsets [0,8] hold 8 bytes but F64 [2, 1] needs 16");
}

TEST(SafeTensorsTest, RefusesOverlapsGapsAndTrailingBytes) {
  EXPECT_EQ(Error(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       Zeros(12))),
            "w.safetensors: tensor 'b' at bytes [4, 12) overlaps tensor 'a' (ends at 8)");
  EXPECT_EQ(Error(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                       Zeros(12))),
            "w.safetensors: bytes [4, 8) before tensor 'b' belong to no tensor");
  EXPECT_EQ(Error(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", Zeros(12))),
            "w.safetensors: the last 4 bytes of the data belong to no tensor");
  // Out of order in the header but tiling the data is fine.
  std::vector<uint8_t> swapped = File(R"({"a":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},)"
                                      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                                      {1, 0, 0, 0, 2, 0, 0, 0});
  StatusOr<SafeTensors> st = ParseSafeTensors(swapped, "w.safetensors");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_EQ(st->tensors.size(), 2u);
  EXPECT_EQ(st->tensors[0].name, "b");
  EXPECT_EQ(st->tensors[0].tensor.data<int32_t>()[0], 1);
  EXPECT_EQ(st->tensors[1].name, "a");
  EXPECT_EQ(st->tensors[1].tensor.data<int32_t>()[0], 2);
}

TEST(SafeTensorsTest, RefusesADuplicateName) {
  EXPECT_EQ(Error(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       Zeros(8))),
            "w.safetensors: the header names 'a' twice");
}

// Names are echoed escaped and cut; a name longer than any var's is refused outright.
TEST(SafeTensorsTest, HostileNamesAreEscapedOrRefused) {
  const std::string esc = Error(
      File("{\"\\u001b[2Jw\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
           "\"x\":1}}",
           Zeros(4)));
  EXPECT_TRUE(Has(esc, "tensor '\\x1b[2Jw': unknown key 'x'")) << esc;
  const std::string name(5000, 'n');
  const std::string huge =
      Error(File("{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                 Zeros(4)));
  EXPECT_TRUE(Has(huge, "a name of 5000 bytes, longer than any var's (1024)")) << huge;
  EXPECT_LT(huge.size(), 300u) << huge;
}

TEST(SafeTensorsTest, AMissingFileIsNotFound) {
  StatusOr<SafeTensors> st = ReadSafeTensors("/nonexistent/dir/w.safetensors");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), Code::kNotFound);
  EXPECT_TRUE(Has(st.status().message(), "/nonexistent/dir/w.safetensors"));
}

}  // namespace
}  // namespace fleet::checkpoint
