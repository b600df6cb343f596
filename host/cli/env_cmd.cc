// `fleet-host env [--json]`: the role this process would play, resolved from fleet.toml's [role]
// and the launcher variables of the environment, with where each value came from. The first thing
// to run when a job's ranks do not find each other.
#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "roles/role.h"

namespace fleet {

int EnvCommand(const GlobalOptions& global, const std::vector<std::string>& args, std::ostream& out,
               std::ostream& err) {
  bool json = false;
  for (const std::string& a : args) {
    if (a == "--json") {
      json = true;
    } else {
      err << "fleet-host env: unexpected argument '" << a << "'; usage: fleet-host env [--json]\n";
      return kExitUsage;
    }
  }
  auto config = LoadConfigFor(global);
  if (!config.ok()) return Fail(err, config.status());
  auto role = ResolveRole(*config, ProcessEnvironment());
  if (!role.ok()) return Fail(err, role.status());

  if (json) {
    nlohmann::json j = nlohmann::json::object();
    j["config"] = config->source;
    j["role"] = role->role;
    j["rank"] = role->rank;
    j["world_size"] = role->world_size;
    j["trainer_endpoints"] = role->trainer_endpoints;
    j["current_endpoint"] = role->current_endpoint;
    j["pserver_endpoints"] = role->pserver_endpoints;
    j["master_addr"] = role->master_addr;
    j["master_port"] = role->master_port;
    j["local_rank"] = role->local_rank;
    j["mpi_symmetric"] = role->mpi_symmetric;
    j["source"] = role->source;
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  size_t width = 0;
  for (const std::string& name : RoleFieldNames()) width = std::max(width, name.size());
  out << "config: " << config->source << "\n";
  for (const std::string& name : RoleFieldNames()) {
    std::string value = RoleFieldText(*role, name);
    if (value.empty()) value.push_back('-');
    out << std::left << std::setw(static_cast<int>(width + 2)) << name << value << "  ("
        << role->source.at(name) << ")\n";
  }
  return kExitOk;
}

}  // namespace fleet
