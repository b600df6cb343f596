// Sequence tensors (LoD level 1) through the executor and the real cpu plugin: feeds of varying
// rows, the capacity that grows, zero padding, fetched offsets, training that equals the same
// model written densely with padded ids, and the errors of bad offsets and of ops that do not
// take sequences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autodiff/backward.h"
#include "executor/executor.h"
#include "fleet/fleet_plugin.h"
#include "frontend/frontend.h"
#include "optim/optimizer.h"

namespace fleet::exec {
namespace {

// Ids of sequences as a feed: rows [total, 1] and their offsets.
HostTensor Sequences(const std::vector<std::vector<int64_t>>& seqs) {
  HostTensor t;
  int64_t rows = 0;
  for (const auto& s : seqs) rows += static_cast<int64_t>(s.size());
  t.Reshape(ir::DataType::kInt64, {rows, 1});
  t.lod.push_back(0);
  int64_t at = 0;
  for (const auto& s : seqs) {
    for (int64_t id : s) t.data<int64_t>()[at++] = id;
    t.lod.push_back(at);
  }
  return t;
}

HostTensor Column(const std::vector<float>& values) {
  HostTensor t;
  t.Reshape(ir::DataType::kFloat32, {static_cast<int64_t>(values.size()), 1});
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

class SequenceExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    auto loaded = registry_->Load("cpu");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    ExecutorOptions eo;
    eo.num_threads = 1;
    auto exec = Executor::Create(*registry_, "cpu", eo);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    exec_ = std::move(*exec);
  }

  // Parses `text`, appends backward and the optimizer when it minimizes, runs startup.
  frontend::ParsedProgram Build(const std::string& text) {
    auto parsed = frontend::ParseProgramText(text, "seq.fleet");
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    if (!parsed.ok()) return {};
    if (parsed->optimizer) {
      auto pg = autodiff::AppendBackward(parsed->main, parsed->loss);
      EXPECT_TRUE(pg.ok()) << pg.status().ToString();
      EXPECT_TRUE(
          optim::ApplyOptimizer(parsed->main, parsed->startup, *pg, *parsed->optimizer).ok());
    }
    std::vector<HostTensor> none;
    EXPECT_TRUE(exec_->Run(parsed->startup, {}, {}, none).ok());
    return std::move(*parsed);
  }

  std::vector<float> Param(const std::string& name) {
    auto t = exec_->scope().Read(name);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return std::vector<float>(t->data<float>(), t->data<float>() + t->numel());
  }

  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<Executor> exec_;
};

constexpr const char* kPool = R"(
ids = data("ids", shape=[-1, 1], dtype="int64", lod_level=1)
emb = embedding(ids, size=[50, 3])
pooled = sequence_pool(emb, "sum")
)";

