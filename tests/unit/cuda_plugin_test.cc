// The CUDA plugin on any machine: it loads without a GPU, answers count = 0 there, and offers a
// kernel for every (op, dtype) the CPU plugin does, and a SelectedRows one wherever the CPU has
// one, so a program that prepares on the CPU finds every kernel it needs on the GPU too, sparse
// gradients included. (What the kernels compute is checked on a GPU by the conformance suite's
// cuda.* tests.)
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "fleet/fleet_plugin.h"
#include "plugin/device.h"
#include "plugin/kernel.h"
#include "plugin/registry.h"

namespace fleet {
namespace {

bool CudaBuilt() {
  return std::filesystem::exists(std::filesystem::path(FLEET_BUILD_PLUGIN_DIR) /
                                 "libfleet_cuda.so");
}

// "op/dtype" of every kernel of `device`, and "op/dtype (selected_rows)" where one of them takes
// SelectedRows tensors (the host picks those by their flag).
std::set<std::string> KernelsOf(const PluginRegistry& registry, const std::string& device) {
  std::set<std::string> out;
  const std::string tag = "/" + device + "/";
  for (const std::string& k : ListKernels(registry)) {
    const size_t at = k.find(tag);
    if (at == std::string::npos) continue;
    const std::string op = k.substr(0, at), dtype = k.substr(at + tag.size());
    out.insert(op + "/" + dtype);
    for (const KernelCandidate& c : FindKernels(registry, op, device, ir::ParseDataType(dtype))) {
      if (TakesSelectedRows(*c.def)) out.insert(op + "/" + dtype + " (selected_rows)");
    }
  }
  return out;
}

TEST(CudaPluginTest, OffersEveryKernelTheCpuPluginOffers) {
  if (!CudaBuilt()) GTEST_SKIP() << "built without the CUDA toolkit";
  LoadOptions options;
  options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
  PluginRegistry registry(options);
  for (const char* p : {"cpu", "cuda"}) {
    auto loaded = registry.Load(p);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  }
  const std::set<std::string> cpu = KernelsOf(registry, "cpu");
  const std::set<std::string> cuda = KernelsOf(registry, "cuda");
  ASSERT_GT(cpu.size(), 100u);
  std::string missing, extra;
  for (const std::string& k : cpu) {
    if (cuda.count(k) == 0) missing += " " + k;
  }
  for (const std::string& k : cuda) {
    if (cpu.count(k) == 0) extra += " " + k;
  }
  EXPECT_EQ(missing, "") << "CPU kernels without a CUDA counterpart";
  EXPECT_EQ(extra, "") << "CUDA kernels the CPU plugin lacks (the conformance suite would not "
                          "check them against the CPU's references)";
}

TEST(CudaPluginTest, TheDeviceAnswersWithoutAGpu) {
  if (!CudaBuilt()) GTEST_SKIP() << "built without the CUDA toolkit";
  LoadOptions options;
  options.search_dirs = {FLEET_BUILD_PLUGIN_DIR};
  PluginRegistry registry(options);
  auto loaded = registry.Load("cuda");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const ComponentRecord* rec = registry.Find(FLEET_COMPONENT_DEVICE, "cuda");
  ASSERT_NE(rec, nullptr);
  Device device(rec);
  auto count = device.Count();
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  if (*count > 0) {
    auto props = device.Props(0);
    ASSERT_TRUE(props.ok()) << props.status().ToString();
    EXPECT_EQ(props->caps & FLEET_DEVICE_CAP_HOST_MEMORY, 0u);
    EXPECT_NE(props->model, "");
    return;
  }
  // No GPU: every ordinal is out of range, with the reason, and nothing crashes.
  auto props = device.Props(0);
  ASSERT_FALSE(props.ok());
  EXPECT_EQ(props.status().code(), Code::kOutOfRange) << props.status().ToString();
  auto mem = device.Alloc(0, 256);
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.status().code(), Code::kOutOfRange) << mem.status().ToString();
}

}  // namespace
}  // namespace fleet
