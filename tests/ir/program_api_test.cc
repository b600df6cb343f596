// The program-editing service (FleetProgramApi) called directly, as a plugin would: reads,
// edits, lifetimes of what reads return, and misuse answered with statuses.
#include <cstring>

#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include "ir/text.h"
#include "plugin/host_api.h"
#include "plugin/program_api.h"

namespace fleet {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kPrograms = R"(
program main {
  block 0 {
    var x : float32[-1, 4] stop_gradient
    var y : float32[-1, 4]
    param w : float32[4] {lr=1.0}
    op scale(X=[x]) -> (Out=[y]) {bias=1L, scale=2.0f, tags=["a", "b"]}
    op sum(X=[x, y]) -> (Out=[y])
  }
}
program startup {
  block 0 {
  }
}
)";

class ProgramApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto parsed = ir::ParseProgramSet(kPrograms, "api.ir");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    programs_ = *parsed;
    binding_ = std::make_unique<ProgramSetBinding>(programs_);
    set_ = binding_->handle();
    ASSERT_EQ(api_->program_get(set_, "main", &main_), nullptr);
  }

  // The status's code (OK for NULL), and its message in `message`; frees it.
  Code Take(FleetStatus* s, std::string* message = nullptr) {
    Status st = TakeStatus(s, "call");
    if (message != nullptr) *message = st.message();
    return st.code();
  }

  static FleetOpDesc Desc() {
    FleetOpDesc d{};
    d.struct_size = FLEET_STRUCT_SIZE(FleetOpDesc, attrs);
    return d;
  }
  static FleetVarDesc VarDesc() {
    FleetVarDesc d{};
    d.struct_size = FLEET_STRUCT_SIZE(FleetVarDesc, stop_gradient);
    return d;
  }
  static FleetAttr Attr(const char* name, int32_t type) {
    FleetAttr a{};
    a.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings);
    a.name = name;
    a.type = type;
    return a;
  }

  std::map<std::string, ir::Program> programs_;
  std::unique_ptr<ProgramSetBinding> binding_;
  FleetProgramSet* set_ = nullptr;
  FleetProgram* main_ = nullptr;
  const FleetProgramApi* api_ = ProgramApi();
};

TEST_F(ProgramApiTest, HostApiHandsOutThisTable) {
  EXPECT_EQ(HostProgramApi(), ProgramApi());
  EXPECT_EQ(api_->struct_size, FLEET_STRUCT_SIZE(FleetProgramApi, var_remove));
}

TEST_F(ProgramApiTest, ProgramsByName) {
  EXPECT_EQ(api_->program_count(set_), 2u);
  EXPECT_STREQ(api_->program_name(set_, 0), "main");
  EXPECT_STREQ(api_->program_name(set_, 1), "startup");
  EXPECT_EQ(api_->program_name(set_, 2), nullptr);
  FleetProgram* again = nullptr;
  ASSERT_EQ(api_->program_get(set_, "main", &again), nullptr);
  EXPECT_EQ(again, main_);  // one handle per program
  FleetProgram* p = nullptr;
  std::string msg;
  EXPECT_EQ(Take(api_->program_get(set_, "mian", &p), &msg), Code::kNotFound);
  EXPECT_THAT(msg, HasSubstr("no program 'mian' (the set has 'main' and 'startup')"));
  EXPECT_EQ(Take(api_->program_add(set_, "startup", &p)), Code::kAlreadyExists);
  ASSERT_EQ(api_->program_add(set_, "pserver.0", &p), nullptr);
  EXPECT_EQ(api_->block_count(p), 1);
  EXPECT_EQ(programs_.count("pserver.0"), 1u);
}

