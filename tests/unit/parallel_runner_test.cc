// ParallelRunner with the real cpu device and gloo communicator: N devices on shares of a batch
// train exactly as one executor does on the whole batch, replicas stay identical, feeds are split
// and fetches gathered as ParallelExecutor does, and a failing device releases the others.
#include "collective/parallel_runner.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "job/pipeline.h"
#include "config/config.h"
#include "roles/role.h"
#include "fleet/fleet_plugin.h"
#include "passes/builtin_passes.h"

namespace fleet::exec {
namespace {

constexpr const char* kMlp = FLEET_TEST_DATA_DIR "/../../../examples/mlp/mlp.fleet";

ir::Var Data(const std::string& name, std::vector<int64_t> shape,
             ir::DataType dtype = ir::DataType::kFloat32) {
  ir::Var v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  return v;
}

ir::Op Scale(const std::string& x, const std::string& out, float scale) {
  ir::Op op;
  op.type = "scale";
  op.inputs["X"] = {x};
  op.outputs["Out"] = {out};
  op.attrs["scale"] = scale;
  op.attrs["bias"] = 0.0f;
  return op;
}

HostTensor Floats(std::vector<int64_t> dims, const std::vector<float>& values) {
  HostTensor t;
  t.Reshape(ir::DataType::kFloat32, dims);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

std::vector<float> Values(const HostTensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// `rows` rows counting 0, 1, 2, ... (row r holds 10r, 10r + 1, ...), so every row is recognisable.
HostTensor Rows(int64_t rows, int64_t width, float base = 0.0f) {
  std::vector<float> v;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) v.push_back(base + static_cast<float>(10 * r + c));
  }
  return Floats({rows, width}, v);
}

// A deterministic batch for the MLP: x in [-1, 1), labels 0/1 from a fixed rule plus noise.
FeedMap MlpBatch(int64_t rows, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 12345u;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
  };
  FeedMap batch;
  HostTensor& x = batch["x"];
  x.Reshape(ir::DataType::kFloat32, {rows, 32});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 2.0f * next() - 1.0f;
  HostTensor& y = batch["y"];
  y.Reshape(ir::DataType::kInt64, {rows, 1});
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data<float>() + r * 32;
    y.data<int64_t>()[r] = (row[0] + row[1] > 0.0f) != (next() < 0.1f) ? 1 : 0;
  }
  return batch;
}

class ParallelRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    ASSERT_TRUE(RegisterBuiltinPasses(*registry_).ok());
    auto cpu = registry_->Load("cpu");
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    auto gloo = registry_->Load("comm_gloo");
    ASSERT_TRUE(gloo.ok()) << gloo.status().ToString();
    gloo_ = registry_->Find(FLEET_COMPONENT_COMMUNICATOR, "gloo");
    ASSERT_NE(gloo_, nullptr);
  }

  ParallelOptions Options(int32_t n) const {
    ParallelOptions o;
    o.num_devices = n;
    o.executor.num_threads = 1;
    o.executor.seed = 7;
    o.timeout = std::chrono::milliseconds(20000);
    return o;
  }

  // The MLP of examples/mlp, optimized (backward + sgd), untranspiled.
  frontend::ParsedProgram Mlp() {
    auto p = BuildPrograms(kMlp, Stage::kOptimized);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(*p) : frontend::ParsedProgram{};
  }

  // Transpiles `optimized` for every rank with the collective grad_allreduce strategy.
  TranspileFn Collective(const frontend::ParsedProgram& optimized) {
    return [this, &optimized](int32_t rank, int32_t world) -> StatusOr<ProgramSet> {
      Config config;
      config.strategy_mode = "collective";
      Role role;
      role.rank = rank;
      role.world_size = world;
      return Transpile(config, role, optimized, *registry_);
    };
  }

  // One program set per device: x[-1, 4] -> y = 2x, with an empty startup.
  static std::vector<ProgramSet> Doubling(int32_t n) {
    ir::Program main;
    (void)main.global().AddVar(Data("x", {-1, 4}));
    (void)main.global().AddVar(Data("y", {-1, 4}));
    main.global().ops = {Scale("x", "y", 2.0f)};
    return std::vector<ProgramSet>(static_cast<size_t>(n),
                                   ProgramSet{{"startup", ir::Program{}}, {"main", main}});
  }

  std::unique_ptr<ParallelRunner> MakeDoubling(int32_t n) {
    auto runner = ParallelRunner::Create(*registry_, "cpu", *gloo_, Options(n), Doubling(n));
    EXPECT_TRUE(runner.ok()) << runner.status().ToString();
    return runner.ok() ? std::move(*runner) : nullptr;
  }

  std::unique_ptr<PluginRegistry> registry_;
  const ComponentRecord* gloo_ = nullptr;
};

