#include "job/train_devices.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collective/parallel_runner.h"
#include "data/source.h"
#include "fleet/fleet_plugin.h"
#include "job/data_sources.h"
#include "job/evaluation.h"
#include "job/global_auc.h"
#include "job/metrics.h"
#include "job/pipeline.h"
#include "job/train_state.h"
#include "roles/role.h"

namespace fleet {

StatusOr<TrainSummary> TrainOnDevices(const Config& config,
                                      const frontend::ParsedProgram& programs,
                                      const PluginRegistry& registry, const std::string& device,
                                      int32_t num_devices,
                                      const std::map<std::string, std::string>& env,
                                      std::ostream& out, const ir::Program* forward) {
  const Config::Train& train = config.train;
  if (programs.loss.empty() || !programs.optimizer) {
    return InvalidArgument(
        "strategy.collective_mode single_process_multi_thread needs a program with "
        "minimize(..., optimizer=...)");
  }
  if (!config.checkpoint.dir.empty()) {
    return Unimplemented("checkpoint.dir: checkpoints are not supported with strategy."
                         "collective_mode \"single_process_multi_thread\" yet; run the devices "
                         "as trainers of a collective job instead (fleet-host launch --nproc N)");
  }
  const ComponentRecord* comm = registry.Find(FLEET_COMPONENT_COMMUNICATOR, config.comm.backend);
  if (comm == nullptr) {
    return NotFound("communicator '" + config.comm.backend + "' is not registered (is plugin '" +
                    config.comm.plugin + "' loaded?)");
  }
  FLEET_ASSIGN_OR_RETURN(std::vector<data::FeedSpec> feeds,
                         data::FeedSpecs(programs.main, programs.feeds));
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<data::DataSource> source,
                         MakeDataSource(config, programs, feeds, 0, 1));
  FLEET_RETURN_IF_ERROR(CheckBatchMemory(config, feeds, num_devices, "devices"));