TEST_F(ProgramApiTest, OpGetDescribesTheOp) {
  EXPECT_EQ(api_->op_count(main_, 0), 2);
  FleetOpDesc op = Desc();
  ASSERT_EQ(api_->op_get(main_, 0, 0, &op), nullptr);
  EXPECT_STREQ(op.type, "scale");
  ASSERT_EQ(op.num_inputs, 1u);
  EXPECT_STREQ(op.inputs[0]->name, "X");
  ASSERT_EQ(op.inputs[0]->count, 1u);
  EXPECT_STREQ(op.inputs[0]->vars[0], "x");
  ASSERT_EQ(op.num_outputs, 1u);
  EXPECT_STREQ(op.outputs[0]->vars[0], "y");
  ASSERT_EQ(op.num_attrs, 3u);  // sorted by name
  EXPECT_STREQ(op.attrs[0]->name, "bias");
  EXPECT_EQ(op.attrs[0]->type, FLEET_ATTR_INT64);
  EXPECT_EQ(op.attrs[0]->i, 1);
  EXPECT_EQ(op.attrs[1]->type, FLEET_ATTR_FLOAT);
  EXPECT_EQ(op.attrs[1]->f, 2.0);
  EXPECT_EQ(op.attrs[2]->type, FLEET_ATTR_STRINGS);
  ASSERT_EQ(op.attrs[2]->count, 2u);
  EXPECT_STREQ(op.attrs[2]->strings[1], "b");

  // A second read does not invalidate the first.
  FleetOpDesc sum = Desc();
  ASSERT_EQ(api_->op_get(main_, 0, 1, &sum), nullptr);
  EXPECT_EQ(sum.inputs[0]->count, 2u);
  EXPECT_STREQ(op.type, "scale");
  EXPECT_STREQ(op.attrs[2]->strings[0], "a");

  FleetVarDesc v = VarDesc();
  ASSERT_EQ(api_->var_get(main_, 0, "x", &v), nullptr);
  EXPECT_STREQ(v.name, "x");
  EXPECT_EQ(v.dtype, FLEET_DTYPE_FLOAT32);
  ASSERT_EQ(v.ndim, 2);
  EXPECT_EQ(v.dims[0], -1);
  EXPECT_EQ(v.dims[1], 4);
  EXPECT_EQ(v.stop_gradient, 1);
  EXPECT_EQ(api_->var_count(main_, 0), 3u);
  ASSERT_EQ(api_->var_at(main_, 0, 0, &v), nullptr);
  EXPECT_STREQ(v.name, "w");
  EXPECT_EQ(v.persistable, 1);
}

TEST_F(ProgramApiTest, EditsMayReuseWhatWasRead) {
  // Append a copy of op 0 built straight from op_get's description, then point the copy's
  // input at the output of the original (again from a read of the same program).
  FleetOpDesc op = Desc();
  ASSERT_EQ(api_->op_get(main_, 0, 0, &op), nullptr);
  ASSERT_EQ(api_->op_insert(main_, 0, 2, &op), nullptr);
  ASSERT_EQ(api_->op_get(main_, 0, 2, &op), nullptr);
  FleetSlot in = *op.outputs[0];
  in.name = "X";
  ASSERT_EQ(api_->op_set_slot(main_, 0, 2, 0, &in), nullptr);
  FleetAttr d = Attr("eps", FLEET_ATTR_DOUBLE);
  d.f = 1e-5;
  ASSERT_EQ(api_->op_set_attr(main_, 0, 2, &d), nullptr);
  ASSERT_EQ(api_->op_remove(main_, 0, 1), nullptr);
  FleetVarDesc v = VarDesc();
  int64_t dims[] = {3, -1};
  v.name = "t";
  v.dtype = FLEET_DTYPE_INT32;
  v.ndim = 2;
  v.dims = dims;
  v.persistable = 1;
  ASSERT_EQ(api_->var_add(main_, 0, &v), nullptr);
  ASSERT_EQ(api_->var_remove(main_, 0, "t"), nullptr);
  ASSERT_EQ(api_->var_add(main_, 0, &v), nullptr);
  int32_t b = 0;
  ASSERT_EQ(api_->block_add(main_, 0, &b), nullptr);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(ir::PrintProgram(programs_.at("main")),
            "program {\n"
            "  block 0 {\n"
            "    var t : int32[3, -1] persistable\n"
            "    param w : float32[4] {lr=1.0}\n"
            "    var x : float32[-1, 4] stop_gradient\n"
            "    var y : float32[-1, 4]\n"
            "    op scale(X=[x]) -> (Out=[y]) {bias=1L, scale=2.0f, tags=[\"a\", \"b\"]}\n"
            "    op scale(X=[y]) -> (Out=[y]) {bias=1L, eps=0.00001, scale=2.0f, "
            "tags=[\"a\", \"b\"]}\n"
            "  }\n"
            "  block 1 parent 0 {\n"
            "  }\n"
            "}\n");
}

