// A server's part in checkpoints: its whole scope (parameter blocks, optimizer accumulators,
// learning-rate state) is one shard of a step's checkpoint, and a restarted job's servers
// restore their shards before the trainers' startups fetch the parameters.
#include "checkpoint/checkpoint.h"
#include "checkpoint/init_from.h"
#include "pserver/server_internal.h"
#include "support/logging.h"

namespace fleet {

Status PsServer::SaveCheckpoint(int64_t round) const {
  const PsServerOptions& o = options_;
  if (o.checkpoint_dir.empty() || !sync_) return OkStatus();
  if (round % o.checkpoint_every != 0 && round != o.last_round) return OkStatus();
  FLEET_ASSIGN_OR_RETURN(checkpoint::SafeTensors state,
                         checkpoint::SnapshotScope(executor_->scope()));
  FLEET_RETURN_IF_ERROR(CanonicalGrowableState(state).WithContext(label_));
  checkpoint::CheckpointInfo info;
  info.step = round;
  info.program_hash = o.program_hash;
  info.world_size = trainers_;
  info.data_batches = round;
  info.data_batch_size = o.trainer_batch;
  info.shard = "pserver." + std::to_string(pserver_id_);
  info.num_shards = o.num_servers;
  // Server 0 alone removes old checkpoints, so two servers never prune one root at once.
  FLEET_RETURN_IF_ERROR(checkpoint::SaveCheckpoint(o.checkpoint_dir, info, state,
                                                   pserver_id_ == 0 ? o.checkpoint_keep : 0)
                            .WithContext(label_));
  Log().info("{}: saved its shard of checkpoint {}", label_, checkpoint::StepDirName(round));
  return OkStatus();
}

StatusOr<int64_t> PsServer::ResumeFromCheckpoint() {
  const PsServerOptions& o = options_;
  if (!sync_) {
    return FailedPrecondition(label_ + ": checkpoints need a sync parameter-server job: in async "
                                       "mode no step is the same on every server");
  }
  std::vector<std::string> warnings;
  FLEET_ASSIGN_OR_RETURN(
      std::optional<checkpoint::LoadedCheckpoint> found,
      checkpoint::FindLatestCheckpoint(o.checkpoint_dir, o.program_hash,
                                       "pserver." + std::to_string(pserver_id_), o.num_servers,
                                       warnings));
  for (const std::string& w : warnings) Log().warn("{}: checkpoint: {}", label_, w);
  if (!found) return int64_t{0};
  const std::string where = label_ + ": checkpoint '" + found->dir.string() + "'";
  if (!growable_.empty()) {
    // The tables' indexes first: they give the vars the rows the saved values need.
    std::map<std::string, exec::HostTensor> index;
    std::vector<checkpoint::NamedTensor> rest;
    for (checkpoint::NamedTensor& t : found->state.tensors) {
      const size_t at = t.name.rfind('@');
      if (at != std::string::npos && growable_.count(t.name.substr(0, at)) != 0) {
        index.emplace(t.name, std::move(t.tensor));
      } else {
        rest.push_back(std::move(t));
      }
    }
    found->state.tensors = std::move(rest);
    FLEET_RETURN_IF_ERROR(RestoreGrowableState(index, where));
  }
  FLEET_RETURN_IF_ERROR(checkpoint::RestoreScope(found->state, executor_->scope(), where));
  std::lock_guard<std::mutex> lock(mu_);
  round_ = found->info.step;
  Log().info("{}: resumed its shard from {} (step {})", label_, found->dir.string(), round_);
  return round_;
}

StatusOr<std::vector<std::string>> PsServer::LoadInitialWeights(
    const std::filesystem::path& dir, const std::vector<const ir::Program*>& job,
    const ir::Program& startup) {
  checkpoint::RowBlocks blocks;
  for (const ir::Op& op : startup.global().ops) {
    if (op.type != "split_byref") continue;
    const ir::Attribute* attr = op.FindAttr("sections");
    const auto sections = attr != nullptr ? ir::AttrAsInts(*attr) : std::nullopt;
    const std::vector<std::string>& outs = op.Output("Out");
    if (op.Input("X").size() != 1 || !sections || sections->size() != outs.size()) {
      return Internal(label_ + ": a split_byref of the startup program has no sections that "
                               "match its outputs");
    }
    int64_t row = 0;
    for (size_t k = 0; k < outs.size(); ++k) {
      blocks[op.Input("X")[0]].push_back({outs[k], row, (*sections)[k]});
      row += (*sections)[k];
    }
  }
  auto loaded = checkpoint::LoadInitialWeightsForServer(dir, executor_->scope(), job, blocks);
  if (!loaded.ok()) return loaded.status().WithContext(label_);
  return loaded;
}

}  // namespace fleet
