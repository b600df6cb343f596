#include "plugin/registry.h"

#include <dlfcn.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <set>

#include <boost/dll/shared_library.hpp>
#include <boost/dll/runtime_symbol_info.hpp>

#include "plugin/component_check.h"
#include "plugin/elf_check.h"
#include "plugin/host_api.h"
#include "support/logging.h"
#include "support/text.h"

namespace fs = std::filesystem;

namespace fleet {

struct PluginRegistry::Loaded {
  // Never unloaded: a plugin may have started threads or registered exit handlers, and its
  // code may be on some stack until the process ends. The handle is leaked on purpose.
  boost::dll::shared_library* library = nullptr;
  std::unique_ptr<PluginContext> context;
  FleetPluginInfo info{};
};

namespace {

constexpr std::string_view kFilePrefix = "libfleet_";
constexpr std::string_view kFileSuffix = ".so";

std::string AbiString(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

const std::string& HostAbi() {
  static const std::string abi = AbiString(FLEET_ABI_MAJOR, FLEET_ABI_MINOR);
  return abi;
}

// The owner and write bits that make a file or directory trustworthy for code loading: owned
// by this user or root, and writable by nobody else. The one exception is a sticky directory
// like /tmp (owned by root or this user): others may add entries there but cannot replace or
// remove ours.
std::string Untrusted(const struct stat& st, bool is_dir) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return "is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  }
  const bool writable_by_others = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (!writable_by_others) return "";
  if (is_dir && (st.st_mode & S_ISVTX)) return "";
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return std::string("is writable by ") + ((st.st_mode & S_IWOTH) ? "others" : "its group") +
         " (mode " + mode + ")";
}

// Refuses a plugin someone other than this user (or root) could have changed: the file, every
// directory from it up to /, and, when the path goes through symlinks, the links themselves and
// every directory on the way to what they point at. Anyone who can write to one of those can
// swap the code fleet-host is about to run.
Status CheckNotWritableByOthers(const fs::path& file) {
  const std::string fix =
      "; fix the permissions (chmod go-w, or chown) or set plugins.allow_insecure = true";
  std::error_code ec;
  const fs::path given = fs::absolute(file, ec);
  const fs::path target = fs::canonical(file, ec);
  if (ec) return NotFound("cannot resolve: " + ec.message());
  // The path as given: each component as it is (a symlink's own owner counts), then the
  // resolved path: the file and each real directory above it.
  for (const fs::path* path : {&given, &target}) {
    const bool resolved = path == &target;
    fs::path at = *path;
    for (bool first = true;; first = false) {
      struct stat st;
      if ((resolved ? ::stat(at.c_str(), &st) : ::lstat(at.c_str(), &st)) != 0) {
        return NotFound("cannot stat " + at.string() + ": " + std::strerror(errno));
      }
      const bool is_link = S_ISLNK(st.st_mode);
      if (first && resolved && !S_ISREG(st.st_mode)) {
        return PermissionDenied("it is not a regular file");
      }
      std::string why = is_link ? (st.st_uid != ::geteuid() && st.st_uid != 0
                                       ? "is owned by another user (uid " +
                                             std::to_string(st.st_uid) + ")"
                                       : "")
                                : Untrusted(st, !first);
      if (!why.empty()) {
        const std::string kind = is_link ? "the symlink " : "the directory ";
        const std::string what = first ? (is_link ? "the symlink " + at.string() : "the file")
                                       : kind + at.string();
        return PermissionDenied(what + " " + why + fix);
      }
      if (at == at.root_path() || !at.has_parent_path()) break;
      at = at.parent_path();
    }
  }
  return OkStatus();
}

}  // namespace

std::string ComponentKindName(int32_t kind) {
  switch (kind) {
    case FLEET_COMPONENT_DEVICE: return "device";
    case FLEET_COMPONENT_KERNELS: return "kernels";
    case FLEET_COMPONENT_COMMUNICATOR: return "communicator";
    case FLEET_COMPONENT_PASS: return "pass";
    case FLEET_COMPONENT_TRANSPORT: return "transport";
    case FLEET_COMPONENT_OP_SCHEMA: return "op_schema";
    default: return "unknown(" + std::to_string(kind) + ")";
  }
}

std::string PluginNameFromFile(const fs::path& file) {
  std::string base = file.filename().string();
  if (base.size() <= kFilePrefix.size() + kFileSuffix.size()) return "";
  if (base.compare(0, kFilePrefix.size(), kFilePrefix) != 0) return "";
  if (base.compare(base.size() - kFileSuffix.size(), kFileSuffix.size(), kFileSuffix) != 0) {
    return "";
  }
  return base.substr(kFilePrefix.size(), base.size() - kFilePrefix.size() - kFileSuffix.size());
}

bool SecureMode() {
  return ::getauxval(AT_SECURE) != 0 || ::getuid() != ::geteuid() || ::getgid() != ::getegid();
}

std::vector<fs::path> PluginSearchPath(const Config& config) {
  std::vector<fs::path> dirs;
  if (SecureMode()) {
    static bool said = false;
    if (!said && (!config.plugins.dirs.empty() || std::getenv("FLEET_PLUGIN_PATH") != nullptr)) {
      Log().warn("secure mode (setuid/setgid): plugins load only from this installation; "
                 "FLEET_PLUGIN_PATH and plugins.dirs are ignored");
      said = true;
    }
  } else {
    dirs = config.plugins.dirs;
  }
  if (const char* env = SecureMode() ? nullptr : std::getenv("FLEET_PLUGIN_PATH")) {
    for (const std::string& d : Split(env, ':')) {
      if (!d.empty()) dirs.push_back(fs::absolute(d));
    }
  }
  std::error_code ec;
  fs::path exe = boost::dll::program_location(ec);
  if (!ec) {
    dirs.push_back(fs::weakly_canonical(exe.parent_path() / FLEET_PLUGIN_DIR_FROM_BIN, ec));
  }
  return dirs;
}

PluginRegistry::PluginRegistry(LoadOptions options) : options_(std::move(options)) {}

PluginRegistry::~PluginRegistry() {
  for (auto it = loaded_.rbegin(); it != loaded_.rend(); ++it) {
    Loaded& l = **it;
    if (FLEET_HAS_FIELD(&l.info, FleetPluginInfo, shutdown) && l.info.shutdown != nullptr) {
      l.info.shutdown(l.info.plugin_ctx);
    }
  }
}

std::vector<fs::path> PluginRegistry::Discover() const {
  std::vector<fs::path> found;
  std::set<std::string> names;
  for (const fs::path& dir : options_.search_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> entries;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.is_regular_file(ec) && entry.path().extension() == kFileSuffix) {
        entries.push_back(entry.path());
      }
    }
    std::sort(entries.begin(), entries.end());  // directory order is not stable
    for (const fs::path& p : entries) {
      std::string name = PluginNameFromFile(p);
      std::string key = name.empty() ? p.string() : name;
      if (names.insert(key).second) found.push_back(p);
    }
  }
  return found;
}

