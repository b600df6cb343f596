#include "config/job_secret.h"

#include <cstdlib>

#include "support/secret.h"
#include "support/text.h"

namespace fleet {

StatusOr<std::string> JobSecret(const Config& config,
                                const std::map<std::string, std::string>& env) {
  FLEET_ASSIGN_OR_RETURN(std::string secret, JobSecretFromEnvironment(env));
  if (!secret.empty()) return secret;
  std::string chosen_key;
  for (const auto& [key, path] : {std::pair{"comm.secret_file", &config.comm_secret_file},
                                  std::pair{"transport.secret_file", &config.rpc.secret_file}}) {
    if (path->empty()) continue;
    StatusOr<std::string> read = ReadJobSecretFile(path->string());
    if (!read.ok()) return read.status().WithContext(key);
    if (chosen_key.empty()) {
      secret = std::move(*read);
      chosen_key = key;
    } else if (*read != secret) {
      return InvalidArgument(chosen_key + " (" +
                             QuoteForMessage(config.comm_secret_file.string(), 200) + ") and " +
                             key + " (" + QuoteForMessage(path->string(), 200) +
                             ") hold different secrets; a job has one secret: point both at "
                             "the same file, or set only one");
    }
  }
  return secret;
}

StatusOr<std::string> JobSecret(const Config& config) {
  std::map<std::string, std::string> env;
  for (const char* key : {kJobSecretEnv, kJobSecretFileEnv}) {
    if (const char* v = std::getenv(key)) env[key] = v;
  }
  return JobSecret(config, env);
}

}  // namespace fleet
