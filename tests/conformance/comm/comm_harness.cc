#include "comm_harness.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include "report/report.h"
#include "rendezvous/memory_store.h"
#include "plugin/store_abi.h"
#include "plugin/host_api.h"
#include "plugin/registry.h"

namespace fleet::conformance::comm {
namespace {

#ifndef FLEET_CONFORMANCE_DEFAULT_COMM
#define FLEET_CONFORMANCE_DEFAULT_COMM "gloo"
#endif

std::string CommName() {
  const char* c = std::getenv("FLEET_CONFORMANCE_COMM");
  return (c != nullptr && *c != '\0') ? std::string(c)
                                       : std::string(FLEET_CONFORMANCE_DEFAULT_COMM);
}

// What the host passes every communicator (FLEET_COMM_HOST_OPTIONS), as a local job of
// threads does, then "key=value;key=value" from FLEET_CONFORMANCE_COMM_OPTIONS (a key given
// there replaces the host's value).
std::vector<std::pair<std::string, std::string>> SuiteOptions() {
  std::vector<std::pair<std::string, std::string>> out = {{"hostname", "127.0.0.1"}};
  const char* env = std::getenv("FLEET_CONFORMANCE_COMM_OPTIONS");
  std::stringstream ss(env != nullptr ? env : "");
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    bool replaced = false;
    for (auto& [k, v] : out) {
      if (k == key) v = value, replaced = true;
    }
    if (!replaced) out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

MemoryStore& SharedStore() {
  static MemoryStore* store = new MemoryStore();
  return *store;
}

std::string NextScope() {
  static std::atomic<int> counter{0};
  return "comm_test_" + std::to_string(counter++);
}

size_t SizeOf(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_BOOL:
    case FLEET_DTYPE_INT8:
    case FLEET_DTYPE_UINT8: return 1;
    case FLEET_DTYPE_FLOAT16:
    case FLEET_DTYPE_BFLOAT16:
    case FLEET_DTYPE_INT16: return 2;
    case FLEET_DTYPE_INT32:
    case FLEET_DTYPE_FLOAT32: return 4;
    default: return 8;
  }
}

// Half-precision encodings written independently of any plugin: float16 through the compiler's
// _Float16, bfloat16 by rounding the significand to 8 bits (nearest-even, the default mode).
uint16_t EncodeHalf(double v) {
  _Float16 h = static_cast<_Float16>(static_cast<float>(v));
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
double DecodeHalf(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<double>(static_cast<float>(h));
}
uint16_t EncodeBFloat16(double v) {
  int exponent = 0;
  const double m = std::frexp(v, &exponent);  // v = m * 2^exponent, |m| in [0.5, 1)
  const float rounded = static_cast<float>(std::ldexp(std::nearbyint(m * 256.0), exponent - 8));
  uint32_t bits;
  std::memcpy(&bits, &rounded, 4);
  return static_cast<uint16_t>(bits >> 16);
}
double DecodeBFloat16(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

// The device the tensors live on (see comm_harness.h).
struct DeviceUnderTest {
  std::string name;
  bool host = true;                     // plain host memory: no device plugin involved
  const FleetDeviceVTable* vt = nullptr;
  void* ctx = nullptr;
  int32_t type_id = FLEET_DEVICE_TYPE_HOST;
  int32_t count = 0;                    // ordinals
  std::string unavailable;              // why no rank can run ("" when count > 0)
};

struct Suite {
  CommUnderTest* comm = nullptr;
  std::string failure;  // why comm is NULL
  DeviceUnderTest device;
};

bool Lists(const FleetCommVTable* vt, const std::string& device) {
  for (size_t i = 0; i < vt->num_devices; ++i) {
    if (vt->devices != nullptr && vt->devices[i] != nullptr && device == vt->devices[i]) {
      return true;
    }
  }
  return false;
}

std::string DeviceName(const FleetCommVTable* vt) {
  const char* env = std::getenv("FLEET_CONFORMANCE_DEVICE");
  if (env != nullptr && *env != '\0') return env;
#ifdef FLEET_CONFORMANCE_DEFAULT_DEVICE
  if (Lists(vt, FLEET_CONFORMANCE_DEFAULT_DEVICE)) return FLEET_CONFORMANCE_DEFAULT_DEVICE;
#endif
  if (vt->num_devices == 0 || vt->devices == nullptr || vt->devices[0] == nullptr ||
      Lists(vt, "cpu")) {
    return "cpu";
  }
  return vt->devices[0];
}

// Loads the device `name` (anything but "cpu") into the registry that holds the communicator,
// so the ids its tensors carry are the ones the communicator's host sees.
DeviceUnderTest LoadDevice(PluginRegistry* registry, const std::string& name) {
  DeviceUnderTest d;
  d.name = name;
  if (name == "cpu") {
    d.count = std::numeric_limits<int32_t>::max();
    return d;
  }
  d.host = false;
  const ComponentRecord* rec = registry->Find(FLEET_COMPONENT_DEVICE, name);
  std::string load_error;
  if (rec == nullptr) {
    auto loaded = registry->Load(name);
    if (!loaded.ok()) load_error = ": " + loaded.status().ToString();
    rec = registry->Find(FLEET_COMPONENT_DEVICE, name);
  }
  if (rec == nullptr) {
    registry->LoadAll();
    rec = registry->Find(FLEET_COMPONENT_DEVICE, name);
  }
  const std::string what = name == "cuda" ? "no CUDA device" : "no '" + name + "' device";
  if (rec == nullptr) {
    d.unavailable = what + ": no plugin provides device '" + name + "'" + load_error;
    return d;
  }
  d.vt = rec->table<FleetDeviceVTable>();
  d.ctx = rec->ctx;
  d.type_id = rec->device_type_id;
  Status s = TakeStatus(d.vt->count(d.ctx, &d.count), "device '" + name + "' count");
  if (!s.ok()) {
    d.count = 0;
    d.unavailable = what + ": " + s.ToString();
  } else if (d.count <= 0) {
    d.count = 0;
    d.unavailable = what + ": device '" + name + "' reports 0 devices";
  }
  return d;
}

const Suite& TheSuite() {
  static Suite* suite = new Suite();  // lives until exit, like the plugins
  static std::once_flag once;
  std::call_once(once, [] {
    // FLEET_PLUGIN_PATH first (a third-party plugin under test), then this build's plugins: the
    // host's own search path for a run without a config.
    LoadOptions options;
    options.search_dirs = PluginSearchPath(Config{});
    options.search_dirs.emplace_back(FLEET_BUILD_PLUGIN_DIR);
    static PluginRegistry* registry = new PluginRegistry(options);  // lives until exit
    const std::string name = CommName();
    auto loaded = registry->Load("comm_" + name);
    if (!loaded.ok() || registry->Find(FLEET_COMPONENT_COMMUNICATOR, name) == nullptr) {
      registry->LoadAll();
    }
    const ComponentRecord* rec = registry->Find(FLEET_COMPONENT_COMMUNICATOR, name);
    if (rec == nullptr) {
      suite->failure = "no plugin provides communicator '" + name + "'" +
                       (loaded.ok() ? "" : ": " + loaded.status().ToString());
      return;
    }
    suite->comm = new CommUnderTest{name, rec->table<FleetCommVTable>(), rec->ctx};
    suite->device = LoadDevice(registry, DeviceName(suite->comm->vt));
  });
  return *suite;
}

const DeviceUnderTest& Device() { return TheSuite().device; }

// The ordinal of the rank whose thread this is; Bufs made on it live there.
thread_local int32_t t_ordinal = 0;

int32_t OrdinalOf(int rank) {
  const DeviceUnderTest& d = Device();
  return d.host || d.count <= 0 ? 0 : rank % d.count;
}

}  // namespace

const CommUnderTest* Comm(std::string* error) {
  const Suite& suite = TheSuite();
  if (error != nullptr) *error = suite.failure;
  return suite.comm;
}

bool WorldFits(int size, std::string* why) {
  const Suite& suite = TheSuite();
  const DeviceUnderTest& d = suite.device;
  if (suite.comm == nullptr) return true;
  std::string reason;
  const FleetCommVTable* vt = suite.comm->vt;
  if (FLEET_CAN_CALL(vt, FleetCommVTable, supports_world_size) &&
      vt->supports_world_size(suite.comm->ctx, size) == 0) {
    reason = "communicator '" + suite.comm->name + "' does not support a world of " +
             std::to_string(size) + " ranks (its supports_world_size says so)";
  } else if (d.host) {
    return true;
  } else if (!d.unavailable.empty()) {
    reason = d.unavailable;
  } else if (d.count < size) {
    reason = "a world of " + std::to_string(size) + " ranks needs " + std::to_string(size) +
             " '" + d.name + "' devices (one per rank, as communicator '" + suite.comm->name +
             "' requires); this machine has " + std::to_string(d.count);
  } else {
    return true;
  }
  if (why != nullptr) *why = reason;
  return false;
}

bool UsesHostMemory() { return Device().host; }

Status Take(FleetStatus* status) {
  return TakeStatus(status, "communicator '" + CommName() + "'");
}

int64_t ElapsedMs(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// Rank 0 reports each call for the kit's table (collective x world size); UNIMPLEMENTED is a
// collective the communicator does not provide.
Status Rank::Reported(const char* collective, Status s) const {
  if (rank == 0) {
    ReportRun(collective, "world " + std::to_string(size),
              s.ok() ? kRunOk : (s.code() == Code::kUnimplemented ? kRunNotProvided : kRunError),
              s.ok() ? "" : s.ToString());
  }
  if (s.code() == Code::kUnimplemented) {
    return Status(s.code(), std::string(kNotProvidedPrefix) + collective + ": " + s.message());
  }
  return s;
}

Status Rank::AllReduce(const FleetTensor* in, const FleetTensor* out, int32_t op) const {
  return Reported("all_reduce", Take(vt->all_reduce(ctx, comm, in, out, op, nullptr)));
}
Status Rank::Broadcast(const FleetTensor* buf, int32_t root) const {
  return Reported("broadcast", Take(vt->broadcast(ctx, comm, buf, root, nullptr)));
}
Status Rank::AllGather(const FleetTensor* in, const FleetTensor* out) const {
  return Reported("all_gather", Take(vt->all_gather(ctx, comm, in, out, nullptr)));
}
Status Rank::ReduceScatter(const FleetTensor* in, const FleetTensor* out, int32_t op) const {
  return Reported("reduce_scatter", Take(vt->reduce_scatter(ctx, comm, in, out, op, nullptr)));
}
Status Rank::Reduce(const FleetTensor* in, const FleetTensor* out, int32_t op,
                    int32_t root) const {
  return Reported("reduce", Take(vt->reduce(ctx, comm, in, out, op, root, nullptr)));
}
Status Rank::AllToAll(const FleetTensor* in, const FleetTensor* out) const {
  return Reported("all_to_all", Take(vt->all_to_all(ctx, comm, in, out, nullptr)));
}
Status Rank::Send(const FleetTensor* buf, int32_t peer) const {
  return Reported("send", Take(vt->send(ctx, comm, buf, peer, nullptr)));
}
Status Rank::Recv(const FleetTensor* buf, int32_t peer) const {
  return Reported("recv", Take(vt->recv(ctx, comm, buf, peer, nullptr)));
}
Status Rank::Barrier() const { return Reported("barrier", Take(vt->barrier(ctx, comm))); }

struct World::State {
  explicit State(std::string scope) : store(&SharedStore(), scope) {}
  AbiStore store;
};

World::World(int size, int64_t timeout_ms)
    : state_(std::make_unique<State>(NextScope())), size_(size), timeout_ms_(timeout_ms) {}

World::~World() = default;

Status World::Create(int rank, FleetComm** out,
                     const std::vector<std::pair<std::string, std::string>>& extra) {
  const CommUnderTest* c = Comm(nullptr);
  if (c == nullptr) return Status(Code::kNotFound, "no communicator");
  auto pairs = SuiteOptions();
  pairs.insert(pairs.end(), extra.begin(), extra.end());
  std::vector<FleetAttr> attrs(pairs.size());
  std::vector<const FleetAttr*> ptrs;
  for (size_t i = 0; i < pairs.size(); ++i) {
    FleetAttr& a = attrs[i];
    a.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings);
    a.name = pairs[i].first.c_str();
    a.type = FLEET_ATTR_STRING;
    a.s = pairs[i].second.c_str();
    a.s_len = pairs[i].second.size();
    ptrs.push_back(&a);
  }
  FleetCommConfig config{};
  config.struct_size = FLEET_STRUCT_SIZE(FleetCommConfig, options);
  config.rank = rank;
  config.world_size = size_;
  config.store = state_->store.table();
  config.timeout_ms = timeout_ms_;
  config.device = "cpu";
  config.num_options = ptrs.size();
  config.options = ptrs.data();
  const DeviceUnderTest& d = Device();
  if (!d.host) {
    config.struct_size = FLEET_STRUCT_SIZE(FleetCommConfig, device_ctx);
    config.device = d.name.c_str();
    config.device_ordinal = OrdinalOf(rank);
    config.device_table = d.vt;
    config.device_ctx = d.ctx;
  }
  return Take(c->vt->create(c->ctx, &config, out));
}

void World::Run(const std::function<void(Rank&)>& body) {
  std::string error;
  const CommUnderTest* c = Comm(&error);
  ASSERT_NE(c, nullptr) << error;
  std::string why;
  if (!WorldFits(size_, &why)) GTEST_SKIP() << why;
  std::vector<std::thread> threads;
  for (int r = 0; r < size_; ++r) {
    threads.emplace_back([&, r] {
      t_ordinal = OrdinalOf(r);
      Rank rank;
      rank.rank = r;
      rank.size = size_;
      rank.vt = c->vt;
      rank.ctx = c->ctx;
      Status s = Create(r, &rank.comm);
      EXPECT_TRUE(s.ok()) << "create on rank " << r << " of " << size_ << ": " << s.ToString();
      if (!s.ok()) return;
      body(rank);
      Status d = Take(c->vt->destroy(c->ctx, rank.comm));
      EXPECT_TRUE(d.ok()) << d.ToString();
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<Status> World::CreateOnly(const std::vector<int>& ranks) {
  const CommUnderTest* c = Comm(nullptr);
  std::vector<Status> result(ranks.size());
  std::vector<FleetComm*> comms(ranks.size(), nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] { result[i] = Create(ranks[i], &comms[i]); });
  }
  for (auto& t : threads) t.join();
  for (FleetComm* comm : comms) {
    if (comm != nullptr) (void)Take(c->vt->destroy(c->ctx, comm));
  }
  return result;
}

Status World::CreateWithOptions(const std::vector<std::pair<std::string, std::string>>& extra) {
  const CommUnderTest* c = Comm(nullptr);
  FleetComm* comm = nullptr;
  Status s = Create(0, &comm, extra);
  if (comm != nullptr) (void)Take(c->vt->destroy(c->ctx, comm));
  return s;
}

Buf::Buf(int32_t dtype, int64_t numel)
    : dtype_(dtype),
      numel_(numel),
      element_(SizeOf(dtype)),
      bytes_(static_cast<size_t>(numel) * SizeOf(dtype) + 1) {
  dims_[0] = numel;
  const DeviceUnderTest& d = Device();
  if (d.host || d.vt == nullptr || !d.unavailable.empty()) return;
  ordinal_ = t_ordinal;
  // One spare byte, as on the host, so even an empty tensor has a non-NULL address.
  Status s = TakeStatus(d.vt->alloc(d.ctx, ordinal_, bytes_.size(), &device_),
                        "device '" + d.name + "' alloc of " + std::to_string(bytes_.size()) +
                            " bytes");
  if (!s.ok()) {
    ADD_FAILURE() << s.ToString();
    device_ = nullptr;  // falls back to host memory, which the communicator then refuses
  }
}

Buf::~Buf() {
  if (device_ == nullptr) return;
  const DeviceUnderTest& d = Device();
  Status s = TakeStatus(d.vt->free(d.ctx, ordinal_, device_), "device '" + d.name + "' free");
  EXPECT_TRUE(s.ok()) << s.ToString();
}

void Buf::Upload() {
  if (device_ == nullptr || !host_newer_) return;
  const DeviceUnderTest& d = Device();
  // NULL stream: the copy is complete when the call returns.
  Status s = TakeStatus(
      d.vt->copy_h2d(d.ctx, ordinal_, device_, bytes_.data(), bytes_.size(), nullptr),
      "device '" + d.name + "' copy_h2d of " + std::to_string(bytes_.size()) + " bytes");
  EXPECT_TRUE(s.ok()) << s.ToString();
  host_newer_ = false;
}

void Buf::Download() const {
  if (device_ == nullptr || !device_newer_) return;
  const DeviceUnderTest& d = Device();
  Status s = TakeStatus(
      d.vt->copy_d2h(d.ctx, ordinal_, bytes_.data(), device_, bytes_.size(), nullptr),
      "device '" + d.name + "' copy_d2h of " + std::to_string(bytes_.size()) + " bytes");
  EXPECT_TRUE(s.ok()) << s.ToString();
  device_newer_ = false;
}

const FleetTensor* Buf::t() {
  Upload();
  // The call this descriptor goes to may write the device copy.
  if (device_ != nullptr) device_newer_ = true;
  desc_.struct_size = FLEET_STRUCT_SIZE(FleetTensor, device_ordinal);
  desc_.data = device_ != nullptr ? device_ : static_cast<void*>(bytes_.data());
  desc_.dtype = dtype_;
  desc_.ndim = 1;
  desc_.dims = dims_;
  desc_.strides = nullptr;
  desc_.device_type = device_ != nullptr ? Device().type_id : FLEET_DEVICE_TYPE_HOST;
  desc_.device_ordinal = device_ != nullptr ? ordinal_ : 0;
  return &desc_;
}

const FleetTensor* Buf::Slice(int64_t offset, int64_t numel) {
  slice_ = *t();
  slice_dims_[0] = numel;
  slice_.dims = slice_dims_;
  slice_.data = static_cast<unsigned char*>(desc_.data) + static_cast<size_t>(offset) * element_;
  return &slice_;
}

double Buf::Get(int64_t i) const {
  Download();
  const unsigned char* p = bytes_.data() + static_cast<size_t>(i) * element_;
  switch (dtype_) {
    case FLEET_DTYPE_FLOAT32: { float v; std::memcpy(&v, p, 4); return v; }
    case FLEET_DTYPE_FLOAT64: { double v; std::memcpy(&v, p, 8); return v; }
    case FLEET_DTYPE_INT32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case FLEET_DTYPE_INT64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case FLEET_DTYPE_FLOAT16: { uint16_t v; std::memcpy(&v, p, 2); return DecodeHalf(v); }
    case FLEET_DTYPE_BFLOAT16: { uint16_t v; std::memcpy(&v, p, 2); return DecodeBFloat16(v); }
    default: return static_cast<double>(*p);
  }
}

void Buf::Set(int64_t i, double v) {
  Download();  // the other elements keep what the device holds
  host_newer_ = true;
  unsigned char* p = bytes_.data() + static_cast<size_t>(i) * element_;
  switch (dtype_) {
    case FLEET_DTYPE_FLOAT32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
    case FLEET_DTYPE_FLOAT64: std::memcpy(p, &v, 8); break;
    case FLEET_DTYPE_INT32: { auto x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
    case FLEET_DTYPE_INT64: { auto x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
    case FLEET_DTYPE_FLOAT16: { uint16_t x = EncodeHalf(v); std::memcpy(p, &x, 2); break; }
    case FLEET_DTYPE_BFLOAT16: { uint16_t x = EncodeBFloat16(v); std::memcpy(p, &x, 2); break; }
    default: *p = static_cast<unsigned char>(v); break;
  }
}

void Buf::Fill(const std::function<double(int64_t)>& f) {
  device_newer_ = false;  // every element is overwritten: nothing to fetch first
  for (int64_t i = 0; i < numel_; ++i) Set(i, f(i));
}

std::string DtypeName(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_FLOAT32: return "float32";
    case FLEET_DTYPE_FLOAT64: return "float64";
    case FLEET_DTYPE_INT32: return "int32";
    case FLEET_DTYPE_INT64: return "int64";
    case FLEET_DTYPE_FLOAT16: return "float16";
    case FLEET_DTYPE_BFLOAT16: return "bfloat16";
    case FLEET_DTYPE_BOOL: return "bool";
    default: return "dtype " + std::to_string(dtype);
  }
}

bool IsInteger(int32_t dtype) {
  return dtype == FLEET_DTYPE_INT32 || dtype == FLEET_DTYPE_INT64;
}

double Tolerance(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_FLOAT32: return 1e-6;
    case FLEET_DTYPE_FLOAT64: return 1e-12;
    case FLEET_DTYPE_FLOAT16: return 1e-3;
    case FLEET_DTYPE_BFLOAT16: return 8e-3;
    default: return 0.0;
  }
}

const std::vector<int32_t>& ReducibleDtypes() {
  static const std::vector<int32_t> dtypes = [] {
    std::vector<int32_t> out = {FLEET_DTYPE_FLOAT32, FLEET_DTYPE_FLOAT64, FLEET_DTYPE_INT32,
                                FLEET_DTYPE_INT64};
    for (int32_t half : {FLEET_DTYPE_FLOAT16, FLEET_DTYPE_BFLOAT16}) {
      bool ok = false;
      World world(1);
      world.Run([&](Rank& r) {
        Buf b(half, 4);
        b.Fill([](int64_t i) { return static_cast<double>(i); });
        ok = r.AllReduce(b.t(), b.t(), FLEET_REDUCE_SUM).ok();
      });
      if (ok) out.push_back(half);
    }
    return out;
  }();
  return dtypes;
}

bool Near(double got, double want, int32_t dtype, const std::string& context) {
  const double tol = Tolerance(dtype);
  if (std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want))) return true;
  ADD_FAILURE() << context << ": got " << got << ", want " << want << " (" << DtypeName(dtype)
                << ")";
  return false;
}

}  // namespace fleet::conformance::comm