// Each sequence's pooled row is the sum of its ids' rows of the table; batches of more rows
// than the preparation holds prepare it again; what a smaller batch leaves behind is zero.
TEST_F(SequenceExecTest, PoolingFollowsTheOffsetsWhateverTheRows) {
  frontend::ParsedProgram p = Build(kPool);
  const std::vector<float> w = Param("embedding_0.w_0");
  auto prepared = exec_->Prepare(p.main, {{"ids", {SequenceCapacity(4), 1}}},
                                 {"sequence_pool_0.tmp_0", "embedding_0.tmp_0"}, {{"ids", 3}});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  const int64_t first_capacity = (*prepared)->VarInfo("ids")->dims[0];
  std::vector<std::vector<std::vector<int64_t>>> batches = {
      {{1, 2}, {}, {3, 4, 5}},
      {std::vector<int64_t>(30, 7), {1}, std::vector<int64_t>(20, 49)},  // grows the capacity
      {{9}, {8, 8}, {}}};
  for (const auto& batch : batches) {
    FeedMap feeds{{"ids", Sequences(batch)}};
    std::vector<HostTensor> out;
    ASSERT_TRUE(exec_->Run(**prepared, feeds, out).ok());
    ASSERT_EQ(out[0].dims, (std::vector<int64_t>{3, 3}));
    for (size_t s = 0; s < batch.size(); ++s) {
      for (int j = 0; j < 3; ++j) {
        double want = 0;
        for (int64_t id : batch[s]) want += w[static_cast<size_t>(id * 3 + j)];
        EXPECT_NEAR(out[0].data<float>()[s * 3 + j], want, 1e-5) << "sequence " << s;
      }
    }
    // The embedding comes back with this batch's rows and offsets, no padding.
    EXPECT_EQ(out[1].lod, feeds["ids"].lod);
    EXPECT_EQ(out[1].dims[0], feeds["ids"].dims[0]);
  }
  EXPECT_GT((*prepared)->VarInfo("ids")->dims[0], first_capacity);
  EXPECT_GE((*prepared)->VarInfo("ids")->dims[0], 51);
  EXPECT_LE((*prepared)->VarInfo("ids")->dims[0], 64);
  // The padding of the embedding output is zero after the small batch.
  const float* emb = static_cast<const float*>((*prepared)->VarData("embedding_0.tmp_0"));
  const int64_t capacity = (*prepared)->VarInfo("embedding_0.tmp_0")->dims[0];
  for (int64_t r = 3; r < capacity; ++r) {
    for (int j = 0; j < 3; ++j) ASSERT_EQ(emb[r * 3 + j], 0.0f) << "padding row " << r;
  }
}

TEST(SequenceCapacityTest, AtMostAQuarterOverAndFewValues) {
  EXPECT_EQ(SequenceCapacity(0), 16);
  EXPECT_EQ(SequenceCapacity(16), 16);
  EXPECT_EQ(SequenceCapacity(17), 20);
  EXPECT_EQ(SequenceCapacity(600), 640);
  EXPECT_EQ(SequenceCapacity(1000), 1024);
  for (int64_t rows = 1; rows < 100000; rows += 37) {
    const int64_t c = SequenceCapacity(rows);
    ASSERT_GE(c, rows);
    ASSERT_LE(static_cast<double>(c), std::max<double>(16, 1.25 * static_cast<double>(rows)));
  }
}

// The same model twice: ids as sequences through sequence_pool(SUM), and padded to a fixed
// width with a padding id whose row is zero, summed with reduce_sum. Ten SGD steps on the same
// batches must leave the same parameters.
TEST_F(SequenceExecTest, TrainingEqualsTheSameModelOnPaddedIds) {
  const std::string head = R"(
y = data("y", shape=[-1, 1], dtype="float32")
)";
  const std::string tail = R"(
