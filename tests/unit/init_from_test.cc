// [train] init_from end to end: weights written by numpy (and a safetensors file written with
// Python's struct and json) load after startup and train; bad files stop the run naming the var
// and the file.
#include "checkpoint/init_from.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "job/pipeline.h"
#include "job/train.h"
#include "data/npy.h"
#include "plugin/kernel.h"
#include "plugin/registry.h"

#include "temp_dir.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";

using fleet::test_util::TempDir;

// The model: y ~ x w + b with x of 4 features; fc names its weights fc_0.w_0 [4, 1] and
// fc_0.b_0 [1].
std::string Program(double learning_rate) {
  std::ostringstream lr;
  lr << learning_rate;
  return "x = data(\"x\", shape=[-1, 4], dtype=\"float32\")\n"
         "y = data(\"y\", shape=[-1, 1], dtype=\"float32\")\n"
         "avg = mean(square_error_cost(fc(x, size=1), y))\n"
         "minimize(avg, optimizer=sgd(learning_rate=" + lr.str() + "))\n";
}

// The data and the weights, as the test computes them independently of numpy.
constexpr int kRows = 8;
float X(int i, int j) { return static_cast<float>(((i + j) % 5) * 0.5 - 1.0); }
float Y(int i) { return static_cast<float>(i * 0.25); }
const float kW[4] = {0.5f, -0.25f, 1.0f, 0.125f};
const float kB = 0.75f;

// mean((x w + b - y)^2) over the rows, in double.
double HandLoss() {
  double sum = 0;
  for (int i = 0; i < kRows; ++i) {
    double p = kB;
    for (int j = 0; j < 4; ++j) p += static_cast<double>(X(i, j)) * kW[j];
    sum += (p - Y(i)) * (p - Y(i));
  }
  return sum / kRows;
}

// numpy writes data/x.npy, data/y.npy and weights/fc_0.w_0.npy; Python's struct and json write
// the bias as weights/bias.safetensors.
const char* kScript = R"PY(
import json, os, struct, sys
import numpy as np
root = sys.argv[1]
os.makedirs(os.path.join(root, "data"), exist_ok=True)
os.makedirs(os.path.join(root, "weights"), exist_ok=True)
x = np.array([[((i + j) % 5) * 0.5 - 1.0 for j in range(4)] for i in range(8)], dtype=np.float32)
y = np.array([[i * 0.25] for i in range(8)], dtype=np.float32)
np.save(os.path.join(root, "data", "x.npy"), x)
np.save(os.path.join(root, "data", "y.npy"), y)
np.save(os.path.join(root, "weights", "fc_0.w_0.npy"),
        np.array([[0.5], [-0.25], [1.0], [0.125]], dtype=np.float32))
b = np.array([0.75], dtype=np.float32).tobytes()
header = json.dumps({"fc_0.b_0": {"dtype": "F32", "shape": [1], "data_offsets": [0, len(b)]},
                     "__metadata__": {"source": "numpy"}}).encode()
with open(os.path.join(root, "weights", "bias.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + b)
)PY";

class InitFromTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is needed to write the weights";
    LoadOptions load;
    load.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(load);
    ASSERT_TRUE(registry_->Load("cpu").ok());
    const fs::path script = dir_.Write("make.py", kScript);
    const std::string cmd = std::string(kPython) + " '" + script.string() + "' '" +
                            dir_.path().string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    weights_ = dir_.path() / "weights";
  }

  Config MakeConfig(int64_t steps) const {
    Config c;
    c.train.steps = steps;
    c.train.batch_size = kRows;
    c.train.threads = 1;
    c.train.log_every = 1;
    c.train.init_from = weights_;
    c.data.source = "npy";
    c.data.files["x"] = dir_.path() / "data" / "x.npy";
    c.data.files["y"] = dir_.path() / "data" / "y.npy";
    return c;
  }

  StatusOr<TrainSummary> Run(const Config& config, double learning_rate) {
    const fs::path program = dir_.Write("model.fleet", Program(learning_rate));
    FLEET_ASSIGN_OR_RETURN(frontend::ParsedProgram programs,
                           BuildPrograms(program, Stage::kOptimized));
    std::ostringstream out;
    return Train(config, programs, *registry_, "cpu", out);
  }

  std::vector<float> Saved(const fs::path& dir, const std::string& name) {
    StatusOr<data::NpyArray> a = data::ReadNpy(dir / (name + ".npy"));
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (!a.ok()) return {};
    return std::vector<float>(a->data<float>(), a->data<float>() + a->numel());
  }

  TempDir dir_;
  fs::path weights_;
  std::unique_ptr<PluginRegistry> registry_;
};

