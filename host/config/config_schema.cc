#include "config/config_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "support/limits.h"
#include "support/text.h"

namespace fleet::config_internal {

// The most bytes of one key or value a message echoes.
constexpr size_t kMaxEchoBytes = 160;

// ---- Diagnostics ------------------------------------------------------------------------------

void Diagnostics::AddOverrideSource(const toml::source_path_ptr& path, size_t index) {
  if (path) override_sources_[path.get()] = index;
}

long Diagnostics::OverrideIndex(const toml::node& node) const {
  auto it = override_sources_.find(node.source().path.get());
  return it == override_sources_.end() ? -1 : static_cast<long>(it->second);
}

bool Diagnostics::IsOverride(const toml::node& node) const { return OverrideIndex(node) >= 0; }

std::string Diagnostics::Where(const toml::node& node, std::string_view key_path) const {
  if (IsOverride(node)) return "--set " + std::string(key_path);
  const toml::source_position& begin = node.source().begin;
  return file_name_ + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column);
}

void Diagnostics::AtPosition(const toml::node& origin, const toml::source_position& position,
                             std::string_view raw_key_path, std::string_view message) {
  // Keys are the user's bytes (a quoted TOML key may hold anything): a plain one is shown as
  // it is, anything else escaped and cut.
  const bool plain = raw_key_path.size() <= kMaxEchoBytes &&
                     std::all_of(raw_key_path.begin(), raw_key_path.end(),
                                 [](char c) { return c > 0x20 && c < 0x7f; });
  const std::string key_path =
      plain ? std::string(raw_key_path) : QuoteForMessage(raw_key_path, kMaxEchoBytes);
  long index = OverrideIndex(origin);
  Entry entry;
  if (index >= 0) {
    // An override has no line and column worth showing; the key it set says it all.
    entry = {static_cast<size_t>(index) + 1, 0, 0, "--set " + std::string(key_path)};
  } else {
    entry = {0, position.line, position.column,
             file_name_ + ":" + std::to_string(position.line) + ":" +
                 std::to_string(position.column) + ": " + std::string(key_path)};
  }
  entry.text += ": ";
  entry.text += message;
  errors_.push_back(std::move(entry));
}

void Diagnostics::AtValue(const toml::node& node, std::string_view key_path,
                          std::string_view message) {
  AtPosition(node, node.source().begin, key_path, message);
}

void Diagnostics::AtKey(const toml::key& key, const toml::node& value, std::string_view key_path,
                        std::string_view message) {
  // A key moved in from an override may have lost its position; the value always keeps its own.
  const toml::source_position& key_begin = key.source().begin;
  AtPosition(value, key_begin.line > 0 ? key_begin : value.source().begin, key_path, message);
}

void Diagnostics::ForOverride(size_t index, std::string line) {
  errors_.push_back({index + 1, 0, 0, std::move(line)});
}

Status Diagnostics::ToStatus() const {
  if (errors_.empty()) return OkStatus();
  std::vector<Entry> sorted = errors_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.rank, a.line, a.column) < std::tie(b.rank, b.line, b.column);
  });
  std::string message;
  for (const Entry& e : sorted) {
    if (!message.empty()) message += '\n';
    message += e.text;
  }
  return InvalidArgument(std::move(message));
}

// ---- Schema -----------------------------------------------------------------------------------

std::string TypeName(const toml::node& node, bool plural) {
  switch (node.type()) {
    case toml::node_type::table:
      return plural ? "tables" : "a table";
    case toml::node_type::array:
      return plural ? "arrays" : "an array";
    case toml::node_type::string:
      return plural ? "strings" : "a string";
    case toml::node_type::integer:
      return plural ? "integers" : "an integer";
    case toml::node_type::floating_point:
      return plural ? "floats" : "a float";
    case toml::node_type::boolean:
      return plural ? "booleans" : "a boolean";
    case toml::node_type::date:
      return plural ? "dates" : "a date";
    case toml::node_type::time:
      return plural ? "times" : "a time";
    case toml::node_type::date_time:
      return plural ? "date-times" : "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kLogLevels = {"trace", "debug", "info", "warn", "error"};
const std::vector<std::string> kStrategyModes = {"auto", "none", "collective", "pserver"};
const std::vector<std::string> kCollectiveModes = {"grad_allreduce", "local_sgd",
                                                   "single_process_multi_thread"};
const std::vector<std::string> kStores = {"tcp", "file"};
const std::vector<std::string> kCollectiveChecks = {"step", "every", "off"};
const std::vector<std::string> kSplitMethods = {"round_robin", "hash_name"};
const std::vector<std::string> kSparseExchanges = {"auto", "gather", "dense"};
const std::vector<std::string> kPserverInits = {"full", "shard"};
const std::vector<std::string> kDataSources = {"synthetic", "csv", "multislot", "npy"};
const std::vector<std::string> kDatasets = {"memory", "queue"};
const std::vector<std::string> kLastBatch = {"wrap", "drop", "pad"};
const std::vector<std::string> kBadLines = {"error", "skip"};

// A value as the user wrote it, for "got ..." when the type was right but the value was not.
std::string ValueText(const toml::node& node) {
  if (const auto* s = node.as_string()) return QuoteForMessage(s->get());
  std::ostringstream out;
  node.visit([&](const auto& value) { out << value; });
  std::string text = out.str();
  if (text.size() > kMaxEchoBytes) text = text.substr(0, kMaxEchoBytes) + "...";
  return text;
}

bool IsNameChar(char c, bool allow_dot_dash) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') {
    return true;
  }
  return allow_dot_dash && (c == '.' || c == '-');
}

