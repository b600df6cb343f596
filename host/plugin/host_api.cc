#include "plugin/host_api.h"

#include <cstring>

#include "rendezvous/memory_store.h"
#include "plugin/component_check.h"
#include "plugin/program_api.h"
#include "plugin/registry.h"
#include "support/logging.h"
#include "support/text.h"

namespace fleet {
namespace {

// ---- status slots (no context) ----

FleetStatus* StatusNew(int32_t code, const char* msg) {
  if (code == FLEET_CODE_OK) return nullptr;
  if (code < 0 || code > FLEET_CODE_UNAUTHENTICATED) code = FLEET_CODE_UNKNOWN;
  return new FleetStatus{code, msg != nullptr ? msg : ""};
}
int32_t StatusCode(const FleetStatus* s) { return s == nullptr ? FLEET_CODE_OK : s->code; }
const char* StatusMessage(const FleetStatus* s) { return s == nullptr ? "" : s->message.c_str(); }
void StatusFree(FleetStatus* s) { delete s; }

PluginContext* Ctx(void* host_ctx) { return static_cast<PluginContext*>(host_ctx); }

// ---- slots that forward to the plugin's context ----

void LogSlot(void* host_ctx, int32_t level, const char* msg) { Ctx(host_ctx)->LogLine(level, msg); }
int32_t LogEnabledSlot(void* host_ctx, int32_t level) {
  return Ctx(host_ctx)->LogEnabled(level) ? 1 : 0;
}
FleetStatus* RegisterSlot(void* host_ctx, const FleetComponent* c) {
  return Ctx(host_ctx)->RegisterComponent(c);
}
size_t ConfigCountSlot(void* host_ctx) { return Ctx(host_ctx)->ConfigCount(); }
FleetStatus* ConfigAtSlot(void* host_ctx, size_t index, FleetAttr* out) {
  return Ctx(host_ctx)->ConfigAt(index, out);
}
FleetStatus* ConfigGetSlot(void* host_ctx, const char* key, FleetAttr* out) {
  return Ctx(host_ctx)->ConfigGet(key, out);
}
int32_t DeviceTypeIdSlot(void* host_ctx, const char* name) {
  return Ctx(host_ctx)->DeviceTypeId(name);
}
FleetStatus* StoreOpenSlot(void* host_ctx, const char* scope, const FleetStore** out) {
  return Ctx(host_ctx)->StoreOpen(scope, out);
}

// ---- the rendezvous store ----

Store* g_job_store = nullptr;

Store& JobStore() {
  static MemoryStore* private_store = new MemoryStore();  // outlives every plugin
  return g_job_store != nullptr ? *g_job_store : *private_store;
}

spdlog::level::level_enum SpdLevel(int32_t level) {
  switch (level) {
    case FLEET_LOG_TRACE: return spdlog::level::trace;
    case FLEET_LOG_DEBUG: return spdlog::level::debug;
    case FLEET_LOG_INFO: return spdlog::level::info;
    case FLEET_LOG_WARN: return spdlog::level::warn;
    default: return spdlog::level::err;
  }
}

}  // namespace

Status TakeStatus(FleetStatus* status, std::string_view context) {
  if (status == nullptr) return OkStatus();
  Status out(static_cast<Code>(status->code), std::string(context) + ": " + status->message);
  delete status;
  return out;
}

FleetStatus* MakeFleetStatus(const Status& status) {
  if (status.ok()) return nullptr;
  return new FleetStatus{static_cast<int32_t>(status.code()), status.message()};
}

const FleetProgramApi* HostProgramApi() { return ProgramApi(); }

PluginContext::PluginContext(PluginRegistry* registry, std::string plugin_name,
                             const std::vector<ConfigValue>* config)
    : registry_(registry),
      plugin_name_(std::move(plugin_name)),
      config_(config),
      logger_(PluginLogger(plugin_name_)) {
  api_.struct_size = FLEET_STRUCT_SIZE(FleetHostApi, program);
  api_.abi_major = FLEET_ABI_MAJOR;
  api_.abi_minor = FLEET_ABI_MINOR;
  api_.host_version = FLEET_VERSION;
  api_.host_ctx = this;
  api_.status_new = StatusNew;
  api_.status_code = StatusCode;
  api_.status_message = StatusMessage;
  api_.status_free = StatusFree;
  api_.log = LogSlot;
  api_.log_enabled = LogEnabledSlot;
  api_.register_component = RegisterSlot;
  api_.config_count = ConfigCountSlot;
  api_.config_at = ConfigAtSlot;
  api_.config_get = ConfigGetSlot;
  api_.device_type_id = DeviceTypeIdSlot;
  api_.store_open = StoreOpenSlot;
  api_.program = HostProgramApi();
  BuildConfigAttrs();
}

void PluginContext::LogLine(int32_t level, const char* msg) {
  logger_->log(SpdLevel(level), "{}", msg != nullptr ? msg : "");
}

bool PluginContext::LogEnabled(int32_t level) const {
  return logger_->should_log(SpdLevel(level));
}

FleetStatus* PluginContext::RegisterComponent(const FleetComponent* c) {
  if (!registration_open_) {
    return StatusNew(FLEET_CODE_FAILED_PRECONDITION,
                     "register_component may only be called from the plugin's entry point");
  }
  if (c == nullptr || c->struct_size < FLEET_STRUCT_SIZE(FleetComponent, vtable) ||
      c->struct_size > kMaxStructSize) {
    return StatusNew(FLEET_CODE_INVALID_ARGUMENT,
                     "register_component: FleetComponent is NULL or has an impossible "
                     "struct_size");
  }
  std::string name = c->name != nullptr ? c->name : "";
  if (!IsKnownComponentKind(c->kind)) {
    notes_.push_back("skipped component '" + name + "' of kind " + std::to_string(c->kind) +
                     ", unknown to this host (ABI " + std::to_string(FLEET_ABI_MAJOR) + "." +
                     std::to_string(FLEET_ABI_MINOR) + ")");
    return StatusNew(FLEET_CODE_UNIMPLEMENTED,
                     ("component kind " + std::to_string(c->kind) + " is unknown to this host")
                         .c_str());
  }
  auto record = std::make_unique<ComponentRecord>();
  Status checked = CheckComponent(*c, record.get());
  if (checked.ok()) {
    record->plugin = plugin_name_;
    for (const auto& p : pending_) {
      if (p->kind == record->kind && p->name == record->name) {
        checked = AlreadyExists(ComponentKindName(c->kind) + " '" + name +
                                "' registered twice by this plugin");
      }
    }
  }
  if (checked.ok()) {
    if (const ComponentRecord* other = registry_->Find(record->kind, record->name)) {
      checked = AlreadyExists(ComponentKindName(c->kind) + " '" + name +
                              "' is already provided by plugin '" + other->plugin + "'");
    }
  }
  if (!checked.ok()) {
    if (refused_.ok()) refused_ = checked;
    return MakeFleetStatus(checked);
  }
  if (record->kind == FLEET_COMPONENT_DEVICE) {
    record->device_type_id = registry_->next_device_type_id_++;
  }
  pending_.push_back(std::move(record));
  return nullptr;
}

void PluginContext::BuildConfigAttrs() {
  if (config_ == nullptr) return;
  // Reserve first: attrs point into these vectors.
  attrs_.reserve(config_->size());
  int_storage_.reserve(config_->size());
  float_storage_.reserve(config_->size());
  string_storage_.reserve(config_->size());
  for (const ConfigValue& v : *config_) {
    FleetAttr a{};
    a.struct_size = FLEET_STRUCT_SIZE(FleetAttr, strings);
    a.name = v.key.c_str();
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            a.type = FLEET_ATTR_INT64;
            a.i = x;
          } else if constexpr (std::is_same_v<T, double>) {
            a.type = FLEET_ATTR_DOUBLE;
            a.f = x;
          } else if constexpr (std::is_same_v<T, bool>) {
            a.type = FLEET_ATTR_BOOL;
            a.i = x ? 1 : 0;
          } else if constexpr (std::is_same_v<T, std::string>) {
            a.type = FLEET_ATTR_STRING;
            a.s = x.c_str();
            a.s_len = x.size();
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            a.type = FLEET_ATTR_INT64S;
            a.ints = int_storage_.emplace_back(x).data();
            a.count = x.size();
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            a.type = FLEET_ATTR_DOUBLES;
            a.floats = float_storage_.emplace_back(x).data();
            a.count = x.size();
          } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
            a.type = FLEET_ATTR_BOOLS;
            auto& ints = int_storage_.emplace_back();
            for (bool b : x) ints.push_back(b ? 1 : 0);
            a.ints = ints.data();
            a.count = x.size();
          } else {
            a.type = FLEET_ATTR_STRINGS;
            auto& ptrs = string_storage_.emplace_back();
            for (const std::string& s : x) ptrs.push_back(s.c_str());
            a.strings = ptrs.data();
            a.count = x.size();
          }
        },
        v.value);
    attrs_.push_back(a);
  }
}

