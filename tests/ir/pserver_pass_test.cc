// The built-in pserver pass (host/passes/pserver_*.{h,cc}): slicing against the table computed
// from Paddle's slice_variable, the hash dispatcher against FNV-1a worked by hand, and whole
// program sets (trainer main and startup, every server's main and startup) text in, text out,
// with expectations written by hand from the pass contract (pserver_pass.h).
#include <fstream>
#include <set>
#include <sstream>
#include <variant>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "job/pipeline.h"
#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "ops/verifier.h"
#include "passes/builtin_passes.h"
#include "passes/pserver_plan.h"
#include "passes/pserver_slicing.h"
#include "plugin/pass.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

using ::testing::HasSubstr;
using ProgramSet = std::map<std::string, ir::Program>;
using passes::pserver::AllVars;
using passes::pserver::Dispatch;
using passes::pserver::Fnv1a64;
using passes::pserver::SliceRows;
using passes::pserver::SplitMethod;

const std::vector<std::string> kEndpoints = {"127.0.0.1:6170", "127.0.0.1:6171"};

std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(FLEET_IR_TEST_DATA_DIR) + "/passes/" + name);
  EXPECT_TRUE(in.good()) << "cannot open data/passes/" << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ProgramSet ParseData(const std::string& name) {
  auto set = ir::ParseProgramSet(ReadData(name), name);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? *set : ProgramSet();
}

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

PassContextInfo Trainer(int32_t rank, int32_t trainers,
                        std::vector<std::string> endpoints = kEndpoints) {
  PassContextInfo ctx;
  ctx.rank = rank;
  ctx.world_size = trainers;
  ctx.role = "trainer";
  ctx.pserver_endpoints = std::move(endpoints);
  return ctx;
}

// ---- slicing and placement ------------------------------------------------------------------

struct SliceCase {
  std::vector<int64_t> shape;
  int32_t servers;
  int64_t min_block;
  std::vector<int64_t> rows;  // dim-0 size of each block
};

