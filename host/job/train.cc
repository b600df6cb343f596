#include "job/train.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "collective/schedule.h"
#include "data/source.h"
#include "fleet/fleet_plugin.h"
#include "job/data_sources.h"
#include "job/evaluation.h"
#include "job/global_auc.h"
#include "job/train_checkpoints.h"
#include "job/train_state.h"

namespace fleet {
namespace {

// Samples [rank * rows, (rank + 1) * rows) of every tensor of `global`, into `share` (whose
// storage is reused from step to step): rows of a dense feed, whole sequences of a sequence feed.
void ShareOfBatch(const exec::FeedMap& global, int64_t rank, int64_t rows, exec::FeedMap& share) {
  for (const auto& [name, t] : global) data::SliceSamples(t, rank * rows, rows, share[name]);
}

// [train] check_replicas: every trainer hashes each parameter; the all-reduced MAX and MIN of
// a hash differ exactly when some trainer's copy differs.
Status CheckReplicas(Communicator& world, const exec::Executor& executor,
                     const std::vector<std::string>& params, int64_t step) {
  std::vector<int64_t> hi(params.size()), lo(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    FLEET_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ParamBytes(executor, params[i]));
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
    hi[i] = lo[i] = static_cast<int64_t>(h >> 1);  // non-negative: any int64 order works
  }
  const auto n = static_cast<int64_t>(params.size());
  FLEET_RETURN_IF_ERROR(world.AllReduceHost(hi.data(), FLEET_DTYPE_INT64, n, FLEET_REDUCE_MAX)
                            .WithContext("check_replicas"));
  FLEET_RETURN_IF_ERROR(world.AllReduceHost(lo.data(), FLEET_DTYPE_INT64, n, FLEET_REDUCE_MIN)
                            .WithContext("check_replicas"));
  std::vector<std::string> differ;
  for (size_t i = 0; i < params.size(); ++i) {
    if (hi[i] != lo[i]) differ.push_back(params[i]);
  }
  if (differ.empty()) return OkStatus();
  std::string list;
  for (const auto& d : differ) list += (list.empty() ? "" : ", ") + d;
  return Internal("train.check_replicas: after step " + std::to_string(step) +
                  " the trainers hold different values of " + list);
}

// Ranks of a collective job prepare again together when a batch outgrows a sequence feed's
// capacity, since a preparation holds per-op communicator state the ranks create in step: before
// each step they agree on the rows of each sequence feed (the most any rank has), one small
// all-reduce, and make room for them.
Status AgreeOnSequenceRows(Communicator& world, exec::Executor& executor,
                           exec::PreparedProgram& prepared, const exec::FeedMap& batch,
                           const std::vector<std::string>& names, std::vector<int64_t>& rows) {
  if (names.empty()) return OkStatus();
  rows.assign(names.size(), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = batch.find(names[i]);
    if (it != batch.end() && !it->second.dims.empty()) rows[i] = it->second.dims[0];
  }
  FLEET_RETURN_IF_ERROR(world
                            .AllReduceHost(rows.data(), FLEET_DTYPE_INT64,
                                           static_cast<int64_t>(rows.size()), FLEET_REDUCE_MAX)
                            .WithContext("the rows of the sequence feeds"));
  std::map<std::string, int64_t> agreed;
  for (size_t i = 0; i < names.size(); ++i) agreed[names[i]] = rows[i];
  return executor.ReserveSequenceRows(prepared, agreed);
}

// The job's figures in `r`: loss, reported vars and reader_cost as means over the trainers,
// ips as their sum; lr and batch_cost stay this trainer's. `values` is reused. (GlobalAuc then
// replaces the mean of each reported auc op's AUC with the AUC of the whole data.)
Status JobFigures(Communicator& world, StepReport& r, std::vector<double>& values) {
  values.clear();
  values.push_back(r.loss);
  values.insert(values.end(), r.metrics.begin(), r.metrics.end());
  values.push_back(r.reader_cost);
  values.push_back(r.ips);
  FLEET_RETURN_IF_ERROR(world
                            .AllReduceHost(values.data(), FLEET_DTYPE_FLOAT64,
                                           static_cast<int64_t>(values.size()), FLEET_REDUCE_SUM)
                            .WithContext("job metrics"));
  const auto n = static_cast<double>(world.world_size());
  r.loss = values[0] / n;
  for (size_t i = 0; i < r.metrics.size(); ++i) r.metrics[i] = values[1 + i] / n;
  r.reader_cost = values[values.size() - 2] / n;
  r.ips = values.back();
  return OkStatus();
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

StatusOr<TrainingSetup> PrepareTraining(const Config& config,
                                        const frontend::ParsedProgram& programs,
                                        const PluginRegistry& registry,
                                        const std::string& device, const TrainDist& dist) {
  const Config::Train& train = config.train;
  const bool collective = dist.job != nullptr && dist.job->collectives() != nullptr;
  // A parameter-server trainer's startup receives its parameters from the servers, which load
  // init_from themselves (pserver/server.h).
  const bool pserver_trainer = !collective && dist.host_kernels != nullptr;
  if (programs.loss.empty()) {
    return InvalidArgument("the program has no minimize(...): run needs a loss to train");
  }
  FLEET_ASSIGN_OR_RETURN(std::vector<data::FeedSpec> feeds,
                         data::FeedSpecs(programs.main, programs.feeds));
  exec::FeedShapes shapes;
  exec::FeedSequences sequences;  // a sequence feed: one sequence per sample
  for (const data::FeedSpec& f : feeds) {
    if (f.dims[0] >= 0 && f.dims[0] != train.batch_size) {
      return InvalidArgument("feed '" + f.name + "' is declared with batch dimension " +
                             std::to_string(f.dims[0]) + " but train.batch_size is " +
                             std::to_string(train.batch_size) + " (declare it -1)");
    }
    std::vector<int64_t> dims = f.dims;
    dims[0] = train.batch_size;
    if (f.lod_level != 0) {  // rows: a first guess of one per sequence, grown by Run
      dims[0] = exec::SequenceCapacity(train.batch_size);
      sequences[f.name] = train.batch_size;
    }
    shapes[f.name] = dims;
  }
  TrainingSetup setup;
  int64_t rank = 0, trainers = 1;
  if (collective) {
    rank = dist.job->role().rank;
    trainers = dist.job->role().world_size;
  } else if (dist.host_kernels != nullptr) {
    rank = dist.trainer_id;
    trainers = dist.trainers;
  }
  FLEET_ASSIGN_OR_RETURN(setup.source, MakeDataSource(config, programs, feeds, rank, trainers));
  // Each trainer draws the global batch when the data is not split across them.
  const bool global_batch = trainers > 1 && !setup.source->sharded();
  FLEET_RETURN_IF_ERROR(
      CheckBatchMemory(config, feeds, global_batch ? trainers : 1, "trainers"));

  exec::ExecutorOptions options;
  options.num_threads = static_cast<int32_t>(train.threads);
  options.seed = static_cast<uint64_t>(train.seed);
  options.profile = train.profile;
  if (collective) {
    options.host_kernels = dist.job->collectives();
    // One device per trainer on a machine; CPU trainers share the one host "device".
    if (device != "cpu") options.device_ordinal = static_cast<int32_t>(dist.job->role().local_rank);
  } else if (dist.host_kernels != nullptr) {
    options.host_kernels = dist.host_kernels;
  }
  FLEET_ASSIGN_OR_RETURN(setup.executor, exec::Executor::Create(registry, device, options));
  if (collective) {
    // Compared with every other rank's as the first ring forms, before any collective runs.
    dist.job->collectives()->SetSchedule(ScheduleOf(programs.startup, programs.main, train.steps));
  }

  std::vector<exec::HostTensor> fetched;
  {
    auto startup = setup.executor->Prepare(programs.startup, {}, {});
    if (!startup.ok()) return startup.status().WithContext("startup program");
    setup.startup_ops = (*startup)->num_ops();
    if (Status s = setup.executor->Run(**startup, {}, fetched); !s.ok()) {
      return s.WithContext("startup program");
    }
  }
  if (!train.init_from.empty() && !pserver_trainer) {
    FLEET_RETURN_IF_ERROR(InitFrom(train.init_from, *setup.executor, programs));
  }
  FLEET_ASSIGN_OR_RETURN(setup.reported, ReportedVars(train, programs));
  const std::vector<std::string> fetch = FetchList(programs.loss, setup.reported);
  auto prepared = setup.executor->Prepare(programs.main, shapes, fetch, sequences);
  if (!prepared.ok()) {
    return NameBatchSize(prepared.status().WithContext("main program"), config, 1, "");
  }
  setup.main = std::move(*prepared);
  FLEET_RETURN_IF_ERROR(CheckReportedVars(setup.reported, *setup.main));
  setup.lr_var = LearningRateVar(programs.main);
  if (dist.main_local != nullptr) {
    auto local = setup.executor->Prepare(*dist.main_local, shapes, fetch, sequences);
    if (!local.ok()) {
      return NameBatchSize(local.status().WithContext("main.local program"), config, 1, "");
    }
    setup.main_local = std::move(*local);
  }
  return setup;
}

StatusOr<TrainSummary> Train(const Config& config, const frontend::ParsedProgram& programs,
                             const PluginRegistry& registry, const std::string& device,
                             std::ostream& out, const TrainDist& dist,
                             const ir::Program* forward) {
  const Config::Train& train = config.train;
  FLEET_ASSIGN_OR_RETURN(TrainingSetup setup,
                         PrepareTraining(config, programs, registry, device, dist));
  exec::Executor* executor = setup.executor.get();
  data::DataSource* source = setup.source.get();
  std::vector<exec::HostTensor> fetched;

  // A collective job shares out one global batch and reports job-wide figures over its ring
  // (`world`); parameter-server trainers report them over theirs when they have one (`figures`:
  // the collective ring, else dist.figures, else null).
  Communicator* world = nullptr;
  int64_t rank = 0, world_size = 1;
  if (dist.job != nullptr && dist.job->collectives() != nullptr) {
    rank = dist.job->role().rank;
    world_size = dist.job->role().world_size;
    auto ring = dist.job->collectives()->Ring(0);
    if (!ring.ok()) return ring.status().WithContext("the transpiled startup program");
    world = *ring;
  } else if (dist.host_kernels != nullptr) {
    rank = dist.trainer_id;
    world_size = dist.trainers;
  }
  Communicator* figures = world != nullptr ? world : dist.figures;
  exec::FeedMap global_batch;
  const std::vector<std::string> params = ParamNames(programs.main);

  // Without a communicator every trainer reports for itself.
  std::string who;
  if (world_size > 1) {
    who = figures != nullptr ? std::to_string(world_size) + " trainers"
                           : "trainer " + std::to_string(rank) + " of " +
                                 std::to_string(world_size);
  }
  // local_sgd with k_steps > 1: the averaging program runs every k-th step and on the last, so
  // every trainer ends with the same (averaged) parameters; the local one in between.
  auto averages = [&](int64_t step) {
    return setup.main_local == nullptr || step % dist.k_steps == 0 || step == train.steps;
  };
  const bool pserver_trainer = world == nullptr && dist.host_kernels != nullptr;
  TrainCheckpoints checkpoints(
      config,
      dist.program_hash.empty() ? checkpoint::ProgramHash({&programs.startup, &programs.main})
                                : dist.program_hash,
      world_size, rank == 0, pserver_trainer ? std::max<int64_t>(dist.pservers, 1) : 0,
      world_size > 1 && !source->sharded() ? train.batch_size * world_size : train.batch_size);
  FLEET_ASSIGN_OR_RETURN(const int64_t first_step, checkpoints.Resume(setup, world, averages));

  if (first_step > train.steps) {
    out << "the checkpoint is at step " << first_step - 1 << ": all " << train.steps
        << " steps of train.steps are done\n";
    return TrainSummary{first_step - 1, 0.0, 0.0, {}};
  }
  std::vector<std::string> metric_names;
  for (const ReportedVar& r : setup.reported) metric_names.push_back(r.name);
  ProgressLog progress(train, train.batch_size, who, out, metric_names);
  // Reported AUCs are the whole data's: from the auc ops' statistics summed over trainers.
  std::unique_ptr<GlobalAuc> global_auc;
  if (figures != nullptr) {
    FLEET_ASSIGN_OR_RETURN(global_auc,
                           GlobalAuc::Create(*executor, programs.main, setup.reported));
  }
  std::unique_ptr<Evaluator> evaluator;
  if (!config.eval.filelist.empty()) {
    if (forward == nullptr) {
      return FailedPrecondition("[eval] needs the forward program, which this caller of Train "
                                "did not give");
    }
    FLEET_ASSIGN_OR_RETURN(evaluator, Evaluator::Create(config, *forward, programs, setup.reported,
                                                        *executor, rank, world_size));
  }
  progress.StartAt(first_step);
  FLEET_RETURN_IF_ERROR(progress.Open(
      rank == 0 || figures == nullptr,
      figures == nullptr && rank > 0 ? "trainer" + std::to_string(rank) : ""));
  exec::FeedMap batch;
  const std::vector<std::string> sequence_feeds = setup.main->sequence_feeds();
  std::vector<int64_t> sequence_rows;
  std::vector<double> job_values;
  double loss = 0;
  for (int64_t step = first_step; step <= train.steps; ++step) {
    const auto read_start = std::chrono::steady_clock::now();
    if (world_size > 1 && !source->sharded()) {
      if (Status s = source->Next(train.batch_size * world_size, global_batch); !s.ok()) {
        return s.WithContext("data at step " + std::to_string(step));
      }
      ShareOfBatch(global_batch, rank, train.batch_size, batch);
    } else if (Status s = source->Next(train.batch_size, batch); !s.ok()) {
      return s.WithContext("data at step " + std::to_string(step));
    }
    progress.AddReaderTime(SecondsSince(read_start));
    const bool averaged = averages(step);
    exec::PreparedProgram* prepared = averaged ? setup.main.get() : setup.main_local.get();
    if (world != nullptr) {
      FLEET_RETURN_IF_ERROR(AgreeOnSequenceRows(*world, *executor, *prepared, batch,
                                                sequence_feeds, sequence_rows)
                                .WithContext("step " + std::to_string(step)));
    }
    if (Status s = executor->Run(*prepared, batch, fetched); !s.ok()) {
      // Name the rows the step ran on: this trainer's share of a global batch.
      const bool share = world_size > 1 && !source->sharded();
      return source->origin()
          .Annotate(s, share ? rank * train.batch_size : 0, share ? train.batch_size : -1)
          .WithContext("step " + std::to_string(step));
    }
    FLEET_ASSIGN_OR_RETURN(loss, LossValue(fetched[0], programs.loss));
    FLEET_RETURN_IF_ERROR(CheckLoss(loss, step, programs.loss));
    const bool evaluate = evaluator != nullptr && evaluator->Due(step);
    if (progress.Due(step) || evaluate) {
      StepReport report = progress.Measure(step);
      report.loss = loss;
      for (size_t i = 0; i < setup.reported.size(); ++i) {
        FLEET_ASSIGN_OR_RETURN(double v, ScalarValue(fetched[1 + i], setup.reported[i].what));
        report.metrics.push_back(v);
      }
      if (setup.lr_var) {
        FLEET_ASSIGN_OR_RETURN(report.lr, LearningRateValue(*executor, *setup.lr_var));
      }
      if (figures != nullptr) {
        FLEET_RETURN_IF_ERROR(JobFigures(*figures, report, job_values));
        FLEET_RETURN_IF_ERROR(global_auc->Compute(*figures, report.metrics));
        loss = report.loss;
      }
      // Measured before and logged after, so the evaluation's time is in no step's cost.
      if (evaluate) {
        auto eval = evaluator->Run(figures);
        if (!eval.ok()) return eval.status().WithContext("eval after step " + std::to_string(step));
        report.eval = std::move(*eval);
      }
      FLEET_RETURN_IF_ERROR(progress.Log(step, report));
      // Between averagings local_sgd's replicas differ by design.
      if (train.check_replicas && world != nullptr && averaged) {
        FLEET_RETURN_IF_ERROR(CheckReplicas(*world, *executor, params, step));
      }
    }
    FLEET_RETURN_IF_ERROR(
        checkpoints.AfterStep(*executor, step, averaged, step == train.steps));
  }
  if (!train.save_params_dir.empty() && rank == 0) {
    FLEET_RETURN_IF_ERROR(SaveParams(*executor, params, train.save_params_dir));
  }
  if (figures != nullptr) {
    if (Status s = figures->Barrier(); !s.ok()) return s.WithContext("after the last step");
  }
  // The last step is always logged, so `loss` is the job's mean there (this trainer's own
  // without a communicator, and so is the rate).
  TrainSummary summary =
      progress.Finish(loss, train.batch_size * (figures != nullptr ? world_size : 1));
  ReportSkippedLines(*source, out);
  if (train.profile) PrintProfile(*setup.main, out);
  return summary;
}

}  // namespace fleet
