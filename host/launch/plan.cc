// What each process of a job is told: the environment it inherits (with the variables of other
// launchers removed) and the role variables of its place in the job.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "launch/launch_internal.h"

namespace fleet::launcher_internal {
namespace {

// Variables the launcher sets or that role.h's ResolveRole reads: a value the user's shell
// carries for one of them (RANK from an earlier torchrun, OMPI_* from an mpirun wrapper, a
// leftover PADDLE_TRAINER_ID) would contradict the launcher's and make every rank refuse to
// start, so children never inherit them:
//   TRAINING_ROLE PADDLE_TRAINING_ROLE PADDLE_TRAINER_ID PADDLE_TRAINERS_NUM
//   PADDLE_TRAINER_ENDPOINTS PADDLE_CURRENT_ENDPOINT PADDLE_PSERVERS_IP_PORT_LIST
//   PADDLE_PSERVER_ID POD_IP PADDLE_PORT PADDLE_RANK_IN_NODE
//   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
//   PMI_RANK PMI_SIZE SLURM_PROCID SLURM_NTASKS SLURM_LOCALID OMPI_COMM_WORLD_* (all)
//   FLEET_MASTER_SERVED FLEET_JOB_ID FLEET_MPI_SYMMETRIC FLEET_RESTART_COUNT
// plus http_proxy/https_proxy (and their upper-case spellings), which Paddle's launchers drop
// so that ranks talking to each other are never sent through a proxy.
const std::set<std::string>& StrippedVariables() {
  static const std::set<std::string> names = {
      "TRAINING_ROLE", "PADDLE_TRAINING_ROLE", "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM",
      "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT", "PADDLE_PSERVERS_IP_PORT_LIST",
      "PADDLE_PSERVER_ID", "POD_IP", "PADDLE_PORT", "PADDLE_RANK_IN_NODE", "RANK", "WORLD_SIZE",
      "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK", "PMI_SIZE",
      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "FLEET_MASTER_SERVED", "FLEET_JOB_ID",
      "FLEET_MPI_SYMMETRIC", "FLEET_RESTART_COUNT", "http_proxy", "https_proxy", "HTTP_PROXY",
      "HTTPS_PROXY"};
  return names;
}

}  // namespace

bool Stripped(const std::string& name) {
  return StrippedVariables().count(name) != 0 || name.starts_with("OMPI_COMM_WORLD_");
}

// `n` distinct free ports on 127.0.0.1: each is bound at port 0 and read back, all at once (so
// they differ), then closed for the servers to bind. Between the close and a server's bind
// another program may take one: the servers bind without SO_REUSEPORT, so the loser fails with
// "address in use" and the job ends with the usual failure summary naming it.
StatusOr<std::vector<std::string>> PickLocalEndpoints(int n) {
  std::vector<int> fds;
  std::vector<std::string> endpoints;
  Status status = OkStatus();
  for (int i = 0; i < n && status.ok(); ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      status = Internal("cannot pick a port for server " + std::to_string(i) + ": socket: " +
                        strerror(errno));
      break;
    }
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      status = Internal("cannot pick a port for server " + std::to_string(i) + ": " +
                        strerror(errno));
      break;
    }
    endpoints.push_back("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  }
  for (int fd : fds) ::close(fd);
  if (!status.ok()) return status;
  return endpoints;
}

std::string JoinEndpoints(const std::vector<std::string>& endpoints) {
  std::string out;
  for (const std::string& e : endpoints) out += (out.empty() ? "" : ",") + e;
  return out;
}

void Launch::PlanCollective() {
  const int world = o_.nnodes * o_.nproc;
  children_.resize(static_cast<size_t>(o_.nproc));
  for (int l = 0; l < o_.nproc; ++l) {
    Child& c = children_[static_cast<size_t>(l)];
    c.record.local_rank = l;
    c.record.rank = o_.node_rank * o_.nproc + l;
    c.record.log_path = (job_dir_ / ("trainer." + std::to_string(c.record.rank) + ".log")).string();
    c.echo = l == 0;
    c.echo_prefix = "[trainer." + std::to_string(c.record.rank) + "] ";
    c.env = {{"PADDLE_TRAINER_ID", std::to_string(c.record.rank)},
             {"PADDLE_TRAINERS_NUM", std::to_string(world)},
             {"TRAINING_ROLE", "TRAINER"},
             {"LOCAL_RANK", std::to_string(c.record.local_rank)},
             {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc)},
             {"MASTER_ADDR", master_addr_},
             {"MASTER_PORT", std::to_string(master_port_)},
             {"FLEET_MASTER_SERVED", "1"},
             {"FLEET_JOB_ID", o_.job_id},
             {"FLEET_RESTART_COUNT", std::to_string(o_.restart)}};
    if (!job_secret_.empty()) c.env.emplace_back("FLEET_JOB_SECRET", job_secret_);
  }
}

