// The built-in collective passes (host/passes/), text in and text out: each case parses a
// program set from data/passes/, runs one pass through the registry and RunPass, and compares
// the printed result with an expected program set written by hand from the pass's contract.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "job/pipeline.h"
#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "ops/verifier.h"
#include "passes/builtin_passes.h"
#include "plugin/pass.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

using ::testing::HasSubstr;
using ProgramSet = std::map<std::string, ir::Program>;

std::string ReadPassData(const std::string& name) {
  std::ifstream in(std::string(FLEET_IR_TEST_DATA_DIR) + "/passes/" + name);
  EXPECT_TRUE(in.good()) << "cannot open data/passes/" << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ProgramSet ParsePassData(const std::string& name) {
  auto set = ir::ParseProgramSet(ReadPassData(name), name);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? *set : ProgramSet();
}

// The first line where the two texts differ, for a readable failure next to gtest's diff.
std::string FirstDifference(const std::string& got, const std::string& want) {
  std::istringstream g(got), w(want);
  std::string gl, wl;
  for (int line = 1;; ++line) {
    bool gok = static_cast<bool>(std::getline(g, gl));
    bool wok = static_cast<bool>(std::getline(w, wl));
    if (!gok && !wok) return "no difference";
    if (!gok || !wok || gl != wl) {
      return "first difference at line " + std::to_string(line) + ":\n  got:  " +
             (gok ? gl : "<end>") + "\n  want: " + (wok ? wl : "<end>");
    }
  }
}

PassContextInfo Trainer(int32_t rank, int32_t world_size) {
  PassContextInfo ctx;
  ctx.rank = rank;
  ctx.world_size = world_size;
  return ctx;
}

class BuiltinPassTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new PluginRegistry(LoadOptions{});
    Status s = RegisterBuiltinPasses(*registry_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }

  static const ComponentRecord& Pass(const std::string& name) {
    const ComponentRecord* pass = registry_->Find(FLEET_COMPONENT_PASS, name);
    EXPECT_NE(pass, nullptr) << name;
    return *pass;
  }

  // Runs `pass` on `programs`; a failure must leave them untouched.
  static Status Run(const std::string& pass, ProgramSet& programs, const PassContextInfo& ctx,
                    const ir::AttrMap& options) {
    const ProgramSet before = programs;
    Status s = RunPass(Pass(pass), programs, ctx, options);
    if (!s.ok()) {
      EXPECT_TRUE(programs == before) << "a failed pass changed the programs";
    }
    return s;
  }

  // input file -> pass -> compare with the expected file, exactly.
  static void ExpectTransform(const std::string& pass, const ir::AttrMap& options,
                              const PassContextInfo& ctx, const std::string& input,
                              const std::string& expected) {
    ProgramSet programs = ParsePassData(input);
    ASSERT_FALSE(programs.empty());
    for (const auto& [name, program] : programs) {
      Status v = ir::VerifyProgram(program);
      ASSERT_TRUE(v.ok()) << input << " program " << name << ": " << v.ToString();
    }
    Status s = Run(pass, programs, ctx, options);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ProgramSet want = ParsePassData(expected);
    ASSERT_FALSE(want.empty());
    const std::string got_text = ir::PrintProgramSet(programs);
    const std::string want_text = ir::PrintProgramSet(want);
    EXPECT_EQ(got_text, want_text) << pass << " on " << input << " vs " << expected << ": "
                                   << FirstDifference(got_text, want_text);
    EXPECT_TRUE(programs == want);
  }

  static PluginRegistry* registry_;
};

PluginRegistry* BuiltinPassTest::registry_ = nullptr;