TEST(PserverSlicing, MatchesPaddleSliceVariableTable) {
  // Section 3.1's table of slice_variable results (blocks as dim-0 sizes).
  const std::vector<SliceCase> cases = {
      {{1000}, 2, 8192, {1000}},
      {{1000, 1000}, 2, 8192, {500, 500}},
      {{1000, 1000}, 2, 1048576, {1000}},
      {{100000}, 3, 8192, {33334, 33334, 33332}},
      {{1000, 100}, 3, 8192, {334, 334, 332}},
      {{1001, 1000}, 2, 8192, {501, 500}},
      {{7, 4096}, 4, 8192, {3, 3, 1}},
      {{5, 4096}, 4, 8192, {3, 2}},
      {{8, 4096}, 4, 8192, {2, 2, 2, 2}},
      {{16383}, 2, 8192, {16383}},
      {{16384}, 2, 8192, {8192, 8192}},
      {{784, 128}, 2, 8192, {392, 392}},
      {{128, 10}, 2, 8192, {128}},
      {{3, 3, 64, 64}, 4, 8192, {1, 1, 1}},
  };
  for (const SliceCase& c : cases) {
    auto rows = SliceRows(c.shape, c.servers, c.min_block, "v");
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    EXPECT_EQ(*rows, c.rows) << ir::ShapeText(c.shape) << " on " << c.servers << " servers, "
                             << "min_block " << c.min_block;
  }
  // The fc weight of the program tests: 128 x 256 on 2 servers -> 64 + 64 rows.
  EXPECT_EQ(*SliceRows({128, 256}, 2, 8192, "w"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(*SliceRows({128, 256}, 2, 65536, "w"), (std::vector<int64_t>{128}));
}

TEST(PserverSlicing, RejectsUnknownDimsAndBadCounts) {
  auto r = SliceRows({-1, 4}, 2, 8192, "parameter 'p'");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("parameter 'p' has an unknown"));
  EXPECT_FALSE(SliceRows({4}, 0, 8192, "v").ok());
  EXPECT_FALSE(SliceRows({4}, 2, 0, "v").ok());
  EXPECT_EQ(*SliceRows({}, 2, 1, "scalar"), (std::vector<int64_t>{1}));
}

TEST(PserverSlicing, Fnv1aAndHashDispatchAreFixed) {
  // FNV-1a 64 by hand: h = 14695981039346656037; for "a" (0x61): h ^= 0x61 -> 0xcbf29ce484222344,
  // h *= 1099511628211 (mod 2^64) -> 0xaf63dc4c8601ec8c (the published test vector).
  EXPECT_EQ(Fnv1a64(""), 14695981039346656037ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
  // 0xaf63dc4c8601ec8c = 12638187200555641996: even -> server 0 of 2; digit sum 88 -> 1 mod 3.
  EXPECT_EQ(Dispatch({"a"}, 2, SplitMethod::kHashName), (std::vector<int32_t>{0}));
  EXPECT_EQ(Dispatch({"a"}, 3, SplitMethod::kHashName), (std::vector<int32_t>{1}));
  // 0x85944171f73967e8 = 9625390261332436968: even -> 0 of 2; digit sum 87 -> 0 mod 3.
  EXPECT_EQ(Dispatch({"foobar", "a"}, 3, SplitMethod::kHashName),
            (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(Dispatch({"x", "y", "z", "w", "v"}, 2, SplitMethod::kRoundRobin),
            (std::vector<int32_t>{0, 1, 0, 1, 0}));
}

// ---- the pass on program sets ---------------------------------------------------------------

class PserverPassTest : public ::testing::Test {
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

  static Status Run(ProgramSet& programs, const PassContextInfo& ctx,
                    const ir::AttrMap& options) {
    const ComponentRecord* pass = registry_->Find(FLEET_COMPONENT_PASS, "pserver");
    EXPECT_NE(pass, nullptr);
    if (pass == nullptr) return NotFound("pserver");
    const ProgramSet before = programs;
    Status s = RunPass(*pass, programs, ctx, options);
    if (!s.ok()) {
      EXPECT_TRUE(programs == before) << "a failed pass changed the programs";
    }
    return s;
  }

  // `built` (the CTR-DNN example) transpiled for trainer 1 of 2 on servers h:1 and h:2; every
  // program of the set verifies. Empty on failure.
  static ProgramSet TrainerOneOfTwo(const frontend::ParsedProgram& built) {
    Config config;
    config.strategy_mode = "pserver";
    Role role;
    role.world_size = 2;
    role.rank = 1;
    role.pserver_endpoints = {"h:1", "h:2"};
    auto set = Transpile(config, role, built, *registry_);
    EXPECT_TRUE(set.ok()) << set.status().ToString();
    if (!set.ok()) return {};
    for (const auto& [name, program] : *set) {
      Status v = ir::VerifyProgram(program);
      EXPECT_TRUE(v.ok()) << name << ": " << v.ToString();
    }
    return *set;
  }

  // input -> pserver -> compare (the programs named in `expected` only, when `only` is set).
  static void ExpectTransform(const ir::AttrMap& options, const PassContextInfo& ctx,
                              const std::string& input, const std::string& expected,
                              bool only_expected_names = false) {
    ProgramSet programs = ParseData(input);
    ASSERT_FALSE(programs.empty());
    for (const auto& [name, program] : programs) {
      Status v = ir::VerifyProgram(program);
      ASSERT_TRUE(v.ok()) << input << " program " << name << ": " << v.ToString();
    }
    Status s = Run(programs, ctx, options);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ProgramSet want = ParseData(expected);
    ASSERT_FALSE(want.empty());
    if (only_expected_names) {
      ProgramSet picked;
      for (const auto& [name, program] : want) {
        ASSERT_TRUE(programs.count(name)) << "no program " << name;
        picked[name] = programs.at(name);
      }
      programs = std::move(picked);
    }
    const std::string got_text = ir::PrintProgramSet(programs);
    const std::string want_text = ir::PrintProgramSet(want);
    EXPECT_EQ(got_text, want_text) << input << " vs " << expected << ": "
                                   << FirstDifference(got_text, want_text);
  }

  static PluginRegistry* registry_;
};

PluginRegistry* PserverPassTest::registry_ = nullptr;

TEST_F(PserverPassTest, RegisteredWithOptions) {
  const ComponentRecord* pass = registry_->Find(FLEET_COMPONENT_PASS, "pserver");
  ASSERT_NE(pass, nullptr);
  EXPECT_EQ(pass->plugin, "host");
  auto defaults = PassOptionDefaults(*pass);
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->at("sync"), ir::Attribute(true));
  EXPECT_EQ(defaults->at("slice_var_up"), ir::Attribute(true));
  EXPECT_EQ(defaults->at("min_block_size"), ir::Attribute(int32_t{8192}));
  EXPECT_EQ(defaults->at("split_method"), ir::Attribute(std::string("round_robin")));
  EXPECT_EQ(defaults->at("init"), ir::Attribute(std::string("full")));
}

TEST_F(PserverPassTest, SyncSlicedSgd) {
  ExpectTransform({}, Trainer(1, 2), "pserver_fc_sgd_input.ir",
                  "pserver_fc_sgd_sync_expected.ir");
}

TEST_F(PserverPassTest, SyncWithoutSlicing) {
  ExpectTransform({{"slice_var_up", false}}, Trainer(1, 2), "pserver_fc_sgd_input.ir",
                  "pserver_fc_sgd_whole_expected.ir");
}

TEST_F(PserverPassTest, LargeMinBlockSizeSplitsNothing) {
  // 32768 elements < 65536: every parameter is one block, exactly as without slicing.
  ExpectTransform({{"min_block_size", int32_t{65536}}}, Trainer(1, 2),
                  "pserver_fc_sgd_input.ir", "pserver_fc_sgd_whole_expected.ir");
}

TEST_F(PserverPassTest, AsyncHasNoSuffixesBarriersOrMerges) {
  ExpectTransform({{"sync", false}}, Trainer(1, 2), "pserver_fc_sgd_input.ir",
                  "pserver_fc_sgd_async_expected.ir");
}

// GEO-SGD: the trainer keeps every op (its optimizer included) behind one geo_sgd op over the
// parameters, and its startup keeps every initializer and then takes the servers' values; each
// server holds its parameter blocks only, each with a block that adds the "<block>.delta" the
// trainers send (distributed_mode 3).
TEST_F(PserverPassTest, GeoKeepsTheOptimizerOnTheTrainer) {
  ExpectTransform({{"sync", false}, {"geo_k_steps", int32_t{5}}}, Trainer(1, 2),
                  "pserver_fc_sgd_input.ir", "pserver_fc_sgd_geo_expected.ir");
  ProgramSet programs = ParseData("pserver_fc_sgd_input.ir");
  Status s = Run(programs, Trainer(1, 2), {{"geo_k_steps", int32_t{5}}});
  EXPECT_THAT(s.message(), HasSubstr("GEO-SGD (geo_k_steps > 0) needs asynchronous servers"));
}

TEST_F(PserverPassTest, ShardInitCutsInitializers) {
  ExpectTransform({{"init", std::string("shard")}}, Trainer(1, 2), "pserver_fc_sgd_input.ir",
                  "pserver_fc_sgd_shard_startup_expected.ir", /*only_expected_names=*/true);
}

TEST_F(PserverPassTest, MomentumVelocityIsSlicedWithItsParam) {
  ExpectTransform({}, Trainer(0, 2), "pserver_fc_momentum_input.ir",
                  "pserver_fc_momentum_expected.ir");
}

TEST_F(PserverPassTest, LearningRateScheduleMovesToTheServers) {
  // One trainer: no ".trainer_" suffix and no sum/scale, but still the sync barriers.
  ExpectTransform({}, Trainer(0, 1), "pserver_fc_lr_decay_input.ir",
                  "pserver_fc_lr_decay_expected.ir");
}

TEST_F(PserverPassTest, RegularizationAndAccumulatorsMoveWithTheirBlock) {
  ExpectTransform({}, Trainer(0, 2), "pserver_fc_adam_l2_input.ir",
                  "pserver_fc_adam_l2_server0_expected.ir", /*only_expected_names=*/true);
  // The trainer keeps none of it: no optimize op, no accumulator, no learning rate.
  ProgramSet programs = ParseData("pserver_fc_adam_l2_input.ir");
  ASSERT_TRUE(Run(programs, Trainer(0, 2), {}).ok());
  for (const char* name : {"main", "startup"}) {
    const ir::Block& block = programs.at(name).global();
    for (const auto& [var, decl] : block.vars) {
      EXPECT_EQ(var.find("_moment"), std::string::npos) << name << ": " << var;
      EXPECT_EQ(var.find("_pow_acc"), std::string::npos) << name << ": " << var;
      EXPECT_EQ(var.find("learning_rate"), std::string::npos) << name << ": " << var;
      EXPECT_EQ(var.find("l2_decay"), std::string::npos) << name << ": " << var;
    }
    for (const ir::Op& op : block.ops) {
      EXPECT_NE(op.type, "adam") << name;
      EXPECT_EQ(ir::OpRoleOf(op) & ir::op_role::kOptimize, 0) << name << ": " << op.type;
    }
  }
}

// concat over a data var: the trainer program keeps concat_grad with its placeholder @EMPTY@;
// the placeholder is never declared, sent or served (it used to fail: '@EMPTY@' not declared).
TEST_F(PserverPassTest, SyncPassesOverTheEmptyPlaceholder) {
  ExpectTransform({}, Trainer(1, 2), "concat_data_input.ir", "concat_data_pserver_expected.ir",
                  /*only_expected_names=*/true);
}

TEST_F(PserverPassTest, EveryResultVerifies) {
  for (const char* input : {"pserver_fc_sgd_input.ir", "pserver_fc_momentum_input.ir",
                            "pserver_fc_lr_decay_input.ir", "pserver_fc_adam_l2_input.ir",
                            "concat_data_input.ir"}) {
    for (const std::string method : {"round_robin", "hash_name"}) {
      for (const std::string init : {"full", "shard"}) {
        ProgramSet programs = ParseData(input);
        Status s = Run(programs, Trainer(0, 3, {"a:1", "b:2", "c:3"}),
                       {{"split_method", method}, {"init", init}, {"min_block_size", 1000}});
        EXPECT_TRUE(s.ok()) << input << " " << method << " " << init << ": " << s.ToString();
        EXPECT_EQ(programs.size(), 8u);
      }
    }
  }
}

// The real quick-start program through the pipeline's Transpile (strategy pserver), checked
// structurally: every parameter's rows are served exactly once, on the server recv names.
TEST_F(PserverPassTest, RealMlpThroughPipeline) {
  auto built = BuildPrograms(std::string(FLEET_EXAMPLES_DIR) + "/mlp/mlp.fleet",
                             Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  Config config;
  config.strategy_mode = "pserver";
  config.pserver.min_block_size = 4096;
  Role role;
  role.world_size = 3;
  role.rank = 2;
  auto none = Transpile(config, role, *built, *registry_);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("a pserver job needs pserver_endpoints"));

  role.pserver_endpoints = {"h:1", "h:2", "h:3"};
  auto set = Transpile(config, role, *built, *registry_);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  std::vector<std::string> names;
  for (const auto& [name, program] : *set) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"main", "pserver.0", "pserver.0.startup",
                                             "pserver.1", "pserver.1.startup", "pserver.2",
                                             "pserver.2.startup", "startup"}));
  // Rows of each parameter served, from the servers' blocks.
  std::map<std::string, int64_t> served_rows;
  for (int s = 0; s < 3; ++s) {
    const ir::Program& server = set->at("pserver." + std::to_string(s));
    const ir::Op& listen = server.global().ops.at(0);
    ASSERT_EQ(listen.type, "listen_and_serv");
    EXPECT_TRUE(*listen.FindAttr("Fanin") == ir::Attribute(int32_t{3}));
    for (const ir::Block& block : server.blocks()) {
      for (const ir::Op& op : block.ops) {
        if (op.type != "sgd") continue;
        const std::string param(op.InputOne("Param"));
        const ir::Var* v = server.global().FindVar(param);
        ASSERT_NE(v, nullptr) << param;
        EXPECT_TRUE(v->persistable);
        served_rows[param.substr(0, param.find(".block"))] += v->shape.at(0);
      }
    }
  }
  std::map<std::string, int64_t> want;
  for (const auto& [name, var] : built->main.global().vars) {
    if (var.param) want[name] = var.shape.at(0);
  }
  EXPECT_EQ(served_rows, want);
  // The trainer is rank 2: its gradients carry ".trainer_2".
  bool suffixed = false;
  for (const ir::Op& op : set->at("main").global().ops) {
    if (op.type != "send") continue;
    for (const std::string& v : op.Input("X")) {
      EXPECT_NE(v.find(".trainer_2"), std::string::npos) << v;
      suffixed = true;
    }
  }
  EXPECT_TRUE(suffixed);
}

