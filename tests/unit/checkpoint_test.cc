// Checkpoints: the commit protocol, what resume picks (and skips) among committed, torn,
// corrupt and foreign checkpoints, sharded steps, pruning, restoring into a scope, and a writer
// killed at random points that never leaves a checkpoint resume would take for whole.
#include "checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/durable_file.h"
#include "support/input_file.h"
#include "executor/executor.h"
#include "plugin/registry.h"

namespace fleet::checkpoint {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_ckpt_XXXXXX";
    root_ = fs::path(::mkdtemp(tmpl)) / "ckpt";
  }
  void TearDown() override { fs::remove_all(root_.parent_path()); }

  // A state of two tensors whose values depend on `step`.
  static SafeTensors State(int64_t step, int64_t n = 6) {
    SafeTensors st;
    exec::HostTensor w;
    w.Reshape(ir::DataType::kFloat32, {2, n / 2});
    for (int64_t i = 0; i < n; ++i) w.data<float>()[i] = static_cast<float>(step * 100 + i);
    exec::HostTensor c;
    c.Reshape(ir::DataType::kInt64, {1});
    c.data<int64_t>()[0] = step;
    st.tensors.push_back({"fc_0.w_0", std::move(w)});
    st.tensors.push_back({"@LR_DECAY_COUNTER@", std::move(c)});
    return st;
  }
  static CheckpointInfo Info(int64_t step, std::string hash = "00000000000000aa") {
    CheckpointInfo info;
    info.step = step;
    info.program_hash = std::move(hash);
    info.world_size = 2;
    info.data_batches = step;
    info.data_batch_size = 64;
    info.config = R"({"steps": 100})";
    return info;
  }
  void Save(int64_t step, int64_t keep = 0) {
    ASSERT_TRUE(SaveCheckpoint(root_, Info(step), State(step), keep).ok());
  }
  std::optional<LoadedCheckpoint> Latest(std::vector<std::string>& warnings,
                                         const std::string& hash = "00000000000000aa") {
    auto found = FindLatestCheckpoint(root_, hash, "", 1, warnings);
    EXPECT_TRUE(found.ok()) << found.status().ToString();
    return found.ok() ? std::move(*found) : std::nullopt;
  }
  static std::string Text(const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static void FlipByte(const fs::path& file, std::streamoff at) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(at);
    f.write(&c, 1);
  }

  fs::path root_;
};

TEST_F(CheckpointTest, StepNamesSortAndParse) {
  EXPECT_EQ(StepDirName(120), "step_0000120");
  EXPECT_EQ(StepDirName(123456789), "step_123456789");
  EXPECT_EQ(ParseStepDirName("step_0000120"), 120);
  EXPECT_EQ(ParseStepDirName("step_123456789"), 123456789);
  EXPECT_FALSE(ParseStepDirName("step_12"));
  EXPECT_FALSE(ParseStepDirName(".step_0000120.tmp-77"));
  EXPECT_FALSE(ParseStepDirName("step_00001x0"));
}