pred = fc(pooled, size=1, param_attr=ParamAttr(name="fc_w"), bias_attr=ParamAttr(name="fc_b"))
loss = mean(square_error_cost(pred, y))
minimize(loss, optimizer=sgd(learning_rate=0.05))
)";
  frontend::ParsedProgram seq = Build(head + R"(
ids = data("ids", shape=[-1, 1], dtype="int64", lod_level=1)
emb = embedding(ids, size=[8, 4], param_attr=ParamAttr(name="table"))
pooled = sequence_pool(emb, "sum")
)" + tail);
  const std::vector<float> table = Param("table");
  const std::vector<float> fc_w = Param("fc_w");
  // A second executor (and registry) for the padded model; the first keeps its own.
  auto seq_registry = std::move(registry_);
  auto seq_exec = std::move(exec_);
  SetUp();
  // Padded: id 8 is the padding row (padding_idx), so the table has one more row.
  frontend::ParsedProgram dense = Build(head + R"(
ids = data("ids", shape=[-1, 4], dtype="int64")
emb = embedding(ids, size=[9, 4], padding_idx=8, param_attr=ParamAttr(name="table"))
pooled = reduce_sum(emb, dim=1)
)" + tail);
  HostTensor t9;
  t9.Reshape(ir::DataType::kFloat32, {9, 4});
  std::fill(t9.data<float>(), t9.data<float>() + 36, 0.0f);
  std::copy(table.begin(), table.end(), t9.data<float>());
  ASSERT_TRUE(exec_->scope().Write("table", t9).ok());
  HostTensor w;
  w.Reshape(ir::DataType::kFloat32, {4, 1});
  std::copy(fc_w.begin(), fc_w.end(), w.data<float>());
  ASSERT_TRUE(exec_->scope().Write("fc_w", w).ok());

  const std::vector<std::vector<std::vector<int64_t>>> batches = {
      {{1, 2}, {3}, {}, {0, 0, 7, 5}}, {{6, 6, 6}, {2, 1}, {4}, {7}}};
  const std::vector<float> labels = {1.0f, -0.5f, 0.25f, 2.0f};
  std::vector<HostTensor> out;
  for (int step = 0; step < 10; ++step) {
    const auto& batch = batches[step % 2];
    FeedMap sf{{"ids", Sequences(batch)}, {"y", Column(labels)}};
    ASSERT_TRUE(seq_exec->Run(seq.main, sf, {seq.loss}, out).ok());
    FeedMap df{{"y", Column(labels)}};
    df["ids"].Reshape(ir::DataType::kInt64, {4, 4});
    for (size_t s = 0; s < 4; ++s) {
      for (size_t k = 0; k < 4; ++k) {
        df["ids"].data<int64_t>()[s * 4 + k] = k < batch[s].size() ? batch[s][k] : 8;
      }
    }
    ASSERT_TRUE(exec_->Run(dense.main, df, {dense.loss}, out).ok());
  }
  auto seq_table = seq_exec->scope().Read("table");
  auto dense_table = exec_->scope().Read("table");
  ASSERT_TRUE(seq_table.ok() && dense_table.ok());
  for (int i = 0; i < 32; ++i) {
    EXPECT_NEAR(seq_table->data<float>()[i], dense_table->data<float>()[i], 1e-5) << i;
  }
  EXPECT_NE(seq_table->data<float>()[4], table[4]);  // row 1 was trained
  for (const char* name : {"fc_w", "fc_b"}) {
    auto a = seq_exec->scope().Read(name);
    auto b = exec_->scope().Read(name);
    ASSERT_TRUE(a.ok() && b.ok());
    for (int64_t i = 0; i < a->numel(); ++i) {
      EXPECT_NEAR(a->data<float>()[i], b->data<float>()[i], 1e-5) << name;
    }
  }
}

// fc on the embedding rows (mul, elementwise_add, relu on sequences) before sequence_pool, and
// the embedding used twice, so its gradient is the sum of two sequence gradients. The same
// model on padded ids masks the fc rows of the padding (relu(bias) is not zero) and sums them
// with reduce_sum; ten SGD steps on the same batches must leave the same parameters.
TEST_F(SequenceExecTest, FcOnSequenceRowsAndGradientFanOutEqualThePaddedModel) {
  const std::string head = R"(
y = data("y", shape=[-1, 1], dtype="float32")
)";
  const std::string tail = R"(
