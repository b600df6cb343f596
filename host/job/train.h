// The training loop of one trainer (`fleet-host run`): run startup once (then, with [train]
// init_from, load the weights of that directory: checkpoint/init_from.h), then [train] steps of
// main, each with a batch from the [data] source (data_sources.h), fetching the loss; progress
// every log_every steps (progress.h) and checkpoints when due (train_checkpoints.h).
//
// In a job of several trainers (a Job with collectives), [train] batch_size is per trainer, as
// in Paddle: every trainer draws the same global batch of batch_size * world_size samples and
// keeps rows [rank * batch_size, (rank + 1) * batch_size), so N trainers on their shares see
// exactly what one trainer sees on the global batch. A source whose files are split across
// trainers (data.shard, DataSource::sharded) has no global batch: each trainer then takes
// batch_size samples of its own share. Logged lines carry the loss, the reported vars and
// reader_cost averaged over trainers and the job's total samples/s as ips (one small
// all-reduce per logged step), with rank 0's own learning rate and batch_cost (the trainers
// step together); only rank 0 writes the metrics file and the event file. A reported var that
// is the AUC output of an auc op is not averaged: it is the AUC of the op's statistics summed
// over the trainers, the AUC of the whole data (job/global_auc.h; a second all-reduce per
// logged step). The last step ends with a barrier so no trainer leaves (and takes the store it
// serves with it) while others still need it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "collective/job.h"
#include "config/config.h"
#include "data/source.h"
#include "executor/executor.h"
#include "frontend/frontend.h"
#include "job/metrics.h"
#include "job/progress.h"
#include "plugin/kernel.h"
#include "plugin/registry.h"
#include "support/status.h"

namespace fleet {

// Everything a training run needs before its first step: the data source, an executor whose
// scope holds the initialised parameters (startup has run), and main prepared for
// [train].batch_size with the loss and then the reported vars (job/metrics.h) as its fetches.
struct TrainingSetup {
  std::unique_ptr<data::DataSource> source;
  std::unique_ptr<exec::Executor> executor;
  std::unique_ptr<exec::PreparedProgram> main;
  std::unique_ptr<exec::PreparedProgram> main_local;  // with TrainDist::main_local
  size_t startup_ops = 0;
  std::vector<ReportedVar> reported;
  std::optional<std::string> lr_var;  // job/metrics.h LearningRateVar
};

// How a trainer takes part in a distributed job; the default is a job of one.
//
// A parameter-server trainer has no Job: its RPC ops' kernels come from `host_kernels` (a
// PsTrainerRuntime), and `trainer_id`/`trainers` say which share of the global batch is its
// own, as rank/world_size do in a collective job (its lr is null: the servers hold the rate).
// With a ring among the trainers (`figures`) it reports the job's figures, which trainer 0
// writes; with none each logs its own and writes its own metrics file when [train]
// metrics_file is set (trainer 0 the file named, trainer t > 0 the name with ".trainer<t>"
// before its extension) and its own event file (trainer t > 0 in tensorboard_dir/trainer<t>).
// Trainer 0 writes save_params_dir (the parameters it last received).
struct TrainDist {
  Job* job = nullptr;                      // with collectives() for a collective job
  const ir::Program* main_local = nullptr; // local_sgd's step without averaging, or null
  int64_t k_steps = 1;                     // run main every k_steps-th step, main_local between
  const HostKernels* host_kernels = nullptr;  // used when there is no collective job
  int64_t trainer_id = 0;                  // used with host_kernels
  int64_t trainers = 1;
  int64_t pservers = 0;                    // servers of a parameter-server job (with host_kernels)
  // A parameter-server trainer's ring among the trainers, or null: the loss, metrics and AUCs
  // it reports are then the job's (as a collective job's are), and trainer 0 writes them.
  Communicator* figures = nullptr;
  // checkpoint::ProgramHash of the optimized programs (before transpiling, so every rank and
  // every server of a job computes the same); "" = the hash of the programs Train is given.
  std::string program_hash;
};

// `programs` must be optimized (backward + optimizer appended; transpiled for a distributed job)
// and have a loss. `device` is the device component's name in `registry`. Errors name the
// program and op at fault (a missing kernel, a shape that does not fit the batch, a data file
// that does not fit its var).
StatusOr<TrainingSetup> PrepareTraining(const Config& config,
                                        const frontend::ParsedProgram& programs,
                                        const PluginRegistry& registry,
                                        const std::string& device, const TrainDist& dist = {});

// PrepareTraining, then the loop. With [checkpoint] dir set, the state is saved every
// every_steps steps and after the last (by rank 0 of a collective job; a parameter-server
// trainer saves nothing, its servers save their shards); with [checkpoint] resume, the newest
// intact checkpoint is restored first (every trainer of a collective job must find the same
// one), the data source is moved past the batches it had delivered, and the loop continues
// with the next step, so the job ends where an uninterrupted one would, bit for bit.
//
// With [eval] files, `forward` (the program file's main before backward and optimizer) is
// evaluated on them as job/evaluation.h says; [eval] without `forward` is an error.
StatusOr<TrainSummary> Train(const Config& config, const frontend::ParsedProgram& programs,
                             const PluginRegistry& registry, const std::string& device,
                             std::ostream& out, const TrainDist& dist = {},
                             const ir::Program* forward = nullptr);

}  // namespace fleet
