// [checkpoint] as a training loop sees it: where a resumed trainer starts, and when it saves.
// The files themselves are checkpoint/'s.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "collective/communicator.h"
#include "config/config.h"
#include "executor/executor.h"
#include "job/train.h"
#include "support/status.h"

namespace fleet {

// Where this trainer stands in the job's checkpoints. Lives as long as one training loop; the
// config must outlive it.
class TrainCheckpoints {
 public:
  // `saves`: this process writes checkpoints (rank 0 of a collective job, a lone trainer).
  // `pservers` > 0: the state lives on that many servers, which save it; this trainer only
  // learns where to resume. `batch_per_next`: the samples one step draws from the source.
  TrainCheckpoints(const Config& config, std::string program_hash, int64_t world_size,
                   bool saves, int64_t pservers, int64_t batch_per_next)
      : config_(config),
        hash_(std::move(program_hash)),
        world_size_(world_size),
        saves_(saves && pservers == 0 && !config.checkpoint.dir.empty()),
        pservers_(pservers),
        batch_per_next_(batch_per_next) {}

  // Restores the newest intact checkpoint, if [checkpoint] resume and there is one, and
  // returns the first step to run (1 without one). `world`: every trainer must resume the same
  // step. The source is moved past what it had delivered, and the prepared programs' launch
  // indices continue (local_sgd: `averages(s)` says which of the two ran at step s).
  StatusOr<int64_t> Resume(TrainingSetup& setup, Communicator* world,
                           const std::function<bool(int64_t)>& averages);

  // After step `step` ran: saves when one is due. `averaged`: the step left every trainer's
  // state the same (local_sgd's in-between steps do not, so a due save waits for the next
  // averaging step). `last`: the job's final step, always saved.
  Status AfterStep(const exec::Executor& executor, int64_t step, bool averaged, bool last);

 private:
  // What the manifest says of the run that wrote it, for people reading it.
  std::string ConfigSummary() const;

  const Config& config_;
  std::string hash_;
  int64_t world_size_;
  bool saves_;
  int64_t pservers_;
  int64_t batch_per_next_;
  bool pending_ = false;
  int64_t last_saved_ = -1;
};

}  // namespace fleet
