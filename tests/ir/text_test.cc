// The text form of programs: exact round trips for every attribute type and var form, the
// documented layout, and parse errors with exact positions.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "ir/text.h"
#include "support/text.h"

namespace fleet::ir {
namespace {

Program ParseOk(std::string_view text) {
  auto p = ParseProgram(text, "test.ir");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Program();
}

std::string ParseError(std::string_view text) {
  auto p = ParseProgram(text, "t.ir");
  EXPECT_FALSE(p.ok()) << "parsed:\n" << (p.ok() ? PrintProgram(*p) : "");
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
  return p.status().message();
}

void ExpectRoundTrip(const Program& p) {
  std::string text = PrintProgram(p);
  auto back = ParseProgram(text, "roundtrip.ir");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  EXPECT_TRUE(*back == p) << text << "\n---- reprinted ----\n" << PrintProgram(*back);
  EXPECT_EQ(PrintProgram(*back), text);
}

Op OpWithAttrs(AttrMap attrs) {
  Op op;
  op.type = "any";
  op.inputs["X"] = {"x"};
  op.outputs["Out"] = {"y"};
  op.attrs = std::move(attrs);
  return op;
}

TEST(IrText, EveryAttributeTypeRoundTrips) {
  Program p;
  p.AddBlock(0);
  AttrMap a;
  a["i32"] = int32_t{7};
  a["i32_min"] = std::numeric_limits<int32_t>::min();
  a["i64"] = int64_t{7};
  a["i64_big"] = int64_t{1} << 40;
  a["i64_min"] = std::numeric_limits<int64_t>::min();
  a["f"] = 0.1f;
  a["f_whole"] = 3.0f;
  a["f_tiny"] = std::numeric_limits<float>::denorm_min();
  a["f_max"] = std::numeric_limits<float>::max();
  a["f_inf"] = -std::numeric_limits<float>::infinity();
  a["d"] = 0.1;
  a["d_whole"] = 3.0;
  a["d_tiny"] = std::numeric_limits<double>::denorm_min();
  a["d_max"] = DBL_MAX;
  a["d_inf"] = std::numeric_limits<double>::infinity();
  a["b_true"] = true;
  a["b_false"] = false;
  a["s"] = std::string("quote\" backslash\\ nl\n tab\t cr\r ctl\x01 del\x7f utf8 \xc3\xa9 #");
  a["s_empty"] = std::string();
  a["ints"] = std::vector<int32_t>{1, -2, 3};
  a["ints_empty"] = std::vector<int32_t>{};
  a["int64s"] = std::vector<int64_t>{1, int64_t{1} << 50};
  a["int64s_empty"] = std::vector<int64_t>{};
  a["floats"] = std::vector<float>{0.5f, 1e-8f, 2.0f};
  a["floats_empty"] = std::vector<float>{};
  a["doubles"] = std::vector<double>{0.1, 2.0, -1e300};
  a["doubles_empty"] = std::vector<double>{};
  a["bools"] = std::vector<bool>{true, false};
  a["bools_empty"] = std::vector<bool>{};
  a["strings"] = std::vector<std::string>{"", "a, b", "]"};
  a["strings_empty"] = std::vector<std::string>{};
  a["sub_block"] = BlockRef{1};
  p.global().ops.push_back(OpWithAttrs(a));
  ExpectRoundTrip(p);

  // Widths stay distinct after the round trip (operator== on the variant checks this too).
  Program back = ParseOk(PrintProgram(p));
  const AttrMap& b = back.global().ops[0].attrs;
  EXPECT_TRUE(std::holds_alternative<int32_t>(b.at("i32")));
  EXPECT_TRUE(std::holds_alternative<int64_t>(b.at("i64")));
  EXPECT_TRUE(std::holds_alternative<float>(b.at("f")));
  EXPECT_TRUE(std::holds_alternative<double>(b.at("d")));
  EXPECT_TRUE(std::holds_alternative<std::vector<float>>(b.at("floats_empty")));
  EXPECT_TRUE(std::holds_alternative<std::vector<double>>(b.at("doubles_empty")));
  EXPECT_TRUE(std::holds_alternative<std::vector<int64_t>>(b.at("int64s_empty")));
}

TEST(IrText, LiteralSpellings) {
  // The spelling of each type, as docs/ir.md documents it.
  EXPECT_EQ(PrintAttribute(int32_t{1}), "1");
  EXPECT_EQ(PrintAttribute(int64_t{1}), "1L");
  EXPECT_EQ(PrintAttribute(1.0f), "1.0f");
  EXPECT_EQ(PrintAttribute(0.1f), "0.1f");
  EXPECT_EQ(PrintAttribute(1.0), "1.0");
  EXPECT_EQ(PrintAttribute(0.0001), "0.0001");
  EXPECT_EQ(PrintAttribute(1e20), "1e+20");
  EXPECT_EQ(PrintAttribute(1e-5), "0.00001");
  EXPECT_EQ(PrintAttribute(1e-6), "1e-06");
  EXPECT_EQ(PrintAttribute(1e-8f), "1e-08f");
  EXPECT_EQ(PrintAttribute(-0.0), "-0.0");
  EXPECT_EQ(PrintAttribute(std::numeric_limits<float>::infinity()), "inff");
  EXPECT_EQ(PrintAttribute(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(PrintAttribute(std::string("a\"b")), "\"a\\\"b\"");
  EXPECT_EQ(PrintAttribute(std::string("\x01")), "\"\\x01\"");
  EXPECT_EQ(PrintAttribute(std::vector<int32_t>{}), "ints[]");
  EXPECT_EQ(PrintAttribute(std::vector<int64_t>{2, 3}), "[2L, 3L]");
  EXPECT_EQ(PrintAttribute(std::vector<bool>{}), "bools[]");
  EXPECT_EQ(PrintAttribute(BlockRef{2}), "block(2)");
}

TEST(IrText, NegativeZeroAndNanKeepTheirKind) {
  // operator== cannot see the sign of zero or NaN, so check the values directly.
  Program p;
  p.global().ops.push_back(OpWithAttrs({{"z", -0.0}, {"zf", -0.0f}, {"n", std::nan("")},
                                        {"nf", std::numeric_limits<float>::quiet_NaN()}}));
  Program back = ParseOk(PrintProgram(p));
  const AttrMap& b = back.global().ops[0].attrs;
  EXPECT_TRUE(std::signbit(std::get<double>(b.at("z"))));
  EXPECT_TRUE(std::signbit(std::get<float>(b.at("zf"))));
  EXPECT_TRUE(std::isnan(std::get<double>(b.at("n"))));
  EXPECT_TRUE(std::isnan(std::get<float>(b.at("nf"))));
}

TEST(IrText, RandomRealsRoundTripBitForBit) {
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    uint32_t fbits = static_cast<uint32_t>(bits >> 17);
    float f;
    std::memcpy(&f, &fbits, sizeof(f));
    if (std::isnan(d) || std::isnan(f)) continue;
    Program p;
    p.global().ops.push_back(OpWithAttrs({{"d", d}, {"f", f}}));
    Program back = ParseOk(PrintProgram(p));
    ASSERT_EQ(back.global().ops.size(), 1u);
    double d2 = std::get<double>(back.global().ops[0].attrs.at("d"));
    float f2 = std::get<float>(back.global().ops[0].attrs.at("f"));
    ASSERT_EQ(std::memcmp(&d, &d2, sizeof(d)), 0) << PrintAttribute(d);
    ASSERT_EQ(std::memcmp(&f, &f2, sizeof(f)), 0) << PrintAttribute(f);
  }
}

TEST(IrText, VarsParamsAndBlocksRoundTrip) {
  Program p;
  Block& g = p.global();
  Var x{"x", DataType::kFloat32, {-1, 32}, false, true, std::nullopt};
  Var label{"label", DataType::kInt64, {-1, 1}, false, true, std::nullopt};
  Var scalar{"lr", DataType::kFloat32, {}, true, false, std::nullopt};
  Var w{"fc_0.w_0", DataType::kFloat32, {32, 128}, true, false,
        ParamInfo{true, 1.0, "l2", 0.0001}};
  Var frozen{"emb", DataType::kFloat64, {10, 4}, true, true, ParamInfo{false, 0.5, "", 0.0}};
  Var odd_param{"odd", DataType::kFloat16, {2}, false, false, ParamInfo{}};
  Var quoted{"has space, comma", DataType::kBool, {0}, false, false, std::nullopt};
  Var grad{"fc_0.w_0@GRAD", DataType::kFloat32, {32, 128}, false, false, std::nullopt};
  Var ids{"ids", DataType::kInt64, {-1, 1}, false, true, std::nullopt, 1};
  for (const Var* v : {&x, &label, &scalar, &w, &frozen, &odd_param, &quoted, &grad, &ids}) {
    ASSERT_TRUE(g.AddVar(*v).ok());
  }
  Op mul;
  mul.type = "mul";
  mul.inputs = {{"X", {"x"}}, {"Y", {"fc_0.w_0"}}};
  mul.outputs = {{"Out", {"fc_0.tmp_0"}}};
  mul.attrs = {{"x_num_col_dims", 1}, {"y_num_col_dims", 1}};
  g.ops.push_back(mul);
  Op no_slots;
  no_slots.type = "barrier";
  g.ops.push_back(no_slots);
  Op empty_slot;
  empty_slot.type = "sum";
  empty_slot.inputs = {{"X", {}}, {"Y", {"has space, comma", "x"}}};
  empty_slot.outputs = {{"Out", {"s"}}};
  g.ops.push_back(empty_slot);

  int32_t b1 = p.AddBlock(0);
  int32_t b2 = p.AddBlock(b1);
  int32_t b3 = p.AddBlock(0);
  ASSERT_TRUE(p.block(b2).AddVar({"inner", DataType::kInt32, {3}, false, false, {}}).ok());
  Op sub;
  sub.type = "scale";
  sub.inputs = {{"X", {"inner"}}};
  sub.outputs = {{"Out", {"inner"}}};
  p.block(b2).ops.push_back(sub);
  Op loop;
  loop.type = "while";
  loop.attrs = {{"sub_block", BlockRef{b1}}, {"other", BlockRef{b3}}};
  p.global().ops.push_back(loop);  // AddBlock may have moved the blocks: no `g` here
  ExpectRoundTrip(p);
}

TEST(IrText, PrintsTheDocumentedLayout) {
  Program p = ParseOk(R"(
# a comment line
program {   # trailing comment
  block 0 {
    var x : float32[-1, 32] stop_gradient
    var ids : int64[-1, 1] stop_gradient lod_level 1
    param fc_0.w_0 : float32[32, 128] {lr=1.0, regularizer="l2", coeff=0.0001}
    var fc_0.tmp_0 : float32[-1, 128]
    op mul(X=[x], Y=[fc_0.w_0]) -> (Out=[fc_0.tmp_0]) {x_num_col_dims=1, y_num_col_dims=1}
  }
  block 1 parent 0 {
    var t : int64[] persistable
  }
}
)");
  EXPECT_EQ(PrintProgram(p),
            "program {\n"
            "  block 0 {\n"
            "    var fc_0.tmp_0 : float32[-1, 128]\n"
            "    param fc_0.w_0 : float32[32, 128] {lr=1.0, regularizer=\"l2\", coeff=0.0001}\n"
            "    var ids : int64[-1, 1] stop_gradient lod_level 1\n"
            "    var x : float32[-1, 32] stop_gradient\n"
            "    op mul(X=[x], Y=[fc_0.w_0]) -> (Out=[fc_0.tmp_0]) "
            "{x_num_col_dims=1, y_num_col_dims=1}\n"
            "  }\n"
            "  block 1 parent 0 {\n"
            "    var t : int64[] persistable\n"
            "  }\n"
            "}\n");
  const Var* w = p.global().FindVar("fc_0.w_0");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->persistable);
  ASSERT_TRUE(w->param.has_value());
  EXPECT_EQ(w->param->regularizer, "l2");
  EXPECT_DOUBLE_EQ(w->param->regularization_coeff, 0.0001);
  EXPECT_EQ(p.block(1).parent, 0);
  EXPECT_TRUE(p.block(1).FindVar("t")->shape.empty());
  EXPECT_EQ(p.global().FindVar("ids")->lod_level, 1);
  EXPECT_EQ(p.global().FindVar("x")->lod_level, 0);
}

TEST(IrText, TypedListsConvertTheirElements) {
  Program p = ParseOk(
      "program { block 0 { op a() -> () {d=doubles[1, 0.5f], f=floats[2], l=int64s[1, 2L], "
      "e=strings[]} } }");
  const AttrMap& a = p.global().ops[0].attrs;
  EXPECT_EQ(std::get<std::vector<double>>(a.at("d")), (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(std::get<std::vector<float>>(a.at("f")), (std::vector<float>{2.0f}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(a.at("l")), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(std::get<std::vector<std::string>>(a.at("e")).empty());
}

TEST(IrText, ProgramSetRoundTrips) {
  std::map<std::string, Program> set;
  set["main"].global().ops.push_back(OpWithAttrs({{"k", 1}}));
  set["startup"];
  set["pserver.0"].AddBlock(0);
  set["odd name"];
  std::string text = PrintProgramSet(set);
  EXPECT_EQ(text.find("program main {"), text.find("program main"));
  EXPECT_NE(text.find("program \"odd name\" {"), std::string::npos);
  auto back = ParseProgramSet(text, "set.ir");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == set);
  EXPECT_EQ(PrintProgramSet(*back), text);
}

// Names become file names and JSON strings, so bad ones are refused where they enter.
TEST(IrNames, CheckVarNameRefusesWhatCannotBeAFileOrJsonName) {
  for (std::string_view ok : {"x", "fc_0.w_0", "x@GRAD@RENAME@0", "w\xc3\xb6rter_\xe2\x82\xac",
                              "a b", "..x"}) {
    EXPECT_TRUE(CheckVarName(ok).ok()) << ok;
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "a var name is empty"},
      {".", "var name '.' is a path component, not a name"},
      {"..", "var name '..' is a path component, not a name"},
      {"../../x", "var name '../../x' holds a path separator"},
      {"/abs/path", "var name '/abs/path' holds a path separator"},
      {"a\\b", "var name 'a\\x5cb' holds a path separator"},
      {"a\nb", "var name 'a\\x0ab' holds a control character"},
      {"\x1b[31mred", "var name '\\x1b[31mred' holds a control character"},
      {"\xff\xfe", "var name '\\xff\\xfe' is not valid UTF-8"},
      {"\xc0\xaf", "var name '\\xc0\\xaf' is not valid UTF-8"},       // overlong '/'
      {"\xed\xa0\x80", "var name '\\xed\\xa0\\x80' is not valid UTF-8"},  // a surrogate
      {"\xe2\x82", "var name '\\xe2\\x82' is not valid UTF-8"},        // truncated
      {"x\xc2\x9b" "31m", "var name 'x\\xc2\\x9b31m' holds a control character"},  // 8-bit CSI
  };
  for (const auto& [name, message] : bad) {
    Status s = CheckVarName(name);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << QuoteForMessage(name);
    EXPECT_EQ(s.message(), message);
  }
  const std::string huge(kMaxVarNameBytes + 1, 'v');
  Status s = CheckVarName(huge);
  EXPECT_EQ(s.message(), "var name '" + std::string(80, 'v') + "...' is 1025 bytes long, more "
                         "than 1024");
  Block b;
  Var v;
  v.name = "../escape";
  EXPECT_EQ(b.AddVar(v).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(b.vars.empty());
}

TEST(IrText, ParseErrorsNameLineAndColumn) {
  EXPECT_EQ(ParseError("program { block 0 { var \"../x\" : int64[2] } }"),
            "t.ir:1:25: var name '../x' holds a path separator");
  EXPECT_EQ(ParseError("program {\n  block 0 {\n    var x float32[2]\n  }\n}\n"),
            "t.ir:3:11: expected ':', got 'float32'");
  EXPECT_EQ(ParseError("program {\n  block 0 {\n    var x : floot32[2]\n  }\n}\n"),
            "t.ir:3:13: expected a data type (float32, int64, ...), got 'floot32'");
  EXPECT_EQ(ParseError("# header\nprogram {\n  block 0 {\n    op scale(X=[x]) (Out=[y])\n"),
            "t.ir:4:21: expected '->', got '('");
  EXPECT_EQ(ParseError("program {\n  block 0 {\n"),
            "t.ir:3:1: expected 'var', 'param', 'op' or '}', got end of input");
  EXPECT_EQ(ParseError("program {\n  block 1 {\n  }\n}\n"),
            "t.ir:2:9: expected block 0 (blocks are numbered in order), got block 1");
  EXPECT_EQ(ParseError("program { block 0 { op a() -> () {k=3000000000} } }"),
            "t.ir:1:37: '3000000000' does not fit an int32 attribute; write 3000000000L for an "
            "int64");
  EXPECT_EQ(ParseError("program { block 0 { op a() -> () {k=[]} } }"),
            "t.ir:1:38: expected a list element (write an empty list with its type: ints[], "
            "int64s[], floats[], doubles[], bools[], strings[]), got ']'");
  EXPECT_EQ(ParseError("program { block 0 { op a() -> () {k=[0.5f, 0.25]} } }"),
            "t.ir:1:44: expected an element of floats like the first, got double 0.25");
  EXPECT_EQ(ParseError("program { block 0 { op a() -> () {k=\"open} } }"),
            "t.ir:1:37: string is not closed on its line");
  EXPECT_EQ(ParseError("program { block 0 { op a() -> () {k=\"\\q\"} } }"),
            "t.ir:1:38: expected an escape (\\\", \\\\, \\n, \\t, \\r or \\xHH), got '\\'");
  EXPECT_EQ(ParseError("program { block 0 { op a() -> () {k=1, k=2} } }"),
            "t.ir:1:40: attribute 'k' is given twice");
  EXPECT_EQ(ParseError("program { block 0 { op a() -> () {k=wat} } }"),
            "t.ir:1:37: expected a value (\"text\", true, 1, 1L, 0.5f, 0.5, [..], block(N)), got "
            "'wat'");
  EXPECT_EQ(ParseError("program {\n block 0 {\n  var x : int64[2]\n  var x : int64[2]\n }\n}"),
            "t.ir:4:7: var 'x' is declared twice in block 0");
  EXPECT_EQ(ParseError("program { block 0 { var x : int64[-1] lod_level 2 } }"),
            "t.ir:1:49: lod_level 2: only levels 0 and 1 are supported");
  EXPECT_EQ(ParseError("program { block 0 { var x : int64[-2] } }"),
            "t.ir:1:35: expected a dimension (-1 for unknown, or 0 and more), got '-2'");
  EXPECT_EQ(ParseError("program { block 0 { } block 1 parent 1 { } }"),
            "t.ir:1:38: parent of block 1 must be an earlier block (0 to 0), got 1");
  EXPECT_EQ(ParseError("program { block 0 { } } extra"),
            "t.ir:1:25: expected end of input, got 'extra'");
  EXPECT_EQ(ParseError("program main { block 0 { } }"), "t.ir:1:9: expected '{', got 'main'");
  EXPECT_EQ(ParseError("program { block 0 { param w : float32[2] {lr=1.0, decay=2.0} } }"),
            "t.ir:1:51: expected a parameter option (trainable, lr, regularizer or coeff), got "
            "'decay'");
}

TEST(IrText, ProgramSetErrors) {
  auto dup = ParseProgramSet("program a { block 0 { } }\nprogram a { block 0 { } }\n", "s.ir");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(), "s.ir:2:9: program 'a' is defined twice");
  auto unnamed = ParseProgramSet("program { block 0 { } }", "s.ir");
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.status().message(), "s.ir:1:9: expected a program name, got '{'");
  auto empty = ParseProgramSet("# nothing\n", "s.ir");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace fleet::ir