TEST_F(BuiltinPassTest, RegistersTheHostPassesWithOptions) {
  for (const char* name : {"grad_allreduce", "local_sgd", "fuse_allreduce", "sync_batch_norm"}) {
    const ComponentRecord& pass = Pass(name);
    EXPECT_EQ(pass.plugin, "host");
    EXPECT_FALSE(pass.summary.empty());
  }
  auto ga = PassOptionDefaults(Pass("grad_allreduce"));
  ASSERT_TRUE(ga.ok()) << ga.status().ToString();
  EXPECT_EQ(ga->size(), 2u);
  EXPECT_TRUE(ga->at("nrings") == ir::Attribute(int32_t{1}));
  EXPECT_TRUE(ga->at("sparse_exchange") == ir::Attribute(std::string("auto")));
  auto ls = PassOptionDefaults(Pass("local_sgd"));
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(ls->size(), 2u);
  EXPECT_TRUE(ls->at("k_steps") == ir::Attribute(int32_t{1}));
  auto fa = PassOptionDefaults(Pass("fuse_allreduce"));
  ASSERT_TRUE(fa.ok());
  EXPECT_TRUE(fa->at("bucket_mb") == ir::Attribute(32.0));

  Status again = RegisterBuiltinPasses(*registry_);
  EXPECT_EQ(again.code(), Code::kAlreadyExists) << again.ToString();
}

TEST_F(BuiltinPassTest, GradAllReduceOneRing) {
  ExpectTransform("grad_allreduce", {}, Trainer(1, 2), "mlp2_input.ir",
                  "grad_allreduce_r1_expected.ir");
}

TEST_F(BuiltinPassTest, GradAllReduceTwoRingsAlternate) {
  ExpectTransform("grad_allreduce", {{"nrings", int64_t{2}}}, Trainer(1, 2), "mlp2_input.ir",
                  "grad_allreduce_r2_expected.ir");
}

TEST_F(BuiltinPassTest, LocalSgdEveryStep) {
  ExpectTransform("local_sgd", {}, Trainer(0, 4), "mlp2_input.ir", "local_sgd_k1_expected.ir");
}

TEST_F(BuiltinPassTest, LocalSgdKStepsAddsLocalProgram) {
  ExpectTransform("local_sgd", {{"k_steps", int32_t{3}}, {"nrings", int32_t{2}}}, Trainer(1, 2),
                  "mlp2_input.ir", "local_sgd_k3_expected.ir");
}

// concat over a data var: concat_grad writes the placeholder @EMPTY@ for the data var's entry.
// The pass leaves it where it is; no allreduce, broadcast or declaration names it, and the
// result verifies (it used to fail: '@EMPTY@' not declared).
TEST_F(BuiltinPassTest, GradAllReducePassesOverTheEmptyPlaceholder) {
  ExpectTransform("grad_allreduce", {}, Trainer(1, 2), "concat_data_input.ir",
                  "concat_data_grad_allreduce_expected.ir");
}

TEST_F(BuiltinPassTest, EveryCollectivePassKeepsTheEmptyPlaceholder) {
  for (const char* pass : {"grad_allreduce", "local_sgd"}) {
    ProgramSet programs = ParsePassData("concat_data_input.ir");
    Status s = Run(pass, programs, Trainer(0, 2), {});
    ASSERT_TRUE(s.ok()) << pass << ": " << s.ToString();
    if (std::string(pass) == "grad_allreduce") {
      s = Run("fuse_allreduce", programs, Trainer(0, 2), {});
      ASSERT_TRUE(s.ok()) << "fuse_allreduce: " << s.ToString();
    }
    const ir::Program& main = programs.at("main");
    EXPECT_EQ(main.global().FindVar("@EMPTY@"), nullptr) << pass;
    int placeholders = 0;
    for (const ir::Op& op : main.global().ops) {
      for (const auto& [slot, names] : op.outputs) {
        placeholders += static_cast<int>(std::count(names.begin(), names.end(), "@EMPTY@"));
      }
      for (const auto& [slot, names] : op.inputs) {
        EXPECT_EQ(std::count(names.begin(), names.end(), "@EMPTY@"), 0) << pass << " " << op.type;
      }
    }
    EXPECT_EQ(placeholders, 1) << pass;
  }
}

