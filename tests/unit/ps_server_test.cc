// The parameter server's logic without a network: threads acting as trainers call PsServer's
// TransportHandler methods directly, on hand-written pserver programs (text IR) run by the real
// cpu plugin. Expected parameters are computed by hand from the sgd rule p -= lr * mean(g).
#include "pserver/server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "data/npy.h"
#include "fleet/fleet_plugin.h"
#include "fleet/fleet_transport.h"
#include "ir/text.h"

namespace fleet {
namespace {

using std::chrono::milliseconds;

// One server of a job of two trainers holding block 0 (rows 0-1) of a 4x2 parameter w, which
// startup initialises whole to 1 and splits. lr = 0.1.
const char* kSyncServer = R"(
program {
  block 0 {
    var learning_rate_0 : float32[1] persistable
    var w.block0 : float32[2, 2] persistable
    var w@GRAD.block0 : float32[2, 2] persistable
    var w@GRAD.block0.trainer_0 : float32[2, 2] persistable
    var w@GRAD.block0.trainer_1 : float32[2, 2] persistable
    op listen_and_serv(X=[w@GRAD.block0.trainer_0, w@GRAD.block0.trainer_1]) -> ()
       {endpoint="127.0.0.1:6170", pserver_id=0, Fanin=2, distributed_mode=0,
        optimize_blocks=[1], grad_to_block_id=["w@GRAD.block0:1"], lr_decay_block_id=-1,
        sparse_grad_to_param=strings[]}
  }
  block 1 parent 0 {
    op sum(X=[w@GRAD.block0.trainer_0, w@GRAD.block0.trainer_1]) -> (Out=[w@GRAD.block0])
    op scale(X=[w@GRAD.block0]) -> (Out=[w@GRAD.block0]) {scale=0.5f}
    op sgd(Param=[w.block0], Grad=[w@GRAD.block0], LearningRate=[learning_rate_0])
       -> (ParamOut=[w.block0])
  }
}
)";

const char* kAsyncServer = R"(
program {
  block 0 {
    var learning_rate_0 : float32[1] persistable
    var w.block0 : float32[2, 2] persistable
    var w@GRAD.block0 : float32[2, 2] persistable
    op listen_and_serv(X=[w@GRAD.block0]) -> ()
       {endpoint="127.0.0.1:6170", pserver_id=0, Fanin=2, distributed_mode=1,
        optimize_blocks=[1], grad_to_block_id=["w@GRAD.block0:1"], lr_decay_block_id=-1,
        sparse_grad_to_param=strings[]}
  }
  block 1 parent 0 {
    op sgd(Param=[w.block0], Grad=[w@GRAD.block0], LearningRate=[learning_rate_0])
       -> (ParamOut=[w.block0])
  }
}
)";

// init "full": the whole parameter, then this server's rows (dtype 9 = FLEET_DTYPE_FLOAT32).
const char* kStartup = R"(
program {
  block 0 {
    var learning_rate_0 : float32[1] persistable
    var w : float32[4, 2]
    var w.block0 : float32[2, 2] persistable
    var w.block1 : float32[2, 2]
    op fill_constant() -> (Out=[w]) {shape=[4L, 2L], value=1.0f, dtype=9}
    op fill_constant() -> (Out=[learning_rate_0]) {shape=[1L], value=0.1f, dtype=9}
    op split_byref(X=[w]) -> (Out=[w.block0, w.block1]) {sections=[2, 2]}
  }
}
)";

class PsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    auto loaded = registry_->Load("cpu");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  }

  std::unique_ptr<PsServer> MakeServer(const char* text, milliseconds timeout,
                                       std::filesystem::path save = {}) {
    auto pserver = ir::ParseProgram(text, "pserver.ir");
    EXPECT_TRUE(pserver.ok()) << pserver.status().ToString();
    auto startup = ir::ParseProgram(kStartup, "startup.ir");
    EXPECT_TRUE(startup.ok()) << startup.status().ToString();
    if (!pserver.ok() || !startup.ok()) return nullptr;
    PsServerOptions options;
    options.timeout = timeout;
    options.save_params_dir = std::move(save);
    auto server = PsServer::Create(*registry_, "cpu", *pserver, *startup, options);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(*server) : nullptr;
  }

  std::unique_ptr<PluginRegistry> registry_;
};