TEST_F(CheckpointTest, SaveCommitsFilesManifestAndLatest) {
  Save(20);
  const fs::path dir = root_ / "step_0000020";
  EXPECT_TRUE(fs::is_regular_file(dir / kStateFile));
  EXPECT_TRUE(fs::is_regular_file(dir / kManifestFile));
  EXPECT_EQ(Text(root_ / kLatestFile), "step_0000020\n");
  // Nothing temporary is left behind.
  for (const auto& e : fs::recursive_directory_iterator(root_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  auto read = ReadCheckpointDir(dir);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->info.step, 20);
  EXPECT_EQ(read->info.world_size, 2);
  EXPECT_EQ(read->info.data_batches, 20);
  EXPECT_EQ(read->info.data_batch_size, 64);
  EXPECT_EQ(read->info.program_hash, "00000000000000aa");
  ASSERT_EQ(read->state.tensors.size(), 2u);
  EXPECT_EQ(read->state.tensors[0].name, "fc_0.w_0");
  EXPECT_EQ(read->state.tensors[0].tensor.bytes, State(20).tensors[0].tensor.bytes);
  EXPECT_EQ(read->state.tensors[1].tensor.data<int64_t>()[0], 20);
  // The manifest's checksum is the file's CRC-32 as zlib computes it.
  auto bytes = ReadInputFileBytes(dir / kStateFile, "checkpoint state", kMaxInputShardBytes);
  ASSERT_TRUE(bytes.ok());
  char crc[9];
  std::snprintf(crc, sizeof(crc), "%08x", Crc32(*bytes));
  EXPECT_NE(Text(dir / kManifestFile).find(std::string("\"crc32\": \"") + crc + "\""),
            std::string::npos)
      << Text(dir / kManifestFile);
}

// Checkpoints hold a model and its optimizer state: owner-only whatever the umask.
TEST_F(CheckpointTest, CheckpointsAreOwnerOnly) {
  const mode_t old_mask = ::umask(022);
  Save(30);
  ::umask(old_mask);
  auto mode = [](const fs::path& p) { return fs::status(p).permissions() & fs::perms::all; };
  EXPECT_EQ(mode(root_), fs::perms::owner_all);
  const fs::path dir = root_ / "step_0000030";
  EXPECT_EQ(mode(dir), fs::perms::owner_all);
  for (const fs::path& f : {dir / kStateFile, dir / kManifestFile, root_ / kLatestFile}) {
    EXPECT_EQ(mode(f), fs::perms::owner_read | fs::perms::owner_write) << f;
  }
  // A directory that already existed keeps its mode.
  const fs::path shared = root_.parent_path() / "shared_parent";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  ASSERT_TRUE(MakePrivateDirectories(shared / "a" / "b").ok());
  EXPECT_EQ(mode(shared), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  EXPECT_EQ(mode(shared / "a"), fs::perms::owner_all);
  EXPECT_EQ(mode(shared / "a" / "b"), fs::perms::owner_all);
  fs::remove_all(shared);
}

TEST_F(CheckpointTest, ResumeTakesTheNewestAndKeepPrunesTheOldest) {
  for (int64_t s : {10, 20, 30, 40}) Save(s, /*keep=*/2);
  EXPECT_FALSE(fs::exists(root_ / "step_0000010"));
  EXPECT_FALSE(fs::exists(root_ / "step_0000020"));
  EXPECT_TRUE(fs::exists(root_ / "step_0000030"));
  std::vector<std::string> warnings;
  auto found = Latest(warnings);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->info.step, 40);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(CheckpointTest, NoRootOrAnEmptyRootHasNothingToResume) {
  std::vector<std::string> warnings;
  EXPECT_FALSE(Latest(warnings).has_value());
  fs::create_directories(root_);
  EXPECT_FALSE(Latest(warnings).has_value());
  std::ofstream(root_.parent_path() / "file") << "x";
  auto bad = FindLatestCheckpoint(root_.parent_path() / "file", "h", "", 1, warnings);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not a directory"), std::string::npos);
}

TEST_F(CheckpointTest, CorruptTruncatedAndTornCheckpointsAreSkippedWithAReason) {
  for (int64_t s : {10, 20, 30, 40}) Save(s);
  const fs::path flipped = root_ / "step_0000040" / kStateFile;
  FlipByte(flipped, static_cast<std::streamoff>(fs::file_size(flipped)) - 3);     // corrupt
  fs::resize_file(root_ / "step_0000030" / kStateFile, 50);                       // truncated
  fs::remove(root_ / "step_0000020" / kManifestFile);                             // torn
  fs::create_directories(root_ / ".step_0000050.tmp-12345");                      // a dead writer
  std::ofstream(root_ / ".step_0000050.tmp-12345" / kStateFile) << "half";
  std::vector<std::string> warnings;
  auto found = Latest(warnings);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->info.step, 10);
  EXPECT_EQ(found->state.tensors[1].tensor.data<int64_t>()[0], 10);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("step_0000040: persistables.safetensors: checksum mismatch"),
            std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("step_0000030: persistables.safetensors: 50 bytes, the manifest "
                             "says"),
            std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find("step_0000020: no manifest.json (incomplete)"), std::string::npos)
      << warnings[2];
  // A manifest edited by hand (or torn) is refused too.
  std::ofstream(root_ / "step_0000010" / kManifestFile) << "{\"format\": 1, \"step\": ";
  warnings.clear();
  EXPECT_FALSE(Latest(warnings).has_value());
  EXPECT_NE(warnings.back().find("not a JSON object"), std::string::npos) << warnings.back();
}

