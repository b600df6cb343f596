// RunPserver: a PsServer behind the transport's server. Kept apart from the server's logic so
// that the logic can be linked (and tested) without a transport.
#include <algorithm>
#include <thread>

#include "pserver/server.h"

#include "config/job_secret.h"
#include "support/logging.h"

namespace fleet {
namespace {

// "127.0.0.1:6170", "localhost:6170", "[::1]:6170".
bool IsLoopbackEndpoint(const std::string& endpoint) {
  const std::string host = endpoint.substr(0, endpoint.rfind(':'));
  return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace

Status RunPserver(const Config& config, const Role& role,
                  const std::map<std::string, ir::Program>& programs,
                  const PluginRegistry& registry, const std::string& device,
                  const ComponentRecord& transport, const std::string& program_hash,
                  std::ostream& out) {
  const std::string name = "pserver." + std::to_string(role.rank);
  auto main = programs.find(name);
  auto startup = programs.find(name + ".startup");
  if (main == programs.end() || startup == programs.end()) {
    std::string have;
    for (const auto& [n, p] : programs) have += (have.empty() ? "" : ", ") + n;
    return NotFound("the transpiled programs have no '" + name + "' and '" + name +
                    ".startup' for pserver " + std::to_string(role.rank) + " (they are: " +
                    have + "; is the pserver's rank within role.pserver_endpoints?)");
  }
  FLEET_ASSIGN_OR_RETURN(const std::string secret, JobSecret(config));
  const TransportOptions transport_options = TransportOptionsFrom(config, secret);
  PsServerOptions options;
  options.timeout = transport_options.timeout;
  // A server's blocks go to a directory of its own: under a launcher every process shares the
  // config, and trainer 0 writes the whole parameters into save_params_dir itself.
  if (!config.train.save_params_dir.empty()) {
    options.save_params_dir =
        config.train.save_params_dir / ("pserver." + std::to_string(role.rank));
  }
  options.num_threads = static_cast<int32_t>(config.train.threads);
  options.seed = static_cast<uint64_t>(config.train.seed);
  options.admit_after = config.pserver.growable_tables.admit_after;
  options.evict_after = config.pserver.growable_tables.evict_after;
  options.checkpoint_dir = config.checkpoint.dir;
  options.checkpoint_every = config.checkpoint.every_steps;
  options.checkpoint_keep = config.checkpoint.keep;
  options.last_round = config.train.steps;
  options.num_servers = static_cast<int64_t>(role.pserver_endpoints.size());
  options.program_hash = program_hash;
  options.trainer_batch = config.train.batch_size * std::max<int64_t>(role.world_size, 1);
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<PsServer> server,
                         PsServer::Create(registry, device, main->second, startup->second,
                                          options));
  if (!role.current_endpoint.empty() && role.current_endpoint != server->endpoint()) {
    return InvalidArgument(server->label() + ": the program serves " + server->endpoint() +
                           " but this process's endpoint is " + role.current_endpoint +
                           " (current_endpoint from " + role.source.at("current_endpoint") +
                           ")");
  }
  if (!config.train.init_from.empty()) {
    // Only a server that initialised whole vars and then cut them (pserver_init = "full") says
    // in its startup which rows each block holds.
    if (config.pserver.init != "full") {
      return FailedPrecondition(server->label() + ": train.init_from needs strategy.pserver_init "
                                                  "= \"full\" (\"" + config.pserver.init +
                                "\" initialises each block apart)");
    }
    std::vector<const ir::Program*> job;
    for (const auto& [n, p] : programs) job.push_back(&p);
    FLEET_ASSIGN_OR_RETURN(std::vector<std::string> loaded,
                           server->LoadInitialWeights(config.train.init_from, job,
                                                      startup->second));
    out << "pserver " << server->pserver_id() << " init_from: loaded its share of "
        << loaded.size() << " vars from " << config.train.init_from.string() << "\n";
  }
  if (config.checkpoint.resume && !config.checkpoint.dir.empty()) {
    // Before listening: the trainers' startups fetch the restored parameters.
    FLEET_ASSIGN_OR_RETURN(const int64_t step, server->ResumeFromCheckpoint());
    if (step > 0) {
      out << "pserver " << server->pserver_id() << " resumed at step " << step << "\n";
    }
  }
  FLEET_ASSIGN_OR_RETURN(
      std::unique_ptr<TransportServer> transport_server,
      TransportServer::Start(transport, server->endpoint(), server.get(), transport_options));
  if (transport_options.token.empty() && !transport_options.tls &&
      !IsLoopbackEndpoint(transport_server->endpoint())) {
    Log().warn("{}: serving a non-loopback address without a token or TLS: any process that "
               "can reach it can send gradients or end the job (give the job a secret, "
               "FLEET_JOB_SECRET or [transport] secret_file, or set transport.tls)",
               server->label());
  }
  out << "pserver " << server->pserver_id() << " listening on " << transport_server->endpoint()
      << " (" << server->Describe() << ")\n";
  out.flush();
  Status s = server->Serve();
  // Handlers still answering (a waiting barrier told of a failure, the last completes) get to
  // finish before the transport stops, so trainers hear the reason rather than ABORTED.
  server->WaitHandlersIdle(std::chrono::milliseconds(5000));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  transport_server->Stop();
  transport_server.reset();
  if (!s.ok()) return s;
  out << "pserver " << server->pserver_id() << " done: every trainer completed";
  if (server->sync()) out << " after " << server->rounds() << " rounds";
  if (!options.save_params_dir.empty()) {
    out << "; its parameter blocks saved to " << options.save_params_dir.string();
  }
  out << "\n";
  if (std::string tables = server->DescribeGrowable(); !tables.empty()) {
    out << "pserver " << server->pserver_id() << " " << tables << "\n";
  }
  return OkStatus();
}

}  // namespace fleet