// Allreduce sizes in program order: fc_1.b_0 8 B, fc_1.w_0 24 B, fc_0.b_0 12 B, fc_0.w_0 24 B.
// 36 bytes: {8, 24} (12 more would make 44) and {12, 24} (exactly 36).
TEST_F(BuiltinPassTest, FuseAllReduceTwoBuckets) {
  ExpectTransform("fuse_allreduce", {{"bucket_mb", 36.0 / (1024.0 * 1024.0)}}, Trainer(1, 2),
                  "grad_allreduce_r1_expected.ir", "fuse_two_buckets_expected.ir");
}

TEST_F(BuiltinPassTest, FuseAllReduceOneBucket) {
  ExpectTransform("fuse_allreduce", {}, Trainer(1, 2), "grad_allreduce_r1_expected.ir",
                  "fuse_one_bucket_expected.ir");
}

// A limit below every tensor: every bucket holds one op, nothing changes.
TEST_F(BuiltinPassTest, FuseAllReduceTinyBucketsChangeNothing) {
  ExpectTransform("fuse_allreduce", {{"bucket_mb", 4.0 / (1024.0 * 1024.0)}}, Trainer(1, 2),
                  "grad_allreduce_r1_expected.ir", "grad_allreduce_r1_expected.ir");
}

// With two rings, each ring's allreduces form their own bucket.
TEST_F(BuiltinPassTest, FuseAllReduceKeepsRingsApart) {
  ProgramSet programs = ParsePassData("grad_allreduce_r2_expected.ir");
  ASSERT_TRUE(Run("fuse_allreduce", programs, Trainer(1, 2), {}).ok());
  std::vector<const ir::Op*> reduces;
  for (const ir::Op& op : programs.at("main").global().ops) {
    if (op.type == "c_allreduce_sum") reduces.push_back(&op);
  }
  ASSERT_EQ(reduces.size(), 2u);
  // Ring 1 holds the biases and ring 0 the weights; the bias bucket closes first (fc_0.b_0's
  // allreduce comes before fc_0.w_0's).
  EXPECT_EQ(reduces[0]->Input("X"),
            (std::vector<std::string>{"fc_1.b_0@GRAD", "fc_0.b_0@GRAD"}));
  EXPECT_EQ(reduces[1]->Input("X"),
            (std::vector<std::string>{"fc_1.w_0@GRAD", "fc_0.w_0@GRAD"}));
  EXPECT_TRUE(*reduces[0]->FindAttr("ring_id") == ir::Attribute(int32_t{1}));
  EXPECT_TRUE(*reduces[1]->FindAttr("ring_id") == ir::Attribute(int32_t{0}));
}

// The X lists of the c_allreduce_sum ops of main, in order.
std::vector<std::vector<std::string>> AllReduceLists(const ProgramSet& programs) {
  std::vector<std::vector<std::string>> lists;
  for (const ir::Op& op : programs.at("main").global().ops) {
    if (op.type == "c_allreduce_sum") lists.push_back(op.Input("X"));
  }
  return lists;
}

// An allreduce of a var with an unknown dim stays as it is (with its sync); the others fuse
// around it.
TEST_F(BuiltinPassTest, FuseAllReduceLeavesUnknownSizesAlone) {
  ProgramSet programs = ParsePassData("grad_allreduce_r1_expected.ir");
  programs.at("main").global().FindVar("fc_1.w_0@GRAD")->shape = {-1, 2};
  ASSERT_TRUE(Run("fuse_allreduce", programs, Trainer(1, 2), {}).ok());
  using L = std::vector<std::string>;
  EXPECT_EQ(AllReduceLists(programs),
            (std::vector<L>{{"fc_1.w_0@GRAD"},
                            {"fc_1.b_0@GRAD", "fc_0.b_0@GRAD", "fc_0.w_0@GRAD"}}));
  int syncs = 0;
  for (const ir::Op& op : programs.at("main").global().ops) {
    if (op.type == "c_sync_calc_stream") ++syncs;
  }
  EXPECT_EQ(syncs, 2);
}