// Copies only what the caller's FleetAttr has room for: a plugin built against an older minor
// passes a smaller struct.
static FleetStatus* CopyAttr(const FleetAttr& from, FleetAttr* out) {
  if (out == nullptr || out->struct_size == 0) {
    return StatusNew(FLEET_CODE_INVALID_ARGUMENT, "config: out is NULL or struct_size is 0");
  }
  size_t size = std::min(out->struct_size, sizeof(FleetAttr));
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t),
              reinterpret_cast<const char*>(&from) + sizeof(size_t), size - sizeof(size_t));
  return nullptr;
}

FleetStatus* PluginContext::ConfigAt(size_t index, FleetAttr* out) {
  if (index >= attrs_.size()) {
    return StatusNew(FLEET_CODE_OUT_OF_RANGE, "config_at: index past the end");
  }
  read_keys_.insert(attrs_[index].name);
  return CopyAttr(attrs_[index], out);
}

FleetStatus* PluginContext::ConfigGet(const char* key, FleetAttr* out) {
  std::string k = key != nullptr ? key : "";
  read_keys_.insert(k);
  for (const FleetAttr& a : attrs_) {
    if (k == a.name) return CopyAttr(a, out);
  }
  return StatusNew(FLEET_CODE_NOT_FOUND,
                   ("no key '" + k + "' in [plugins.config." + plugin_name_ + "]").c_str());
}