TEST_F(CheckpointTest, ACheckpointOfAnotherProgramIsAnErrorNotASkip) {
  Save(10);
  std::vector<std::string> warnings;
  auto found = FindLatestCheckpoint(root_, "00000000000000bb", "", 1, warnings);
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("written by another program (hash 00000000000000aa, "
                                          "this one is 00000000000000bb)"),
            std::string::npos)
      << found.status().message();
}

TEST_F(CheckpointTest, ANewerFormatIsRefusedByName) {
  Save(10);
  const fs::path m = root_ / "step_0000010" / kManifestFile;
  std::string text = Text(m);
  text.replace(text.find("\"format\": 1"), 11, "\"format\": 7");
  std::ofstream(m, std::ios::trunc) << text;
  auto read = ReadCheckpointDir(root_ / "step_0000010");
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("manifest format 7, but this fleet-host reads format 1"),
            std::string::npos) << read.status().message();
}

// A manifest's sizes are held to what a job can have: a world size in [1, 65536] as fleet.toml
// and the launchers allow (0 or 2^40 were resumed with only a warning), a shard count likewise,
// and no negative step or batch count. The error names the manifest file and the field, and
// resume skips such a checkpoint with that error as its warning.
TEST_F(CheckpointTest, ManifestSizesOutsideAJobsLimitsAreRefusedNamingTheField) {
  Save(10);
  const fs::path dir = root_ / "step_0000010";
  const fs::path m = dir / kManifestFile;
  const std::string original = Text(m);
  struct Case {
    std::string from, to, says;
  };
  for (const Case& c : std::vector<Case>{
           {"\"world_size\": 2", "\"world_size\": 0", "'world_size' = 0 is outside [1, 65536]"},
           {"\"world_size\": 2", "\"world_size\": 1099511627776",
            "'world_size' = 1099511627776 is outside [1, 65536]"},
           {"\"world_size\": 2", "\"world_size\": 18446744073709551615",
            "'world_size' = 18446744073709551615 is outside [1, 65536]"},
           {"\"step\": 10", "\"step\": -1", "'step' = -1 is outside [0, "},
           {"\"batches\": 10", "\"batches\": -5", "'data.batches' = -5 is outside [0, "},
       }) {
    SCOPED_TRACE(c.to);
    std::string text = original;
    ASSERT_NE(text.find(c.from), std::string::npos) << text;
    text.replace(text.find(c.from), c.from.size(), c.to);
    std::ofstream(m, std::ios::trunc) << text;
    auto read = ReadCheckpointDir(dir);
    ASSERT_FALSE(read.ok());
    EXPECT_NE(read.status().message().find(m.string() + ": " + c.says), std::string::npos)
        << read.status().message();
    std::vector<std::string> warnings;
    EXPECT_FALSE(Latest(warnings).has_value());
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("step_0000010: " + m.string() + ": " + c.says), std::string::npos)
        << warnings[0];
  }
  // A shard's count, which readers loop over.
  CheckpointInfo shard = Info(20);
  shard.shard = "pserver.0";
  shard.num_shards = 1;
  ASSERT_TRUE(SaveCheckpoint(root_, shard, State(20), 0).ok());
  const fs::path sm = root_ / "step_0000020" / "pserver.0" / kManifestFile;
  std::string text = Text(sm);
  ASSERT_NE(text.find("\"count\": 1"), std::string::npos) << text;
  text.replace(text.find("\"count\": 1"), 10, "\"count\": 4611686018427387904");
  std::ofstream(sm, std::ios::trunc) << text;
  auto read = ReadCheckpointDir(sm.parent_path());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("'shard.count' = 4611686018427387904 is outside [1, "
                                         "65536]"),
            std::string::npos)
      << read.status().message();
}