// A float32 [2, 2] tensor to send; `values` must outlive the call.
struct Grad {
  std::vector<float> values;
  int64_t dims[2] = {2, 2};
  FleetTensor tensor() {
    FleetTensor t{};
    t.struct_size = sizeof(FleetTensor);
    t.data = values.data();
    t.dtype = FLEET_DTYPE_FLOAT32;
    t.ndim = 2;
    t.dims = dims;
    t.device_type = FLEET_DEVICE_TYPE_HOST;
    t.height = -1;  // dense
    return t;
  }
};

Status Send(PsServer& s, int32_t trainer, const std::string& name, std::vector<float> values) {
  Grad g{std::move(values)};
  return s.OnSend(trainer, name, g.tensor());
}

// A Get as the transport makes it: the view is copied out, then released.
StatusOr<std::vector<float>> Get(PsServer& s, int32_t trainer, const std::string& name) {
  FleetTensor out{};
  void* token = nullptr;
  FLEET_RETURN_IF_ERROR(s.OnGet(trainer, name, out, &token));
  size_t n = 1;
  for (int32_t d = 0; d < out.ndim; ++d) n *= static_cast<size_t>(out.dims[d]);
  const float* p = static_cast<const float*>(out.data);
  std::vector<float> values(p, p + n);
  s.OnGetDone(token);
  return values;
}

void ExpectFloats(const StatusOr<std::vector<float>>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
  ASSERT_EQ(got->size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR((*got)[i], want[i], 1e-6) << what << " " << i;
  }
}

TEST_F(PsServerTest, SyncRoundsApplyTheMeanOfTheTrainersGradients) {
  auto server = MakeServer(kSyncServer, milliseconds(10000));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->Describe(), "sync, 2 trainers, 1 block");
  EXPECT_EQ(server->label(), "pserver 0 (127.0.0.1:6170)");
  Status served;
  std::thread loop([&] { served = server->Serve(); });

  // Rounds by hand (w starts at 1, lr 0.1):
  //   1: g0 = [1 2 3 4], g1 = [5 6 7 8], mean [3 4 5 6]   -> w = [0.7 0.6 0.5 0.4]
  //   2: g0 = 1s, g1 = 3s, mean 2s                          -> w = [0.5 0.4 0.3 0.2]
  //   3: trainer 1 has completed; g0 = 1s, the mean over the one contributor -> w - 0.1
  const std::vector<std::vector<float>> g0 = {{1, 2, 3, 4}, {1, 1, 1, 1}, {1, 1, 1, 1}};
  const std::vector<std::vector<float>> g1 = {{5, 6, 7, 8}, {3, 3, 3, 3}};
  const std::vector<std::vector<float>> want = {
      {0.7f, 0.6f, 0.5f, 0.4f}, {0.5f, 0.4f, 0.3f, 0.2f}, {0.4f, 0.3f, 0.2f, 0.1f}};
  auto trainer = [&](int32_t t, const std::vector<std::vector<float>>& grads) {
    // Startup: recv, fetch_barrier.
    ExpectFloats(Get(*server, t, "w.block0"), {1, 1, 1, 1}, "startup");
    ASSERT_TRUE(server->OnBarrier(t, FLEET_BARRIER_FETCH).ok());
    for (size_t r = 0; r < grads.size(); ++r) {
      const std::string grad = "w@GRAD.block0.trainer_" + std::to_string(t);
      ASSERT_TRUE(Send(*server, t, grad, grads[r]).ok());
      ASSERT_TRUE(server->OnBarrier(t, FLEET_BARRIER_BATCH).ok());
      ExpectFloats(Get(*server, t, "w.block0"), want[r],
                   "trainer " + std::to_string(t) + " round " + std::to_string(r + 1));
      ASSERT_TRUE(server->OnBarrier(t, FLEET_BARRIER_FETCH).ok());
    }
    ASSERT_TRUE(server->OnComplete(t).ok());
  };
  std::thread t0(trainer, 0, g0);
  std::thread t1(trainer, 1, g1);
  t0.join();
  t1.join();
  loop.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
  EXPECT_EQ(server->rounds(), 3);
}

