// Communicator placement and staging through host memory, on the "encoded" fixture device
// (fixtures/encoded_device.cc), whose memory is only readable through its own copies: a
// collective that handed its pointers to Gloo without staging would reduce encoded bytes and
// get the sums wrong, so these tests fail unless every byte really goes out and comes back.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective/communicator.h"
#include "rendezvous/memory_store.h"
#include "executor/executor.h"
#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "plugin/device.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

class CommStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR, FLEET_UNIT_FIXTURE_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    for (const char* p : {"cpu", "comm_gloo", "encoded_device"}) {
      auto loaded = registry_->Load(p);
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    }
    gloo_ = registry_->Find(FLEET_COMPONENT_COMMUNICATOR, "gloo");
    encoded_comm_ = registry_->Find(FLEET_COMPONENT_COMMUNICATOR, "encoded_comm");
    encoded_ = registry_->Find(FLEET_COMPONENT_DEVICE, "encoded");
    ASSERT_NE(gloo_, nullptr);
    ASSERT_NE(encoded_comm_, nullptr);
    ASSERT_NE(encoded_, nullptr);
  }

  std::unique_ptr<PluginRegistry> registry_;
  const ComponentRecord* gloo_ = nullptr;
  const ComponentRecord* encoded_comm_ = nullptr;
  const ComponentRecord* encoded_ = nullptr;
};

TEST_F(CommStagingTest, PlacementFollowsTheDevicesACommunicatorReduces) {
  auto direct = PlaceCommunicator(*gloo_, "cpu", false, "fleet.toml");
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(*direct, CommPlacement::kDirect);

  auto refused = PlaceCommunicator(*gloo_, "encoded", false, "fleet.toml");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition);
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("fleet.toml: communicator 'gloo'"), std::string::npos) << m;
  EXPECT_NE(m.find("not of device 'encoded'"), std::string::npos) << m;
  EXPECT_NE(m.find("[comm] staging = true"), std::string::npos) << m;

  auto staged = PlaceCommunicator(*gloo_, "encoded", true, "fleet.toml");
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_EQ(*staged, CommPlacement::kStaged);

  // A communicator of device memory only cannot serve host tensors, staging or not.
  auto no_host = PlaceCommunicator(*encoded_comm_, "cpu", true, "fleet.toml");
  ASSERT_FALSE(no_host.ok());
  EXPECT_NE(no_host.status().message().find("cannot stage through host memory"),
            std::string::npos)
      << no_host.status().message();
}

// Device memory of the encoded device holding `values`.
struct DeviceVec {
  Device device;
  void* data = nullptr;
  int64_t n = 0;
  FleetTensor t{};

  DeviceVec(const ComponentRecord* rec, const std::vector<float>& values) : device(rec) {
    n = static_cast<int64_t>(values.size());
    data = *device.Alloc(0, values.size() * sizeof(float));
    EXPECT_TRUE(device.CopyToDevice(0, data, values.data(), values.size() * sizeof(float)).ok());
    t.struct_size = sizeof(FleetTensor);
    t.data = data;
    t.dtype = FLEET_DTYPE_FLOAT32;
    t.ndim = 1;
    t.dims = &n;
    t.device_type = rec->device_type_id;
  }
  ~DeviceVec() { (void)device.Free(0, data); }
  std::vector<float> Read() {
    std::vector<float> out(static_cast<size_t>(n));
    EXPECT_TRUE(device.CopyToHost(0, out.data(), data, out.size() * sizeof(float)).ok());
    return out;
  }
};

