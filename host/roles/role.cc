#include "roles/role.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <utility>

#include "support/limits.h"
#include "support/text.h"

extern char** environ;

namespace fleet {
namespace {

// One source's say about one field. `label` names it in conflict messages ("PADDLE_TRAINER_ID",
// "fleet.toml:3:1 role.rank"); `source` is what `fleet-host env` shows; `value` is normalised text
// (decimal integers, comma-joined lists) so that equal meanings compare equal.
struct Candidate {
  std::string label;
  std::string source;
  std::string value;
};

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

std::optional<int64_t> ParseInt(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

Status CheckPort(const std::string& text) {
  std::optional<int64_t> port = ParseInt(text);
  if (!port || *port < 1 || *port > 65535) {
    return InvalidArgument("the port " + QuoteForMessage(text) + " is not an integer in 1..65535");
  }
  return OkStatus();
}

class Resolver {
 public:
  Resolver(const Config& config, const std::map<std::string, std::string>& env)
      : config_(config.role), env_(env) {}

  StatusOr<Role> Resolve() {
    Role out;
    FLEET_RETURN_IF_ERROR(ResolveMpiSymmetric(out));
    FLEET_RETURN_IF_ERROR(ResolveRoleName(out));
    FLEET_RETURN_IF_ERROR(ResolveLists(out));
    FLEET_RETURN_IF_ERROR(ResolveWorldSize(out));
    FLEET_RETURN_IF_ERROR(ResolveCurrentEndpoint(out));
    FLEET_RETURN_IF_ERROR(ResolveRank(out));
    FLEET_RETURN_IF_ERROR(ResolveMaster(out));
    FLEET_RETURN_IF_ERROR(ResolveLocalRank(out));
    return out;
  }

 private:
  // ---- sources ----

  // A variable's value, or nothing when unset or empty.
  std::optional<std::string> Env(const std::string& name) const {
    auto it = env_.find(name);
    if (it == env_.end()) return std::nullopt;
    std::string value = Trim(it->second);
    if (value.empty()) return std::nullopt;
    return value;
  }

  // The config key `key` if it was set to something other than "not set".
  std::optional<std::string> ConfigSource(const std::string& key) const {
    auto it = config_.where.find(key);
    if (it == config_.where.end()) return std::nullopt;
    // "--set role.rank" already names the key; a file position does not.
    if (it->second.starts_with("--set")) return it->second;
    return it->second + " role." + key;
  }

  // An integer variable >= min; a malformed or out-of-range value names the variable.
  Status AddEnvInt(std::vector<Candidate>& out, const std::string& name, int64_t min) const {
    std::optional<std::string> text = Env(name);
    if (!text) return OkStatus();
    std::optional<int64_t> value = ParseInt(*text);
    if (!value) {
      return InvalidArgument(name + "='" + ForTerminal(*text, 64) + "': expected an integer");
    }
    // Ranks and world sizes are int everywhere downstream; a launcher's variable past any job
    // is refused here rather than truncated.
    if (*value < min || *value > kMaxWorldSize) {
      return InvalidArgument(name + "=" + ForTerminal(*text, 64) + ": expected an integer in [" +
                             std::to_string(min) + ", " + std::to_string(kMaxWorldSize) + "]");
    }
    out.push_back({name, "env " + name, std::to_string(*value)});
    return OkStatus();
  }

  void AddConfigInt(std::vector<Candidate>& out, const std::string& key, int64_t value) const {
    if (std::optional<std::string> src = ConfigSource(key)) {
      out.push_back({*src, *src, std::to_string(value)});
    }
  }

  static StatusOr<std::string> CheckList(const std::vector<std::string>& items,
                                         const std::string& label) {
    FLEET_ASSIGN_OR_RETURN(std::vector<std::string> clean, CheckEndpointList(items, label));
    return JoinList(clean);
  }

  Status AddEnvList(std::vector<Candidate>& out, const std::string& name) const {
    std::optional<std::string> text = Env(name);
    if (!text) return OkStatus();
    FLEET_ASSIGN_OR_RETURN(std::string value, CheckList(Split(*text, ','), name));
    out.push_back({name, "env " + name, value});
    return OkStatus();
  }

  Status AddConfigList(std::vector<Candidate>& out, const std::string& key,
                       const std::vector<std::string>& items) const {
    std::optional<std::string> src = ConfigSource(key);
    if (!src) return OkStatus();
    FLEET_ASSIGN_OR_RETURN(std::string value, CheckList(items, *src));
    out.push_back({*src, *src, value});
    return OkStatus();
  }

  // The agreed candidate of `field`, or null when no source set it.
  static StatusOr<const Candidate*> Agree(const std::string& field,
                                          const std::vector<Candidate>& candidates) {
    if (candidates.empty()) return static_cast<const Candidate*>(nullptr);
    const Candidate& first = candidates.front();
    for (const Candidate& other : candidates) {
      if (other.value != first.value) {
        return InvalidArgument(field + ": " + first.label + "=" + first.value + " but " +
                               other.label + "=" + other.value);
      }
    }
    return &first;
  }

  // ---- fields ----

  Status ResolveMpiSymmetric(Role& out) {
    std::vector<Candidate> flags;
    if (std::optional<std::string> src = ConfigSource("mpi_symmetric")) {
      flags.push_back({*src, *src, "true"});
    }
    if (std::optional<std::string> text = Env("FLEET_MPI_SYMMETRIC")) {
      std::string value;
      if (*text == "1" || *text == "true") {
        value = "true";
      } else if (*text == "0" || *text == "false") {
        value = "false";
      } else {
        return InvalidArgument("FLEET_MPI_SYMMETRIC='" + *text + "': expected 1 or 0");
      }
      flags.push_back({"FLEET_MPI_SYMMETRIC", "env FLEET_MPI_SYMMETRIC", value});
    }
    FLEET_ASSIGN_OR_RETURN(const Candidate* flag, Agree("mpi_symmetric", flags));
    Set(out, "mpi_symmetric", flag, [&](const std::string& v) { out.mpi_symmetric = v == "true"; });
    if (!out.mpi_symmetric) return OkStatus();

    std::vector<Candidate> ranks, sizes;
    FLEET_RETURN_IF_ERROR(AddEnvInt(ranks, "OMPI_COMM_WORLD_RANK", 0));
    FLEET_RETURN_IF_ERROR(AddEnvInt(ranks, "PMI_RANK", 0));
    FLEET_RETURN_IF_ERROR(AddEnvInt(sizes, "OMPI_COMM_WORLD_SIZE", 1));
    FLEET_RETURN_IF_ERROR(AddEnvInt(sizes, "PMI_SIZE", 1));
    FLEET_ASSIGN_OR_RETURN(const Candidate* rank, Agree("mpi_symmetric rank", ranks));
    FLEET_ASSIGN_OR_RETURN(const Candidate* size, Agree("mpi_symmetric size", sizes));
    if (rank == nullptr || size == nullptr) {
      return InvalidArgument("mpi_symmetric (" + out.source["mpi_symmetric"] +
                             ") needs MPI's rank and size: OMPI_COMM_WORLD_RANK and "
                             "OMPI_COMM_WORLD_SIZE (Open MPI) or PMI_RANK and PMI_SIZE, but " +
                             (rank == nullptr ? "no rank" : "no size") + " is set");
    }
    Mpi mpi{rank->label, size->label, *ParseInt(rank->value), *ParseInt(size->value)};
    if (mpi.size % 2 != 0) {
      return InvalidArgument("mpi_symmetric: " + mpi.size_var + "=" + std::to_string(mpi.size) +
                             " is odd; the symmetric layout pairs every trainer (odd rank) with "
                             "a pserver (even rank)");
    }
    if (mpi.rank >= mpi.size) {
      return InvalidArgument("mpi_symmetric: " + mpi.rank_var + "=" + std::to_string(mpi.rank) +
                             " is not below " + mpi.size_var + "=" + std::to_string(mpi.size));
    }
    mpi_ = mpi;
    return OkStatus();
  }

  // The MPI-derived candidate for role ("trainer"/"pserver") or rank (the index in the role).
  Candidate MpiRankCandidate(const std::string& value) const {
    const std::string var = mpi_->rank_var + "=" + std::to_string(mpi_->rank);
    const std::string layout =
        mpi_->rank % 2 == 0 ? "even rank -> pserver " : "odd rank -> trainer ";
    return {"mpi_symmetric(" + var + ")",
            var + " (mpi_symmetric: " + layout + std::to_string(mpi_->rank / 2) + ")", value};
  }

  Status ResolveRoleName(Role& out) {
    std::vector<Candidate> candidates;
    if (std::optional<std::string> src = ConfigSource("role")) {
      candidates.push_back({*src, *src, config_.role});
    }
    if (mpi_) candidates.push_back(MpiRankCandidate(mpi_->rank % 2 == 0 ? "pserver" : "trainer"));
    for (const char* name : {"TRAINING_ROLE", "PADDLE_TRAINING_ROLE"}) {
      std::optional<std::string> text = Env(name);
      if (!text) continue;
      std::string value;
      if (*text == "TRAINER") {
        value = "trainer";
      } else if (*text == "PSERVER") {
        value = "pserver";
      } else {
        return InvalidArgument(std::string(name) + "='" + *text + "': expected TRAINER or PSERVER");
      }
      candidates.push_back({name, "env " + std::string(name), value});
    }
    FLEET_ASSIGN_OR_RETURN(const Candidate* c, Agree("role", candidates));
    Set(out, "role", c, [&](const std::string& v) { out.role = v; });
    return OkStatus();
  }

  Status ResolveLists(Role& out) {
    std::vector<Candidate> trainers;
    FLEET_RETURN_IF_ERROR(AddConfigList(trainers, "trainer_endpoints", config_.trainer_endpoints));
    FLEET_RETURN_IF_ERROR(AddEnvList(trainers, "PADDLE_TRAINER_ENDPOINTS"));
    FLEET_ASSIGN_OR_RETURN(const Candidate* t, Agree("trainer_endpoints", trainers));
    Set(out, "trainer_endpoints", t,
        [&](const std::string& v) { out.trainer_endpoints = Split(v, ','); });

    std::vector<Candidate> servers;
    FLEET_RETURN_IF_ERROR(AddConfigList(servers, "pserver_endpoints", config_.pserver_endpoints));
    FLEET_RETURN_IF_ERROR(AddEnvList(servers, "PADDLE_PSERVERS_IP_PORT_LIST"));
    FLEET_ASSIGN_OR_RETURN(const Candidate* s, Agree("pserver_endpoints", servers));
    Set(out, "pserver_endpoints", s,
        [&](const std::string& v) { out.pserver_endpoints = Split(v, ','); });
    if (mpi_ && out.pserver_endpoints.size() != static_cast<size_t>(mpi_->size / 2)) {
      const int64_t need = mpi_->size / 2;
      std::string text = "pserver_endpoints: mpi_symmetric with " + mpi_->size_var + "=" +
                         std::to_string(mpi_->size) + " needs " + std::to_string(need) +
                         " server endpoint" + (need == 1 ? "" : "s") + " (one per even rank)";
      if (out.pserver_endpoints.empty()) {
        text += "; set PADDLE_PSERVERS_IP_PORT_LIST or role.pserver_endpoints";
      } else {
        text += " but " + out.source["pserver_endpoints"] + " lists " +
                std::to_string(out.pserver_endpoints.size());
      }
      return InvalidArgument(text);
    }
    if (out.is_pserver() && out.pserver_endpoints.empty()) {
      return InvalidArgument(
          "role: a pserver needs the list of servers: set PADDLE_PSERVERS_IP_PORT_LIST or "
          "role.pserver_endpoints (role from " +
          out.source["role"] + ")");
    }
    return OkStatus();
  }

  Status ResolveWorldSize(Role& out) {
    std::vector<Candidate> candidates;
    AddConfigInt(candidates, "world_size", config_.world_size);
    if (mpi_) {
      const std::string var = mpi_->size_var + "=" + std::to_string(mpi_->size);
      candidates.push_back({"mpi_symmetric(" + var + ")",
                            var + " (mpi_symmetric: half the processes are trainers)",
                            std::to_string(mpi_->size / 2)});
    }
    FLEET_RETURN_IF_ERROR(AddEnvInt(candidates, "PADDLE_TRAINERS_NUM", 1));
    // These count the processes of every role; with mpi_symmetric half of them serve.
    if (!out.is_pserver() && !mpi_) {
      for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE"}) {
        FLEET_RETURN_IF_ERROR(AddEnvInt(candidates, name, 1));
      }
    }
    FLEET_ASSIGN_OR_RETURN(const Candidate* c, Agree("world_size", candidates));
    size_t n = out.trainer_endpoints.size();
    if (c != nullptr) {
      out.world_size = *ParseInt(c->value);
      out.source["world_size"] = c->source;
      if (n != 0 && static_cast<size_t>(out.world_size) != n) {
        return InvalidArgument("world_size: " + c->label + "=" + c->value + " but " +
                               out.source["trainer_endpoints"] + " lists " + std::to_string(n) +
                               " trainer endpoint" + (n == 1 ? "" : "s"));
      }
    } else if (n != 0) {
      out.world_size = static_cast<int64_t>(n);
      out.source["world_size"] =
          "number of trainer_endpoints (" + out.source["trainer_endpoints"] + ")";
    } else {
      out.world_size = 1;
      out.source["world_size"] = "default";
    }
    return OkStatus();
  }

  Status ResolveCurrentEndpoint(Role& out) {
    std::vector<Candidate> candidates;
    if (std::optional<std::string> src = ConfigSource("current_endpoint")) {
      if (Status s = CheckEndpoint(config_.current_endpoint); !s.ok()) return s.WithContext(*src);
      candidates.push_back({*src, *src, config_.current_endpoint});
    }
    if (std::optional<std::string> text = Env("PADDLE_CURRENT_ENDPOINT")) {
      if (Status s = CheckEndpoint(*text); !s.ok()) return s.WithContext("PADDLE_CURRENT_ENDPOINT");
      candidates.push_back({"PADDLE_CURRENT_ENDPOINT", "env PADDLE_CURRENT_ENDPOINT", *text});
    }
    if (out.is_pserver()) {
      std::optional<std::string> ip = Env("POD_IP"), port = Env("PADDLE_PORT");
      if (ip.has_value() != port.has_value()) {
        return InvalidArgument(std::string(ip ? "POD_IP" : "PADDLE_PORT") + " is set but " +
                               (ip ? "PADDLE_PORT" : "POD_IP") +
                               " is not; a pserver's endpoint is POD_IP:PADDLE_PORT");
      }
      if (ip) {
        if (Status s = CheckPort(*port); !s.ok()) return s.WithContext("PADDLE_PORT");
        std::string endpoint = *ip + ":" + *port;
        if (Status s = CheckEndpoint(endpoint); !s.ok()) return s.WithContext("POD_IP");
        candidates.push_back({"POD_IP:PADDLE_PORT", "env POD_IP:PADDLE_PORT", endpoint});
      }
    }
    FLEET_ASSIGN_OR_RETURN(const Candidate* c, Agree("current_endpoint", candidates));
    Set(out, "current_endpoint", c, [&](const std::string& v) { out.current_endpoint = v; });
    return OkStatus();
  }

  Status ResolveRank(Role& out) {
    std::vector<Candidate> candidates;
    AddConfigInt(candidates, "rank", config_.rank);
    if (mpi_) candidates.push_back(MpiRankCandidate(std::to_string(mpi_->rank / 2)));
    const std::vector<std::string>& list =
        out.is_pserver() ? out.pserver_endpoints : out.trainer_endpoints;
    const std::string list_name = out.is_pserver() ? "pserver_endpoints" : "trainer_endpoints";
    if (out.is_pserver()) {
      FLEET_RETURN_IF_ERROR(AddEnvInt(candidates, "PADDLE_PSERVER_ID", 0));
      if (!out.current_endpoint.empty()) {
        auto it = std::find(list.begin(), list.end(), out.current_endpoint);
        if (it == list.end()) {
          return InvalidArgument(
              "current_endpoint: " + out.current_endpoint + " (" + out.source["current_endpoint"] +
              ") is not in pserver_endpoints (" + out.source["pserver_endpoints"] + ")");
        }
        std::string label = "the position of " + out.current_endpoint + " in pserver_endpoints";
        candidates.push_back({label, label + " (" + out.source["pserver_endpoints"] + ")",
                              std::to_string(it - list.begin())});
      }
    } else if (mpi_) {
      FLEET_RETURN_IF_ERROR(AddEnvInt(candidates, "PADDLE_TRAINER_ID", 0));
    } else {
      for (const char* name :
           {"PADDLE_TRAINER_ID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
        FLEET_RETURN_IF_ERROR(AddEnvInt(candidates, name, 0));
      }
    }
    FLEET_ASSIGN_OR_RETURN(const Candidate* c, Agree("rank", candidates));
    if (c == nullptr && out.is_pserver()) {
      return InvalidArgument(
          "rank: a pserver must know which server it is: set POD_IP and PADDLE_PORT, "
          "PADDLE_PSERVER_ID or role.rank");
    }
    out.rank = c == nullptr ? 0 : *ParseInt(c->value);
    out.source["rank"] = c == nullptr ? "default" : c->source;
    // A trainer's rank counts trainers; a server's indexes the server list.
    int64_t bound = out.is_pserver() ? static_cast<int64_t>(list.size()) : out.world_size;
    if (out.rank >= bound) {
      return InvalidArgument(
          "rank: " + (c == nullptr ? std::string("0") : c->label + "=" + c->value) +
          " is not below " +
          (out.is_pserver()
               ? "the number of pserver_endpoints " + std::to_string(bound) + " (" +
                     out.source["pserver_endpoints"] + ")"
               : "world_size " + std::to_string(bound) + " (" + out.source["world_size"] + ")"));
    }
    if (out.current_endpoint.empty() && !list.empty()) {
      out.current_endpoint = list[static_cast<size_t>(out.rank)];
      out.source["current_endpoint"] =
          list_name + "[" + std::to_string(out.rank) + "] (" + out.source[list_name] + ")";
    }
    return OkStatus();
  }

  Status ResolveMaster(Role& out) {
    std::vector<Candidate> addrs, ports;
    if (std::optional<std::string> src = ConfigSource("master")) {
      if (Status s = CheckEndpoint(config_.master); !s.ok()) return s.WithContext(*src);
      size_t colon = config_.master.rfind(':');
      std::string host = config_.master.substr(0, colon);
      if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
      addrs.push_back({*src, *src, host});
      ports.push_back({*src, *src, std::to_string(*ParseInt(config_.master.substr(colon + 1)))});
    }
    if (std::optional<std::string> addr = Env("MASTER_ADDR")) {
      addrs.push_back({"MASTER_ADDR", "env MASTER_ADDR", *addr});
    }
    if (std::optional<std::string> port = Env("MASTER_PORT")) {
      if (Status s = CheckPort(*port); !s.ok()) return s.WithContext("MASTER_PORT");
      ports.push_back({"MASTER_PORT", "env MASTER_PORT", std::to_string(*ParseInt(*port))});
    }
    FLEET_ASSIGN_OR_RETURN(const Candidate* a, Agree("master_addr", addrs));
    FLEET_ASSIGN_OR_RETURN(const Candidate* p, Agree("master_port", ports));
    if ((a == nullptr) != (p == nullptr)) {
      return InvalidArgument(std::string(a ? "MASTER_ADDR" : "MASTER_PORT") + " is set but " +
                             (a ? "MASTER_PORT" : "MASTER_ADDR") + " is not");
    }
    Set(out, "master_addr", a, [&](const std::string& v) { out.master_addr = v; });
    Set(out, "master_port", p, [&](const std::string& v) { out.master_port = *ParseInt(v); });
    return OkStatus();
  }

  Status ResolveLocalRank(Role& out) {
    std::vector<Candidate> candidates;
    AddConfigInt(candidates, "local_rank", config_.local_rank);
    if (mpi_ && !out.is_pserver()) {
      std::vector<Candidate> mpi_local;
      FLEET_RETURN_IF_ERROR(AddEnvInt(mpi_local, "OMPI_COMM_WORLD_LOCAL_RANK", 0));
      if (!mpi_local.empty()) {
        const std::string var = "OMPI_COMM_WORLD_LOCAL_RANK=" + mpi_local[0].value;
        candidates.push_back({"mpi_symmetric(" + var + ")",
                              var + " (mpi_symmetric: halved, one pserver per trainer)",
                              std::to_string(*ParseInt(mpi_local[0].value) / 2)});
      }
    } else if (!out.is_pserver()) {
      for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}) {
        FLEET_RETURN_IF_ERROR(AddEnvInt(candidates, name, 0));
      }
    }
    FLEET_ASSIGN_OR_RETURN(const Candidate* c, Agree("local_rank", candidates));
    Set(out, "local_rank", c, [&](const std::string& v) { out.local_rank = *ParseInt(v); });
    return OkStatus();
  }