TEST_F(CheckpointTest, SavingAStepAgainReplacesACorruptOne) {
  Save(10);
  Save(20);
  const fs::path flipped = root_ / "step_0000020" / kStateFile;
  FlipByte(flipped, static_cast<std::streamoff>(fs::file_size(flipped)) - 3);
  Save(20);  // a job resumed from step 10 reaches step 20 again
  std::vector<std::string> warnings;
  auto found = Latest(warnings);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->info.step, 20);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(CheckpointTest, AFailedSaveLeavesThePreviousCheckpointIntact) {
  Save(10);
  // The disk fills up (a file size limit gives the same EFBIG a full quota would) while the
  // next checkpoint is written, in a child so the limit stays there.
  const fs::path message = root_.parent_path() / "message";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    Status s = SaveCheckpoint(root_, Info(20), State(20, 1 << 16), 0);
    std::ofstream(message) << s.message();
    _exit(s.ok() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string m = Text(message);
  EXPECT_NE(m.find("checkpoint step_0000020"), std::string::npos) << m;
  EXPECT_NE(m.find("persistables.safetensors.tmp-"), std::string::npos) << m;
  EXPECT_NE(m.find("': File too large"), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(root_ / "step_0000020"));
  for (const auto& e : fs::directory_iterator(root_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  // Something that is no checkpoint where the next one would go is not replaced.
  std::ofstream(root_ / "step_0000020") << "in the way";
  Status s = SaveCheckpoint(root_, Info(20), State(20), 0);
  EXPECT_NE(s.message().find("'" + (root_ / "step_0000020").string() +
                             "' exists and is not a checkpoint"),
            std::string::npos) << s.message();
  std::vector<std::string> warnings;
  auto found = Latest(warnings);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->info.step, 10);
  EXPECT_EQ(Text(root_ / kLatestFile), "step_0000010\n");
}

TEST_F(CheckpointTest, AShardedStepCountsOnlyWhenEveryShardIsThere) {
  auto save_shard = [&](int64_t step, int i) {
    CheckpointInfo info = Info(step);
    info.shard = "pserver." + std::to_string(i);
    info.num_shards = 2;
    ASSERT_TRUE(SaveCheckpoint(root_, info, State(step * 10 + i), /*keep=*/1).ok());
  };
  save_shard(10, 0);
  EXPECT_FALSE(fs::exists(root_ / kLatestFile));  // half a checkpoint is not the latest
  save_shard(10, 1);
  EXPECT_EQ(Text(root_ / kLatestFile), "step_0000010\n");
  save_shard(20, 1);  // step 20: only server 1 got there
  std::vector<std::string> warnings;
  for (int i = 0; i < 2; ++i) {
    auto found = FindLatestCheckpoint(root_, "00000000000000aa", "pserver." + std::to_string(i),
                                      2, warnings);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->info.step, 10);
    EXPECT_EQ((*found)->state.tensors[1].tensor.data<int64_t>()[0], 100 + i);  // its own shard
  }
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("step_0000020: pserver.0: no manifest.json"), std::string::npos)
      << warnings[0];
  // A job with another number of servers cannot use it.
  warnings.clear();
  auto three = FindLatestCheckpoint(root_, "00000000000000aa", "pserver.0", 3, warnings);
  ASSERT_TRUE(three.ok());
  EXPECT_FALSE(three->has_value());
  save_shard(20, 0);  // completes step 20; keep = 1 removes step 10
  EXPECT_FALSE(fs::exists(root_ / "step_0000010"));
  EXPECT_EQ(Text(root_ / kLatestFile), "step_0000020\n");
}

