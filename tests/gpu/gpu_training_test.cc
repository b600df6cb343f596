// End-to-end GPU runs, driven through fleet-host as a user runs it: the quick-start MLP and the
// CNN trained on the CUDA device against the same jobs on the CPU, and a collective job over
// NCCL. Every test here needs a GPU and skips, saying why, on a machine without one (CTest label
// `gpu`). The placement errors a GPU-less machine can check live in tests/cli.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result RunHost(const std::string& args, int timeout_s = 240) {
  char tmpl[] = "/tmp/fleet_gpu_XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  const fs::path out = dir / "out", err = dir / "err";
  const std::string cmd = "env -u FLEET_PLUGIN_PATH timeout " + std::to_string(timeout_s) + " " +
                          FLEET_HOST_EXE " " + args + " >'" + out.string() + "' 2>'" +
                          err.string() + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  fs::remove_all(dir);
  return r;
}

// The "count" of the cuda device component's details anywhere in `j`, or -1.
int FindCudaCount(const nlohmann::json& j) {
  if (j.is_object()) {
    if (j.value("kind", "") == "device" && j.value("name", "") == "cuda" && j.contains("details")) {
      return j["details"].value("count", 0);
    }
    for (const auto& [key, value] : j.items()) {
      if (int n = FindCudaCount(value); n >= 0) return n;
    }
  } else if (j.is_array()) {
    for (const auto& value : j) {
      if (int n = FindCudaCount(value); n >= 0) return n;
    }
  }
  return -1;
}

// How many CUDA devices fleet-host sees, from `plugins --json cuda`; 0 with `why` set when
// none (no plugin, no driver, no GPU).
int CudaDevices(std::string* why) {
  Result r = RunHost("plugins --json cuda", 60);
  if (r.exit_code != 0) {
    *why = "the cuda plugin is not available: " + r.err;
    return 0;
  }
  int n = -1;
  try {
    n = FindCudaCount(nlohmann::json::parse(r.out));
  } catch (const std::exception& e) {
    *why = std::string("cannot read `plugins --json cuda`: ") + e.what();
    return 0;
  }
  if (n <= 0) *why = "no CUDA device is present on this machine (fleet-host plugins cuda)";
  return n < 0 ? 0 : n;
}

#define REQUIRE_GPUS(n)                                                               \
  do {                                                                                \
    std::string why_;                                                                 \
    const int have_ = CudaDevices(&why_);                                             \
    if (have_ < (n)) {                                                                \
      GTEST_SKIP() << (have_ == 0 ? why_                                              \
                                  : "needs " + std::to_string(n) + " GPUs, found " +  \
                                        std::to_string(have_));                       \
    }                                                                                 \
  } while (0)

std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    // `launch` prefixes each line of a trainer's output with its name: "[trainer.0] step ...".
    if (line.rfind("[trainer.0] ", 0) == 0) line.erase(0, 12);
    const size_t at = line.find(" loss ");
    if (line.rfind("step ", 0) == 0 && at != std::string::npos) {
      losses.push_back(std::stod(line.substr(at + 6)));
    }
  }
  return losses;
}

const fs::path kExamples = fs::path(FLEET_EXAMPLES_DIR).lexically_normal();

// Trains `example` for `steps` on the CPU and on cuda:0 with the same seed and data, and
// checks the two loss curves agree step by step: the same initial weights (the random kernels
// draw the same numbers on both devices), then only rounding differences (GEMM and reduction
// order), which stay small over a short run.
// `program` (default: the example itself) and `sets` (more " --set ..." arguments) vary the
// job; `gpu_err` receives the CUDA run's log.
void ExpectSameCurve(const std::string& example, int steps, double rtol,
                     const fs::path& program = {}, const std::string& sets = "",
                     std::string* gpu_err = nullptr) {
  const std::string base =
      "run " + (program.empty() ? kExamples / example : program).string() + " --config " +
      (kExamples / fs::path(example).parent_path() / "fleet.toml").string() +
      " --set train.steps=" + std::to_string(steps) +
      " --set train.log_every=1 --set train.threads=1" + sets;
  Result cpu = RunHost(base + " --set device.backend=cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  Result gpu = RunHost(base + " --set device.backend=cuda");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  if (gpu_err != nullptr) *gpu_err = gpu.err;
  const std::vector<double> a = Losses(cpu.out), b = Losses(gpu.out);
  ASSERT_EQ(a.size(), static_cast<size_t>(steps)) << cpu.out;
  ASSERT_EQ(b.size(), static_cast<size_t>(steps)) << gpu.out;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], rtol * std::abs(a[i]) + 1e-6) << "step " << i + 1;
  }
  EXPECT_LT(b.back(), b.front()) << gpu.out;
}

