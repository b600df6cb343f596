// host/checkpoint: checkpoints, safetensors, init_from, inference exports and conversions.
// Depends on: data/, executor/, ir/, ops/, support/.
//
// Checkpoints: the whole persistable state of a training job, saved every N steps so a job that
// dies can resume where it stopped and reach what an uninterrupted job reaches, bit for bit.
//
// Layout under the checkpoint root ([checkpoint] dir):
//   step_0000120/                      one committed checkpoint: 120 steps were done
//     persistables.safetensors         every persistable var (parameters, optimizer
//                                      accumulators, learning-rate state, step counters)
//     manifest.json                    format, step, program hash, config summary, the data
//                                      source's position, and each file's size and CRC-32
//   step_0000120/pserver.0/ ...        parameter-server jobs instead: one shard per server, each
//   step_0000120/pserver.1/ ...        with its own persistables and manifest; the checkpoint is
//                                      complete only when every shard is
//   latest                             the name of the newest committed checkpoint ("step_...")
//
// Commit protocol (never a torn checkpoint): the files go into a temporary directory
// (".step_0000120.tmp-PID" beside the others, or ".pserver.I.tmp-PID" inside the step), each
// written and fsynced, the manifest last; the directory is fsynced and renamed into place and
// its parent fsynced; only then is `latest` replaced (temporary file, fsync, rename) and are
// checkpoints beyond the newest `keep` removed. A process killed at any point leaves either the
// previous state or the new committed one, plus at most a temporary directory that readers
// ignore and the next writer removes.
//
// Resume scans the root rather than trusting `latest` (a crash between the rename and the
// pointer update leaves the pointer one behind): the newest step whose every file matches its
// manifest's size and checksum and parses is used; an incomplete or corrupt one is skipped with
// a warning naming what is wrong. A checkpoint of another program (its hash differs) is an
// error, not something to skip: resuming it would mix two models.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "executor/scope.h"
#include "ir/program.h"
#include "support/status.h"

namespace fleet::checkpoint {

inline constexpr int kManifestFormat = 1;
inline constexpr const char* kStateFile = "persistables.safetensors";
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kLatestFile = "latest";

// What a manifest records besides its files.
struct CheckpointInfo {
  int64_t step = 0;             // training steps completed when the state was taken
  std::string program_hash;     // ProgramHash of the job's programs
  int64_t world_size = 1;       // trainers of the job that wrote it
  // The data source's position: Next(data_batch_size) had been called data_batches times.
  int64_t data_batches = 0;
  int64_t data_batch_size = 0;
  // "" for the state of a whole job; "pserver.I" for server I's shard of num_shards.
  std::string shard;
  int64_t num_shards = 1;
  std::string config;           // a JSON summary of the config that trained it (informative)
};

// "step_0000120": at least seven digits, so names sort by step.
std::string StepDirName(int64_t step);
// The step of a "step_NNNNNNN" name, or nullopt for anything else.
std::optional<int64_t> ParseStepDirName(const std::string& name);

// A 16-hex-digit hash of the programs' text form: two jobs agree on it exactly when they train
// the same model with the same optimizer.
std::string ProgramHash(const std::vector<const ir::Program*>& programs);

// Every var of `scope`, copied to the host, in name order; sparse (SelectedRows) vars, which
// hold one round's received gradients, are left out.
StatusOr<SafeTensors> SnapshotScope(const exec::Scope& scope);

// Commits `state` as the checkpoint (or, with info.shard set, as that shard of the checkpoint)
// of info.step under `root`, following the protocol above, then keeps only the newest `keep`
// complete checkpoints (keep <= 0: all). A committed checkpoint of the same step is replaced:
// that happens only when a job resumed from an older one because this one was corrupt. Errors
// name the path and the system's reason; the previous checkpoints are intact after an error.
// Not safe to call concurrently for the same root and shard.
Status SaveCheckpoint(const std::filesystem::path& root, const CheckpointInfo& info,
                      const SafeTensors& state, int64_t keep);

// A checkpoint found for resuming.
struct LoadedCheckpoint {
  std::filesystem::path dir;  // the step directory (or the shard's directory)
  CheckpointInfo info;
  SafeTensors state;
};

// The newest complete and intact checkpoint under `root` written by programs of hash
// `program_hash`; for `shard` "pserver.I", that shard of the newest step whose `num_shards`
// shards are all intact. nullopt when there is none (a root that does not exist has none).
// Each skipped checkpoint adds a line to `warnings` ("step_0000120: persistables.safetensors:
// checksum mismatch (...); using an older checkpoint"). Stale temporary directories are
// ignored. Errors: a root that is not a directory, or a checkpoint of other programs.
StatusOr<std::optional<LoadedCheckpoint>> FindLatestCheckpoint(
    const std::filesystem::path& root, const std::string& program_hash,
    const std::string& shard, int64_t num_shards, std::vector<std::string>& warnings);

// Checks one checkpoint directory (a step directory of a whole job, or one shard's) against
// its manifest and reads it. Errors say what is missing, truncated or corrupt.
StatusOr<LoadedCheckpoint> ReadCheckpointDir(const std::filesystem::path& dir);

// Writes `state` into `scope`, which must hold exactly the same vars (sparse ones aside, as
// SnapshotScope leaves them out) with the same dtypes and shapes: anything else is an error
// listing the missing, extra and mismatched vars (and `where`), and the scope is left as it was. The caller does not use the scope concurrently.
Status RestoreScope(const SafeTensors& state, exec::Scope& scope, const std::string& where);

}  // namespace fleet::checkpoint