Status PluginRegistry::Reject(const fs::path& file, Status reason) {
  Status named = reason.WithContext("plugin " + file.string());
  rejected_.push_back({file, PluginNameFromFile(file), named});
  return named;
}

StatusOr<const PluginRecord*> PluginRegistry::Load(std::string_view name_or_path) {
  std::string what(name_or_path);
  if (what.find('/') != std::string::npos) {
    return LoadFile(fs::absolute(what));
  }
  if (const PluginRecord* existing = FindPlugin(what)) return existing;
  std::string file_name = std::string(kFilePrefix) + what + std::string(kFileSuffix);
  for (const fs::path& dir : options_.search_dirs) {
    fs::path candidate = dir / file_name;
    std::error_code ec;
    if (fs::exists(candidate, ec)) return LoadFile(candidate);
  }
  std::vector<std::string> searched;
  for (const fs::path& dir : options_.search_dirs) searched.push_back(dir.string());
  std::vector<std::string> known;
  for (const fs::path& p : Discover()) known.push_back(PluginNameFromFile(p));
  std::string hint;
  if (std::string close = ClosestMatch(what, known); !close.empty()) {
    hint = " (did you mean '" + close + "'?)";
  }
  return NotFound("plugin '" + what + "' not found: no " + file_name + " in " +
                  (searched.empty() ? std::string("any search directory")
                                    : JoinWords(searched, ", ")) +
                  hint);
}

