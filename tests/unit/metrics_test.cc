// What a training loop reports (job/metrics.h, job/progress.h): the vars that metric(...) and
// [train] fetch name, with lr, ips, reader_cost, batch_cost and eta_s, in every progress line
// and metrics record; the refusals of vars that cannot be reported; the keys' configuration.
// The event files' format is read back in tests/cli/tfevents_check.py.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "job/pipeline.h"
#include "job/progress.h"
#include "job/tensorboard.h"
#include "job/train.h"
#include "plugin/registry.h"
#include "temp_dir.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

using fleet::test_util::TempDir;

// A classifier of 4 inputs with two metrics: its accuracy and a constant 2.
constexpr const char* kProgram =
    "x = data(\"x\", shape=[-1, 4], dtype=\"float32\")\n"
    "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
    "h = fc(x, size=8, act=\"tanh\")\n"
    "prediction = fc(h, size=2, act=\"softmax\")\n"
    "avg = mean(cross_entropy(prediction, y))\n"
    "minimize(avg, optimizer=sgd(learning_rate=LR))\n"
    "metric(\"acc\", accuracy(prediction, y))\n"
    "metric(\"two\", scale(avg, scale=0.0, bias=2.0))\n";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(registry_->Load("cpu").ok());
  }

  Config BaseConfig() const {
    Config c;
    c.train.steps = 7;
    c.train.batch_size = 16;
    c.train.threads = 1;
    c.train.log_every = 3;
    return c;
  }

  // Trains `program` (kProgram with `extra` appended, LR replaced by `lr`) under `config`;
  // what it printed goes to out_.
  Status Run(const Config& config, const std::string& extra = "",
             const std::string& lr = "0.05") {
    std::string text = std::string(kProgram) + extra;
    text.replace(text.find("LR"), 2, lr);
    const fs::path program = dir_.Write("model.fleet", text);
    auto programs = BuildPrograms(program, Stage::kOptimized);
    if (!programs.ok()) return programs.status();
    out_.str("");
    return Train(config, *programs, *registry_, "cpu", out_).status();
  }

  static std::vector<nlohmann::ordered_json> Records(const fs::path& file) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    std::vector<nlohmann::ordered_json> records;
    for (const std::string& line : Lines(text.str())) {
      records.push_back(nlohmann::ordered_json::parse(line));
    }
    return records;
  }

  TempDir dir_{"fleet_metrics_test"};
  std::unique_ptr<PluginRegistry> registry_;
  std::ostringstream out_;
};

// Every record has exactly the documented keys, in order, with numbers of the right kind, and
// the values hang together: the fetched loss var is the loss, ips is samples over batch_cost,
// eta_s the steps left times batch_cost.
TEST_F(MetricsTest, RecordsHaveTheDocumentedKeys) {
  Config c = BaseConfig();
  c.train.fetch = {"avg"};
  c.train.metrics_file = (dir_.path() / "m.jsonl").string();
  ASSERT_TRUE(Run(c).ok()) << out_.str();
  const auto records = Records(dir_.path() / "m.jsonl");
  ASSERT_EQ(records.size(), 3u);  // steps 3, 6 and the last, 7
  const std::vector<std::string> keys = {"step", "loss",       "acc",        "two",
                                         "avg",  "lr",         "ips",        "reader_cost",
                                         "batch_cost", "eta_s", "elapsed_s"};
  const int64_t steps[] = {3, 6, 7};
  double last_elapsed = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    std::vector<std::string> got;
    for (const auto& [key, value] : r.items()) got.push_back(key);
    EXPECT_EQ(got, keys) << r.dump();
    ASSERT_TRUE(r["step"].is_number_integer()) << r.dump();
    EXPECT_EQ(r["step"].get<int64_t>(), steps[i]);
    for (size_t k = 1; k < keys.size(); ++k) {
      EXPECT_TRUE(r[keys[k]].is_number_float()) << keys[k] << " in " << r.dump();
    }
    EXPECT_EQ(r["avg"].get<double>(), r["loss"].get<double>());
    EXPECT_EQ(r["two"].get<double>(), 2.0);
    const double acc = r["acc"].get<double>();
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
    EXPECT_NEAR(acc * 16, std::round(acc * 16), 1e-4);  // a share of 16 samples
    EXPECT_EQ(r["lr"].get<double>(), static_cast<double>(0.05f));  // the float32 var
    const double batch_cost = r["batch_cost"].get<double>();
    EXPECT_GT(batch_cost, 0.0);
    EXPECT_GE(r["reader_cost"].get<double>(), 0.0);
    EXPECT_LE(r["reader_cost"].get<double>(), batch_cost);
    EXPECT_NEAR(r["ips"].get<double>() * batch_cost, 16.0, 1e-6);
    EXPECT_NEAR(r["eta_s"].get<double>(), batch_cost * static_cast<double>(7 - steps[i]), 1e-9);
    EXPECT_GE(r["elapsed_s"].get<double>(), last_elapsed);
    last_elapsed = r["elapsed_s"].get<double>();
  }
}

