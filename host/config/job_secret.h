// The job secret of this process, from every place it may be given.
//
// Precedence, first non-empty wins:
//   1. FLEET_JOB_SECRET: the secret itself (`fleet-host launch` hands each rank it starts the
//      job's, so a launched rank never looks further);
//   2. FLEET_JOB_SECRET_FILE: the path of a file holding it;
//   3. fleet.toml's [comm] secret_file and [transport] secret_file (or --set): when both are set
//      they must hold the same secret, since a job has one.
// Nothing set means no secret (""): the store then runs unauthenticated, as before. Every file
// is read with ReadJobSecretFile (support/secret.h): private, small, at least 16 bytes.
//
// Users: the rendezvous store of a collective job (collective/job.cc) and the transport's token
// (TransportTokenFromSecret in support/secret.h).
#pragma once

#include <map>
#include <string>

#include "config/config.h"
#include "support/status.h"

namespace fleet {

// The secret by the precedence above, with `env` as the environment. Errors name the variable
// or the config key, and the file.
StatusOr<std::string> JobSecret(const Config& config,
                                const std::map<std::string, std::string>& env);

// The same with this process's environment.
StatusOr<std::string> JobSecret(const Config& config);

}  // namespace fleet