// Component names appear in messages and APIs; plugin names also become file names
// (libfleet_NAME.so), hence the stricter set.
bool IsName(std::string_view s, bool allow_dot_dash) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [&](char c) { return IsNameChar(c, allow_dot_dash); });
}
bool IsComponentName(std::string_view s) { return IsName(s, true); }
bool IsPluginName(std::string_view s) { return IsName(s, false); }

// Caps on values that size memory, threads or peers. The batch (and the class count, which
// sizes a label range) is indexed with int by the kernels' libraries, so 2^31 - 1.
constexpr int64_t kMaxBatch = 2147483647;
constexpr int64_t kMaxThreads = 4096;
constexpr int64_t kMaxWorld = kMaxWorldSize;
// strategy.devices: the ranks of one process connect every two of them (Gloo's full mesh), so
// N devices hold N(N - 1) sockets on loopback ports. 64 peaked at 4102 open files and took
// about a second to connect; 128 took 16k files, 20k of the host's 28k ephemeral ports and 25 s;
// 1024 would need a million sockets, more ports than an address has, and never connected. No
// machine has more than 16 accelerators, and CPU places share the cores, which train.threads
// uses better; more ranks than this are processes (fleet-host launch --nproc N).
constexpr int64_t kMaxDevices = 64;
constexpr int64_t kMaxRings = 64;
constexpr int64_t kMaxQueue = 65536;
constexpr int64_t kMaxRetries = 1000;

constexpr std::string_view kComponentNameRule = "a component name ([A-Za-z0-9_.-]+)";
constexpr std::string_view kPluginNameRule = "a plugin name ([A-Za-z0-9_]+)";

std::string Join(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  return std::string(prefix) + "." + std::string(key);
}

fs::path Absolute(const fs::path& base, const fs::path& p) {
  fs::path out = (p.is_absolute() ? p : base / p).lexically_normal();
  // "plugins/" and "plugins" are the same directory; keep one spelling.
  if (!out.has_filename() && out.has_relative_path()) out = out.parent_path();
  return out;
}

// A number node as a double. TOML++'s own conversion refuses integers beyond 2^53; a timeout or
// a plugin's float list can live with the rounding.
double AsDouble(const toml::node& number) {
  if (const auto* i = number.as_integer()) return static_cast<double>(i->get());
  return number.as_floating_point()->get();
}

using PluginValue = decltype(ConfigValue::value);

class Checker {
 public:
  Checker(const fs::path& base_dir, const fs::path& cwd, Diagnostics& diag)
      : base_dir_(base_dir), cwd_(cwd), diag_(diag) {}

  Config Check(const toml::table& root) {
    Config config;
    CheckKeys(root, "",
              {"plugins", "device", "comm", "transport", "log", "strategy", "passes", "train",
               "checkpoint", "eval", "data", "role"});
    if (const toml::table* t = Table(root, "", "plugins")) ReadPlugins(*t, config.plugins);
    if (const toml::table* t = Table(root, "", "device")) {
      CheckKeys(*t, "device", {"backend", "plugin"});
      ReadBackend(*t, "device", "", config.device);
    }
    if (const toml::table* t = Table(root, "", "comm")) {
      CheckKeys(*t, "comm",
                {"backend", "plugin", "timeout_s", "hostname", "store", "store_dir", "staging",
                 "check", "secret_file"});
      ReadBackend(*t, "comm", "comm_", config.comm);
      ReadBool(*t, "comm", "staging", config.comm_staging);
      ReadEnum(*t, "comm", "check", kCollectiveChecks, config.comm_check);
      if (const toml::node* n = t->get("timeout_s")) {
        ReadTimeout(*n, "comm.timeout_s", config.comm_timeout_s);
      }
      if (const toml::node* n = t->get("hostname")) {
        if (std::optional<std::string> h = String(*n, "comm.hostname")) config.comm_hostname = *h;
      }
      ReadEnum(*t, "comm", "store", kStores, config.comm_store);
      if (const toml::node* n = t->get("store_dir")) {
        const auto* s = n->as_string();
        if (s == nullptr || !s->get().empty()) {  // "" is the default: not set
          if (std::optional<fs::path> d = Path(*n, "comm.store_dir")) config.comm_store_dir = *d;
        }
      }
      ReadSecretFile(*t, "comm", config.comm_secret_file);
    }
    if (const toml::table* t = Table(root, "", "transport")) {
      ReadTransport(*t, config);
    }
    if (const toml::table* t = Table(root, "", "log")) {
      CheckKeys(*t, "log", {"level"});
      ReadEnum(*t, "log", "level", kLogLevels, config.log_level);
    }
    if (const toml::table* t = Table(root, "", "strategy")) {
      CheckKeys(*t, "strategy", {"mode", "collective_mode", "devices", "nrings",
                                 "local_sgd_k_steps", "fuse_grad_size_mb", "sync_batch_norm",
                                 "sparse_exchange", "passes", "sync_mode",
                                 "slice_var_up", "min_block_size", "split_method",
                                 "pserver_init", "a_sync", "a_sync_configs",
                                 "growable_tables"});
      ReadEnum(*t, "strategy", "mode", kStrategyModes, config.strategy_mode);
      for (const auto& [key, node] : *t) {
        config.strategy_where[std::string(key.str())] =
            diag_.Where(node, "strategy." + std::string(key.str()));
      }
      Config::Collective& c = config.collective;
      ReadEnum(*t, "strategy", "collective_mode", kCollectiveModes, c.mode);
      ReadInt(*t, "strategy", "devices", 1, c.devices, kMaxDevices);
      ReadInt(*t, "strategy", "nrings", 1, c.nrings, kMaxRings);
      ReadInt(*t, "strategy", "local_sgd_k_steps", 1, c.local_sgd_k_steps);
      ReadBool(*t, "strategy", "sync_batch_norm", c.sync_batch_norm);
      ReadEnum(*t, "strategy", "sparse_exchange", kSparseExchanges, c.sparse_exchange);
      Config::Pserver& ps = config.pserver;
      ReadBool(*t, "strategy", "sync_mode", ps.sync_mode);
      ReadBool(*t, "strategy", "slice_var_up", ps.slice_var_up);
      ReadInt(*t, "strategy", "min_block_size", 1, ps.min_block_size);
      ReadEnum(*t, "strategy", "split_method", kSplitMethods, ps.split_method);
      ReadEnum(*t, "strategy", "pserver_init", kPserverInits, ps.init);
      ReadAsync(*t, config);
      ReadGrowableTables(*t, config);
      if (const toml::node* n = t->get("fuse_grad_size_mb")) {
        if (!n->is_number() || !(AsDouble(*n) >= 0) || !std::isfinite(AsDouble(*n))) {
          diag_.AtValue(*n, "strategy.fuse_grad_size_mb",
                        "expected a number >= 0, got " +
                            (n->is_number() ? ValueText(*n) : TypeName(*n)));
        } else {
          c.fuse_grad_size_mb = AsDouble(*n);
        }
      }
      if (const toml::node* n = t->get("passes")) {
        c.passes_where = diag_.Where(*n, "strategy.passes");
        ReadStrings(*n, "strategy.passes",
                    [&](const toml::node&, const std::string&, const std::string& v) {
                      c.passes.push_back(v);
                    });
      }
    }
    if (const toml::table* t = Table(root, "", "passes")) {
      ReadValueTables(*t, "passes", config.passes);
    }
    if (const toml::table* t = Table(root, "", "train")) ReadTrain(*t, config.train);
    if (const toml::table* t = Table(root, "", "checkpoint")) {
      ReadCheckpoint(*t, config.checkpoint);
    }
    if (const toml::table* t = Table(root, "", "data")) ReadData(*t, config.data);
    if (const toml::table* t = Table(root, "", "eval")) ReadEval(*t, config.eval);
    if (const toml::table* t = Table(root, "", "role")) ReadRole(*t, config.role);
    return config;
  }

