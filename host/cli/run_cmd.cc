// `fleet-host run PROGRAM [--resume] [--config FILE] [--set KEY=VALUE ...]`: parse, differentiate and
// optimize the program, load the plugins the config selects and train on this process; or,
// for a parameter server (role pserver), serve its part of the transpiled job until every
// trainer has completed.
#include "cli/cli.h"
#include "job/pipeline.h"
#include "job/train.h"
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "collective/job.h"
#include "pserver/server.h"
#include "pserver/trainer.h"
#include "roles/role.h"
#include "passes/builtin_passes.h"
#include "plugin/host_api.h"
#include "plugin/registry.h"
#include "plugin/selection.h"
#include "plugin/transport.h"

namespace fleet {

int RunCommand(const GlobalOptions& global, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err) {
  // --config and --set may also follow the program, as in `run mlp.fleet --set train.steps=5`.
  GlobalOptions options = global;
  std::string file;
  bool resume = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--resume") {
      resume = true;
    } else if (a == "--config" || a == "--set") {
      if (i + 1 >= args.size()) {
        err << "fleet-host run: " << a << " needs a value\n";
        return kExitUsage;
      }
      if (a == "--config") {
        options.config_path = args[++i];
      } else {
        options.overrides.push_back(args[++i]);
      }
    } else if (!a.empty() && a[0] == '-') {
      err << "fleet-host run: unknown option '" << a << "'\n";
      return kExitUsage;
    } else if (file.empty()) {
      file = a;
    } else {
      err << "fleet-host run: unexpected argument '" << a << "'\n";
      return kExitUsage;
    }
  }
  if (file.empty()) {
    err << "fleet-host run: which program? usage: fleet-host run PROGRAM [--resume] "
           "[--config FILE] [--set KEY=VALUE ...]\n";
    return kExitUsage;
  }
  auto loaded = LoadConfigFor(options);
  if (!loaded.ok()) return Fail(err, loaded.status());
  Config config = *loaded;
  if (resume) {
    if (config.checkpoint.dir.empty()) {
      return Fail(err, InvalidArgument("--resume needs checkpoint.dir (in [checkpoint] of " +
                                       config.source + ", or --set checkpoint.dir=DIR)"));
    }
    config.checkpoint.resume = true;
  }
  const std::map<std::string, std::string> env = ProcessEnvironment();
  auto role = ResolveRole(config, env);
  if (!role.ok()) return Fail(err, role.status());
  config.strategy_mode = EffectiveStrategy(config, *role);
  if (role->is_pserver() && config.strategy_mode != "pserver") {
    return Fail(err, InvalidArgument("this process is a parameter server (role from " +
                                     role->source.at("role") + ") but strategy.mode is \"" +
                                     config.strategy_mode +
                                     "\"; use \"pserver\" or \"auto\""));
  }
  if (config.strategy_mode == "pserver" && !config.pserver.sync_mode &&
      !config.checkpoint.dir.empty()) {
    return Fail(err, FailedPrecondition("[checkpoint] dir is set, but checkpoints need a sync "
                                        "parameter-server job (strategy.sync_mode): in async "
                                        "mode no step is the same on every server"));
  }
  if (config.strategy_mode == "none" && role->world_size > 1) {
    return Fail(err, InvalidArgument("the job has " + std::to_string(role->world_size) +
                                     " trainers (world_size from " +
                                     role->source.at("world_size") +
                                     ") but strategy.mode is \"none\"; use \"collective\" or "
                                     "\"auto\""));
  }
  // Trainers sharing a machine share its cores, unless [train] threads says otherwise.
  if (config.train.threads == 0) {
    // torchrun's and fleet-host launch's name, else Open MPI's.
    int64_t local = 1;
    for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
      auto it = env.find(name);
      if (it != env.end() && std::atoll(it->second.c_str()) > 0) {
        local = std::atoll(it->second.c_str());
        break;
      }
    }
    const int64_t cores = static_cast<int64_t>(std::thread::hardware_concurrency());
    if (local > 1 && cores > 0) config.train.threads = std::max<int64_t>(1, cores / local);
  }

  auto programs = BuildPrograms(file, Stage::kOptimized);
  if (!programs.ok()) return Fail(err, programs.status());
  PluginRegistry registry(LoadOptionsFor(config));
  if (Status s = RegisterBuiltinPasses(registry); !s.ok()) return Fail(err, s);
  auto selection = LoadSelected(config, registry);
  if (!selection.ok()) return Fail(err, selection.status());
  for (const std::string& w : selection->warnings) err << "fleet-host: warning: " << w << "\n";

  if (config.collective.mode == "single_process_multi_thread" &&
      config.strategy_mode == "collective") {
    if (role->world_size > 1) {
      return Fail(err, Unimplemented("strategy.collective_mode \"single_process_multi_thread\" "
                                     "drives the devices of one process; this job has " +
                                     std::to_string(role->world_size) + " trainers"));
    }
    auto summary = TrainOnDevices(config, *programs, registry, selection->device->name,
                                  static_cast<int32_t>(config.collective.devices), out);
    if (!summary.ok()) return Fail(err, summary.status().WithContext(file));
    return kExitOk;
  }
  // Every process of a job hashes the same programs: the optimized ones, before each role's
  // transpiling, so trainers and servers recognise each other's checkpoints.
  const std::string program_hash =
      checkpoint::ProgramHash({&programs->startup, &programs->main});
  auto transpiled = Transpile(config, *role, *programs, registry);
  if (!transpiled.ok()) return Fail(err, transpiled.status().WithContext(file));
  if (role->is_pserver()) {
    if (selection->transport == nullptr) {
      return Fail(err, FailedPrecondition("a parameter server needs a transport, and none was "
                                          "selected (transport.backend)"));
    }
    Status s = RunPserver(config, *role, *transpiled, registry, selection->device->name,
                          *selection->transport, program_hash, out);
    if (!s.ok()) {
      return Fail(err, s.WithContext(file + " (pserver " + std::to_string(role->rank) + ")"));
    }
    return kExitOk;
  }
  frontend::ParsedProgram trainer = *programs;
  trainer.startup = std::move((*transpiled)["startup"]);
  trainer.main = std::move((*transpiled)["main"]);
  TrainDist dist;
  dist.program_hash = program_hash;
  auto local = transpiled->find("main.local");
  if (local != transpiled->end()) {
    dist.main_local = &local->second;
    dist.k_steps = config.collective.local_sgd_k_steps;
  }
  std::unique_ptr<Job> job;
  if (config.strategy_mode == "collective") {
    auto opened = Job::Open(config, *role, selection->comm, selection->device, env);
    if (!opened.ok()) return Fail(err, opened.status());
    job = std::move(*opened);
    dist.job = job.get();
    SetJobStore(job->store());
    if (role->rank == 0) {
      out << "collective job: " << role->world_size << " trainers, " << config.comm.backend
          << " communicator, store " << job->store_description() << "\n";
    }
  }
  std::unique_ptr<PsTrainerRuntime> ps;
  if (config.strategy_mode == "pserver") {
    if (selection->transport == nullptr) {
      return Fail(err, FailedPrecondition("a parameter-server trainer needs a transport, and "
                                          "none was selected (transport.backend)"));
    }
    ps = std::make_unique<PsTrainerRuntime>(
        *selection->transport, role->pserver_endpoints, static_cast<int32_t>(role->rank),
        TransportOptionsFrom(config), selection->device);
    if (Status s = ps->WaitServersReady(); !s.ok()) {
      return Fail(err, s.WithContext(file + " (trainer " + std::to_string(role->rank) + ")"));
    }
    dist.host_kernels = ps.get();
    dist.trainer_id = role->rank;
    dist.trainers = role->world_size;
    dist.pservers = static_cast<int64_t>(role->pserver_endpoints.size());
    if (role->rank == 0) {
      out << "pserver job: " << role->world_size << " trainers, "
          << role->pserver_endpoints.size() << " pservers ("
          << (config.pserver.sync_mode ? "sync" : "async") << "), " << config.transport.backend
          << " transport\n";
    }
  }
  auto summary = Train(config, trainer, registry, selection->device->name, out, dist);
  SetJobStore(nullptr);  // the job's store goes with `job`
  if (ps != nullptr) {
    // Only a trainer that finished tells the servers so: one that failed leaves them waiting
    // for it until their deadline, which fails the job rather than training on without it.
    if (summary.ok()) {
      if (Status s = ps->Complete(); !s.ok()) {
        err << "fleet-host: warning: the parameter servers were not all told that this trainer "
               "finished: " << s.ToString() << "\n";
      }
    }
    ps->Close();
  }
  if (!summary.ok()) {
    // Release peers blocked on this rank at once instead of at their timeout.
    if (job != nullptr && job->collectives() != nullptr) job->collectives()->AbortAll();
    return Fail(err, summary.status().WithContext(
                         role->world_size > 1 ? file + " (rank " + std::to_string(role->rank) +
                                                    ")"
                                              : file));
  }
  return kExitOk;
}

}  // namespace fleet