// An op reading a gradient between its allreduce and the next one closes the bucket, so no
// allreduce moves past a reader of its tensor.
TEST_F(BuiltinPassTest, FuseAllReduceNeverMovesPastAReader) {
  ProgramSet programs = ParsePassData("grad_allreduce_r1_expected.ir");
  ir::Block& block = programs.at("main").global();
  ir::Var probe;
  probe.name = "probe";
  probe.shape = {2};
  ASSERT_TRUE(block.AddVar(probe).ok());
  auto it = std::find_if(block.ops.begin(), block.ops.end(),
                         [](const ir::Op& op) { return op.type == "mul_grad"; });
  ASSERT_NE(it, block.ops.end());
  block.ops.insert(it, ir::MakeOp("scale", {{"X", {"fc_1.b_0@GRAD"}}}, {{"Out", {"probe"}}},
                                  {{"op_role", int32_t{1}}}));
  ASSERT_TRUE(Run("fuse_allreduce", programs, Trainer(1, 2), {}).ok());
  using L = std::vector<std::string>;
  EXPECT_EQ(AllReduceLists(programs),
            (std::vector<L>{{"fc_1.b_0@GRAD"},
                            {"fc_1.w_0@GRAD", "fc_0.b_0@GRAD", "fc_0.w_0@GRAD"}}));
}

TEST_F(BuiltinPassTest, SyncBatchNormReplacesTheTrainingBatchNorm) {
  ExpectTransform("sync_batch_norm", {}, Trainer(0, 2), "bn_grad_allreduce_input.ir",
                  "bn_sync_batch_norm_expected.ir");
}

TEST_F(BuiltinPassTest, SyncBatchNormLeavesProgramsWithoutBatchNormAlone) {
  ExpectTransform("sync_batch_norm", {}, Trainer(1, 2), "grad_allreduce_r1_expected.ir",
                  "grad_allreduce_r1_expected.ir");
}

// The batch statistics travel through SavedMean/SavedVariance, named per batch_norm: a
// batch_norm without them, or two writing the same SavedMean, is refused naming the op.
TEST_F(BuiltinPassTest, SyncBatchNormRefusesBatchNormsItCannotPair) {
  auto find_bn = [](ir::Block& block) -> size_t {
    for (size_t i = 0; i < block.ops.size(); ++i) {
      if (block.ops[i].type == "batch_norm") return i;
    }
    ADD_FAILURE() << "no batch_norm in the input";
    return 0;
  };
  ProgramSet programs = ParsePassData("bn_grad_allreduce_input.ir");
  ir::Block& block = programs.at("main").global();
  const size_t bn = find_bn(block);
  block.ops[bn].outputs.erase("SavedVariance");
  Status s = Run("sync_batch_norm", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("op " + std::to_string(bn) +
                                     " (batch_norm) writes no SavedMean/SavedVariance"));

  programs = ParsePassData("bn_grad_allreduce_input.ir");
  ir::Block& again = programs.at("main").global();
  const size_t first = find_bn(again);
  again.ops.insert(again.ops.begin() + static_cast<ptrdiff_t>(first) + 1, again.ops[first]);
  s = Run("sync_batch_norm", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("op " + std::to_string(first + 1) +
                                     " (batch_norm) writes SavedMean 'batch_norm_0.tmp_0', as "
                                     "op " + std::to_string(first) + " does"));
}

TEST_F(BuiltinPassTest, SyncBatchNormNeedsACollectivePassFirst) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  Status s = Run("sync_batch_norm", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("initialises no ring 0"));
}

