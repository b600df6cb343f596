// The plugin loader against the fixture plugins in tests/abi/fixtures: one plugin per way a
// plugin can be right or wrong. For each, the outcome (loaded or rejected), the status code, and
// that the message names the file and the reason. The key phrases asserted here are the ones
// host/plugin/registry.cc and component_check.cc produce; a reworded message must keep saying
// what went wrong and where.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/fleet_plugin.h"
#include "plugin/device.h"
#include "plugin/registry.h"
#include "support/text.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

const fs::path kFixtureDir = FLEET_FIXTURE_DIR;

fs::path Fixture(const std::string& name) { return kFixtureDir / ("libfleet_" + name + ".so"); }

LoadOptions FixtureOptions() {
  LoadOptions options;
  options.search_dirs = {kFixtureDir};
  return options;
}

// Loads one fixture by path into `registry`.
StatusOr<const PluginRecord*> LoadFixture(PluginRegistry& registry, const std::string& name) {
  return registry.Load(Fixture(name).string());
}

// The single rejection `registry` recorded, checked to be for `name`'s file.
const Rejection& OnlyRejection(const PluginRegistry& registry, const std::string& name) {
  EXPECT_EQ(registry.rejected().size(), 1u);
  const Rejection& r = registry.rejected().front();
  EXPECT_EQ(r.file, Fixture(name));
  EXPECT_EQ(r.plugin, name);
  return r;
}

// Expects `name` to be rejected with `code`; the message must name the file and contain each of
// `phrases`. Also checks that nothing of the plugin stayed behind.
void ExpectRejected(const std::string& name, Code code, const std::vector<std::string>& phrases) {
  SCOPED_TRACE("fixture " + name);
  PluginRegistry registry(FixtureOptions());
  auto loaded = LoadFixture(registry, name);
  ASSERT_FALSE(loaded.ok());
  const Status& status = loaded.status();
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr(Fixture(name).string()));
  for (const std::string& phrase : phrases) {
    EXPECT_THAT(status.message(), HasSubstr(phrase));
  }
  const Rejection& r = OnlyRejection(registry, name);
  EXPECT_EQ(r.reason.code(), status.code());
  EXPECT_EQ(r.reason.message(), status.message());
  EXPECT_THAT(registry.plugins(), IsEmpty());
  EXPECT_EQ(registry.FindPlugin(name), nullptr);
  for (int32_t kind = FLEET_COMPONENT_DEVICE; kind <= FLEET_COMPONENT_OP_SCHEMA; ++kind) {
    EXPECT_THAT(registry.Components(kind), IsEmpty()) << ComponentKindName(kind);
  }
}

ConfigValue Value(std::string key, decltype(ConfigValue::value) value) {
  return ConfigValue{std::move(key), std::move(value), "loader_test"};
}

// ---- each fixture alone -------------------------------------------------------------------------

TEST(LoaderFixtures, GoodLoadsWithItsInfoAndDevice) {
  PluginRegistry registry(FixtureOptions());
  auto loaded = LoadFixture(registry, "good");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const PluginRecord& plugin = **loaded;
  EXPECT_EQ(plugin.name, "good");
  EXPECT_EQ(plugin.file, Fixture("good"));
  EXPECT_EQ(plugin.version, "1.2.3");
  EXPECT_EQ(plugin.description, "loader-test fixture: a valid plugin");
  EXPECT_EQ(plugin.abi_major, 1u);
  EXPECT_EQ(plugin.abi_minor, static_cast<uint32_t>(FLEET_ABI_MINOR));
  EXPECT_THAT(plugin.components, ElementsAre("device:fixture_mem"));
  EXPECT_THAT(plugin.notes, IsEmpty());
  EXPECT_THAT(registry.rejected(), IsEmpty());
  EXPECT_EQ(registry.FindPlugin("good"), &plugin);

  const ComponentRecord* device = registry.Find(FLEET_COMPONENT_DEVICE, "fixture_mem");
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->plugin, "good");
  EXPECT_EQ(device->vtable_size, FLEET_STRUCT_SIZE(FleetDeviceVTable, stream_native));
  EXPECT_GT(device->device_type_id, FLEET_DEVICE_TYPE_HOST);
  EXPECT_EQ(device->summary, "fixture memory; greeting=<none>");  // no config given
  // Kinds are separate namespaces: the device's name means nothing to other kinds.
  EXPECT_EQ(registry.Find(FLEET_COMPONENT_KERNELS, "fixture_mem"), nullptr);
  EXPECT_EQ(registry.Find(FLEET_COMPONENT_DEVICE, "no_such_device"), nullptr);
}

