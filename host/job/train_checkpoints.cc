#include "job/train_checkpoints.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "fleet/fleet_plugin.h"
#include "support/logging.h"

namespace fleet {

StatusOr<int64_t> TrainCheckpoints::Resume(TrainingSetup& setup, Communicator* world,
                                           const std::function<bool(int64_t)>& averages) {
  const Config::Checkpoint& c = config_.checkpoint;
  if (!c.resume || c.dir.empty()) return int64_t{1};
  std::vector<std::string> warnings;
  FLEET_ASSIGN_OR_RETURN(
      std::optional<checkpoint::LoadedCheckpoint> found,
      checkpoint::FindLatestCheckpoint(c.dir, hash_, pservers_ > 0 ? "pserver.0" : "",
                                       std::max<int64_t>(pservers_, 1), warnings));
  for (const std::string& w : warnings) Log().warn("checkpoint: {}", w);
  const int64_t step = found ? found->info.step : 0;
  if (world != nullptr) {
    int64_t range[2] = {step, -step};  // MAX of both: the largest and the smallest step
    FLEET_RETURN_IF_ERROR(
        world->AllReduceHost(range, FLEET_DTYPE_INT64, 2, FLEET_REDUCE_MAX)
            .WithContext("checkpoint resume"));
    if (range[0] != -range[1]) {
      return FailedPrecondition(
          "checkpoint resume: the trainers found different checkpoints in '" +
          c.dir.string() + "' (this one step " + std::to_string(step) + ", others up to step " +
          std::to_string(range[0]) + " and down to " + std::to_string(-range[1]) +
          "); every trainer must see the same checkpoint directory");
    }
  }
  if (!found) {
    Log().info("checkpoint: nothing to resume in {}; starting at step 1", c.dir.string());
    return int64_t{1};
  }
  const checkpoint::CheckpointInfo& info = found->info;
  if (pservers_ == 0) {
    FLEET_RETURN_IF_ERROR(checkpoint::RestoreScope(found->state, setup.executor->scope(),
                                                   "checkpoint '" + found->dir.string() + "'"));
  }
  if (info.world_size != world_size_) {
    Log().warn("checkpoint: {} was written by a job of {} trainers, this one has {}: the state "
               "is resumed, but the batches will not be those of the original job",
               found->dir.string(), info.world_size, world_size_);
  }
  // The source delivers next what it would have after the interrupted job's batches. A
  // server's shard records its rounds; the trainer knows its own batches.
  const int64_t batches = pservers_ > 0 ? step : info.data_batches;
  const int64_t batch_size = pservers_ > 0 ? batch_per_next_ : info.data_batch_size;
  // A trainer's checkpoint records one batch per step (AfterStep): a count outside [0, step]
  // cannot belong to this job, and skipping it batch by batch would not end.
  if (batches < 0 || batches > step) {
    return DataLoss("checkpoint resume: " + (found->dir / checkpoint::kManifestFile).string() +
                    ": data.batches = " + std::to_string(batches) +
                    " cannot belong to a job at step " + std::to_string(step) +
                    " (it reads one batch per step)");
  }
  last_saved_ = step;
  if (step >= config_.train.steps) {
    // Nothing is left to run (train.cc says so). Moving the data source and counting the
    // launches below take time in proportion to the step, which a manifest may put anywhere up
    // to 2^63; below train.steps they are bounded by the job itself.
    Log().info("checkpoint: resumed from {} (step {}, train.steps = {})", found->dir.string(),
               step, config_.train.steps);
    return step + 1;
  }
  if (Status s = setup.source->Skip(batches, batch_size); !s.ok()) {
    return s.WithContext("checkpoint resume: moving the data source past " +
                         std::to_string(batches) + " batches");
  }
  uint64_t main_runs = 0, local_runs = 0;
  for (int64_t s = 1; s <= step; ++s) ++(averages(s) ? main_runs : local_runs);
  setup.main->set_next_launch_index(main_runs);
  if (setup.main_local != nullptr) setup.main_local->set_next_launch_index(local_runs);
  Log().info("checkpoint: resumed from {} (step {})", found->dir.string(), step);
  return step + 1;
}

Status TrainCheckpoints::AfterStep(const exec::Executor& executor, int64_t step, bool averaged,
                                   bool last) {
  if (!saves_) return OkStatus();
  if (step % config_.checkpoint.every_steps == 0 || last) pending_ = true;
  if (!pending_ || !averaged || step == last_saved_) return OkStatus();
  const auto start = std::chrono::steady_clock::now();
  FLEET_ASSIGN_OR_RETURN(checkpoint::SafeTensors state,
                         checkpoint::SnapshotScope(executor.scope()));
  checkpoint::CheckpointInfo info;
  info.step = step;
  info.program_hash = hash_;
  info.world_size = world_size_;
  info.data_batches = step;  // one batch per step
  info.data_batch_size = batch_per_next_;
  info.config = ConfigSummary();
  FLEET_RETURN_IF_ERROR(
      checkpoint::SaveCheckpoint(config_.checkpoint.dir, info, state, config_.checkpoint.keep));
  size_t bytes = 0;
  for (const auto& t : state.tensors) bytes += t.tensor.bytes.size();
  Log().info("checkpoint: saved {} ({} vars, {:.1f} MB) in {:.3f} s",
             (config_.checkpoint.dir / checkpoint::StepDirName(step)).string(),
             state.tensors.size(), static_cast<double>(bytes) / 1e6,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  pending_ = false;
  last_saved_ = step;
  return OkStatus();
}

std::string TrainCheckpoints::ConfigSummary() const {
  const Config::Train& t = config_.train;
  return nlohmann::json{{"source", config_.source},
                        {"device", config_.device.backend},
                        {"strategy", config_.strategy_mode},
                        {"steps", t.steps},
                        {"batch_size", t.batch_size},
                        {"seed", t.seed}}
      .dump();
}

}  // namespace fleet