TEST_F(BuiltinPassTest, GradAllReduceWorldSizeOneIsValid) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  Status s = Run("grad_allreduce", programs, Trainer(0, 1), {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  const auto& ops = programs.at("main").global().ops;
  ASSERT_GT(ops.size(), 6u);
  EXPECT_EQ(ops[6].type, "scale");
  EXPECT_TRUE(*ops[6].FindAttr("scale") == ir::Attribute(1.0f));
}

TEST_F(BuiltinPassTest, GradAllReduceNeedsLossSeed) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  for (ir::Op& op : programs.at("main").global().ops) {
    if (op.type == "fill_constant") op.attrs.erase("op_role");
  }
  Status s = Run("grad_allreduce", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("pass 'grad_allreduce' (plugin 'host')"));
  EXPECT_THAT(s.message(), HasSubstr("no loss-gradient seed"));
}

TEST_F(BuiltinPassTest, GradAllReduceNeedsGradients) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  for (ir::Op& op : programs.at("main").global().ops) op.attrs.erase("op_role_var");
  Status s = Run("grad_allreduce", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no gradients to all-reduce"));
}

TEST_F(BuiltinPassTest, PassesNeedTheirPrograms) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  programs.erase("startup");
  Status s = Run("grad_allreduce", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no 'startup' program (it has 'main')"));
  s = Run("local_sgd", programs, Trainer(0, 2), {});
  EXPECT_THAT(s.message(), HasSubstr("no 'startup' program"));
  programs = ParsePassData("mlp2_input.ir");
  programs.erase("main");
  s = Run("fuse_allreduce", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no 'main' program"));
}

TEST_F(BuiltinPassTest, UnknownOptionIsRejected) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  Status s = Run("grad_allreduce", programs, Trainer(0, 2), {{"nring", int32_t{2}}});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  auto expected = ResolvePassOptions(Pass("grad_allreduce"), {{"nring", int32_t{2}}});
  ASSERT_FALSE(expected.ok());
  EXPECT_EQ(s.message(), expected.status().message());
  EXPECT_THAT(s.message(), HasSubstr("has no option 'nring' (did you mean 'nrings'?)"));
}

TEST_F(BuiltinPassTest, BadOptionValuesAndContextAreRejected) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  Status s = Run("local_sgd", programs, Trainer(0, 2), {{"k_steps", int32_t{0}}});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("option 'k_steps' must be >= 1, got 0"));
  s = Run("grad_allreduce", programs, Trainer(0, 2), {{"nrings", int32_t{0}}});
  EXPECT_THAT(s.message(), HasSubstr("option 'nrings' must be >= 1, got 0"));
  s = Run("fuse_allreduce", programs, Trainer(0, 2), {{"bucket_mb", -1.0}});
  EXPECT_THAT(s.message(), HasSubstr("'bucket_mb' must be a positive number"));
  s = Run("grad_allreduce", programs, Trainer(2, 2), {});
  EXPECT_THAT(s.message(), HasSubstr("rank 2 is not in [0, world_size) for world_size 2"));
}

TEST_F(BuiltinPassTest, GradAllReduceTwiceIsRefused) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  ASSERT_TRUE(Run("grad_allreduce", programs, Trainer(0, 2), {}).ok());
  Status s = Run("grad_allreduce", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("already has a c_comm_init"));
}

TEST_F(BuiltinPassTest, LocalSgdNeedsUpdateOps) {
  ProgramSet programs = ParsePassData("mlp2_input.ir");
  auto& ops = programs.at("main").global().ops;
  std::erase_if(ops, [](const ir::Op& op) { return op.type == "sgd"; });
  Status s = Run("local_sgd", programs, Trainer(0, 2), {});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no update ops"));
}