// CTR-DNN's table has a sparse gradient: the trainer cuts it at the servers' row blocks with
// split_selected_rows and sends the sparse blocks; each server receives them into persistable
// sparse vars, sums the two trainers' entries and scales them by 1/2 in a sparse temporary, and
// lists the gradient in sparse_grad_to_param. Every program verifies.
TEST_F(PserverPassTest, SparseTableGradientIsSentInSparseRowBlocks) {
  auto built = BuildPrograms(std::string(FLEET_EXAMPLES_DIR) + "/ctr_dnn/ctr_dnn.fleet",
                             Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const std::string table = "SparseFeatFactors", grad = table + "@GRAD";
  const ir::Var* declared = built->main.global().FindVar(grad);
  ASSERT_NE(declared, nullptr);
  ASSERT_TRUE(declared->selected_rows);
  const int64_t height = declared->shape.at(0);
  const ProgramSet set = TrainerOneOfTwo(*built);
  ASSERT_FALSE(set.empty());
  const ir::Block& main = set.at("main").global();
  std::vector<std::string> blocks;
  std::vector<int64_t> sections;
  for (const ir::Op& op : main.ops) {
    EXPECT_FALSE(op.type == "split_byref" && op.InputOne("X") == grad) << "cut as dense";
    if (op.type != "split_selected_rows") continue;
    EXPECT_EQ(op.InputOne("X"), grad);
    blocks = op.Output("Out");
    sections = ir::AttrAsInts(*op.FindAttr("height_sections")).value();
  }
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0], grad + ".block0.trainer_1");
  EXPECT_EQ(sections.at(0) + sections.at(1), height);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const ir::Var* v = main.FindVar(blocks[b]);
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(v->selected_rows);
    EXPECT_EQ(v->shape.at(0), sections[b]);
  }
  bool sent = false;
  for (const ir::Op& op : main.ops) {
    if (op.type == "send" && op.Input("X") == blocks) sent = true;
  }
  EXPECT_TRUE(sent);

  std::set<std::string> listed;
  for (int s = 0; s < 2; ++s) {
    const ir::Program& server = set.at("pserver." + std::to_string(s));
    const ir::Op& listen = server.global().ops.at(0);
    const auto* pairs =
        std::get_if<std::vector<std::string>>(listen.FindAttr("sparse_grad_to_param"));
    ASSERT_NE(pairs, nullptr);
    for (const std::string& pair : *pairs) {
      listed.insert(pair);
      const std::string merged = pair.substr(0, pair.find(':'));
      const size_t b = merged == grad + ".block0" ? 0 : 1;
      for (int t = 0; t < 2; ++t) {
        const ir::Var* part = server.global().FindVar(merged + ".trainer_" + std::to_string(t));
        ASSERT_NE(part, nullptr) << merged;
        EXPECT_TRUE(part->selected_rows && part->persistable);
        EXPECT_EQ(part->shape.at(0), sections[b]);
      }
      const ir::Var* m = server.global().FindVar(merged);
      ASSERT_NE(m, nullptr);
      EXPECT_TRUE(m->selected_rows);
      EXPECT_FALSE(m->persistable);
      bool summed = false, scaled = false, updated = false;
      for (const ir::Block& block : server.blocks()) {
        for (const ir::Op& op : block.ops) {
          if (op.type == "sum" && op.OutputOne("Out") == merged) summed = true;
          if (op.type == "scale" && op.InputOne("X") == merged) scaled = true;
          if (op.type == "adam" && op.InputOne("Grad") == merged) updated = true;
        }
      }
      EXPECT_TRUE(summed && scaled && updated) << merged;
    }
  }
  EXPECT_EQ(listed, (std::set<std::string>{grad + ".block0:" + table + ".block0",
                                           grad + ".block1:" + table + ".block1"}));
}