pooled = concat([p1, p2], axis=1)
pred = fc(pooled, size=1, param_attr=ParamAttr(name="fc_w"), bias_attr=ParamAttr(name="fc_b"))
loss = mean(square_error_cost(pred, y))
minimize(loss, optimizer=sgd(learning_rate=0.1))
)";
  frontend::ParsedProgram seq = Build(head + R"(
ids = data("ids", shape=[-1, 1], dtype="int64", lod_level=1)
emb = embedding(ids, size=[8, 4], param_attr=ParamAttr(name="table"))
h = fc(emb, size=3, act="relu", param_attr=ParamAttr(name="h_w"), bias_attr=ParamAttr(name="h_b"))
p1 = sequence_pool(h, "sum")
p2 = sequence_pool(scale(emb, scale=0.5), "max")
)" + tail);
  bool summed = false;
  for (const ir::Op& op : seq.main.global().ops) {
    if (op.type == "sum" && op.OutputOne("Out") == "embedding_0.tmp_0@GRAD") summed = true;
  }
  ASSERT_TRUE(summed) << "the embedding's gradient is not a sum of its two uses";
  const std::vector<float> table = Param("table");
  const std::vector<float> h_w = Param("h_w");
  const std::vector<float> fc_w = Param("fc_w");
  auto seq_registry = std::move(registry_);
  auto seq_exec = std::move(exec_);
  SetUp();
  // Padded: id 8 is the padding row; mask is 1 on real ids and 0 on padding.
  frontend::ParsedProgram dense = Build(head + R"(
ids = data("ids", shape=[-1, 4], dtype="int64")
mask = data("mask", shape=[-1, 4, 1], dtype="float32")
emb = embedding(ids, size=[9, 4], padding_idx=8, param_attr=ParamAttr(name="table"))
h = fc(emb, size=3, num_flatten_dims=2, act="relu", param_attr=ParamAttr(name="h_w"), bias_attr=ParamAttr(name="h_b"))
p1 = reduce_sum(elementwise_mul(h, mask), dim=1)
p2 = reduce_max(elementwise_add(scale(emb, scale=0.5), scale(mask, scale=1000.0, bias=-1000.0)), dim=1)
)" + tail);
  auto write = [&](const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    HostTensor t;
    t.Reshape(ir::DataType::kFloat32, dims);
    v.resize(static_cast<size_t>(t.numel()), 0.0f);
    std::copy(v.begin(), v.end(), t.data<float>());
    ASSERT_TRUE(exec_->scope().Write(name, t).ok()) << name;
  };
  write("table", {9, 4}, table);
  write("h_w", {4, 3}, h_w);
  write("fc_w", {7, 1}, fc_w);

  // No empty sequence (MAX of one is pad_value, which the padded model would not give) and no
  // id twice in a sequence (reduce_max's gradient goes to every tied row, MAX's to the first).
  const std::vector<std::vector<std::vector<int64_t>>> batches = {
      {{1, 2}, {3}, {5, 2}, {0, 1, 7, 5}}, {{6, 3, 0}, {2, 1}, {4}, {7}}};
  const std::vector<float> labels = {1.0f, -0.5f, 0.25f, 2.0f};
  std::vector<HostTensor> out;
  for (int step = 0; step < 10; ++step) {
    const auto& batch = batches[step % 2];
    FeedMap sf{{"ids", Sequences(batch)}, {"y", Column(labels)}};
    ASSERT_TRUE(seq_exec->Run(seq.main, sf, {seq.loss}, out).ok());
    const float seq_loss = out[0].data<float>()[0];
    FeedMap df{{"y", Column(labels)}};
    df["ids"].Reshape(ir::DataType::kInt64, {4, 4});
    df["mask"].Reshape(ir::DataType::kFloat32, {4, 4, 1});
    for (size_t s = 0; s < 4; ++s) {
      for (size_t k = 0; k < 4; ++k) {
        const bool real = k < batch[s].size();
        df["ids"].data<int64_t>()[s * 4 + k] = real ? batch[s][k] : 8;
        df["mask"].data<float>()[s * 4 + k] = real ? 1.0f : 0.0f;
      }
    }
    ASSERT_TRUE(exec_->Run(dense.main, df, {dense.loss}, out).ok());
    EXPECT_NEAR(seq_loss, out[0].data<float>()[0], 1e-5) << "step " << step;
  }
  for (const char* name : {"table", "h_w", "h_b", "fc_w", "fc_b"}) {
    auto a = seq_exec->scope().Read(name);
    auto b = exec_->scope().Read(name);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    for (int64_t i = 0; i < a->numel(); ++i) {
      EXPECT_NEAR(a->data<float>()[i], b->data<float>()[i], 1e-5) << name << " " << i;
    }
  }
  auto trained = seq_exec->scope().Read("h_w");
  ASSERT_TRUE(trained.ok());
  EXPECT_NE(trained->data<float>()[0], h_w[0]);
}