 private:
  // Reports every key of `table` outside `known`, suggesting the closest known one.
  void CheckKeys(const toml::table& table, std::string_view prefix,
                 std::initializer_list<std::string> known) {
    std::vector<std::string> candidates(known);
    for (const auto& [key, node] : table) {
      if (std::find(candidates.begin(), candidates.end(), key.str()) != candidates.end()) continue;
      bool is_table = node.is_table() && !node.as_table()->is_inline();
      std::string message = is_table ? "unknown table" : "unknown key";
      std::string match = ClosestMatch(key.str(), candidates);
      if (!match.empty()) message += " (did you mean '" + Join(prefix, match) + "'?)";
      std::string path = Join(prefix, key.str());
      // A [table] header is the table's position; a key's is where the key starts.
      if (is_table) {
        diag_.AtValue(node, path, message);
      } else {
        diag_.AtKey(key, node, path, message);
      }
    }
  }

  // The sub-table `name` of `parent`, or null when absent or not a table (reported).
  const toml::table* Table(const toml::table& parent, std::string_view prefix,
                           std::string_view name) {
    const toml::node* node = parent.get(name);
    if (node == nullptr) return nullptr;
    if (!node->is_table()) {
      diag_.AtValue(*node, Join(prefix, name), "expected a table, got " + TypeName(*node));
      return nullptr;
    }
    return node->as_table();
  }

  std::optional<std::string> String(const toml::node& node, std::string_view path) {
    if (const auto* s = node.as_string()) return s->get();
    diag_.AtValue(node, path, "expected a string, got " + TypeName(node));
    return std::nullopt;
  }

  void ReadPlugins(const toml::table& t, Config::Plugins& out) {
    CheckKeys(t, "plugins", {"dirs", "allow_insecure", "load", "optional", "config"});
    if (const toml::node* n = t.get("dirs")) {
      ReadStrings(*n, "plugins.dirs",
                  [&](const toml::node& item, const std::string& path, const std::string& value) {
                    if (value.empty()) {
                      diag_.AtValue(item, path, "expected a directory path, got ''");
                      return;
                    }
                    out.dirs.push_back(Absolute(diag_.IsOverride(item) ? cwd_ : base_dir_, value));
                  });
    }
    if (const toml::node* n = t.get("allow_insecure")) {
      if (const auto* b = n->as_boolean()) {
        out.allow_insecure = b->get();
      } else {
        diag_.AtValue(*n, "plugins.allow_insecure", "expected a boolean, got " + TypeName(*n));
      }
    }
    for (auto [key, binding] :
         {std::pair{"load", &out.load}, std::pair{"optional", &out.optional}}) {
      const toml::node* n = t.get(key);
      if (n == nullptr) continue;
      std::vector<std::string>* list = binding;  // a lambda may not capture a binding (clang 14)
      ReadStrings(*n, Join("plugins", key),
                  [&](const toml::node& item, const std::string& path, const std::string& value) {
                    if (IsPluginName(value)) {
                      list->push_back(value);
                    } else {
                      diag_.AtValue(
                          item, path,
                          "expected " + std::string(kPluginNameRule) + ", got '" + value + "'");
                    }
                  });
    }
    if (const toml::table* config = Table(t, "plugins", "config")) {
      ReadValueTables(*config, "plugins.config", out.config);
    }
  }