// Paddle's remote prefetch: a table with a sparse gradient never reaches the trainer. Its
// lookups become one distributed_lookup_table for all 26 slots, its gradients take its height
// as an attribute, and neither program initialises or receives it.
TEST_F(PserverPassTest, TheSparseTableStaysOnTheServersAndTheTrainerFetchesRows) {
  auto built = BuildPrograms(std::string(FLEET_EXAMPLES_DIR) + "/ctr_dnn/ctr_dnn.fleet",
                             Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const std::string table = "SparseFeatFactors";
  const std::vector<int64_t> shape = built->main.global().FindVar(table)->shape;
  std::vector<std::string> ids, outs;
  for (const ir::Op& op : built->main.global().ops) {
    if (op.type != "lookup_table" || op.InputOne("W") != table) continue;
    ids.push_back(op.Input("Ids")[0]);
    outs.push_back(op.Output("Out")[0]);
  }
  ASSERT_EQ(ids.size(), 26u);
  const ProgramSet set = TrainerOneOfTwo(*built);
  ASSERT_FALSE(set.empty());
  for (const char* name : {"main", "startup"}) {
    const ir::Block& block = set.at(name).global();
    EXPECT_EQ(block.FindVar(table), nullptr) << name;
    for (const ir::Op& op : block.ops) {
      for (const std::string& v : AllVars(op)) {
        EXPECT_TRUE(v != table && v.rfind(table + ".block", 0) == std::string::npos)
            << name << ": " << op.type << " " << v;
      }
    }
  }
  int prefetches = 0, grads = 0;
  for (const ir::Op& op : set.at("main").global().ops) {
    EXPECT_NE(op.type, "lookup_table");
    if (op.type == "lookup_table_grad") {
      ++grads;
      EXPECT_TRUE(op.Input("W").empty());
      EXPECT_EQ(ir::AttrAsInt(*op.FindAttr("table_height")), shape[0]);
    }
    if (op.type != "distributed_lookup_table") continue;
    ++prefetches;
    EXPECT_EQ(op.Input("Ids"), ids);
    EXPECT_EQ(op.Output("Outputs"), outs);
    EXPECT_EQ(std::get<std::vector<std::string>>(*op.FindAttr("table_names")),
              (std::vector<std::string>{table + ".block0", table + ".block1"}));
    const std::vector<int64_t> sections = ir::AttrAsInts(*op.FindAttr("height_sections")).value();
    ASSERT_EQ(sections.size(), 2u);
    EXPECT_EQ(sections[0] + sections[1], shape[0]);
    EXPECT_EQ(std::get<std::vector<std::string>>(*op.FindAttr("endpoints")),
              (std::vector<std::string>{"h:1", "h:2"}));
    EXPECT_EQ(ir::AttrAsInt(*op.FindAttr("emb_dim")), shape[1]);
    EXPECT_EQ(ir::AttrAsInt(*op.FindAttr("trainer_id")), 1);
    EXPECT_EQ(std::get<std::string>(*op.FindAttr("lookup_table_version")), "lookup_table");
  }
  EXPECT_EQ(prefetches, 1);
  EXPECT_EQ(grads, 26);
  // The servers hold the blocks and initialise them as before.
  for (int s = 0; s < 2; ++s) {
    const std::string block = table + ".block" + std::to_string(s);
    EXPECT_NE(set.at("pserver." + std::to_string(s)).global().FindVar(block), nullptr);
  }
}

// A growable table (size [-1, 8]) on three servers: one block per server whatever its size, the
// lookup fetching by id (growable), gradients standing for 2^63 - 1 rows split by hash, and
// each server listing its block with lazy Adam's two per-row moments in growable_tables, the
// block and the moments copied from their one-row prototypes at startup.
TEST_F(PserverPassTest, AGrowableTableGetsOneBlockPerServerAndIsSplitByHash) {
  const std::string file = ::testing::TempDir() + "/growable.fleet";
  std::ofstream(file) << R"(ids = data("ids", shape=[-1, 4], dtype="int64")
y = data("y", shape=[-1, 1], dtype="int64")
e = embedding(ids, size=[-1, 8], is_distributed=True, param_attr="g")
prediction = fc(e, size=2, act="softmax")
minimize(mean(cross_entropy(prediction, y)), optimizer=adam(learning_rate=0.01, lazy_mode=True))
)";
  auto built = BuildPrograms(file, Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(built->main.global().FindVar("g")->shape, (std::vector<int64_t>{1, 8}));
  Config config;
  config.strategy_mode = "pserver";
  Role role;
  role.world_size = 2;
  role.rank = 1;
  role.pserver_endpoints = {"h:1", "h:2", "h:3"};
  auto set = Transpile(config, role, *built, *registry_);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  for (const auto& [name, program] : *set) {
    Status v = ir::VerifyProgram(program);
    EXPECT_TRUE(v.ok()) << name << ": " << v.ToString();
  }
  const ir::Block& main = set->at("main").global();
  EXPECT_EQ(main.FindVar("g"), nullptr);
  int lookups = 0, grads = 0, splits = 0;
  for (const ir::Op& op : main.ops) {
    if (op.type == "distributed_lookup_table") {
      ++lookups;
      EXPECT_EQ(ir::AttrAsBool(*op.FindAttr("growable")), true);
      EXPECT_EQ(std::get<std::vector<std::string>>(*op.FindAttr("table_names")),
                (std::vector<std::string>{"g.block0", "g.block1", "g.block2"}));
      EXPECT_EQ(ir::AttrAsInts(*op.FindAttr("height_sections")),
                (std::vector<int64_t>{1, 1, 1}));
      EXPECT_EQ(std::get<std::vector<std::string>>(*op.FindAttr("endpoints")),
                (std::vector<std::string>{"h:1", "h:2", "h:3"}));
    }
    if (op.type == "lookup_table_v2_grad") {
      ++grads;
      EXPECT_EQ(ir::AttrAsInt(*op.FindAttr("table_height")), INT64_MAX);
      EXPECT_EQ(main.FindVar(op.OutputOne("W@GRAD"))->shape,
                (std::vector<int64_t>{INT64_MAX, 8}));
    }
    if (op.type == "split_selected_rows") {
      ++splits;
      EXPECT_EQ(ir::AttrAsBool(*op.FindAttr("by_hash")), true);
      EXPECT_EQ(op.FindAttr("height_sections"), nullptr);
      EXPECT_EQ(op.Output("Out"), (std::vector<std::string>{"g@GRAD.block0.trainer_1",
                                                            "g@GRAD.block1.trainer_1",
                                                            "g@GRAD.block2.trainer_1"}));
    }
  }
  EXPECT_EQ(lookups, 1);
  EXPECT_EQ(grads, 1);
  EXPECT_EQ(splits, 1);
  for (int s = 0; s < 3; ++s) {
    const std::string k = std::to_string(s);
    const ir::Program& server = set->at("pserver." + k);
    std::vector<std::string> tables;
    for (const ir::Op& op : server.global().ops) {
      if (op.type != "listen_and_serv") continue;
      tables = std::get<std::vector<std::string>>(*op.FindAttr("growable_tables"));
    }
    const std::string moments = "g_moment1_0.block" + k + " g_moment2_0.block" + k;
    EXPECT_EQ(tables, (std::vector<std::string>{"g.block" + k + " " + moments})) << s;
    EXPECT_EQ(server.global().FindVar("g.block" + k)->shape, (std::vector<int64_t>{1, 8}));
    // The block and the moments are copies of their prototypes (init = "full").
    std::set<std::string> copied;
    for (const ir::Op& op : set->at("pserver." + k + ".startup").global().ops) {
      if (op.type == "assign") copied.insert(std::string(op.OutputOne("Out")));
      EXPECT_NE(op.type, "split_byref") << s;
    }
    EXPECT_TRUE(copied.count("g.block" + k) && copied.count("g_moment1_0.block" + k) &&
                copied.count("g_moment2_0.block" + k))
        << s;
  }
  // Another mode has nowhere to keep it.
  config.strategy_mode = "collective";
  auto refused = Transpile(config, role, *built, *registry_);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("table 'g' is growable (size [-1, dim]): its rows live on parameter "
                        "servers"));
}