TEST_F(InitFromTest, NumpyWeightsLoadExactly) {
  // With a learning rate of 0 the step leaves the parameters as loaded, so what is saved after
  // it must be the files' values bit for bit, and the step's loss the loaded model's loss.
  Config config = MakeConfig(1);
  config.train.save_params_dir = dir_.path() / "out";
  StatusOr<TrainSummary> s = Run(config, 0.0);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(Saved(config.train.save_params_dir, "fc_0.w_0"),
            (std::vector<float>{0.5f, -0.25f, 1.0f, 0.125f}));
  EXPECT_EQ(Saved(config.train.save_params_dir, "fc_0.b_0"), (std::vector<float>{0.75f}));
  EXPECT_NEAR(s->final_loss, HandLoss(), 1e-5 * HandLoss());
}

TEST_F(InitFromTest, TrainsFromTheLoadedWeights) {
  Config config = MakeConfig(100);
  StatusOr<TrainSummary> s = Run(config, 0.05);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->logged_losses.size(), 100u);
  // The first step's loss is the loaded model's; training lowers it.
  EXPECT_NEAR(s->logged_losses.front(), HandLoss(), 1e-5 * HandLoss());
  EXPECT_TRUE(std::isfinite(s->final_loss));
  EXPECT_LT(s->final_loss, 0.8 * s->logged_losses.front());
}

TEST_F(InitFromTest, ASubsetLoadsAndTheRestKeepsStartupsValues) {
  fs::remove(weights_ / "bias.safetensors");
  Config config = MakeConfig(1);
  config.train.save_params_dir = dir_.path() / "out";
  StatusOr<TrainSummary> s = Run(config, 0.0);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(Saved(config.train.save_params_dir, "fc_0.w_0"),
            (std::vector<float>{0.5f, -0.25f, 1.0f, 0.125f}));
  // fc's bias starts at 0 (Paddle's default bias initializer).
  EXPECT_EQ(Saved(config.train.save_params_dir, "fc_0.b_0"), (std::vector<float>{0.0f}));
}