// The sequence layers build their op, keep or drop the sequences as documented, and refuse
// what would need a shape from the batch.
TEST_F(SequenceExecTest, SequenceLayersRunThroughTheExecutor) {
  frontend::ParsedProgram p = Build(R"(
ids = data("ids", shape=[-1, 1], dtype="int64", lod_level=1)
emb = embedding(ids, size=[10, 2])
soft = sequence_softmax(fc(emb, size=1))
rev = sequence_reverse(emb)
padded = sequence_pad(emb, 0.0, maxlen=3)
pooled = sequence_pool(emb, "average")
back = sequence_expand_as(pooled, emb)
mask = sequence_mask(fill_constant(shape=[2], dtype="int64", value=2), maxlen=3, dtype="float32")
)");
  const std::vector<float> w = Param("embedding_0.w_0");
  FeedMap feeds{{"ids", Sequences({{1, 2, 3}, {}, {4}})}};
  std::vector<HostTensor> out;
  ASSERT_TRUE(exec_->Run(p.main, feeds,
                         {"sequence_softmax_0.tmp_0", "sequence_reverse_0.tmp_0",
                          "sequence_pad_0.tmp_0", "sequence_pad_0.tmp_1",
                          "sequence_expand_as_0.tmp_0", "sequence_mask_0.tmp_0"},
                         out)
                  .ok());
  const std::vector<int64_t> lod = {0, 3, 3, 4};
  // softmax within each sequence: the first sums to 1, a sequence of one row is 1.
  EXPECT_EQ(out[0].lod, lod);
  const float* soft = out[0].data<float>();
  EXPECT_NEAR(soft[0] + soft[1] + soft[2], 1.0f, 1e-6);
  EXPECT_NEAR(soft[3], 1.0f, 1e-6);
  // reverse: row 0 of the first sequence is id 3's row.
  EXPECT_EQ(out[1].lod, lod);
  EXPECT_EQ(out[1].data<float>()[0], w[3 * 2]);
  EXPECT_EQ(out[1].data<float>()[3 * 2 + 1], w[4 * 2 + 1]);
  // pad: dense [3, 3, 2] and the lengths.
  EXPECT_TRUE(out[2].lod.empty());
  EXPECT_EQ(out[2].dims, (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(out[2].data<float>()[(2 * 3 + 0) * 2], w[4 * 2]);
  EXPECT_EQ(out[2].data<float>()[(2 * 3 + 1) * 2], 0.0f);
  EXPECT_EQ(std::vector<int64_t>(out[3].data<int64_t>(), out[3].data<int64_t>() + 3),
            (std::vector<int64_t>{3, 0, 1}));
  // expand_as: every row of the first sequence is its average.
  EXPECT_EQ(out[4].lod, lod);
  EXPECT_NEAR(out[4].data<float>()[2 * 2], (w[2] + w[4] + w[6]) / 3, 1e-6);
  EXPECT_EQ(out[5].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out[5].data<float>()[2], 0.0f);
  EXPECT_EQ(out[5].data<float>()[1], 1.0f);

  // A sequence longer than maxlen stops the step, naming the op.
  FeedMap longer{{"ids", Sequences({{1, 2, 3, 4}, {}, {4}})}};
  Status s = exec_->Run(p.main, longer, {"sequence_pad_0.tmp_0"}, out);
  EXPECT_NE(s.message().find("sequence_pad: sequence 0 has 4 rows, more than padded_length 3"),
            std::string::npos)
      << s.ToString();

  auto parsed = frontend::ParseProgramText(R"(
ids = data("ids", shape=[-1, 1], dtype="int64", lod_level=1)
emb = embedding(ids, size=[10, 2])
padded = sequence_pad(emb, 0.0)
)",
                                           "seq.fleet");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("seq.fleet:4:"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("maxlen must be given and > 0"), std::string::npos)
      << parsed.status().ToString();
}

TEST_F(SequenceExecTest, BadOffsetsAreRefusedNamingTheFeed) {
  frontend::ParsedProgram p = Build(kPool);
  std::vector<HostTensor> out;
  FeedMap feeds{{"ids", Sequences({{1, 2}, {3}})}};
  feeds["ids"].lod = {0, 2, 4};  // ends past the 3 rows
  Status s = exec_->Run(p.main, feeds, {"sequence_pool_0.tmp_0"}, out);
  EXPECT_NE(s.message().find("feed 'ids': its offsets end at 4 but the tensor has 3 rows"),
            std::string::npos)
      << s.ToString();
  feeds["ids"].lod = {0, 2, 1, 3};
  s = exec_->Run(p.main, feeds, {"sequence_pool_0.tmp_0"}, out);
  EXPECT_NE(s.message().find("offset 2 (1) is before offset 1 (2)"), std::string::npos)
      << s.ToString();
  FeedMap dense{{"ids", Sequences({{1, 2}})}};
  dense["ids"].lod.clear();
  s = exec_->Run(p.main, dense, {"sequence_pool_0.tmp_0"}, out);
  EXPECT_FALSE(s.ok());
}

// Refused where the program is written, and by the executor for a program built another way.
TEST_F(SequenceExecTest, AnOpThatDoesNotTakeSequencesIsRefused) {
  auto parsed = frontend::ParseProgramText(R"(
ids = data("ids", shape=[-1, 1], dtype="int64", lod_level=1)
emb = embedding(ids, size=[50, 3])
s = softmax(emb)
)",
                                           "seq.fleet");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "seq.fleet:4:5: softmax: input X 'embedding_0.tmp_0' is a sequence tensor (lod_level "
            "1), which softmax does not take; turn the sequences into one row each first "
            "(sequence_pool) or pad them (sequence_pad)");

  ir::Program p;
  ir::Var x{"x", ir::DataType::kFloat32, {-1, 2}, false, true, std::nullopt, 1};
  ASSERT_TRUE(p.global().AddVar(x).ok());
  p.global().ops.push_back(ir::MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"y"}}}));
  std::vector<HostTensor> out;
  HostTensor t;
  t.Reshape(ir::DataType::kFloat32, {3, 2});
  t.lod = {0, 1, 3};
  Status s = exec_->Run(p, {{"x", t}}, {"y"}, out);
  EXPECT_NE(s.message().find("op #0 (softmax): softmax: input X 'x' is a sequence tensor"),
            std::string::npos)
      << s.ToString();
}

