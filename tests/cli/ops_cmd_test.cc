// `fleet-host ops`, run as a separate process like every CLI test, checked against the host's op
// registry linked into this test: the listing must be the registry, op for op and slot for slot.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "ops/op_registry.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

Result RunHost(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("fleet_ops_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd = "env -u FLEET_PLUGIN_PATH timeout 60 " FLEET_HOST_EXE " " + args +
                          " >'" + (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream out, err;
  out << std::ifstream(dir / "out").rdbuf();
  err << std::ifstream(dir / "err").rdbuf();
  r.out = out.str();
  r.err = err.str();
  fs::remove_all(dir);
  return r;
}

TEST(CliOpsTest, JsonListsTheRegistryOpForOp) {
  Result r = RunHost("ops --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  const fleet::ops::OpRegistry& registry = fleet::ops::BuiltinOps();
  const std::vector<std::string> types = registry.Types();
  ASSERT_EQ(doc["ops"].size(), types.size());
  std::set<std::string> listed;
  for (size_t i = 0; i < types.size(); ++i) {
    const auto& op = doc["ops"][i];
    ASSERT_EQ(op["type"], types[i]);
    listed.insert(types[i]);
    const fleet::ops::OpSchema* s = registry.Find(types[i]);
    ASSERT_EQ(op["inputs"].size(), s->inputs.size()) << types[i];
    for (size_t k = 0; k < s->inputs.size(); ++k) {
      EXPECT_EQ(op["inputs"][k]["name"], s->inputs[k].name) << types[i];
      EXPECT_EQ(op["inputs"][k]["duplicable"], s->inputs[k].duplicable) << types[i];
    }
    ASSERT_EQ(op["outputs"].size(), s->outputs.size()) << types[i];
    ASSERT_EQ(op["attrs"].size(), s->attrs.size()) << types[i];
    for (size_t k = 0; k < s->attrs.size(); ++k) {
      EXPECT_EQ(op["attrs"][k]["name"], s->attrs[k].name) << types[i];
    }
    EXPECT_EQ(op["grad_ops"].empty(), !s->grad) << types[i];
  }
  // Every grad op a rule emits is itself a listed op, and every device op the CPU plugin runs
  // has a float or integer kernel there.
  for (const auto& op : doc["ops"]) {
    for (const auto& g : op["grad_ops"]) {
      EXPECT_TRUE(listed.count(g.get<std::string>())) << op["type"] << " -> " << g;
    }
  }
  bool relu_seen = false;
  for (const auto& op : doc["ops"]) {
    if (op["type"] != "relu") continue;
    relu_seen = true;
    EXPECT_EQ(op["grad_ops"], nlohmann::json::array({"relu_grad"}));
    EXPECT_EQ(op["kernels"]["cpu"], nlohmann::json::array({"float32", "float64"}));
  }
  EXPECT_TRUE(relu_seen);
}

TEST(CliOpsTest, OneOpShowsItsAttributesAndKernels) {
  Result r = RunHost("ops tril_triu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("diagonal: int32 = 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lower: bool = true"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("grad:     tril_triu_grad"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu: bool float32 float64 int32 int64"), std::string::npos) << r.out;

  Result list = RunHost("ops");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find(std::to_string(fleet::ops::BuiltinOps().Types().size()) + " ops ("),
            std::string::npos)
      << list.out;
}

TEST(CliOpsTest, UnknownOpNamesTheClosestOnes) {
  Result typo = RunHost("ops sofmax");
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_NE(typo.err.find("no op 'sofmax'; did you mean 'softmax'?"), std::string::npos)
      << typo.err;
  Result several = RunHost("ops sequence_pol");
  EXPECT_NE(several.err.find("no op 'sequence_pol'; did you mean 'sequence_pool', 'sequence_pad' "
                             "or 'sequence_mask'?"),
            std::string::npos)
      << several.err;
  Result part = RunHost("ops tril");
  EXPECT_EQ(part.exit_code, 1);
  EXPECT_NE(part.err.find("did you mean 'tril_triu'?"), std::string::npos) << part.err;
  EXPECT_NE(part.err.find("fleet-host ops lists them all"), std::string::npos) << part.err;
  EXPECT_EQ(RunHost("ops --frob").exit_code, 2);
  EXPECT_EQ(RunHost("ops a b").exit_code, 2);
}

}  // namespace