std::vector<std::string> ParamNames(const ir::Program& main) {
  std::vector<std::string> names;
  for (const auto& [name, var] : main.global().vars) {
    if (var.param.has_value()) names.push_back(name);
  }
  return names;
}

// N devices on shares of B rows each against one executor on the N * B rows with the
// untranspiled program: the devices' mean loss is the whole batch's loss and the parameters
// follow the same trajectory.
void ExpectTrainsLikeOneExecutor(const PluginRegistry& registry, const ComponentRecord& gloo,
                                 const ParallelOptions& options, const TranspileFn& transpile,
                                 const frontend::ParsedProgram& mlp) {
  const int32_t n = options.num_devices;
  ASSERT_FALSE(mlp.loss.empty());
  const std::vector<std::string> params = ParamNames(mlp.main);
  ASSERT_EQ(params.size(), 6u);  // three fc layers: weight and bias each

  auto runner = ParallelRunner::Create(registry, "cpu", gloo, options, transpile);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  ParallelRunner& r = **runner;
  ASSERT_EQ(r.num_devices(), n);
  for (int32_t d = 0; d < n; ++d) {
    EXPECT_EQ(r.device_ordinal(d), 0);  // the cpu device has one unit: every rank shares it
  }
  // The programs really were transpiled for each rank.
  auto has_op = [](const ir::Program& p, const std::string& type) {
    for (const ir::Op& op : p.global().ops) {
      if (op.type == type) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_op(r.programs(n - 1).at("startup"), "c_comm_init"));
  EXPECT_TRUE(has_op(r.programs(n - 1).at("main"), "c_allreduce_sum"));

  ExecutorOptions reference_options;
  reference_options.num_threads = 1;
  reference_options.seed = 7;
  auto reference = Executor::Create(registry, "cpu", reference_options);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  std::vector<HostTensor> none, ref_fetched;
  ASSERT_TRUE((*reference)->Run(mlp.startup, {}, {}, none).ok());
  ASSERT_TRUE(r.RunStartup().ok());

  constexpr int64_t kRowsPerDevice = 8;
  ParallelFetch fetched;
  for (uint32_t step = 1; step <= 5; ++step) {
    const FeedMap batch = MlpBatch(n * kRowsPerDevice, step);
    Status ref = (*reference)->Run(mlp.main, batch, {mlp.loss}, ref_fetched);
    ASSERT_TRUE(ref.ok()) << ref.ToString();
    Status s = r.Run(batch, {mlp.loss}, fetched);
    ASSERT_TRUE(s.ok()) << s.ToString();

    // One loss per device, concatenated: [n]; their mean is the whole batch's mean loss.
    ASSERT_EQ(fetched.merged.size(), 1u);
    ASSERT_EQ(fetched.merged[0].numel(), n);
    EXPECT_EQ(fetched.merged[0].dims[0], n);
    const std::vector<float> losses = Values(fetched.merged[0]);
    const float want = Values(ref_fetched[0])[0];
    float mean = 0;
    for (float l : losses) mean += l / static_cast<float>(n);
    EXPECT_NEAR(mean, want, 1e-5f + 1e-5f * std::fabs(want)) << "step " << step;
    EXPECT_NE(losses[0], losses[1]) << "the devices saw the same rows at step " << step;

    for (const std::string& name : params) {
      auto want_param = (*reference)->scope().Read(name);
      ASSERT_TRUE(want_param.ok()) << want_param.status().ToString();
      auto p0 = r.executor(0).scope().Read(name);
      ASSERT_TRUE(p0.ok());
      for (int32_t d = 1; d < n; ++d) {
        auto pd = r.executor(d).scope().Read(name);
        ASSERT_TRUE(pd.ok());
        // Replicas are bit-identical: all applied the same all-reduced gradient.
        EXPECT_EQ(p0->bytes, pd->bytes)
            << name << " differs between devices 0 and " << d << " after step " << step;
      }
      const std::vector<float> got = Values(*p0), expect = Values(*want_param);
      ASSERT_EQ(got.size(), expect.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], expect[i], 1e-5f + 1e-4f * std::fabs(expect[i]))
            << name << "[" << i << "] after step " << step;
      }
    }
  }
}

TEST_F(ParallelRunnerTest, TwoDevicesTrainLikeOneExecutorOnTheWholeBatch) {
  const frontend::ParsedProgram mlp = Mlp();
  ExpectTrainsLikeOneExecutor(*registry_, *gloo_, Options(2), Collective(mlp), mlp);
}

