// The trainer's RPC kernels end to end in one process: two trainers, each an executor running
// hand-written trainer programs (text IR) whose send/recv/barrier kernels come from a
// PsTrainerRuntime, talking to two PsServers through an in-process transport component that
// calls the servers' handlers directly. Parameters are checked against hand computations.
#include "pserver/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pserver/server.h"
#include "executor/executor.h"
#include "fleet/fleet_plugin.h"
#include "fleet/fleet_transport.h"
#include "ir/text.h"
#include "plugin/host_api.h"

// The opaque handles of the in-process transport.
struct FleetTransportServer {
  std::string endpoint;
  FleetTransportHandlers handlers;
};
struct FleetTransportClient {
  std::string endpoint;
  int32_t trainer_id;
};

namespace fleet {
namespace {

using std::chrono::milliseconds;

// Servers by endpoint: a client call runs the server's handler on the caller's thread.
std::mutex g_net_mu;
std::map<std::string, FleetTransportServer*> g_net;

FleetStatus* Unreachable(const std::string& endpoint) {
  return MakeFleetStatus(Unavailable("nothing serves " + endpoint));
}

FleetTransportServer* Lookup(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(g_net_mu);
  auto it = g_net.find(endpoint);
  return it == g_net.end() ? nullptr : it->second;
}

FleetStatus* ServerStart(void*, const FleetTransportServerConfig* config,
                         FleetTransportServer** out) {
  auto* s = new FleetTransportServer{config->endpoint, *config->handlers};
  std::lock_guard<std::mutex> lock(g_net_mu);
  g_net[s->endpoint] = s;
  *out = s;
  return nullptr;
}
const char* ServerEndpoint(void*, FleetTransportServer* s) { return s->endpoint.c_str(); }
void ServerStop(void*, FleetTransportServer* s) {
  std::lock_guard<std::mutex> lock(g_net_mu);
  g_net.erase(s->endpoint);
}
FleetStatus* ServerDestroy(void*, FleetTransportServer* s) {
  delete s;
  return nullptr;
}
FleetStatus* ClientConnect(void*, const FleetTransportClientConfig* config,
                           FleetTransportClient** out) {
  *out = new FleetTransportClient{config->endpoint, config->trainer_id};
  return nullptr;
}
FleetStatus* ClientSend(void*, FleetTransportClient* c, const char* name, const FleetTensor* t,
                        int64_t) {
  FleetTransportServer* s = Lookup(c->endpoint);
  if (s == nullptr) return Unreachable(c->endpoint);
  return s->handlers.on_send(s->handlers.ctx, c->trainer_id, name, t);
}
// The server's view (of a get or a prefetch) copied into what `alloc` gives, then released.
FleetStatus* CopyOut(FleetTransportServer* s, const FleetTensor& view, void* token,
                     FleetTensorAllocFn alloc, void* alloc_ctx, FleetTensor* out) {
  FleetStatus* e = alloc(alloc_ctx, view.dtype, view.ndim, view.dims, out);
  if (e == nullptr) {
    size_t bytes = ir::DataTypeSize(static_cast<ir::DataType>(view.dtype));
    for (int32_t d = 0; d < view.ndim; ++d) bytes *= static_cast<size_t>(view.dims[d]);
    if (bytes != 0) std::memcpy(out->data, view.data, bytes);
  }
  s->handlers.on_get_done(s->handlers.ctx, token);
  return e;
}
FleetStatus* ClientGet(void*, FleetTransportClient* c, const char* name, FleetTensorAllocFn alloc,
                       void* alloc_ctx, FleetTensor* out, int64_t) {
  FleetTransportServer* s = Lookup(c->endpoint);
  if (s == nullptr) return Unreachable(c->endpoint);
  FleetTensor view{};
  void* token = nullptr;
  if (FleetStatus* e = s->handlers.on_get(s->handlers.ctx, c->trainer_id, name, &view, &token)) {
    return e;
  }
  return CopyOut(s, view, token, alloc, alloc_ctx, out);
}
FleetStatus* ClientPrefetch(void*, FleetTransportClient* c, const char* name, const int64_t* ids,
                           int64_t num_ids, FleetTensorAllocFn alloc, void* alloc_ctx,
                           FleetTensor* out, int64_t) {
  FleetTransportServer* s = Lookup(c->endpoint);
  if (s == nullptr) return Unreachable(c->endpoint);
  FleetTensor view{};
  void* token = nullptr;
  if (FleetStatus* e = s->handlers.on_prefetch(s->handlers.ctx, c->trainer_id, name, ids,
                                               num_ids, &view, &token)) {
    return e;
  }
  return CopyOut(s, view, token, alloc, alloc_ctx, out);
}
FleetStatus* ClientBarrier(void*, FleetTransportClient* c, int32_t kind, int64_t) {
  FleetTransportServer* s = Lookup(c->endpoint);
  if (s == nullptr) return Unreachable(c->endpoint);
  return s->handlers.on_barrier(s->handlers.ctx, c->trainer_id, kind);
}
FleetStatus* ClientComplete(void*, FleetTransportClient* c, int64_t) {
  FleetTransportServer* s = Lookup(c->endpoint);
  if (s == nullptr) return Unreachable(c->endpoint);
  return s->handlers.on_complete(s->handlers.ctx, c->trainer_id);
}
void ClientClose(void*, FleetTransportClient* c) { delete c; }

ComponentRecord LoopbackTransport() {
  FleetTransportVTable t{};
  t.struct_size = sizeof(t);
  t.server_start = ServerStart;
  t.server_endpoint = ServerEndpoint;
  t.server_stop = ServerStop;
  t.server_destroy = ServerDestroy;
  t.client_connect = ClientConnect;
  t.client_send = ClientSend;
  t.client_get = ClientGet;
  t.client_prefetch = ClientPrefetch;
  t.client_barrier = ClientBarrier;
  t.client_complete = ClientComplete;
  t.client_close = ClientClose;
  ComponentRecord r;
  r.kind = FLEET_COMPONENT_TRANSPORT;
  r.name = "loopback";
  r.plugin = "test";
  r.vtable_size = sizeof(t);
  r.vtable_copy.resize((sizeof(t) + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
  std::memcpy(r.vtable_copy.data(), &t, sizeof(t));
  return r;
}

const std::string kS0 = "127.0.0.1:7100";
const std::string kS1 = "127.0.0.1:7101";

std::string Fill(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    for (size_t at; (at = text.find(key)) != std::string::npos;) {
      text.replace(at, key.size(), value);
    }
  }
  return text;
}

// Server S of 2 holds block S (rows 2S, 2S+1) of the 4x2 parameter w; lr 0.1, w starts at 1.
const char* kServer = R"(
program {
  block 0 {
    var learning_rate_0 : float32[1] persistable
    var w.blockS : float32[2, 2] persistable
    var w@GRAD.blockS : float32[2, 2] persistable
    var w@GRAD.blockS.trainer_0 : float32[2, 2] persistable
    var w@GRAD.blockS.trainer_1 : float32[2, 2] persistable
    op listen_and_serv(X=[w@GRAD.blockS.trainer_0, w@GRAD.blockS.trainer_1]) -> ()
       {endpoint="EP", pserver_id=S, Fanin=2, distributed_mode=0, optimize_blocks=[1],
        grad_to_block_id=["w@GRAD.blockS:1"], lr_decay_block_id=-1,
        sparse_grad_to_param=strings[]}
  }
  block 1 parent 0 {
    op sum(X=[w@GRAD.blockS.trainer_0, w@GRAD.blockS.trainer_1]) -> (Out=[w@GRAD.blockS])
    op scale(X=[w@GRAD.blockS]) -> (Out=[w@GRAD.blockS]) {scale=0.5f}
    op sgd(Param=[w.blockS], Grad=[w@GRAD.blockS], LearningRate=[learning_rate_0])
       -> (ParamOut=[w.blockS])
  }
}
)";

// dtype 9 = FLEET_DTYPE_FLOAT32.
const char* kServerStartup = R"(
program {
  block 0 {
    var learning_rate_0 : float32[1] persistable
    var w : float32[4, 2]
    var w.block0 : float32[2, 2] MINE0
    var w.block1 : float32[2, 2] MINE1
    op fill_constant() -> (Out=[w]) {shape=[4L, 2L], value=1.0f, dtype=9}
    op fill_constant() -> (Out=[learning_rate_0]) {shape=[1L], value=0.1f, dtype=9}
    op split_byref(X=[w]) -> (Out=[w.block0, w.block1]) {sections=[2, 2]}
  }
}
)";

const char* kTrainerStartup = R"(
program {
  block 0 {
    param w : float32[4, 2]
    var w.block0 : float32[ROWS, 2]
    var w.block1 : float32[2, 2]
    op recv(X=[]) -> (Out=[w.block0]) {epmap=["S0"], trainer_id=T}
    op recv(X=[]) -> (Out=[w.block1]) {epmap=["S1"], trainer_id=T}
    op fetch_barrier(X=[]) -> (Out=[]) {endpoints=["S0", "S1"], trainer_id=T}
    op concat(X=[w.block0, w.block1]) -> (Out=[w]) {axis=0}
  }
}
)";