// A table read by another op on the trainer too: received whole (is_sparse), or refused when it
// must stay on the servers (is_distributed); so is an is_distributed table with a dense
// gradient.
TEST_F(PserverPassTest, ATableThatCannotStayOnTheServers) {
  auto built = BuildPrograms(std::string(FLEET_EXAMPLES_DIR) + "/ctr_dnn/ctr_dnn.fleet",
                             Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const std::string table = "SparseFeatFactors";
  ir::Block& main = built->main.global();
  ir::Var tmp = *main.FindVar(table);
  tmp.name = "table_norm";
  tmp.param.reset();
  tmp.persistable = false;
  main.vars.emplace(tmp.name, tmp);
  main.ops.insert(main.ops.begin(), ir::MakeOp("scale", {{"X", {table}}}, {{"Out", {tmp.name}}},
                                               {{"scale", 2.0f}}));
  Config config;
  config.strategy_mode = "pserver";
  Role role;
  role.world_size = 2;
  role.pserver_endpoints = {"h:1", "h:2"};
  auto set = Transpile(config, role, *built, *registry_);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  bool received = false;
  for (const ir::Op& op : set->at("main").global().ops) {
    EXPECT_NE(op.type, "distributed_lookup_table");
    if (op.type == "recv" && op.Output("Out").at(0) == table + ".block0") received = true;
  }
  EXPECT_TRUE(received);

  for (ir::Op& op : main.ops) {
    if (op.type == "lookup_table") op.attrs["is_distributed"] = true;
  }
  auto refused = Transpile(config, role, *built, *registry_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("table 'SparseFeatFactors' is looked up with "
                                            "is_distributed"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("op 0 (scale) of main reads it on the trainer too"),
            std::string::npos) << refused.status().ToString();

  main.ops.erase(main.ops.begin());
  main.vars.erase(tmp.name);
  main.vars.at(table + "@GRAD").selected_rows = false;
  auto dense = Transpile(config, role, *built, *registry_);
  ASSERT_FALSE(dense.ok());
  EXPECT_NE(dense.status().message().find("but its gradient 'SparseFeatFactors@GRAD' is dense"),
            std::string::npos) << dense.status().ToString();
}

TEST_F(PserverPassTest, ServerWithoutBlocksGetsOneEmptyOptimizeBlock) {
  // Two whole parameters on three servers: server 2 serves nothing.
  ProgramSet programs = ParseData("pserver_fc_sgd_input.ir");
  ASSERT_TRUE(Run(programs, Trainer(0, 2, {"a:1", "b:2", "c:3"}), {{"slice_var_up", false}})
                  .ok());
  const ir::Program& idle = programs.at("pserver.2");
  ASSERT_EQ(idle.num_blocks(), 2);
  EXPECT_TRUE(idle.block(1).ops.empty());
  EXPECT_EQ(idle.block(1).parent, 0);
  ASSERT_EQ(idle.global().ops.size(), 1u);
  const ir::Op& listen = idle.global().ops[0];
  EXPECT_TRUE(listen.Input("X").empty());
  EXPECT_TRUE(*listen.FindAttr("optimize_blocks") == ir::Attribute(std::vector<int32_t>{1}));
  EXPECT_TRUE(*listen.FindAttr("grad_to_block_id") ==
              ir::Attribute(std::vector<std::string>{}));
  EXPECT_TRUE(*listen.FindAttr("endpoint") == ir::Attribute(std::string("c:3")));
  // Its startup keeps every initializer but owns no var.
  for (const auto& [name, var] : programs.at("pserver.2.startup").global().vars) {
    EXPECT_FALSE(var.persistable) << name;
  }
}

TEST(PserverOps, ShapeRulesNameTheOp) {
  const char* text = R"(program {
  block 0 {
    var __control_var@0 : float32[0]
    var g : float32[8, 3]
    var g0 : float32[5, 3]
    var g1 : float32[4, 3]
    op split_byref(X=[g]) -> (Out=[g0, g1]) {sections=[5, 4]}
    op send(X=[g0, g1]) -> (Out=[__control_var@0]) {epmap=["a:1"]}
  }
}
)";
  auto program = ir::ParseProgram(text, "ops.ir");
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  Status s = ir::VerifyProgram(*program);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("split_byref: sections add up to 9 rows but X has 8"));
  EXPECT_THAT(s.message(), HasSubstr("send: epmap holds 1 endpoints but X holds 2 vars"));

  const char* good = R"(program {
  block 0 {
    var __control_var@0 : float32[0]
    var g : float32[9, 3]
    var g0 : float32[5, 3]
    var g1 : float32[4, 3]
    op split_byref(X=[g]) -> (Out=[g0, g1]) {sections=[5, 4]}
    op send(X=[g0, g1]) -> (Out=[__control_var@0]) {epmap=["a:1", "b:2"]}
    op recv(X=[__control_var@0]) -> (Out=[g0, g1]) {epmap=["a:1", "b:2"]}
  }
}
)";
  program = ir::ParseProgram(good, "ops.ir");
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  s = ir::VerifyProgram(*program);
  EXPECT_TRUE(s.ok()) << s.ToString();
  const ops::OpSchema* send = ops::BuiltinOps().Find("send");
  ASSERT_NE(send, nullptr);
  EXPECT_TRUE(send->rpc);
  EXPECT_FALSE(ops::BuiltinOps().Find("split_byref")->rpc);
  for (const char* type : {"recv", "send_barrier", "fetch_barrier", "listen_and_serv"}) {
    ASSERT_NE(ops::BuiltinOps().Find(type), nullptr) << type;
    EXPECT_TRUE(ops::BuiltinOps().Find(type)->rpc) << type;
  }
}

