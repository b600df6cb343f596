// The evaluation pass ([eval], job/evaluation.h): what it reports is the forward program's loss
// and AUC on the eval files, it leaves training exactly as it would be without it, its figures
// go into the logged steps' lines and records, and a misconfigured one is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "job/pipeline.h"
#include "job/train.h"
#include "plugin/registry.h"
#include "temp_dir.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

using fleet::test_util::TempDir;

// A binary classifier of 4 CSV features with the AUC reported.
constexpr const char* kProgram =
    "x = data(\"x\", shape=[-1, 4], dtype=\"float32\")\n"
    "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
    "h = fc(x, size=8, act=\"tanh\")\n"
    "prediction = fc(h, size=2, act=\"softmax\")\n"
    "avg = mean(cross_entropy(prediction, y))\n"
    "minimize(avg, optimizer=sgd(learning_rate=LR))\n"
    "metric(\"auc\", auc(prediction, y))\n";

class EvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(registry_->Load("cpu").ok());
    // 64 rows whose label depends on the features, so the AUC is neither 0.5 nor 1.
    std::ostringstream csv;
    uint64_t state = 12345;
    auto next = [&] {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5;
    };
    for (int r = 0; r < 64; ++r) {
      double f[4], score = 0;
      for (int k = 0; k < 4; ++k) {
        f[k] = next();
        score += f[k] * (k + 1);
      }
      const int label = score + next() > 0 ? 1 : 0;
      csv << f[0] << "," << f[1] << "," << f[2] << "," << f[3] << "," << label << "\n";
    }
    data_ = dir_.Write("data.csv", csv.str());
  }

  Config BaseConfig() const {
    Config c;
    c.train.steps = 6;
    c.train.batch_size = 64;
    c.train.threads = 1;
    c.train.log_every = 2;
    c.train.metrics_file = (dir_.path() / "m.jsonl").string();
    c.data.source = "csv";
    c.data.filelist = {data_.string()};
    return c;
  }

  // Trains kProgram with `extra` appended (LR replaced by `lr`) under `config`, with the
  // forward program for [eval].
  Status Run(const Config& config, const std::string& lr, const std::string& extra = "") {
    std::string text = std::string(kProgram) + extra;
    text.replace(text.find("LR"), 2, lr);
    const fs::path program = dir_.Write("model.fleet", text);
    auto optimized = BuildPrograms(program, Stage::kOptimized);
    if (!optimized.ok()) return optimized.status();
    auto parsed = BuildPrograms(program, Stage::kParsed);
    if (!parsed.ok()) return parsed.status();
    out_.str("");
    return Train(config, *optimized, *registry_, "cpu", out_, {}, &parsed->main).status();
  }

  std::vector<nlohmann::json> Records() const {
    std::vector<nlohmann::json> records;
    std::ifstream in(dir_.path() / "m.jsonl");
    std::string line;
    while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
    return records;
  }

  TempDir dir_{"fleet_eval_test"};
  fs::path data_;
  std::unique_ptr<PluginRegistry> registry_;
  std::ostringstream out_;
};

// With a learning rate of 0 the parameters never change, and the eval files are the training
// file: every evaluation is the training step's forward pass on the same rows, so eval_loss is
// the step's loss and eval_auc training's AUC after its first step (the AUC of the file).
TEST_F(EvalTest, ReportsTheForwardLossAndAucOfTheFiles) {
  Config c = BaseConfig();
  c.eval.filelist = {data_.string()};
  c.eval.every_steps = 2;
  ASSERT_TRUE(Run(c, "0.0").ok()) << out_.str();
  const auto records = Records();
  ASSERT_EQ(records.size(), 3u);
  const double loss = records[0]["loss"].get<double>();
  const double auc = records[0]["auc"].get<double>();
  EXPECT_GT(std::abs(auc - 0.5), 0.05);  // the untrained model ranks the rows, well or badly
  EXPECT_LT(std::abs(auc - 0.5), 0.49);
  for (const auto& r : records) {
    ASSERT_TRUE(r.contains("eval_loss")) << r.dump();
    EXPECT_NEAR(r["eval_loss"].get<double>(), loss, 1e-6 * std::abs(loss)) << r.dump();
    EXPECT_NEAR(r["eval_auc"].get<double>(), auc, 1e-12) << r.dump();
  }
  EXPECT_NE(out_.str().find("eval at step 4: loss "), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find(" auc "), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("(64 samples, "), std::string::npos) << out_.str();
}