// The gradient is fed, so the step is exactly the RPC part of a transpiled trainer.
const char* kTrainerMain = R"(
program {
  block 0 {
    param w : float32[4, 2]
    var g : float32[4, 2]
    var w@GRAD.block0.trainer_T : float32[2, 2]
    var w@GRAD.block1.trainer_T : float32[2, 2]
    var w.block0 : float32[2, 2]
    var w.block1 : float32[2, 2]
    var __control_var@0 : float32[0]
    var __control_var@1 : float32[0]
    op split_byref(X=[g]) -> (Out=[w@GRAD.block0.trainer_T, w@GRAD.block1.trainer_T])
       {sections=[2, 2]}
    op send(X=[w@GRAD.block0.trainer_T, w@GRAD.block1.trainer_T]) -> (Out=[__control_var@0])
       {epmap=["S0", "S1"], trainer_id=T}
    op send_barrier(X=[__control_var@0]) -> (Out=[__control_var@1])
       {endpoints=["S0", "S1"], trainer_id=T}
    op recv(X=[__control_var@1]) -> (Out=[w.block0, w.block1]) {epmap=["S0", "S1"], trainer_id=T}
    op fetch_barrier(X=[__control_var@1]) -> (Out=[]) {endpoints=["S0", "S1"], trainer_id=T}
    op concat(X=[w.block0, w.block1]) -> (Out=[w]) {axis=0}
  }
}
)";