TEST_F(CommStagingTest, GlooReducesAnotherDevicesTensorsThroughHostMemory) {
  constexpr int kRanks = 2;
  MemoryStore store;
  std::vector<std::string> failures(kRanks);
  auto rank_main = [&](int rank) {
    CommunicatorOptions o;
    o.rank = rank;
    o.world_size = kRanks;
    o.timeout = std::chrono::milliseconds(30000);
    o.device = "encoded";
    o.device_component = encoded_;
    o.staging = true;
    o.options = {{"hostname", "127.0.0.1"}};
    auto comm = Communicator::Create(*gloo_, &store, "staging", o);
    if (!comm.ok()) {
      failures[rank] = comm.status().ToString();
      return;
    }
    EXPECT_EQ((*comm)->placement(), CommPlacement::kStaged);
    const float r = static_cast<float>(rank);
    // Out of place and in place all-reduce.
    DeviceVec in(encoded_, {1 + r, 2 + r, 3 + r}), out(encoded_, {0, 0, 0});
    Status s = (*comm)->AllReduce(in.t, out.t, FLEET_REDUCE_SUM);
    if (s.ok()) s = (*comm)->AllReduce(in.t, in.t, FLEET_REDUCE_MAX);
    // Broadcast from rank 1, all-gather and reduce-scatter.
    DeviceVec b(encoded_, {10 * (r + 1), 20 * (r + 1)});
    if (s.ok()) s = (*comm)->Broadcast(b.t, 1);
    DeviceVec g_in(encoded_, {r, r + 0.5f}), g_out(encoded_, {0, 0, 0, 0});
    if (s.ok()) s = (*comm)->AllGather(g_in.t, g_out.t);
    DeviceVec rs_in(encoded_, {1 + r, 2 + r, 3 + r, 4 + r}), rs_out(encoded_, {0, 0});
    if (s.ok()) s = (*comm)->ReduceScatter(rs_in.t, rs_out.t, FLEET_REDUCE_SUM);
    if (!s.ok()) {
      failures[rank] = s.ToString();
      return;
    }
    EXPECT_EQ(out.Read(), (std::vector<float>{3, 5, 7}));
    EXPECT_EQ(in.Read(), (std::vector<float>{2, 3, 4}));
    EXPECT_EQ(b.Read(), (std::vector<float>{20, 40}));
    EXPECT_EQ(g_out.Read(), (std::vector<float>{0, 0.5f, 1, 1.5f}));
    EXPECT_EQ(rs_out.Read(), rank == 0 ? (std::vector<float>{3, 5}) : (std::vector<float>{7, 9}));
    // Host figures (metrics) still go straight to Gloo.
    double figure = 1.5 + rank;
    Status h = (*comm)->AllReduceHost(&figure, FLEET_DTYPE_FLOAT64, 1, FLEET_REDUCE_SUM);
    EXPECT_TRUE(h.ok()) << h.ToString();
    EXPECT_EQ(figure, 4.0);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST_F(CommStagingTest, WithoutStagingTheCommunicatorIsRefused) {
  MemoryStore store;
  CommunicatorOptions o;
  o.device = "encoded";
  o.device_component = encoded_;
  auto comm = Communicator::Create(*gloo_, &store, "refused", o);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), Code::kFailedPrecondition);
}

TEST_F(CommStagingTest, HostFiguresReachADeviceOnlyCommunicatorThroughDeviceMemory) {
  MemoryStore store;
  CommunicatorOptions o;
  o.device = "encoded";
  o.device_component = encoded_;
  auto comm = Communicator::Create(*encoded_comm_, &store, "device_only", o);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  EXPECT_EQ((*comm)->placement(), CommPlacement::kDirect);
  // encoded_comm refuses host tensors, so this succeeds only through a device buffer, and the
  // values survive only if they went in and came out through the device's own copies.
  std::vector<int64_t> figures = {7, -3, 1 << 20};
  Status s = (*comm)->AllReduceHost(figures.data(), FLEET_DTYPE_INT64, 3, FLEET_REDUCE_SUM);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(figures, (std::vector<int64_t>{7, -3, 1 << 20}));
}

// The executor's stream path (page-locked feeds and fetches, one wait per step) on a device
// without host memory: what is fed comes back fetched, step after step, and the scope's values
// round-trip through the device's copies.
TEST_F(CommStagingTest, ExecutorFeedsAndFetchesThroughTheStream) {
  auto program = ir::ParseProgram(R"(program {
  block 0 {
    var x : float32[-1, 3]
  }
})",
                                  "feed_fetch");
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto executor = exec::Executor::Create(*registry_, "encoded");
  ASSERT_TRUE(executor.ok()) << executor.status().ToString();
  ASSERT_NE((*executor)->stream(), nullptr);
  std::vector<exec::HostTensor> fetched;
  for (int step = 0; step < 3; ++step) {
    exec::HostTensor x;
    x.Reshape(ir::DataType::kFloat32, {2, 3});
    auto* v = reinterpret_cast<float*>(x.bytes.data());
    for (int i = 0; i < 6; ++i) v[i] = static_cast<float>(step * 10 + i);
    exec::FeedMap feeds;
    feeds["x"] = x;
    Status s = (*executor)->Run(*program, feeds, {"x"}, fetched);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(fetched.size(), 1u);
    EXPECT_EQ(fetched[0].bytes, x.bytes) << "step " << step;
  }
  exec::HostTensor w;
  w.Reshape(ir::DataType::kInt64, {2});
  reinterpret_cast<int64_t*>(w.bytes.data())[0] = 42;
  reinterpret_cast<int64_t*>(w.bytes.data())[1] = -1;
  ASSERT_TRUE((*executor)->scope().Write("w", w).ok());
  auto back = (*executor)->scope().Read("w");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->bytes, w.bytes);
}

}  // namespace
}  // namespace fleet
