// Inference export: pruning (text IR before and after), its refusals, export -> read back ->
// run reproducing the training program's forward outputs on the same weights, and convert's
// round trips between checkpoints, .npy directories and safetensors files.
#include "checkpoint/export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "job/train.h"
#include "config/config.h"
#include "executor/executor.h"
#include "frontend/frontend.h"
#include "ir/text.h"
#include "job/pipeline.h"
#include "plugin/registry.h"
#include "support/durable_file.h"

namespace fleet::checkpoint {
namespace {

namespace fs = std::filesystem;

// A classifier with every kind of op export must handle: parameters, batch_norm (running
// statistics it reads in inference), dropout (off in inference), and a loss that the
// prediction does not need.
constexpr const char* kProgram = R"(x = data("x", shape=[-1, 4], dtype="float32")
y = data("y", shape=[-1, 1], dtype="int64")
h = fc(x, size=3)
h = batch_norm(h)
h = dropout(h, dropout_prob=0.5)
prediction = fc(h, size=2, act="softmax")
avg_cost = mean(cross_entropy(prediction, y))
minimize(avg_cost, optimizer=momentum(learning_rate=0.1, momentum=0.9))
)";

// The forward program above pruned to `prediction`, written by hand from its parsed form: the
// label, the loss and their vars gone, batch_norm and dropout in inference mode.
constexpr const char* kPruned = R"(program {
  block 0 {
    param batch_norm_0.b_0 : float32[3] {lr=1.0}
    var batch_norm_0.tmp_0 : float32[3] stop_gradient
    var batch_norm_0.tmp_1 : float32[3] stop_gradient
    var batch_norm_0.tmp_2 : float32[0] stop_gradient
    var batch_norm_0.tmp_3 : float32[-1, 3]
    param batch_norm_0.w_0 : float32[3] {lr=1.0}
    param batch_norm_0.w_1 : float32[3] stop_gradient {trainable=false, lr=1.0}
    param batch_norm_0.w_2 : float32[3] stop_gradient {trainable=false, lr=1.0}
    var dropout_0.tmp_0 : float32[-1, 3]
    var dropout_0.tmp_1 : uint8[-1, 3] stop_gradient
    param fc_0.b_0 : float32[3] {lr=1.0}
    var fc_0.tmp_0 : float32[-1, 3]
    var fc_0.tmp_1 : float32[-1, 3]
    param fc_0.w_0 : float32[4, 3] {lr=1.0}
    param fc_1.b_0 : float32[2] {lr=1.0}
    var fc_1.tmp_0 : float32[-1, 2]
    var fc_1.tmp_1 : float32[-1, 2]
    var fc_1.tmp_2 : float32[-1, 2]
    param fc_1.w_0 : float32[3, 2] {lr=1.0}
    var x : float32[-1, 4] stop_gradient
    op mul(X=[x], Y=[fc_0.w_0]) -> (Out=[fc_0.tmp_0]) {x_num_col_dims=1, y_num_col_dims=1}
    op elementwise_add(X=[fc_0.tmp_0], Y=[fc_0.b_0]) -> (Out=[fc_0.tmp_1]) {axis=1}
    op batch_norm(Bias=[batch_norm_0.b_0], Mean=[batch_norm_0.w_1], Scale=[batch_norm_0.w_0], Variance=[batch_norm_0.w_2], X=[fc_0.tmp_1]) -> (MeanOut=[batch_norm_0.w_1], ReserveSpace=[batch_norm_0.tmp_2], SavedMean=[batch_norm_0.tmp_0], SavedVariance=[batch_norm_0.tmp_1], VarianceOut=[batch_norm_0.w_2], Y=[batch_norm_0.tmp_3]) {data_layout="NCHW", epsilon=0.00001f, is_test=true, momentum=0.9f, trainable_statistics=false, use_global_stats=false}
    op dropout(X=[batch_norm_0.tmp_3]) -> (Mask=[dropout_0.tmp_1], Out=[dropout_0.tmp_0]) {dropout_implementation="downgrade_in_infer", dropout_prob=0.5f, fix_seed=false, is_test=true, seed=0}
    op mul(X=[dropout_0.tmp_0], Y=[fc_1.w_0]) -> (Out=[fc_1.tmp_0]) {x_num_col_dims=1, y_num_col_dims=1}
    op elementwise_add(X=[fc_1.tmp_0], Y=[fc_1.b_0]) -> (Out=[fc_1.tmp_1]) {axis=1}
    op softmax(X=[fc_1.tmp_1]) -> (Out=[fc_1.tmp_2])
  }
}
)";