// The line carries what the record does, in the documented order.
TEST_F(MetricsTest, ProgressLinesCarryTheReportedValues) {
  Config c = BaseConfig();
  c.train.fetch = {"avg"};
  c.train.metrics_file = (dir_.path() / "m.jsonl").string();
  ASSERT_TRUE(Run(c).ok()) << out_.str();
  const auto records = Records(dir_.path() / "m.jsonl");
  const std::regex line_re(
      R"(step (\d+)/7 loss ([0-9.]+) acc ([0-9.]+) two 2\.000000 avg ([0-9.]+) lr 0\.05 )"
      R"(reader_cost ([0-9.]+)s batch_cost ([0-9.]+)s ips ([0-9.]+) samples/s eta ([0-9.]+)s)");
  size_t n = 0;
  for (const std::string& line : Lines(out_.str())) {
    if (line.rfind("step ", 0) != 0) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_re)) << line;
    ASSERT_LT(n, records.size());
    const auto& r = records[n++];
    EXPECT_EQ(std::stoll(m[1]), r["step"].get<int64_t>());
    EXPECT_NEAR(std::stod(m[2]), r["loss"].get<double>(), 1e-6);
    EXPECT_NEAR(std::stod(m[3]), r["acc"].get<double>(), 1e-6);
    EXPECT_NEAR(std::stod(m[4]), r["avg"].get<double>(), 1e-6);
    EXPECT_NEAR(std::stod(m[6]), r["batch_cost"].get<double>(), 1e-5);
    EXPECT_NEAR(std::stod(m[7]), r["ips"].get<double>(), 0.05 + 1e-9 * r["ips"].get<double>());
  }
  EXPECT_EQ(n, 3u) << out_.str();
}

// lr is the var's value at each logged step, not the rate the program started with:
// exponential_decay(0.1, gamma=0.5) uses 0.1 * 0.5^(step - 1) at step `step` (its counter starts
// at 0), whose float32 values the records carry.
TEST_F(MetricsTest, LrFollowsTheSchedule) {
  Config c = BaseConfig();
  c.train.metrics_file = (dir_.path() / "m.jsonl").string();
  ASSERT_TRUE(Run(c, "", "exponential_decay(learning_rate=0.1, gamma=0.5)").ok()) << out_.str();
  const auto records = Records(dir_.path() / "m.jsonl");
  ASSERT_EQ(records.size(), 3u);
  for (const auto& r : records) {
    const double want = 0.1 * std::pow(0.5, r["step"].get<double>() - 1);
    EXPECT_NEAR(r["lr"].get<double>(), want, want * 1e-6) << r.dump();
  }
}

