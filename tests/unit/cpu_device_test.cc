// The cpu plugin's device, driven through the loader and the host's Device wrapper exactly as
// the host drives it.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fleet/fleet_plugin.h"
#include "plugin/device.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

class CpuDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    auto loaded = registry_->Load("cpu");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    component_ = registry_->Find(FLEET_COMPONENT_DEVICE, "cpu");
    ASSERT_NE(component_, nullptr);
  }

  std::unique_ptr<PluginRegistry> registry_;
  const ComponentRecord* component_ = nullptr;
};

TEST_F(CpuDeviceTest, OneDeviceWithHostMemory) {
  Device device(component_);
  auto count = device.Count();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 1);
  auto props = device.Props(0);
  ASSERT_TRUE(props.ok()) << props.status().ToString();
  EXPECT_FALSE(props->model.empty());
  EXPECT_EQ(props->alignment, 64u);
  EXPECT_GT(props->total_memory, 0u);
  EXPECT_TRUE(props->caps & FLEET_DEVICE_CAP_HOST_MEMORY);
  EXPECT_GE(device.type_id(), 1);
}

TEST_F(CpuDeviceTest, AllocCopyFreeRoundTrip) {
  Device device(component_);
  std::vector<float> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f;
  size_t bytes = src.size() * sizeof(float);
  auto buffer = device.Alloc(0, bytes);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*buffer) % 64, 0u);
  ASSERT_TRUE(device.CopyToDevice(0, *buffer, src.data(), bytes).ok());
  std::vector<float> back(src.size(), -1.0f);
  ASSERT_TRUE(device.CopyToHost(0, back.data(), *buffer, bytes).ok());
  EXPECT_EQ(back, src);
  EXPECT_TRUE(device.Synchronize(0).ok());
  EXPECT_TRUE(device.Free(0, *buffer).ok());
}

TEST_F(CpuDeviceTest, BadOrdinalIsAnErrorNotACrash) {
  Device device(component_);
  auto buffer = device.Alloc(3, 16);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), Code::kOutOfRange);
  EXPECT_NE(buffer.status().message().find("device 'cpu' (plugin 'cpu'): alloc: cpu device "
                                           "ordinal 3 does not exist"),
            std::string::npos)
      << buffer.status().message();
}

TEST_F(CpuDeviceTest, OptionalSlotsArePresentInTheHostCopy) {
  const FleetDeviceVTable* t = component_->table<FleetDeviceVTable>();
  EXPECT_TRUE(FLEET_CAN_CALL(t, FleetDeviceVTable, host_alloc));
  EXPECT_FALSE(FLEET_CAN_CALL(t, FleetDeviceVTable, stream_native));
}

}  // namespace
}  // namespace fleet