  // Tables of typed values keyed by a component name ([plugins.config.NAME], [passes.NAME]),
  // checked for their shape only: what the keys mean is up to the plugin or pass, which checks
  // them when it is loaded.
  void ReadValueTables(const toml::table& tables, std::string_view prefix,
                       std::map<std::string, std::vector<ConfigValue>>& out) {
    for (const auto& [name, node] : tables) {
      std::string path = Join(prefix, name.str());
      if (!IsPluginName(name.str())) {
        diag_.AtKey(name, node, path,
                    "expected " + std::string(kPluginNameRule) + ", got '" +
                        std::string(name.str()) + "'");
        continue;
      }
      if (!node.is_table()) {
        diag_.AtValue(node, path, "expected a table, got " + TypeName(node));
        continue;
      }
      std::vector<ConfigValue>& values = out[std::string(name.str())];
      for (const auto& [key, value_node] : *node.as_table()) {
        std::string value_path = Join(path, key.str());
        if (std::optional<PluginValue> value = PluginConfigValue(value_node, value_path)) {
          values.push_back(
              {std::string(key.str()), std::move(*value), diag_.Where(value_node, value_path)});
        }
      }
    }
  }

  // Calls `on_item(node, path, value)` for each string of the array `node`; reports the rest.
  template <typename OnItem>
  void ReadStrings(const toml::node& node, std::string_view path, OnItem on_item) {
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      diag_.AtValue(node, path, "expected an array of strings, got " + TypeName(node));
      return;
    }
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& item = *array->get(i);
      std::string item_path = std::string(path) + "[" + std::to_string(i) + "]";
      if (std::optional<std::string> s = String(item, item_path)) on_item(item, item_path, *s);
    }
  }

  void ReadBackend(const toml::table& t, std::string_view section, std::string_view plugin_prefix,
                   BackendChoice& out) {
    const toml::node* backend_node = t.get("backend");
    std::string backend_path = Join(section, "backend");
    if (backend_node != nullptr) {
      if (std::optional<std::string> s = String(*backend_node, backend_path)) {
        if (IsComponentName(*s)) {
          out.backend = *s;
        } else {
          diag_.AtValue(*backend_node, backend_path,
                        "expected " + std::string(kComponentNameRule) + ", got '" + *s + "'");
          backend_node = nullptr;  // one error about the backend is enough
        }
      } else {
        backend_node = nullptr;
      }
    }
    std::string plugin;
    if (const toml::node* n = t.get("plugin")) {
      std::string path = Join(section, "plugin");
      if (std::optional<std::string> s = String(*n, path)) {
        if (s->empty() || IsPluginName(*s)) {
          plugin = *s;
        } else {
          diag_.AtValue(*n, path,
                        "expected " + std::string(kPluginNameRule) + ", got '" + *s + "'");
        }
      }
    }
    if (plugin.empty()) {
      plugin = std::string(plugin_prefix) + out.backend;
      // Component names may hold '.' and '-', plugin names may not: such a backend needs its
      // plugin named explicitly rather than a file name that can never exist.
      if (!IsPluginName(plugin) && backend_node != nullptr) {
        diag_.AtValue(*backend_node, backend_path,
                      "the default plugin name '" + plugin + "' is not " +
                          std::string(kPluginNameRule) + "; set " + Join(section, "plugin"));
      }
    }
    out.plugin = plugin;
  }

  // [transport]: the backend, then the RPC options (config.rpc). TLS file paths resolve like
  // plugin dirs; whether the files exist and hold what they should is the transport's to say.
  void ReadTransport(const toml::table& t, Config& config) {
    CheckKeys(t, "transport",
              {"backend", "plugin", "timeout_s", "retries", "max_message_mb", "token", "tls",
               "tls_cert", "tls_key", "tls_ca", "tls_client_cert", "tls_client_key",
               "secret_file"});
    ReadBackend(t, "transport", "transport_", config.transport);
    Config::Rpc& rpc = config.rpc;
    if (const toml::node* n = t.get("timeout_s")) {
      ReadTimeout(*n, "transport.timeout_s", rpc.timeout_s);
    }
    ReadInt(t, "transport", "retries", 0, rpc.retries, kMaxRetries);
    if (rpc.retries > 100) {
      diag_.AtValue(*t.get("retries"), "transport.retries",
                    "expected an integer in [0, 100], got " + ValueText(*t.get("retries")));
      rpc.retries = 3;
    }
    if (const toml::node* n = t.get("max_message_mb")) {
      // At least 128 KiB: a message carries a header besides its bytes, and the transport
      // keeps 64 KiB of each for it. At most 2047 MiB: gRPC's sizes are ints.
      if (!n->is_number() || !(AsDouble(*n) >= 0.125) || !(AsDouble(*n) <= 2047.0)) {
        diag_.AtValue(*n, "transport.max_message_mb",
                      "expected a number in [0.125, 2047], got " +
                          (n->is_number() ? ValueText(*n) : TypeName(*n)));
      } else {
        rpc.max_message_mb = AsDouble(*n);
      }
    }
    if (const toml::node* n = t.get("token")) {
      if (std::optional<std::string> s = String(*n, "transport.token")) rpc.token = *s;
    }
    ReadSecretFile(t, "transport", rpc.secret_file);
    ReadBool(t, "transport", "tls", rpc.tls);
    for (auto [key, path] : {std::pair{"tls_cert", &rpc.tls_cert},
                             std::pair{"tls_key", &rpc.tls_key}, std::pair{"tls_ca", &rpc.tls_ca},
                             std::pair{"tls_client_cert", &rpc.tls_client_cert},
                             std::pair{"tls_client_key", &rpc.tls_client_key}}) {
      const toml::node* n = t.get(key);
      if (n == nullptr) continue;
      const auto* s = n->as_string();
      if (s != nullptr && s->get().empty()) continue;  // "" is the default: not set
      if (std::optional<fs::path> p = Path(*n, Join("transport", key))) *path = *p;
    }
  }

  // secret_file of [comm] or [transport]: a path, resolved like the others; "" = not set. The
  // file itself is read (and its permissions checked) only when the job needs its secret.
  void ReadSecretFile(const toml::table& t, std::string_view section, fs::path& out) {
    const toml::node* n = t.get("secret_file");
    if (n == nullptr) return;
    const auto* s = n->as_string();
    if (s != nullptr && s->get().empty()) return;
    if (std::optional<fs::path> p = Path(*n, Join(section, "secret_file"))) out = *p;
  }

  void ReadBool(const toml::table& t, std::string_view section, std::string_view key, bool& out) {
    const toml::node* node = t.get(key);
    if (node == nullptr) return;
    if (const auto* b = node->as_boolean()) {
      out = b->get();
    } else {
      diag_.AtValue(*node, Join(section, key), "expected a boolean, got " + TypeName(*node));
    }
  }

  void ReadTimeout(const toml::node& node, std::string_view path, double& out) {
    constexpr std::string_view kExpected = "expected a number >= 0.001, got ";
    if (!node.is_number()) {
      diag_.AtValue(node, path, std::string(kExpected) + TypeName(node));
      return;
    }
    double value = AsDouble(node);
    // Waits are kept in whole milliseconds, so anything below one would be no wait at all.
    if (!(value >= 0.001) || value == std::numeric_limits<double>::infinity()) {
      diag_.AtValue(node, path, std::string(kExpected) + ValueText(node));
    } else {
      out = value;
    }
  }

  void ReadEnum(const toml::table& t, std::string_view section, std::string_view key,
                const std::vector<std::string>& allowed, std::string& out) {
    const toml::node* node = t.get(key);
    if (node == nullptr) return;
    std::string path = Join(section, key);
    std::string expected = "expected one of " + JoinWords(allowed, " or ") + ", got ";
    const auto* s = node->as_string();
    if (s == nullptr) {
      diag_.AtValue(*node, path, expected + TypeName(*node));
    } else if (std::find(allowed.begin(), allowed.end(), s->get()) == allowed.end()) {
      diag_.AtValue(*node, path, expected + ValueText(*node));
    } else {
      out = s->get();
    }
  }

  // An integer key of `t` in [min, max]. Keys that size memory or thread counts have a `max`:
  // a value past any machine is refused here, not met later as an int overflow, a failed
  // allocation or a crash inside a library.
  void ReadInt(const toml::table& t, std::string_view section, std::string_view key, int64_t min,
               int64_t& out, int64_t max = std::numeric_limits<int64_t>::max()) {
    const toml::node* node = t.get(key);
    if (node == nullptr) return;
    std::string path = Join(section, key);
    std::string expected =
        max == std::numeric_limits<int64_t>::max()
            ? "expected an integer >= " + std::to_string(min) + ", got "
            : "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                  "], got ";
    const auto* i = node->as_integer();
    if (i == nullptr) {
      diag_.AtValue(*node, path, expected + TypeName(*node));
    } else if (i->get() < min || i->get() > max) {
      diag_.AtValue(*node, path, expected + ValueText(*node));
    } else {
      out = i->get();
    }
  }

  // strategy.a_sync and [strategy.a_sync_configs] (Fleet 2.x's names), after sync_mode.
  void ReadAsync(const toml::table& t, Config& config) {
    Config::Pserver& ps = config.pserver;
    const toml::node* a_sync = t.get("a_sync");
    if (a_sync != nullptr) {
      ReadBool(t, "strategy", "a_sync", ps.a_sync);
      const toml::node* sync = t.get("sync_mode");
      if (sync != nullptr && sync->is_boolean() && a_sync->is_boolean() &&
          sync->as_boolean()->get() == ps.a_sync) {
        diag_.AtValue(*a_sync, "strategy.a_sync",
                      std::string("a_sync = ") + (ps.a_sync ? "true" : "false") +
                          " means sync_mode = " + (ps.a_sync ? "false" : "true") +
                          ", but sync_mode = " + (ps.a_sync ? "true" : "false") + " is set at " +
                          diag_.Where(*sync, "strategy.sync_mode") + "; keep one");
      }
      ps.sync_mode = !ps.a_sync;
    }
    const toml::table* c = Table(t, "strategy", "a_sync_configs");
    if (c == nullptr) return;
    const std::string section = "strategy.a_sync_configs";
    for (const auto& [key, node] : *c) {
      config.strategy_where["a_sync_configs." + std::string(key.str())] =
          diag_.Where(node, section + "." + std::string(key.str()));
    }
    CheckKeys(*c, section,
              {"k_steps", "max_merge_var_num", "send_queue_size", "independent_recv_thread",
               "thread_pool_size", "send_wait_times", "runtime_split_send_recv"});
    Config::Pserver::AsyncConfigs& o = ps.a_sync_configs;
    ReadInt(*c, section, "k_steps", -1, o.k_steps, 1000000);
    ReadInt(*c, section, "max_merge_var_num", 1, o.max_merge_var_num, 1024);
    ReadInt(*c, section, "send_queue_size", 1, o.send_queue_size, 1024);
    ReadBool(*c, section, "independent_recv_thread", o.independent_recv_thread);
    ReadInt(*c, section, "thread_pool_size", 1, o.thread_pool_size, 64);
    ReadInt(*c, section, "send_wait_times", 0, o.send_wait_times, 1000);
    ReadBool(*c, section, "runtime_split_send_recv", o.runtime_split_send_recv);
  }

  // [strategy.growable_tables]: how the servers keep tables declared with size [-1, dim].
  void ReadGrowableTables(const toml::table& t, Config& config) {
    const toml::table* c = Table(t, "strategy", "growable_tables");
    if (c == nullptr) return;
    const std::string section = "strategy.growable_tables";
    CheckKeys(*c, section, {"admit_after", "evict_after"});
    Config::Pserver::GrowableTables& o = config.pserver.growable_tables;
    ReadInt(*c, section, "admit_after", 1, o.admit_after, int64_t{1} << 40);
    ReadInt(*c, section, "evict_after", 0, o.evict_after, int64_t{1} << 40);
  }

  void ReadTrain(const toml::table& t, Config::Train& out) {
    CheckKeys(t, "train",
              {"steps", "batch_size", "seed", "threads", "log_every", "metrics_file", "profile",
               "save_params_dir", "init_from", "check_replicas", "fetch", "tensorboard_dir"});
    ReadInt(t, "train", "steps", 1, out.steps);
    ReadInt(t, "train", "batch_size", 1, out.batch_size, kMaxBatch);
    ReadInt(t, "train", "seed", 0, out.seed);
    ReadInt(t, "train", "threads", 0, out.threads, kMaxThreads);
    ReadInt(t, "train", "log_every", 1, out.log_every);
    if (const toml::node* n = t.get("metrics_file")) {
      if (std::optional<std::string> s = String(*n, "train.metrics_file")) out.metrics_file = *s;
    }
    for (auto [key, flag] : {std::pair{"profile", &out.profile},
                             std::pair{"check_replicas", &out.check_replicas}}) {
      if (const toml::node* n = t.get(key)) {
        if (const auto* b = n->as_boolean()) {
          *flag = b->get();
        } else {
          diag_.AtValue(*n, Join("train", key), "expected a boolean, got " + TypeName(*n));
        }
      }
    }
    if (const toml::node* n = t.get("save_params_dir")) {
      const auto* s = n->as_string();
      if (s == nullptr || !s->get().empty()) {  // "" is the default: none
        if (std::optional<fs::path> d = Path(*n, "train.save_params_dir")) {
          out.save_params_dir = *d;
        }
      }
    }
    if (const toml::node* n = t.get("init_from")) {
      const auto* s = n->as_string();
      if (s == nullptr || !s->get().empty()) {  // "" is the default: none
        if (std::optional<fs::path> d = Path(*n, "train.init_from")) out.init_from = *d;
      }
    }
    if (const toml::node* n = t.get("tensorboard_dir")) {
      const auto* s = n->as_string();
      if (s == nullptr || !s->get().empty()) {  // "" is the default: none
        if (std::optional<fs::path> d = Path(*n, "train.tensorboard_dir")) {
          out.tensorboard_dir = *d;
        }
      }
    }
    if (const toml::node* n = t.get("fetch")) {
      ReadStrings(*n, "train.fetch",
                  [&](const toml::node& item, const std::string& path, const std::string& value) {
                    if (value.empty()) {
                      diag_.AtValue(item, path, "expected a var name, got ''");
                    } else if (std::find(out.fetch.begin(), out.fetch.end(), value) !=
                               out.fetch.end()) {
                      diag_.AtValue(item, path, QuoteForMessage(value) + " is listed twice");
                    } else {
                      out.fetch.push_back(value);
                    }
                  });
    }
  }

  void ReadCheckpoint(const toml::table& t, Config::Checkpoint& out) {
    CheckKeys(t, "checkpoint", {"dir", "every_steps", "keep", "resume"});
    if (const toml::node* n = t.get("dir")) {
      const auto* s = n->as_string();
      if (s == nullptr || !s->get().empty()) {  // "" is the default: none
        if (std::optional<fs::path> d = Path(*n, "checkpoint.dir")) out.dir = *d;
      }
    }
    ReadInt(t, "checkpoint", "every_steps", 1, out.every_steps);
    ReadInt(t, "checkpoint", "keep", 0, out.keep);
    ReadBool(t, "checkpoint", "resume", out.resume);
    if (const toml::node* n = t.get("resume"); n != nullptr && out.resume && out.dir.empty()) {
      diag_.AtValue(*n, "checkpoint.resume", "needs checkpoint.dir");
    }
  }

  // Files or glob patterns, made absolute: relative to the config file, or to the current
  // directory when given with --set.
  void ReadFileList(const toml::node& node, std::string_view path,
                    std::vector<std::string>& out) {
    ReadStrings(node, path,
                [&](const toml::node& item, const std::string& item_path,
                    const std::string& value) {
                  if (value.empty()) {
                    diag_.AtValue(item, item_path, "expected a file path or pattern, got ''");
                    return;
                  }
                  out.push_back(
                      Absolute(diag_.IsOverride(item) ? cwd_ : base_dir_, value).string());
                });
  }

  void ReadEval(const toml::table& t, Config::Eval& out) {
    CheckKeys(t, "eval", {"filelist", "every_steps", "batch_size", "batches"});
    if (const toml::node* n = t.get("filelist")) {
      out.where = diag_.Where(*n, "eval.filelist");
      ReadFileList(*n, "eval.filelist", out.filelist);
    }
    if (out.filelist.empty()) out.where.clear();  // `filelist = []` evaluates nothing
    ReadInt(t, "eval", "every_steps", 0, out.every_steps);
    ReadInt(t, "eval", "batch_size", 0, out.batch_size, kMaxBatch);
    ReadInt(t, "eval", "batches", 0, out.batches);
    // A key set to other than its default says evaluations were meant.
    if (out.filelist.empty()) {
      for (auto [key, value] : {std::pair{"every_steps", out.every_steps},
                                std::pair{"batch_size", out.batch_size},
                                std::pair{"batches", out.batches}}) {
        const toml::node* n = t.get(key);
        if (n != nullptr && value != 0) {
          diag_.AtValue(*n, Join("eval", key), "needs eval.filelist (the files to evaluate on)");
        }
      }
    }
  }

  // [role]: types and ranges here; endpoint syntax and agreement with the environment are
  // checked by roles/role.cc, which sees both. Only keys set to something other than their
  // "not set" value get an entry in `where`, so a file spelling out the defaults equals none.
  void ReadRole(const toml::table& t, Config::Role& out) {
    CheckKeys(t, "role",
              {"role", "rank", "world_size", "trainer_endpoints", "current_endpoint",
               "pserver_endpoints", "master", "local_rank", "mpi_symmetric"});
    auto note = [&](std::string_view key, bool is_set) {
      const toml::node* n = t.get(key);
      if (n != nullptr && is_set) out.where[std::string(key)] = diag_.Where(*n, Join("role", key));
    };
    if (const toml::node* n = t.get("role")) {
      if (std::optional<std::string> s = String(*n, "role.role")) {
        if (s->empty() || *s == "trainer" || *s == "pserver") {
          out.role = *s;
        } else {
          diag_.AtValue(*n, "role.role",
                        "expected \"\" (from the environment), trainer or pserver, got " +
                            ValueText(*n));
        }
      }
    }
    note("role", !out.role.empty());
    ReadInt(t, "role", "rank", -1, out.rank, kMaxWorld - 1);
    note("rank", out.rank != -1);
    ReadInt(t, "role", "world_size", 0, out.world_size, kMaxWorld);
    note("world_size", out.world_size != 0);
    ReadInt(t, "role", "local_rank", -1, out.local_rank, kMaxWorld - 1);
    note("local_rank", out.local_rank != -1);
    ReadBool(t, "role", "mpi_symmetric", out.mpi_symmetric);
    note("mpi_symmetric", out.mpi_symmetric);
    for (auto [key, binding] : {std::pair{"trainer_endpoints", &out.trainer_endpoints},
                                std::pair{"pserver_endpoints", &out.pserver_endpoints}}) {
      const toml::node* n = t.get(key);
      if (n == nullptr) continue;
      std::vector<std::string>* list = binding;  // a lambda may not capture a binding (clang 14)
      ReadStrings(*n, Join("role", key),
                  [&](const toml::node&, const std::string&, const std::string& value) {
                    list->push_back(value);
                  });
      note(key, !list->empty());
    }
    for (auto [key, value] : {std::pair{"current_endpoint", &out.current_endpoint},
                              std::pair{"master", &out.master}}) {
      const toml::node* n = t.get(key);
      if (n == nullptr) continue;
      if (std::optional<std::string> s = String(*n, Join("role", key))) *value = *s;
      note(key, !value->empty());
    }
  }

  // A file path: non-empty, relative ones resolved like plugin dirs.
  std::optional<fs::path> Path(const toml::node& node, const std::string& path) {
    std::optional<std::string> s = String(node, path);
    if (!s) return std::nullopt;
    if (s->empty()) {
      diag_.AtValue(node, path, "expected a file path, got ''");
      return std::nullopt;
    }
    return Absolute(diag_.IsOverride(node) ? cwd_ : base_dir_, *s);
  }

  // One feed's columns: an index, an array of indices or a "start:end" range (end excluded).
  void ReadColumns(const toml::node& node, const std::string& path, std::vector<int64_t>& out) {
    // Indices past any real row's width would size the parser's column table.
    constexpr int64_t kMaxColumn = int64_t{1} << 20;
    constexpr std::string_view kExpected =
        "expected a column index in [0, 1048576), an array of them or a \"start:end\" range, "
        "got ";
    if (const auto* i = node.as_integer()) {
      if (i->get() >= 0 && i->get() < kMaxColumn) {
        out.push_back(i->get());
        return;
      }
    } else if (const auto* a = node.as_array()) {
      bool ok = !a->empty();
      for (const toml::node& item : *a) {
        const auto* v = item.as_integer();
        ok = ok && v != nullptr && v->get() >= 0 && v->get() < kMaxColumn;
        if (ok) out.push_back(v->get());
      }
      if (ok) return;
      out.clear();
      diag_.AtValue(node, path, std::string(kExpected) + "an array that is not one");
      return;
    } else if (const auto* s = node.as_string()) {
      const std::string& text = s->get();
      size_t colon = text.find(':');
      if (colon != std::string::npos) {
        char* end = nullptr;
        std::string a = text.substr(0, colon), b = text.substr(colon + 1);
        long long start = std::strtoll(a.c_str(), &end, 10);
        bool ok = !a.empty() && *end == '\0';
        long long stop = std::strtoll(b.c_str(), &end, 10);
        ok = ok && !b.empty() && *end == '\0' && start >= 0 && stop > start &&
             stop <= kMaxColumn;
        if (ok) {
          for (long long c = start; c < stop; ++c) out.push_back(c);
          return;
        }
      }
    }
    diag_.AtValue(node, path,
                  std::string(kExpected) + (node.is_array() ? TypeName(node) : ValueText(node)));
  }

  void ReadData(const toml::table& t, Config::Data& out) {
    CheckKeys(t, "data",
              {"source", "label", "classes", "filelist", "slots", "dataset", "shuffle",
               "last_batch", "bad_lines", "queue_batches", "shard", "files", "csv"});
    ReadEnum(t, "data", "source", kDataSources, out.source);
    if (const toml::node* n = t.get("source")) out.where = diag_.Where(*n, "data.source");
    if (const toml::node* n = t.get("label")) {
      if (std::optional<std::string> s = String(*n, "data.label")) out.label = *s;
    }
    ReadInt(t, "data", "classes", 0, out.classes, kMaxBatch);
    if (const toml::node* n = t.get("filelist")) {
      ReadFileList(*n, "data.filelist", out.filelist);
    }
    if (const toml::node* n = t.get("slots")) {
      ReadStrings(*n, "data.slots",
                  [&](const toml::node& item, const std::string& path, const std::string& value) {
                    if (value.empty()) {
                      diag_.AtValue(item, path, "expected a slot name, got ''");
                    } else if (std::find(out.slots.begin(), out.slots.end(), value) !=
                               out.slots.end()) {
                      diag_.AtValue(item, path, "slot '" + value + "' is named twice");
                    } else {
                      out.slots.push_back(value);
                    }
                  });
    }
    ReadEnum(t, "data", "dataset", kDatasets, out.dataset);
    ReadBool(t, "data", "shuffle", out.shuffle);
    ReadEnum(t, "data", "last_batch", kLastBatch, out.last_batch);
    ReadEnum(t, "data", "bad_lines", kBadLines, out.bad_lines);
    ReadInt(t, "data", "queue_batches", 0, out.queue_batches, kMaxQueue);
    if (const toml::node* n = t.get("shard")) {
      if (const auto* b = n->as_boolean()) {
        out.shard = b->get() ? "true" : "false";
      } else if (const auto* s = n->as_string(); s != nullptr && s->get() == "auto") {
        out.shard = "auto";
      } else {
        diag_.AtValue(*n, "data.shard",
                      "expected true, false or 'auto', got " +
                          (n->is_string() ? ValueText(*n) : TypeName(*n)));
      }
    }
    if (const toml::node* n = t.get("shuffle"); n != nullptr && out.shuffle &&
                                                 out.dataset == "queue") {
      diag_.AtValue(*n, "data.shuffle",
                    "needs data.dataset = 'memory' (a queue dataset streams its files in order)");
    }
    if (const toml::table* files = Table(t, "data", "files")) {
      for (const auto& [key, node] : *files) {
        std::string path = Join("data.files", key.str());
        if (std::optional<fs::path> p = Path(node, path)) out.files[std::string(key.str())] = *p;
      }
    }
    if (const toml::table* csv = Table(t, "data", "csv")) {
      CheckKeys(*csv, "data.csv", {"path", "header", "columns"});
      if (const toml::node* n = csv->get("path")) {
        // "" is the default: no file.
        const auto* s = n->as_string();
        if (s == nullptr || !s->get().empty()) {
          if (std::optional<fs::path> p = Path(*n, "data.csv.path")) out.csv_path = *p;
        }
      }
      if (const toml::node* n = csv->get("header")) {
        if (const auto* b = n->as_boolean()) {
          out.csv_header = b->get();
        } else {
          diag_.AtValue(*n, "data.csv.header", "expected a boolean, got " + TypeName(*n));
        }
      }
      if (const toml::table* columns = Table(*csv, "data.csv", "columns")) {
        for (const auto& [key, node] : *columns) {
          ReadColumns(node, Join("data.csv.columns", key.str()),
                      out.csv_columns[std::string(key.str())]);
        }
      }
    }
    // What each source needs, reported where the source was chosen.
    if (const toml::node* n = t.get("source")) {
      if (out.source == "csv" && out.csv_path.empty() && out.filelist.empty()) {
        diag_.AtValue(*n, "data.source", "'csv' needs data.csv.path or data.filelist");
      }
      if (out.source == "multislot" && out.filelist.empty()) {
        diag_.AtValue(*n, "data.source", "'multislot' needs data.filelist");
      }
      if (out.source == "multislot" && out.slots.empty()) {
        diag_.AtValue(*n, "data.source", "'multislot' needs data.slots (the files' slots in order)");
      }
      if (out.source == "npy" && out.files.empty()) {
        diag_.AtValue(*n, "data.source", "'npy' needs a file per feed in [data.files]");
      }
    }
  }

  // A plugin's own value: a scalar or an array of one scalar type (integers widen to doubles
  // when mixed with floats). Plugins see these through FleetAttr, which has no nesting.
  std::optional<PluginValue> PluginConfigValue(const toml::node& node, std::string_view path) {
    if (const auto* v = node.as_integer()) return PluginValue(v->get());
    if (const auto* v = node.as_floating_point()) return PluginValue(v->get());
    if (const auto* v = node.as_boolean()) return PluginValue(v->get());
    if (const auto* v = node.as_string()) return PluginValue(v->get());
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      diag_.AtValue(node, path,
                    "expected an integer, float, boolean, string or array, got " + TypeName(node));
      return std::nullopt;
    }
    // The element kinds in order of first appearance, for the message.
    std::vector<std::string> kinds;
    bool all_scalar = true;
    for (const toml::node& item : *array) {
      std::string kind = TypeName(item, /*plural=*/true);
      if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
      all_scalar = all_scalar && (item.is_number() || item.is_boolean() || item.is_string());
    }
    if (!all_scalar) {
      diag_.AtValue(node, path,
                    "expected an array of integers, floats, booleans or strings, got an array of " +
                        JoinWords(kinds));
      return std::nullopt;
    }
    // An empty array has no element type; strings are the least surprising guess.
    if (array->empty() || array->is_homogeneous(toml::node_type::string)) {
      std::vector<std::string> out;
      for (const toml::node& item : *array) out.push_back(item.as_string()->get());
      return PluginValue(std::move(out));
    }
    if (array->is_homogeneous(toml::node_type::integer)) {
      std::vector<int64_t> out;
      for (const toml::node& item : *array) out.push_back(item.as_integer()->get());
      return PluginValue(std::move(out));
    }
    if (array->is_homogeneous(toml::node_type::boolean)) {
      std::vector<bool> out;
      for (const toml::node& item : *array) out.push_back(item.as_boolean()->get());
      return PluginValue(std::move(out));
    }
    if (std::all_of(array->begin(), array->end(),
                    [](const toml::node& n) { return n.is_number(); })) {
      std::vector<double> out;
      for (const toml::node& item : *array) out.push_back(AsDouble(item));
      return PluginValue(std::move(out));
    }
    diag_.AtValue(node, path, "expected an array of one type, got " + JoinWords(kinds));
    return std::nullopt;
  }

  fs::path base_dir_;
  fs::path cwd_;
  Diagnostics& diag_;
};

}  // namespace

Config CheckSchema(const toml::table& root, const fs::path& base_dir, const fs::path& cwd,
                   Diagnostics& diag) {
  return Checker(base_dir, cwd, diag).Check(root);
}

}  // namespace fleet::config_internal
