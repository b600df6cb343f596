#include "transport_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

namespace fleet::conformance::transport {
namespace {

std::string TransportName() {
  const char* c = std::getenv("FLEET_CONFORMANCE_TRANSPORT");
  return (c != nullptr && *c != '\0') ? std::string(c) : std::string("rpc");
}

// The registry the transport under test was loaded into; it lives until exit.
PluginRegistry* g_registry = nullptr;

}  // namespace

const ComponentRecord* Transport(std::string* error) {
  static const ComponentRecord* found = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    LoadOptions options;
    options.search_dirs = PluginSearchPath(Config{});
    options.search_dirs.emplace_back(FLEET_BUILD_PLUGIN_DIR);
    g_registry = new PluginRegistry(options);
    PluginRegistry* registry = g_registry;
    const std::string name = TransportName();
    auto loaded = registry->Load("transport_" + name);
    if (!loaded.ok() || registry->Find(FLEET_COMPONENT_TRANSPORT, name) == nullptr) {
      registry->LoadAll();
    }
    found = registry->Find(FLEET_COMPONENT_TRANSPORT, name);
    if (found == nullptr) {
      failure = "no plugin provides transport '" + name + "'" +
                (loaded.ok() ? "" : ": " + loaded.status().ToString());
    }
  });
  if (error != nullptr) *error = failure;
  return found;
}

uint32_t TransportAbiMinor() {
  // Loading the plugin a second time (another registry) would re-run its entry point and
  // leave it holding that registry's host services: ask the registry that loaded it.
  const ComponentRecord* rec = Transport(nullptr);
  if (rec == nullptr || g_registry == nullptr) return 0;
  const PluginRecord* plugin = g_registry->FindPlugin(rec->plugin);
  return plugin != nullptr ? plugin->abi_minor : 0u;
}

std::string ShapeText(int32_t dtype, const int64_t* dims, int32_t ndim) {
  std::string text = std::to_string(dtype) + " [";
  for (int32_t i = 0; i < ndim; ++i) text += (i > 0 ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

int64_t ElapsedMs(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

size_t DtypeBytes(int32_t dtype) {
  switch (dtype) {
    case FLEET_DTYPE_BOOL:
    case FLEET_DTYPE_INT8:
    case FLEET_DTYPE_UINT8: return 1;
    case FLEET_DTYPE_INT16:
    case FLEET_DTYPE_FLOAT16:
    case FLEET_DTYPE_BFLOAT16: return 2;
    case FLEET_DTYPE_INT32:
    case FLEET_DTYPE_FLOAT32: return 4;
    default: return 8;
  }
}

HostTensor HostTensor::Zeros(int32_t dtype, std::vector<int64_t> dims) {
  HostTensor t;
  t.dtype = dtype;
  size_t n = DtypeBytes(dtype);
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  t.dims = std::move(dims);
  t.bytes.assign(n, 0);
  return t;
}

HostTensor HostTensor::Random(int32_t dtype, std::vector<int64_t> dims, uint64_t seed) {
  HostTensor t = Zeros(dtype, std::move(dims));
  // splitmix64: every 8-byte word differs, so any misplaced chunk shows.
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t i = 0;
  for (; i + 8 <= t.bytes.size(); i += 8) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(&t.bytes[i], &z, 8);
  }
  for (; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(seed + i * 131);
  if (dtype == FLEET_DTYPE_BOOL) {
    for (auto& b : t.bytes) b &= 1;
  }
  return t;
}

FleetTensor HostTensor::View() {
  FleetTensor v{};
  v.struct_size = FLEET_STRUCT_SIZE(FleetTensor, height);
  v.data = bytes.empty() ? nullptr : bytes.data();
  v.dtype = dtype;
  v.ndim = static_cast<int32_t>(dims.size());
  v.dims = dims.data();
  v.device_type = FLEET_DEVICE_TYPE_HOST;
  v.rows = height >= 0 ? rows.data() : nullptr;
  v.height = height;
  return v;
}

TensorSink SinkInto(HostTensor* into) {
  return [into](int32_t dtype, const std::vector<int64_t>& dims) -> StatusOr<FleetTensor> {
    *into = HostTensor::Zeros(dtype, dims);
    return into->View();
  };
}

Status RecordingHandler::OnSend(int32_t trainer_id, std::string_view name,
                                const FleetTensor& tensor) {
  const std::string where = "test handler: send of '" + std::string(name) + "'";
  HostTensor copy = HostTensor::Zeros(tensor.dtype,
                                      std::vector<int64_t>(tensor.dims, tensor.dims + tensor.ndim));
  if (!copy.bytes.empty()) std::memcpy(copy.bytes.data(), tensor.data, copy.bytes.size());
  // The host's wrapper hands every send on with its height (transport.h, OnSend).
  if (tensor.height >= 0) {
    const int64_t n = tensor.ndim > 0 ? tensor.dims[0] : 0;
    if (n > 0 && tensor.rows == nullptr) return InvalidArgument(where + ": no rows");
    if (reinterpret_cast<uintptr_t>(tensor.rows) % 8 != 0) {
      return InvalidArgument(where + ": its rows are not 8-byte aligned");
    }
    copy.height = tensor.height;
    copy.rows.resize(static_cast<size_t>(n));
    if (n > 0) std::memcpy(copy.rows.data(), tensor.rows, copy.rows.size() * sizeof(int64_t));
  } else if (tensor.height != -1 || tensor.rows != nullptr) {
    return InvalidArgument(where + ": a dense tensor must have height -1 and no rows, has " +
                           std::to_string(tensor.height) +
                           (tensor.rows != nullptr ? " and rows" : ""));
  }
  std::lock_guard<std::mutex> lock(mu_);
  vars_[std::string(name)] = std::move(copy);
  senders_[std::string(name)] = trainer_id;
  ++send_calls_;
  return OkStatus();
}

Status RecordingHandler::OnSendBegin(int32_t, std::string_view name, const FleetTensor& shape) {
  std::lock_guard<std::mutex> lock(mu_);
  send_begins_.emplace_back(std::string(name), ShapeText(shape.dtype, shape.dims, shape.ndim));
  send_begin_rows_.emplace_back(shape.height, shape.rows == nullptr);
  auto it = refused_.find(std::string(name));
  return it == refused_.end() ? OkStatus() : it->second;
}

Status RecordingHandler::OnAbort(int32_t trainer_id, std::string_view reason) {
  std::lock_guard<std::mutex> lock(mu_);
  aborts_.emplace_back(trainer_id, std::string(reason));
  return OkStatus();
}

void RecordingHandler::RefuseSends(const std::string& name, Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  refused_[name] = std::move(status);
}

std::vector<std::pair<std::string, std::string>> RecordingHandler::send_begins() const {
  std::lock_guard<std::mutex> lock(mu_);
  return send_begins_;
}

int RecordingHandler::send_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return send_calls_;
}

std::vector<std::pair<int64_t, bool>> RecordingHandler::send_begin_rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return send_begin_rows_;
}

std::vector<std::pair<int32_t, std::string>> RecordingHandler::aborts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborts_;
}