frontend::ParsedProgram Parsed() {
  auto p = frontend::ParseProgramText(kProgram, "model.fleet");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(*p) : frontend::ParsedProgram{};
}

std::string ErrorOf(const std::vector<std::string>& feeds,
                    const std::vector<std::string>& fetches) {
  auto r = PruneForInference(Parsed().main, feeds, fetches);
  return r.ok() ? "<no error>" : r.status().message();
}

TEST(ExportPruneTest, KeepsWhatThePredictionNeedsInInferenceMode) {
  const frontend::ParsedProgram p = Parsed();
  EXPECT_EQ(p.names.at("prediction"), "fc_1.tmp_2");
  auto pruned = PruneForInference(p.main, {"x"}, {"fc_1.tmp_2"});
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(ir::PrintProgram(pruned->program), kPruned);
  EXPECT_EQ(pruned->feeds, std::vector<std::string>{"x"});
  // Without --feed, the data vars the fetches need.
  auto inferred = PruneForInference(p.main, {}, {"fc_1.tmp_2"});
  ASSERT_TRUE(inferred.ok()) << inferred.status().ToString();
  EXPECT_EQ(inferred->feeds, std::vector<std::string>{"x"});
  EXPECT_EQ(PersistablesUsed(pruned->program),
            (std::vector<std::string>{"batch_norm_0.b_0", "batch_norm_0.w_0", "batch_norm_0.w_1",
                                      "batch_norm_0.w_2", "fc_0.b_0", "fc_0.w_0", "fc_1.b_0",
                                      "fc_1.w_0"}));
}

TEST(ExportPruneTest, RefusesFeedsAndFetchesThatCannotWork) {
  EXPECT_EQ(ErrorOf({"x"}, {"nope"}), "export: fetch 'nope' is not a var of the program");
  EXPECT_EQ(ErrorOf({"x"}, {}), "export: no fetch given (--fetch VAR)");
  EXPECT_EQ(ErrorOf({"z"}, {"fc_1.tmp_2"}), "export: feed 'z' is not a var of the program");
  EXPECT_EQ(ErrorOf({"fc_0.w_0"}, {"fc_1.tmp_2"}),
            "export: feed 'fc_0.w_0' is a persistable var, not a data var");
  EXPECT_EQ(ErrorOf({"fc_0.tmp_0"}, {"fc_1.tmp_2"}),
            "export: feed 'fc_0.tmp_0' is computed by op #0 (mul), not a data var");
  EXPECT_EQ(ErrorOf({"x", "y"}, {"fc_1.tmp_2"}),
            "export: feed 'y' is not needed to compute the fetches");
  EXPECT_EQ(ErrorOf({"x"}, {"mean_0.tmp_0"}),
            "export: the fetches need data var 'y', which is not among the feeds (--feed y)");
}

class ExportRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_export_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(registry_->Load("cpu").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<exec::Executor> NewExecutor() {
    exec::ExecutorOptions o;
    o.num_threads = 1;
    auto ex = exec::Executor::Create(*registry_, "cpu", o);
    EXPECT_TRUE(ex.ok()) << ex.status().ToString();
    return std::move(*ex);
  }

  fs::path dir_;
  std::unique_ptr<PluginRegistry> registry_;
};