// A sparse gradient (the CTR example's shared table, is_sparse=True) is gathered, not reduced:
// c_allgather of its entries from every rank into "<grad>@GATHER", which the ops after it (the
// update) read instead; the dense gradients are all-reduced as before. The pass's
// sparse_exchange option becomes the gather's attribute, and a value it does not know is refused.
TEST_F(BuiltinPassTest, SparseGradientsAreGatheredAndTheUpdateReadsTheGather) {
  auto built = BuildPrograms(std::string(FLEET_EXAMPLES_DIR) + "/ctr_dnn/ctr_dnn.fleet",
                             Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const std::string grad = "SparseFeatFactors@GRAD";
  ASSERT_NE(built->main.global().FindVar(grad), nullptr);
  ASSERT_TRUE(built->main.global().FindVar(grad)->selected_rows);
  ProgramSet programs{{"main", built->main}, {"startup", built->startup}};
  ProgramSet untouched = programs;
  Status bad = Run("grad_allreduce", untouched, Trainer(0, 2),
                   {{"sparse_exchange", std::string("sometimes")}});
  EXPECT_NE(bad.message().find("option 'sparse_exchange' must be \"auto\", \"gather\" or "
                               "\"dense\""),
            std::string::npos)
      << bad.ToString();
  Status s = Run("grad_allreduce", programs, Trainer(0, 2),
                 {{"sparse_exchange", std::string("dense")}});
  ASSERT_TRUE(s.ok()) << s.ToString();
  // fuse_allreduce buckets the all-reduces and leaves the gather alone.
  s = Run("fuse_allreduce", programs, Trainer(0, 2), {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  Status v = ir::VerifyProgram(programs.at("main"));
  ASSERT_TRUE(v.ok()) << v.ToString();
  const ir::Block& block = programs.at("main").global();
  const ir::Var* all = block.FindVar(grad + "@GATHER");
  ASSERT_NE(all, nullptr);
  EXPECT_TRUE(all->selected_rows);
  size_t gather = block.ops.size(), update = block.ops.size();
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const ir::Op& op = block.ops[i];
    if (op.type == "c_allgather") {
      EXPECT_EQ(gather, block.ops.size()) << "gathered twice";
      gather = i;
      EXPECT_EQ(op.Input("X"), std::vector<std::string>{grad});
      EXPECT_EQ(op.Output("Out"), std::vector<std::string>{grad + "@GATHER"});
      EXPECT_TRUE(*op.FindAttr("nranks") == ir::Attribute(int32_t{2}));
      ASSERT_NE(op.FindAttr("sparse_exchange"), nullptr);
      EXPECT_TRUE(*op.FindAttr("sparse_exchange") == ir::Attribute(std::string("dense")));
    }
    if (op.type == "c_allreduce_sum") {
      for (const std::string& x : op.Input("X")) EXPECT_NE(x, grad);
    }
    if (op.type == "adam" && op.InputOne("Param") == "SparseFeatFactors") {
      update = i;
      EXPECT_EQ(op.InputOne("Grad"), grad + "@GATHER");
    }
  }
  ASSERT_LT(gather, update);
  ASSERT_LT(update, block.ops.size());
}

// The real quick-start program: grad_allreduce then fuse_allreduce, checked structurally.
TEST_F(BuiltinPassTest, RealMlpThroughGradAllReduceAndFusePasses) {
  auto built = BuildPrograms(std::string(FLEET_EXAMPLES_DIR) + "/mlp/mlp.fleet",
                             Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ProgramSet programs{{"main", built->main}, {"startup", built->startup}};
  std::set<std::string> params;
  for (const auto& [name, var] : built->main.global().vars) {
    if (var.param) params.insert(name);
  }
  ASSERT_EQ(params.size(), 6u);

  Status s = Run("grad_allreduce", programs, Trainer(1, 2), {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = Run("fuse_allreduce", programs, Trainer(1, 2), {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const auto& [name, program] : programs) {
    Status v = ir::VerifyProgram(program);
    EXPECT_TRUE(v.ok()) << name << ": " << v.ToString();
  }

  const auto& ops = programs.at("main").global().ops;
  std::map<std::string, int> reduced;
  size_t seed = ops.size(), first_optimize = ops.size(), sync_comm = ops.size();
  size_t last_reduce = 0, allreduce_ops = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const int32_t role = ir::OpRoleOf(ops[i]);
    if ((role & 0x101) == 0x101 && seed == ops.size()) seed = i;
    if ((role & ir::op_role::kOptimize) && ops[i].type != "c_sync_comm_stream" &&
        first_optimize == ops.size()) {
      first_optimize = i;
    }
    if (ops[i].type == "c_sync_comm_stream" && sync_comm == ops.size()) sync_comm = i;
    if (ops[i].type == "c_allreduce_sum") {
      ++allreduce_ops;
      last_reduce = i;
      for (const std::string& v : ops[i].Input("X")) ++reduced[v];
    }
  }
  // Every parameter's gradient is all-reduced exactly once, and nothing else is.
  ASSERT_EQ(reduced.size(), params.size());
  for (const std::string& p : params) EXPECT_EQ(reduced[ir::GradVarName(p)], 1) << p;
  // All six gradients (about 84 KiB) fit one 32 MiB bucket.
  EXPECT_EQ(allreduce_ops, 1u);
  // The scale follows the seed and divides by the world size.
  ASSERT_LT(seed + 1, ops.size());
  EXPECT_EQ(ops[seed + 1].type, "scale");
  EXPECT_EQ(ops[seed + 1].Input("X"), ops[seed].OutputVars());
  EXPECT_TRUE(*ops[seed + 1].FindAttr("scale") == ir::Attribute(0.5f));
  // The stream sync sits after the allreduce and right before the first update op.
  ASSERT_LT(first_optimize, ops.size());
  EXPECT_EQ(sync_comm + 1, first_optimize);
  EXPECT_LT(last_reduce, sync_comm);
  EXPECT_EQ(ops[first_optimize].type, "sgd");

  // Startup: one comm init, then every parameter broadcast once.
  std::multiset<std::string> broadcast;
  int comm_inits = 0;
  for (const ir::Op& op : programs.at("startup").global().ops) {
    if (op.type == "c_comm_init") ++comm_inits;
    if (op.type == "c_broadcast") broadcast.insert(std::string(op.InputOne("X")));
  }
  EXPECT_EQ(comm_inits, 1);
  EXPECT_EQ(broadcast, std::multiset<std::string>(params.begin(), params.end()));
}

// local_sgd on the real program: valid, every parameter averaged once, a snapshot each.
TEST_F(BuiltinPassTest, RealMlpThroughLocalSgdPass) {
  auto built = BuildPrograms(std::string(FLEET_EXAMPLES_DIR) + "/mlp/mlp.fleet",
                             Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ProgramSet programs{{"main", built->main}, {"startup", built->startup}};
  Status s = Run("local_sgd", programs, Trainer(0, 3), {{"k_steps", int32_t{4}}});
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(programs.size(), 3u);
  EXPECT_TRUE(programs.at("main.local") == built->main);
  std::map<std::string, int> reduced;
  for (const ir::Op& op : programs.at("main").global().ops) {
    if (op.type == "c_allreduce_sum") ++reduced[std::string(op.InputOne("X"))];
    if (op.type == "scale") {
      EXPECT_TRUE(*op.FindAttr("scale") == ir::Attribute(static_cast<float>(1.0 / 3.0)));
    }
  }
  EXPECT_EQ(reduced.size(), 6u);
  for (const auto& [name, var] : built->main.global().vars) {
    if (!var.param) continue;
    EXPECT_EQ(reduced[name], 1) << name;
    const ir::Var* snap = programs.at("startup").global().FindVar(name + "@SNAPSHOT");
    ASSERT_NE(snap, nullptr) << name;
    EXPECT_TRUE(snap->persistable);
    EXPECT_EQ(snap->shape, var.shape);
  }
}

}  // namespace
}  // namespace fleet