bool RecordingHandler::WaitIfBlocked(std::unique_lock<std::mutex>& lock) {
  if (!blocking_) return true;
  return cv_.wait_for(lock, max_block_, [this] { return !blocking_; });
}

Status RecordingHandler::OnGet(int32_t trainer_id, std::string_view name, FleetTensor& out,
                               void** token) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!WaitIfBlocked(lock)) return DeadlineExceeded("test handler: get blocked too long");
  auto it = vars_.find(std::string(name));
  if (it == vars_.end()) return NotFound("test handler: no variable '" + std::string(name) + "'");
  // Lend a copy, so a later send of the same name cannot change bytes gRPC still reads.
  auto lent = std::make_shared<HostTensor>(it->second);
  out = lent->View();
  *token = lent.get();
  lent_[lent.get()] = lent;
  return OkStatus();
}

void RecordingHandler::ServePrefetch(const std::string& name, HostTensor table) {
  std::lock_guard<std::mutex> lock(mu_);
  prefetch_tables_[name] = std::move(table);
}

Status RecordingHandler::OnPrefetch(int32_t trainer_id, std::string_view name,
                                    const int64_t* ids, int64_t num_ids, FleetTensor& out,
                                    void** token) {
  std::unique_lock<std::mutex> lock(mu_);
  ++prefetch_calls_;
  if (prefetch_tables_.empty()) {
    lock.unlock();
    return TransportHandler::OnPrefetch(trainer_id, name, ids, num_ids, out, token);
  }
  if (!WaitIfBlocked(lock)) return DeadlineExceeded("test handler: prefetch blocked too long");
  auto it = prefetch_tables_.find(std::string(name));
  if (it == prefetch_tables_.end()) {
    return NotFound("test handler: no variable '" + std::string(name) + "' to prefetch from");
  }
  const HostTensor& table = it->second;
  if (table.dims.empty()) {
    return InvalidArgument("test handler: '" + std::string(name) + "' is a scalar: no rows");
  }
  const int64_t height = table.dims[0];
  std::vector<int64_t> dims = table.dims;
  dims[0] = num_ids;
  auto lent = std::make_shared<HostTensor>(HostTensor::Zeros(table.dtype, dims));
  const size_t row_bytes = height > 0 ? table.bytes.size() / static_cast<size_t>(height) : 0;
  for (int64_t i = 0; i < num_ids; ++i) {
    if (ids[i] < 0 || ids[i] >= height) {
      return NotFound("test handler: '" + std::string(name) + "' holds no row " +
                      std::to_string(ids[i]) + " (ids[" + std::to_string(i) + "]; it has " +
                      std::to_string(height) + " rows)");
    }
    std::memcpy(lent->bytes.data() + static_cast<size_t>(i) * row_bytes,
                table.bytes.data() + static_cast<size_t>(ids[i]) * row_bytes, row_bytes);
  }
  out = lent->View();
  *token = lent.get();
  lent_[lent.get()] = lent;
  return OkStatus();
}

int RecordingHandler::prefetch_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefetch_calls_;
}