// The issue's check: a model trained (and checkpointed) by the training loop, exported, read
// back and run gives, on new inputs, exactly what the training program's own forward ops give
// in inference mode on the same weights.
TEST_F(ExportRunTest, ExportThenInferReproducesTheTrainingProgramsForward) {
  std::ofstream(dir_ / "model.fleet") << kProgram;
  auto built = BuildPrograms(dir_ / "model.fleet", Stage::kOptimized);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  frontend::ParsedProgram& optimized = *built;
  frontend::ParsedProgram parsed = Parsed();
  Config config;
  config.train.steps = 30;
  config.train.batch_size = 16;
  config.train.threads = 1;
  config.train.log_every = 30;
  config.checkpoint.dir = dir_ / "ckpt";
  config.checkpoint.every_steps = 30;
  std::ostringstream log;
  auto trained = Train(config, optimized, *registry_, "cpu", log);
  ASSERT_TRUE(trained.ok()) << trained.status().ToString();

  // The trained state, restored as export --checkpoint restores it.
  std::vector<std::string> warnings;
  auto found = FindLatestCheckpoint(config.checkpoint.dir,
                                    ProgramHash({&optimized.startup, &optimized.main}), "", 1,
                                    warnings);
  ASSERT_TRUE(found.ok() && found->has_value());
  auto trainer = NewExecutor();
  std::vector<exec::HostTensor> none;
  ASSERT_TRUE(trainer->Run(optimized.startup, {}, {}, none).ok());
  ASSERT_TRUE(RestoreScope((*found)->state, trainer->scope(), "ckpt").ok());

  auto pruned = PruneForInference(parsed.main, {"x"}, {"fc_1.tmp_2"});
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  const fs::path out = dir_ / "model";
  ASSERT_TRUE(WriteExport(out, pruned->program, pruned->feeds, {{"prediction", "fc_1.tmp_2"}},
                          trainer->scope(), "model.fleet", false)
                  .ok());
  auto model = ReadExport(out);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ(model->fetches.size(), 1u);
  EXPECT_EQ(model->fetches[0].name, "prediction");
  EXPECT_EQ(model->params.tensors.size(), 8u);  // no momentum velocity, no learning rate

  // New inputs; the training program's forward part (with its label and loss) in inference
  // mode on the trained scope is the reference.
  exec::FeedMap feeds;
  feeds["x"].Reshape(ir::DataType::kFloat32, {7, 4});
  feeds["y"].Reshape(ir::DataType::kInt64, {7, 1});
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (int i = 0; i < 28; ++i) feeds["x"].data<float>()[i] = normal(rng);
  for (int i = 0; i < 7; ++i) feeds["y"].data<int64_t>()[i] = i % 2;
  ir::Program reference = parsed.main;
  for (ir::Op& op : reference.global().ops) {
    if (op.type == "dropout" || op.type == "batch_norm") op.attrs["is_test"] = true;
  }
  std::vector<exec::HostTensor> want;
  ASSERT_TRUE(trainer->Run(reference, feeds, {"fc_1.tmp_2"}, want).ok());

  auto inferer = NewExecutor();
  for (const auto& p : model->params.tensors) {
    ASSERT_TRUE(inferer->scope().Write(p.name, p.tensor).ok());
  }
  exec::FeedMap x_only;
  x_only["x"] = feeds["x"];
  std::vector<exec::HostTensor> got;
  Status ran = inferer->Run(model->program, x_only, {"fc_1.tmp_2"}, got);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  ASSERT_EQ(got[0].dims, (std::vector<int64_t>{7, 2}));
  EXPECT_EQ(got[0].bytes, want[0].bytes);
  // Trained, not initial, weights: the running mean moved away from its initial zeros.
  auto mean = inferer->scope().Read("batch_norm_0.w_1");
  ASSERT_TRUE(mean.ok());
  EXPECT_NE(mean->data<float>()[0], 0.0f);

  // The directory is not overwritten by accident, and is replaced whole with force.
  Status again = WriteExport(out, pruned->program, pruned->feeds, {{"prediction", "fc_1.tmp_2"}},
                             trainer->scope(), "model.fleet", false);
  EXPECT_NE(again.message().find("exists and is not empty (--force replaces it)"),
            std::string::npos)
      << again.message();
  EXPECT_TRUE(WriteExport(out, pruned->program, pruned->feeds, {{"prediction", "fc_1.tmp_2"}},
                          trainer->scope(), "model.fleet", true)
                  .ok());
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST_F(ExportRunTest, ABrokenExportIsRefusedNamingTheFile) {
  frontend::ParsedProgram parsed = Parsed();
  auto ex = NewExecutor();
  std::vector<exec::HostTensor> none;
  ASSERT_TRUE(ex->Run(parsed.startup, {}, {}, none).ok());
  auto pruned = PruneForInference(parsed.main, {"x"}, {"fc_1.tmp_2"});
  ASSERT_TRUE(pruned.ok());
  const fs::path out = dir_ / "model";
  ASSERT_TRUE(
      WriteExport(out, pruned->program, {"x"}, {{"p", "fc_1.tmp_2"}}, ex->scope(), "m", false)
          .ok());
  // Parameters of another model.
  SafeTensors other;
  exec::HostTensor w;
  w.Reshape(ir::DataType::kFloat32, {5, 3});
  other.tensors.push_back({"fc_0.w_0", w});
  auto other_crc = WriteSafeTensors(out / "params.safetensors", other);
  ASSERT_TRUE(other_crc.ok());
  // The manifest's checksum catches the swap before the file is parsed.
  auto read = ReadExport(out);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("params.safetensors: CRC-32 is "), std::string::npos)
      << read.status().message();
  EXPECT_NE(read.status().message().find("the file changed or is damaged"), std::string::npos);
  // With the checksum updated too, the shapes still have to agree with the program.
  auto set_crc = [&](const std::string& file, uint32_t crc) {
    std::ifstream in(out / "model.json");
    nlohmann::json m = nlohmann::json::parse(in);
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%08x", crc);
    m["crc32"][file] = hex;
    std::ofstream(out / "model.json") << m.dump(2);
  };
  set_crc("params.safetensors", *other_crc);
  read = ReadExport(out);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("params.safetensors: 'fc_0.w_0' is float32[5, 3], the "
                                         "program says float32[4, 3]"),
            std::string::npos)
      << read.status().message();
  // A program that does not verify.
  const std::string bad = "program {\n  block 0 {\n    op nosuchop() -> ()\n  }\n}\n";
  std::ofstream(out / "model.ir") << bad;
  set_crc("model.ir", Crc32({reinterpret_cast<const uint8_t*>(bad.data()), bad.size()}));
  read = ReadExport(out);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("model.ir"), std::string::npos)
      << read.status().message();
  // A manifest without checksums (an export from before them) is refused with the remedy.
  std::ifstream in(out / "model.json");
  nlohmann::json m = nlohmann::json::parse(in);
  m.erase("crc32");
  std::ofstream(out / "model.json") << m.dump(2);
  read = ReadExport(out);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("no 'crc32' checksums"), std::string::npos)
      << read.status().message();
}