TEST_F(ProgramApiTest, BadIndicesAreOutOfRange) {
  FleetOpDesc op = Desc();
  std::string msg;
  EXPECT_EQ(Take(api_->op_get(main_, 3, 0, &op), &msg), Code::kOutOfRange);
  EXPECT_EQ(msg, "call: op_get: block 3 is out of range (program 'main' has 1 blocks)");
  EXPECT_EQ(Take(api_->op_get(main_, -1, 0, &op)), Code::kOutOfRange);
  EXPECT_EQ(Take(api_->op_get(main_, 0, 2, &op), &msg), Code::kOutOfRange);
  EXPECT_EQ(msg, "call: op_get: op index 2 is out of range (block 0 of program 'main' has 2 ops)");
  EXPECT_EQ(Take(api_->op_get(main_, 0, -1, &op)), Code::kOutOfRange);
  EXPECT_EQ(Take(api_->op_remove(main_, 0, 2)), Code::kOutOfRange);
  ASSERT_EQ(api_->op_get(main_, 0, 0, &op), nullptr);
  EXPECT_EQ(Take(api_->op_insert(main_, 0, 3, &op)), Code::kOutOfRange);
  FleetVarDesc v = VarDesc();
  EXPECT_EQ(Take(api_->var_at(main_, 0, 3, &v)), Code::kOutOfRange);
  int32_t b = 0;
  EXPECT_EQ(Take(api_->block_add(main_, 1, &b)), Code::kOutOfRange);
  EXPECT_EQ(api_->op_count(main_, 1), 0);
  EXPECT_EQ(api_->var_count(main_, -1), 0u);
  FleetAttr blk = Attr("sub_block", FLEET_ATTR_BLOCK);
  blk.i = 1;
  EXPECT_EQ(Take(api_->op_set_attr(main_, 0, 0, &blk), &msg), Code::kOutOfRange);
  EXPECT_THAT(msg, HasSubstr("refers to block 1, but the program has 1 blocks"));
  EXPECT_EQ(ir::PrintProgram(programs_.at("main")),
            ir::PrintProgram(ir::ParseProgramSet(kPrograms, "x")->at("main")));
}

