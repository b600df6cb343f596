// The executor on hand-built programs through the real cpu plugin: results against hand
// computations, the memory plan, the scope across runs and programs, error messages, seeds, and
// that a steady-state step allocates nothing on the host.
#include "executor/executor.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <execinfo.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string_view>

#include "autodiff/backward.h"
#include "fleet/fleet_plugin.h"
#include "frontend/frontend.h"
#include "optim/optimizer.h"

// Counts every global operator new while `g_counting` is set. Replacing the global operators is
// how a test sees allocations made anywhere in the process. An allocation is the host's unless
// a frame of its call stack lies in a plugin or a library a plugin uses (oneDNN, OpenMP):
// the host is statically linked into this binary, plugins are shared objects.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_host_allocations{0};
std::atomic<long> g_plugin_allocations{0};

bool FromPlugin() {
  void* frames[32];
  int n = backtrace(frames, 32);
  for (int i = 0; i < n; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) == 0 || info.dli_fname == nullptr) continue;
    std::string_view file(info.dli_fname);
    if (file.find("libfleet_") != std::string_view::npos ||
        file.find("libdnnl") != std::string_view::npos ||
        file.find("libgomp") != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

void* CountedAlloc(std::size_t n) {
  // exchange: allocations made while classifying (none expected) are not counted again.
  if (g_counting.exchange(false)) {
    (FromPlugin() ? g_plugin_allocations : g_host_allocations).fetch_add(1);
    g_counting = true;
  }
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return CountedAlloc(n); }
void* operator new[](std::size_t n) { return CountedAlloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return CountedAlloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return CountedAlloc(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace fleet::exec {
namespace {

ir::Var Data(const std::string& name, std::vector<int64_t> shape,
             ir::DataType dtype = ir::DataType::kFloat32) {
  ir::Var v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  return v;
}

ir::Var Persistable(const std::string& name, std::vector<int64_t> shape) {
  ir::Var v = Data(name, std::move(shape));
  v.persistable = true;
  return v;
}

ir::Op Scale(const std::string& x, const std::string& out, float scale, float bias = 0.0f) {
  ir::Op op;
  op.type = "scale";
  op.inputs["X"] = {x};
  op.outputs["Out"] = {out};
  op.attrs["scale"] = scale;
  op.attrs["bias"] = bias;
  return op;
}

ir::Op Fill(const std::string& out, std::vector<int64_t> shape, float value) {
  ir::Op op;
  op.type = "fill_constant";
  op.outputs["Out"] = {out};
  op.attrs["shape"] = std::move(shape);
  op.attrs["value"] = value;
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

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    auto loaded = registry_->Load("cpu");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  }

  std::unique_ptr<Executor> Make(uint64_t seed = 1) {
    ExecutorOptions options;
    options.num_threads = 1;
    options.seed = seed;
    auto exec = Executor::Create(*registry_, "cpu", options);
    EXPECT_TRUE(exec.ok()) << exec.status().ToString();
    return exec.ok() ? std::move(*exec) : nullptr;
  }

  // x[-1, 4] -> a = 2x -> b = a + 1 -> c = 3b
  static ir::Program ScaleChain() {
    ir::Program p;
    ir::Block& b = p.global();
    (void)b.AddVar(Data("x", {-1, 4}));
    for (const char* n : {"a", "b", "c"}) (void)b.AddVar(Data(n, {-1, 4}));
    b.ops = {Scale("x", "a", 2.0f), Scale("a", "b", 1.0f, 1.0f), Scale("b", "c", 3.0f)};
    return p;
  }

  std::unique_ptr<PluginRegistry> registry_;
};

TEST_F(ExecutorTest, ScaleChainComputesAndFetches) {
  auto exec = Make();
  ir::Program p = ScaleChain();
  auto prepared = exec->Prepare(p, {{"x", {2, 4}}}, {"c", "a"});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  FeedMap feeds{{"x", Floats({2, 4}, {0, 1, 2, 3, -1, -2, 0.5f, 4})}};
  std::vector<HostTensor> out;
  ASSERT_TRUE(exec->Run(**prepared, feeds, out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{2, 4}));
  const std::vector<float> x = Values(feeds["x"]);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_FLOAT_EQ(Values(out[0])[i], 3.0f * (2.0f * x[i] + 1.0f));
    EXPECT_FLOAT_EQ(Values(out[1])[i], 2.0f * x[i]);
  }
}

// range's length comes from values: fill_constant outputs are known at prepare, a computed
// Start is not, and a var fill_constant wrote and a later op overwrote is no longer known.
TEST_F(ExecutorTest, RangeTakesItsLengthFromConstants) {
  auto exec = Make();
  ir::Program p;
  ir::Block& b = p.global();
  for (const char* n : {"start", "end", "step", "scaled", "ids", "ids2"}) {
    (void)b.AddVar(Data(n, {-1}));
  }
  auto range = [](const std::string& start, const std::string& out) {
    return ir::MakeOp("range", {{"Start", {start}}, {"End", {"end"}}, {"Step", {"step"}}},
                      {{"Out", {out}}});
  };
  b.ops = {Fill("start", {1}, 1.0f), Fill("end", {1}, 2.0f), Fill("step", {1}, 0.25f),
           range("start", "ids")};
  auto prepared = exec->Prepare(p, {}, {"ids"});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  std::vector<HostTensor> out;
  ASSERT_TRUE(exec->Run(**prepared, {}, out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<float>{1.0f, 1.25f, 1.5f, 1.75f}));

  b.ops.push_back(Scale("start", "scaled", 2.0f));
  b.ops.push_back(range("scaled", "ids2"));
  auto computed = exec->Prepare(p, {}, {"ids2"});
  ASSERT_FALSE(computed.ok());
  EXPECT_NE(computed.status().message().find("must be fixed before the run"), std::string::npos)
      << computed.status().ToString();

  b.ops = {Fill("start", {1}, 1.0f), Fill("end", {1}, 2.0f), Fill("step", {1}, 0.25f),
           Scale("start", "start", 2.0f), range("start", "ids")};
  EXPECT_FALSE(exec->Prepare(p, {}, {"ids"}).ok());
}

TEST_F(ExecutorTest, MemoryPlanReusesDeadBuffers) {
  auto exec = Make();
  ir::Program p = ScaleChain();
  auto prepared = exec->Prepare(p, {{"x", {8, 4}}}, {"c"});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  const MemoryPlan& plan = (*prepared)->plan();
  // x dies after op 0, so b (born at op 1) takes its buffer; c (op 2) takes a's. An output
  // never shares with an input of its own op.
  EXPECT_EQ(plan.buffer_of.at("b"), plan.buffer_of.at("x"));
  EXPECT_EQ(plan.buffer_of.at("c"), plan.buffer_of.at("a"));
  EXPECT_NE(plan.buffer_of.at("a"), plan.buffer_of.at("x"));
  EXPECT_NE(plan.buffer_of.at("b"), plan.buffer_of.at("a"));
  EXPECT_EQ(plan.buffer_bytes.size(), 2u);
  EXPECT_EQ(plan.arena_bytes, 2u * 128u);      // 8*4 floats each, 64-byte aligned
  EXPECT_EQ(plan.unshared_bytes, 4u * 128u);
  EXPECT_EQ((*prepared)->VarData("b"), (*prepared)->VarData("x"));

  // Reuse must not change results: c still equals 3(2x + 1).
  HostTensor x;
  x.Reshape(ir::DataType::kFloat32, {8, 4});
  for (int i = 0; i < 32; ++i) x.data<float>()[i] = static_cast<float>(i) - 7.0f;
  std::vector<HostTensor> out;
  ASSERT_TRUE(exec->Run(**prepared, {{"x", x}}, out).ok());
  for (int i = 0; i < 32; ++i) {
    EXPECT_FLOAT_EQ(out[0].data<float>()[i], 3.0f * (2.0f * (static_cast<float>(i) - 7.0f) + 1));
  }
}

// Autodiff's placeholder ("@EMPTY@", an output entry not computed) in two ops with different
// shapes: each op gets a buffer of its own for it, which no fetch and no other op sees, and the
// entries that are computed are right.
TEST_F(ExecutorTest, EmptyPlaceholdersAreEachOpsOwn) {
  auto exec = Make();
  ir::Program p;
  ir::Block& b = p.global();
  for (const auto& [name, width] : std::vector<std::pair<std::string, int64_t>>{
           {"x", 2}, {"y", 1}, {"h", 3}, {"g1", 5}, {"g2", 4}, {"ha", 3}, {"hb", 3}}) {
    (void)b.AddVar(Data(name, {-1, width}));
  }
  auto concat_grad = [](const std::string& grad, const std::string& first,
                        const std::string& out) {
    return ir::MakeOp("concat_grad", {{"Out@GRAD", {grad}}, {"X", {first, "h"}}},
                      {{"X@GRAD", {std::string(ir::kEmptyVarName), out}}},
                      {{"axis", int32_t{1}}});
  };
  b.ops = {concat_grad("g1", "x", "ha"), concat_grad("g2", "y", "hb")};
  const FeedShapes shapes = {{"x", {2, 2}}, {"y", {2, 1}}, {"h", {2, 3}}, {"g1", {2, 5}},
                             {"g2", {2, 4}}};
  auto prepared = exec->Prepare(p, shapes, {"ha", "hb"});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_EQ((*prepared)->VarInfo("@EMPTY@"), nullptr);
  FeedMap feeds{{"x", Floats({2, 2}, {0, 0, 0, 0})},
                {"y", Floats({2, 1}, {0, 0})},
                {"h", Floats({2, 3}, {0, 0, 0, 0, 0, 0})},
                {"g1", Floats({2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10})},
                {"g2", Floats({2, 4}, {-1, -2, -3, -4, -5, -6, -7, -8})}};
  std::vector<HostTensor> out;
  ASSERT_TRUE(exec->Run(**prepared, feeds, out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<float>{3, 4, 5, 8, 9, 10}));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{-2, -3, -4, -6, -7, -8}));

  auto fetched = exec->Prepare(p, shapes, {"@EMPTY@"});
  ASSERT_FALSE(fetched.ok());
  EXPECT_NE(fetched.status().message().find("no feed, op or persistable provides it"),
            std::string::npos)
      << fetched.status().ToString();
}

TEST(MemoryPlanTest, BestFitAndGrowth) {
  // a: [0, 1] 100 bytes, b: [1, 2] 300 bytes, c: [2, 3] 50 bytes, d: [3, 4] 400 bytes.
  MemoryPlan plan = PlanMemory({{"a", 100, 0, 1}, {"b", 300, 1, 2}, {"c", 50, 2, 3},
                                {"d", 400, 3, 4}},
                               64);
  // c is born at 2 while b lives; a's buffer (128) is free and large enough.
  EXPECT_EQ(plan.buffer_of.at("c"), plan.buffer_of.at("a"));
  // d is born at 3 while c lives; b's buffer (320) is free but small: it grows to 448.
  EXPECT_EQ(plan.buffer_of.at("d"), plan.buffer_of.at("b"));
  EXPECT_EQ(plan.buffer_bytes[static_cast<size_t>(plan.buffer_of.at("d"))], 448u);
  EXPECT_EQ(plan.arena_bytes, 128u + 448u);
  EXPECT_EQ(plan.buffer_offsets[1], plan.buffer_bytes[0]);
}

// Sizes come from input: sums that would wrap around saturate, so an arena that cannot exist is
// refused by its size instead of being allocated small and overrun.
TEST(MemoryPlanTest, SumsSaturateInsteadOfWrapping) {
  const size_t huge = size_t{1} << 62;
  MemoryPlan plan = PlanMemory({{"a", huge, 0, 4}, {"b", huge, 1, 4}, {"c", huge, 2, 4},
                                {"d", huge, 3, 4}, {"e", 64, 4, 5}},
                               64);
  EXPECT_EQ(plan.arena_bytes, SIZE_MAX);
  EXPECT_EQ(plan.unshared_bytes, SIZE_MAX);
  MemoryLimit limit;
  limit.bytes = uint64_t{1} << 40;
  limit.device = "device 'cpu' 0";
  EXPECT_EQ(limit.Exceeded(limit.bytes), "");
  EXPECT_EQ(limit.Exceeded(SIZE_MAX),
            "over 2^64 bytes, more than the 1099511627776 bytes (1.0 TiB) of memory of "
            "device 'cpu' 0");
}

TEST_F(ExecutorTest, PersistablesSurviveRunsAndPrograms) {
  auto exec = Make();
  ir::Program startup;
  (void)startup.global().AddVar(Persistable("w", {3}));
  startup.global().ops = {Fill("w", {3}, 0.5f)};
  ir::Program main;
  (void)main.global().AddVar(Persistable("w", {3}));
  main.global().ops = {Scale("w", "w", 2.0f)};  // in place, like sgd's ParamOut == Param

  std::vector<HostTensor> out;
  // Before startup, main cannot run: w is not in the scope.
  auto early = exec->Prepare(main, {}, {"w"});
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("op #0 (scale)"), std::string::npos);
  EXPECT_NE(early.status().message().find("run the startup program first"), std::string::npos)
      << early.status().message();

  ASSERT_TRUE(exec->Run(startup, {}, {}, out).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(exec->Run(main, {}, {"w"}, out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<float>{4.0f, 4.0f, 4.0f}));  // 0.5 * 2^3
  auto w = exec->scope().Read("w");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(Values(*w), (std::vector<float>{4.0f, 4.0f, 4.0f}));
}

TEST_F(ExecutorTest, FeedErrorsNameTheVarAndShapes) {
  auto exec = Make();
  ir::Program p = ScaleChain();
  auto bad_shape = exec->Prepare(p, {{"x", {2, 5}}}, {"c"});
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_NE(bad_shape.status().message().find("feed 'x' has shape [2, 5] but the var is declared "
                                              "float32[-1, 4]"),
            std::string::npos)
      << bad_shape.status().message();
  EXPECT_FALSE(exec->Prepare(p, {{"nope", {2, 4}}}, {"c"}).ok());

  auto prepared = exec->Prepare(p, {{"x", {2, 4}}}, {"c"});
  ASSERT_TRUE(prepared.ok());
  std::vector<HostTensor> out;
  Status missing = exec->Run(**prepared, {}, out);
  EXPECT_NE(missing.message().find("feed 'x' is missing"), std::string::npos) << missing.message();

  HostTensor ints;
  ints.Reshape(ir::DataType::kInt64, {2, 4});
  Status dtype = exec->Run(**prepared, {{"x", ints}}, out);
  EXPECT_NE(dtype.message().find("feed 'x' is int64[2, 4] but the var is float32[2, 4]"),
            std::string::npos)
      << dtype.message();

  HostTensor three;
  three.Reshape(ir::DataType::kFloat32, {3, 4});
  Status shape = exec->Run(**prepared, {{"x", three}}, out);
  EXPECT_NE(shape.message().find("feed 'x' has shape [3, 4] but the program was prepared for "
                                 "[2, 4]"),
            std::string::npos)
      << shape.message();

  // Through the cache, a new batch size means a new preparation, not an error.
  std::fill(three.data<float>(), three.data<float>() + 12, 1.0f);
  ASSERT_TRUE(exec->Run(p, {{"x", three}}, {"c"}, out).ok());
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{3, 4}));
  EXPECT_FLOAT_EQ(out[0].data<float>()[11], 9.0f);
}