TEST_F(ParallelRunnerTest, FourDevicesTrainLikeOneExecutorOnTheWholeBatch) {
  const frontend::ParsedProgram mlp = Mlp();
  ExpectTrainsLikeOneExecutor(*registry_, *gloo_, Options(4), Collective(mlp), mlp);
}

// Many devices on one tiny batch share each: every pair of them is connected, and the replicas
// still follow the one executor exactly.
TEST_F(ParallelRunnerTest, ThirtyTwoDevicesTrainLikeOneExecutorOnTheWholeBatch) {
  const frontend::ParsedProgram mlp = Mlp();
  ExpectTrainsLikeOneExecutor(*registry_, *gloo_, Options(32), Collective(mlp), mlp);
}

TEST_F(ParallelRunnerTest, RunsAreDeterministic) {
  const frontend::ParsedProgram mlp = Mlp();
  std::vector<std::vector<uint8_t>> first;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto runner = ParallelRunner::Create(*registry_, "cpu", *gloo_, Options(2), Collective(mlp));
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    ASSERT_TRUE((*runner)->RunStartup().ok());
    ParallelFetch fetched;
    std::vector<std::vector<uint8_t>> seen;
    for (uint32_t step = 1; step <= 3; ++step) {
      ASSERT_TRUE((*runner)->Run(MlpBatch(12, step), {mlp.loss}, fetched).ok());
      seen.push_back(fetched.merged[0].bytes);
    }
    for (const std::string& name : ParamNames(mlp.main)) {
      seen.push_back((*runner)->executor(1).scope().Read(name)->bytes);
    }
    if (attempt == 0) {
      first = seen;
    } else {
      EXPECT_EQ(seen, first);
    }
  }
}

TEST_F(ParallelRunnerTest, OneDeviceMatchesOneExecutor) {
  const frontend::ParsedProgram mlp = Mlp();
  auto runner = ParallelRunner::Create(*registry_, "cpu", *gloo_, Options(1), Collective(mlp));
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  ASSERT_TRUE((*runner)->RunStartup().ok());
  ExecutorOptions o;
  o.num_threads = 1;
  o.seed = 7;
  auto reference = Executor::Create(*registry_, "cpu", o);
  ASSERT_TRUE(reference.ok());
  std::vector<HostTensor> none, ref_fetched;
  ASSERT_TRUE((*reference)->Run(mlp.startup, {}, {}, none).ok());
  ParallelFetch fetched;
  for (uint32_t step = 1; step <= 3; ++step) {
    const FeedMap batch = MlpBatch(10, step);
    ASSERT_TRUE((*reference)->Run(mlp.main, batch, {mlp.loss}, ref_fetched).ok());
    Status s = (*runner)->Run(batch, {mlp.loss}, fetched);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(fetched.merged[0].numel(), 1);
    EXPECT_NEAR(Values(fetched.merged[0])[0], Values(ref_fetched[0])[0], 1e-6f);
  }
}

TEST_F(ParallelRunnerTest, PerDeviceFeedsGoToTheirDevice) {
  auto runner = MakeDoubling(2);
  ASSERT_NE(runner, nullptr);
  ASSERT_TRUE(runner->RunStartup().ok());
  std::vector<FeedMap> feeds(2);
  feeds[0]["x"] = Rows(1, 4, 0.0f);
  feeds[1]["x"] = Rows(3, 4, 1000.0f);
  ParallelFetch fetched;
  Status s = runner->Run(feeds, {"y", "x"}, fetched, FetchMode::kPerDevice);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fetched.merged.empty());
  ASSERT_EQ(fetched.per_device.size(), 2u);
  for (size_t d = 0; d < 2; ++d) {
    ASSERT_EQ(fetched.per_device[d].size(), 2u);
    EXPECT_EQ(fetched.per_device[d][1].dims, feeds[d]["x"].dims);
    EXPECT_EQ(Values(fetched.per_device[d][1]), Values(feeds[d]["x"])) << "device " << d;
    std::vector<float> want = Values(feeds[d]["x"]);
    for (float& v : want) v *= 2;
    EXPECT_EQ(Values(fetched.per_device[d][0]), want) << "device " << d;
  }

  // Concatenated: device 0's rows, then device 1's.
  s = runner->Run(feeds, {"y"}, fetched);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(fetched.merged.size(), 1u);
  EXPECT_EQ(fetched.merged[0].dims, (std::vector<int64_t>{4, 4}));
  std::vector<float> want = Values(feeds[0]["x"]);
  for (float v : Values(feeds[1]["x"])) want.push_back(v);
  for (float& v : want) v *= 2;
  EXPECT_EQ(Values(fetched.merged[0]), want);
}