// distributed_lookup_table's outputs: the ids' shape (its last dim of 1 replaced, for
// lookup_table) and emb_dim; its attributes describe the table's blocks, checked by name.
// Each edit of `good` (first -> second) makes the verifier refuse op `op` with `said[i]`.
void ExpectRefusals(const std::string& good, const std::string& op,
                    const std::vector<std::pair<std::string, std::string>>& bad,
                    const std::vector<std::string>& said) {
  ASSERT_EQ(bad.size(), said.size());
  for (size_t i = 0; i < bad.size(); ++i) {
    std::string text = good;
    text.replace(text.find(bad[i].first), bad[i].first.size(), bad[i].second);
    auto broken = ir::ParseProgram(text, "ops.ir");
    ASSERT_TRUE(broken.ok()) << broken.status().ToString();
    const Status s = ir::VerifyProgram(*broken);
    EXPECT_THAT(s.message(), HasSubstr(op + ": " + said[i])) << s.ToString();
  }
}

TEST(PserverOps, DistributedLookupTableShapes) {
  const char* good = R"(program {
  block 0 {
    var ids : int64[-1, 1] lod_level 1
    var more : int64[-1, 1] lod_level 1
    var out : float32[-1, 3]
    var out2 : float32[-1, 3]
    op distributed_lookup_table(Ids=[ids, more]) -> (Outputs=[out, out2])
       {table_names=["t.block0", "t.block1"], height_sections=[5L, 4L], endpoints=["a:1", "b:2"],
        padding_idx=8L, lookup_table_version="lookup_table", emb_dim=3L, dtype=9}
  }
}
)";
  auto program = ir::ParseProgram(good, "ops.ir");
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  Status s = ir::VerifyProgram(*program);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(ops::BuiltinOps().Find("distributed_lookup_table")->rpc);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"height_sections=[5L, 4L]", "height_sections=[5L]"},
      {"padding_idx=8L", "padding_idx=9L"},
      {"emb_dim=3L", "emb_dim=0L"},
      {"dtype=9", "dtype=6"},
      {"\"lookup_table\"", "\"embedding\""},
      {"height_sections=[5L, 4L]", "height_sections=[5L, 0L]"}};
  const std::vector<std::string> said = {
      "table_names, endpoints and height_sections need one entry per block of the table, and "
      "hold 2, 2 and 1",
      "padding_idx 9 is outside the table's 9 rows",
      "emb_dim must be the table's row width (>= 1), not 0",
      "dtype must be float32 (9) or float64 (10), not 6",
      "lookup_table_version must be lookup_table or lookup_table_v2, not 'embedding'",
      "height_sections [5, 0] must be positive row counts"};
  ExpectRefusals(good, "distributed_lookup_table", bad, said);
}

