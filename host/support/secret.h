// The job secret below the config: the environment's two ways of giving it, reading a secret
// file as hostile input, and the transport token derived from it. JobSecret (config/job_secret.h)
// adds fleet.toml's keys on top; `fleet-host launch`, which reads no fleet.toml, uses this part
// alone.
//
// The job secret is what the rendezvous store's challenge-response (rendezvous/tcp_store.h) and
// the parameter-server transport's token rest on: every process of one job holds the same bytes,
// and nobody else does.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "support/status.h"

namespace fleet {

// The secret itself (`fleet-host launch` sets it for the ranks it starts).
inline constexpr char kJobSecretEnv[] = "FLEET_JOB_SECRET";
// The path of a file holding it (a job started by another launcher).
inline constexpr char kJobSecretFileEnv[] = "FLEET_JOB_SECRET_FILE";

// A shorter secret is refused wherever it comes from: it could be guessed.
constexpr size_t kMinJobSecretBytes = 16;
// A secret file is read up to this many bytes; a larger one is refused, not cut.
constexpr size_t kMaxJobSecretFileBytes = 4096;

// Reads the secret file at `path` as an ssh client reads a private key. Refused, each with an
// error that names the path: a path that cannot be opened (NOT_FOUND or PERMISSION_DENIED);
// anything but a regular file after following symlinks (a FIFO, a device such as /dev/zero, a
// directory; FAILED_PRECONDITION); a file owned by anyone but this process's effective user or
// root, or with any permission bit for group or others (PERMISSION_DENIED, with the owner or the
// mode and the chmod that fixes it); more than kMaxJobSecretFileBytes bytes (INVALID_ARGUMENT,
// nothing beyond the cap is read); and, after one trailing "\n" or "\r\n" is dropped, an empty
// secret or one shorter than kMinJobSecretBytes (INVALID_ARGUMENT). The checks are made on the
// file actually opened (fstat), so swapping the file in between gains nothing; a symlink is
// followed and its target is what must be private.
StatusOr<std::string> ReadJobSecretFile(const std::string& path);

// The job secret the environment `env` gives, in this order: FLEET_JOB_SECRET (when non-empty;
// INVALID_ARGUMENT when shorter than kMinJobSecretBytes), else the file FLEET_JOB_SECRET_FILE
// names (when non-empty; ReadJobSecretFile, its error prefixed with the variable), else ""
// (no secret). Variables set to "" count as unset.
StatusOr<std::string> JobSecretFromEnvironment(const std::map<std::string, std::string>& env);

// The same for this process's environment.
StatusOr<std::string> JobSecretFromEnvironment();

// The parameter-server transport's shared token for a job secret: hex of
// HMAC-SHA256(secret, "fleet transport token v1"), 64 lowercase characters ("" for an empty
// secret: no secret, no token). Every process of the
// job derives the same token without the secret itself crossing the wire, and the token says
// nothing usable about the secret (nor about the store's challenge-response under it).
std::string TransportTokenFromSecret(std::string_view secret);

}  // namespace fleet