TEST(LoaderFixtures, GoodDeviceWorksThroughTheHostWrapper) {
  PluginRegistry registry(FixtureOptions());
  ASSERT_TRUE(LoadFixture(registry, "good").ok());
  const ComponentRecord* record = registry.Find(FLEET_COMPONENT_DEVICE, "fixture_mem");
  ASSERT_NE(record, nullptr);
  Device device(record);

  auto count = device.Count();
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, 1);
  auto props = device.Props(0);
  ASSERT_TRUE(props.ok()) << props.status().ToString();
  EXPECT_EQ(props->model, "fixture host memory");
  EXPECT_EQ(props->caps, FLEET_DEVICE_CAP_HOST_MEMORY | FLEET_DEVICE_CAP_SYNC_STREAMS);
  EXPECT_EQ(props->alignment, 16u);

  // alloc -> copy in -> copy out -> free, through the plugin's slots.
  const char message[] = "round trip through fixture_mem";
  auto mem = device.Alloc(0, sizeof(message));
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  ASSERT_NE(*mem, nullptr);
  ASSERT_TRUE(device.CopyToDevice(0, *mem, message, sizeof(message)).ok());
  char back[sizeof(message)] = {};
  ASSERT_TRUE(device.CopyToHost(0, back, *mem, sizeof(message)).ok());
  EXPECT_STREQ(back, message);
  EXPECT_TRUE(device.Synchronize(0).ok());
  EXPECT_TRUE(device.Free(0, *mem).ok());

  // A plugin's error comes back as a Status with its code, named after device and slot.
  auto bad = device.Alloc(1, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kOutOfRange);
  EXPECT_THAT(bad.status().message(), HasSubstr("device 'fixture_mem' (plugin 'good'): alloc"));
  EXPECT_THAT(bad.status().message(), HasSubstr("ordinal"));
}

TEST(LoaderFixtures, GoodDeviceSlotsWorkThroughTheVTable) {
  PluginRegistry registry(FixtureOptions());
  ASSERT_TRUE(LoadFixture(registry, "good").ok());
  const ComponentRecord* record = registry.Find(FLEET_COMPONENT_DEVICE, "fixture_mem");
  ASSERT_NE(record, nullptr);
  const FleetDeviceVTable* t = record->table<FleetDeviceVTable>();
  void* ctx = record->ctx;
  ASSERT_EQ(t->struct_size, FLEET_STRUCT_SIZE(FleetDeviceVTable, stream_native));

  // Stream-ordered work: d2d and memset on a stream, ordered by an event on a second stream.
  FleetStream* s1 = nullptr;
  FleetStream* s2 = nullptr;
  FleetEvent* done = nullptr;
  ASSERT_EQ(t->stream_create(ctx, 0, &s1), nullptr);
  ASSERT_EQ(t->stream_create(ctx, 0, &s2), nullptr);
  ASSERT_EQ(t->event_create(ctx, 0, &done), nullptr);
  ASSERT_NE(s1, nullptr);
  ASSERT_NE(s1, s2);

  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(t->alloc(ctx, 0, 16, &a), nullptr);
  ASSERT_EQ(t->alloc(ctx, 0, 16, &b), nullptr);
  ASSERT_EQ(t->memset(ctx, 0, a, 0x5a, 16, s1), nullptr);
  ASSERT_EQ(t->copy_d2d(ctx, 0, b, a, 16, s1), nullptr);
  ASSERT_EQ(t->event_record(ctx, done, s1), nullptr);
  ASSERT_EQ(t->stream_wait_event(ctx, s2, done), nullptr);
  unsigned char out[16] = {};
  ASSERT_EQ(t->copy_d2h(ctx, 0, out, b, 16, s2), nullptr);
  ASSERT_EQ(t->stream_synchronize(ctx, s2), nullptr);
  ASSERT_EQ(t->event_synchronize(ctx, done), nullptr);
  for (unsigned char byte : out) EXPECT_EQ(byte, 0x5a);

  // alloc of 0 bytes gives something free accepts; free(NULL) is a no-op.
  void* empty = nullptr;
  EXPECT_EQ(t->alloc(ctx, 0, 0, &empty), nullptr);
  EXPECT_EQ(t->free(ctx, 0, empty), nullptr);
  EXPECT_EQ(t->free(ctx, 0, nullptr), nullptr);

  // The optional slots are present in a current plugin's table.
  ASSERT_TRUE(FLEET_CAN_CALL(t, FleetDeviceVTable, host_alloc));
  ASSERT_TRUE(FLEET_CAN_CALL(t, FleetDeviceVTable, host_free));
  void* pinned = nullptr;
  EXPECT_EQ(t->host_alloc(ctx, 32, &pinned), nullptr);
  EXPECT_NE(pinned, nullptr);
  EXPECT_EQ(t->host_free(ctx, pinned), nullptr);

  EXPECT_EQ(t->free(ctx, 0, a), nullptr);
  EXPECT_EQ(t->free(ctx, 0, b), nullptr);
  EXPECT_EQ(t->event_destroy(ctx, done), nullptr);
  EXPECT_EQ(t->stream_destroy(ctx, s1), nullptr);
  EXPECT_EQ(t->stream_destroy(ctx, s2), nullptr);
}