// GEO-SGD: server S adds each trainer's delta of its block as it arrives.
const char* kGeoServer = R"(
program {
  block 0 {
    var w.blockS : float32[2, 2] persistable
    var w.blockS.delta : float32[2, 2] persistable
    op listen_and_serv(X=[w.blockS.delta]) -> ()
       {endpoint="EP", pserver_id=S, Fanin=2, distributed_mode=3, optimize_blocks=[1],
        grad_to_block_id=["w.blockS.delta:1"], lr_decay_block_id=-1,
        sparse_grad_to_param=strings[]}
  }
  block 1 parent 0 {
    op elementwise_add(X=[w.blockS], Y=[w.blockS.delta]) -> (Out=[w.blockS]) {axis=-1}
  }
}
)";

// A GEO trainer's step: the exchange first, then local training that adds the fed g to w.
const char* kGeoTrainerMain = R"(
program {
  block 0 {
    param w : float32[4, 2]
    var g : float32[4, 2]
    op geo_sgd(X=[w]) -> (Out=[w])
       {k_steps=2L, trainers=2, trainer_id=T, blocks=[2L],
        block_names=["w.block0", "w.block1"], sections=[2L, 2L], epmap=["S0", "S1"]}
    op elementwise_add(X=[w], Y=[g]) -> (Out=[w]) {axis=-1}
  }
}
)";

class PsTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    auto loaded = registry_->Load("cpu");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    transport_ = LoopbackTransport();
  }

  ir::Program Parse(const std::string& text) {
    auto p = ir::ParseProgram(text, "test.ir");
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : ir::Program();
  }

  // Server s (0 or 1) at its endpoint, serving through the loopback transport; `init` replaces
  // w's initializer when given.
  void StartServer(int s, milliseconds timeout, const std::string& init = "",
                   const char* program = kServer) {
    const std::string ep = s == 0 ? kS0 : kS1;
    const std::map<std::string, std::string> keys = {
        {"blockS", "block" + std::to_string(s)},
        {"EP", ep},
        {"pserver_id=S", "pserver_id=" + std::to_string(s)}};
    ir::Program main = Parse(Fill(program, keys));
    std::map<std::string, std::string> startup_keys = {
        {"MINE0", s == 0 ? "persistable" : ""}, {"MINE1", s == 1 ? "persistable" : ""}};
    if (!init.empty()) {
      startup_keys["op fill_constant() -> (Out=[w]) {shape=[4L, 2L], value=1.0f, dtype=9}"] = init;
    }
    ir::Program startup = Parse(Fill(kServerStartup, startup_keys));
    PsServerOptions options;
    options.timeout = timeout;
    auto server = PsServer::Create(*registry_, "cpu", main, startup, options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    auto ts = TransportServer::Start(transport_, ep, server->get(), {});
    ASSERT_TRUE(ts.ok()) << ts.status().ToString();
    servers_.push_back(std::move(*server));
    transport_servers_.push_back(std::move(*ts));
  }

  ir::Program TrainerProgram(const char* text, int32_t t, int64_t rows = 2) {
    ir::Program p = Parse(Fill(text, {{"S0", kS0},
                                      {"S1", kS1},
                                      {"trainer_T", "trainer_" + std::to_string(t)},
                                      {"trainer_id=T", "trainer_id=" + std::to_string(t)},
                                      {"ROWS", std::to_string(rows)}}));
    return p;
  }

  std::unique_ptr<PluginRegistry> registry_;
  ComponentRecord transport_;
  std::vector<std::unique_ptr<PsServer>> servers_;
  std::vector<std::unique_ptr<TransportServer>> transport_servers_;
};

