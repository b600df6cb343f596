// host/launch: `fleet-host launch`, the local launcher of a job's processes, and its
// failure report.
// Depends on: rendezvous/, roles/, support/.
//
// `fleet-host launch`: starts the local ranks of one job as child processes, serves the job's
// rendezvous store, collects every rank's output into a log file and stops the whole job when
// one rank fails or the user presses Ctrl-C (the role Paddle's `paddle.distributed.launch` and
// torchrun play).
//
// Process model (one launcher per node):
//   - World size W = nnodes * nproc; local rank l of node K has global rank K * nproc + l.
//   - Node 0's launcher serves the TCP store (TcpStoreServer) for as long as its children run:
//     on 127.0.0.1, port 0 (bound once and held, so two launches never race for a port) without
//     a master, else on the master's host:port. Other nodes only pass the master on.
//   - Every child runs in its own process group with PR_SET_PDEATHSIG(SIGKILL), stdin from
//     /dev/null and stdout+stderr into a pipe the launcher reads. Each line lands in
//     <log_dir>/<job_id>/trainer.<rank>.log; the node's first rank is also echoed to the console
//     with a "[trainer.<rank>] " prefix.
//   - The first rank to exit non-zero or by a signal is the job's failure: the others get SIGTERM
//     (to their process groups), SIGKILL after grace_s, and one bordered summary plus
//     <log_dir>/<job_id>/failure.json name it, its exit code or signal, its log tail and the
//     ranks that were only collateral. The launcher exits with the failure's code (128+signal
//     for a signal).
//   - SIGINT/SIGTERM to the launcher: SIGTERM to every child; a second one, or grace_s
//     passing, SIGKILLs them. Exit code 128+signal (130 for Ctrl-C).
//
// Parameter-server jobs (--servers S --workers W instead of --nproc; Paddle's launch_ps and
// fleetrun's PS mode), one node:
//   - Server i listens on 127.0.0.1:<a free port the launcher picked>, or on entry i of the
//     given endpoint list (every server of the list is started here). It gets TRAINING_ROLE=
//     PSERVER, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_PSERVER_ID=i, POD_IP and PADDLE_PORT of its
//     endpoint, PADDLE_TRAINERS_NUM=W, LOCAL_WORLD_SIZE=S+W and FLEET_JOB_ID.
//   - Worker i gets TRAINING_ROLE=TRAINER, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ID=i,
//     PADDLE_TRAINERS_NUM=W, LOCAL_WORLD_SIZE=S+W (every process shares the cores) and
//     FLEET_JOB_ID; never a server's POD_IP/PADDLE_PORT. No rendezvous store is served.
//   - Logs: <log_dir>/<job_id>/serverlog.<i> and workerlog.<i>; worker 0 is echoed with a
//     "[worker.0] " prefix.
//   - The first process to fail (server or worker) stops the job as above; the summary names
//     it "server 1" or "worker 0". A server exiting, even with 0, while workers still run
//     server_exit_s later is a failure (a server leaves on the last worker's notice, and that
//     worker may take a while to tear down). Once every worker has exited 0 the servers are expected to exit on their own
//     within server_exit_s; those still running then are stopped and reported as the failure
//     ("server 0 did not exit after every worker finished"), exit code 1.
//
// Restarts (--max-restarts K, torchrun's model): when the job fails, every process of it is
// stopped as above and the whole job is started again, up to K times, with FLEET_RESTART_COUNT
// set to the number of the start (0 for the first). A fresh store is served (a fresh set of
// server ports picked) for each start, and start k > 0 logs into <log_dir>/<job_id>/restart.<k>/.
// Ranks that run `run --resume` (or [checkpoint] resume = true) continue from the newest
// checkpoint. A job stopped by SIGINT/SIGTERM is not restarted; the exit code is the last
// start's. Single-node jobs only: launchers of several nodes would have to agree on restarting.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "support/status.h"

namespace fleet {

struct LaunchOptions {
  int nproc = 0;                  // local ranks; >= 1 (collective jobs; 0 in a PS job)
  int nnodes = 1;                 // >= 1; > 1 needs master and node_rank
  int node_rank = 0;              // < nnodes
  bool node_rank_set = false;     // whether --node-rank was given
  std::string master_host;        // empty = no --master (single node, 127.0.0.1, port 0)
  int master_port = 0;
  std::string log_dir = "log";
  std::string job_id = "fleet";   // no '/', no "..", not empty
  double grace_s = 3.0;           // >= 0
  // The child's argv: argv[0] is executed as given (a path) by every child.
  std::vector<std::string> argv;

  // A parameter-server job: servers and workers instead of nproc ranks. Exclusive with nproc,
  // nnodes > 1, master and node_rank.
  bool ps = false;
  int servers = 0;                            // the number of servers (>= 1) ...
  std::vector<std::string> server_endpoints;  // ... or their "host:port"s (then servers = size)
  int workers = 0;                            // >= 1
  double server_exit_s = 10.0;  // how long servers may outlive the last worker; >= 0

  int max_restarts = 0;  // >= 0: starts of the whole job after a failure (nnodes == 1 only)
  int restart = 0;       // which start this is (FLEET_RESTART_COUNT); set by RunLaunch
};

// Checks the options without touching anything; INVALID_ARGUMENT names the offending flag.
Status ValidateLaunchOptions(const LaunchOptions& options);

// Checks a --job-id value: 1 to kMaxJobIdBytes bytes, no '/', no "..", no control characters.
inline constexpr size_t kMaxJobIdBytes = 128;
Status CheckJobId(const std::string& job_id);

// Runs the job to its end, restarting it up to max_restarts times after a failure, and returns
// the launcher's exit code (0 when every rank finished with 0). Returns an error Status, with nothing started, when the options are invalid, the log
// directory cannot be created or the store cannot be served (e.g. the master's port is in use).
// Launcher messages and the summary go to `err`, the echoed rank's lines to `out`.
// Installs its own SIGINT/SIGTERM/SIGCHLD/SIGPIPE handling for the duration and restores the
// previous dispositions before returning. Not reentrant: one launch per process at a time.
StatusOr<int> RunLaunch(const LaunchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace fleet