TEST(PserverOps, GeoSgdShapes) {
  const char* good = R"(program {
  block 0 {
    param w : float32[6, 2]
    param b : float32[2]
    op geo_sgd(X=[w, b]) -> (Out=[w, b])
       {k_steps=3L, trainers=2, blocks=[2L, 1L], block_names=["w.block0", "w.block1", "b"],
        sections=[4L, 2L, 2L], epmap=["a:1", "b:2", "a:1"], sparse=[1L, 0L]}
  }
}
)";
  auto program = ir::ParseProgram(good, "ops.ir");
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  Status s = ir::VerifyProgram(*program);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(ops::BuiltinOps().Find("geo_sgd")->rpc);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"k_steps=3L", "k_steps=0L"},
      {"trainers=2", "trainers=0"},
      {"blocks=[2L, 1L]", "blocks=[2L]"},
      {"sections=[4L, 2L, 2L]", "sections=[4L, 2L]"},
      {"sections=[4L, 2L, 2L]", "sections=[4L, 1L, 2L]"},
      {"sections=[4L, 2L, 2L]", "sections=[4L, 4L, 2L]"},
      {"param b : float32[2]", "param b : float64[2]"},
      {"sparse=[1L, 0L]", "sparse=[1L]"}};
  const std::vector<std::string> said = {
      "k_steps must be >= 1, not 0",
      "trainers must be >= 1, not 0",
      "blocks holds 1 counts for 2 parameters; it needs one per parameter",
      "sections, block_names and epmap need one entry per block (3), and hold 2, 3 and 3",
      "the sections of X 0 cover 5 of its 6 rows",
      "the sections of X 0 do not add up to its 6 rows",
      "X 1 is float64; GEO-SGD exchanges float32",
      "sparse holds 1 flags for 2 parameters"};
  ExpectRefusals(good, "geo_sgd", bad, said);
}