TEST_F(ExecutorTest, ReadingAnUnwrittenVarIsAnError) {
  auto exec = Make();
  ir::Program p = ScaleChain();
  auto r = exec->Prepare(p, {}, {"c"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("op #0 (scale): input X reads 'x', which is not fed"),
            std::string::npos)
      << r.status().message();
}

TEST_F(ExecutorTest, MissingKernelNamesOpDeviceAndDtype) {
  auto exec = Make();
  ir::Program p;
  (void)p.global().AddVar(Data("x", {-1, 4}, ir::DataType::kBFloat16));
  (void)p.global().AddVar(Data("y", {-1, 4}, ir::DataType::kBFloat16));
  p.global().ops = {Scale("x", "y", 2.0f)};
  auto r = exec->Prepare(p, {{"x", {2, 4}}}, {"y"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find(
                "op #0 (scale): no kernel for op 'scale' on device 'cpu' with dtype bfloat16"),
            std::string::npos)
      << r.status().message();
}

TEST_F(ExecutorTest, RandomInitialisersFollowTheSeed) {
  ir::Program startup;
  for (const char* n : {"w1", "w2"}) {
    (void)startup.global().AddVar(Persistable(n, {16}));
    ir::Op op;
    op.type = "uniform_random";
    op.outputs["Out"] = {n};
    op.attrs["shape"] = std::vector<int64_t>{16};
    startup.global().ops.push_back(op);
  }
  auto values = [&](uint64_t seed, const char* var) {
    auto exec = Make(seed);
    std::vector<HostTensor> out;
    EXPECT_TRUE(exec->Run(startup, {}, {}, out).ok());
    return Values(*exec->scope().Read(var));
  };
  EXPECT_EQ(values(7, "w1"), values(7, "w1"));
  EXPECT_NE(values(7, "w1"), values(8, "w1"));
  EXPECT_NE(values(7, "w1"), values(7, "w2"));  // two initialisers never share a stream
}

// Steps 2..N of a training step allocate nothing on the host.
void ExpectNoAllocationsAfterTheFirstStep(Executor& exec, PreparedProgram& prepared,
                                          FeedMap& feeds) {
  std::vector<HostTensor> out;
  ASSERT_TRUE(exec.Run(prepared, feeds, out).ok());
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder now, not while counting
  g_host_allocations = 0;
  g_plugin_allocations = 0;
  g_counting = true;
  for (int step = 2; step <= 5; ++step) {
    Status s = exec.Run(prepared, feeds, out);
    if (!s.ok()) {
      g_counting = false;
      FAIL() << s.ToString();
    }
  }
  g_counting = false;
  EXPECT_EQ(g_host_allocations.load(), 0) << "host heap allocations in steps 2..5";
  // Kernels are the plugin's business; the count is recorded for whoever tunes them.
  ::testing::Test::RecordProperty("plugin_allocations",
                                  static_cast<int>(g_plugin_allocations.load()));
}

// Dropout in training: each step draws a new mask (so the network does not always drop the
// same units), yet a run is reproducible: a fresh executor with the same seed draws the same
// masks in the same order.
TEST_F(ExecutorTest, DropoutMasksDifferPerStepAndRepeatPerSeed) {
  ir::Program p;
  ir::Block& b = p.global();
  (void)b.AddVar(Data("x", {-1, 64}));
  (void)b.AddVar(Data("out", {-1, 64}));
  (void)b.AddVar(Data("mask", {-1, 64}, ir::DataType::kUInt8));
  ir::Op op;
  op.type = "dropout";
  op.inputs["X"] = {"x"};
  op.outputs["Out"] = {"out"};
  op.outputs["Mask"] = {"mask"};
  op.attrs["dropout_prob"] = 0.5f;
  b.ops = {op};
  FeedMap feeds{{"x", Floats({2, 64}, std::vector<float>(128, 1.0f))}};

  auto masks = [&](uint64_t seed) {
    auto exec = Make(seed);
    std::vector<std::vector<uint8_t>> out;
    auto prepared = exec->Prepare(p, {{"x", {2, 64}}}, {"mask"});
    EXPECT_TRUE(prepared.ok()) << prepared.status().ToString();
    if (!prepared.ok()) return out;
    std::vector<HostTensor> fetched;
    for (int step = 0; step < 3; ++step) {
      EXPECT_TRUE(exec->Run(**prepared, feeds, fetched).ok());
      const uint8_t* m = fetched[0].data<uint8_t>();
      out.emplace_back(m, m + fetched[0].numel());
    }
    return out;
  };
  const auto a = masks(5), again = masks(5), other = masks(6);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_NE(a[0], a[1]);
  EXPECT_NE(a[1], a[2]);
  EXPECT_EQ(a, again);
  EXPECT_NE(a[0], other[0]);
}

TEST_F(ExecutorTest, SteadyStateAllocatesNothingScaleChain) {
  auto exec = Make();
  ir::Program p = ScaleChain();
  auto prepared = exec->Prepare(p, {{"x", {4, 4}}}, {"c"});
  ASSERT_TRUE(prepared.ok());
  FeedMap feeds;
  feeds["x"].Reshape(ir::DataType::kFloat32, {4, 4});
  ExpectNoAllocationsAfterTheFirstStep(*exec, **prepared, feeds);
}

TEST_F(ExecutorTest, SteadyStateAllocatesNothingMlpTraining) {
  auto parsed = frontend::ParseProgramText(R"(
x = data("x", shape=[-1, 8], dtype="float32")
y = data("y", shape=[-1, 1], dtype="int64")
h = fc(x, size=16, act="tanh")
prediction = fc(h, size=3, act="softmax")
avg_cost = mean(cross_entropy(prediction, y))
minimize(avg_cost, optimizer=sgd(learning_rate=0.1))
)",
                                           "mlp.fleet");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto pg = autodiff::AppendBackward(parsed->main, parsed->loss);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  ASSERT_TRUE(optim::ApplyOptimizer(parsed->main, parsed->startup, *pg, *parsed->optimizer).ok());

  auto exec = Make();
  std::vector<HostTensor> out;
  ASSERT_TRUE(exec->Run(parsed->startup, {}, {}, out).ok());
  auto prepared = exec->Prepare(parsed->main, {{"x", {4, 8}}, {"y", {4, 1}}}, {parsed->loss});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  FeedMap feeds;
  feeds["x"].Reshape(ir::DataType::kFloat32, {4, 8});
  for (int i = 0; i < 32; ++i) feeds["x"].data<float>()[i] = static_cast<float>(i % 5) - 2.0f;
  feeds["y"].Reshape(ir::DataType::kInt64, {4, 1});
  for (int i = 0; i < 4; ++i) feeds["y"].data<int64_t>()[i] = i % 3;

  // Training on one fixed batch must lower its loss: the step really updates the parameters.
  ASSERT_TRUE(exec->Run(**prepared, feeds, out).ok());
  const float first = out[0].data<float>()[0];
  ExpectNoAllocationsAfterTheFirstStep(*exec, **prepared, feeds);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(exec->Run(**prepared, feeds, out).ok());
  EXPECT_LT(out[0].data<float>()[0], first);
}

}  // namespace
}  // namespace fleet::exec