  // Applies the agreed candidate (or records "default", leaving the field's default value).
  template <typename Apply>
  static void Set(Role& out, const std::string& field, const Candidate* c, Apply apply) {
    if (c == nullptr) {
      out.source[field] = "default";
      return;
    }
    apply(c->value);
    out.source[field] = c->source;
  }

  // MPI's view of this process when mpi_symmetric is on.
  struct Mpi {
    std::string rank_var, size_var;  // the variables they came from (first agreeing source)
    int64_t rank = 0, size = 0;
  };

  const Config::Role& config_;
  const std::map<std::string, std::string>& env_;
  std::optional<Mpi> mpi_;
};

}  // namespace

const std::vector<std::string>& RoleFieldNames() {
  static const std::vector<std::string> names = {"role",
                                                 "rank",
                                                 "world_size",
                                                 "trainer_endpoints",
                                                 "current_endpoint",
                                                 "pserver_endpoints",
                                                 "master_addr",
                                                 "master_port",
                                                 "local_rank",
                                                 "mpi_symmetric"};
  return names;
}

std::string RoleFieldText(const Role& role, const std::string& name) {
  if (name == "role") return role.role;
  if (name == "rank") return std::to_string(role.rank);
  if (name == "world_size") return std::to_string(role.world_size);
  if (name == "trainer_endpoints") return JoinList(role.trainer_endpoints);
  if (name == "current_endpoint") return role.current_endpoint;
  if (name == "pserver_endpoints") return JoinList(role.pserver_endpoints);
  if (name == "master_addr") return role.master_addr;
  if (name == "master_port") return std::to_string(role.master_port);
  if (name == "local_rank") return std::to_string(role.local_rank);
  if (name == "mpi_symmetric") return role.mpi_symmetric ? "true" : "false";
  return "";
}