TEST(LoaderFixtures, GoodReadsItsConfigAndTheHostNotesUnreadKeys) {
  LoadOptions options = FixtureOptions();
  options.plugin_config["good"] = {Value("greeting", std::string("hello from fleet.toml")),
                                   Value("colour", std::string("blue"))};
  // Config for another plugin is not handed to this one.
  options.plugin_config["older_minor"] = {Value("greeting", std::string("wrong plugin"))};
  PluginRegistry registry(options);
  auto loaded = LoadFixture(registry, "good");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const ComponentRecord* device = registry.Find(FLEET_COMPONENT_DEVICE, "fixture_mem");
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->summary, "fixture memory; greeting=hello from fleet.toml");
  // The plugin looked up "greeting" only: "colour" is reported, "greeting" is not.
  ASSERT_EQ((*loaded)->notes.size(), 1u) << JoinWords((*loaded)->notes, "; ");
  EXPECT_THAT((*loaded)->notes[0], HasSubstr("plugins.config.good.colour"));
  EXPECT_THAT((*loaded)->notes[0], HasSubstr("not used"));
}

TEST(LoaderFixtures, GoodRefusesAGreetingOfTheWrongType) {
  LoadOptions options = FixtureOptions();
  options.plugin_config["good"] = {Value("greeting", int64_t{42})};
  PluginRegistry registry(options);
  auto loaded = LoadFixture(registry, "good");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("its entry point failed"));
  EXPECT_THAT(loaded.status().message(), HasSubstr("good: greeting must be a string"));
  EXPECT_EQ(registry.Find(FLEET_COMPONENT_DEVICE, "fixture_mem"), nullptr);
}

TEST(LoaderFixtures, OlderMinorLoadsWithoutTheOptionalSlots) {
  PluginRegistry registry(FixtureOptions());
  auto loaded = LoadFixture(registry, "older_minor");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->abi_minor, 0u);
  EXPECT_EQ((*loaded)->version, "0.9.0");
  EXPECT_EQ((*loaded)->description, "loader-test fixture: built against an older minor");

  const ComponentRecord* record = registry.Find(FLEET_COMPONENT_DEVICE, "fixture_old");
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->vtable_size, FLEET_STRUCT_SIZE(FleetDeviceVTable, synchronize));
  // The plugin's memory past its table holds poison pointers; the host's copy must not.
  const FleetDeviceVTable* t = record->table<FleetDeviceVTable>();
  EXPECT_EQ(t->struct_size, FLEET_STRUCT_SIZE(FleetDeviceVTable, synchronize));
  EXPECT_FALSE(FLEET_HAS_FIELD(t, FleetDeviceVTable, host_alloc));
  EXPECT_FALSE(FLEET_CAN_CALL(t, FleetDeviceVTable, host_alloc));
  EXPECT_EQ(t->host_alloc, nullptr);
  EXPECT_EQ(t->host_free, nullptr);
  EXPECT_EQ(t->stream_native, nullptr);

  // The required slots work as in a current plugin.
  Device device(record);
  auto mem = device.Alloc(0, 4);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  const int32_t in = 0x12345678;
  int32_t out = 0;
  ASSERT_TRUE(device.CopyToDevice(0, *mem, &in, sizeof(in)).ok());
  ASSERT_TRUE(device.CopyToHost(0, &out, *mem, sizeof(out)).ok());
  EXPECT_EQ(out, in);
  EXPECT_TRUE(device.Free(0, *mem).ok());
}