TEST_F(PserverPassTest, NeedsPserverEndpoints) {
  ProgramSet programs = ParseData("pserver_fc_sgd_input.ir");
  Status s = Run(programs, Trainer(0, 2, {}), {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("a pserver job needs pserver_endpoints: [role] "
                                     "pserver_endpoints or PADDLE_PSERVERS_IP_PORT_LIST"));
}

TEST_F(PserverPassTest, RejectsUnsupportedOptimizer) {
  ProgramSet programs = ParseData("pserver_fc_sgd_input.ir");
  // An optimize op with Param and LearningRate that has no slicing rule.
  ir::Op& op = programs.at("main").global().ops.back();
  op.type = "lamb";
  Status s = Run(programs, Trainer(0, 2), {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("main block 0, op 8 (lamb): optimizer 'lamb' is not "
                                     "supported for parameter-server training"));
}

TEST_F(PserverPassTest, RejectsMissingGradient) {
  ProgramSet programs = ParseData("pserver_fc_sgd_input.ir");
  // The backward op that produced fc_0.w_0@GRAD is gone.
  auto& ops = programs.at("main").global().ops;
  ops.erase(ops.begin() + 6);
  Status s = Run(programs, Trainer(0, 2), {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("the gradient 'fc_0.w_0@GRAD' of parameter 'fc_0.w_0' is "
                                     "missing"));
}

TEST_F(PserverPassTest, RejectsGlobalNormClipAndAsyncSchedule) {
  ProgramSet programs = ParseData("pserver_fc_sgd_input.ir");
  ir::Block& main = programs.at("main").global();
  ir::Var sq;
  sq.name = "norm_sq";
  sq.shape = {1};
  ASSERT_TRUE(main.AddVar(sq).ok());
  sq.name = "b_sq";
  ASSERT_TRUE(main.AddVar(sq).ok());
  sq.name = "w_sq";
  ASSERT_TRUE(main.AddVar(sq).ok());
  ir::AttrMap opt = {{"op_role", ir::op_role::kOptimize}};
  main.ops.insert(main.ops.begin() + 7,
                  {ir::MakeOp("squared_l2_norm", {{"X", {"fc_0.b_0@GRAD"}}},
                              {{"Out", {"b_sq"}}}, opt),
                   ir::MakeOp("squared_l2_norm", {{"X", {"fc_0.w_0@GRAD"}}},
                              {{"Out", {"w_sq"}}}, opt),
                   ir::MakeOp("sum", {{"X", {"b_sq", "w_sq"}}}, {{"Out", {"norm_sq"}}}, opt)});
  Status s = Run(programs, Trainer(0, 2), {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("op 9 (sum) combines values of several parameters "
                                     "('fc_0.b_0' and 'fc_0.w_0')"));

  ProgramSet decay = ParseData("pserver_fc_lr_decay_input.ir");
  s = Run(decay, Trainer(0, 2), {{"sync", false}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("cannot use a learning-rate schedule"));

  // A schedule op with a sub-block (Paddle's piecewise_decay has one) cannot be cloned into a
  // server's LR block as it is.
  ProgramSet nested = ParseData("pserver_fc_lr_decay_input.ir");
  ir::Program& nested_main = nested.at("main");
  const int32_t sub = nested_main.AddBlock(0);
  bool tagged = false;
  for (ir::Op& op : nested_main.global().ops) {
    if (op.type == "lr_schedule") {
      op.attrs["sub_block"] = ir::BlockRef{sub};
      tagged = true;
    }
  }
  ASSERT_TRUE(tagged);
  s = Run(nested, Trainer(0, 2), {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("(lr_schedule): learning-rate op with a sub-block "
                                     "('sub_block'), which a parameter server cannot run"));
}

TEST_F(PserverPassTest, RejectsBadOptionsAndRepeatedTranspile) {
  ProgramSet programs = ParseData("pserver_fc_sgd_input.ir");
  Status s = Run(programs, Trainer(0, 2), {{"split_method", std::string("random")}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'split_method' must be \"round_robin\" or \"hash_name\""));
  s = Run(programs, Trainer(0, 2), {{"init", std::string("lazy")}});
  EXPECT_THAT(s.message(), HasSubstr("'init' must be \"full\" or \"shard\""));
  s = Run(programs, Trainer(0, 2), {{"min_block_size", int32_t{0}}});
  EXPECT_THAT(s.message(), HasSubstr("'min_block_size' must be >= 1"));
  ASSERT_TRUE(Run(programs, Trainer(0, 2), {}).ok());
  s = Run(programs, Trainer(0, 2), {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("transpiled twice"));
}

}  // namespace
}  // namespace fleet