void Launch::PlanParameterServer() {
  const int servers = static_cast<int>(server_endpoints_.size());
  const std::string list = JoinEndpoints(server_endpoints_);
  const std::string local_world = std::to_string(servers + o_.workers);
  const std::string trainers = std::to_string(o_.workers);
  // Servers first, so they are already starting when the workers look for them.
  children_.resize(static_cast<size_t>(servers + o_.workers));
  for (int i = 0; i < servers; ++i) {
    Child& c = children_[static_cast<size_t>(i)];
    const std::string& endpoint = server_endpoints_[static_cast<size_t>(i)];
    size_t colon = endpoint.rfind(':');
    c.record.role = "server";
    c.record.rank = i;
    c.record.local_rank = i;
    c.record.log_path = (job_dir_ / ("serverlog." + std::to_string(i))).string();
    // POD_IP keeps an IPv6 host's brackets, so that POD_IP:PADDLE_PORT is the list's entry.
    c.env = {{"TRAINING_ROLE", "PSERVER"},
             {"PADDLE_PSERVERS_IP_PORT_LIST", list},
             {"PADDLE_PSERVER_ID", std::to_string(i)},
             {"POD_IP", endpoint.substr(0, colon)},
             {"PADDLE_PORT", endpoint.substr(colon + 1)},
             {"PADDLE_TRAINERS_NUM", trainers},
             {"LOCAL_WORLD_SIZE", local_world},
             {"FLEET_JOB_ID", o_.job_id},
             {"FLEET_RESTART_COUNT", std::to_string(o_.restart)}};
    if (!job_secret_.empty()) c.env.emplace_back("FLEET_JOB_SECRET", job_secret_);
  }
  for (int i = 0; i < o_.workers; ++i) {
    Child& c = children_[static_cast<size_t>(servers + i)];
    c.record.role = "worker";
    c.record.rank = i;
    c.record.local_rank = servers + i;
    c.record.log_path = (job_dir_ / ("workerlog." + std::to_string(i))).string();
    c.echo = i == 0;
    c.echo_prefix = "[worker." + std::to_string(i) + "] ";
    c.env = {{"TRAINING_ROLE", "TRAINER"},
             {"PADDLE_PSERVERS_IP_PORT_LIST", list},
             {"PADDLE_TRAINER_ID", std::to_string(i)},
             {"PADDLE_TRAINERS_NUM", trainers},
             {"LOCAL_WORLD_SIZE", local_world},
             {"FLEET_JOB_ID", o_.job_id},
             {"FLEET_RESTART_COUNT", std::to_string(o_.restart)}};
    if (server_ != nullptr) {  // the workers' store (Launch::Prepare)
      c.env.insert(c.env.end(), {{"MASTER_ADDR", master_addr_},
                                 {"MASTER_PORT", std::to_string(master_port_)},
                                 {"FLEET_MASTER_SERVED", "1"}});
    }
    if (!job_secret_.empty()) c.env.emplace_back("FLEET_JOB_SECRET", job_secret_);
  }
}

}  // namespace fleet::launcher_internal