// Round 0 as both trainers' startups end it (a get and a fetch barrier each), then trainer 0
// alone sends its gradient and batch barrier of round 1.
void OnlyTrainer0ReachesRoundOne(PsServer& server) {
  for (int32_t t : {0, 1}) {
    ASSERT_TRUE(Get(server, t, "w.block0").ok());
    ASSERT_TRUE(server.OnBarrier(t, FLEET_BARRIER_FETCH).ok());
  }
  ASSERT_TRUE(Send(server, 0, "w@GRAD.block0.trainer_0", {1, 1, 1, 1}).ok());
  ASSERT_TRUE(server.OnBarrier(0, FLEET_BARRIER_BATCH).ok());
}

TEST_F(PsServerTest, AMissingBatchBarrierNamesTheTrainerAtTheDeadline) {
  auto server = MakeServer(kSyncServer, milliseconds(300));
  ASSERT_NE(server, nullptr);
  Status served;
  const auto start = std::chrono::steady_clock::now();
  std::thread loop([&] { served = server->Serve(); });
  // Trainer 0 goes on; trainer 1 never sends its batch barrier.
  ASSERT_NO_FATAL_FAILURE(OnlyTrainer0ReachesRoundOne(*server));
  // Trainer 0's recv waits for the update, and is told why it will not come.
  auto got = Get(*server, 0, "w.block0");
  loop.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(elapsed, 5.0);
  ASSERT_FALSE(served.ok());
  EXPECT_EQ(served.code(), Code::kDeadlineExceeded);
  EXPECT_NE(served.message().find("pserver 0 (127.0.0.1:6170): trainer 1 did not reach the "
                                  "batch barrier of round 1 within 0.3 s"),
            std::string::npos)
      << served.ToString();
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("trainer 1 did not reach"), std::string::npos)
      << got.status().ToString();
}

TEST_F(PsServerTest, AStartupThatNeverComesIsRoundZero) {
  auto server = MakeServer(kSyncServer, milliseconds(200));
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->OnBarrier(1, FLEET_BARRIER_FETCH).ok());
  Status served = server->Serve();
  ASSERT_FALSE(served.ok());
  EXPECT_NE(served.message().find("trainer 0 did not reach the fetch barrier of round 0"),
            std::string::npos)
      << served.ToString();
}

TEST_F(PsServerTest, EveryTrainerCompletingEndsServeAndSavesTheBlocks) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fleet_ps_server_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto server = MakeServer(kSyncServer, milliseconds(10000), dir);
  ASSERT_NE(server, nullptr);
  Status served;
  std::thread loop([&] { served = server->Serve(); });
  ASSERT_TRUE(server->OnComplete(1).ok());
  ASSERT_TRUE(server->OnComplete(0).ok());
  loop.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
  auto saved = data::ReadNpy(dir / "w.block0.npy");
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->dims, (std::vector<int64_t>{2, 2}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(saved->data<float>()[i], 1.0f);
  std::filesystem::remove_all(dir);
}

TEST_F(PsServerTest, AsyncAppliesEachGradientOnArrival) {
  auto server = MakeServer(kAsyncServer, milliseconds(10000));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->Describe(), "async, 2 trainers, 1 block");
  Status served;
  std::thread loop([&] { served = server->Serve(); });
  // Barriers do not wait in async mode.
  ASSERT_TRUE(server->OnBarrier(0, FLEET_BARRIER_BATCH).ok());
  ASSERT_TRUE(server->OnBarrier(1, FLEET_BARRIER_FETCH).ok());
  ASSERT_TRUE(Send(*server, 0, "w@GRAD.block0", {1, 2, 3, 4}).ok());
  ExpectFloats(Get(*server, 1, "w.block0"), {0.9f, 0.8f, 0.7f, 0.6f}, "after trainer 0");
  ASSERT_TRUE(Send(*server, 1, "w@GRAD.block0", {1, 1, 1, 1}).ok());
  ExpectFloats(Get(*server, 0, "w.block0"), {0.8f, 0.7f, 0.6f, 0.5f}, "after trainer 1");
  ASSERT_TRUE(server->OnComplete(0).ok());
  ASSERT_TRUE(server->OnComplete(1).ok());
  loop.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
}