class RestoreTest : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(registry_->Load("cpu").ok());
    auto ex = exec::Executor::Create(*registry_, "cpu", {});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    executor_ = std::move(*ex);
  }
  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<exec::Executor> executor_;
};

TEST_F(RestoreTest, SnapshotAndRestoreRoundTripAndMismatchesAreListed) {
  exec::Scope& scope = executor_->scope();
  SafeTensors saved = State(7);
  for (const auto& t : saved.tensors) ASSERT_TRUE(scope.Write(t.name, t.tensor).ok());
  auto snap = SnapshotScope(scope);
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->tensors.size(), 2u);
  // Overwrite, then restore the snapshot.
  for (const auto& t : State(9).tensors) ASSERT_TRUE(scope.Write(t.name, t.tensor).ok());
  ASSERT_TRUE(RestoreScope(*snap, scope, "ckpt").ok());
  EXPECT_EQ(scope.Read("fc_0.w_0")->bytes, saved.tensors[0].tensor.bytes);

  SafeTensors bad = State(7, 8);                              // another shape
  bad.tensors.push_back({"extra_var", bad.tensors[1].tensor});  // not in the program
  bad.tensors.erase(bad.tensors.begin() + 1);                 // counter missing
  Status s = RestoreScope(bad, scope, "checkpoint 'x'");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "checkpoint 'x' does not fit this job's state: missing '@LR_DECAY_COUNTER@'; not in "
            "the program 'extra_var'; different 'fc_0.w_0' (float32[2, 4] in the checkpoint, "
            "float32[2, 3] in the program)");
  EXPECT_EQ(scope.Read("fc_0.w_0")->bytes, saved.tensors[0].tensor.bytes);  // untouched

  // A file of thousands of strangers, one with a terminal escape in its name, gives a short
  // message that echoes none of the escape.
  SafeTensors crowd = State(7);
  for (int i = 0; i < 5000; ++i) {
    crowd.tensors.push_back({"stranger_" + std::to_string(i), crowd.tensors[0].tensor});
  }
  crowd.tensors.push_back({"\x1b[2Jx", crowd.tensors[0].tensor});
  s = RestoreScope(crowd, scope, "checkpoint 'x'");
  ASSERT_FALSE(s.ok());
  EXPECT_LT(s.message().size(), 400u) << s.message().substr(0, 600);
  EXPECT_NE(s.message().find("and 4993 more"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\x1b'), std::string::npos) << s.message();
}

// A writer SIGKILLed at random moments of saving (between files, inside a write, before and
// after the rename, while pruning) never leaves a checkpoint that resume takes for whole but is
// not: whatever resume picks verifies, and holds the values of the step it claims.
TEST_F(CheckpointTest, AWriterKilledAtRandomNeverLeavesATornCheckpoint) {
  std::mt19937 rng(12345);
  int64_t resumed_at_least = 0;
  for (int round = 0; round < 25; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // Big enough that a save takes a while, so kills land inside writes too.
      for (int64_t step = 1 + round * 1000;; ++step) {
        if (!SaveCheckpoint(root_, Info(step), State(step, 1 << 18), /*keep=*/2).ok()) _exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 30000));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer failed on its own: " << status;
    std::vector<std::string> warnings;
    auto found = Latest(warnings);
    if (!found.has_value()) continue;  // killed before its first commit
    const int64_t step = found->info.step;
    EXPECT_GE(step, resumed_at_least) << "resume went back past a committed checkpoint";
    resumed_at_least = step;
    ASSERT_EQ(found->state.tensors.size(), 2u);
    EXPECT_EQ(found->state.tensors[1].tensor.data<int64_t>()[0], step);
    EXPECT_EQ(found->state.tensors[0].tensor.data<float>()[5], static_cast<float>(step * 100 + 5));
  }
  EXPECT_GT(resumed_at_least, 0) << "no kill came after a commit; the test proved nothing";
}

}  // namespace
}  // namespace fleet::checkpoint