TEST_F(ParallelRunnerTest, ABatchIsSplitAlongDimZero) {
  auto runner = MakeDoubling(2);
  ASSERT_NE(runner, nullptr);
  ASSERT_TRUE(runner->RunStartup().ok());
  const HostTensor x = Rows(6, 4);
  ParallelFetch fetched;
  Status s = runner->Run(FeedMap{{"x", x}}, {"x"}, fetched);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::vector<float> all = Values(x);
  // Device 0 gets rows 0..2, device 1 rows 3..5.
  EXPECT_EQ(Values(fetched.per_device[0][0]), std::vector<float>(all.begin(), all.begin() + 12));
  EXPECT_EQ(Values(fetched.per_device[1][0]), std::vector<float>(all.begin() + 12, all.end()));
  EXPECT_EQ(fetched.merged[0].dims, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(Values(fetched.merged[0]), all);

  // An odd batch: chunks of ceil(5 / 2) = 3 rows, the last one short.
  s = runner->Run(FeedMap{{"x", Rows(5, 4)}}, {"x"}, fetched);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(fetched.per_device[0][0].dims, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(fetched.per_device[1][0].dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(Values(fetched.per_device[1][0])[0], 30.0f);  // row 3 starts device 1
  EXPECT_EQ(fetched.merged[0].dims, (std::vector<int64_t>{5, 4}));
}

TEST_F(ParallelRunnerTest, SplitSharesFollowParallelExecutor) {
  // Hand-worked shares: chunks of ceil(rows / n) rows.
  auto shares = [](int64_t rows, int32_t n) -> StatusOr<std::vector<int64_t>> {
    FLEET_ASSIGN_OR_RETURN(std::vector<FeedShapes> s,
                           ParallelRunner::SplitShapes({{"x", {rows, 3}}}, n));
    std::vector<int64_t> out;
    for (const FeedShapes& f : s) {
      EXPECT_EQ(f.at("x")[1], 3);
      out.push_back(f.at("x")[0]);
    }
    return out;
  };
  EXPECT_EQ(*shares(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(*shares(7, 3), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(*shares(10, 4), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(*shares(3, 1), (std::vector<int64_t>{3}));
  // 5 rows on 4 devices are chunks 2, 2, 1: only three devices would get data.
  auto five = shares(5, 4);
  ASSERT_FALSE(five.ok());
  EXPECT_EQ(five.status().code(), Code::kInvalidArgument);
  EXPECT_NE(five.status().message().find("5 row"), std::string::npos) << five.status().message();
}

TEST_F(ParallelRunnerTest, FewerSamplesThanDevicesIsAnError) {
  auto runner = MakeDoubling(2);
  ASSERT_NE(runner, nullptr);
  ASSERT_TRUE(runner->RunStartup().ok());
  ParallelFetch fetched;
  Status s = runner->Run(FeedMap{{"x", Rows(1, 4)}}, {"y"}, fetched);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'x'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1 row"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2 devices"), std::string::npos) << s.message();

  HostTensor scalar;
  scalar.Reshape(ir::DataType::kFloat32, {});
  s = runner->Run(FeedMap{{"x", scalar}}, {"y"}, fetched);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();

  // The runner is still usable: nothing ran.
  s = runner->Run(FeedMap{{"x", Rows(2, 4)}}, {"y"}, fetched);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(ParallelRunnerTest, PerDeviceFeedCountMustMatch) {
  auto runner = MakeDoubling(2);
  ASSERT_NE(runner, nullptr);
  ParallelFetch fetched;
  std::vector<FeedMap> three(3, FeedMap{{"x", Rows(2, 4)}});
  Status s = runner->Run(three, {"y"}, fetched);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("3 feed maps for 2 devices"), std::string::npos) << s.message();
}

TEST_F(ParallelRunnerTest, BadConstructionIsAnError) {
  EXPECT_EQ(ParallelRunner::Create(*registry_, "cpu", *gloo_, Options(0), Doubling(1))
                .status()
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ParallelRunner::Create(*registry_, "cpu", *gloo_, Options(2), Doubling(3))
                .status()
                .code(),
            Code::kInvalidArgument);
  std::vector<ProgramSet> no_main = Doubling(2);
  no_main[1].erase("main");
  auto s = ParallelRunner::Create(*registry_, "cpu", *gloo_, Options(2), std::move(no_main));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("device 1"), std::string::npos) << s.status().message();
  EXPECT_EQ(ParallelRunner::Create(*registry_, "nosuch", *gloo_, Options(2), Doubling(2))
                .status()
                .code(),
            Code::kNotFound);
}

// What Create of `n` devices said in a child process whose limit on open files was
// {soft, hard}: its status code, then the soft limit after it, then its message.
struct Reservation {
  int code = -1;
  rlim_t soft_after = 0;
  std::string message;
};

Reservation CreateUnderFileLimit(const PluginRegistry& registry, const ComponentRecord& gloo,
                                 ParallelOptions options, std::vector<ProgramSet> programs,
                                 rlim_t soft, rlim_t hard) {
  const std::filesystem::path out = std::filesystem::path(::testing::TempDir()) /
                                    ("reservation." + std::to_string(::getpid()));
  const pid_t child = ::fork();
  if (child == 0) {
    const rlimit limit = {soft, hard};
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(100);
    auto runner = ParallelRunner::Create(registry, "cpu", gloo, options, std::move(programs));
    rlimit after{};
    ::getrlimit(RLIMIT_NOFILE, &after);
    std::ofstream(out) << after.rlim_cur << "\n" << runner.status().message();
    _exit(static_cast<int>(runner.status().code()));
  }
  Reservation r;
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return r;
  r.code = WEXITSTATUS(status);
  std::ifstream in(out);
  in >> r.soft_after;
  in.ignore();
  std::getline(in, r.message, '\0');
  std::filesystem::remove(out);
  return r;
}

// 32 devices hold about 32 * 31 sockets, more than the usual soft limit of 1024 open files:
// Create raises it within the hard limit instead of letting the communicators fail midway.
TEST_F(ParallelRunnerTest, ManyDevicesRaiseTheSoftOpenFileLimit) {
  Reservation r = CreateUnderFileLimit(*registry_, *gloo_, Options(32), Doubling(32), 256, 8192);
  EXPECT_EQ(r.code, static_cast<int>(Code::kOk)) << r.message;
  EXPECT_EQ(r.soft_after, 32u * 31u + 8u * 32u + 64u);
}

TEST_F(ParallelRunnerTest, ManyDevicesPastTheHardOpenFileLimitAreRefused) {
  Reservation r = CreateUnderFileLimit(*registry_, *gloo_, Options(32), Doubling(32), 512, 512);
  EXPECT_EQ(r.code, static_cast<int>(Code::kResourceExhausted)) << r.message;
  EXPECT_NE(r.message.find("32 devices in one process need about 1312 open files"),
            std::string::npos) << r.message;
  EXPECT_NE(r.message.find("the hard limit on open files (RLIMIT_NOFILE) is 512"),
            std::string::npos) << r.message;
  EXPECT_EQ(r.soft_after, 512u);
}

TEST_F(ParallelRunnerTest, PrepareErrorsNameTheDevice) {
  auto runner = MakeDoubling(2);
  ASSERT_NE(runner, nullptr);
  // x is declared [-1, 4]: a width of 5 does not fit.
  Status s = runner->Prepare(FeedShapes{{"x", {4, 5}}}, {"y"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device "), std::string::npos) << s.message();
  s = runner->Prepare(FeedShapes{{"x", {4, 4}}}, {"y"}, "no_such_program");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no_such_program"), std::string::npos) << s.message();
  // Preparation failures abort nothing.
  EXPECT_TRUE(runner->Prepare(FeedShapes{{"x", {4, 4}}}, {"y"}).ok());
}

TEST_F(ParallelRunnerTest, AFailingDeviceReleasesTheOthers) {
  const frontend::ParsedProgram mlp = Mlp();
  auto runner = ParallelRunner::Create(*registry_, "cpu", *gloo_, Options(2), Collective(mlp));
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  ASSERT_TRUE((*runner)->RunStartup().ok());
  std::vector<FeedMap> feeds = {MlpBatch(4, 1), MlpBatch(4, 2)};
  // Device 1's labels name a class the 2-way softmax lacks: its cross_entropy fails in the
  // forward pass while device 0 goes on into the gradient all-reduce.
  feeds[1]["y"].data<int64_t>()[2] = 7;
  ParallelFetch fetched;
  const auto start = std::chrono::steady_clock::now();
  Status s = (*runner)->Run(feeds, {mlp.loss}, fetched);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("device 1", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("7"), std::string::npos) << s.message();
  EXPECT_LT(seconds, 10.0) << "device 0 waited out the 20 s timeout instead of being aborted";
  // The communicators are gone: later steps refuse to run.
  s = (*runner)->Run(std::vector<FeedMap>{MlpBatch(4, 1), MlpBatch(4, 2)}, {mlp.loss}, fetched);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
}

}  // namespace
}  // namespace fleet::exec