TEST_F(ProgramApiTest, MalformedArgumentsAreInvalid) {
  FleetOpDesc op = Desc();
  std::string msg;
  EXPECT_EQ(api_->program_count(nullptr), 0u);
  EXPECT_EQ(api_->block_count(nullptr), 0);
  EXPECT_EQ(Take(api_->op_get(nullptr, 0, 0, &op)), Code::kInvalidArgument);
  // A handle of the wrong kind is caught by its tag.
  EXPECT_EQ(Take(api_->op_get(reinterpret_cast<FleetProgram*>(set_), 0, 0, &op)),
            Code::kInvalidArgument);
  EXPECT_EQ(Take(api_->op_get(main_, 0, 0, nullptr)), Code::kInvalidArgument);
  FleetOpDesc tiny{};
  EXPECT_EQ(Take(api_->op_get(main_, 0, 0, &tiny)), Code::kInvalidArgument);
  EXPECT_EQ(Take(api_->op_insert(main_, 0, 0, nullptr)), Code::kInvalidArgument);
  EXPECT_EQ(Take(api_->program_get(set_, nullptr, &main_)), Code::kInvalidArgument);

  // A slot whose vars array is NULL, and one with a NULL var.
  FleetSlot slot{FLEET_STRUCT_SIZE(FleetSlot, vars), "X", 2, nullptr};
  EXPECT_EQ(Take(api_->op_set_slot(main_, 0, 0, 0, &slot), &msg), Code::kInvalidArgument);
  EXPECT_EQ(msg, "call: op_set_slot: slot 'X': vars is NULL but count is 2");
  const char* vars[] = {"x", nullptr};
  slot.vars = vars;
  EXPECT_EQ(Take(api_->op_set_slot(main_, 0, 0, 0, &slot)), Code::kInvalidArgument);
  slot.count = 1;
  EXPECT_EQ(Take(api_->op_set_slot(main_, 0, 0, 2, &slot)), Code::kInvalidArgument);

  FleetAttr bad = Attr("k", 99);
  EXPECT_EQ(Take(api_->op_set_attr(main_, 0, 0, &bad), &msg), Code::kInvalidArgument);
  EXPECT_EQ(msg, "call: op_set_attr: attr 'k': unknown attribute type 99");
  FleetAttr wide = Attr("k", FLEET_ATTR_INT);
  wide.i = int64_t{1} << 40;
  EXPECT_EQ(Take(api_->op_set_attr(main_, 0, 0, &wide)), Code::kInvalidArgument);
  FleetAttr flag = Attr("k", FLEET_ATTR_BOOL);
  flag.i = 2;
  EXPECT_EQ(Take(api_->op_set_attr(main_, 0, 0, &flag)), Code::kInvalidArgument);
  FleetAttr list = Attr("k", FLEET_ATTR_DOUBLES);
  list.count = 3;
  EXPECT_EQ(Take(api_->op_set_attr(main_, 0, 0, &list)), Code::kInvalidArgument);
  FleetAttr unnamed = Attr(nullptr, FLEET_ATTR_INT);
  EXPECT_EQ(Take(api_->op_set_attr(main_, 0, 0, &unnamed)), Code::kInvalidArgument);

  // An op with two slots of one name.
  FleetSlot x{FLEET_STRUCT_SIZE(FleetSlot, vars), "X", 1, vars};
  const FleetSlot* twice[] = {&x, &x};
  FleetOpDesc dup = Desc();
  dup.type = "scale";
  dup.num_inputs = 2;
  dup.inputs = twice;
  EXPECT_EQ(Take(api_->op_insert(main_, 0, 0, &dup), &msg), Code::kInvalidArgument);
  EXPECT_EQ(msg, "call: op_insert: inputs: slot 'X' is given twice");

  FleetVarDesc v = VarDesc();
  int64_t dims[] = {-2};
  v.name = "n";
  v.dtype = 0;
  EXPECT_EQ(Take(api_->var_add(main_, 0, &v)), Code::kInvalidArgument);
  v.dtype = FLEET_DTYPE_FLOAT32;
  v.ndim = 1;
  v.dims = dims;
  EXPECT_EQ(Take(api_->var_add(main_, 0, &v)), Code::kInvalidArgument);
  v.ndim = 1;
  v.dims = nullptr;
  EXPECT_EQ(Take(api_->var_add(main_, 0, &v)), Code::kInvalidArgument);
  v.name = "x";
  v.ndim = 0;
  EXPECT_EQ(Take(api_->var_add(main_, 0, &v)), Code::kAlreadyExists);
  EXPECT_EQ(Take(api_->var_get(main_, 0, "nope", &v)), Code::kNotFound);
  EXPECT_EQ(Take(api_->var_remove(main_, 0, "x"), &msg), Code::kFailedPrecondition);
  EXPECT_EQ(msg, "call: var_remove: var 'x' is still used by op 0 (scale) of block 0");

  // Nothing above changed the program.
  EXPECT_TRUE(programs_ == *ir::ParseProgramSet(kPrograms, "x"));
}

}  // namespace
}  // namespace fleet