TEST_F(ExportRunTest, ConvertRoundTripsACheckpointThroughNpyFiles) {
  SafeTensors st;
  for (int k = 0; k < 3; ++k) {
    exec::HostTensor t;
    t.Reshape(k == 2 ? ir::DataType::kInt64 : ir::DataType::kFloat32, {k + 1, 2});
    for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(i * 7 + k);
    st.tensors.push_back({"v" + std::to_string(k), std::move(t)});
  }
  CheckpointInfo info;
  info.step = 5;
  info.program_hash = "x";
  ASSERT_TRUE(SaveCheckpoint(dir_ / "ckpt", info, st, 0).ok());
  auto from_ckpt = ReadTensors(dir_ / "ckpt" / "step_0000005");
  ASSERT_TRUE(from_ckpt.ok()) << from_ckpt.status().ToString();
  ASSERT_TRUE(WriteNpyDirectory(dir_ / "npy", *from_ckpt, false).ok());
  auto from_npy = ReadTensors(dir_ / "npy");
  ASSERT_TRUE(from_npy.ok()) << from_npy.status().ToString();
  ASSERT_TRUE(WriteSafeTensors(dir_ / "back.safetensors", *from_npy).ok());
  auto back = ReadTensors(dir_ / "back.safetensors");
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->tensors.size(), st.tensors.size());
  for (size_t i = 0; i < st.tensors.size(); ++i) {
    EXPECT_EQ(back->tensors[i].name, st.tensors[i].name);
    EXPECT_EQ(back->tensors[i].tensor.dtype, st.tensors[i].tensor.dtype);
    EXPECT_EQ(back->tensors[i].tensor.dims, st.tensors[i].tensor.dims);
    EXPECT_EQ(back->tensors[i].tensor.bytes, st.tensors[i].tensor.bytes);
  }
  // A var name that is no file name stays in safetensors form.
  SafeTensors slash;
  slash.tensors.push_back({"a/b", st.tensors[0].tensor});
  Status s = WriteNpyDirectory(dir_ / "slash", slash, false);
  EXPECT_NE(s.message().find("var 'a/b' has no file name of its own (var name 'a/b' holds a path separator)"), std::string::npos)
      << s.message();
  EXPECT_FALSE(fs::exists(dir_ / "slash"));
  SafeTensors hidden;
  hidden.tensors.push_back({".profile", st.tensors[0].tensor});
  s = WriteNpyDirectory(dir_ / "hidden", hidden, false);
  EXPECT_NE(s.message().find("would be a hidden file"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(dir_ / "hidden"));
  EXPECT_FALSE(ReadTensors(dir_ / "nothing").ok());
}

}  // namespace
}  // namespace fleet::checkpoint