// The message of a run that must fail.
std::string Failure(const StatusOr<TrainSummary>& s) {
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : s.status().message();
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_F(InitFromTest, AWrongShapeNamesVarFileAndBothShapes) {
  data::NpyArray w;
  w.dtype = ir::DataType::kFloat32;
  w.dims = {3, 1};
  w.bytes.assign(12, 0);
  ASSERT_TRUE(data::WriteNpy(weights_ / "fc_0.w_0.npy", w).ok());
  const std::string m = Failure(Run(MakeConfig(1), 0.0));
  EXPECT_TRUE(Has(m, "init_from: var 'fc_0.w_0' is float32[4, 1] but '" +
                         (weights_ / "fc_0.w_0.npy").string() + "' holds float32[3, 1]"))
      << m;
}

TEST_F(InitFromTest, AWrongDtypeNamesVarAndFile) {
  data::NpyArray w;
  w.dtype = ir::DataType::kFloat64;
  w.dims = {4, 1};
  w.bytes.assign(32, 0);
  ASSERT_TRUE(data::WriteNpy(weights_ / "fc_0.w_0.npy", w).ok());
  const std::string m = Failure(Run(MakeConfig(1), 0.0));
  EXPECT_TRUE(Has(m, "init_from: var 'fc_0.w_0' is float32[4, 1] but '" +
                         (weights_ / "fc_0.w_0.npy").string() + "' holds float64[4, 1]"))
      << m;
}

TEST_F(InitFromTest, AnUnknownNameIsAnError) {
  // A typo must not leave a layer at its random start.
  fs::rename(weights_ / "fc_0.w_0.npy", weights_ / "fc_0.w0.npy");
  const std::string m = Failure(Run(MakeConfig(1), 0.0));
  EXPECT_TRUE(Has(m, "init_from: '" + (weights_ / "fc_0.w0.npy").string() +
                         "' holds 'fc_0.w0', which is not a persistable var of the program"))
      << m;
  // Temporaries are vars too, but not persistable ones.
  fs::rename(weights_ / "fc_0.w0.npy", weights_ / "x.npy");
  const std::string t = Failure(Run(MakeConfig(1), 0.0));
  EXPECT_TRUE(Has(t, "holds 'x', which is not a persistable var")) << t;
}

TEST_F(InitFromTest, AVarGivenTwiceIsAnError) {
  checkpoint::SafeTensors st;
  checkpoint::NamedTensor w;
  w.name = "fc_0.w_0";
  w.tensor.Reshape(ir::DataType::kFloat32, {4, 1});
  st.tensors.push_back(w);
  ASSERT_TRUE(checkpoint::WriteSafeTensors(weights_ / "more.safetensors", st).ok());
  const std::string m = Failure(Run(MakeConfig(1), 0.0));
  EXPECT_TRUE(Has(m, "init_from: var 'fc_0.w_0' is given twice, in '" +
                         (weights_ / "fc_0.w_0.npy").string() + "' and in '" +
                         (weights_ / "more.safetensors").string() + "'"))
      << m;
}

TEST_F(InitFromTest, ACorruptFileOrAnEmptyDirectoryIsAnError) {
  std::ofstream(weights_ / "bias.safetensors", std::ios::trunc) << "garbage";
  const std::string m = Failure(Run(MakeConfig(1), 0.0));
  EXPECT_TRUE(Has(m, (weights_ / "bias.safetensors").string() + ": 7 bytes is too short"))
      << m;
  fs::remove(weights_ / "bias.safetensors");
  fs::remove(weights_ / "fc_0.w_0.npy");
  std::ofstream(weights_ / "README") << "no weights here";
  const std::string e = Failure(Run(MakeConfig(1), 0.0));
  EXPECT_TRUE(Has(e, "holds no .npy or .safetensors file")) << e;
  Config missing = MakeConfig(1);
  missing.train.init_from = dir_.path() / "nonexistent";
  const std::string n = Failure(Run(missing, 0.0));
  EXPECT_TRUE(Has(n, "init_from: '" + missing.train.init_from.string() + "' is not a directory"))
      << n;
}

// A parameter server holds a share of the state: `fc_0.b_0` whole, rows [2, 4) of fc_0.w_0 as
// fc_0.w_0.block1, and nothing of learning_rate_0 (another server's). numpy's fc_0.w_0 [4, 1]
// and the safetensors bias load into exactly that share.
TEST_F(InitFromTest, AParameterServerLoadsItsShareOfEachVar) {
  const fs::path program = dir_.Write("model.fleet", Program(0.1));
  StatusOr<frontend::ParsedProgram> programs = BuildPrograms(program, Stage::kOptimized);
  ASSERT_TRUE(programs.ok()) << programs.status().ToString();
  auto ex = exec::Executor::Create(*registry_, "cpu", {});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  exec::Scope& scope = (*ex)->scope();
  ASSERT_TRUE(scope.GetOrCreate("fc_0.b_0", ir::DataType::kFloat32, {1}).ok());
  ASSERT_TRUE(scope.GetOrCreate("fc_0.w_0.block1", ir::DataType::kFloat32, {2, 1}).ok());
  const checkpoint::RowBlocks blocks = {
      {"fc_0.w_0", {{"fc_0.w_0.block0", 0, 2}, {"fc_0.w_0.block1", 2, 2}}}};
  const std::vector<const ir::Program*> job = {&programs->startup, &programs->main};
  auto loaded = checkpoint::LoadInitialWeightsForServer(weights_, scope, job, blocks);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(*loaded, (std::vector<std::string>{"fc_0.b_0", "fc_0.w_0"}));
  auto block = scope.Read("fc_0.w_0.block1");
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(block->data<float>()[0], kW[2]);
  EXPECT_EQ(block->data<float>()[1], kW[3]);
  EXPECT_EQ(scope.Read("fc_0.b_0")->data<float>()[0], kB);
  EXPECT_EQ(scope.Find("fc_0.w_0"), nullptr);         // not held whole here
  EXPECT_EQ(scope.Find("fc_0.w_0.block0"), nullptr);  // another server's block

  // Every server refuses the same mistakes, whatever share it holds.
  auto save = [&](const std::string& name, const std::string& shape) {
    const std::string cmd = std::string(kPython) + " -c 'import numpy; numpy.save(\"" +
                            (weights_ / name).string() + "\", numpy.zeros(" + shape +
                            ", dtype=numpy.float32))'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  };
  save("fc_0.w0.npy", "(4, 1)");
  auto typo = checkpoint::LoadInitialWeightsForServer(weights_, scope, job, blocks);
  ASSERT_FALSE(typo.ok());
  EXPECT_TRUE(Has(typo.status().message(), "holds 'fc_0.w0', which is not a persistable var"))
      << typo.status().message();
  fs::remove(weights_ / "fc_0.w0.npy");
  save("fc_0.w_0.npy", "(3, 1)");
  auto shape = checkpoint::LoadInitialWeightsForServer(weights_, scope, job, blocks);
  ASSERT_FALSE(shape.ok());
  EXPECT_TRUE(Has(shape.status().message(), "init_from: var 'fc_0.w_0' is float32[4, 1] but '" +
                                                (weights_ / "fc_0.w_0.npy").string() +
                                                "' holds float32[3, 1]"))
      << shape.status().message();
}

}  // namespace
}  // namespace fleet
