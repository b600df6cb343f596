// Kernel choice (ChooseKernel): candidates are tried by priority, a kernel whose `supports`
// refuses is passed over, and when every candidate refuses the error lists each refusal.
#include <gtest/gtest.h>

#include "fleet/fleet_plugin.h"
#include "plugin/kernel.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

class KernelChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.search_dirs = {FLEET_UNIT_FIXTURE_DIR, FLEET_BUILD_PLUGIN_DIR};
    registry_ = std::make_unique<PluginRegistry>(options);
    for (const char* name : {"cpu", "picky_kernels"}) {
      auto loaded = registry_->Load(name);
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    }
  }

  KernelCallArgs ScaleArgs(ir::DataType dtype) const {
    KernelCallArgs args;
    args.op_type = "scale";
    args.inputs = {{"X", {{dtype, {2, 3}}}}};
    args.outputs = {{"Out", {{dtype, {2, 3}}}}};
    args.attrs = {{"scale", 2.0f}, {"bias", 0.0f}, {"bias_after_scale", true}};
    args.device_type = registry_->Find(FLEET_COMPONENT_DEVICE, "cpu")->device_type_id;
    return args;
  }

  std::unique_ptr<PluginRegistry> registry_;
};

TEST_F(KernelChoiceTest, CandidatesComeByPriority) {
  std::vector<KernelCandidate> c =
      FindKernels(*registry_, "scale", "cpu", ir::DataType::kFloat32);
  // The two stubs by priority, then the cpu plugin's dense scale and its sparse one.
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].def->priority, 20);
  EXPECT_EQ(c[1].def->priority, 10);
  EXPECT_EQ(c[2].component->plugin, "cpu");
  EXPECT_FALSE(TakesSelectedRows(*c[2].def));
  EXPECT_EQ(c[3].component->plugin, "cpu");
  EXPECT_TRUE(TakesSelectedRows(*c[3].def));
}

TEST_F(KernelChoiceTest, RefusingKernelsArePassedOver) {
  auto chosen = ChooseKernel(*registry_, "cpu", ir::DataType::kFloat32,
                             ScaleArgs(ir::DataType::kFloat32));
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ((*chosen)->kernel().component->plugin, "cpu");
}

TEST_F(KernelChoiceTest, EveryRefusalIsReported) {
  auto chosen = ChooseKernel(*registry_, "cpu", ir::DataType::kFloat16,
                             ScaleArgs(ir::DataType::kFloat16));
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), Code::kNotFound);
  const std::string& m = chosen.status().message();
  EXPECT_NE(m.find("every kernel for op 'scale' on device 'cpu' with dtype float16 refused it"),
            std::string::npos)
      << m;
  // Highest priority first.
  const size_t high = m.find("picky high: not this shape");
  const size_t low = m.find("picky low: not these attributes");
  ASSERT_NE(high, std::string::npos) << m;
  ASSERT_NE(low, std::string::npos) << m;
  EXPECT_LT(high, low) << m;
}

TEST_F(KernelChoiceTest, NoKernelNamesOpDeviceAndDtype) {
  auto chosen = ChooseKernel(*registry_, "cpu", ir::DataType::kInt8,
                             ScaleArgs(ir::DataType::kInt8));
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(chosen.status().message().find(
                "no kernel for op 'scale' on device 'cpu' with dtype int8"),
            std::string::npos)
      << chosen.status().message();
}

}  // namespace
}  // namespace fleet
