// host/roles: which part of a job this process plays, resolved from fleet.toml and the
// environment variables of the launchers.
// Depends on: config/, support/.
//
// Which part of a job this process plays: trainer or parameter server, its rank, the number of
// trainers and everyone's endpoints.
//
// Launchers say this through environment variables, each in its own dialect, and a user may
// also write it in fleet.toml's [role]. ResolveRole reads all of them:
//
//   field              fleet.toml [role]   environment (in the order they are consulted)
//   role               role                TRAINING_ROLE, PADDLE_TRAINING_ROLE (TRAINER|PSERVER)
//   rank   (trainer)   rank                PADDLE_TRAINER_ID, OMPI_COMM_WORLD_RANK, PMI_RANK,
//                                          SLURM_PROCID, RANK
//   rank   (pserver)   rank                PADDLE_PSERVER_ID, the index of current_endpoint in
//                                          pserver_endpoints
//   world_size         world_size          PADDLE_TRAINERS_NUM, OMPI_COMM_WORLD_SIZE, PMI_SIZE,
//                                          SLURM_NTASKS, WORLD_SIZE
//   trainer_endpoints  trainer_endpoints   PADDLE_TRAINER_ENDPOINTS (comma-separated)
//   current_endpoint   current_endpoint    PADDLE_CURRENT_ENDPOINT; pserver: POD_IP:PADDLE_PORT
//   pserver_endpoints  pserver_endpoints   PADDLE_PSERVERS_IP_PORT_LIST (comma-separated)
//   master_addr/port   master (host:port)  MASTER_ADDR, MASTER_PORT
//   local_rank         local_rank          OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK
//   mpi_symmetric      mpi_symmetric       FLEET_MPI_SYMMETRIC (1|0, true|false)
//
// MPI's symmetric layout (mpi_symmetric; Paddle's MPISymetricRoleMaker): every MPI process of
// the job runs the same command and MPI's rank r (OMPI_COMM_WORLD_RANK or PMI_RANK) says what it
// plays: even r is pserver r/2, odd r is trainer r/2. The MPI size must be even (one server per
// trainer) and world_size is size/2; pserver_endpoints ([role] or PADDLE_PSERVERS_IP_PORT_LIST)
// must list size/2 servers, and a server's current_endpoint is its entry. The MPI-derived role,
// rank and world_size join the other sources (and must agree with them); the variables that
// count processes of every role (MPI's, PMI's, Slurm's, torchrun's rank and size) are then not
// read as a trainer's rank or world size, and OMPI_COMM_WORLD_LOCAL_RANK is halved for a
// trainer (one server and one trainer per pair of local processes). Sources read e.g.
// "OMPI_COMM_WORLD_RANK=3 (mpi_symmetric: odd rank -> trainer 1)".
//
// Sources that give the same value agree; two that give different values are an
// INVALID_ARGUMENT naming both ("rank: PADDLE_TRAINER_ID=1 but RANK=0"), because silently
// preferring one is how a job ends up with two rank 0s. Unset or empty variables are ignored.
//
// Deliberate choices:
// - For a pserver, the launcher rank variables (MPI, PMI, Slurm, torchrun, PADDLE_TRAINER_ID)
//   are not read: they count processes of every role, while a pserver's rank is its index in
//   the server list. Likewise POD_IP/PADDLE_PORT are read only for a pserver (Paddle's
//   launch_ps leaks the last server's into every trainer's environment).
// - Fields nobody set are derived where that is unambiguous: world_size from the number of
//   trainer endpoints, current_endpoint from the endpoint list at rank. With nothing set at all
//   the process is trainer 0 of 1, local rank 0, no endpoints.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "support/status.h"

namespace fleet {

struct Role {
  std::string role = "trainer";                // trainer or pserver
  int64_t rank = 0;                            // trainer: < world_size; pserver: server index
  int64_t world_size = 1;                      // the number of trainers
  std::vector<std::string> trainer_endpoints;  // "host:port" each, in rank order; may be empty
  std::string current_endpoint;                // "" when unknown
  std::vector<std::string> pserver_endpoints;  // "host:port" each; non-empty for a pserver
  std::string master_addr;                     // "" when not set
  int64_t master_port = 0;                     // 0 when not set
  int64_t local_rank = 0;
  bool mpi_symmetric = false;                  // the layout above decided role and rank

  // Where each field's value came from, by field name ("rank", "master_port", ...): e.g. "env
  // PADDLE_TRAINER_ID", "fleet.toml:12:1 role.rank", "--set role.rank", "default", or a derivation
  // ("number of trainer_endpoints (env PADDLE_TRAINER_ENDPOINTS)"). Every field of RoleFieldNames()
  // has an entry.
  std::map<std::string, std::string> source;

  bool is_pserver() const { return role == "pserver"; }
};

// The field names of Role in declaration order, as used in Role::source and by `fleet-host env`.
const std::vector<std::string>& RoleFieldNames();

// The value of field `name` of `role` as text: integers in decimal, lists comma-separated.
std::string RoleFieldText(const Role& role, const std::string& name);

// Combines config.role and `env` (variable name -> value) as described above.
StatusOr<Role> ResolveRole(const Config& config, const std::map<std::string, std::string>& env);

// The environment of this process as a map, for ResolveRole.
std::map<std::string, std::string> ProcessEnvironment();

// Checks "host:port" (host non-empty printable ASCII, IPv6 hosts in brackets, port 1..65535); the
// error says what is wrong with `text` (quoted escaped) but not where it came from.
Status CheckEndpoint(const std::string& text);

// A list of endpoints as [role] *_endpoints, the PADDLE_*_ENDPOINTS variables and the command
// line give them: each item trimmed of spaces and checked by CheckEndpoint, no item twice.
// Errors start with `label` (where the list came from: "--pservers", "fleet.toml:3:1 ...").
StatusOr<std::vector<std::string>> CheckEndpointList(const std::vector<std::string>& items,
                                                     const std::string& label);

}  // namespace fleet
