// Pass running, text in and text out: the C fixture pass (fixtures/edit_pass.c) is loaded like
// any plugin and run with RunPass on programs parsed from data/*.ir.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "plugin/pass.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

using ::testing::HasSubstr;
using ProgramSet = std::map<std::string, ir::Program>;

std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(FLEET_IR_TEST_DATA_DIR) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ProgramSet ParseSet(std::string_view text, std::string_view source) {
  auto set = ir::ParseProgramSet(text, source);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? *set : ProgramSet();
}

class PassTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LoadOptions options;
    options.search_dirs = {FLEET_IR_FIXTURE_DIR};
    registry_ = new PluginRegistry(options);
    auto loaded = registry_->Load("edit_pass");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(registry_, nullptr);
    pass_ = registry_->Find(FLEET_COMPONENT_PASS, "edit_pass");
    ASSERT_NE(pass_, nullptr);
    input_ = ParseSet(ReadData("edit_pass_input.ir"), "edit_pass_input.ir");
    ASSERT_EQ(input_.size(), 2u);
  }

  // Runs the pass on a copy of the input; on failure checks the copy is untouched.
  Status Run(const ir::AttrMap& options, ProgramSet* out = nullptr) {
    ProgramSet programs = input_;
    Status s = RunPass(*pass_, programs, PassContextInfo{}, options);
    if (!s.ok()) {
      EXPECT_TRUE(programs == input_) << "a failed pass changed the programs:\n"
                                      << ir::PrintProgramSet(programs);
    }
    if (out != nullptr) *out = std::move(programs);
    return s;
  }

  static PluginRegistry* registry_;
  const ComponentRecord* pass_ = nullptr;
  ProgramSet input_;
};

PluginRegistry* PassTest::registry_ = nullptr;

TEST_F(PassTest, DeclaresItsOptions) {
  auto defaults = PassOptionDefaults(*pass_);
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->size(), 7u);
  EXPECT_TRUE(defaults->at("factor") == ir::Attribute(0.5f));
  EXPECT_TRUE(defaults->at("count") == ir::Attribute(int32_t{1}));
  EXPECT_TRUE(defaults->at("note") == ir::Attribute(std::string("edited")));
  EXPECT_TRUE(defaults->at("fail") == ir::Attribute(false));
}

TEST_F(PassTest, TextInTextOut) {
  ProgramSet out;
  // count as a fleet.toml integer (int64) for an int option: converted, not rejected.
  Status s = Run({{"count", int64_t{2}}, {"new_program", std::string("pserver.0")}}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ProgramSet expected = ParseSet(ReadData("edit_pass_expected.ir"), "edit_pass_expected.ir");
  EXPECT_EQ(ir::PrintProgramSet(out), ir::PrintProgramSet(expected));
  EXPECT_TRUE(out == expected);
}

TEST_F(PassTest, DefaultsAndConvertedOptions) {
  ProgramSet out;
  // factor given as a double and note as a string; count stays 1.
  Status s = Run({{"factor", 0.25}, {"note", std::string("x")}}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ir::PrintProgram(out.at("main")),
            "program {\n"
            "  block 0 {\n"
            "    var x : float32[-1, 4] stop_gradient\n"
            "    var y : float32[-1, 4]\n"
            "    var z : float32[-1, 4]\n"
            "    var z.x_0 : float32[-1, 4]\n"
            "    op scale(X=[x]) -> (Out=[z]) {bias=0.25f, bias_after_scale=false, scale=2.0f}\n"
            "    op scale(X=[z]) -> (Out=[z.x_0]) {bias=0.0f, scale=0.25f}\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(out.size(), 2u);
}

TEST_F(PassTest, FailingPassLeavesProgramsUnchanged) {
  Status s = Run({{"fail", true}, {"new_program", std::string("pserver.0")}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_EQ(s.message(),
            "pass 'edit_pass' (plugin 'edit_pass'): edit_pass: asked to fail after editing");
}

TEST_F(PassTest, InvalidResultIsRejectedByTheVerifier) {
  Status s = Run({{"dangle", true}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("pass 'edit_pass' (plugin 'edit_pass') left program 'main' "
                                     "invalid: block 0, op 2 (scale): input X reads 'nowhere', "
                                     "which is not declared"));
}

TEST_F(PassTest, AbiMisuseComesBackAsAStatus) {
  Status s = Run({{"misuse", true}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kOutOfRange);
  EXPECT_EQ(s.message(), "pass 'edit_pass' (plugin 'edit_pass'): op_get: block 7 is out of "
                         "range (program 'main' has 1 blocks)");
}

TEST_F(PassTest, MissingProgramIsReported) {
  ProgramSet only_startup;
  only_startup["startup"];
  Status s = RunPass(*pass_, only_startup, PassContextInfo{}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("pass 'edit_pass' (plugin 'edit_pass'): program_get: no "
                                     "program 'main'"));
}

TEST_F(PassTest, OptionsAreChecked) {
  Status unknown = Run({{"cont", 2}});
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);
  EXPECT_EQ(unknown.message(),
            "pass 'edit_pass' (plugin 'edit_pass') has no option 'cont' (did you mean "
            "'count'?); it accepts count, dangle, factor, fail, misuse, new_program and note");
  Status kind = Run({{"count", std::string("two")}});
  EXPECT_EQ(kind.code(), Code::kInvalidArgument);
  EXPECT_EQ(kind.message(),
            "pass 'edit_pass' (plugin 'edit_pass'): option 'count' is int, got string \"two\"");
  Status real_for_int = Run({{"count", 1.5}});
  EXPECT_EQ(real_for_int.message(),
            "pass 'edit_pass' (plugin 'edit_pass'): option 'count' is int, got double 1.5");
  Status too_big = Run({{"count", int64_t{1} << 40}});
  EXPECT_EQ(too_big.code(), Code::kInvalidArgument);
  Status bool_for_string = Run({{"note", true}});
  EXPECT_EQ(bool_for_string.code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace fleet
