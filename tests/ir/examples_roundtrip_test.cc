// Every example program, at every stage of the pipeline, survives the text form unchanged and
// passes the verifier: the text IR is what `show` prints and what pass tests are written in, so
// it must hold whatever the frontend, autodiff and optimizers produce.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "job/pipeline.h"
#include "ir/text.h"
#include "ops/verifier.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> ExamplePrograms() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(FLEET_EXAMPLES_DIR)) {
    if (entry.path().extension() == ".fleet") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(IrExamples, EveryStageRoundTripsAndVerifies) {
  const auto programs = ExamplePrograms();
  ASSERT_GE(programs.size(), 3u) << "expected the mlp, fit_a_line and cnn examples";
  for (const fs::path& file : programs) {
    for (Stage stage : {Stage::kParsed, Stage::kBackward, Stage::kOptimized}) {
      auto built = BuildPrograms(file, stage);
      ASSERT_TRUE(built.ok()) << file << ": " << built.status().ToString();
      for (const ir::Program* p : {&built->startup, &built->main}) {
        const std::string text = ir::PrintProgram(*p);
        auto parsed = ir::ParseProgram(text, file.filename().string());
        ASSERT_TRUE(parsed.ok()) << file << ": " << parsed.status().ToString() << "\n" << text;
        EXPECT_TRUE(*parsed == *p) << file << ": the program changed through its text form";
        EXPECT_EQ(ir::PrintProgram(*parsed), text) << file;
        Status verified = ir::VerifyProgram(*p);
        EXPECT_TRUE(verified.ok()) << file << ": " << verified.ToString();
      }
    }
  }
}

}  // namespace
}  // namespace fleet
