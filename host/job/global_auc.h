// The AUC a job of several trainers reports (collective, or parameter-server workers with a ring
// of their own): that of the whole data, not the mean of the trainers'.
//
// Each trainer's auc op counts its own shard into its bucket statistics (StatPos/StatNeg,
// persistable int64 histograms: plugins/common/metric_formulas.h), so the AUC it outputs is
// its shard's, and the mean of those AUCs is not the AUC of the union (AUC is not additive).
// The counts are: summed over trainers, the histograms are exactly those one process would
// have built from all the rows. So for a reported var that is the AUC output of an auc op,
// each logged step all-reduces (sums) that op's statistics and computes the AUC from the sums.
//
// The area is computed by the auc op itself, not by a second copy of its formula: a prepared
// one-op program runs it on the summed histograms with an empty batch (Predict [0, 2], Label
// [0, 1]), which counts nothing and outputs the AUC of the histograms it is given. For an op
// with slide_steps > 0 (Paddle's batch AUC) only the window's sum histogram is all-reduced and
// the one-op program has slide_steps 0: with a window, an empty batch would slide it.
//
// The trainers' own statistics are read, never written: the summed histograms are feeds of
// the one-op program, whose vars live in its own arena, so every trainer keeps counting its
// shard and its checkpoints hold its own counts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "executor/executor.h"
#include "executor/tensor.h"
#include "ir/program.h"
#include "job/metrics.h"
#include "support/status.h"

namespace fleet {

class GlobalAuc {
 public:
  // Finds, among `reported`, the vars that are the AUC output of an auc op of `main` (the
  // trainer's main program) and prepares the one-op program for each on `executor` (which
  // must outlive this). The others are not this class's: they keep the mean over trainers.
  // INVALID_ARGUMENT naming the reported var when its auc op's attributes are unusable.
  static StatusOr<std::unique_ptr<GlobalAuc>> Create(exec::Executor& executor,
                                                     const ir::Program& main,
                                                     const std::vector<ReportedVar>& reported);

  // Whether reported var `index` is an AUC this class computes.
  bool Covers(size_t index) const;

  // Every rank of `world` must call this at the same steps (one all-reduce of int64 sums for
  // all the covered vars together). Sets metrics[index] of each covered var to the AUC of the
  // summed statistics; the other entries are left as they are. The statistics are read from
  // the scope, or from `stats` (by the names of the auc ops' StatPosOut/StatNegOut) when given.
  Status Compute(Communicator& world, std::vector<double>& metrics,
                 const std::map<std::string, exec::HostTensor>* stats = nullptr);

  // The same for the devices of one process (strategy.collective_mode
  // "single_process_multi_thread"): the statistics of every scope in `scopes` (each device's,
  // all prepared with `main`) summed on the host, with no communicator.
  Status ComputeOverDevices(const std::vector<const exec::Scope*>& scopes,
                            std::vector<double>& metrics);

 private:
  struct Entry {
    size_t index = 0;          // in the reported vars
    std::string what;          // how errors name the reported var
    std::string stat_pos, stat_neg;  // the trainer's statistics vars
    int64_t buckets = 0;       // num_thresholds + 1
    int64_t offset = 0;        // of the histogram the AUC is computed from
    std::unique_ptr<ir::Program> program;  // the one-op program (stays where prepared)
    std::unique_ptr<exec::PreparedProgram> prepared;
    exec::FeedMap feeds;       // storage reused from step to step
  };

  explicit GlobalAuc(exec::Executor& executor) : executor_(executor) {}
  // Adds the covered ops' histograms, from `stats` or else read from `scope`, into sums_.
  Status Add(const exec::Scope& scope, const std::map<std::string, exec::HostTensor>* stats);
  // Sets each covered metric to the AUC its auc op computes from sums_.
  Status FromSums(std::vector<double>& metrics);

  exec::Executor& executor_;
  std::vector<Entry> entries_;
  std::vector<int64_t> sums_;  // every entry's pos then neg histogram, in entry order
  std::vector<exec::HostTensor> fetched_;
};

}  // namespace fleet