StatusOr<const PluginRecord*> PluginRegistry::LoadFile(const fs::path& file) {
  for (const auto& p : plugins_) {
    if (p->file == file) return p.get();
  }
  for (const Rejection& r : rejected_) {
    if (r.file == file) return r.reason;
  }
  std::string name = PluginNameFromFile(file);
  if (name.empty()) {
    return Reject(file, InvalidArgument("file name does not follow libfleet_NAME.so"));
  }
  if (const PluginRecord* same = FindPlugin(name)) {
    return Reject(file, AlreadyExists("a plugin named '" + name + "' is already loaded from " +
                                      same->file.string()));
  }
  if (!options_.allow_insecure) {
    if (Status s = CheckNotWritableByOthers(file); !s.ok()) return Reject(file, s);
  }

  if (Status s = CheckElfImage(file); !s.ok()) {
    return Reject(file, InvalidArgument("not a loadable library: " + s.message()));
  }

  const auto load_start = std::chrono::steady_clock::now();
  auto loaded = std::make_unique<Loaded>();
  boost::dll::fs::error_code ec;
  dlerror();  // clear, so the message below is this load's
  loaded->library = new boost::dll::shared_library(
      file, ec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (ec || !loaded->library->is_loaded()) {
    const char* why = dlerror();
    return Reject(file, InvalidArgument(std::string("not a loadable library: ") +
                                        (why != nullptr ? why : ec.message())));
  }
  if (!loaded->library->has(FLEET_PLUGIN_ENTRY_V1)) {
    std::vector<std::string> majors;
    for (int m = 2; m <= 9; ++m) {
      if (loaded->library->has("fleet_plugin_entry_v" + std::to_string(m))) {
        majors.push_back(std::to_string(m));
      }
    }
    if (!majors.empty()) {
      return Reject(file, FailedPrecondition(
                              "built for plugin ABI major " + JoinWords(majors, " and ") +
                              ", but this host speaks ABI " + HostAbi() + " (it needs the symbol " +
                              FLEET_PLUGIN_ENTRY_V1 + "); rebuild the plugin against this Fleet"));
    }
    return Reject(file, NotFound(std::string("entry symbol ") + FLEET_PLUGIN_ENTRY_V1 +
                                 " is missing; is this a Fleet plugin, and is the entry marked "
                                 "FLEET_EXPORT?"));
  }
  auto entry = loaded->library->get<FleetStatus*(const FleetHostApi*, FleetPluginInfo*)>(
      FLEET_PLUGIN_ENTRY_V1);

  auto config_it = options_.plugin_config.find(name);
  loaded->context = std::make_unique<PluginContext>(
      this, name, config_it == options_.plugin_config.end() ? nullptr : &config_it->second);
  PluginContext& ctx = *loaded->context;
  loaded->info.struct_size = FLEET_STRUCT_SIZE(FleetPluginInfo, shutdown);

  ctx.set_registration_open(true);
  FleetStatus* raw = nullptr;
  try {
    raw = entry(ctx.api(), &loaded->info);
  } catch (...) {
    raw = MakeFleetStatus(Internal("the entry point threw a C++ exception across the ABI"));
  }
  ctx.set_registration_open(false);
  const FleetPluginInfo& info = loaded->info;
  // A plugin rejected from here on may already have handed out pointers; they are dropped with
  // its context, and its library stays mapped (see Loaded).
  if (raw != nullptr) {
    Status s = TakeStatus(raw, "its entry point failed");
    loaded->info.shutdown = nullptr;  // a failed entry cleans up itself (fleet_host.h)
    loaded_.push_back(std::move(loaded));
    return Reject(file, s);
  }
  auto reject_loaded = [&](Status s) {
    loaded_.push_back(std::move(loaded));
    return Reject(file, std::move(s));
  };
  if (info.abi_major != FLEET_ABI_MAJOR) {
    return reject_loaded(FailedPrecondition(
        "its info says ABI major " + std::to_string(info.abi_major) + ", but it exports " +
        FLEET_PLUGIN_ENTRY_V1 + " and this host speaks ABI " + HostAbi()));
  }
  if (info.name == nullptr || name != info.name) {
    return reject_loaded(InvalidArgument(
        "the file says plugin '" + name + "' but the plugin calls itself '" +
        (info.name != nullptr ? info.name : "(null)") + "'; rename the file or fix info->name"));
  }
  if (!ctx.refused().ok()) {
    return reject_loaded(ctx.refused().WithContext("a component was refused"));
  }

  auto record = std::make_unique<PluginRecord>();
  record->name = name;
  record->file = file;
  record->version = info.version != nullptr ? info.version : "";
  record->description = info.description != nullptr ? info.description : "";
  record->abi_major = info.abi_major;
  record->abi_minor = info.abi_minor;
  record->load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              load_start)
                        .count();
  record->notes = ctx.notes();
  for (std::string& n : ctx.UnreadConfigNotes()) record->notes.push_back(std::move(n));
  for (auto& c : ctx.pending()) {
    c->abi_minor = info.abi_minor;
    record->components.push_back(ComponentKindName(c->kind) + ":" + c->name);
    components_.push_back(std::move(c));
  }
  ctx.pending().clear();

  Log().debug("loaded plugin '{}' {} (ABI {}) from {} with {} component(s)", name,
              record->version, AbiString(info.abi_major, info.abi_minor), file.string(),
              record->components.size());
  for (const std::string& n : record->notes) Log().warn("plugin '{}': {}", name, n);
  loaded_.push_back(std::move(loaded));
  plugins_.push_back(std::move(record));
  return plugins_.back().get();
}

void PluginRegistry::LoadAll() {
  for (const fs::path& p : Discover()) (void)LoadFile(p);
}

Status PluginRegistry::RegisterHostComponent(std::unique_ptr<ComponentRecord> record) {
  if (Find(record->kind, record->name) != nullptr) {
    return AlreadyExists(ComponentKindName(record->kind) + " '" + record->name +
                         "' is already registered");
  }
  record->plugin = "host";
  record->abi_minor = FLEET_ABI_MINOR;
  components_.push_back(std::move(record));
  return OkStatus();
}

const ComponentRecord* PluginRegistry::Find(int32_t kind, std::string_view name) const {
  for (const auto& c : components_) {
    if (c->kind == kind && c->name == name) return c.get();
  }
  return nullptr;
}

std::vector<const ComponentRecord*> PluginRegistry::Components(int32_t kind) const {
  std::vector<const ComponentRecord*> out;
  for (const auto& c : components_) {
    if (c->kind == kind) out.push_back(c.get());
  }
  return out;
}

const PluginRecord* PluginRegistry::FindPlugin(std::string_view name) const {
  for (const auto& p : plugins_) {
    if (p->name == name) return p.get();
  }
  return nullptr;
}

}  // namespace fleet
