// Training on careless or hostile inputs: an error raised while a step runs names the data file
// and lines of its batch; sizes that fleet.toml or the program ask for and that cannot fit are
// refused before anything is allocated, naming the key or the var and the bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include "job/pipeline.h"
#include "job/train.h"
#include "plugin/registry.h"
#include "temp_dir.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

using fleet::test_util::TempDir;

// A classifier of WIDTH inputs into 2 classes.
constexpr const char* kClassifier =
    "x = data(\"x\", shape=[-1, WIDTH], dtype=\"float32\")\n"
    "y = data(\"y\", shape=[-1, 1], dtype=\"int64\")\n"
    "h = fc(x, size=HIDDEN, act=\"tanh\")\n"
    "prediction = fc(h, size=2, act=\"softmax\")\n"
    "avg = mean(cross_entropy(prediction, y))\n"
    "minimize(avg, optimizer=sgd(learning_rate=0.01))\n";

class TrainInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(registry_->Load("cpu").ok());
  }

  // Trains the classifier (`width` inputs, `hidden` units) under `config`.
  Status Run(const Config& config, const std::string& hidden = "8",
             const std::string& width = "4") {
    std::string text = kClassifier;
    text.replace(text.find("WIDTH"), 5, width);
    text.replace(text.find("HIDDEN"), 6, hidden);
    const fs::path program = dir_.Write("model.fleet", text);
    auto programs = BuildPrograms(program, Stage::kOptimized);
    if (!programs.ok()) return programs.status();
    std::ostringstream out;
    return Train(config, *programs, *registry_, "cpu", out).status();
  }

  // A CSV of `rows` samples with label 0 or 1, except `bad_label` on line `bad_line`.
  fs::path Csv(int rows, int bad_line, int bad_label) {
    std::string text;
    for (int line = 1; line <= rows; ++line) {
      text += "0.5,-0.5,0.25,1," + std::to_string(line == bad_line ? bad_label : line % 2) + "\n";
    }
    return dir_.Write("train.csv", text);
  }

  Config CsvConfig(const fs::path& csv) const {
    Config c;
    c.train.steps = 6;
    c.train.batch_size = 32;
    c.train.threads = 1;
    c.train.log_every = 100;
    c.data.source = "csv";
    c.data.csv_path = csv.string();
    return c;
  }

  TempDir dir_;
  std::unique_ptr<PluginRegistry> registry_;
};

// The label on line 70 is out of range: the step of batch 3 (lines 65-96) fails, and the message
// says where that batch came from, whether a reader thread prepared it or not.
TEST_F(TrainInputsTest, AStepErrorNamesTheFileAndLinesOfItsBatch) {
  const fs::path csv = Csv(200, 70, 2);
  for (int64_t queue : {4, 0}) {
    for (const char* dataset : {"memory", "queue"}) {
      Config config = CsvConfig(csv);
      config.data.queue_batches = queue;
      config.data.dataset = dataset;
      const Status s = Run(config);
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.message().find("Label[5] = 2 is outside [0, 2)"), std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find("(batch 3: " + csv.string() + " lines 65-96)"),
                std::string::npos)
          << s.message();
      EXPECT_EQ(s.message().rfind("step 3: ", 0), 0u) << s.message();
    }
  }
}

// train.batch_size = 2^31 - 1 is allowed by the schema, but a batch of it cannot be held: refused
// before any allocation, naming the key and the bytes, not "cannot allocate" from deep inside.
// (Samples of 256 KiB, so that no machine holds such a batch.)
TEST_F(TrainInputsTest, ABatchThatCannotFitNamesTrainBatchSize) {
  Config config;
  config.train.steps = 1;
  config.train.batch_size = 2147483647;
  config.train.threads = 1;
  const Status s = Run(config, "8", "65536");
  ASSERT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  // 65536 float32 inputs and an int64 label: 262152 bytes a sample.
  EXPECT_NE(s.message().find("train.batch_size = 2147483647: a batch of 2147483647 samples of "
                             "262152 bytes needs 562967133028344 bytes (512.0 TiB), more than "
                             "the "),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("of memory this process can use"), std::string::npos)
      << s.message();
}

// A reader thread holding data.queue_batches batches ahead: the product is checked too, naming
// that key (a batch of 96 MiB fits; 65537 of them do not).
TEST_F(TrainInputsTest, AReadAheadThatCannotFitNamesDataQueueBatches) {
  Config config = CsvConfig(Csv(64, 0, 0));
  config.train.batch_size = int64_t{1} << 22;
  config.data.queue_batches = 65536;
  const Status s = Run(config);
  ASSERT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("data.queue_batches = 65536: the reader thread holds 65536 batches "
                             "of 100663296 bytes (96.0 MiB) ahead"),
            std::string::npos)
      << s.message();
}

// fc(x, size=2^40) passes the shape checks: its weight is refused before the startup program
// allocates it, naming the var, its dtype and shape and the bytes.
TEST_F(TrainInputsTest, AParameterThatCannotFitIsRefusedNamingTheVar) {
  const Status s = Run(CsvConfig(Csv(64, 0, 0)), "1099511627776");
  ASSERT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("startup program: op #"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("persistable var 'fc_0.w_0' float32[4, 1099511627776] needs "
                             "17592186044416 bytes (16.0 TiB), more than the "),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace fleet
