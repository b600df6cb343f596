#include "job/run.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "collective/job.h"
#include "config/job_secret.h"
#include "job/pipeline.h"
#include "job/train.h"
#include "job/train_devices.h"
#include "passes/builtin_passes.h"
#include "plugin/host_api.h"
#include "plugin/registry.h"
#include "plugin/selection.h"
#include "plugin/transport.h"
#include "pserver/server.h"
#include "pserver/trainer.h"
#include "support/logging.h"
#include "roles/role.h"
#include "support/host_memory.h"

namespace fleet {
namespace {

// The strategy and the role must describe the same kind of job.
Status CheckStrategy(const Config& config, const Role& role) {
  if (role.is_pserver() && config.strategy_mode != "pserver") {
    return InvalidArgument("this process is a parameter server (role from " +
                           role.source.at("role") + ") but strategy.mode is \"" +
                           config.strategy_mode + "\"; use \"pserver\" or \"auto\"");
  }
  if (config.strategy_mode == "pserver" && !config.pserver.sync_mode &&
      !config.checkpoint.dir.empty()) {
    return FailedPrecondition("[checkpoint] dir is set, but checkpoints need a sync "
                              "parameter-server job (strategy.sync_mode): in async "
                              "mode no step is the same on every server");
  }
  if (config.strategy_mode == "none" && role.world_size > 1) {
    return InvalidArgument("the job has " + std::to_string(role.world_size) +
                           " trainers (world_size from " + role.source.at("world_size") +
                           ") but strategy.mode is \"none\"; use \"collective\" or \"auto\"");
  }
  return OkStatus();
}

// Trainers sharing a machine share its cores, unless [train] threads says otherwise.
int64_t DefaultThreads(const std::map<std::string, std::string>& env) {
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
  if (local > 1 && cores > 0) return std::max<int64_t>(1, cores / local);
  return 0;
}

// train.threads against the address space: every thread of the kernels' pools reserves a stack,
// and a pool that cannot start its threads ends the process from inside the OpenMP runtime,
// naming nothing of ours. Half the limit is left for everything else.
Status CheckThreads(const Config& config) {
  const uint64_t limit = AddressSpaceLimitBytes();
  const uint64_t threads = static_cast<uint64_t>(std::max<int64_t>(config.train.threads, 0));
  const uint64_t stack = DefaultThreadStackBytes();
  if (limit == UINT64_MAX || threads == 0 || threads <= limit / 2 / stack) return OkStatus();
  return InvalidArgument("train.threads = " + std::to_string(threads) + ": " +
                         std::to_string(threads) + " threads with stacks of " +
                         BytesText(stack) + " need " + BytesText(threads * stack) +
                         " of address space, more than half of this process's limit of " +
                         BytesText(limit) + " (ulimit -v): lower train.threads (or ulimit -s)");
}

// A trainer of a collective or parameter-server job, or a job of one.
Status RunTrainer(const Config& config, const Role& role, const frontend::ParsedProgram& programs,
                  std::map<std::string, ir::Program>& transpiled, const PluginRegistry& registry,
                  const Selection& selection, const std::string& program_hash,
                  const JobRequest& request, std::ostream& out,
                  const std::function<void(const std::string&)>& warn) {
  const std::string& file = request.program;
  frontend::ParsedProgram trainer = programs;
  trainer.startup = std::move(transpiled["startup"]);
  trainer.main = std::move(transpiled["main"]);
  TrainDist dist;
  dist.program_hash = program_hash;
  auto local = transpiled.find("main.local");
  if (local != transpiled.end()) {
    dist.main_local = &local->second;
    dist.k_steps = config.collective.local_sgd_k_steps;
  }
  std::unique_ptr<Job> job;
  if (config.strategy_mode == "collective") {
    FLEET_ASSIGN_OR_RETURN(job,
                           Job::Open(config, role, selection.comm, selection.device, request.env));
    dist.job = job.get();
    SetJobStore(job->store());
    if (role.rank == 0) {
      out << "collective job: " << role.world_size << " trainers, " << config.comm.backend
          << " communicator, store " << job->store_description() << "\n";
    }
  }
  std::unique_ptr<PsTrainerRuntime> ps;
  if (config.strategy_mode == "pserver") {
    if (selection.transport == nullptr) {
      return FailedPrecondition("a parameter-server trainer needs a transport, and none was "
                                "selected (transport.backend)");
    }
    FLEET_ASSIGN_OR_RETURN(const std::string secret, JobSecret(config));
    ps = std::make_unique<PsTrainerRuntime>(
        *selection.transport, role.pserver_endpoints, static_cast<int32_t>(role.rank),
        TransportOptionsFrom(config, secret), selection.device);
    if (Status s = ps->WaitServersReady(); !s.ok()) {
      return s.WithContext(file + " (trainer " + std::to_string(role.rank) + ")");
    }
    // GEO-SGD exchanges in its own op; the other a_sync jobs send through the communicator.
    const bool geo = config.pserver.a_sync && config.pserver.a_sync_configs.k_steps > 0;
    if (config.pserver.a_sync && !geo) {
      const Config::Pserver::AsyncConfigs& a = config.pserver.a_sync_configs;
      AsyncCommunicatorOptions options;
      options.max_merge_var_num = a.max_merge_var_num;
      options.send_queue_size = a.send_queue_size;
      options.independent_recv_thread = a.independent_recv_thread;
      options.thread_pool_size = a.thread_pool_size;
      options.send_wait_times = a.send_wait_times;
      options.timeout = std::chrono::milliseconds(
          static_cast<int64_t>(config.rpc.timeout_s * 1000));
      if (Status s = ps->StartCommunicator(options); !s.ok()) {
        return s.WithContext(file + " (trainer " + std::to_string(role.rank) + ")");
      }
    }
    dist.host_kernels = ps.get();
    dist.trainer_id = role.rank;
    dist.trainers = role.world_size;
    // fleet-host launch serves its workers a store (MASTER_ADDR): there they form a ring of
    // their own, over which they report the job's figures. Without one (another launcher, or a
    // device other than the CPU) each trainer reports its own.
    if (role.world_size > 1 && !role.master_addr.empty() && selection.comm != nullptr) {
      Status ring = [&]() -> Status {
        FLEET_ASSIGN_OR_RETURN(job, Job::Open(config, role, selection.comm, selection.device,
                                              request.env));
        FLEET_RETURN_IF_ERROR(job->collectives()->InitRing(
            0, static_cast<int32_t>(role.world_size), static_cast<int32_t>(role.rank)));
        FLEET_ASSIGN_OR_RETURN(dist.figures, job->collectives()->Ring(0));
        return OkStatus();
      }();
      if (!ring.ok()) {
        // As after a failed step: the servers end the job now rather than at their deadline.
        ring = ring.WithContext("the trainers' ring for the job's figures");
        (void)ps->Abort(ring.ToString());
        ps->Close();
        return ring.WithContext(file + " (trainer " + std::to_string(role.rank) + ")");
      }
    }
    dist.pservers = static_cast<int64_t>(role.pserver_endpoints.size());
    if (role.rank == 0) {
      out << "pserver job: " << role.world_size << " trainers, " << role.pserver_endpoints.size()
          << " pservers (" << (config.pserver.sync_mode ? "sync" : "async") << "), "
          << config.transport.backend << " transport\n";
      if (geo) {
        out << "GEO-SGD: each trainer trains locally and exchanges its parameters' changes "
               "with the servers every "
            << config.pserver.a_sync_configs.k_steps << " steps\n";
      } else if (config.pserver.a_sync) {
        const Config::Pserver::AsyncConfigs& a = config.pserver.a_sync_configs;
        out << "communicator (a_sync): up to " << a.max_merge_var_num
            << " gradients merged per send, queues of " << a.send_queue_size << ", "
            << a.thread_pool_size << " vars sent at once, receiving "
            << (a.independent_recv_thread ? "in a thread of its own" : "after each round")
            << (a.runtime_split_send_recv
                    ? "; runtime_split_send_recv changes nothing: blocks are split when the "
                      "job is transpiled"
                    : "")
            << "\n";
      }
    }
  }
  std::optional<frontend::ParsedProgram> parsed;  // its main is the forward program [eval] runs
  if (!config.eval.filelist.empty()) {
    FLEET_ASSIGN_OR_RETURN(parsed, BuildPrograms(file, Stage::kParsed));
  }
  auto summary = Train(config, trainer, registry, selection.device->name, out, dist,
                       parsed ? &parsed->main : nullptr);
  SetJobStore(nullptr);  // the job's store goes with `job`
  if (ps != nullptr && ps->communicator() != nullptr && summary.ok()) {
    // Gradients still queued are part of the training: failing to send them fails the trainer.
    if (Status s = ps->communicator()->Flush(); !s.ok()) {
      summary = s.WithContext("the communicator's last sends");
    }
  }
  if (ps != nullptr) {
    // A trainer that finished says so; one that failed says that instead, so the servers
    // fail the job now, naming it, rather than at their deadline (and never train on
    // without it).
    if (summary.ok()) {
      if (Status s = ps->Complete(); !s.ok()) {
        warn("the parameter servers were not all told that this trainer finished: " +
             s.ToString());
      }
      if (const AsyncCommunicator* comm = ps->communicator(); comm != nullptr && role.rank == 0) {
        const AsyncCommunicator::Stats st = comm->stats();
        out << "communicator: " << st.pushed << " gradients in " << st.sends << " sends, "
            << st.receives << " receptions of the parameters\n";
      }
    } else {
      (void)ps->Abort(summary.status().ToString());
    }
    ps->Close();
  }
  if (!summary.ok()) {
    // Release peers blocked on this rank at once instead of at their timeout.
    if (job != nullptr && job->collectives() != nullptr) job->collectives()->AbortAll();
    return summary.status().WithContext(
        role.world_size > 1 ? file + " (rank " + std::to_string(role.rank) + ")" : file);
  }
  return OkStatus();
}

}  // namespace

Status RunJob(const JobRequest& request, std::ostream& out,
              const std::function<void(const std::string&)>& warn) {
  const std::string& file = request.program;
  Config config = request.config;
  if (request.resume) {
    if (config.checkpoint.dir.empty()) {
      return InvalidArgument("--resume needs checkpoint.dir (in [checkpoint] of " +
                             config.source + ", or --set checkpoint.dir=DIR)");
    }
    config.checkpoint.resume = true;
  }
  // The program file may set [strategy] keys (its DistributedStrategy), so it is read first.
  FLEET_ASSIGN_OR_RETURN(frontend::ParsedProgram programs,
                         BuildPrograms(file, Stage::kOptimized));
  FLEET_RETURN_IF_ERROR(MergeProgramStrategy(programs, config));
  FLEET_ASSIGN_OR_RETURN(Role role, ResolveRole(config, request.env));
  config.strategy_mode = EffectiveStrategy(config, role);
  FLEET_RETURN_IF_ERROR(CheckFleetInit(programs, config.strategy_mode));
  FLEET_RETURN_IF_ERROR(CheckStrategy(config, role));
  if (config.train.threads == 0) config.train.threads = DefaultThreads(request.env);
  FLEET_RETURN_IF_ERROR(CheckThreads(config).WithContext(config.source));
  PluginRegistry registry(LoadOptionsFor(config));
  FLEET_RETURN_IF_ERROR(RegisterBuiltinPasses(registry));
  FLEET_ASSIGN_OR_RETURN(Selection selection, LoadSelected(config, registry));
  for (const std::string& w : selection.warnings) warn(w);
  if (AsksForSparseGradients(programs.main)) {
    const std::string dense =
        DenseGradientsReason(config, registry, selection.device->name, selection.transport);
    if (!dense.empty()) {
      Log().info("embeddings with is_sparse=True train with dense gradients: {}", dense);
      FLEET_ASSIGN_OR_RETURN(programs, BuildPrograms(file, Stage::kOptimized, false));
    }
  }

  if (config.collective.mode == "single_process_multi_thread" &&
      config.strategy_mode == "collective") {
    if (role.world_size > 1) {
      return Unimplemented("strategy.collective_mode \"single_process_multi_thread\" drives the "
                           "devices of one process; this job has " +
                           std::to_string(role.world_size) + " trainers");
    }
    std::optional<frontend::ParsedProgram> parsed;  // its main is the forward program of [eval]
    if (!config.eval.filelist.empty()) {
      FLEET_ASSIGN_OR_RETURN(parsed, BuildPrograms(file, Stage::kParsed));
    }
    auto summary = TrainOnDevices(config, programs, registry, selection.device->name,
                                  static_cast<int32_t>(config.collective.devices), request.env,
                                  out, parsed ? &parsed->main : nullptr);
    return summary.ok() ? OkStatus() : summary.status().WithContext(file);
  }
  // Every process of a job hashes the same programs: the optimized ones, before each role's
  // transpiling, so trainers and servers recognise each other's checkpoints.
  const std::string program_hash = checkpoint::ProgramHash({&programs.startup, &programs.main});
  auto transpiled = Transpile(config, role, programs, registry);
  if (!transpiled.ok()) return transpiled.status().WithContext(file);
  if (role.is_pserver()) {
    if (selection.transport == nullptr) {
      return FailedPrecondition("a parameter server needs a transport, and none was selected "
                                "(transport.backend)");
    }
    Status s = RunPserver(config, role, *transpiled, registry, selection.device->name,
                          *selection.transport, program_hash, out);
    return s.ok() ? s : s.WithContext(file + " (pserver " + std::to_string(role.rank) + ")");
  }
  return RunTrainer(config, role, programs, *transpiled, registry, selection, program_hash,
                    request, out, warn);
}

}  // namespace fleet