Status CheckEndpoint(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument(QuoteForMessage(text) + " is not host:port");
  }
  std::string host = text.substr(0, colon);
  bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  // An IPv6 address has colons of its own; only the bracketed form leaves the port unambiguous.
  if (host.empty() || (!bracketed && host.find(':') != std::string::npos) || host == "[]" ||
      host.find_first_of(" \t,") != std::string::npos) {
    return InvalidArgument(QuoteForMessage(text) + " is not host:port (IPv6 hosts go in brackets)");
  }
  // Host names and address literals are printable ASCII; anything else (a control character,
  // an escape sequence) is no host, and would reach logs and other processes' environments.
  if (std::any_of(host.begin(), host.end(), [](char c) { return c <= ' ' || c > '~'; })) {
    return InvalidArgument(QuoteForMessage(text) + " is not host:port (the host holds a "
                                                   "character outside printable ASCII)");
  }
  if (Status s = CheckPort(text.substr(colon + 1)); !s.ok()) {
    return InvalidArgument(QuoteForMessage(text) + ": " + s.message());
  }
  return OkStatus();
}

StatusOr<std::vector<std::string>> CheckEndpointList(const std::vector<std::string>& items,
                                                     const std::string& label) {
  // Duplicates are refused since every process needs its own.
  std::set<std::string> seen;
  std::vector<std::string> clean;
  for (const std::string& raw : items) {
    std::string item = Trim(raw);
    if (Status s = CheckEndpoint(item); !s.ok()) return s.WithContext(label);
    if (!seen.insert(item).second) {
      return InvalidArgument(label + ": the endpoint " + QuoteForMessage(item) +
                             " appears more than once");
    }
    clean.push_back(std::move(item));
  }
  return clean;
}

StatusOr<Role> ResolveRole(const Config& config, const std::map<std::string, std::string>& env) {
  return Resolver(config, env).Resolve();
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

}  // namespace fleet