// Two slots' rows do not correspond, even with equal rows and capacities.
TEST_F(SequenceExecTest, AnOpOverTwoSlotsSequencesIsRefused) {
  ir::Program p;
  for (const char* name : {"a", "b"}) {
    ASSERT_TRUE(p.global()
                    .AddVar({name, ir::DataType::kFloat32, {-1, 2}, false, true, std::nullopt, 1})
                    .ok());
  }
  p.global().ops.push_back(ir::MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"s"}}}));
  HostTensor t;
  t.Reshape(ir::DataType::kFloat32, {3, 2});
  t.lod = {0, 1, 3};
  std::vector<HostTensor> out;
  Status s = exec_->Run(p, {{"a", t}, {"b", t}}, {"s"}, out);
  EXPECT_NE(s.message().find("op #0 (sum): inputs 'a' and 'b' hold different sequences (those "
                             "of 'a' and of 'b')"),
            std::string::npos)
      << s.ToString();
}

// ---- ops whose output has offsets of its own ---------------------------------------------------

// The rows of `t` from `begin` to `end`, flattened.
std::vector<float> Rows(const HostTensor& t, int64_t begin, int64_t end) {
  const int64_t width = t.dims[0] > 0 ? t.numel() / t.dims[0] : 0;
  return std::vector<float>(t.data<float>() + begin * width, t.data<float>() + end * width);
}