TEST(LoaderFixtures, NewerMinorLoadsAndTheUnknownKindIsNoted) {
  PluginRegistry registry(FixtureOptions());
  auto loaded = LoadFixture(registry, "newer_minor");
  // The fixture's entry fails unless the host answered kind 99 with UNIMPLEMENTED.
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const PluginRecord& plugin = **loaded;
  EXPECT_EQ(plugin.abi_minor, static_cast<uint32_t>(FLEET_ABI_MINOR + 1));
  EXPECT_THAT(plugin.components, ElementsAre("device:fixture_new"));
  ASSERT_EQ(plugin.notes.size(), 1u) << JoinWords(plugin.notes, "; ");
  EXPECT_THAT(plugin.notes[0], HasSubstr("skipped component 'fixture_future' of kind 99"));
  EXPECT_THAT(plugin.notes[0], HasSubstr("unknown to this host"));
  EXPECT_EQ(registry.Find(99, "fixture_future"), nullptr);

  // A larger table is accepted; the host uses the members it knows.
  const ComponentRecord* record = registry.Find(FLEET_COMPONENT_DEVICE, "fixture_new");
  ASSERT_NE(record, nullptr);
  EXPECT_GT(record->vtable_size, FLEET_STRUCT_SIZE(FleetDeviceVTable, stream_native));
  const FleetDeviceVTable* t = record->table<FleetDeviceVTable>();
  EXPECT_TRUE(FLEET_CAN_CALL(t, FleetDeviceVTable, stream_native));
  Device device(record);
  auto count = device.Count();
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, 1);
  auto props = device.Props(0);
  ASSERT_TRUE(props.ok());
  EXPECT_EQ(props->model, "fixture host memory (newer)");
}

TEST(LoaderFixtures, WrongMajorIsRejectedNamingBothMajors) {
  ExpectRejected("wrong_major", Code::kFailedPrecondition,
                 {"ABI major 2", "this host speaks ABI 1." + std::to_string(FLEET_ABI_MINOR),
                  FLEET_PLUGIN_ENTRY_V1});
}

TEST(LoaderFixtures, MissingSymbolIsRejected) {
  ExpectRejected("missing_symbol", Code::kNotFound,
                 {"entry symbol fleet_plugin_entry_v1 is missing"});
}

TEST(LoaderFixtures, FailingInitIsRejectedWithThePluginsMessage) {
  // Its device was registered before the entry failed; ExpectRejected checks it is gone.
  ExpectRejected("failing_init", Code::kFailedPrecondition,
                 {"its entry point failed", "no widget attached"});
}

TEST(LoaderFixtures, BadSizeIsRejectedNamingTheComponent) {
  ExpectRejected("bad_size", Code::kInvalidArgument,
                 {"device 'fixture_bad_size'", "vtable struct_size 8 is impossible"});
}

TEST(LoaderFixtures, NotALibraryIsRejectedAsUnloadable) {
  ExpectRejected("not_a_library", Code::kInvalidArgument, {"not a loadable library"});
}

TEST(LoaderFixtures, NameMismatchIsRejectedNamingBothNames) {
  ExpectRejected("name_mismatch", Code::kInvalidArgument,
                 {"'name_mismatch'", "'something_else'"});
}

// dup_a passes the host's ALREADY_EXISTS on; dup_b (a careless plugin) ignores it and returns
// success. Either way the second of the two is rejected and the first keeps the name.
TEST(LoaderFixtures, DuplicateComponentRejectsTheSecondPlugin) {
  PluginRegistry registry(FixtureOptions());
  ASSERT_TRUE(LoadFixture(registry, "dup_a").ok());
  auto second = LoadFixture(registry, "dup_b");
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr(Fixture("dup_b").string()));
  EXPECT_THAT(second.status().message(),
              HasSubstr("device 'fixture_dup' is already provided by plugin 'dup_a'"));
  // The entry returned success, so the host itself refused the component.
  EXPECT_EQ(second.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr("a component was refused"));
  OnlyRejection(registry, "dup_b");
  EXPECT_EQ(registry.FindPlugin("dup_b"), nullptr);
  const ComponentRecord* dup = registry.Find(FLEET_COMPONENT_DEVICE, "fixture_dup");
  ASSERT_NE(dup, nullptr);
  EXPECT_EQ(dup->plugin, "dup_a");
  EXPECT_EQ(registry.Components(FLEET_COMPONENT_DEVICE).size(), 1u);
}