// Training with evaluations takes the very steps it takes without: the evaluation reads the
// parameters and counts its AUC into statistics of its own.
TEST_F(EvalTest, LeavesTrainingAsItWas) {
  Config c = BaseConfig();
  c.train.batch_size = 16;
  ASSERT_TRUE(Run(c, "0.5").ok()) << out_.str();
  const auto plain = Records();
  c.eval.filelist = {data_.string()};
  c.eval.every_steps = 1;
  c.eval.batch_size = 8;
  ASSERT_TRUE(Run(c, "0.5").ok()) << out_.str();
  const auto with_eval = Records();
  ASSERT_EQ(with_eval.size(), 6u);  // every step is evaluated, so every step is logged
  size_t matched = 0;
  for (const auto& r : with_eval) {
    EXPECT_TRUE(r.contains("eval_auc")) << r.dump();
    for (const auto& p : plain) {
      if (p["step"] != r["step"]) continue;
      EXPECT_EQ(p["loss"].get<double>(), r["loss"].get<double>()) << r.dump();
      EXPECT_EQ(p["auc"].get<double>(), r["auc"].get<double>()) << r.dump();
      ++matched;
    }
  }
  EXPECT_EQ(matched, plain.size());
  // The loss it evaluates falls as the model learns.
  EXPECT_LT(with_eval.back()["eval_loss"].get<double>(),
            with_eval.front()["eval_loss"].get<double>());
}

TEST_F(EvalTest, OnlyEvaluatedStepsCarryEvalKeys) {
  Config c = BaseConfig();
  c.train.steps = 7;
  c.eval.filelist = {data_.string()};
  c.eval.every_steps = 3;
  ASSERT_TRUE(Run(c, "0.1").ok()) << out_.str();
  std::vector<int64_t> steps, evaluated;
  for (const auto& r : Records()) {
    steps.push_back(r["step"].get<int64_t>());
    if (r.contains("eval_loss")) evaluated.push_back(r["step"].get<int64_t>());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 3, 4, 6, 7}));
  EXPECT_EQ(evaluated, (std::vector<int64_t>{3, 6, 7}));  // and after the last step
}

TEST_F(EvalTest, RefusesWhatCannotBeEvaluated) {
  Config c = BaseConfig();
  c.eval.filelist = {data_.string()};
  c.eval.where = "fleet.toml:9:12";
  c.eval.batch_size = 65;  // the file holds 64 rows
  Status s = Run(c, "0.1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fleet.toml:9:12: the eval files hold 64 samples, fewer than one "
                             "batch of 65 (eval.batch_size)"),
            std::string::npos) << s.ToString();

  c = BaseConfig();
  c.eval.filelist = {data_.string()};
  c.eval.batch_size = int64_t{1} << 40;  // sizes no allocation: refused before any
  s = Run(c, "0.1");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("eval.batch_size = 1099511627776"), std::string::npos)
      << s.ToString();

  c = BaseConfig();
  c.data = Config::Data{};  // synthetic
  c.eval.filelist = {data_.string()};
  s = Run(c, "0.1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("[eval] reads files in the format of data.source, which must then be "
                             "\"csv\" or \"multislot\", not \"synthetic\""),
            std::string::npos) << s.ToString();

  c = BaseConfig();
  c.eval.filelist = {data_.string()};
  c.train.fetch = {"eval_auc"};  // a var of that name would take the evaluation's AUC's key
  s = Run(c, "0.1", "eval_auc = scale(avg, scale=1.0)\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'eval_auc' is also the record key of an evaluation's figure"),
            std::string::npos) << s.ToString();

  c = BaseConfig();
  c.eval.filelist = {(dir_.path() / "missing-*.csv").string()};
  s = Run(c, "0.1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing-*.csv"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace fleet
