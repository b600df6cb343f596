// The launcher's options checked before anything starts.
#include <cmath>
#include <set>

#include "launch/launch_internal.h"
#include "roles/role.h"
#include "support/text.h"

namespace fleet {

using launcher_internal::kMaxLocalRanks;

Status CheckJobId(const std::string& job_id) {
  if (job_id.empty()) return InvalidArgument("--job-id: the job id is empty");
  // It names a directory (a file name is at most 255 bytes) and appears in every rank's
  // environment and in messages.
  if (job_id.size() > kMaxJobIdBytes) {
    return InvalidArgument("--job-id: a job id of " + std::to_string(job_id.size()) +
                           " bytes, more than " + std::to_string(kMaxJobIdBytes));
  }
  if (job_id.find('/') != std::string::npos || job_id.find("..") != std::string::npos) {
    return InvalidArgument("--job-id " + QuoteForMessage(job_id) +
                           ": a job id names a directory under --log-dir and may not contain "
                           "'/' or '..'");
  }
  for (unsigned char ch : job_id) {
    if (ch < 0x20 || ch == 0x7f) {
      return InvalidArgument("--job-id: the job id contains a control character");
    }
  }
  return OkStatus();
}

namespace {

Status ValidateParameterServer(const LaunchOptions& o) {
  if (o.nproc != 0) {
    return InvalidArgument("--nproc cannot be combined with --servers/--workers: a job is either "
                           "collective (--nproc) or parameter-server (--servers and --workers)");
  }
  if (o.nnodes != 1 || o.node_rank_set || !o.master_host.empty()) {
    return InvalidArgument("--nnodes, --node-rank and --master do not apply to a "
                           "parameter-server job: it runs on this node, servers and workers "
                           "finding each other through the server endpoints");
  }
  if (o.workers < 1) {
    return InvalidArgument("--workers " + std::to_string(o.workers) +
                           ": a parameter-server job needs at least 1 worker (--workers W)");
  }
  const int servers =
      o.server_endpoints.empty() ? o.servers : static_cast<int>(o.server_endpoints.size());
  if (servers < 1) {
    return InvalidArgument("--servers " + std::to_string(servers) +
                           ": a parameter-server job needs at least 1 server (--servers S)");
  }
  if (!o.server_endpoints.empty() && o.servers != 0 &&
      o.servers != static_cast<int>(o.server_endpoints.size())) {
    return InvalidArgument("--servers: " + std::to_string(o.servers) + " servers but " +
                           std::to_string(o.server_endpoints.size()) + " endpoints");
  }
  if (static_cast<int64_t>(servers) + o.workers > kMaxLocalRanks) {
    return InvalidArgument("--servers " + std::to_string(servers) + " + --workers " +
                           std::to_string(o.workers) + ": at most " +
                           std::to_string(kMaxLocalRanks) + " processes per node");
  }
  std::set<std::string> seen;
  for (const std::string& e : o.server_endpoints) {
    if (Status s = CheckEndpoint(e); !s.ok()) return s.WithContext("--servers");
    if (!seen.insert(e).second) {
      return InvalidArgument("--servers: the endpoint '" + e + "' appears more than once");
    }
  }
  if (!(o.server_exit_s >= 0) || !std::isfinite(o.server_exit_s)) {
    return InvalidArgument("--server-exit-s: expected a number of seconds >= 0");
  }
  return OkStatus();
}

}  // namespace

Status ValidateLaunchOptions(const LaunchOptions& o) {
  if (o.ps) {
    FLEET_RETURN_IF_ERROR(ValidateParameterServer(o));
  } else {
    if (o.nproc < 1) {
      return InvalidArgument("--nproc " + std::to_string(o.nproc) + ": need at least 1 process");
    }
    if (o.nproc > kMaxLocalRanks) {
      return InvalidArgument("--nproc " + std::to_string(o.nproc) + ": at most " +
                             std::to_string(kMaxLocalRanks) + " ranks per node");
    }
  }
  if (o.nnodes < 1) {
    return InvalidArgument("--nnodes " + std::to_string(o.nnodes) + ": need at least 1 node");
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return InvalidArgument("--node-rank " + std::to_string(o.node_rank) +
                           " is not below --nnodes " + std::to_string(o.nnodes));
  }
  if (o.nnodes > 1 && (o.master_host.empty() || !o.node_rank_set)) {
    return InvalidArgument("--nnodes " + std::to_string(o.nnodes) +
                           " needs --master HOST:PORT (node 0's address, where it serves the "
                           "store) and --node-rank (this node's index)");
  }
  if (!o.master_host.empty() && (o.master_port < 1 || o.master_port > 65535)) {
    return InvalidArgument("--master: the port " + std::to_string(o.master_port) +
                           " is not in 1..65535");
  }
  if (static_cast<int64_t>(o.nproc) * o.nnodes > (int64_t{1} << 20)) {
    return InvalidArgument("--nproc * --nnodes is too large");
  }
  if (o.max_restarts < 0) {
    return InvalidArgument("--max-restarts " + std::to_string(o.max_restarts) +
                           ": expected a count >= 0");
  }
  if (o.max_restarts > 0 && o.nnodes > 1) {
    return InvalidArgument("--max-restarts needs a job of one node: the launchers of " +
                           std::to_string(o.nnodes) + " nodes cannot agree on restarting");
  }
  if (!(o.grace_s >= 0) || !std::isfinite(o.grace_s)) {
    return InvalidArgument("--grace-s: expected a number of seconds >= 0");
  }
  if (o.log_dir.empty()) return InvalidArgument("--log-dir: the directory name is empty");
  FLEET_RETURN_IF_ERROR(CheckJobId(o.job_id));
  if (o.argv.empty() || o.argv[0].empty()) {
    return InvalidArgument("no command to run after '--'");
  }
  return OkStatus();
}

}  // namespace fleet