TEST(LoaderFixtures, DuplicateComponentPassedOnKeepsItsCode) {
  PluginRegistry registry(FixtureOptions());
  ASSERT_TRUE(LoadFixture(registry, "dup_b").ok());
  auto second = LoadFixture(registry, "dup_a");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr(Fixture("dup_a").string()));
  EXPECT_THAT(second.status().message(),
              HasSubstr("device 'fixture_dup' is already provided by plugin 'dup_b'"));
  const ComponentRecord* dup = registry.Find(FLEET_COMPONENT_DEVICE, "fixture_dup");
  ASSERT_NE(dup, nullptr);
  EXPECT_EQ(dup->plugin, "dup_b");
}

// ---- loading by name, twice, and the search -----------------------------------------------------

TEST(LoaderSearch, LoadByNameSearchesTheDirs) {
  PluginRegistry registry(FixtureOptions());
  auto loaded = registry.Load("good");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->file, Fixture("good"));
  // Again, by name and by path: the same record, the entry not run twice.
  auto again = registry.Load("good");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *loaded);
  auto by_path = LoadFixture(registry, "good");
  ASSERT_TRUE(by_path.ok());
  EXPECT_EQ(*by_path, *loaded);
  EXPECT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.Components(FLEET_COMPONENT_DEVICE).size(), 1u);
}

TEST(LoaderSearch, UnknownNameIsNotFoundWithASuggestion) {
  PluginRegistry registry(FixtureOptions());
  auto loaded = registry.Load("goood");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Code::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr("libfleet_goood.so"));
  EXPECT_THAT(loaded.status().message(), HasSubstr(kFixtureDir.string()));
  EXPECT_THAT(loaded.status().message(), HasSubstr("did you mean 'good'"));
}

TEST(LoaderSearch, RejectedTwiceIsRecordedOnce) {
  PluginRegistry registry(FixtureOptions());
  auto first = LoadFixture(registry, "failing_init");
  auto second = LoadFixture(registry, "failing_init");
  ASSERT_FALSE(first.ok());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(first.status().message(), second.status().message());
  EXPECT_EQ(registry.rejected().size(), 1u);
}

std::vector<std::string> ExpectedFixtureNames() {
  return Split(FLEET_FIXTURE_NAMES, ',');
}

TEST(LoaderSearch, DiscoverFindsEveryFixture) {
  PluginRegistry registry(FixtureOptions());
  std::vector<std::string> names;
  for (const fs::path& file : registry.Discover()) {
    EXPECT_EQ(file.parent_path(), kFixtureDir);
    names.push_back(PluginNameFromFile(file));
  }
  EXPECT_THAT(names, UnorderedElementsAreArray(ExpectedFixtureNames()));
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  // Discovery only lists files; nothing was loaded.
  EXPECT_THAT(registry.plugins(), IsEmpty());
  EXPECT_THAT(registry.rejected(), IsEmpty());
}

TEST(LoaderSearch, FirstDirectoryWinsForAName) {
  // A copy of `good` in a directory searched first shadows the fixture of the same name.
  fs::path dir = fs::temp_directory_path() / ("fleet_loader_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  fs::copy_file(Fixture("good"), dir / "libfleet_good.so");
  LoadOptions options;
  options.search_dirs = {dir, kFixtureDir};
  PluginRegistry registry(options);
  std::vector<fs::path> found = registry.Discover();
  auto good = std::find_if(found.begin(), found.end(),
                           [](const fs::path& p) { return PluginNameFromFile(p) == "good"; });
  ASSERT_NE(good, found.end());
  EXPECT_EQ(*good, dir / "libfleet_good.so");
  EXPECT_EQ(std::count_if(found.begin(), found.end(),
                          [](const fs::path& p) { return PluginNameFromFile(p) == "good"; }),
            1);
  auto loaded = registry.Load("good");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->file, dir / "libfleet_good.so");
  fs::remove_all(dir);
}