// sequence_concat of two feeds' sequences: the joined offsets and rows come back with the
// fetch, pooling follows them, the capacity grows with the feeds, and training through
// sequence_concat_grad moves each table by what its ids were counted.
TEST_F(SequenceExecTest, ConcatJoinsTheSequencesOfTwoFeeds) {
  frontend::ParsedProgram p = Build(R"(
a = data("a", shape=[-1, 1], dtype="int64", lod_level=1)
b = data("b", shape=[-1, 1], dtype="int64", lod_level=1)
ea = embedding(a, size=[20, 2])
eb = embedding(b, size=[20, 2])
joined = sequence_concat([ea, eb])
pooled = sequence_pool(joined, "sum")
loss = mean(pooled)
minimize(loss, optimizer=sgd(learning_rate=1.0))
)");
  const std::vector<float> wa = Param("embedding_0.w_0"), wb = Param("embedding_1.w_0");
  const std::vector<std::vector<std::vector<int64_t>>> a_batches = {
      {{1, 2}, {}, {3}}, {std::vector<int64_t>(40, 5), {6}, {}}};
  const std::vector<std::vector<std::vector<int64_t>>> b_batches = {
      {{4}, {5, 6}, {}}, {{7}, {}, std::vector<int64_t>(30, 8)}};
  std::vector<float> ta = wa, tb = wb;  // the tables as SGD should leave them
  for (size_t batch = 0; batch < a_batches.size(); ++batch) {
    const auto& as = a_batches[batch];
    const auto& bs = b_batches[batch];
    FeedMap feeds{{"a", Sequences(as)}, {"b", Sequences(bs)}};
    std::vector<HostTensor> out;
    ASSERT_TRUE(exec_->Run(p.main, feeds, {"sequence_concat_0.tmp_0", "sequence_pool_0.tmp_0"},
                           out)
                    .ok());
    std::vector<int64_t> lod = {0};
    for (size_t s = 0; s < as.size(); ++s) {
      lod.push_back(lod.back() + static_cast<int64_t>(as[s].size() + bs[s].size()));
    }
    ASSERT_EQ(out[0].lod, lod);
    ASSERT_EQ(out[0].dims, (std::vector<int64_t>{lod.back(), 2}));
    for (size_t s = 0; s < as.size(); ++s) {
      std::vector<float> want;
      for (int64_t id : as[s]) want.insert(want.end(), &ta[id * 2], &ta[id * 2 + 2]);
      for (int64_t id : bs[s]) want.insert(want.end(), &tb[id * 2], &tb[id * 2 + 2]);
      EXPECT_EQ(Rows(out[0], lod[s], lod[s + 1]), want) << "batch " << batch << " sequence " << s;
      for (int j = 0; j < 2; ++j) {
        float sum = 0;
        for (size_t r = 0; r < want.size() / 2; ++r) sum += want[r * 2 + static_cast<size_t>(j)];
        EXPECT_NEAR(out[1].data<float>()[s * 2 + static_cast<size_t>(j)], sum, 1e-5);
      }
    }
    // d loss / d row of id = (times the id was used) / (sequences * 2), for each element.
    const float scale = 1.0f / static_cast<float>(as.size() * 2);
    for (const auto& seq : as) {
      for (int64_t id : seq) {
        ta[id * 2] -= scale;
        ta[id * 2 + 1] -= scale;
      }
    }
    for (const auto& seq : bs) {
      for (int64_t id : seq) {
        tb[id * 2] -= scale;
        tb[id * 2 + 1] -= scale;
      }
    }
    const std::vector<float> got_a = Param("embedding_0.w_0"), got_b = Param("embedding_1.w_0");
    for (size_t i = 0; i < ta.size(); ++i) {
      EXPECT_NEAR(got_a[i], ta[i], 1e-4) << "batch " << batch << " table a element " << i;
      EXPECT_NEAR(got_b[i], tb[i], 1e-4) << "batch " << batch << " table b element " << i;
    }
  }
}