std::vector<std::string> PluginContext::UnreadConfigNotes() const {
  // A few notes say what is wrong; thousands of stray keys get one line for the rest.
  constexpr size_t kMaxNotes = 10;
  std::vector<std::string> notes;
  if (config_ == nullptr) return notes;
  size_t unread = 0;
  for (const ConfigValue& v : *config_) {
    if (read_keys_.count(v.key) != 0) continue;
    if (++unread <= kMaxNotes) {
      notes.push_back("config key " +
                      QuoteForMessage("plugins.config." + plugin_name_ + "." + v.key) + " (" +
                      v.where + ") is not used by this plugin");
    }
  }
  if (unread > kMaxNotes) {
    notes.push_back(std::to_string(unread - kMaxNotes) + " more keys of [plugins.config." +
                    plugin_name_ + "] are not used by this plugin");
  }
  return notes;
}

int32_t PluginContext::DeviceTypeId(const char* name) const {
  if (name == nullptr) return -1;
  for (const auto& p : pending_) {
    if (p->kind == FLEET_COMPONENT_DEVICE && p->name == name) return p->device_type_id;
  }
  const ComponentRecord* c = registry_->Find(FLEET_COMPONENT_DEVICE, name);
  return c != nullptr ? c->device_type_id : -1;
}

FleetStatus* PluginContext::StoreOpen(const char* scope, const FleetStore** out) {
  if (scope == nullptr || *scope == '\0' || out == nullptr) {
    return StatusNew(FLEET_CODE_INVALID_ARGUMENT, "store_open: scope must be non-empty");
  }
  stores_.push_back(
      std::make_unique<AbiStore>(&JobStore(), "plugin/" + plugin_name_ + "/" + scope));
  *out = stores_.back()->table();
  return nullptr;
}

void SetJobStore(Store* store) { g_job_store = store; }

}  // namespace fleet