// A library cut short (a half-finished copy) maps pages past the end of its file; touching one
// kills the process with SIGBUS inside dlopen. The headers are checked against the file first,
// so each cut is refused by name, in this process, without a crash.
TEST(LoaderFixtures, ATruncatedLibraryIsRefusedBeforeDlopen) {
  fs::path dir = fs::temp_directory_path() / ("fleet_loader_cut_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  std::ifstream in(Fixture("good"), std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(whole.size(), 8192u);
  for (size_t cut : {size_t{4096}, whole.size() / 2, whole.size() - 1, size_t{40}}) {
    const fs::path file = dir / "libfleet_cut.so";
    fs::remove(file);
    std::ofstream(file, std::ios::binary).write(whole.data(), static_cast<std::streamsize>(cut));
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
    LoadOptions options;
    options.search_dirs = {dir};
    PluginRegistry registry(options);
    auto loaded = registry.Load(file.string());
    ASSERT_FALSE(loaded.ok()) << "cut at " << cut;
    EXPECT_EQ(loaded.status().code(), Code::kInvalidArgument) << loaded.status().ToString();
    EXPECT_NE(loaded.status().message().find("not a loadable library"), std::string::npos)
        << loaded.status().ToString();
  }
  fs::remove_all(dir);
}

// LoadAll over the fixture dir, in Discover()'s (sorted) order: dup_a comes before dup_b, so
// dup_b is the one refused.
TEST(LoaderSearch, LoadAllLoadsTheGoodAndRecordsTheBad) {
  PluginRegistry registry(FixtureOptions());
  registry.LoadAll();

  std::vector<std::string> loaded;
  for (const auto& p : registry.plugins()) loaded.push_back(p->name);
  EXPECT_THAT(loaded, UnorderedElementsAreArray(
                          {"good", "older_minor", "newer_minor", "dup_a"}));

  std::map<std::string, Code> rejected;
  for (const Rejection& r : registry.rejected()) {
    EXPECT_THAT(r.reason.message(), HasSubstr(r.file.string())) << r.plugin;
    rejected[r.plugin] = r.reason.code();
  }
  std::map<std::string, Code> expected = {
      {"wrong_major", Code::kFailedPrecondition}, {"missing_symbol", Code::kNotFound},
      {"failing_init", Code::kFailedPrecondition}, {"dup_b", Code::kAlreadyExists},
      {"bad_size", Code::kInvalidArgument},        {"not_a_library", Code::kInvalidArgument},
      {"name_mismatch", Code::kInvalidArgument}};
  EXPECT_EQ(rejected, expected);
  // Every fixture was tried exactly once.
  EXPECT_EQ(loaded.size() + registry.rejected().size(), ExpectedFixtureNames().size());

  std::set<std::string> devices;
  std::set<int32_t> type_ids;
  for (const ComponentRecord* c : registry.Components(FLEET_COMPONENT_DEVICE)) {
    devices.insert(c->name + "@" + c->plugin);
    type_ids.insert(c->device_type_id);
  }
  EXPECT_EQ(devices, (std::set<std::string>{"fixture_mem@good", "fixture_old@older_minor",
                                            "fixture_new@newer_minor", "fixture_dup@dup_a"}));
  EXPECT_EQ(type_ids.size(), devices.size()) << "device type ids must be distinct";
  EXPECT_EQ(type_ids.count(FLEET_DEVICE_TYPE_HOST), 0u);
}

// ---- files and directories writable by others ---------------------------------------------------

// A private temp dir holding a copy of `good`, removed at the end of the test.
class InsecureFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "fleet_insecure_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    file_ = dir_ / "libfleet_good.so";
    fs::copy_file(Fixture("good"), file_);
    ASSERT_EQ(::chmod(file_.c_str(), 0755), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  StatusOr<const PluginRecord*> LoadCopy(PluginRegistry& registry) {
    return registry.Load(file_.string());
  }

  fs::path dir_;
  fs::path file_;
};

TEST_F(InsecureFileTest, PrivateCopyLoads) {
  PluginRegistry registry(LoadOptions{});
  auto loaded = LoadCopy(registry);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->file, file_);
}

TEST_F(InsecureFileTest, FileWritableByOthersIsRejected) {
  ASSERT_EQ(::chmod(file_.c_str(), 0757), 0);
  PluginRegistry registry(LoadOptions{});
  auto loaded = LoadCopy(registry);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(loaded.status().message(), HasSubstr(file_.string()));
  EXPECT_THAT(loaded.status().message(), HasSubstr("the file is writable by others (mode 0757)"));
  EXPECT_THAT(loaded.status().message(), HasSubstr("allow_insecure"));
  EXPECT_EQ(registry.Find(FLEET_COMPONENT_DEVICE, "fixture_mem"), nullptr);
}