TEST_F(MetricsTest, VarsThatCannotBeReportedAreRefusedAtStart) {
  Config c = BaseConfig();
  c.train.fetch = {"h"};  // the hidden layer: [batch, 8]
  Status s = Run(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("train.fetch[0]: 'fc_0.tmp_2' has shape [16, 8]"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(out_.str().find("step "), std::string::npos);  // refused before the first step

  c.train.fetch = {"avg", "nope"};
  s = Run(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("train.fetch[1]: 'nope' is neither a variable of the program file "
                             "nor a var of its main program"),
            std::string::npos)
      << s.message();
  c.train.fetch = {"avgg"};
  s = Run(c);
  EXPECT_NE(s.message().find("(did you mean 'avg'?)"), std::string::npos) << s.message();

  // A main-program var by its own name works as well as the file's name for it.
  c.train.fetch = {"fc_0.tmp_2"};
  s = Run(c);
  EXPECT_NE(s.message().find("train.fetch[0]: 'fc_0.tmp_2' has shape [16, 8]"),
            std::string::npos)
      << s.message();

  // A metric of the program whose size shows only with the batch.
  c.train.fetch = {};
  s = Run(c, "metric(\"wide\", h)\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("metric \"wide\" (" + (dir_.path() / "model.fleet").string() +
                             ":9:1): 'fc_0.tmp_2' has shape [16, 8]"),
            std::string::npos)
      << s.message();

  // Names the records use already, and a name given twice.
  s = Run(c, "metric(\"lr\", avg)\n");
  EXPECT_NE(s.message().find("'lr' is a key every record has already"), std::string::npos)
      << s.message();
  c.train.fetch = {"two"};
  s = Run(c, "two = avg\n");
  EXPECT_NE(s.message().find("train.fetch[0]: 'two' is reported already by metric \"two\""),
            std::string::npos)
      << s.message();
}

TEST_F(MetricsTest, TheProgramFileRefusesBadMetricCalls) {
  Config c = BaseConfig();
  Status s = Run(c, "metric(\"acc\", avg)\n");
  EXPECT_NE(s.message().find(":9:8: metric: metric 'acc' is already reported (at "),
            std::string::npos)
      << s.message();
  s = Run(c, "metric(\"a b\", avg)\n");
  EXPECT_NE(s.message().find("a metric name is 1 to 64 of the characters"), std::string::npos)
      << s.message();
  s = Run(c, "w = fill_constant(shape=[2, 3], dtype=\"float32\", value=1.0)\nmetric(\"w\", w)\n");
  EXPECT_NE(s.message().find("a metric must hold one value, "), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(" holds 6"), std::string::npos) << s.message();
}

// A process that does not hold the learning rate (a parameter-server trainer) writes lr null,
// keeping every key; one reporting beside others writes its own files.
TEST_F(MetricsTest, OwnFilesAndNullLr) {
  Config c = BaseConfig();
  c.train.metrics_file = (dir_.path() / "m.jsonl").string();
  c.train.tensorboard_dir = dir_.path() / "tb";
  std::ostringstream out;
  ProgressLog log(c.train, 16, "trainer 1 of 2", out, {"acc"});
  ASSERT_TRUE(log.Open(true, "trainer1").ok());
  StepReport r = log.Measure(3);
  r.loss = 0.5;
  r.metrics = {NAN};
  ASSERT_TRUE(log.Log(3, r).ok());
  const auto records = MetricsTest::Records(dir_.path() / "m.trainer1.jsonl");
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(records[0].contains("lr")) << records[0].dump();
  EXPECT_TRUE(records[0].at("lr").is_null()) << records[0].dump();
  EXPECT_TRUE(records[0]["acc"].is_null()) << records[0].dump();  // not finite
  EXPECT_EQ(out.str().find(" lr "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(" (trainer 1 of 2)\n"), std::string::npos) << out.str();
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_.path() / "tb" / "trainer1")) {
    EXPECT_EQ(e.path().filename().string().rfind("events.out.tfevents.", 0), 0u);
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST(TensorBoardTest, MaskedCrc32cOfTheCheckString) {
  // CRC-32C("123456789") = 0xe3069283 (the CRC's check value), masked as TensorBoard does.
  const std::string check = "123456789";
  EXPECT_EQ(MaskedCrc32c(reinterpret_cast<const uint8_t*>(check.data()), check.size()),
            0xc78ab0e5u);
}

TEST(MetricsConfigTest, FetchAndTensorboardDir) {
  auto c = ParseConfig("[train]\nfetch = [\"auc\", \"acc\"]\ntensorboard_dir = \"tb\"\n",
                       "fleet.toml", "/etc/fleet", {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->train.fetch, (std::vector<std::string>{"auc", "acc"}));
  EXPECT_EQ(c->train.tensorboard_dir, fs::path("/etc/fleet/tb"));
  auto twice = ParseConfig("[train]\nfetch = [\"auc\", \"auc\"]\n", "fleet.toml", "/x", {});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("fleet.toml:2:17: train.fetch[1]: 'auc' is listed twice"),
            std::string::npos)
      << twice.status().message();
  auto scalar = ParseConfig("[train]\nfetch = \"auc\"\n", "fleet.toml", "/x", {});
  ASSERT_FALSE(scalar.ok());
  EXPECT_NE(scalar.status().message().find("expected an array of strings"), std::string::npos)
      << scalar.status().message();
  auto typo = ParseConfig("[train]\nfetchh = [\"auc\"]\n", "fleet.toml", "/x", {});
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("fetch"), std::string::npos)
      << typo.status().message();
}

}  // namespace
}  // namespace fleet