void RecordingHandler::OnGetDone(void* token) {
  std::lock_guard<std::mutex> lock(mu_);
  lent_.erase(token);
}

Status RecordingHandler::OnBarrier(int32_t trainer_id, int32_t kind) {
  std::unique_lock<std::mutex> lock(mu_);
  ++barrier_calls_;
  if (!barrier_status_.ok()) return barrier_status_;
  if (!WaitIfBlocked(lock)) return DeadlineExceeded("test handler: barrier blocked too long");
  barriers_.emplace_back(trainer_id, kind);
  return OkStatus();
}

Status RecordingHandler::OnComplete(int32_t trainer_id) {
  std::lock_guard<std::mutex> lock(mu_);
  completions_.push_back(trainer_id);
  return OkStatus();
}

void RecordingHandler::BlockCalls(std::chrono::milliseconds max_block) {
  std::lock_guard<std::mutex> lock(mu_);
  blocking_ = true;
  max_block_ = max_block;
}

void RecordingHandler::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  blocking_ = false;
  cv_.notify_all();
}

void RecordingHandler::FailBarriers(Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  barrier_status_ = std::move(status);
}

bool RecordingHandler::Stored(const std::string& name, HostTensor* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = vars_.find(name);
  if (it == vars_.end()) return false;
  *out = it->second;
  return true;
}

std::map<std::string, int32_t> RecordingHandler::senders() const {
  std::lock_guard<std::mutex> lock(mu_);
  return senders_;
}

std::vector<std::pair<int32_t, int32_t>> RecordingHandler::barriers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return barriers_;
}

std::vector<int32_t> RecordingHandler::completions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completions_;
}

int RecordingHandler::barrier_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return barrier_calls_;
}

int RecordingHandler::outstanding_gets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(lent_.size());
}

TransportOptions TestOptions() {
  TransportOptions o;
  o.timeout = std::chrono::milliseconds(10000);
  o.retries = 2;
  return o;
}

std::unique_ptr<Served> Serve(const TransportOptions& options, int port) {
  const ComponentRecord* rec = Transport(nullptr);
  if (rec == nullptr) {
    ADD_FAILURE() << "no transport under test";
    return nullptr;
  }
  auto served = std::make_unique<Served>();
  auto server = TransportServer::Start(*rec, "127.0.0.1:" + std::to_string(port),
                                       &served->handler, options);
  if (!server.ok()) {
    ADD_FAILURE() << "server start: " << server.status().ToString();
    return nullptr;
  }
  served->server = std::move(server).value();
  return served;
}

std::unique_ptr<TransportClient> Connect(const std::string& endpoint, int32_t trainer_id,
                                         const TransportOptions& options) {
  const ComponentRecord* rec = Transport(nullptr);
  if (rec == nullptr) {
    ADD_FAILURE() << "no transport under test";
    return nullptr;
  }
  auto client = TransportClient::Connect(*rec, endpoint, trainer_id, options);
  if (!client.ok()) {
    ADD_FAILURE() << "connect: " << client.status().ToString();
    return nullptr;
  }
  return std::move(client).value();
}

int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

namespace {

bool Run(const std::string& command, std::string* error) {
  const int rc = std::system((command + " >/dev/null 2>&1").c_str());
  if (rc != 0) *error = "command failed (" + std::to_string(rc) + "): " + command;
  return rc == 0;
}

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

const TlsFiles* Certificates(std::string* error) {
  static TlsFiles* files = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fleet-tls-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      failure = "mkdtemp failed";
      return;
    }
    auto f = std::make_unique<TlsFiles>();
    f->dir = tmpl;
    const std::filesystem::path& d = f->dir;
    WriteFile(d / "ca.cnf",
              "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = fleet-test-ca\n"
              "[v3_ca]\nbasicConstraints = critical,CA:TRUE\n"
              "keyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n");
    WriteFile(d / "server.ext",
              "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\n"
              "extendedKeyUsage=serverAuth\n");
    WriteFile(d / "client.ext", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n");
    const std::string cd = "cd '" + d.string() + "' && ";
    const char* const commands[] = {
        "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key",
        "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key",
        "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out client.key",
        "openssl req -x509 -new -key ca.key -config ca.cnf -extensions v3_ca -days 2 -out ca.pem",
        "openssl req -new -key server.key -subj /CN=127.0.0.1 -config ca.cnf -out server.csr",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile server.ext -out server.pem",
        "openssl req -new -key client.key -subj /CN=fleet-trainer -config ca.cnf -out client.csr",
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile client.ext -out client.pem"};
    for (const char* c : commands) {
      if (!Run(cd + c, &failure)) return;
    }
    f->ca = d / "ca.pem";
    f->server_cert = d / "server.pem";
    f->server_key = d / "server.key";
    f->client_cert = d / "client.pem";
    f->client_key = d / "client.key";
    files = f.release();
    // The directory goes at exit; the files are only read while the suite runs.
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(files->dir, ignored);
    });
  });
  if (error != nullptr) *error = failure;
  return files;
}

}  // namespace fleet::conformance::transport
