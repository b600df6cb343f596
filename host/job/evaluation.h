// The evaluation pass of a training job ([eval]): every eval.every_steps steps (and after the
// last), the forward part of the program runs over the eval files with the parameters as they
// stand, and the job logs the mean loss and reported vars over those samples.
//
// The program evaluated is the file's forward program pruned to the loss and the reported vars
// (checkpoint::PruneForInference: no backward, no optimizer, is_test set on the ops that have
// it), prepared once on the training executor, so it reads the trained parameters in place.
//
// AUC: an auc op of the forward program counts into persistable statistics that training owns.
// Its clone here counts into statistics of its own instead, fed from the host and fetched back
// after each batch (zeroed at the start of each evaluation), so an evaluation neither perturbs
// training's AUC nor outlives itself, and checkpoints hold nothing of it. A reported AUC is
// therefore the AUC of the evaluation's samples. In a collective job every rank evaluates its
// share of the files and the ranks combine: losses and other values as means weighted by
// samples, AUCs from the summed statistics (job/global_auc.h); so do parameter-server workers
// over the ring of their figures (TrainDist::figures), or else each evaluates for itself.
//
// Threading: an Evaluator belongs to the thread running the training loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "config/config.h"
#include "data/source.h"
#include "executor/executor.h"
#include "frontend/frontend.h"
#include "ir/program.h"
#include "job/global_auc.h"
#include "job/metrics.h"
#include "job/progress.h"
#include "support/status.h"

namespace fleet {

class Evaluator {
 public:
  // Builds and prepares the evaluation on `executor` (which must outlive this) for trainer
  // `rank` of `trainers`. `forward` is the program file's main before backward and optimizer;
  // `programs` the trainer's programs (for the feeds and the loss); `reported` its reported vars
  // (those the forward program does not compute are left out). Errors name [eval]'s key at
  // fault: no file source in [data], no files, a streaming dataset without eval.batches, fewer
  // samples than one batch.
  static StatusOr<std::unique_ptr<Evaluator>> Create(const Config& config,
                                                     const ir::Program& forward,
                                                     const frontend::ParsedProgram& programs,
                                                     const std::vector<ReportedVar>& reported,
                                                     exec::Executor& executor, int64_t rank,
                                                     int64_t trainers);

  // Whether the loop evaluates after `step`.
  bool Due(int64_t step) const;

  // One evaluation. With `world` (the ring the job's figures are summed over) every rank must
  // call it at the same steps.
  StatusOr<EvalReport> Run(Communicator* world);

 private:
  // One statistics var of an auc op's clone: fed from the host, written to `out`, fetched.
  struct Statistic {
    std::string feed, out;
    size_t fetch = 0;  // its place in the fetch list
  };

  Evaluator(const Config& config, exec::Executor& executor)
      : config_(config), executor_(executor) {}

  const Config& config_;
  exec::Executor& executor_;
  ir::Program program_;
  std::unique_ptr<exec::PreparedProgram> prepared_;
  std::unique_ptr<data::DataSource> source_;
  std::unique_ptr<GlobalAuc> global_auc_;
  std::vector<ReportedVar> reported_;  // of the eval program, names as the training loop's
  std::vector<Statistic> stats_;
  int64_t batch_size_ = 0;
  int64_t batches_ = 0;
  // Without sharded files every trainer draws the global batch and keeps its rows, as training
  // does, so that the ranks together see each sample once.
  bool global_draw_ = false;
  int64_t rank_ = 0, trainers_ = 1;
  exec::FeedMap global_, batch_;
  exec::FeedMap counts_;  // the auc clones' statistics, by feed name
  std::vector<exec::HostTensor> fetched_;
  std::vector<double> sums_;
};

}  // namespace fleet