// The layers that take sequences refuse a dense var where the program is written.
TEST_F(SequenceExecTest, NewSequenceLayersRefuseDenseInputsAtTheirArgument) {
  const std::string head =
      "a = data(\"a\", shape=[-1, 2], dtype=\"float32\", lod_level=1)\n"
      "d = data(\"d\", shape=[-1, 2], dtype=\"float32\")\n"
      "n = data(\"n\", shape=[-1, 1], dtype=\"int64\")\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"c = sequence_concat([a, d])\n",
       "seq.fleet:4:21: sequence_concat: sequence_concat takes sequences, but 'd' is dense"},
      {"c = sequence_slice(d, offset=n, length=n)\n",
       "seq.fleet:4:20: sequence_slice: sequence_slice takes sequences, but 'd' is dense"},
      {"c = sequence_expand(d, d)\n",
       "seq.fleet:4:24: sequence_expand: sequence_expand takes sequences, but 'd' is dense"},
      // The op's own refusal, at the call: an X of sequences would change Out's sequence count.
      {"c = sequence_expand(a, a)\n",
       "seq.fleet:4:5: sequence_expand: input X 'a' holds sequences, but sequence_expand takes it "
       "dense: Out would hold one sequence per row of Y"}};
  for (const auto& [line, want] : cases) {
    auto parsed = frontend::ParseProgramText(head + line, "seq.fleet");
    ASSERT_FALSE(parsed.ok()) << line;
    EXPECT_NE(parsed.status().message().find(want), std::string::npos)
        << line << parsed.status().ToString();
  }
}

constexpr const char* kUnpadSlice = R"(
x = data("x", shape=[-1, 4, 2], dtype="float32")
len = data("len", shape=[-1], dtype="int64")
off = data("off", shape=[-1, 1], dtype="int64")
n = data("n", shape=[-1, 1], dtype="int64")
seq = sequence_unpad(x, length=len)
part = sequence_slice(seq, offset=off, length=n)
pooled = sequence_pool(part, "sum")
)";

HostTensor Int64s(std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  HostTensor t;
  t.Reshape(ir::DataType::kInt64, std::move(dims));
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

// sequence_unpad makes sequences from lengths that are data, sequence_slice cuts each, and a
// slice past its sequence stops the step naming the op, the sequence and the values.
TEST_F(SequenceExecTest, UnpadAndSliceMakeOffsetsFromData) {
  frontend::ParsedProgram p = Build(kUnpadSlice);
  HostTensor x;
  x.Reshape(ir::DataType::kFloat32, {3, 4, 2});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i);
  FeedMap feeds{{"x", x},
                {"len", Int64s({3}, {2, 0, 4})},
                {"off", Int64s({3, 1}, {1, 0, 1})},
                {"n", Int64s({3, 1}, {1, 0, 2})}};
  std::vector<HostTensor> out;
  ASSERT_TRUE(exec_->Run(p.main, feeds,
                         {"sequence_unpad_0.tmp_0", "sequence_slice_0.tmp_0",
                          "sequence_pool_0.tmp_0"},
                         out)
                  .ok());
  EXPECT_EQ(out[0].lod, (std::vector<int64_t>{0, 2, 2, 6}));
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{6, 2}));
  // Sequence 0 is x[0, :2], sequence 2 is x[2, :4].
  EXPECT_EQ(Rows(out[0], 0, 2), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(Rows(out[0], 2, 6), (std::vector<float>{16, 17, 18, 19, 20, 21, 22, 23}));
  EXPECT_EQ(out[1].lod, (std::vector<int64_t>{0, 1, 1, 3}));
  EXPECT_EQ(Rows(out[1], 0, 3), (std::vector<float>{2, 3, 18, 19, 20, 21}));
  EXPECT_EQ(Rows(out[2], 0, 3), (std::vector<float>{2, 3, 0, 0, 38, 40}));

  feeds["n"] = Int64s({3, 1}, {1, 0, 4});
  Status s = exec_->Run(p.main, feeds, {"sequence_pool_0.tmp_0"}, out);
  EXPECT_NE(s.message().find("(sequence_slice): sequence_slice: sequence 2 of X "
                             "'sequence_unpad_0.tmp_0' has 4 rows, so Offset 1 and Length 4"),
            std::string::npos)
      << s.ToString();
  feeds["n"] = Int64s({3, 1}, {1, 0, 2});
  feeds["len"] = Int64s({3}, {2, 0, 5});
  s = exec_->Run(p.main, feeds, {"sequence_pool_0.tmp_0"}, out);
  EXPECT_NE(s.message().find("sequence_unpad: Length[2] of 'len' is 5, outside [0, 4]"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace fleet::exec
