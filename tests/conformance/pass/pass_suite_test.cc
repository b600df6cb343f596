// The pass conformance suite: what every transpile pass (FLEET_COMPONENT_PASS) must do, checked
// through the host's own loader and RunPass (host/plugin/pass.h), on the programs of the
// quick-start MLP after the optimizer stage, the programs a pass sees in a real job.
//
// The pass under test is FLEET_CONFORMANCE_PASS (default "fuse_allreduce", a built-in pass); its
// plugin is found in FLEET_PLUGIN_PATH, then in the build's plugin directory. The built-in
// passes are registered too, so they can be checked like plugins.
//
// The contract (fleet_pass.h): declared options are well formed; with its defaults the pass
// either rewrites the programs into ones the host's verifier accepts or refuses the job with a
// status (never a crash); the same programs and options give the same programs; it never keeps
// or frees the host's handles (a misuse shows as a crash or a verifier error here).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "fleet/fleet_plugin.h"
#include "ir/text.h"
#include "job/pipeline.h"
#include "passes/builtin_passes.h"
#include "plugin/pass.h"
#include "plugin/registry.h"
#include "report/report.h"

namespace fleet::conformance::pass {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProgram = R"(# the quick-start MLP
x = data("x", shape=[-1, 32], dtype="float32")
y = data("y", shape=[-1, 1], dtype="int64")
h = fc(x, size=16, act="tanh")
prediction = fc(h, size=2, act="softmax")
avg_cost = mean(cross_entropy(prediction, y))
minimize(avg_cost, optimizer=sgd(learning_rate=0.01))
)";

std::string PassName() {
  const char* p = std::getenv("FLEET_CONFORMANCE_PASS");
  return (p != nullptr && *p != '\0') ? std::string(p) : std::string("fuse_allreduce");
}

struct Suite {
  std::unique_ptr<PluginRegistry> registry;
  const ComponentRecord* pass = nullptr;
  std::string error;
  std::map<std::string, ir::Program> programs;  // the optimized MLP
};

const Suite& TheSuite() {
  static Suite* suite = [] {
    auto* s = new Suite();
    LoadOptions options;
    options.search_dirs = PluginSearchPath(Config{});
    options.search_dirs.emplace_back(FLEET_BUILD_PLUGIN_DIR);
    s->registry = std::make_unique<PluginRegistry>(options);
    if (Status b = RegisterBuiltinPasses(*s->registry); !b.ok()) {
      s->error = b.ToString();
      return s;
    }
    const std::string name = PassName();
    s->pass = s->registry->Find(FLEET_COMPONENT_PASS, name);
    if (s->pass == nullptr) {
      if (!s->registry->Load(name).ok()) s->registry->LoadAll();
      s->pass = s->registry->Find(FLEET_COMPONENT_PASS, name);
    }
    if (s->pass == nullptr) {
      s->error = "no plugin on the search path provides pass '" + name + "'";
      return s;
    }
    char tmpl[] = "/tmp/fleet-pass-suite-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      s->error = "mkdtemp failed";
      return s;
    }
    const fs::path file = fs::path(tmpl) / "mlp.fleet";
    std::ofstream(file) << kProgram;
    auto built = BuildPrograms(file, Stage::kOptimized);
    std::error_code ec;
    fs::remove_all(tmpl, ec);
    if (!built.ok()) {
      s->error = "building the sample programs: " + built.status().ToString();
      return s;
    }
    s->programs = {{"startup", built->startup}, {"main", built->main}};
    return s;
  }();
  return *suite;
}

#define FLEET_PASS_SUITE(suite)                                  \
  const Suite& suite = TheSuite();                               \
  ASSERT_TRUE(suite.error.empty()) << suite.error

std::string Text(const std::map<std::string, ir::Program>& programs) {
  std::string out;
  for (const auto& [name, program] : programs) {
    out += "== " + name + "\n" + ir::PrintProgram(program);
  }
  return out;
}

struct Context {
  std::string label;
  PassContextInfo info;
};

// The jobs a pass may be run for: one trainer, trainer 1 of 2, and trainer 0 of 2 with two
// parameter servers.
std::vector<Context> Contexts() {
  std::vector<Context> out;
  out.push_back({"trainer 0 of 1", {0, 1, "trainer", {}}});
  out.push_back({"trainer 1 of 2", {1, 2, "trainer", {}}});
  out.push_back({"trainer 0 of 2, 2 pservers",
                 {0, 2, "trainer", {"127.0.0.1:6170", "127.0.0.1:6171"}}});
  return out;
}

TEST(PassConformance, DeclaredOptionsAreWellFormed) {
  FLEET_PASS_SUITE(suite);
  auto defaults = PassOptionDefaults(*suite.pass);
  ReportRun(suite.pass->name, "options", defaults.ok() ? kRunOk : kRunError,
            defaults.ok() ? "" : defaults.status().ToString());
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  // The defaults pass the host's own option check unchanged.
  auto resolved = ResolvePassOptions(*suite.pass, *defaults);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(resolved->size(), defaults->size());
}

// With its defaults, in every job context, a pass rewrites the programs into verified ones or
// refuses with a status. A pass made for other programs may refuse them all; the test then
// skips, saying that the rewriting itself was not exercised.
TEST(PassConformance, RunsWithDefaultsOrRefusesCleanly) {
  FLEET_PASS_SUITE(suite);
  auto options = PassOptionDefaults(*suite.pass);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  int accepted = 0;
  std::string refusals;
  for (const Context& c : Contexts()) {
    std::map<std::string, ir::Program> programs = suite.programs;
    Status s = RunPass(*suite.pass, programs, c.info, *options);
    // A job the pass refuses is one it does not provide for (the kit's "not provided").
    ReportRun(suite.pass->name, c.label, s.ok() ? kRunOk : kRunNotProvided,
              s.ok() ? "" : s.ToString());
    if (s.ok()) {
      ++accepted;
    } else {
      // RunPass is transactional: a refused pass leaves the programs as they were.
      EXPECT_EQ(Text(programs), Text(suite.programs)) << c.label;
      EXPECT_FALSE(s.message().empty()) << c.label << ": a refusal must say why";
      refusals += (refusals.empty() ? " " : "; ") + c.label + ": " + s.ToString();
    }
  }
  if (accepted == 0 && !HasFailure()) {
    GTEST_SKIP() << "pass '" << suite.pass->name
                 << "' refused the quick-start programs in every context, so its rewriting was "
                    "not exercised:"
                 << refusals;
  }
}

TEST(PassConformance, SameInputGivesSameOutput) {
  FLEET_PASS_SUITE(suite);
  auto options = PassOptionDefaults(*suite.pass);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  for (const Context& c : Contexts()) {
    std::map<std::string, ir::Program> a = suite.programs, b = suite.programs;
    Status sa = RunPass(*suite.pass, a, c.info, *options);
    Status sb = RunPass(*suite.pass, b, c.info, *options);
    EXPECT_EQ(sa.ToString(), sb.ToString()) << c.label;
    EXPECT_EQ(Text(a), Text(b)) << c.label << ": two runs on the same programs differ";
  }
}

TEST(PassConformance, UnknownOptionIsRefusedBeforeRun) {
  FLEET_PASS_SUITE(suite);
  auto resolved = ResolvePassOptions(*suite.pass, {{"no_such_option_xyz", int32_t{1}}});
  ASSERT_FALSE(resolved.ok());
  EXPECT_NE(resolved.status().message().find("no_such_option_xyz"), std::string::npos)
      << resolved.status().ToString();
}

}  // namespace
}  // namespace fleet::conformance::pass