TEST_F(InsecureFileTest, FileOwnedByAnotherUserIsRejected) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing a file's owner needs root";
  ASSERT_EQ(::chown(file_.c_str(), 65534, 65534), 0);  // nobody
  PluginRegistry registry(LoadOptions{});
  auto loaded = LoadCopy(registry);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(loaded.status().message(), HasSubstr("the file is owned by another user (uid 65534)"));
}

TEST_F(InsecureFileTest, DirectoryWritableByOthersIsRejected) {
  ASSERT_EQ(::chmod(dir_.c_str(), 0757), 0);
  PluginRegistry registry(LoadOptions{});
  auto loaded = LoadCopy(registry);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(loaded.status().message(), HasSubstr(file_.string()));
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("the directory " + dir_.string() + " is writable by others"));
}

TEST_F(InsecureFileTest, GroupWritableFileIsRejected) {
  ASSERT_EQ(::chmod(file_.c_str(), 0775), 0);
  PluginRegistry registry(LoadOptions{});
  auto loaded = LoadCopy(registry);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("the file is writable by its group (mode 0775)"));
}

// Not only the plugin's own directory: anyone who can write to a directory above it can rename
// the whole subtree and put other code in its place.
TEST_F(InsecureFileTest, WritableDirectoryFurtherUpIsRejected) {
  const fs::path sub = dir_ / "a" / "b";
  fs::create_directories(sub);
  ASSERT_EQ(::chmod((dir_ / "a").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(sub.c_str(), 0755), 0);
  fs::copy_file(file_, sub / "libfleet_good.so");
  PluginRegistry registry(LoadOptions{});
  auto loaded = registry.Load((sub / "libfleet_good.so").string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("the directory " + (dir_ / "a").string() + " is writable by others"));
}

// A symlink is judged by where it leads as well: a link in a private directory to a plugin in a
// directory others can write is refused; a link to a trusted plugin loads.
TEST_F(InsecureFileTest, SymlinkIntoAnUntrustedDirectoryIsRejected) {
  const fs::path open_dir = dir_ / "open";
  fs::create_directories(open_dir);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  fs::copy_file(file_, open_dir / "libfleet_good.so");
  const fs::path links = dir_ / "links";
  fs::create_directories(links);
  fs::create_symlink(open_dir / "libfleet_good.so", links / "libfleet_good.so");
  PluginRegistry registry(LoadOptions{});
  auto loaded = registry.Load((links / "libfleet_good.so").string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("the directory " + open_dir.string() + " is writable by others"));

  const fs::path good_links = dir_ / "good_links";
  fs::create_directories(good_links);
  fs::create_symlink(file_, good_links / "libfleet_good.so");
  PluginRegistry trusting(LoadOptions{});
  auto ok = trusting.Load((good_links / "libfleet_good.so").string());
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(InsecureFileTest, SymlinkOwnedByAnotherUserIsRejected) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing a link's owner needs root";
  const fs::path links = dir_ / "links";
  fs::create_directories(links);
  fs::create_symlink(file_, links / "libfleet_good.so");
  ASSERT_EQ(::lchown((links / "libfleet_good.so").c_str(), 65534, 65534), 0);
  PluginRegistry registry(LoadOptions{});
  auto loaded = registry.Load((links / "libfleet_good.so").string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("the symlink " + (links / "libfleet_good.so").string() +
                        " is owned by another user (uid 65534)"));
}

TEST_F(InsecureFileTest, StickyDirectoryIsAccepted) {
  // Like /tmp: others may add files but not replace this one.
  ASSERT_EQ(::chmod(dir_.c_str(), 01777), 0);
  PluginRegistry registry(LoadOptions{});
  auto loaded = LoadCopy(registry);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
}

TEST_F(InsecureFileTest, AllowInsecureLoadsBoth) {
  ASSERT_EQ(::chmod(file_.c_str(), 0757), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0757), 0);
  LoadOptions options;
  options.allow_insecure = true;
  PluginRegistry registry(options);
  auto loaded = LoadCopy(registry);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_NE(registry.Find(FLEET_COMPONENT_DEVICE, "fixture_mem"), nullptr);
}

}  // namespace
}  // namespace fleet