TEST(GpuTrainingTest, MlpOnCudaFollowsTheCpuLossCurve) {
  REQUIRE_GPUS(1);
  ExpectSameCurve("mlp/mlp.fleet", 100, 2e-3);
}

TEST(GpuTrainingTest, CnnOnCudaFollowsTheCpuLossCurve) {
  REQUIRE_GPUS(1);
  ExpectSameCurve("cnn/cnn.fleet", 40, 5e-3);
}

// The CTR example's 26 is_sparse tables on the CUDA device: its sparse gradient kernels (the
// job must not fall back to dense gradients) follow the CPU's loss curve, with the example's
// Adam (every row moves), lazy Adam (the looked-up rows only) and SGD.
TEST(GpuTrainingTest, SparseCtrOnCudaFollowsTheCpuLossCurve) {
  REQUIRE_GPUS(1);
  char tmpl[] = "/tmp/fleet_gpu_ctr_XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  // NumPy writes the data: the python3 on PATH must have it.
  const std::string make = "python3 '" + (kExamples / "ctr_dnn" / "make_data.py").string() +
                           "' '" + (dir / "data").string() +
                           "' --files 1 --lines 2000 --eval-lines 200 > /dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  const std::string sets = " --set 'data.filelist=[\"" + (dir / "data" / "part-*.txt").string() +
                           "\"]' --set 'eval.filelist=[\"" +
                           (dir / "data" / "eval" / "part-*.txt").string() +
                           "\"]' --set data.shuffle=false";
  const std::string text = ReadFile(kExamples / "ctr_dnn" / "ctr_dnn.fleet");
  const std::string adam = "adam(learning_rate=0.001)";
  ASSERT_NE(text.find(adam), std::string::npos);
  for (const std::string& optimizer :
       {adam, std::string("adam(learning_rate=0.001, lazy_mode=True)"),
        std::string("sgd(learning_rate=0.05)")}) {
    SCOPED_TRACE(optimizer);
    std::string variant = text;
    variant.replace(variant.find(adam), adam.size(), optimizer);
    const fs::path program = dir / "ctr_dnn.fleet";
    std::ofstream(program) << variant;
    std::string err;
    ExpectSameCurve("ctr_dnn/ctr_dnn.fleet", 60, 2e-3, program, sets, &err);
    EXPECT_EQ(err.find("dense gradients"), std::string::npos) << err;
  }
  fs::remove_all(dir);
}

// A collective job over NCCL: with one GPU, one rank (the communicator still joins through the
// store and all-reduces on the device); with two or more, two ranks on half batches, which
// must follow one rank on the full batch.
TEST(GpuTrainingTest, NcclCollectiveJobMatchesOneProcess) {
  REQUIRE_GPUS(1);
  std::string why;
  const int gpus = CudaDevices(&why);
  const int nproc = gpus >= 2 ? 2 : 1;
  const std::string prog = (kExamples / "mlp/mlp.fleet").string();
  const std::string sets = " --config " + (kExamples / "mlp/fleet.toml").string() +
                           " --set train.steps=30 --set train.log_every=1"
                           " --set device.backend=cuda";
  Result one = RunHost("run " + prog + sets);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  Result job = RunHost("launch --nproc " + std::to_string(nproc) + " -- run " + prog + sets +
                       " --set comm.backend=nccl --set strategy.mode=collective");
  ASSERT_EQ(job.exit_code, 0) << job.err << job.out;
  const std::vector<double> a = Losses(one.out), b = Losses(job.out);
  ASSERT_EQ(a.size(), 30u) << one.out;
  ASSERT_GE(b.size(), 30u) << job.out;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 2e-3 * std::abs(a[i]) + 1e-6) << "step " << i + 1;
  }
}

}  // namespace