TEST_F(PsServerTest, AsyncSilentTrainerIsNamed) {
  auto server = MakeServer(kAsyncServer, milliseconds(200));
  ASSERT_NE(server, nullptr);
  std::thread keepalive([&] {
    for (int i = 0; i < 10; ++i) {
      (void)server->OnBarrier(0, FLEET_BARRIER_BATCH);
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  Status served = server->Serve();
  keepalive.join();
  ASSERT_FALSE(served.ok());
  EXPECT_NE(served.message().find("trainer 1 sent nothing for 0.2 s"), std::string::npos)
      << served.ToString();
}

TEST_F(PsServerTest, BadSendsAndGetsAreNamed) {
  auto server = MakeServer(kSyncServer, milliseconds(1000));
  ASSERT_NE(server, nullptr);
  Status s = Send(*server, 0, "nope", {1, 2, 3, 4});
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("'nope'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("w@GRAD.block0.trainer_0"), std::string::npos) << s.ToString();

  std::vector<float> six(6, 1.0f);
  int64_t dims[2] = {3, 2};
  FleetTensor t{};
  t.struct_size = sizeof(FleetTensor);
  t.data = six.data();
  t.dtype = FLEET_DTYPE_FLOAT32;
  t.ndim = 2;
  t.dims = dims;
  t.height = -1;
  s = server->OnSend(1, "w@GRAD.block0.trainer_1", t);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("float32[3, 2]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("float32[2, 2]"), std::string::npos) << s.ToString();

  s = Send(*server, 2, "w@GRAD.block0.trainer_0", {1, 2, 3, 4});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("trainer id 2"), std::string::npos) << s.ToString();

  auto got = Get(*server, 0, "missing");
  EXPECT_EQ(got.status().code(), Code::kNotFound);
  EXPECT_NE(got.status().message().find("'missing'"), std::string::npos);
}

// The header of a send is checked against the receive var before its payload is buffered:
// a hostile 1 TiB announcement is refused on its shape alone.
TEST_F(PsServerTest, SendBeginChecksTheShapeBeforeThePayload) {
  auto server = MakeServer(kSyncServer, milliseconds(1000));
  ASSERT_NE(server, nullptr);
  int64_t huge[1] = {int64_t{1} << 38};
  FleetTensor shape{};
  shape.struct_size = sizeof(FleetTensor);
  shape.dtype = FLEET_DTYPE_FLOAT32;
  shape.ndim = 1;
  shape.dims = huge;
  shape.height = -1;
  Status s = server->OnSendBegin(0, "w@GRAD.block0.trainer_0", shape);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("float32[274877906944]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("float32[2, 2]"), std::string::npos) << s.ToString();
  s = server->OnSendBegin(0, "not.received", shape);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  int64_t right[2] = {2, 2};
  shape.ndim = 2;
  shape.dims = right;
  EXPECT_TRUE(server->OnSendBegin(0, "w@GRAD.block0.trainer_0", shape).ok());
}

// A trainer that fails says so: the server fails at once, naming it and its reason, and a
// trainer waiting in a barrier hears it, long before the 10 s deadline.
TEST_F(PsServerTest, AFailingTrainerEndsTheServerAtOnce) {
  auto server = MakeServer(kSyncServer, milliseconds(10000));
  ASSERT_NE(server, nullptr);
  const auto start = std::chrono::steady_clock::now();
  Status served;
  std::thread loop([&] { served = server->Serve(); });
  ASSERT_NO_FATAL_FAILURE(OnlyTrainer0ReachesRoundOne(*server));
  Status waiting;
  std::thread trainer0([&] { waiting = Get(*server, 0, "w.block0").status(); });
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(server->OnAbort(1, "data.txt:7: label 9 \x1b[2J is outside [0, 2)").ok());
  trainer0.join();
  loop.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            5.0);
  ASSERT_FALSE(served.ok());
  EXPECT_EQ(served.code(), Code::kAborted);
  EXPECT_NE(served.message().find("pserver 0 (127.0.0.1:6170): trainer 1 failed: "
                                  "'data.txt:7: label 9"),
            std::string::npos)
      << served.ToString();
  EXPECT_EQ(served.message().find('\x1b'), std::string::npos) << "the reason is escaped";
  EXPECT_NE(waiting.message().find("trainer 1 failed"), std::string::npos)
      << waiting.ToString();
}

// Sparse gradients: w.block0 is the table, its gradient a selected_rows receive var.
const char* kSparseAsyncServer = R"(
program {
  block 0 {
    var learning_rate_0 : float32[1] persistable
    var w.block0 : float32[2, 2] persistable
    var w@GRAD.block0 : selected_rows float32[2, 2] persistable
    op listen_and_serv(X=[w@GRAD.block0]) -> ()
       {endpoint="127.0.0.1:6170", pserver_id=0, Fanin=2, distributed_mode=1,
        optimize_blocks=[1], grad_to_block_id=["w@GRAD.block0:1"], lr_decay_block_id=-1,
        sparse_grad_to_param=["w@GRAD.block0:w.block0"]}
  }
  block 1 parent 0 {
    op sgd(Param=[w.block0], Grad=[w@GRAD.block0], LearningRate=[learning_rate_0])
       -> (ParamOut=[w.block0])
  }
}
)";

const char* kSparseSyncServer = R"(
program {
  block 0 {
    var learning_rate_0 : float32[1] persistable
    var w.block0 : float32[2, 2] persistable
    var w@GRAD.block0 : selected_rows float32[2, 2]
    var w@GRAD.block0.trainer_0 : selected_rows float32[2, 2] persistable
    var w@GRAD.block0.trainer_1 : selected_rows float32[2, 2] persistable
    op listen_and_serv(X=[w@GRAD.block0.trainer_0, w@GRAD.block0.trainer_1]) -> ()
       {endpoint="127.0.0.1:6170", pserver_id=0, Fanin=2, distributed_mode=0,
        optimize_blocks=[1], grad_to_block_id=["w@GRAD.block0:1"], lr_decay_block_id=-1,
        sparse_grad_to_param=["w@GRAD.block0:w.block0"]}
  }
  block 1 parent 0 {
    op sum(X=[w@GRAD.block0.trainer_0, w@GRAD.block0.trainer_1]) -> (Out=[w@GRAD.block0])
    op scale(X=[w@GRAD.block0]) -> (Out=[w@GRAD.block0]) {scale=0.5f}
    op sgd(Param=[w.block0], Grad=[w@GRAD.block0], LearningRate=[learning_rate_0])
       -> (ParamOut=[w.block0])
  }
}
)";

// Entries of a [2, 2] table's gradient: one row index and two values each.
struct SparseGrad {
  std::vector<float> values;
  std::vector<int64_t> rows;
  int64_t dims[2] = {0, 2};
  FleetTensor tensor() {
    FleetTensor t{};
    t.struct_size = sizeof(FleetTensor);
    dims[0] = static_cast<int64_t>(rows.size());
    t.data = values.data();
    t.dtype = FLEET_DTYPE_FLOAT32;
    t.ndim = 2;
    t.dims = dims;
    t.device_type = FLEET_DEVICE_TYPE_HOST;
    t.rows = rows.data();
    t.height = 2;
    return t;
  }
};

Status SendRows(PsServer& s, int32_t trainer, const std::string& name, std::vector<int64_t> rows,
                std::vector<float> values) {
  SparseGrad g{std::move(values), std::move(rows)};
  return s.OnSend(trainer, name, g.tensor());
}

// Each send moves the rows it lists (sgd, lr 0.1, from 1s): entries of one row add up, a send
// past the receive var's first room (1024 entries) grows it and the block is prepared again, and
// a later, shorter send leaves nothing of the longer one behind.
TEST_F(PsServerTest, SparseSendsMoveOnlyTheirRows) {
  auto server = MakeServer(kSparseAsyncServer, milliseconds(10000));
  ASSERT_NE(server, nullptr);
  Status served;
  std::thread loop([&] { served = server->Serve(); });
  const std::string grad = "w@GRAD.block0";
  ASSERT_TRUE(SendRows(*server, 0, grad, {1, -1, 1}, {1, 2, 9, 9, 3, 4}).ok());
  ExpectFloats(Get(*server, 0, "w.block0"), {1, 1, 0.6f, 0.4f}, "two entries of row 1");
  std::vector<int64_t> rows(3000, 0);
  ASSERT_TRUE(SendRows(*server, 1, grad, rows, std::vector<float>(6000, 1.0f / 1024)).ok());
  ExpectFloats(Get(*server, 0, "w.block0"), {0.70703125f, 0.70703125f, 0.6f, 0.4f},
               "3000 entries of row 0");
  ASSERT_TRUE(SendRows(*server, 0, grad, {1}, {1, 1}).ok());
  ExpectFloats(Get(*server, 0, "w.block0"), {0.70703125f, 0.70703125f, 0.5f, 0.3f},
               "one entry of row 1");

  // A row outside the block, a dense send, and a get of the gradient are refused by name.
  Status s = SendRows(*server, 1, grad, {0, 2}, {1, 1, 1, 1});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("trainer 1 sent 'w@GRAD.block0' with entry 1 in row 2, outside its "
                             "2 rows"),
            std::string::npos)
      << s.ToString();
  s = Send(*server, 1, grad, {1, 2, 3, 4});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("the server's var is sparse float32[2, 2]"), std::string::npos)
      << s.ToString();
  auto got = Get(*server, 0, grad);
  EXPECT_EQ(got.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(got.status().message().find("cannot be fetched"), std::string::npos)
      << got.status().ToString();
  ExpectFloats(Get(*server, 0, "w.block0"), {0.70703125f, 0.70703125f, 0.5f, 0.3f},
               "after the refusals");
  ASSERT_TRUE(server->OnComplete(0).ok());
  ASSERT_TRUE(server->OnComplete(1).ok());
  loop.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
}

// A prefetch as the transport makes it: the rows are copied out, then released.
StatusOr<std::vector<float>> Prefetch(PsServer& s, int32_t trainer, const std::string& name,
                                      const std::vector<int64_t>& ids) {
  FleetTensor out{};
  void* token = nullptr;
  FLEET_RETURN_IF_ERROR(s.OnPrefetch(trainer, name, ids.data(),
                                     static_cast<int64_t>(ids.size()), out, &token));
  EXPECT_EQ(out.ndim, 2);
  EXPECT_EQ(out.dims[0], static_cast<int64_t>(ids.size()));
  const float* p = static_cast<const float*>(out.data);
  std::vector<float> values(p, p + ids.size() * static_cast<size_t>(out.dims[1]));
  s.OnGetDone(token);
  return values;
}

// The rows of a table block, in the order asked (repeats too), as the updates left them; a var
// that is not a table, a row outside the block and a reply too large are refused by name.
TEST_F(PsServerTest, PrefetchServesTheRowsAskedFor) {
  auto server = MakeServer(kSparseAsyncServer, milliseconds(10000));
  ASSERT_NE(server, nullptr);
  Status served;
  std::thread loop([&] { served = server->Serve(); });
  ExpectFloats(Prefetch(*server, 0, "w.block0", {1, 0, 1}), {1, 1, 1, 1, 1, 1}, "initial");
  ASSERT_TRUE(SendRows(*server, 0, "w@GRAD.block0", {1}, {4, 6}).ok());
  ExpectFloats(Prefetch(*server, 1, "w.block0", {1, 0, 1}), {0.6f, 0.4f, 1, 1, 0.6f, 0.4f},
               "after row 1's update");
  ExpectFloats(Prefetch(*server, 1, "w.block0", {}), {}, "no ids");
  for (const char* name : {"nope", "w@GRAD.block0", "learning_rate_0"}) {
    auto got = Prefetch(*server, 0, name, {0});
    EXPECT_EQ(got.status().code(), Code::kNotFound) << name;
    EXPECT_NE(got.status().message().find("trainer 0 asked for rows of '" + std::string(name) +
                                          "', which is not a table this server holds"),
              std::string::npos)
        << got.status().ToString();
  }
  // The read-only view exists for growable tables only.
  auto view = Prefetch(*server, 0, "w.block0@READ", {0});
  EXPECT_EQ(view.status().code(), Code::kNotFound);
  EXPECT_NE(view.status().message().find("trainer 0 asked to read rows of 'w.block0', which is "
                                         "not a growable table this server holds"),
            std::string::npos)
      << view.status().ToString();
  for (int64_t bad : {int64_t{2}, int64_t{-1}, int64_t{1} << 62}) {
    auto got = Prefetch(*server, 1, "w.block0", {0, bad});
    EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
    EXPECT_NE(got.status().message().find("trainer 1 asked for row " + std::to_string(bad) +
                                          " of 'w.block0', which holds 2 rows (id 1 of the "
                                          "request)"),
              std::string::npos)
        << got.status().ToString();
  }
  FleetTensor out{};
  void* token = nullptr;
  const int64_t one = 0;
  Status huge = server->OnPrefetch(0, "w.block0", &one, int64_t{1} << 40, out, &token);
  EXPECT_EQ(huge.code(), Code::kResourceExhausted);
  EXPECT_NE(huge.message().find("more than 1024 MiB in one reply"), std::string::npos)
      << huge.ToString();
  ASSERT_TRUE(server->OnComplete(0).ok());
  ASSERT_TRUE(server->OnComplete(1).ok());
  loop.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
}

// Sync: the round sums both trainers' entries (one of them growing its receive var) and scales
// them by 1/2: row 0 -= 0.1 * 2 / 2, row 1 -= 0.1 * (2000 / 1024 + 2) / 2.
TEST_F(PsServerTest, SparseSyncRoundAveragesTheTrainersEntries) {
  auto server = MakeServer(kSparseSyncServer, milliseconds(10000));
  ASSERT_NE(server, nullptr);
  Status served;
  std::thread loop([&] { served = server->Serve(); });
  auto trainer = [&](int32_t t, std::vector<int64_t> rows, std::vector<float> values) {
    ExpectFloats(Get(*server, t, "w.block0"), {1, 1, 1, 1}, "startup");
    ASSERT_TRUE(server->OnBarrier(t, FLEET_BARRIER_FETCH).ok());
    const std::string grad = "w@GRAD.block0.trainer_" + std::to_string(t);
    ASSERT_TRUE(SendRows(*server, t, grad, std::move(rows), std::move(values)).ok());
    ASSERT_TRUE(server->OnBarrier(t, FLEET_BARRIER_BATCH).ok());
    ExpectFloats(Get(*server, t, "w.block0"), {0.9f, 0.9f, 0.80234375f, 0.80234375f},
                 "trainer " + std::to_string(t));
    ASSERT_TRUE(server->OnBarrier(t, FLEET_BARRIER_FETCH).ok());
    ASSERT_TRUE(server->OnComplete(t).ok());
  };
  std::vector<int64_t> many(2000, 1);
  many.push_back(1);
  std::vector<float> small(4000, 1.0f / 1024);
  small.insert(small.end(), {2, 2});
  std::thread t0(trainer, 0, std::vector<int64_t>{0}, std::vector<float>{2, 2});
  std::thread t1(trainer, 1, many, small);
  t0.join();
  t1.join();
  loop.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
}

TEST_F(PsServerTest, AProgramWithoutListenAndServIsRefused) {
  auto pserver = ir::ParseProgram("program { block 0 { var x : float32[1] persistable } }", "p");
  auto startup = ir::ParseProgram(kStartup, "s");
  ASSERT_TRUE(pserver.ok() && startup.ok());
  auto server = PsServer::Create(*registry_, "cpu", *pserver, *startup, {});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("exactly one listen_and_serv"), std::string::npos)
      << server.status().ToString();
}

}  // namespace
}  // namespace fleet
