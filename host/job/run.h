// host/job: a training job as a library. It turns a program file and a config into programs
// (pipeline.h), resolves what this process is in the job (roles/), and runs its part: the
// training loop of a trainer (train.h, train_devices.h) or a parameter server's service
// (pserver/). The command line (cli/) parses arguments and prints; everything a job does is
// here, so a test or a binding can drive a job without argv.
//
// Depends on: autodiff/, checkpoint/, collective/, config/, data/, executor/, frontend/, ir/,
//   optim/, ops/, passes/, plugin/, pserver/, rendezvous/, roles/, support/. Not launch/: the
//   launcher starts processes that each run a job; a job never starts processes.
#pragma once

#include <functional>
#include <map>
#include <ostream>
#include <string>

#include "config/config.h"
#include "support/status.h"

namespace fleet {

// What one process of a job is asked to do.
struct JobRequest {
  std::string program;  // the program file
  Config config;        // loaded and validated (config/config.h)
  bool resume = false;  // `run --resume`: continue from the newest checkpoint ([checkpoint] dir)
  // The process environment, from which the role is resolved (roles/role.h) and LOCAL_WORLD_SIZE
  // or OMPI_COMM_WORLD_LOCAL_SIZE divides the cores when [train] threads is 0.
  std::map<std::string, std::string> env;
};

// Runs this process's part of the job to its end: for a trainer, the whole training loop
// (collective, parameter-server or alone, as [strategy] and the role say); for a parameter
// server, its service until every trainer has completed. Progress goes to `out`; `warn` gets
// each warning (an optional plugin that failed to load, servers that were not all told that
// this trainer finished). Errors name the program file and, in a job of several processes, this
// process's rank. A trainer that fails aborts its communicators first, so its peers stop at
// once instead of at their timeout.
Status RunJob(const JobRequest& request, std::ostream& out,
              const std::function<void(const std::string&)>& warn);

}  // namespace fleet