exec::HostTensor Tensor(std::vector<float> values) {
  exec::HostTensor t;
  t.Reshape(ir::DataType::kFloat32, {4, 2});
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

TEST_F(PsTrainerTest, TwoTrainersTwoServersAverageEveryStep) {
  for (int s : {0, 1}) StartServer(s, milliseconds(10000));
  ASSERT_EQ(servers_.size(), 2u);
  std::vector<Status> served(2);
  std::vector<std::thread> loops;
  for (int s : {0, 1}) loops.emplace_back([&, s] { served[s] = servers_[s]->Serve(); });

  // By hand: w = 1, lr = 0.1.
  //   step 1: g0 = 1..8, g1 = 8..1: the mean is 4.5 everywhere -> w = 0.55
  //   step 2: g0 = 2, g1 = 0 -> mean 1 -> w = 0.45
  const std::vector<std::vector<std::vector<float>>> grads = {
      {{1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2, 2, 2, 2, 2, 2}},
      {{8, 7, 6, 5, 4, 3, 2, 1}, {0, 0, 0, 0, 0, 0, 0, 0}}};
  const std::vector<float> want = {0.55f, 0.45f};
  std::vector<Status> trained(2);
  auto trainer = [&](int32_t t) -> Status {
    PsTrainerRuntime runtime(transport_, {kS0, kS1}, t, {});
    exec::ExecutorOptions eo;
    eo.host_kernels = &runtime;
    FLEET_ASSIGN_OR_RETURN(auto executor, exec::Executor::Create(*registry_, "cpu", eo));
    ir::Program startup = TrainerProgram(kTrainerStartup, t);
    ir::Program main = TrainerProgram(kTrainerMain, t);
    std::vector<exec::HostTensor> fetched;
    FLEET_RETURN_IF_ERROR(executor->Run(startup, {}, {"w"}, fetched));
    for (int i = 0; i < 8; ++i) {
      if (fetched[0].data<float>()[i] != 1.0f) return Internal("startup did not fetch w = 1");
    }
    for (size_t step = 0; step < want.size(); ++step) {
      exec::FeedMap feeds;
      feeds["g"] = Tensor(grads[static_cast<size_t>(t)][step]);
      FLEET_RETURN_IF_ERROR(executor->Run(main, feeds, {"w"}, fetched));
      for (int i = 0; i < 8; ++i) {
        const float got = fetched[0].data<float>()[i];
        if (std::abs(got - want[step]) > 1e-6f) {
          return Internal("trainer " + std::to_string(t) + " step " + std::to_string(step + 1) +
                          ": w[" + std::to_string(i) + "] = " + std::to_string(got) +
                          ", want " + std::to_string(want[step]));
        }
      }
    }
    return runtime.Complete();
  };
  std::thread t0([&] { trained[0] = trainer(0); });
  std::thread t1([&] { trained[1] = trainer(1); });
  t0.join();
  t1.join();
  for (auto& l : loops) l.join();
  EXPECT_TRUE(trained[0].ok()) << trained[0].ToString();
  EXPECT_TRUE(trained[1].ok()) << trained[1].ToString();
  EXPECT_TRUE(served[0].ok()) << served[0].ToString();
  EXPECT_TRUE(served[1].ok()) << served[1].ToString();
  EXPECT_EQ(servers_[0]->rounds(), 2);
}

// GEO-SGD by hand, w = 1 on both servers (one 2-row block each), two trainers, k_steps 2. Each
// step exchanges first (launches 0: remember w; 2: exchange), then adds g to w.
//   trainer 0, g = 0.4: steps 1 and 2 -> w = 1.8; step 3 exchanges: delta (1.8 - 1) / 2 = 0.4,
//     the servers hold 1.4; w += 1.4 - (1 + 0.4) -> 1.8; then + 0.4 -> 2.2.
//   trainer 1, g = -0.2: steps 1 and 2 -> w = 0.6; step 3: delta (0.6 - 1) / 2 = -0.2, the
//     servers hold 1.2; w += 1.2 - (1 - 0.2) -> 1.0; then - 0.2 -> 0.8.
TEST_F(PsTrainerTest, GeoSgdExchangesEachBlocksChangeEveryKSteps) {
  for (int s : {0, 1}) StartServer(s, milliseconds(10000), "", kGeoServer);
  ASSERT_EQ(servers_.size(), 2u);
  std::vector<Status> served(2);
  std::vector<std::thread> loops;
  for (int s : {0, 1}) loops.emplace_back([&, s] { served[s] = servers_[s]->Serve(); });
  struct Trainer {
    std::unique_ptr<PsTrainerRuntime> runtime;
    std::unique_ptr<exec::Executor> executor;
    ir::Program main;
  };
  std::vector<Trainer> trainers;
  for (int32_t t : {0, 1}) {
    Trainer tr;
    tr.runtime = std::make_unique<PsTrainerRuntime>(transport_, std::vector<std::string>{kS0, kS1},
                                                    t, TransportOptions{});
    exec::ExecutorOptions eo;
    eo.host_kernels = tr.runtime.get();
    auto executor = exec::Executor::Create(*registry_, "cpu", eo);
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    tr.executor = std::move(*executor);
    std::vector<exec::HostTensor> none;
    Status s = tr.executor->Run(TrainerProgram(kTrainerStartup, t), {}, {}, none);
    ASSERT_TRUE(s.ok()) << s.ToString();
    tr.main = TrainerProgram(kGeoTrainerMain, t);
    trainers.push_back(std::move(tr));
  }
  const float g[2] = {0.4f, -0.2f};
  const float want[2][3] = {{1.4f, 1.8f, 2.2f}, {0.8f, 0.6f, 0.8f}};
  for (int t : {0, 1}) {
    for (int step = 0; step < 3; ++step) {
      exec::FeedMap feeds;
      feeds["g"] = Tensor(std::vector<float>(8, g[t]));
      std::vector<exec::HostTensor> fetched;
      Status s = trainers[static_cast<size_t>(t)].executor->Run(trainers[static_cast<size_t>(t)].main,
                                                                 feeds, {"w"}, fetched);
      ASSERT_TRUE(s.ok()) << s.ToString();
      for (int i = 0; i < 8; ++i) {
        EXPECT_NEAR(fetched[0].data<float>()[i], want[t][step], 1e-6)
            << "trainer " << t << " step " << step + 1 << " w[" << i << "]";
      }
    }
  }
  for (int s : {0, 1}) {
    auto block = servers_[static_cast<size_t>(s)]->Read("w.block" + std::to_string(s));
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(block->data<float>()[i], 1.2f, 1e-6) << "server " << s;
  }
  for (Trainer& tr : trainers) EXPECT_TRUE(tr.runtime->Complete().ok());
  for (auto& l : loops) l.join();
  EXPECT_TRUE(served[0].ok()) << served[0].ToString();
  EXPECT_TRUE(served[1].ok()) << served[1].ToString();
}

TEST_F(PsTrainerTest, ARecvIntoAVarOfAnotherShapeNamesBoth) {
  StartServer(0, milliseconds(2000));
  StartServer(1, milliseconds(2000));
  PsTrainerRuntime runtime(transport_, {kS0, kS1}, 0, {});
  exec::ExecutorOptions eo;
  eo.host_kernels = &runtime;
  auto executor = exec::Executor::Create(*registry_, "cpu", eo);
  ASSERT_TRUE(executor.ok());
  // w.block0 declared with 3 rows, which the server's block does not have; concat is left out.
  ir::Program startup = TrainerProgram(kTrainerStartup, 0, 3);
  startup.global().ops.pop_back();
  std::vector<exec::HostTensor> fetched;
  Status s = (*executor)->Run(startup, {}, {}, fetched);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("recv 'w.block0' from pserver 0 (" + kS0 + ")"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("float32[2, 2]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("float32[3, 2]"), std::string::npos) << s.ToString();
}

TEST_F(PsTrainerTest, AServerNobodyServesIsNamed) {
  StartServer(0, milliseconds(2000));  // server 1 never starts
  PsTrainerRuntime runtime(transport_, {kS0, kS1}, 1, {});
  exec::ExecutorOptions eo;
  eo.host_kernels = &runtime;
  auto executor = exec::Executor::Create(*registry_, "cpu", eo);
  ASSERT_TRUE(executor.ok());
  ir::Program startup = TrainerProgram(kTrainerStartup, 1);
  std::vector<exec::HostTensor> fetched;
  Status s = (*executor)->Run(startup, {}, {}, fetched);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("recv 'w.block1' from pserver 1 (" + kS1 + ")"), std::string::npos)
      << s.ToString();
}

// distributed_lookup_table: each output row is the row its id picks from the server holding
// it (rows 0-1 on server 0, 2-3 on server 1; repeats fetched once), padding_idx rows are zero,
// and an id outside the table is refused naming it and the table.
const char* kPrefetchMain = R"(
program {
  block 0 {
    var ids : int64[-1, 1]
    var out : float32[-1, 2]
    op distributed_lookup_table(Ids=[ids]) -> (Outputs=[out])
       {table_names=["w.block0", "w.block1"], height_sections=[2L, 2L], endpoints=["S0", "S1"],
        padding_idx=1L, trainer_id=T, lookup_table_version="lookup_table", emb_dim=2L, dtype=9}
  }
}
)";

TEST_F(PsTrainerTest, DistributedLookupFetchesTheRowsOfItsIds) {
  const std::string init =
      "op uniform_random() -> (Out=[w]) {shape=[4L, 2L], min=-1.0f, max=1.0f, seed=7, dtype=9}";
  StartServer(0, milliseconds(2000), init);
  StartServer(1, milliseconds(2000), init);
  ASSERT_EQ(servers_.size(), 2u);
  std::vector<float> w;  // the whole table, rows 0..3
  for (const char* block : {"w.block0", "w.block1"}) {
    auto b = servers_[block[7] == '0' ? 0 : 1]->Read(block);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    w.insert(w.end(), b->data<float>(), b->data<float>() + 4);
  }
  PsTrainerRuntime runtime(transport_, {kS0, kS1}, 0, {});
  exec::ExecutorOptions eo;
  eo.host_kernels = &runtime;
  auto executor = exec::Executor::Create(*registry_, "cpu", eo);
  ASSERT_TRUE(executor.ok());
  const ir::Program main = TrainerProgram(kPrefetchMain, 0);
  auto lookup = [&](std::vector<int64_t> ids, std::vector<exec::HostTensor>& out) {
    exec::FeedMap feeds;
    feeds["ids"].Reshape(ir::DataType::kInt64, {static_cast<int64_t>(ids.size()), 1});
    std::copy(ids.begin(), ids.end(), feeds["ids"].data<int64_t>());
    return (*executor)->Run(main, feeds, {"out"}, out);
  };
  std::vector<exec::HostTensor> out;
  const std::vector<int64_t> ids = {3, 0, 1, 3, 2};
  Status s = lookup(ids, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(out[0].dims, (std::vector<int64_t>{5, 2}));
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = 0; j < 2; ++j) {
      const float want = ids[i] == 1 ? 0.0f : w[static_cast<size_t>(ids[i]) * 2 + j];
      EXPECT_EQ(out[0].data<float>()[i * 2 + j], want) << "id " << ids[i] << " col " << j;
    }
  }
  for (int64_t bad : {int64_t{4}, int64_t{-5}}) {
    s = lookup({0, bad}, out);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("Ids 0 [1] = " + std::to_string(bad) +
                               " is outside table 'w' of 4 rows"),
              std::string::npos)
        << s.ToString();
  }
}

TEST_F(PsTrainerTest, AProgramForAnotherTrainerIsRefused) {
  PsTrainerRuntime runtime(transport_, {kS0, kS1}, 1, {});
  exec::ExecutorOptions eo;
  eo.host_kernels = &runtime;
  auto executor = exec::Executor::Create(*registry_, "cpu", eo);
  ASSERT_TRUE(executor.ok());
  ir::Program startup = TrainerProgram(kTrainerStartup, 0);
  auto prepared = (*executor)->Prepare(startup, {}, {});
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.status().message().find("trainer_id is 0 but this process is trainer 1"),
            std::string::npos)
      << prepared.status().ToString();
}

}  // namespace
}  // namespace fleet