  exec::ParallelOptions options;
  options.num_devices = num_devices;
  options.executor.num_threads = static_cast<int32_t>(train.threads);
  options.executor.seed = static_cast<uint64_t>(train.seed);
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.comm_timeout_s * 1e3));
  FLEET_ASSIGN_OR_RETURN(options.desync_check, ResolveDesyncCheck(config.comm_check, env));
  // Every device is rank d of num_devices of a grad_allreduce job (Paddle's
  // SingleProcessMultiThread is GradAllReduce with the process's places as the ranks).
  auto transpile = [&](int32_t rank, int32_t world) -> StatusOr<exec::ProgramSet> {
    Config c = config;
    c.strategy_mode = "collective";
    Role role;
    role.rank = rank;
    role.world_size = world;
    return Transpile(c, role, programs, registry);
  };
  auto created = exec::ParallelRunner::Create(registry, device, *comm, options, transpile);
  if (created.status().code() == Code::kResourceExhausted) {  // the devices' open files
    return created.status().WithContext("strategy.devices = " + std::to_string(num_devices));
  }
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<exec::ParallelRunner> runner, std::move(created));
  FLEET_RETURN_IF_ERROR(runner->RunStartup().WithContext("startup program"));
  if (!train.init_from.empty()) {
    for (int32_t d = 0; d < runner->num_devices(); ++d) {
      FLEET_RETURN_IF_ERROR(InitFrom(train.init_from, runner->executor(d), programs, d == 0));
    }
  }

  // [train] batch_size is per device, as it is per trainer: each step draws batch_size * N rows
  // and every device gets batch_size of them.
  const int64_t rows = train.batch_size * num_devices;
  exec::FeedShapes shapes;
  exec::FeedSequences sequences;  // a sequence feed: one sequence per sample
  for (const data::FeedSpec& f : feeds) {
    std::vector<int64_t> dims = f.dims;
    dims[0] = rows;
    shapes[f.name] = dims;
    if (f.lod_level != 0) sequences[f.name] = rows;
  }
  FLEET_ASSIGN_OR_RETURN(const std::vector<ReportedVar> reported, ReportedVars(train, programs));
  const std::vector<std::string> fetch = FetchList(programs.loss, reported);
  if (Status s = runner->Prepare(shapes, fetch, "main", sequences); !s.ok()) {
    return NameBatchSize(s.WithContext("main program"), config, num_devices, "devices");
  }
  const std::optional<std::string> lr_var = LearningRateVar(programs.main);

  // Reported AUCs are the whole batch's: from the devices' statistics summed (job/global_auc.h).
  FLEET_ASSIGN_OR_RETURN(std::unique_ptr<GlobalAuc> global_auc,
                         GlobalAuc::Create(runner->executor(0), programs.main, reported));
  std::vector<const exec::Scope*> scopes;
  for (int32_t d = 0; d < num_devices; ++d) scopes.push_back(&runner->executor(d).scope());
  std::unique_ptr<Evaluator> evaluator;
  if (!config.eval.filelist.empty()) {
    if (forward == nullptr) {
      return FailedPrecondition("[eval] needs the forward program, which this caller of "
                                "TrainOnDevices did not give");
    }
    FLEET_ASSIGN_OR_RETURN(evaluator, Evaluator::Create(config, *forward, programs, reported,
                                                        runner->executor(0), 0, 1));
  }
  std::vector<std::string> metric_names;
  for (const ReportedVar& r : reported) metric_names.push_back(r.name);
  ProgressLog progress(train, rows, std::to_string(num_devices) + " devices", out, metric_names);
  FLEET_RETURN_IF_ERROR(progress.Open(true));
  exec::FeedMap batch;
  exec::ParallelFetch fetched;
  double loss = 0;
  for (int64_t step = 1; step <= train.steps; ++step) {
    const auto read_start = std::chrono::steady_clock::now();
    if (Status s = source->Next(rows, batch); !s.ok()) {
      return s.WithContext("data at step " + std::to_string(step));
    }
    progress.AddReaderTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - read_start).count());
    if (Status s = runner->Run(batch, fetch, fetched, exec::FetchMode::kPerDevice); !s.ok()) {
      return source->origin().Annotate(s).WithContext("step " + std::to_string(step));
    }
    // The runner hides its preparations: the reported vars' shapes are checked on the first
    // step's fetches, before anything is logged.
    if (step == 1) {
      for (size_t i = 0; i < reported.size(); ++i) {
        const exec::HostTensor& t = fetched.per_device[0][1 + i];
        FLEET_RETURN_IF_ERROR(CheckReportedVar(reported[i], t.dtype, t.dims));
      }
    }
    // The loss of the step: the mean of the devices' losses.
    loss = 0;
    for (int32_t d = 0; d < num_devices; ++d) {
      FLEET_ASSIGN_OR_RETURN(double l, LossValue(fetched.per_device[static_cast<size_t>(d)][0],
                                                 programs.loss));
      loss += l / num_devices;
    }
    FLEET_RETURN_IF_ERROR(CheckLoss(loss, step, programs.loss));
    const bool evaluate = evaluator != nullptr && evaluator->Due(step);
    if (progress.Due(step) || evaluate) {
      // Reported vars, as the loss: the mean over devices (AUCs: of the summed statistics).
      StepReport report = progress.Measure(step);
      report.loss = loss;
      report.metrics.assign(reported.size(), 0.0);
      for (int32_t d = 0; d < num_devices; ++d) {
        for (size_t i = 0; i < reported.size(); ++i) {
          FLEET_ASSIGN_OR_RETURN(
              double v, ScalarValue(fetched.per_device[static_cast<size_t>(d)][1 + i],
                                    reported[i].what));
          report.metrics[i] += v / num_devices;
        }
      }
      FLEET_RETURN_IF_ERROR(global_auc->ComputeOverDevices(scopes, report.metrics));
      if (lr_var) {
        FLEET_ASSIGN_OR_RETURN(report.lr, LearningRateValue(runner->executor(0), *lr_var));
      }
      if (evaluate) {
        auto eval = evaluator->Run(nullptr);
        if (!eval.ok()) return eval.status().WithContext("eval after step " + std::to_string(step));
        report.eval = std::move(*eval);
      }
      FLEET_RETURN_IF_ERROR(progress.Log(step, report));
    }
  }
  if (!train.save_params_dir.empty()) {
    FLEET_RETURN_IF_ERROR(
        SaveParams(runner->executor(0), ParamNames(programs.main), train.save_params_dir));
  }
  TrainSummary summary = progress.Finish(loss, rows);
  ReportSkippedLines(*source, out);
  return summary;
}

}  // namespace fleet
